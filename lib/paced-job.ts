// One job end to end: schedule -> producer -> queue (+ DLQ) -> consumer, with each function's least-privilege grants.
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { Aws, Duration, Stack, TimeZone, Token } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { LambdaInvoke } from 'aws-cdk-lib/aws-scheduler-targets';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct, type IConstruct } from 'constructs';
import { EnvVar, type JobRuntimeSettings, METRICS_NAMESPACE } from '../lambda/core/constants';
import { type Batching, pacingSettings } from '../lambda/core/pacingSettings';
import { bucketActions, type BucketMode, READING_MODES, tableActions, type TableMode } from './config/access';
import {
  DLQ_RETENTION_DAYS,
  effectiveRateLimit,
  type JobConfig,
  jobBatching,
  VISIBILITY_TIMEOUT_FACTOR,
} from './config/schema';
import { acknowledge, acknowledgeResourceWildcard } from './nag';
import { MAX_FUNCTION_NAME_LENGTH, PacedFunction } from './paced-function';
import { assertNoProblems } from './props-error';
import type { StateTables } from './state-tables';

/** SQS's ceiling for a queue's visibility timeout (12 hours). */
export const SQS_MAX_VISIBILITY_TIMEOUT_SECONDS = 43200;
/**
 * Budget for JOB_SETTINGS: Lambda allows 4 KB for all of a function's variables together, and the others (names,
 * URLs once deployed) need about 1 KB.
 */
export const MAX_JOB_SETTINGS_BYTES = 3072;
/** S3's longest bucket name: what a CloudFormation-named bucket's name (a token at synth time) may grow to. */
export const MAX_BUCKET_NAME_LENGTH = 63;
/** DynamoDB's longest table name: what a CloudFormation-named table's name may grow to. */
export const MAX_TABLE_NAME_LENGTH = 255;
/** Secrets Manager's longest secret name. */
export const MAX_SECRET_NAME_LENGTH = 512;
/**
 * Where the two generic handlers live: `producer.ts`/`consumer.ts` in the repository, `producer.js`/`consumer.js`
 * beside this file's compiled copy in the package (handlerEntry picks the one that exists).
 */
export const HANDLERS_DIR = path.join(__dirname, '..', 'lambda', 'handlers');

/** A handler's entry file in `dir`: its TypeScript source where there is one (the repository), else its JavaScript. */
export function handlerEntry(dir: string, handler: 'producer' | 'consumer'): string {
  const source = path.join(dir, `${handler}.ts`);
  return existsSync(source) ? source : path.join(dir, `${handler}.js`);
}

/** The admission queue's visibility timeout is the producer's timeout plus this. */
export const ADMISSION_VISIBILITY_MARGIN_SECONDS = 60;
/** Receives of one admission step before it is dead-lettered to the producer DLQ (and the alarm fires). */
export const ADMISSION_MAX_RECEIVE_COUNT = 5;
/**
 * Both event sources publish their event counts (AWS/Lambda, per EventSourceMappingUUID: polled, invoked, failed to
 * invoke, dropped, deleted). Off by default; without them a mapping that cannot invoke its function or drops events
 * pages nobody, since the function's own metrics never see those events (lib/monitoring.ts alarms on them).
 */
export const EVENT_SOURCE_METRICS: lambda.MetricsConfig = { metrics: [lambda.MetricType.EVENT_COUNT] };

/** One table a job uses: the construct, each function's modes (lib/config/access.ts) and the indexes it may query. */
export interface TableGrant {
  readonly table: dynamodb.ITable;
  /** The producer's modes. */
  readonly discover: readonly TableMode[];
  /** The consumer's modes. */
  readonly apply: readonly TableMode[];
  /** The secondary indexes Query and Scan are granted on, by name (`<table>/index/<name>`), besides the table. */
  readonly indexes: readonly string[];
}

/** One bucket a job uses: the construct and each function's modes. */
export interface BucketGrant {
  readonly bucket: s3.IBucket;
  readonly discover: readonly BucketMode[];
  readonly apply: readonly BucketMode[];
}

/** One secret a job reads (the consumer only). */
export interface SecretGrant {
  readonly secret: secretsmanager.ISecret;
}

/** What a job may touch, by the alias its code uses (the names reach it in JOB_SETTINGS under the same aliases). */
export interface JobGrants {
  readonly tables: Readonly<Record<string, TableGrant>>;
  readonly buckets: Readonly<Record<string, BucketGrant>>;
  readonly secrets: Readonly<Record<string, SecretGrant>>;
}

/** A job's validated settings (lib/config/schema.ts `jobSchema`), its `uses` given as JobGrants instead. */
export type JobSettingsConfig = Omit<JobConfig, 'uses'>;

export interface PacedJobProps {
  /** The job's kebab-case name: its functions' JOB_NAME, and the name its `job` export must carry. */
  readonly jobName: string;
  /** The job's validated configuration. */
  readonly job: JobSettingsConfig;
  /** Absolute path of the job's module (exports `job = defineJob(...)`), bundled into both functions. */
  readonly entry: string;
  /** The tables, buckets and secrets the job touches, granted to its functions by their modes. */
  readonly uses: JobGrants;
  readonly stateTables: StateTables;
  /** The environment's schedule group (one per stack): the job's schedule is created in it. */
  readonly scheduleGroup: scheduler.IScheduleGroup;
  /** Retention of both functions' log groups. */
  readonly logRetentionDays: number;
  /** Keep log groups when the stack is deleted. */
  readonly retainData: boolean;
  /** Folder holding the handlers' entry files (handlerEntry). @default HANDLERS_DIR */
  readonly handlersDir?: string;
  /**
   * ARNs (ArnLike patterns) of the operators' roles: besides the job's own functions, the only principals that may
   * send to its work queue (`ops redrive`) and admission queue (`ops continue`). @default none
   */
  readonly operatorRoleArns?: readonly string[];
}

/** A problem with one job's props, at `path` inside the job (empty: the job as a whole). */
export interface JobProblem {
  readonly path: string;
  readonly message: string;
}

/** `path: message`, or the message alone for the job as a whole. */
export const formatJobProblem = (problem: JobProblem): string =>
  problem.path ? `${problem.path}: ${problem.message}` : problem.message;

/**
 * One job's partitions of the shared state tables (`dynamodb:LeadingKeys` patterns), so its functions cannot read or
 * write another job's records. Hand-written here because lib may not import the Lambda side's key builders
 * (lambda/core/idempotencyKey.ts, ledgerContract.ts, keyLimits.ts and the limiter adapters); a test pins each pattern
 * against them. `limiterKey` is the job's downstream key (pacing.downstreamKey, else the job name): jobs that name
 * one downstream share its allowance, so they share its limiter items, by design.
 */
export function stateTablePartitions(
  jobName: string,
  limiterKey: string,
): Record<'idempotency' | 'ledger' | 'limiter', string[]> {
  return {
    // Powertools' record ID: `<keyPrefix>#<hash>`, the key prefix being the job name.
    idempotency: [`${jobName}#*`],
    ledger: [
      `BATCH#${jobName}`,
      `REJECTED#${jobName}`,
      `INVOCATIONS#${jobName}#*`,
      `PAGES#${jobName}#*`,
      `INVALID_ROW#${jobName}#*`,
    ],
    // The job-wide item (`<key>`, or `<key>#<shard>`), its adaptive rate, per-key and concurrency items (`<key>#...`),
    // and the job's per-key overrides.
    limiter: [limiterKey, `${limiterKey}#*`, `LIMITS#${jobName}`],
  };
}

/** The actions each function takes on the state tables: no Scan (dynamodb:LeadingKeys does not bound a Scan). */
export const STATE_TABLE_ACTIONS = {
  producer: {
    ledger: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:UpdateItem'],
  },
  consumer: {
    idempotency: [
      'dynamodb:BatchGetItem',
      'dynamodb:DeleteItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:UpdateItem',
    ],
    ledger: ['dynamodb:PutItem', 'dynamodb:UpdateItem'],
    limiter: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
  },
} as const;

// The paced rate is config's to derive (the SLO's reachability is judged on it too); re-exported for the stack's users.
export { effectiveRateLimit } from './config/schema';

/** `<stackName>-<jobName>-producer`: explicit, so the producer can be granted invoke on itself without a cycle. */
export function producerFunctionName(stackName: string, jobName: string): string {
  return `${stackName}-${jobName}-producer`;
}

/** The job's rate as its functions pace by it (effectiveRateLimit). */
type RateLimit = ReturnType<typeof effectiveRateLimit>;

/** The problems with the job's limits that Lambda and SQS set: the producer's name, the rate, visibility, retention. */
function limitProblems(stackName: string, jobName: string, job: JobSettingsConfig, rateLimit: RateLimit): JobProblem[] {
  const functionName = producerFunctionName(stackName, jobName);
  const { pacing } = job;
  const problems: JobProblem[] = [];
  const problem = (at: string, message: string) => problems.push({ path: at, message });
  if (Token.isUnresolved(stackName))
    problem('', 'the stack name must be a literal: it is part of the producer function name');
  else if (functionName.length > MAX_FUNCTION_NAME_LENGTH) {
    problem(
      '',
      `producer function name "${functionName}" is ${functionName.length} characters; Lambda allows at most ${MAX_FUNCTION_NAME_LENGTH} (shorten the stack or job name)`,
    );
  }
  if (rateLimit.startsPerInterval < 1) {
    problem('pacing', `starts (${pacing.starts}) x headroom (${pacing.headroom}) rounds down to 0 starts per interval`);
  }
  const visibilitySeconds = job.consumerTimeoutSeconds * VISIBILITY_TIMEOUT_FACTOR;
  if (visibilitySeconds > SQS_MAX_VISIBILITY_TIMEOUT_SECONDS) {
    problem(
      'consumerTimeoutSeconds',
      `${job.consumerTimeoutSeconds} x ${VISIBILITY_TIMEOUT_FACTOR} = ${visibilitySeconds}s exceeds the SQS visibility timeout limit of ${SQS_MAX_VISIBILITY_TIMEOUT_SECONDS}s`,
    );
  }
  // SQS keeps a message's original enqueue time when it moves to the DLQ, so the DLQ must retain it longer.
  if (job.queueRetentionDays >= DLQ_RETENTION_DAYS) {
    problem(
      'queueRetentionDays',
      `must be less than the DLQ's ${DLQ_RETENTION_DAYS} days (got ${job.queueRetentionDays}), or a redriven message expires on arrival`,
    );
  }
  return problems;
}

/** The names of the tables, buckets and secrets the job uses, by alias, as JOB_SETTINGS carries them. */
function resourceNames(uses: JobGrants): Pick<JobRuntimeSettings, 'tables' | 'buckets' | 'secrets'> {
  return {
    tables: Object.fromEntries(
      Object.entries(uses.tables).map(([alias, u]) => [alias, synthName(u.table.tableName, u.table)]),
    ),
    buckets: Object.fromEntries(
      Object.entries(uses.buckets).map(([alias, u]) => [alias, synthName(u.bucket.bucketName, u.bucket)]),
    ),
    secrets: Object.fromEntries(
      Object.entries(uses.secrets).map(([alias, u]) => [alias, synthName(u.secret.secretName, u.secret)]),
    ),
  };
}

/** JOB_SETTINGS, which both of the job's functions read. Its keys' order is the variable's text: keep it. */
function jobRuntimeSettings(
  jobName: string,
  job: JobSettingsConfig,
  uses: JobGrants,
  rateLimit: RateLimit,
  batching: Batching,
): JobRuntimeSettings {
  const { pacing } = job;
  return {
    jobName,
    pageSize: job.pageSize,
    maxPagesPerRun: job.maxPagesPerRun,
    maxMessageBytes: job.maxMessageBytes,
    maxReceiveCount: job.maxReceiveCount,
    businessDateOffsetDays: job.schedule.businessDateOffsetDays,
    timeZone: job.schedule.timeZone,
    // The consumer rejects a notBefore past it and bounds deferrals by it (JobRuntimeSettings.queueRetentionSeconds).
    queueRetentionSeconds: job.queueRetentionDays * 86_400,
    rateLimit,
    quota: {
      starts: pacing.starts,
      headroom: pacing.headroom,
      ...(pacing.maxConcurrent ? { maxConcurrent: pacing.maxConcurrent } : {}),
    },
    concurrency: pacing.concurrency,
    ...(pacing.perKey?.concurrency
      ? { concurrencyPerKey: { field: pacing.perKey.key, maxConcurrent: pacing.perKey.concurrency } }
      : {}),
    ...(pacing.admission.enabled
      ? {
          admission: {
            horizonSeconds: pacing.admission.horizonSeconds,
            batchSize: batching.batchSize,
            batchingWindowSeconds: batching.batchingWindowSeconds,
          },
        }
      : {}),
    ...(job.slo ? { slo: job.slo } : {}),
    ...resourceNames(uses),
    pacing: {
      ...(pacing.downstreamKey !== undefined ? { downstreamKey: pacing.downstreamKey } : {}),
      ...(pacing.maxDeferrals !== undefined ? { maxDeferrals: pacing.maxDeferrals } : {}),
      ...(pacing.maxDeferralAgeSeconds !== undefined ? { maxDeferralAgeSeconds: pacing.maxDeferralAgeSeconds } : {}),
      shortWaitMs: batching.shortWaitMs,
      ...(pacing.safetyMarginMs !== undefined ? { safetyMarginMs: pacing.safetyMarginMs } : {}),
      adaptiveRate: pacing.adaptiveRate,
      enabled: pacing.enabled,
    },
    settings: job.settings,
  };
}

/** JOB_SETTINGS too large for Lambda's 4 KB of variables, measured at the deployed size; undefined when it fits. */
function settingsSizeProblem(runtimeSettings: JobRuntimeSettings): JobProblem | undefined {
  // Measured at the deployed size: a name CloudFormation gives (a token here) at the longest its service allows.
  const longest = { tables: MAX_TABLE_NAME_LENGTH, buckets: MAX_BUCKET_NAME_LENGTH, secrets: MAX_SECRET_NAME_LENGTH };
  const measured = {
    ...runtimeSettings,
    ...Object.fromEntries(
      (['tables', 'buckets', 'secrets'] as const).map((kind) => [
        kind,
        Object.fromEntries(
          Object.entries(runtimeSettings[kind]).map(([alias, name]) => [
            alias,
            Token.isUnresolved(name) ? 'x'.repeat(longest[kind]) : name,
          ]),
        ),
      ]),
    ),
  };
  const settingsBytes = Buffer.byteLength(JSON.stringify(measured), 'utf8');
  if (settingsBytes <= MAX_JOB_SETTINGS_BYTES) return undefined;
  return {
    path: '',
    message: `${EnvVar.JOB_SETTINGS} would be ${settingsBytes} bytes; keep it within ${MAX_JOB_SETTINGS_BYTES} so all variables fit Lambda's 4 KB`,
  };
}

/**
 * What PacedJob builds its functions' JOB_SETTINGS from, and every problem with its props that the job schema cannot
 * see (limits of Lambda, SQS and IAM, and the settings' size), each at its path inside the job. PacedJobs runs it for
 * every job before it builds anything, so one error names every job's problems.
 */
export function planPacedJob(
  stackName: string,
  props: Pick<PacedJobProps, 'jobName' | 'job' | 'uses'>,
): { runtimeSettings: JobRuntimeSettings; batching: Batching; problems: JobProblem[] } {
  const { job, jobName, uses } = props;
  const rateLimit = effectiveRateLimit(job.pacing);
  const batching = jobBatching(job);
  const problems = limitProblems(stackName, jobName, job, rateLimit);
  const runtimeSettings = jobRuntimeSettings(jobName, job, uses, rateLimit, batching);
  const tooLarge = settingsSizeProblem(runtimeSettings);
  if (tooLarge) problems.push(tooLarge);
  return { runtimeSettings, batching, problems };
}

/**
 * A resource's name as JOB_SETTINGS carries it: the literal wherever synthesis knows it, a token (resolved at deploy)
 * only for a name CloudFormation gives. A created resource with an explicit name has a token for its name attribute
 * too (its Ref; for a secret, a split of its ARN), so the name its L1 was given is taken instead: the variable stays a
 * plain string, measured exactly.
 */
function synthName(name: string, resource: IConstruct): string {
  if (!Token.isUnresolved(name)) return name;
  const cfn = resource.node.defaultChild;
  const given =
    cfn instanceof dynamodb.CfnTable || cfn instanceof dynamodb.CfnGlobalTable
      ? cfn.tableName
      : cfn instanceof s3.CfnBucket
        ? cfn.bucketName
        : cfn instanceof secretsmanager.CfnSecret
          ? cfn.name
          : undefined;
  return typeof given === 'string' && !Token.isUnresolved(given) ? given : name;
}

/**
 * A job's four queues: the work queue and its DLQ, the admission queue and the producer DLQ. SSE with SQS-owned keys
 * (no KMS key policy for Scheduler or Lambda to get wrong), HTTPS only.
 */
function createQueues(
  scope: Construct,
  job: JobSettingsConfig,
): Record<'dlq' | 'producerDlq' | 'queue' | 'admissionQueue', sqs.Queue> {
  const visibilitySeconds = job.consumerTimeoutSeconds * VISIBILITY_TIMEOUT_FACTOR;
  const dlqRetention = Duration.days(DLQ_RETENTION_DAYS);
  const dlq = new sqs.Queue(scope, 'Dlq', {
    retentionPeriod: dlqRetention,
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
  });
  const producerDlq = new sqs.Queue(scope, 'ProducerDlq', {
    retentionPeriod: dlqRetention,
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
  });
  const queue = new sqs.Queue(scope, 'Queue', {
    retentionPeriod: Duration.days(job.queueRetentionDays),
    // AWS guidance for SQS event sources: at least six times the function timeout, so a batch retried by the
    // poller is not redelivered while still in flight.
    visibilityTimeout: Duration.seconds(visibilitySeconds),
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    deadLetterQueue: { queue: dlq, maxReceiveCount: job.maxReceiveCount },
  });
  const admissionQueue = new sqs.Queue(scope, 'AdmissionQueue', {
    // A paused run's next step waits here for the whole pause.
    retentionPeriod: dlqRetention,
    // The function's timeout plus a minute, not the six times AWS suggests for event sources: a step is one short
    // invocation of a batch of one, and a crashed step's work (the night's admission) waits one visibility timeout
    // before it is taken over. Throttled deliveries are covered by the receive count below.
    visibilityTimeout: Duration.seconds(job.producerTimeoutSeconds + ADMISSION_VISIBILITY_MARGIN_SECONDS),
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    deadLetterQueue: { queue: producerDlq, maxReceiveCount: ADMISSION_MAX_RECEIVE_COUNT },
  });
  for (const deadLetters of [dlq, producerDlq]) {
    acknowledge(
      deadLetters,
      'Serverless-SQSRedrivePolicy',
      'This queue is itself a dead-letter queue; a redrive policy here would only move failed messages one queue further from the operator who reviews them.',
    );
  }
  return { dlq, producerDlq, queue, admissionQueue };
}

export class PacedJob extends Construct {
  /** The settings both functions receive as JOB_SETTINGS (a created bucket's name is a token, its Ref once synthesized). */
  public readonly runtimeSettings: JobRuntimeSettings;
  public readonly queue: sqs.Queue;
  /** The work queue's dead-letter queue. */
  public readonly dlq: sqs.Queue;
  /**
   * Failed producer invocations: the schedule's DLQ, the producer's asynchronous-invocation DLQ, and the admission
   * queue's DLQ (a step that failed maxReceiveCount times: the run's admission has stopped).
   */
  public readonly producerDlq: sqs.Queue;
  /** The producer's admission steps, each delayed until it is due; the producer consumes it. */
  public readonly admissionQueue: sqs.Queue;
  /** The producer's event source on the admission queue (pause disables it, so admission stops too). */
  public readonly admissionEventSource: SqsEventSource;
  public readonly producer: PacedFunction;
  public readonly consumer: PacedFunction;
  public readonly eventSource: SqsEventSource;
  public readonly schedule: scheduler.Schedule;
  /** The group the schedule is in (PacedJobProps.scheduleGroup): Scheduler's metrics, and so its alarms, are per group. */
  public readonly scheduleGroup: scheduler.IScheduleGroup;
  public readonly producerFunctionName: string;

  constructor(scope: Construct, id: string, props: PacedJobProps) {
    const { runtimeSettings, batching, problems } = planPacedJob(Stack.of(scope).stackName, props);
    assertNoProblems(`PacedJob ${scope.node.path}/${id}`, problems.map(formatJobProblem));
    super(scope, id);
    this.producerFunctionName = producerFunctionName(Stack.of(scope).stackName, props.jobName);
    this.scheduleGroup = props.scheduleGroup;
    this.runtimeSettings = runtimeSettings;

    const queues = createQueues(this, props.job);
    this.dlq = queues.dlq;
    this.producerDlq = queues.producerDlq;
    this.queue = queues.queue;
    this.admissionQueue = queues.admissionQueue;

    const common = this.commonEnvironment(props);
    this.producer = this.createProducer(props, common);
    this.admissionEventSource = this.mapAdmission();
    this.consumer = this.createConsumer(props, common);
    this.eventSource = this.mapConsumer(props.job, batching);
    const { schedule, role: scheduleRole } = this.createSchedule(props);
    this.schedule = schedule;

    this.grantProducer(props);
    this.grantConsumer(props);
    this.restrictSenders(props, scheduleRole);
  }

  /** The variables both functions get: the job's name and settings, its queues, the ledger, Powertools' names. */
  private commonEnvironment(props: PacedJobProps): Record<string, string> {
    return {
      [EnvVar.JOB_NAME]: props.jobName,
      // toJsonString, not JSON.stringify: a bucket CloudFormation names is a token here, and the variable becomes an
      // Fn::Join around its Ref (a literal string when every name is known).
      [EnvVar.JOB_SETTINGS]: Stack.of(this).toJsonString(this.runtimeSettings),
      [EnvVar.QUEUE_URL]: this.queue.queueUrl,
      [EnvVar.DLQ_URL]: this.dlq.queueUrl,
      [EnvVar.ADMISSION_QUEUE_URL]: this.admissionQueue.queueUrl,
      [EnvVar.LEDGER_TABLE_NAME]: props.stateTables.ledgerTable.tableName,
      [EnvVar.POWERTOOLS_SERVICE_NAME]: props.jobName,
      [EnvVar.POWERTOOLS_METRICS_NAMESPACE]: METRICS_NAMESPACE,
    };
  }

  private createProducer(props: PacedJobProps, common: Record<string, string>): PacedFunction {
    const { job, jobName } = props;
    return new PacedFunction(this, 'Producer', {
      entry: handlerEntry(props.handlersDir ?? HANDLERS_DIR, 'producer'),
      jobEntry: props.entry,
      description: `${jobName}: admits discovered work into the job queue at the pace the consumers can start it`,
      functionName: this.producerFunctionName,
      timeoutSeconds: job.producerTimeoutSeconds,
      memoryMb: job.producerMemoryMb,
      logRetentionDays: props.logRetentionDays,
      retainLogs: props.retainData,
      environment: common,
      deadLetterQueue: this.producerDlq,
    });
  }

  /** The producer's event source on the admission queue: one step at a time. */
  private mapAdmission(): SqsEventSource {
    const source = new SqsEventSource(this.admissionQueue, {
      batchSize: 1,
      // The smallest the event source allows; one run has one step in flight at a time.
      maxConcurrency: 2,
      reportBatchItemFailures: true,
      metricsConfig: EVENT_SOURCE_METRICS,
    });
    this.producer.addEventSource(source);
    acknowledge(
      this.producer,
      'Serverless-LambdaEventSourceMappingDestination',
      "SQS event source mappings do not support an on-failure destination; the admission queue's redrive policy to the producer DLQ serves.",
    );
    return source;
  }

  private createConsumer(props: PacedJobProps, common: Record<string, string>): PacedFunction {
    const { job, jobName } = props;
    const consumer = new PacedFunction(this, 'Consumer', {
      entry: handlerEntry(props.handlersDir ?? HANDLERS_DIR, 'consumer'),
      jobEntry: props.entry,
      // A job without per-key limits gets a bundle without their code (lambda/handlers/consumer.ts).
      buildFlags: {
        PACED_PER_KEY_RATE: job.pacing.perKey?.starts !== undefined,
        PACED_PER_KEY_CONCURRENCY: job.pacing.perKey?.concurrency !== undefined,
      },
      description: `${jobName}: applies each operation once, paced, from the job queue`,
      timeoutSeconds: job.consumerTimeoutSeconds,
      memoryMb: job.consumerMemoryMb,
      logRetentionDays: props.logRetentionDays,
      retainLogs: props.retainData,
      reservedConcurrentExecutions: job.pacing.concurrency,
      environment: {
        ...common,
        [EnvVar.IDEMPOTENCY_TABLE_NAME]: props.stateTables.idempotencyTable.tableName,
        [EnvVar.LIMITER_TABLE_NAME]: props.stateTables.limiterTable.tableName,
        [EnvVar.IDEMPOTENCY_TTL_SECONDS]: String(job.idempotencyRecordDays * 86400),
        [EnvVar.MAX_MESSAGE_BYTES]: String(job.maxMessageBytes),
      },
    });
    acknowledge(
      consumer,
      'Serverless-LambdaDLQ',
      "Invoked synchronously by its SQS event source mapping, and a function's dead-letter queue receives only asynchronous invocations; failed messages reach the job DLQ through the queue's redrive policy.",
    );
    return consumer;
  }

  /** The consumer's event source on the work queue, batched as the job's pacing says (set, or derived). */
  private mapConsumer(job: JobSettingsConfig, batching: Batching): SqsEventSource {
    // Set by the job or derived from its rate: planPacedJob's, the same it wrote into the settings.
    const source = new SqsEventSource(this.queue, {
      batchSize: batching.batchSize,
      maxBatchingWindow: Duration.seconds(batching.batchingWindowSeconds),
      // Equal to the reserved concurrency: the poller never scales past what the function may run, so the
      // reservation never throttles it into spending healthy messages' receive counts.
      maxConcurrency: job.pacing.concurrency,
      reportBatchItemFailures: true,
      metricsConfig: EVENT_SOURCE_METRICS,
    });
    this.consumer.addEventSource(source);
    acknowledge(
      this.consumer,
      'Serverless-LambdaEventSourceMappingDestination',
      "SQS event source mappings do not support an on-failure destination; the queue's redrive policy to the job DLQ (maxReceiveCount) serves.",
    );
    return source;
  }

  /** The schedule that starts one producer run, in the stack's group, with its own role. */
  private createSchedule(props: PacedJobProps): { schedule: scheduler.Schedule; role: iam.Role } {
    const { job, jobName } = props;
    // Our own role rather than the target's shared one, so its one wildcard can be acknowledged precisely here.
    const role = new iam.Role(this, 'ScheduleRole', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID } },
      }),
      description: `EventBridge Scheduler: invokes the ${jobName} producer`,
    });
    acknowledgeResourceWildcard(
      role,
      `${this.producer.functionArn}:*`,
      "The schedule invokes only this job's producer; the target's grant adds ':*' for that same function's versions and aliases.",
    );
    // 'InGroup', not 'Schedule': a new logical ID, so moving a deployed schedule from the default group into the stack's
    // replaces it. CloudFormation would update it in place, asking for it in its new group, where it is not found
    // (aws/aws-cdk#34216).
    const schedule = new scheduler.Schedule(this, 'ScheduleInGroup', {
      description: `${jobName}: starts one producer run`,
      scheduleGroup: props.scheduleGroup,
      schedule: scheduler.ScheduleExpression.expression(
        `cron(${job.schedule.cron})`,
        TimeZone.of(job.schedule.timeZone),
      ),
      enabled: job.schedule.enabled,
      target: new LambdaInvoke(this.producer, {
        role,
        input: scheduler.ScheduleTargetInput.fromObject({ scheduledTime: scheduler.ContextAttribute.scheduledTime }),
        retryAttempts: job.schedule.retryAttempts,
        maxEventAge: Duration.seconds(job.schedule.maxEventAgeSeconds),
        deadLetterQueue: this.producerDlq,
      }),
    });
    // The L2 writes the group's name as a literal, so CloudFormation would be free to create the schedule first.
    schedule.node.addDependency(props.scheduleGroup);
    return { schedule, role };
  }

  /**
   * Who may send to each queue, whatever their identity policies allow: a Deny in the queue's policy for every other
   * principal (`aws:PrincipalArn`, the role of a role session). Only SendMessage (SendMessageBatch is the same action)
   * is denied, so an administrator can still change the policy; SQS's own redrive to a DLQ is not a send.
   */
  private restrictSenders(props: PacedJobProps, scheduleRole: iam.IRole): void {
    const producer = this.producer.executionRole.roleArn;
    const consumer = this.consumer.executionRole.roleArn;
    const operators = props.operatorRoleArns ?? [];
    const senders: [sqs.Queue, string[]][] = [
      // The producer publishes, the consumer re-publishes deferrals, the operators redrive from the DLQ.
      [this.queue, [producer, consumer, ...operators]],
      // The producer chains its steps; operators send a stalled run's current step (`ops continue`).
      [this.admissionQueue, [producer, ...operators]],
      // The consumer dead-letters what it cannot apply (SQS's own redrive after maxReceiveCount is no send).
      [this.dlq, [consumer]],
      // Lambda's async-invocation DLQ sends with the producer's role, Scheduler's DLQ with the schedule's.
      [this.producerDlq, [producer, scheduleRole.roleArn]],
    ];
    for (const [queue, principals] of senders) {
      queue.addToResourcePolicy(
        new iam.PolicyStatement({
          sid: 'OnlyOwnSendersSend',
          effect: iam.Effect.DENY,
          principals: [new iam.AnyPrincipal()],
          actions: ['sqs:SendMessage'],
          resources: [queue.queueArn],
          conditions: { ArnNotLike: { 'aws:PrincipalArn': principals } },
        }),
      );
    }
  }

  /** Discovery's reads (the uses' `discover` modes), publishing to its own queue and reading its depth, its ledger items. */
  private grantProducer(props: PacedJobProps): void {
    const role = this.producer.executionRole;
    this.grantUses(props, role, 'discover');
    this.queue.grantSendMessages(role);
    this.queue.grant(role, 'sqs:GetQueueAttributes');
    this.admissionQueue.grantSendMessages(role);
    const partitions = this.partitions(props);
    grantPartitions(role, props.stateTables.ledgerTable, STATE_TABLE_ACTIONS.producer.ledger, partitions.ledger);
  }

  /** Its own queue (consume, re-publish deferrals), its own DLQ, its partitions of the state tables, the uses' `apply` modes. */
  private grantConsumer(props: PacedJobProps): void {
    const role = this.consumer.executionRole;
    this.queue.grantSendMessages(role);
    this.dlq.grantSendMessages(role);
    const { idempotencyTable, ledgerTable, limiterTable } = props.stateTables;
    const partitions = this.partitions(props);
    grantPartitions(role, idempotencyTable, STATE_TABLE_ACTIONS.consumer.idempotency, partitions.idempotency);
    grantPartitions(role, ledgerTable, STATE_TABLE_ACTIONS.consumer.ledger, partitions.ledger);
    grantPartitions(role, limiterTable, STATE_TABLE_ACTIONS.consumer.limiter, partitions.limiter);
    this.grantUses(props, role, 'apply');
    for (const use of Object.values(props.uses.secrets)) use.secret.grantRead(role);
  }

  private partitions(props: PacedJobProps): ReturnType<typeof stateTablePartitions> {
    return stateTablePartitions(props.jobName, pacingSettings(this.runtimeSettings).limiterKey);
  }

  /** Each table and bucket use's modes for one function (lib/config/access.ts has each mode's actions). */
  private grantUses(props: PacedJobProps, role: iam.Role, fn: 'discover' | 'apply'): void {
    for (const use of Object.values(props.uses.tables)) {
      const modes = use[fn];
      if (modes.length === 0) continue;
      const { table } = use;
      const { table: actions, indexes } = tableActions(modes);
      role.addToPrincipalPolicy(new iam.PolicyStatement({ actions, resources: [table.tableArn] }));
      const indexArns = use.indexes.map((index) => `${table.tableArn}/index/${index}`);
      if (indexes.length > 0 && indexArns.length > 0) {
        role.addToPrincipalPolicy(new iam.PolicyStatement({ actions: indexes, resources: indexArns }));
      }
      // A table encrypted with the team's own key: its reading modes need to decrypt, its writing ones to encrypt too.
      grantKey(table.encryptionKey, role, modes);
    }
    for (const [alias, use] of Object.entries(props.uses.buckets)) {
      const modes = use[fn];
      if (modes.length === 0) continue;
      const { bucket } = use;
      const { bucket: onBucket, objects } = bucketActions(modes);
      if (onBucket.length > 0)
        role.addToPrincipalPolicy(new iam.PolicyStatement({ actions: onBucket, resources: [bucket.bucketArn] }));
      if (objects.length > 0) {
        const objectArns = bucket.arnForObjects('*');
        role.addToPrincipalPolicy(new iam.PolicyStatement({ actions: objects, resources: [objectArns] }));
        acknowledgeResourceWildcard(
          role,
          objectArns,
          `The job's declared ${fn} modes (${modes.join(', ')}) on the "${alias}" bucket: exactly ${objects.join(', ')}, ` +
            'on objects of that one bucket, whose keys are data.',
        );
      }
      grantKey(bucket.encryptionKey, role, modes);
    }
  }
}

/** Decrypt for modes that only read, encrypt and decrypt for any that writes; nothing for a resource without its own key. */
function grantKey(key: kms.IKey | undefined, role: iam.IGrantable, modes: readonly string[]): void {
  if (key === undefined) return;
  if (modes.every((mode) => READING_MODES.has(mode))) key.grantDecrypt(role);
  else key.grantEncryptDecrypt(role);
}

/**
 * `actions` on a shared state table, only on the items whose partition key matches one of `partitions`. A request
 * naming any other partition (a key, a Query's partition value, any item of a batch) is denied.
 */
function grantPartitions(
  role: iam.IGrantable,
  table: dynamodb.ITable,
  actions: readonly string[],
  partitions: readonly string[],
): void {
  role.grantPrincipal.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: [...actions],
      resources: [table.tableArn],
      conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [...partitions] } },
    }),
  );
}
