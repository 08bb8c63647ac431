// Powertools Logger and Metrics, created once per container and shared by the handlers and the jobs they load.
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { EnvVar, METRICS_NAMESPACE } from '../core/constants';

const serviceName = process.env[EnvVar.POWERTOOLS_SERVICE_NAME] ?? 'paced-jobs';

/** Structured JSON logs. Per-record keys (operationId, batchId, messageId) are set by `withLogKeys`. */
export const logger = new Logger({ serviceName });

/** EMF metrics; `bindJob` adds the `job` dimension. */
export const metrics = new Metrics({ namespace: process.env[EnvVar.POWERTOOLS_METRICS_NAMESPACE] ?? METRICS_NAMESPACE, serviceName });

/** Every metric the pipeline emits, per job. */
export const MetricName = {
  Published: 'Published',
  /**
   * Source rows discovery could not turn into a valid message (a job's invalid rows, or an operation that failed the
   * message contract): recorded in the run ledger for review and skipped. Any is a data problem to look at.
   */
  DiscoveryRowsRejected: 'DiscoveryRowsRejected',
  Applied: 'Applied',
  AlreadyDone: 'AlreadyDone',
  DuplicatesSuppressed: 'DuplicatesSuppressed',
  Rejected: 'Rejected',
  Failed: 'Failed',
  Deferred: 'Deferred',
  /** The downstream answered 429 or 503: the provider's throttling rate, which the throttling alarm watches. */
  Throttled: 'Throttled',
  DeadLettered: 'DeadLettered',
  /** Milliseconds from the operation's first enqueue to its completion: the true job age, across deferrals. */
  AgeSinceFirstEnqueue: 'AgeSinceFirstEnqueue',
  /**
   * Rate-limit slots an invocation was granted but did not start a downstream call on (passed while an earlier record
   * ran, freed by a duplicate, left at the end): allowance the fleet lost. A steady share of the starts means the blocks
   * are too large for the apply time, or the invocations end early.
   */
  SlotsUnused: 'SlotsUnused',
  /**
   * Records sent back to the queue unstarted because a record before them in the batch ran past its release time (a
   * call hanging towards its timeout): others start them meanwhile. A steady count means the provider hangs calls.
   */
  RecordsReleased: 'RecordsReleased',
  /** A ledger counter could not be written; the operation itself succeeded. */
  LedgerWriteFailed: 'LedgerWriteFailed',
  /** The SLO's indicator, per operation of a job with an SLO: completed by its dueBy ... */
  SloMet: 'SloMet',
  /** ... completed after it ... */
  SloMissed: 'SloMissed',
  /** ... or failed for good (dead-lettered). The burn rate is (SloMissed + SloFailed) / all three, over the budget. */
  SloFailed: 'SloFailed',
} as const;
export type MetricName = (typeof MetricName)[keyof typeof MetricName];

let boundJob: string | undefined;

/** Tags every log line and metric of this container with the job it runs. Idempotent. */
export function bindJob(jobName: string): void {
  if (boundJob === jobName) return;
  boundJob = jobName;
  logger.appendPersistentKeys({ job: jobName });
  metrics.setDefaultDimensions({ job: jobName });
}

export function count(name: MetricName, value = 1): void {
  metrics.addMetric(name, MetricUnit.Count, value);
}

export function milliseconds(name: MetricName, value: number): void {
  metrics.addMetric(name, MetricUnit.Milliseconds, value);
}

/** Writes the invocation's metrics; Powertools warns on an empty flush, so skip it when nothing was recorded. */
export function flushMetrics(): void {
  if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
}

/**
 * Runs `fn` with `keys` on every log line it (and any job code it calls) writes, then removes them so they never
 * leak into the next record. Records are processed one at a time, so the shared logger is safe here.
 */
export async function withLogKeys<T>(keys: Record<string, string | undefined>, fn: () => Promise<T>): Promise<T> {
  const present = Object.fromEntries(Object.entries(keys).filter(([, v]) => v !== undefined)) as Record<string, string>;
  logger.appendKeys(present);
  try {
    return await fn();
  } finally {
    logger.removeKeys(Object.keys(present));
  }
}
