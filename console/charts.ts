// A job's charts, built from metric samples (CloudWatch-shaped: the local runtime reads them off the functions' EMF
// lines, the console asks CloudWatch for them): starts per window against the allowance, outcomes, job age against
// the SLO, queue depth. Pure, so every figure is unit-tested; the console's API and the HTML reports carry the result
// as ChartSpec JSON (console/chartSpec.ts) to console/web/charts.js, which draws it.
import { METRICS_NAMESPACE } from '../lambda/core/constants';
import type { MetricSample } from '../local/metricsTap';
import type { ChartLine, ChartSpec } from './chartSpec';

/**
 * The pipeline's metric names the charts read: the values of `MetricName` in lambda/adapters/observability.ts (a test
 * pins them), named here because the tools never load the Lambda side's adapters.
 */
export const CHART_METRICS = {
  Applied: 'Applied',
  AlreadyDone: 'AlreadyDone',
  Deferred: 'Deferred',
  Throttled: 'Throttled',
  AgeSinceFirstEnqueue: 'AgeSinceFirstEnqueue',
} as const;

/** The AWS/SQS depth metrics (local/metricSamples.ts SQS_DEPTH_METRICS publishes GetQueueAttributes under them). */
export const SQS_METRICS = {
  visible: 'ApproximateNumberOfMessagesVisible',
  inFlight: 'ApproximateNumberOfMessagesNotVisible',
  delayed: 'ApproximateNumberOfMessagesDelayed',
} as const;

/**
 * What makes a "start" (a downstream call began) in the metrics, decided from lambda/handlers/consumer/recordRunner.ts:
 * - Applied and AlreadyDone: the job's apply ran to its end (Accounting.completed), one call each;
 * - Throttled: the call was made and answered 429/503. The same record is then re-published to wait and counts
 *   Deferred as well (or DeadLettered when its budget is spent), so Deferred and DeadLettered never count: Deferred
 *   mostly stands for paced deferrals, which made no call, and a throttle would otherwise count twice;
 * - not Failed: it also counts records that never reached the downstream (a claim refused as in progress, a DynamoDB
 *   error at the claim, a whole batch handed back), so counting it could draw starts over the allowance that never
 *   happened. A call that ended in a 5xx or a timeout is thus missing from the curve: the curve can be low, never high.
 */
export const START_METRICS: readonly string[] = [
  CHART_METRICS.Applied,
  CHART_METRICS.AlreadyDone,
  CHART_METRICS.Throttled,
];

/** The sliding window a job without an allowance (`pacing.enabled: false`) has its starts counted over. */
export const DEFAULT_START_WINDOW_MS = 60_000;

/** Bucket widths a chart's x axis is cut in, smallest first: whole, readable steps. */
const NICE_STEPS_MS = [
  100, 200, 250, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000,
  3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000,
];
/** The default step keeps a chart at about this many buckets at most: uPlot draws thousands, but a count per bucket that thin is mostly noise. */
const TARGET_BUCKETS = 120;
/** More buckets than this is a caller's mistake (a step of a millisecond over a day), not a chart. */
export const MAX_BUCKETS = 20_000;

export class ChartInputError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ChartInputError';
  }
}

export interface JobChartInput {
  job: string;
  /** The fleet-wide allowance after headroom: at most `starts` per `intervalMs`, in any sliding window. */
  allowance?: { starts: number; intervalMs: number };
  /** The SLO's completeWithinMinutes, when the job has one. */
  sloMinutes?: number;
  /** QueueName dimensions of its work queue and DLQ (AWS/SQS samples), when known. */
  queueName?: string;
  dlqName?: string;
}

export interface ChartWindow {
  fromMs: number;
  toMs: number;
  /** bucket width; @default chosen from the span */
  stepMs?: number;
}

/** A chart's x axis: `count` buckets of `stepMs` from `startMs` (a multiple of the step at or before the window's start). */
export interface TimeAxis {
  startMs: number;
  stepMs: number;
  count: number;
  /** Epoch seconds of each bucket's start, as ChartSpec.x wants them. */
  x: number[];
}

/** A count at a moment: `count` events at `atMs` (a metric sample's value, or 1 for one logged event). */
export interface TimedCount {
  atMs: number;
  count: number;
}

/** The smallest whole step that cuts `spanMs` into at most TARGET_BUCKETS buckets. */
export function defaultStepMs(spanMs: number): number {
  const wanted = Math.max(0, spanMs) / TARGET_BUCKETS;
  return (
    NICE_STEPS_MS.find((s) => s >= wanted) ??
    Math.ceil(wanted / NICE_STEPS_MS[NICE_STEPS_MS.length - 1]) * NICE_STEPS_MS[NICE_STEPS_MS.length - 1]
  );
}

/** The buckets of `window`: aligned to the step, so two polls of a moving window share their buckets. */
export function timeAxis(window: ChartWindow): TimeAxis {
  const { fromMs, toMs } = window;
  if (!Number.isFinite(fromMs) || !Number.isFinite(toMs) || toMs < fromMs) {
    throw new ChartInputError(`a chart window needs finite fromMs <= toMs; got fromMs ${fromMs}, toMs ${toMs}`);
  }
  const stepMs = window.stepMs ?? defaultStepMs(toMs - fromMs);
  if (!(stepMs > 0) || !Number.isFinite(stepMs))
    throw new ChartInputError(`a chart's stepMs must be a positive number of milliseconds; got ${stepMs}`);
  const startMs = Math.floor(fromMs / stepMs) * stepMs;
  const count = Math.max(1, Math.ceil((toMs - startMs) / stepMs));
  if (count > MAX_BUCKETS) {
    throw new ChartInputError(
      `a chart window of ${toMs - fromMs} ms in steps of ${stepMs} ms is ${count} buckets, over the ${MAX_BUCKETS} a chart takes; pass a larger stepMs`,
    );
  }
  return { startMs, stepMs, count, x: Array.from({ length: count }, (_, i) => (startMs + i * stepMs) / 1000) };
}

/** Plain event times as counts of one. */
export const ofTimes = (times: readonly number[]): TimedCount[] => times.map((atMs) => ({ atMs, count: 1 }));

/** The events summed per bucket; 0 where a bucket has none. Events outside the axis are left out. */
export function countPerBucket(events: readonly TimedCount[], axis: TimeAxis): number[] {
  const out = new Array<number>(axis.count).fill(0);
  for (const e of events) {
    const i = Math.floor((e.atMs - axis.startMs) / axis.stepMs);
    if (i >= 0 && i < axis.count) out[i] += e.count;
  }
  return out;
}

/** The largest value per bucket; null where a bucket has none. */
export function maxPerBucket(events: readonly { atMs: number; value: number }[], axis: TimeAxis): (number | null)[] {
  const out = new Array<number | null>(axis.count).fill(null);
  for (const e of events) {
    const i = Math.floor((e.atMs - axis.startMs) / axis.stepMs);
    if (i >= 0 && i < axis.count) out[i] = Math.max(out[i] ?? Number.NEGATIVE_INFINITY, e.value);
  }
  return out;
}

/**
 * Per bucket, the most events in any sliding window of `windowMs` that ends inside the bucket: the figure the
 * allowance's guarantee (at most N per window, every window) is about. A plain count at each x could miss a peak
 * between two x; this cannot: the largest value over the axis is the busiest window that ends on it
 * (lambda/core/pacing/slidingWindow.ts maxInAnyWindow, for the events whose windows end there).
 *
 * How: a window [t - W, t) only gains an event as its end t passes one, so over the ends t in a bucket (s, s + step]
 * the count is largest just after it passed an event e of the bucket (the window (e - W, e]) or at the bucket's
 * opening (the window (s - W, s]); prefix sums over the sorted events make each of those one subtraction.
 */
export function peakInWindowPerBucket(events: readonly TimedCount[], axis: TimeAxis, windowMs: number): number[] {
  if (!(windowMs > 0))
    throw new ChartInputError(`a sliding window must be a positive number of milliseconds; got ${windowMs}`);
  const sorted = [...events].filter((e) => e.count !== 0).sort((a, b) => a.atMs - b.atMs);
  const times = sorted.map((e) => e.atMs);
  const prefix = [0];
  for (const e of sorted) prefix.push(prefix[prefix.length - 1] + e.count);
  /** The first index whose time is past `t` (strictly, or at or past it with `orAt`). */
  const search = (t: number, orAt: boolean): number => {
    let lo = 0;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (times[mid] < t || (!orAt && times[mid] === t)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  /** Events in (t - W, t]. */
  const endingAt = (t: number) => prefix[search(t, false)] - prefix[search(t - windowMs, false)];
  const out = new Array<number>(axis.count).fill(0);
  // Walks the events of the axis once, bucket by bucket; the ones before it count only through the windows.
  let k = search(axis.startMs, true);
  for (let i = 0; i < axis.count; i++) {
    const s = axis.startMs + i * axis.stepMs;
    let best = endingAt(s);
    for (; k < times.length && times[k] < s + axis.stepMs; k++) best = Math.max(best, endingAt(times[k]));
    out[i] = best;
  }
  return out;
}

/** `ms` as a reader says it: "500 ms", "1 s", "60 s", "5 min", "2 h". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000 || ms % 60_000 !== 0) return `${Number((ms / 1000).toFixed(3))} s`;
  if (ms < 7_200_000 || ms % 3_600_000 !== 0) return `${ms / 60_000} min`;
  return `${ms / 3_600_000} h`;
}

const round = (n: number, digits: number) => Number(n.toFixed(digits));

/** A line at `value` across the axis: an allowance, an SLO. */
export const flat = (axis: TimeAxis, value: number): number[] => new Array<number>(axis.count).fill(value);

/** One job's samples in the window, and what each of its charts reads them through. */
interface JobSeries {
  job: JobChartInput;
  axis: TimeAxis;
  /** The starts chart's window: the job's allowance interval, else DEFAULT_START_WINDOW_MS. */
  windowMs: number;
  /** The job's own samples (namespace PacedJobs, its `job` dimension) a window ending on the axis can still see. */
  own: MetricSample[];
  /** The own samples of the named metrics, as counts in time. */
  of: (...names: string[]) => TimedCount[];
  /** Counts as drawn: all null when the job emitted nothing at all in the window. */
  counts: (values: number[]) => (number | null)[];
  /** A chart's id, `<job>:<name>`. */
  id: (name: string) => string;
}

/**
 * The job's series over `window`.
 * @throws ChartInputError for an allowance with negative starts or no interval.
 */
function jobSeries(samples: readonly MetricSample[], job: JobChartInput, window: ChartWindow): JobSeries {
  const axis = timeAxis(window);
  const windowMs = job.allowance?.intervalMs ?? DEFAULT_START_WINDOW_MS;
  if (job.allowance && !(job.allowance.starts >= 0 && job.allowance.intervalMs > 0)) {
    throw new ChartInputError(
      `job ${job.job}: an allowance needs starts >= 0 and intervalMs > 0; got ${job.allowance.starts} per ${job.allowance.intervalMs} ms`,
    );
  }
  // Samples a window ending on the axis can still see: starts up to one window before its first bucket.
  const fromMs = axis.startMs - windowMs;
  const toMs = axis.startMs + axis.count * axis.stepMs;
  const own = samples.filter(
    (s) =>
      s.namespace === METRICS_NAMESPACE && s.dimensions.job === job.job && s.timestamp >= fromMs && s.timestamp < toMs,
  );
  const emitted = own.length > 0;
  return {
    job,
    axis,
    windowMs,
    own,
    of: (...names) =>
      own.filter((s) => names.includes(s.metricName)).map((s) => ({ atMs: s.timestamp, count: s.value })),
    counts: (values) => (emitted ? values : values.map(() => null)),
    id: (name) => `${job.job}:${name}`,
  };
}

/** The most starts in any window of the allowance's length, against the allowance. */
function startsChart({ job, axis, windowMs, of, counts, id }: JobSeries): ChartSpec {
  const windowText = formatDuration(windowMs);
  const startLines: ChartLine[] = [
    { label: 'starts', values: counts(peakInWindowPerBucket(of(...START_METRICS), axis, windowMs)) },
  ];
  if (job.allowance)
    startLines.push({
      label: `allowance (${job.allowance.starts} per ${windowText})`,
      kind: 'limit',
      values: flat(axis, job.allowance.starts),
    });
  return {
    id: id('starts'),
    title: `Starts in any ${windowText} window`,
    unit: `starts per ${windowText}`,
    x: axis.x,
    lines: startLines,
  };
}

/** Completed, deferred and throttled operations per bucket. */
function outcomesChart({ axis, of, counts, id }: JobSeries): ChartSpec {
  const stepText = formatDuration(axis.stepMs);
  return {
    id: id('outcomes'),
    title: `Outcomes per ${stepText}`,
    unit: `per ${stepText}`,
    x: axis.x,
    lines: [
      {
        label: 'completed',
        values: counts(countPerBucket(of(CHART_METRICS.Applied, CHART_METRICS.AlreadyDone), axis)),
      },
      { label: 'deferred', values: counts(countPerBucket(of(CHART_METRICS.Deferred), axis)) },
      { label: '429s', values: counts(countPerBucket(of(CHART_METRICS.Throttled), axis)) },
    ],
  };
}

/** The oldest operation's age at completion per bucket, against the SLO. */
function ageChart({ job, axis, own, id }: JobSeries): ChartSpec {
  // Minutes when the job has an SLO (its limit then reads in its own unit), seconds otherwise (a local run's ages).
  const inMinutes = job.sloMinutes !== undefined;
  const ageMs = own
    .filter((s) => s.metricName === CHART_METRICS.AgeSinceFirstEnqueue)
    .map((s) => ({ atMs: s.timestamp, value: s.value }));
  const age = maxPerBucket(ageMs, axis).map((v) =>
    v === null ? null : inMinutes ? round(v / 60_000, 3) : round(v / 1000, 2),
  );
  const ageLines: ChartLine[] = [{ label: 'oldest job age at completion', values: age }];
  if (job.sloMinutes !== undefined)
    ageLines.push({ label: `SLO (${job.sloMinutes} min)`, kind: 'limit', values: flat(axis, job.sloMinutes) });
  return {
    id: id('age'),
    title: 'Job age since first enqueue',
    unit: inMinutes ? 'minutes' : 'seconds',
    x: axis.x,
    lines: ageLines,
  };
}

/** The job's queue and DLQ depths (AWS/SQS by QueueName); undefined when the samples hold none. */
function queueChart(samples: readonly MetricSample[], { job, axis, id }: JobSeries): ChartSpec | undefined {
  const depth = (queueName: string | undefined, metricName: string) =>
    queueName === undefined
      ? []
      : samples
          .filter(
            (s) => s.namespace === 'AWS/SQS' && s.metricName === metricName && s.dimensions.QueueName === queueName,
          )
          .map((s) => ({ atMs: s.timestamp, value: s.value }));
  const queueLines: ChartLine[] = [
    { label: 'visible', values: maxPerBucket(depth(job.queueName, SQS_METRICS.visible), axis) },
    { label: 'in flight', values: maxPerBucket(depth(job.queueName, SQS_METRICS.inFlight), axis) },
    { label: 'delayed', values: maxPerBucket(depth(job.queueName, SQS_METRICS.delayed), axis) },
    { label: 'DLQ', values: maxPerBucket(depth(job.dlqName, SQS_METRICS.visible), axis) },
  ].filter((line) => line.values.some((v) => v !== null));
  if (queueLines.length === 0) return undefined;
  return {
    id: id('queue'),
    title: 'Queue depth (most per bucket)',
    unit: 'messages',
    x: axis.x,
    lines: queueLines,
  };
}

/**
 * The charts of one job over `window`, ids `<job>:starts`, `<job>:outcomes`, `<job>:age` and (when the samples hold
 * its queue's depth) `<job>:queue`. A job's samples are those of namespace PacedJobs whose `job` dimension is its name
 * (Powertools writes one dimension set, `service` and `job`, so each value is one sample); queue depth is AWS/SQS by
 * QueueName. Counts are 0 in an empty bucket, gauges null; but a job that emitted nothing at all in the window (never
 * fired yet) has null counts too, so its charts say "no data yet" rather than draw a flat zero.
 *
 * A sample's time is its invocation's metrics flush (Powertools stamps the EMF document as it is written), so a
 * batch's starts land together, up to one invocation (at most the short wait and the batch's applies) after they
 * happened. The starts curve is the fleet's pace to within an invocation, not the proof of the guarantee: chaos and
 * bench:pacing chart that from the provider's own arrival log.
 */
export function jobCharts(samples: readonly MetricSample[], job: JobChartInput, window: ChartWindow): ChartSpec[] {
  const series = jobSeries(samples, job, window);
  const charts = [startsChart(series), outcomesChart(series), ageChart(series)];
  const queue = queueChart(samples, series);
  if (queue) charts.push(queue);
  return charts;
}

/** The number of non-null points across a chart's non-limit lines: what console/web/charts.js puts in `data-points`. */
export function dataPoints(chart: ChartSpec): number {
  return chart.lines
    .filter((l) => l.kind !== 'limit')
    .reduce((n, l) => n + l.values.filter((v) => v !== null).length, 0);
}
