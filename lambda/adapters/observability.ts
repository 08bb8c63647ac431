// Powertools Logger and Metrics, created once per container and shared by the handlers and the jobs they load.
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { EnvVar, METRICS_NAMESPACE } from '../core/constants';
import type { MetricName } from '../core/metricNames';

const serviceName = process.env[EnvVar.POWERTOOLS_SERVICE_NAME] ?? 'paced-jobs';

/** Structured JSON logs. Per-record keys (operationId, batchId, messageId) are set by `withLogKeys`. */
export const logger = new Logger({ serviceName });

/** EMF metrics; `bindJob` adds the `job` dimension. */
export const metrics = new Metrics({
  namespace: process.env[EnvVar.POWERTOOLS_METRICS_NAMESPACE] ?? METRICS_NAMESPACE,
  serviceName,
});

// The metric names: one list in lambda/core, which the stack's alarms and dashboards (lib/monitoring.ts) read too.
export { MetricName } from '../core/metricNames';

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
