// The one module shared by the CDK app (lib/) and the Lambda runtime (lambda/): plain constants only, no imports.

/** Names of the environment variables the handlers read. The stack sets them; the handlers read them. */
export const EnvVar = {
  JOB_NAME: 'JOB_NAME',
  QUEUE_URL: 'QUEUE_URL',
  /** The producer's own queue of admission steps (continuations, each delayed until it is due). */
  ADMISSION_QUEUE_URL: 'ADMISSION_QUEUE_URL',
  DLQ_URL: 'DLQ_URL',
  IDEMPOTENCY_TABLE_NAME: 'IDEMPOTENCY_TABLE_NAME',
  LEDGER_TABLE_NAME: 'LEDGER_TABLE_NAME',
  LIMITER_TABLE_NAME: 'LIMITER_TABLE_NAME',
  /** JSON of the job's own settings (JobRuntimeSettings): page size, pacing, business-date rule, target names. */
  JOB_SETTINGS: 'JOB_SETTINGS',
  IDEMPOTENCY_TTL_SECONDS: 'IDEMPOTENCY_TTL_SECONDS',
  MAX_MESSAGE_BYTES: 'MAX_MESSAGE_BYTES',
  POWERTOOLS_SERVICE_NAME: 'POWERTOOLS_SERVICE_NAME',
  POWERTOOLS_METRICS_NAMESPACE: 'POWERTOOLS_METRICS_NAMESPACE',
} as const;

/** The message contract version the producer writes and the consumer accepts. */
export const MESSAGE_VERSION = 1;

/** SQS's hard ceiling for one message body. */
export const SQS_MAX_MESSAGE_BYTES = 256 * 1024;

/** SQS's hard ceiling for DelaySeconds. */
export const SQS_MAX_DELAY_SECONDS = 900;

/** Lambda's hard ceiling for one invocation. */
export const LAMBDA_MAX_TIMEOUT_SECONDS = 900;

/** A job queue's retention unless config says otherwise (queueRetentionDays). @default 4 */
export const DEFAULT_QUEUE_RETENTION_DAYS = 4;

/** Metric namespace every handler writes to. */
export const METRICS_NAMESPACE = 'PacedJobs';

/**
 * What the stack hands each job's functions in the JOB_SETTINGS variable (as JSON). Names only: never a secret value.
 * Validated on the Lambda side by lambda/core/settings.ts.
 */
export interface JobRuntimeSettings {
  jobName: string;
  pageSize: number;
  maxPagesPerRun: number;
  maxMessageBytes: number;
  /** Receives before SQS moves a message to the DLQ: the consumer counts a failed last receive as dead-lettered. */
  maxReceiveCount?: number;
  businessDateOffsetDays: number;
  timeZone: string;
  /**
   * The work queue's retention: no wait (a notBefore) may outlast it, and it bounds an operation's deferrals by default
   * (lambda/core/pacingSettings.ts). Absent in settings deployed before it: DEFAULT_QUEUE_RETENTION_DAYS.
   */
  queueRetentionSeconds?: number;
  /** Effective pacing: the allowance after headroom. */
  rateLimit: {
    startsPerInterval: number;
    intervalSeconds: number;
    burst: number;
    /**
     * Per key (a tenant, a merchant account): each value of the resource's `field` gets its own fleet-wide limit,
     * alongside the job-wide one (both hold). startsPerInterval is after `headroom`; an operator's override for a key
     * (lambda/core/keyLimits.ts) replaces the documented quota, and the headroom still applies.
     */
    perKey?: { field: string; startsPerInterval: number; intervalSeconds: number; burst: number; headroom: number };
    /**
     * The share of the allowance backfill (catch-up, redrive) may take while live work waits. Absent in settings
     * deployed before it: 0.5.
     */
    backfillShare?: number;
  };
  /**
   * The downstream's documented limits as config states them (rateLimit.starts and headroom, and maxConcurrent where
   * set): `ops preflight` checks the deployed pacing against them. Absent in settings deployed before it.
   */
  quota?: { starts: number; headroom: number; maxConcurrent?: number };
  concurrency: number;
  /** At most `maxConcurrent` operations in progress at once per value of the resource's `field`, fleet-wide. */
  concurrencyPerKey?: { field: string; maxConcurrent: number };
  /**
   * Admission: the producer lets at most `horizonSeconds` of work (at the rate) into the queue, in groups of the event
   * source's `batchSize`, and admits the rest step by step as it drains. Absent: everything is admitted at once.
   */
  admission?: { horizonSeconds: number; batchSize: number; batchingWindowSeconds?: number };
  /** The night's completion SLO, when the job has one: `ops status` forecasts a running batch against it. */
  slo?: { objective: number; completeWithinMinutes: number };
  /** Table names by the alias the job's code uses. */
  tables: Record<string, string>;
  /** Bucket names by alias. */
  buckets: Record<string, string>;
  /** Secret ARNs or names by alias; the value is fetched at run time. */
  secrets: Record<string, string>;
  /**
   * The consumer's pacing switches and waits (config's `pacing` block, resolved at synthesis: the short wait set or
   * derived). Absent, or a key absent, in settings built without them: lambda/core/pacingSettings.ts's defaults.
   */
  pacing?: {
    /** The limiter item: jobs naming one downstream share its allowance. @default the job name */
    downstreamKey?: string;
    /** Throttles before an operation is dead-lettered. @default the deferral policy's (lambda/core/deferral.ts) */
    maxDeferrals?: number;
    /** Age past which an operation is dead-lettered rather than deferred again. @default the queue's retention */
    maxDeferralAgeSeconds?: number;
    shortWaitMs?: number;
    /** The limiter's window stretch for start jitter, when the config sets one. @default pacingSettings.ts safetyMarginMs */
    safetyMarginMs?: number;
    adaptiveRate?: boolean;
    enabled?: boolean;
  };
  /** The job's own plain settings (config's `settings`), nothing pacing-related. */
  settings: Record<string, string | number | boolean>;
}

/**
 * The CloudFormation Metadata key on both of a job's functions naming its entry, relative to the CDK app's folder
 * (lib/paced-function.ts writes it): the local tools find the job's fixture beside it, `ops preflight` its code.
 */
export const JOB_ENTRY_METADATA = 'paced-jobs:job-entry';

/**
 * The module name the job loader requires (lambda/handlers/jobLoader.ts, where it is written as a literal for esbuild):
 * no package, but each bundle's alias of its job's entry (lib/paced-function.ts).
 */
export const JOB_ENTRY_MODULE = 'paced-jobs-job-entry';

/**
 * The largest deferral budget (`pacing.maxDeferrals`): the message schema caps `attempt` at 10000, so more could only
 * end unpublishable. Here, with the constants lib shares, so config bounds the setting as the deferral policy does.
 */
export const MAX_DEFERRALS = 10_000;
