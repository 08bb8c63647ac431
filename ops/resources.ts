// Operator CLI: finds the stack's resources (queues, functions, schedules, tables) from the deployed stack's outputs or
// from the local runtime's `.local/endpoints.json`; every command works from the StackResources this returns.
import { readFile } from 'node:fs/promises';
import { CloudFormationClient, DescribeStacksCommand, type Output } from '@aws-sdk/client-cloudformation';
import { z } from 'zod';
import { JobOutput, type JobOutputKind, jobOutputName, StackOutput, stackName } from '../lib/outputs';
import type { EnvironmentConfig } from '../lib/config/schema';
import { type CallerIdentity, checkCallerAccount, environmentConfig, environmentRegion, stsIdentity } from './environment';
import { ResourceDiscoveryError } from './errors';

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

export type AwsService = 'sqs' | 'dynamodb' | 'lambda' | 'scheduler' | 'sns' | 'secretsmanager' | 'cloudwatch';

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
}

/** One way of finding the stack; the commands do not know which. */
export interface ResourceSource {
  /** For messages: `stack PacedJobs-prod` or `.local/endpoints.json`. */
  readonly description: string;
  /** The job names known without an AWS call (a deployed environment's config), to refuse a bad --job early. */
  declaredJobs?(): string[];
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
    const fields = Object.fromEntries(Object.entries(JOB_FIELDS).map(([field, kind]) => [field, need(jobOutputName(job, kind))]));
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

export interface CloudFormationSourceOptions {
  environment: string;
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
 * The deployed stack `PacedJobs-<env>`, read with DescribeStacks in the environment's region (lib/config names it;
 * environmentRegion says which applies), after refusing credentials for another account than the one config pins.
 */
export class CloudFormationSource implements ResourceSource {
  public readonly description: string;
  private readonly stackName: string;
  private readonly config: EnvironmentConfig;

  /** @throws UsageError for an environment lib/config does not have. */
  constructor(private readonly options: CloudFormationSourceOptions) {
    this.stackName = stackName(options.environment);
    this.description = `stack ${this.stackName}`;
    this.config = options.config ?? environmentConfig(options.environment);
  }

  /** The jobs the environment's config declares: a bad --job is refused before any AWS call. */
  declaredJobs(): string[] {
    return Object.keys(this.config.jobs).sort();
  }

  async load(): Promise<StackResources> {
    const region = await environmentRegion(this.config, this.options.sdkRegion);
    const identity = this.options.identity ?? (() => stsIdentity(region));
    // Only a pinned account can be checked; without one, the caller's account is the environment's by definition.
    const caller = this.config.account ? await checkCallerAccount(this.options.environment, this.config, identity) : undefined;
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
      ...(caller ? { accountId: caller.account } : this.config.account ? { accountId: this.config.account } : {}),
      environment: this.options.environment,
      ...(this.config.protected ? { protected: true } : {}),
      // Without a pinned account the caller's is the environment's; STS is asked only when a change's prompt names it.
      ...(caller || this.config.account ? {} : { callerAccount: async () => (await identity()).account }),
      ...resourcesFromOutputs(this.description, jobNamesFromOutputs(outputs), values),
      clients: { region },
    };
  }
}

/** The part of `.local/endpoints.json` (written by `npm start -- --serve`, see local/run.ts) the CLI reads. */
const endpointsFileSchema = z.object({
  stackName: z.string().min(1),
  region: z.string().min(1),
  accountId: z.string().optional(),
  credentials: z.object({ accessKeyId: z.string(), secretAccessKey: z.string() }),
  // cloudwatch: the session's local CloudWatch API (ops/metrics.ts); optional, as a file from before it lacks it.
  endpoints: z.object({ dynamodb: z.url(), sqs: z.url(), lambda: z.url(), scheduler: z.url(), secretsmanager: z.url().optional(), sns: z.url().optional(), cloudwatch: z.url().optional() }),
  jobs: z.record(z.string(), z.unknown()),
  outputs: z.record(z.string(), z.string()),
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
      throw new ResourceDiscoveryError(`${this.file} is not JSON: ${(error as Error).message}`, this.file, { cause: error });
    }
    const parsed = endpointsFileSchema.safeParse(raw);
    if (!parsed.success) {
      const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
      throw new ResourceDiscoveryError(`${this.file} is not a local endpoints file: ${problems.join('; ')}`, this.file);
    }
    const doc = parsed.data;
    return {
      source: 'local',
      stackName: doc.stackName,
      region: doc.region,
      ...(doc.accountId ? { accountId: doc.accountId } : {}),
      ...resourcesFromOutputs(this.file, Object.keys(doc.jobs), doc.outputs),
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
        },
      },
    };
  }
}
