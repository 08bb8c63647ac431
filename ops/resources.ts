// Operator CLI: finds the stack's resources (queues, functions, schedules, tables) from the deployed stack's outputs or
// from the local runtime's `.local/endpoints.json`; every command works from the StackResources this returns.
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  CloudFormationClient,
  DescribeStacksCommand,
  GetTemplateCommand,
  type Output,
} from '@aws-sdk/client-cloudformation';
import { z } from 'zod';
import { JobOutput, type JobOutputKind, jobOutputName, StackOutput, stackName } from '../lib/outputs';
import type { EnvironmentConfig } from '../lib/config/schema';
import {
  type CallerIdentity,
  checkCallerAccount,
  environmentConfig,
  environmentRegion,
  stsIdentity,
} from './environment';
import { ResourceDiscoveryError, UsageError } from './errors';
import { JOB_ENTRY_METADATA } from '../lambda/core/constants';
import { describeIssues } from '../lambda/core/issues';

// One key, written by the construct and read by the local tools and ops (lambda/core/constants.ts).
export { JOB_ENTRY_METADATA };

/** What the CLI needs to operate one job. */
export interface JobResources {
  job: string;
  queueUrl: string;
  queueArn: string;
  dlqUrl: string;
  dlqArn: string;
  producerFunctionName: string;
  consumerFunctionName: string;
  scheduleName: string;
  /** The EventBridge Scheduler group the schedule is in. */
  scheduleGroupName: string;
  /** The consumer's event source mapping, on the work queue. */
  eventSourceMappingUuid: string;
  /** The producer's admission queue: each run's next step waits there, delayed until due. */
  admissionQueueUrl: string;
  admissionQueueArn: string;
  /** The producer's event source mapping on the admission queue; disabling it stops admission. */
  admissionMappingUuid: string;
}

export type AwsService = 'sqs' | 'dynamodb' | 'lambda' | 'scheduler' | 'sns' | 'secretsmanager' | 'cloudwatch' | 's3';

/** How to build an SDK client for the stack: the AWS defaults for a deployed stack, explicit endpoints for a local one. */
export interface ClientSettings {
  region?: string;
  endpoints?: Partial<Record<AwsService, string>>;
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

export interface StackResources {
  source: 'cloudformation' | 'local';
  stackName: string;
  region?: string;
  /** The stack's account, where known (config pins it, or the local runtime's). */
  accountId?: string;
  /** The environment's name (`--env`); absent for the local stack. */
  environment?: string;
  /** The environment's config marks it protected: changes need `--confirm <env>`. Never set for the local stack. */
  protected?: boolean;
  /** The caller's account, asked of STS when a change names it; set when the config pins no account. */
  callerAccount?: () => Promise<string>;
  /**
   * The runtime's tables. `limiter` (output LimiterTableName) holds the rate limiters' state and each job's per-key
   * overrides; only the `limits` commands need it, so a stack without the output still loads (they refuse it then).
   */
  tables: { idempotency: string; ledger: string; limiter?: string };
  /** The SNS topic every alarm notifies; absent from a stack deployed without the output. */
  alarmTopicArn?: string;
  /** Sorted by job name. */
  jobs: JobResources[];
  clients: ClientSettings;
  /**
   * Each job's code entry as its functions' `paced-jobs:job-entry` Metadata names it (relative to the CDK app's
   * folder), read from the stack's template when asked: only preflight runs job code. A job without it is absent.
   */
  jobEntries?: () => Promise<Record<string, string>>;
}

/** One way of finding the stack; the commands do not know which. */
export interface ResourceSource {
  /** For messages: `stack PacedJobs-prod` or `.local/endpoints.json`. */
  readonly description: string;
  /** The job names known without an AWS call (a deployed environment's config), to refuse a bad --job early. */
  declaredJobs?(): string[] | undefined;
  load(): Promise<StackResources>;
}

const JOB_FIELDS: Record<Exclude<keyof JobResources, 'job'>, JobOutputKind> = {
  queueUrl: 'QueueUrl',
  queueArn: 'QueueArn',
  dlqUrl: 'DlqUrl',
  dlqArn: 'DlqArn',
  producerFunctionName: 'ProducerFunctionName',
  consumerFunctionName: 'ConsumerFunctionName',
  scheduleName: 'ScheduleName',
  scheduleGroupName: 'ScheduleGroupName',
  eventSourceMappingUuid: 'EventSourceMappingUuid',
  admissionQueueUrl: 'AdmissionQueueUrl',
  admissionQueueArn: 'AdmissionQueueArn',
  admissionMappingUuid: 'AdmissionMappingUuid',
};

/**
 * Builds the resources from the stack outputs lib/outputs.ts names. Every missing output is named in one error, so an
 * operator running against an older stack sees at once what it lacks.
 * @throws ResourceDiscoveryError when an output is missing or no job is found.
 */
export function resourcesFromOutputs(
  source: string,
  jobNames: string[],
  outputs: Record<string, string | undefined>,
): Pick<StackResources, 'tables' | 'jobs' | 'alarmTopicArn'> {
  const missing: string[] = [];
  const need = (key: string): string => {
    const value = outputs[key];
    if (value === undefined || value === '') missing.push(key);
    return value ?? '';
  };
  if (jobNames.length === 0) throw new ResourceDiscoveryError(`${source} describes no jobs`, source);
  const limiter = outputs[StackOutput.LimiterTableName];
  const tables = {
    idempotency: need(StackOutput.IdempotencyTableName),
    ledger: need(StackOutput.LedgerTableName),
    ...(limiter ? { limiter } : {}),
  };
  const jobs = [...jobNames].sort().map((job) => {
    const fields = Object.fromEntries(
      Object.entries(JOB_FIELDS).map(([field, kind]) => [field, need(jobOutputName(job, kind))]),
    );
    return { job, ...fields } as JobResources;
  });
  if (missing.length > 0) throw new ResourceDiscoveryError(`${source} lacks the outputs ${missing.join(', ')}`, source);
  const alarmTopicArn = outputs[StackOutput.AlarmTopicArn];
  return { tables, jobs, ...(alarmTopicArn ? { alarmTopicArn } : {}) };
}

/**
 * The job names a deployed stack holds. The stack gives each per-job output the description `<job>: <Kind>`; a name
 * counts only when the output key agrees with it, so an unrelated output cannot invent a job.
 */
export function jobNamesFromOutputs(outputs: Output[]): string[] {
  const names = new Set<string>();
  for (const output of outputs) {
    const match = /^(.+): (\w+)$/.exec(output.Description ?? '');
    if (!match || !(match[2] in JobOutput)) continue;
    if (output.OutputKey === jobOutputName(match[1], match[2] as JobOutputKind)) names.add(match[1]);
  }
  return [...names];
}

/** The template of a stack, as far as jobEntriesFromTemplate reads it. */
interface TemplateDocument {
  Resources?: Record<
    string,
    {
      Type?: string;
      Metadata?: Record<string, unknown>;
      Properties?: { Environment?: { Variables?: Record<string, unknown> } };
    }
  >;
}

/**
 * Each job's entry from a synthesized or deployed template: the `paced-jobs:job-entry` Metadata of the functions
 * whose JOB_NAME is the job (its producer and consumer, which the construct gives the same entry).
 * @throws ResourceDiscoveryError when a job's functions name two different entries.
 */
export function jobEntriesFromTemplate(source: string, template: unknown): Record<string, string> {
  const entries: Record<string, string> = {};
  for (const [id, resource] of Object.entries((template as TemplateDocument | undefined)?.Resources ?? {})) {
    const entry = resource.Metadata?.[JOB_ENTRY_METADATA];
    const job = resource.Properties?.Environment?.Variables?.JOB_NAME;
    if (resource.Type !== 'AWS::Lambda::Function' || typeof entry !== 'string' || typeof job !== 'string') continue;
    if (entries[job] !== undefined && entries[job] !== entry) {
      throw new ResourceDiscoveryError(
        `${source}: the functions of job ${job} name two entries, ${entries[job]} and ${entry} (${id})`,
        source,
      );
    }
    entries[job] = entry;
  }
  return entries;
}

export interface CloudFormationSourceOptions {
  /** An environment of this repository's config (lib/config): its stack is `PacedJobs-<env>`. Give it or `stackName`. */
  environment?: string;
  /** A team's stack, by name (`--stack`): no config, so the region is the SDK's and no account is pinned. */
  stackName?: string;
  /** @default the environment's config from lib/config (an unknown environment is a UsageError) */
  config?: EnvironmentConfig;
  /** @default a CloudFormationClient in the environment's region with the SDK's default credentials */
  client?: Pick<CloudFormationClient, 'send'>;
  /** The SDK's own region, when it has one. @default the SDK's region chain (AWS_REGION, the profile) */
  sdkRegion?: () => Promise<string | undefined>;
  /** Who the credentials are. @default STS GetCallerIdentity in the environment's region */
  identity?: () => Promise<CallerIdentity>;
}

/**
 * A deployed stack, read with DescribeStacks: this repository's `PacedJobs-<env>` in the environment's region
 * (lib/config names it; environmentRegion says which applies), after refusing credentials for another account than
 * the one config pins; or a team's stack by name (`--stack`) in the SDK's region.
 */
export class CloudFormationSource implements ResourceSource {
  public readonly description: string;
  private readonly stackName: string;
  /** Absent for a stack named by `stackName`. */
  private readonly config?: EnvironmentConfig;

  /** @throws UsageError for an environment lib/config does not have, or neither an environment nor a stack name. */
  constructor(private readonly options: CloudFormationSourceOptions) {
    if (options.environment !== undefined) {
      this.stackName = stackName(options.environment);
      this.config = options.config ?? environmentConfig(options.environment);
    } else if (options.stackName !== undefined && options.stackName !== '') {
      this.stackName = options.stackName;
    } else {
      throw new UsageError(
        "a deployed stack needs --env <name> (this repository's PacedJobs-<name>) or --stack <name>",
      );
    }
    this.description = `stack ${this.stackName}`;
  }

  /** The jobs the environment's config declares: a bad --job is refused before any AWS call. */
  declaredJobs(): string[] | undefined {
    return this.config ? Object.keys(this.config.jobs).sort() : undefined;
  }

  /** The environment's region as environmentRegion decides it; a named stack's is the SDK's own. */
  private async region(): Promise<string> {
    if (this.config) return environmentRegion(this.config, this.options.sdkRegion);
    const region = await (this.options.sdkRegion ?? defaultSdkRegion)();
    if (region === undefined) {
      throw new UsageError(
        `no region to find ${this.description} in: set AWS_REGION (or a region in your AWS profile)`,
      );
    }
    return region;
  }

  async load(): Promise<StackResources> {
    const region = await this.region();
    const identity = this.options.identity ?? (() => stsIdentity(region));
    const config = this.config;
    // Only a pinned account can be checked; without one, the caller's account is the environment's by definition.
    const caller = config?.account
      ? await checkCallerAccount(this.options.environment ?? '', config, identity)
      : undefined;
    const client = this.options.client ?? new CloudFormationClient({ region });
    let outputs: Output[];
    try {
      const response = await client.send(new DescribeStacksCommand({ StackName: this.stackName }));
      outputs = response.Stacks?.[0]?.Outputs ?? [];
    } catch (error) {
      const detail = (error as Error).message;
      throw new ResourceDiscoveryError(
        `cannot read ${this.description} in ${region}: ${detail} (is it deployed in this account and region? use --local for the local stack)`,
        this.description,
        { cause: error },
      );
    } finally {
      if (!this.options.client) (client as CloudFormationClient).destroy();
    }
    const values = Object.fromEntries(outputs.map((o) => [o.OutputKey ?? '', o.OutputValue]));
    return {
      source: 'cloudformation',
      stackName: this.stackName,
      region,
      ...(caller ? { accountId: caller.account } : config?.account ? { accountId: config.account } : {}),
      ...(this.options.environment !== undefined ? { environment: this.options.environment } : {}),
      ...(config?.protected ? { protected: true } : {}),
      // Without a pinned account the caller's is the environment's; STS is asked only when a change's prompt names it.
      ...(caller || config?.account ? {} : { callerAccount: async () => (await identity()).account }),
      ...resourcesFromOutputs(this.description, jobNamesFromOutputs(outputs), values),
      clients: { region },
      jobEntries: () => this.deployedJobEntries(region),
    };
  }

  /** The job entries of the deployed template (GetTemplate, as deployed: the Metadata is kept there). */
  private async deployedJobEntries(region: string): Promise<Record<string, string>> {
    const client = this.options.client ?? new CloudFormationClient({ region });
    try {
      const answer = await client.send(
        new GetTemplateCommand({ StackName: this.stackName, TemplateStage: 'Original' }),
      );
      let template: unknown;
      try {
        template = JSON.parse(answer.TemplateBody ?? '{}');
      } catch (error) {
        throw new ResourceDiscoveryError(
          `${this.description}: its template is not JSON (${(error as Error).message})`,
          this.description,
          { cause: error },
        );
      }
      return jobEntriesFromTemplate(this.description, template);
    } finally {
      if (!this.options.client) (client as CloudFormationClient).destroy();
    }
  }
}

/** The SDK's default region chain (environment, shared config file); undefined when none is set. */
async function defaultSdkRegion(): Promise<string | undefined> {
  const client = new CloudFormationClient({});
  try {
    return await client.config.region();
  } catch {
    return undefined; // "Region is missing"
  } finally {
    client.destroy();
  }
}

/** The part of `.local/endpoints.json` (written by `npm start -- --serve`, see local/run.ts) the CLI reads. */
const endpointsFileSchema = z.object({
  stackName: z.string().min(1),
  region: z.string().min(1),
  accountId: z.string().optional(),
  credentials: z.object({ accessKeyId: z.string(), secretAccessKey: z.string() }),
  // cloudwatch: the session's local CloudWatch API (ops/metrics.ts); optional, as a file from before it lacks it.
  endpoints: z.object({
    dynamodb: z.url(),
    sqs: z.url(),
    lambda: z.url(),
    scheduler: z.url(),
    secretsmanager: z.url().optional(),
    sns: z.url().optional(),
    cloudwatch: z.url().optional(),
    s3: z.url().optional(),
  }),
  jobs: z.record(z.string(), z.unknown()),
  outputs: z.record(z.string(), z.string()),
  // The synthesized template the local stack runs, where the run names it; else cdk.out/<stack>.template.json beside
  // the endpoints file's folder (the app's), which is where `start` synthesizes by default.
  templateFile: z.string().optional(),
});

/** The local stack `npm start -- --serve` runs; its endpoints file also points every SDK client at it. */
export class LocalEndpointsSource implements ResourceSource {
  public readonly description: string;

  constructor(private readonly file: string) {
    this.description = file;
  }

  async load(): Promise<StackResources> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (error) {
      throw new ResourceDiscoveryError(
        `cannot read ${this.file}: ${(error as Error).message} (start the local stack with \`npm start -- --serve\` first)`,
        this.file,
        { cause: error },
      );
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (error) {
      throw new ResourceDiscoveryError(`${this.file} is not JSON: ${(error as Error).message}`, this.file, {
        cause: error,
      });
    }
    const parsed = endpointsFileSchema.safeParse(raw);
    if (!parsed.success) {
      const problems = describeIssues(parsed.error);
      throw new ResourceDiscoveryError(`${this.file} is not a local endpoints file: ${problems.join('; ')}`, this.file);
    }
    const doc = parsed.data;
    return {
      source: 'local',
      stackName: doc.stackName,
      region: doc.region,
      ...(doc.accountId ? { accountId: doc.accountId } : {}),
      ...resourcesFromOutputs(this.file, Object.keys(doc.jobs), doc.outputs),
      jobEntries: () =>
        this.localJobEntries(
          doc.templateFile ?? join(dirname(this.file), '..', 'cdk.out', `${doc.stackName}.template.json`),
        ),
      clients: {
        region: doc.region,
        credentials: doc.credentials,
        endpoints: {
          dynamodb: doc.endpoints.dynamodb,
          sqs: doc.endpoints.sqs,
          lambda: doc.endpoints.lambda,
          scheduler: doc.endpoints.scheduler,
          ...(doc.endpoints.secretsmanager ? { secretsmanager: doc.endpoints.secretsmanager } : {}),
          ...(doc.endpoints.sns ? { sns: doc.endpoints.sns } : {}),
          ...(doc.endpoints.cloudwatch ? { cloudwatch: doc.endpoints.cloudwatch } : {}),
          ...(doc.endpoints.s3 ? { s3: doc.endpoints.s3 } : {}),
        },
      },
    };
  }

  /** The job entries of the template the local stack runs. */
  private async localJobEntries(templateFile: string): Promise<Record<string, string>> {
    let template: unknown;
    try {
      template = JSON.parse(await readFile(templateFile, 'utf8'));
    } catch (error) {
      throw new ResourceDiscoveryError(
        `cannot read the local stack's template ${templateFile}: ${(error as Error).message}`,
        this.file,
        { cause: error },
      );
    }
    return jobEntriesFromTemplate(templateFile, template);
  }
}
