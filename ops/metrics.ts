// Operator CLI: a job's metrics over a window, read with CloudWatch GetMetricData (what the console charts): the
// pipeline's own EMF metrics and the AWS/SQS depth of the job's queues. Against a deployed stack that is CloudWatch,
// with the operator's credentials (AWS_ENDPOINT_URL_CLOUDWATCH, if set, as for every SDK client); against the local
// stack, the session's local CloudWatch API (.local/endpoints.json `endpoints.cloudwatch`, local/cloudWatchApi.ts).
import { GetMetricDataCommand, type MetricDataQuery } from '@aws-sdk/client-cloudwatch';
import { METRICS_NAMESPACE } from '../lambda/core/constants';
import type { MetricSample } from '../local/metricsTap';
import type { CommandContext } from './context';
import { OpsError, ResourceDiscoveryError, UsageError } from './errors';
import type { JobResources } from './resources';

/** CloudWatch's statistics the metrics are read with. */
export type MetricStatistic = 'Sum' | 'Maximum';

/**
 * Every metric the pipeline emits per job (the values of `MetricName` in lambda/adapters/observability.ts; a test pins
 * them, as ops never loads the adapters), with the statistic each is read with: Sum for the counts (how many in the
 * period), Maximum for AgeSinceFirstEnqueue (the oldest operation completed in the period, in ms).
 */
export const PIPELINE_METRICS: Readonly<Record<string, MetricStatistic>> = {
  Published: 'Sum',
  Applied: 'Sum',
  AlreadyDone: 'Sum',
  DuplicatesSuppressed: 'Sum',
  Rejected: 'Sum',
  Failed: 'Sum',
  Deferred: 'Sum',
  Throttled: 'Sum',
  DeadLettered: 'Sum',
  AgeSinceFirstEnqueue: 'Maximum',
  SlotsUnused: 'Sum',
  RecordsReleased: 'Sum',
  DiscoveryRowsRejected: 'Sum',
  LedgerWriteFailed: 'Sum',
  SloMet: 'Sum',
  SloMissed: 'Sum',
  SloFailed: 'Sum',
};

/**
 * The AWS/SQS depth metrics read for each of the job's queues, all with Maximum: SQS publishes a sample a minute, and
 * a period's peak is what a backlog chart (and the stalled alarm, lib/monitoring.ts) looks at.
 */
export const QUEUE_METRICS = [
  'ApproximateNumberOfMessagesVisible',
  'ApproximateNumberOfMessagesNotVisible',
  'ApproximateNumberOfMessagesDelayed',
] as const;

/** A job by name, or as the CLI found it (StackResources.jobs). */
export type JobRef = string | JobResources;

/** The window to read: epoch ms, [fromMs, toMs), and the period each datapoint aggregates. */
export interface SampleWindow {
  fromMs: number;
  toMs: number;
  /** 1, 5, 10, 20, 30 or a multiple of 60, as CloudWatch takes. A deployed stack's EMF metrics have one value a minute. */
  periodSeconds: number;
}

/** GetMetricData failed, or answered what a reader cannot use. */
export class MetricsReadError extends OpsError {
  constructor(
    message: string,
    public readonly job: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'MetricsReadError';
  }
}

/** The metric a query reads, as the samples it becomes carry it. */
type QueriedMetric = Pick<MetricSample, 'namespace' | 'metricName' | 'dimensions'>;

/** A queue's name from its ARN: the `QueueName` dimension of its AWS/SQS metrics. */
const queueNameOf = (arn: string) => arn.slice(arn.lastIndexOf(':') + 1);

/**
 * The queries of one job's metrics: the pipeline's metrics with the dimensions Powertools writes them with (its
 * `service` default dimension, which the stack sets to the job's name, and the `job` one bindJob adds; CloudWatch
 * matches a metric on all of its dimensions, as lib/monitoring.ts jobMetric does), and the depth of the work queue, the
 * DLQ and the admission queue. Ids are m0, m1, ... in this order.
 */
export function jobMetricQueries(
  job: JobResources,
  periodSeconds: number,
): { query: MetricDataQuery; metric: QueriedMetric }[] {
  const pipeline = Object.entries(PIPELINE_METRICS).map(([metricName, stat]) => ({
    metric: { namespace: METRICS_NAMESPACE, metricName, dimensions: { service: job.job, job: job.job } },
    stat,
  }));
  const queues = [job.queueArn, job.dlqArn, job.admissionQueueArn].flatMap((arn) =>
    QUEUE_METRICS.map((metricName) => ({
      metric: { namespace: 'AWS/SQS', metricName, dimensions: { QueueName: queueNameOf(arn) } },
      stat: 'Maximum' as const,
    })),
  );
  return [...pipeline, ...queues].map(({ metric, stat }, i) => ({
    metric,
    query: {
      Id: `m${i}`,
      MetricStat: {
        Metric: {
          Namespace: metric.namespace,
          MetricName: metric.metricName,
          Dimensions: Object.entries(metric.dimensions).map(([Name, Value]) => ({ Name, Value })),
        },
        Period: periodSeconds,
        Stat: stat,
      },
      ReturnData: true,
    },
  }));
}

/** @throws UsageError for a window CloudWatch would refuse (an empty range, a period it does not take). */
function checkWindow(window: SampleWindow): void {
  const { fromMs, toMs, periodSeconds: p } = window;
  if (!Number.isFinite(fromMs) || !Number.isFinite(toMs) || fromMs >= toMs)
    throw new UsageError(`a metrics window needs fromMs before toMs, got ${fromMs} and ${toMs}`);
  if (!Number.isInteger(p) || p <= 0 || (p < 60 ? ![1, 5, 10, 20, 30].includes(p) : p % 60 !== 0)) {
    throw new UsageError(
      `a metrics period must be 1, 5, 10, 20, 30 or a multiple of 60 seconds (as CloudWatch takes), got ${p}`,
    );
  }
}

/**
 * The job's metrics over the window, one sample per datapoint GetMetricData returns (at its period's start, with the
 * statistic's value: see PIPELINE_METRICS and QUEUE_METRICS), every page of them, oldest first per metric. A period
 * without data has no sample, as CloudWatch returns none.
 * @throws UsageError for an unknown job or a bad window; ResourceDiscoveryError for a local endpoints file without a
 *   CloudWatch endpoint (from before the local runtime served one); MetricsReadError when CloudWatch refuses the call.
 */
export async function readJobSamples(ctx: CommandContext, job: JobRef, window: SampleWindow): Promise<MetricSample[]> {
  const resources = typeof job === 'string' ? ctx.resources.jobs.find((j) => j.job === job) : job;
  if (!resources)
    throw new UsageError(
      `unknown job "${String(job)}"; ${ctx.resources.stackName} has: ${ctx.resources.jobs.map((j) => j.job).join(', ')}`,
    );
  checkWindow(window);
  const endpoint = ctx.resources.clients.endpoints?.cloudwatch;
  // Without it the client would go to CloudWatch on AWS with the local runtime's credentials.
  if (ctx.resources.source === 'local' && !endpoint) {
    throw new ResourceDiscoveryError(
      'the local endpoints file has no endpoints.cloudwatch (written before the local runtime served metrics): restart `npm start -- --serve`',
      'endpoints.cloudwatch',
    );
  }
  const queries = jobMetricQueries(resources, window.periodSeconds);
  const byId = new Map(queries.map((q) => [q.query.Id!, q.metric]));
  const where = endpoint
    ? `the local CloudWatch at ${endpoint}`
    : `CloudWatch${ctx.resources.region ? ` in ${ctx.resources.region}` : ''}`;
  const samples: MetricSample[] = [];
  let nextToken: string | undefined;
  do {
    let page;
    try {
      page = await ctx.clients.cloudwatch.send(
        new GetMetricDataCommand({
          MetricDataQueries: queries.map((q) => q.query),
          StartTime: new Date(window.fromMs),
          EndTime: new Date(window.toMs),
          ScanBy: 'TimestampAscending',
          NextToken: nextToken,
        }),
      );
    } catch (error) {
      throw new MetricsReadError(
        `reading job ${resources.job}'s metrics from ${where} failed: ${(error as Error).name}: ${(error as Error).message}`,
        resources.job,
        { cause: error },
      );
    }
    for (const result of page.MetricDataResults ?? []) {
      const metric = byId.get(result.Id ?? '');
      if (!metric)
        throw new MetricsReadError(
          `${where} answered a result for query "${result.Id}", which job ${resources.job}'s request did not ask`,
          resources.job,
        );
      const [timestamps, values] = [result.Timestamps ?? [], result.Values ?? []];
      if (timestamps.length !== values.length) {
        throw new MetricsReadError(
          `${where} answered query ${result.Id} (${metric.metricName}) with ${timestamps.length} timestamps and ${values.length} values`,
          resources.job,
        );
      }
      timestamps.forEach((t, i) =>
        samples.push({ ...metric, dimensions: { ...metric.dimensions }, timestamp: t.getTime(), value: values[i] }),
      );
    }
    nextToken = page.NextToken;
  } while (nextToken);
  return samples;
}
