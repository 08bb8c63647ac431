// Reads the functions' own CloudWatch embedded-metric (EMF) log lines, as CloudWatch would, so the local report can
// show figures that exist only as metrics (the true job age since first enqueue, which SQS's own age resets on
// deferral), and the local alarm evaluator (local/alarms.ts) gets each metric's datapoints (emfSamples).

/** One value of one metric, as CloudWatch stores it from an EMF document: what an alarm's MetricStat aggregates. */
export interface MetricSample {
  namespace: string;
  metricName: string;
  /** Every dimension of the sample's dimension set, by name (CloudWatch matches a metric on all of them). */
  dimensions: Record<string, string>;
  /** Epoch ms: the document's `_aws.Timestamp`, or when the line arrived if it has none. */
  timestamp: number;
  value: number;
}

/** The EMF document a log line holds (a JSON object with `_aws`), or undefined for any other line. */
export function parseEmf(line: string): Record<string, unknown> | undefined {
  if (!line.includes('"_aws"')) return undefined;
  const start = line.indexOf('{');
  if (start < 0) return undefined;
  try {
    const doc = JSON.parse(line.slice(start)) as unknown;
    return typeof doc === 'object' && doc !== null && !Array.isArray(doc)
      ? (doc as Record<string, unknown>)
      : undefined;
  } catch {
    // A line that looks like EMF but is not JSON is not a metric: CloudWatch would not extract one either.
    return undefined;
  }
}

/** Powertools writes a single value, or an array when the same metric was added several times before one flush. */
function numbersOf(value: unknown): number[] {
  return (Array.isArray(value) ? value : [value]).filter(
    (v): v is number => typeof v === 'number' && Number.isFinite(v),
  );
}

interface MetricDirective {
  Namespace?: unknown;
  Dimensions?: unknown;
  Metrics?: unknown;
}

/**
 * The samples one log line carries, as CloudWatch extracts them from an EMF document: for every directive in
 * `_aws.CloudWatchMetrics`, every dimension set and every metric it names, one sample per value of the metric's
 * root key (a number or an array of numbers). A dimension set naming a key the document lacks yields nothing.
 */
export function emfSamples(line: string, arrivedAtMs = Date.now()): MetricSample[] {
  const doc = parseEmf(line);
  if (!doc) return [];
  const aws = doc._aws as { Timestamp?: unknown; CloudWatchMetrics?: unknown } | undefined;
  if (!aws || !Array.isArray(aws.CloudWatchMetrics)) return [];
  const timestamp = typeof aws.Timestamp === 'number' && Number.isFinite(aws.Timestamp) ? aws.Timestamp : arrivedAtMs;
  const samples: MetricSample[] = [];
  for (const directive of aws.CloudWatchMetrics as MetricDirective[]) {
    if (typeof directive?.Namespace !== 'string' || !Array.isArray(directive.Metrics)) continue;
    const sets =
      Array.isArray(directive.Dimensions) && directive.Dimensions.length > 0
        ? (directive.Dimensions as unknown[])
        : [[]];
    for (const set of sets) {
      if (!Array.isArray(set)) continue;
      const names = set.filter((n): n is string => typeof n === 'string');
      if (names.some((n) => typeof doc[n] !== 'string')) continue;
      const dimensions = Object.fromEntries(names.map((n) => [n, doc[n] as string]));
      for (const metric of directive.Metrics as { Name?: unknown }[]) {
        if (typeof metric?.Name !== 'string') continue;
        for (const value of numbersOf(doc[metric.Name])) {
          samples.push({ namespace: directive.Namespace, metricName: metric.Name, dimensions, timestamp, value });
        }
      }
    }
  }
  return samples;
}

/** Largest AgeSinceFirstEnqueue (ms) seen per job. */
export class MetricsTap {
  private readonly maxAgeMs = new Map<string, number>();

  /** Feeds one line a function wrote; lines that are not EMF documents are ignored. */
  observe(line: string): void {
    const doc = parseEmf(line);
    if (!doc) return;
    const job = doc.job;
    const ages = numbersOf(doc.AgeSinceFirstEnqueue);
    if (typeof job !== 'string' || ages.length === 0) return;
    this.maxAgeMs.set(job, Math.max(this.maxAgeMs.get(job) ?? 0, ...ages));
  }

  /** The oldest operation's age at completion, in ms; undefined when no operation of the job completed. */
  maxJobAgeMs(job: string): number | undefined {
    return this.maxAgeMs.get(job);
  }
}
