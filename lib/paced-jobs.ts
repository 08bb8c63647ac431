// The construct a team adds to its own stack: everything one environment's jobs need (state tables, schedule group,
// per job the schedule, producer, queues and consumer, the alarms and dashboard, the stack outputs the tools read).
import { existsSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { Aws, CfnOutput, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct, type IConstruct } from 'constructs';
import { z } from 'zod';
import { describeIssues } from '../lambda/core/issues';
import type { BucketMode, TableMode } from './config/access';
import {
  addJobRuleIssues,
  BUCKET_MODE_NAMES,
  environmentSchema,
  JOB_NAME_PATTERN,
  JOB_NAME_RULE,
  jobSchema,
  TABLE_MODE_NAMES,
  useSchema,
} from './config/schema';
import { Monitoring } from './monitoring';
import { type JobOutputKind, jobOutputDescription, jobOutputName, pascalCase, StackOutput } from './outputs';
import { LocalBundlingError, VALID_LOG_RETENTION_DAYS } from './paced-function';
import { PacedJob, planPacedJob } from './paced-job';
import { assertNoProblems } from './props-error';
import { StateTables } from './state-tables';

/** EventBridge Scheduler's rule for a schedule group's name. */
export const SCHEDULE_GROUP_NAME_PATTERN = /^[0-9a-zA-Z\-_.]{1,64}$/;

/**
 * The environment's schedule group, `paced-jobs-<environmentName>` (e.g. `paced-jobs-prod`): every job's schedule is in
 * it, so the Scheduler alarms (which Scheduler can only scope to a group) watch this environment's schedules alone.
 */
export function scheduleGroupName(environmentName: string): string {
  return `paced-jobs-${environmentName}`;
}

/** Why an environment name cannot name a schedule group, or undefined when it can. */
export function scheduleGroupNameProblem(environmentName: string): string | undefined {
  const groupName = scheduleGroupName(environmentName);
  return SCHEDULE_GROUP_NAME_PATTERN.test(groupName)
    ? undefined
    : `"${environmentName}" makes the schedule group name "${groupName}"; Scheduler allows 1-64 characters of 0-9, a-z, A-Z, "-", "_" and "."`;
}

/** A table a job uses, and how: `access`, or `discover` and/or `apply` (lib/config/access.ts lists each mode's actions). */
export interface TableUse {
  /** The table: one the app creates (`Table`, `TableV2`) or imports (`Table.fromTableName`, `fromTableAttributes`). */
  readonly table: dynamodb.ITable;
  /**
   * The modes of both functions, shorthand for `discover` and `apply`: the consumer gets them all, the producer those
   * that only read (`readwrite` reads as `read`). Give either this, or `discover` and/or `apply`.
   */
  readonly access?: TableMode | TableMode[];
  /** The producer's modes (its discovery). */
  readonly discover?: TableMode | TableMode[];
  /** The consumer's modes (its apply). */
  readonly apply?: TableMode | TableMode[];
  /**
   * The table's secondary indexes the job may Query or Scan, by name: those actions of its modes are granted on
   * `<table>/index/<name>` for each, never on `index/*`. @default none (Query and Scan on the table alone)
   */
  readonly indexes?: string[];
}

/** A bucket a job uses, and how (ListBucket on the bucket, the other actions on its objects). */
export interface BucketUse {
  /** The bucket: one the app creates or imports (`Bucket.fromBucketName`). */
  readonly bucket: s3.IBucket;
  /** The modes of both functions, shorthand for `discover` and `apply` (the producer gets those that only read). */
  readonly access?: BucketMode | BucketMode[];
  /** The producer's modes. */
  readonly discover?: BucketMode | BucketMode[];
  /** The consumer's modes. */
  readonly apply?: BucketMode | BucketMode[];
}

/** A secret the job's consumer reads (GetSecretValue and DescribeSecret on it alone). */
export interface SecretUse {
  /** The secret: one the app creates or imports (`Secret.fromSecretNameV2`). */
  readonly secret: secretsmanager.ISecret;
}

/**
 * What a job may touch, by the alias its code uses: each function is granted exactly its modes' actions, and both
 * receive the physical names in JOB_SETTINGS under the same aliases (`JobSettingsReader.table('<alias>')`).
 */
export interface JobUses {
  /** @default none */
  readonly tables?: Record<string, TableUse>;
  /** @default none */
  readonly buckets?: Record<string, BucketUse>;
  /** @default none */
  readonly secrets?: Record<string, SecretUse>;
}

/**
 * One job: the settings of the reference app's job config (lib/config/schema.ts `jobSchema`: the same keys, defaults
 * and rules), its code's `entry`, and the constructs it `uses`.
 */
export interface JobProps extends Omit<z.input<typeof jobSchema>, 'uses'> {
  /**
   * The path of the job's module, which exports `job = defineJob(...)` (as `NodejsFunction`'s `entry`: absolute, or
   * relative to the CDK app's folder). It is bundled into the job's producer and consumer, and its folder is where
   * the local tools look for the job's fixture (`local.ts`). The `job` export is checked at synthesis without running
   * the module, so export it by name (`export const job = ...` or `export { job } from './job'`, not `export *`).
   */
  readonly entry: string;
  /** The tables, buckets and secrets the job touches. @default none */
  readonly uses?: JobUses;
}

/** Props of PacedJobs: the jobs, and what every job of the stack shares. */
export interface PacedJobsProps
  extends Pick<z.input<typeof environmentSchema>, 'alarmEmail' | 'logRetentionDays' | 'retainData' | 'operatorRoles'> {
  /** The jobs by name: kebab-case, 3 to 32 characters; each job's `job` export must carry its name. At least one. */
  readonly jobs: Record<string, JobProps>;
  /**
   * Names the schedule group (`paced-jobs-<environmentName>`) and appears in the alarm topic's name and the runbook
   * lines of the alarms. @default the stack's name
   */
  readonly environmentName?: string;
  /**
   * The operator CLI as your on-call engineer runs it where this app lives: the alarms' descriptions and the dashboard
   * give it with the command to run first, e.g. `npx paced-jobs ops status --stack <this stack> --job <job>`.
   * @default 'npx paced-jobs ops'
   */
  readonly operatorCommand?: string;
}

const isConstructWith = (value: unknown, keys: string[]): boolean =>
  typeof value === 'object' && value !== null && Construct.isConstruct(value) && keys.every((key) => key in value);

const tableSchema = z.custom<dynamodb.ITable>((v) => isConstructWith(v, ['tableArn', 'tableName']), {
  message: 'must be a DynamoDB table construct (an ITable: Table, TableV2, Table.fromTableName)',
});
const bucketSchema = z.custom<s3.IBucket>((v) => isConstructWith(v, ['bucketArn', 'bucketName', 'arnForObjects']), {
  message: 'must be an S3 bucket construct (an IBucket: Bucket, Bucket.fromBucketName)',
});
const secretSchema = z.custom<secretsmanager.ISecret>(
  (v) => isConstructWith(v, ['secretArn', 'secretName', 'grantRead']),
  {
    message: 'must be a Secrets Manager secret construct (an ISecret: Secret, Secret.fromSecretNameV2)',
  },
);
const INDEX_NAME = /^[A-Za-z0-9_.-]{3,255}$/;

/** `uses` with constructs where the reference app's config has refs; the modes and their messages are config's own. */
const usesPropsSchema = z.object({
  tables: z
    .record(
      z.string(),
      useSchema(TABLE_MODE_NAMES, {
        table: tableSchema,
        indexes: z
          .array(
            z
              .string()
              .regex(INDEX_NAME, 'must be a DynamoDB index name (3-255 characters of a-z, A-Z, 0-9, "_", "-" and ".")'),
          )
          .default([]),
      }),
    )
    .default({}),
  buckets: z.record(z.string(), useSchema(BUCKET_MODE_NAMES, { bucket: bucketSchema })).default({}),
  secrets: z.record(z.string(), z.object({ secret: secretSchema })).default({}),
});

/**
 * Why `entry` cannot be a job's module, or undefined when it can: it must be a file whose exports, read without
 * running it (esbuild parses it, bundling nothing), include `job`. A CommonJS file has no static export list; there
 * an assignment to `exports.job` is looked for.
 */
export function jobEntryProblem(entry: string): string | undefined {
  const file = path.resolve(entry);
  if (!existsSync(file) || !statSync(file).isFile()) {
    return `"${entry}" is not a file: give the path of the job's module, which exports \`job = defineJob(...)\``;
  }
  let esbuild: typeof import('esbuild');
  try {
    // esbuild bundles the functions too, so it is installed wherever the app synthesizes (PacedFunction checks it).
    esbuild = require('esbuild') as typeof import('esbuild');
  } catch (error) {
    throw new LocalBundlingError(file, { cause: error });
  }
  let metafile: import('esbuild').Metafile;
  try {
    metafile = esbuild.buildSync({
      entryPoints: [file],
      bundle: false,
      write: false,
      metafile: true,
      logLevel: 'silent',
    }).metafile;
  } catch (error) {
    const first = (error as { errors?: { text: string; location?: { line: number } | null }[] }).errors?.[0];
    return `"${entry}" cannot be parsed: ${first ? `${first.text}${first.location ? ` (line ${first.location.line})` : ''}` : (error as Error).message}`;
  }
  const [output] = Object.values(metafile.outputs);
  const [input] = Object.values(metafile.inputs);
  if (output.exports.includes('job')) return undefined;
  if (
    input.format !== 'esm' &&
    /\bexports\.job\s*=|defineProperty\(\s*exports\s*,\s*["']job["']/.test(readFileSync(file, 'utf8'))
  )
    return undefined;
  const found = output.exports.length > 0 ? ` (it exports ${output.exports.join(', ')})` : '';
  return `"${entry}" exports no \`job\`${found}: a job's module exports \`export const job = defineJob({ ... })\``;
}

const entrySchema = z
  .string()
  .min(1, "must be the path of the job's module")
  .superRefine((entry, ctx) => {
    const problem = jobEntryProblem(entry);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/**
 * One job's props: `entry` (first, so its problem is named first), then config's `jobSchema` with `uses` taking
 * constructs, and config's rules between a job's keys. Parsed, `entry` is absolute.
 */
export const jobPropsSchema = z
  .object({
    entry: entrySchema.transform((entry) => path.resolve(entry)),
    ...jobSchema.shape,
    uses: usesPropsSchema.prefault({}),
  })
  .superRefine((job, ctx) => addJobRuleIssues(job, ctx, []));

export type ParsedJobProps = z.output<typeof jobPropsSchema>;

const logRetentionSchema = environmentSchema.shape.logRetentionDays.pipe(
  z.number().superRefine((days, ctx) => {
    if (!VALID_LOG_RETENTION_DAYS.includes(days)) {
      ctx.addIssue({ code: 'custom', message: `must be one of ${VALID_LOG_RETENTION_DAYS.join(', ')} (got ${days})` });
    }
  }),
);

/** The props but each job's own: the shared settings (config's rules and defaults), and the jobs' names. */
const sharedPropsSchema = z.object({
  jobs: z
    .record(z.string().regex(JOB_NAME_PATTERN, JOB_NAME_RULE), z.unknown(), {
      error: 'must be an object of jobs by name',
    })
    .refine((jobs) => Object.keys(jobs).length > 0, 'at least one job is required'),
  alarmEmail: environmentSchema.shape.alarmEmail,
  logRetentionDays: logRetentionSchema,
  retainData: environmentSchema.shape.retainData,
  operatorRoles: environmentSchema.shape.operatorRoles,
  environmentName: z.string().optional(),
  operatorCommand: z.string().trim().min(1, 'must name a command').optional(),
});

/** Marks a PacedJobs, across copies of this module (an app may load two), so a stack's second one is found. */
const PACED_JOBS = Symbol.for('paced-jobs.PacedJobs');

/**
 * Scheduled, rate-limited, idempotent job processing in a stack: per job an EventBridge schedule starting a producer,
 * which admits discovered work into an SQS queue (with a DLQ) at the pace a consumer may start it; the consumer
 * applies each operation once (DynamoDB idempotency), paced fleet-wide. Plus the state tables the jobs share, the
 * stack's one schedule group, the alarms (an SNS topic) and a dashboard, and the stack outputs the `paced-jobs` tools
 * read. Every prop is validated before anything is created: one InvalidPropsError names every bad key. One per stack.
 */
export class PacedJobs extends Construct {
  /** The idempotency, run-ledger and rate-limiter tables every job shares. */
  public readonly stateTables: StateTables;
  /** The stack's schedule group (`paced-jobs-<environmentName>`): every job's schedule is in it. */
  public readonly scheduleGroup: scheduler.ScheduleGroup;
  /** One per job, by job name: its queues, functions, event sources and schedule. */
  public readonly jobs: Readonly<Record<string, PacedJob>>;
  /** The alarms, their SNS topic and the dashboard. */
  public readonly monitoring: Monitoring;

  constructor(scope: Construct, id: string, props: PacedJobsProps) {
    const stack = Stack.of(scope);
    const environmentName = props?.environmentName ?? stack.stackName;
    const { shared, jobs, problems } = validateProps(stack, props, environmentName);
    assertNoProblems(`PacedJobs ${scope.node.path}/${id}`, problems);
    const { logRetentionDays, retainData, operatorRoles, alarmEmail } = shared!;

    super(scope, id);
    Object.defineProperty(this, PACED_JOBS, { value: true });

    this.stateTables = new StateTables(this, 'State', { retainData });
    // Named, not generated: the runbook and the Scheduler alarms' ScheduleGroup dimension name it. Its removal follows
    // retainData, as the stack's data does.
    this.scheduleGroup = new scheduler.ScheduleGroup(this, 'ScheduleGroup', {
      scheduleGroupName: scheduleGroupName(environmentName),
      removalPolicy: retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });

    const built: Record<string, PacedJob> = {};
    for (const [jobName, job] of Object.entries(jobs)) {
      built[jobName] = new PacedJob(this, pascalCase(jobName), {
        jobName,
        job,
        entry: job.entry,
        uses: job.uses,
        stateTables: this.stateTables,
        scheduleGroup: this.scheduleGroup,
        logRetentionDays,
        retainData,
        operatorRoleArns: operatorRoles.map((name) => `arn:${Aws.PARTITION}:iam::${Aws.ACCOUNT_ID}:role/${name}`),
      });
      addJobOutputs(stack, jobName, built[jobName]);
    }
    this.jobs = built;

    this.monitoring = new Monitoring(this, 'Monitoring', {
      environmentName,
      operatorCommand: props.operatorCommand ?? 'npx paced-jobs ops',
      jobs: Object.entries(built).map(([jobName, pacedJob]) => ({ jobName, pacedJob, config: jobs[jobName] })),
      alarmEmail,
      retainData,
    });
    new CfnOutput(stack, StackOutput.AlarmTopicArn, { value: this.monitoring.topic.topicArn });
    new CfnOutput(stack, StackOutput.IdempotencyTableName, { value: this.stateTables.idempotencyTable.tableName });
    new CfnOutput(stack, StackOutput.LedgerTableName, { value: this.stateTables.ledgerTable.tableName });
    new CfnOutput(stack, StackOutput.LimiterTableName, { value: this.stateTables.limiterTable.tableName });
  }
}

/**
 * Every problem with the props before anything is built: a second PacedJobs in the stack, the shared props, the
 * schedule group's name, and each job's (its schema's, then the limits PacedJob would refuse).
 */
function validateProps(stack: Stack, props: PacedJobsProps, environmentName: string) {
  const problems: string[] = [];
  // Its outputs are the stack's (a nested stack is a stack of its own).
  const existing = stack.node.findAll().find((c: IConstruct) => PACED_JOBS in c && Stack.of(c) === stack);
  if (existing) {
    problems.push(
      `one PacedJobs per stack: ${existing.node.path} already holds this stack's jobs (the stack outputs the tools read take fixed names); add the jobs there, or use another stack`,
    );
  }
  const shared = sharedPropsSchema.safeParse(props ?? {});
  if (!shared.success) problems.push(...describeIssues(shared.error));
  const groupProblem = scheduleGroupNameProblem(environmentName);
  if (groupProblem) problems.push(`environmentName: ${groupProblem}`);

  const jobs: Record<string, ParsedJobProps> = {};
  const jobProps = typeof props?.jobs === 'object' && props.jobs !== null ? props.jobs : {};
  for (const [jobName, input] of Object.entries(jobProps)) {
    const at = `jobs.${jobName}`;
    const parsed = jobPropsSchema.safeParse(input);
    if (!parsed.success) {
      problems.push(...describeIssues(parsed.error, { root: at, rootInPaths: true }));
      continue;
    }
    jobs[jobName] = parsed.data;
    // The limits the schema cannot see (Lambda, SQS, IAM, the settings' size), as PacedJob would refuse them.
    const planned = planPacedJob(stack.stackName, { jobName, job: parsed.data, uses: parsed.data.uses });
    problems.push(...planned.problems.map((p) => (p.path ? `${at}.${p.path}: ${p.message}` : `${at}: ${p.message}`)));
  }
  return { shared: shared.data, jobs, problems };
}

/** A job's stack outputs, under the documented names the tools read (lib/outputs.ts). */
function addJobOutputs(stack: Stack, jobName: string, pacedJob: PacedJob): void {
  const values: Record<JobOutputKind, string> = {
    QueueUrl: pacedJob.queue.queueUrl,
    QueueArn: pacedJob.queue.queueArn,
    DlqUrl: pacedJob.dlq.queueUrl,
    DlqArn: pacedJob.dlq.queueArn,
    ProducerDlqUrl: pacedJob.producerDlq.queueUrl,
    ProducerDlqArn: pacedJob.producerDlq.queueArn,
    ProducerFunctionName: pacedJob.producer.functionName,
    ConsumerFunctionName: pacedJob.consumer.functionName,
    ScheduleName: pacedJob.schedule.scheduleName,
    ScheduleGroupName: pacedJob.scheduleGroup.scheduleGroupName,
    EventSourceMappingUuid: pacedJob.eventSource.eventSourceMappingId,
    AdmissionQueueUrl: pacedJob.admissionQueue.queueUrl,
    AdmissionQueueArn: pacedJob.admissionQueue.queueArn,
    AdmissionMappingUuid: pacedJob.admissionEventSource.eventSourceMappingId,
  };
  for (const [kind, value] of Object.entries(values) as [JobOutputKind, string][]) {
    // In the stack's own scope, so the output's logical ID is exactly the documented name the tools read.
    new CfnOutput(stack, jobOutputName(jobName, kind), { value, description: jobOutputDescription(jobName, kind) });
  }
}
