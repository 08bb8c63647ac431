// What CloudWatch would have collected from a local run, for the local alarm evaluator (local/alarms.ts) and the local
// CloudWatch API every session serves (local/cloudWatchApi.ts): the functions' EMF metrics off their log lines (as
// CloudWatch extracts them), the queues' depth metrics, sampled with GetQueueAttributes against the local SQS server
// (CloudWatch's AWS/SQS metrics are SQS's own answers, sampled), and what the emulated services publish themselves
// (the event source mappings' event counts, `record`). Not held: the AWS/SQS ages (ApproximateAgeOfOldestMessage and
// fair queues' ApproximateAgeOfOldestMessageInQuietGroups), which GetQueueAttributes does not answer; an alarm on
// them sees missing data locally.
import { GetQueueAttributesCommand, type QueueAttributeName, type SQSClient } from '@aws-sdk/client-sqs';
import { emfSamples, type MetricSample } from './metricsTap';

/** The AWS/SQS metric each GetQueueAttributes attribute is published as. */
export const SQS_DEPTH_METRICS = {
  ApproximateNumberOfMessages: 'ApproximateNumberOfMessagesVisible',
  ApproximateNumberOfMessagesNotVisible: 'ApproximateNumberOfMessagesNotVisible',
  ApproximateNumberOfMessagesDelayed: 'ApproximateNumberOfMessagesDelayed',
} as const;

export class MetricRecorderError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'MetricRecorderError';
  }
}

export interface WatchedQueue {
  url: string;
  /** The `QueueName` dimension of its AWS/SQS metrics. */
  queueName: string;
}

export interface MetricRecorderOptions {
  /** Client of the local SQS server. */
  sqs: SQSClient;
  /** Queues whose depth is sampled while the recorder runs. */
  queues: readonly WatchedQueue[];
  /** Between two samples of every queue: several per alarm period, so each period's Maximum sees its peak. @default 250 */
  pollIntervalMs?: number;
  /**
   * Samples whose timestamp is older than this are dropped, so a long-running recorder (`npm start -- --serve`) holds
   * the recent window only. Dropped at most once a second, from the oldest kept. @default Infinity (keep everything)
   */
  retentionMs?: number;
  /**
   * At most this many samples are kept: past it the oldest are dropped, down to nine tenths of it (so a full recorder
   * does not move its array at every line). A ceiling for bursts the retention alone would let pile up. @default Infinity
   */
  maxSamples?: number;
  /** The clock the retention is measured on (and a queue sample's timestamp). @default Date.now */
  now?: () => number;
}

/**
 * Collects metric samples: every EMF line fed to `observe` (always), and each watched queue's depth between `start`
 * and `stop`. A failed poll is not swallowed: `stop` (and `samples`) rethrow it. With a retention or a ceiling, the
 * oldest samples are dropped as new ones arrive (`dropped` counts them).
 */
export class MetricRecorder {
  private readonly recorded: MetricSample[] = [];
  private readonly pollIntervalMs: number;
  private readonly retentionMs: number;
  private readonly maxSamples: number;
  private readonly now: () => number;
  private lastTrimMs = 0;
  private droppedCount = 0;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private failure: Error | undefined;

  constructor(private readonly options: MetricRecorderOptions) {
    this.pollIntervalMs = options.pollIntervalMs ?? 250;
    this.retentionMs = options.retentionMs ?? Number.POSITIVE_INFINITY;
    this.maxSamples = options.maxSamples ?? Number.POSITIVE_INFINITY;
    this.now = options.now ?? Date.now;
    if (!(this.retentionMs > 0) || !(this.maxSamples >= 1)) {
      throw new MetricRecorderError(
        `retentionMs must be above 0 and maxSamples at least 1; got ${this.retentionMs} and ${this.maxSamples}`,
      );
    }
  }

  /** Feeds one line a function wrote (the session's `log` option); lines that are not EMF documents are ignored. */
  observe(line: string, arrivedAtMs = this.now()): void {
    for (const sample of emfSamples(line, arrivedAtMs)) this.recorded.push(sample);
    this.trim();
  }

  /** How many samples the retention and the ceiling have dropped so far. */
  get dropped(): number {
    return this.droppedCount;
  }

  /** Keeps one sample a local service published itself (an event source mapping's event count). */
  record(sample: MetricSample): void {
    this.recorded.push(sample);
    this.trim();
  }

  /** Starts sampling the queues (one sample at once, then every pollIntervalMs). */
  start(): void {
    if (this.timer) return;
    const tick = () => {
      this.polling = this.pollOnce().catch((error: unknown) => {
        this.failure ??= error instanceof Error ? error : new Error(String(error));
      });
      void this.polling.then(() => {
        if (this.timer) this.timer = setTimeout(tick, this.pollIntervalMs);
      });
    };
    this.timer = setTimeout(tick, 0);
  }

  /** Stops sampling once the poll under way has finished. */
  async stop(): Promise<void> {
    const timer = this.timer;
    this.timer = undefined;
    if (timer) clearTimeout(timer);
    await this.polling;
    this.throwIfFailed();
  }

  get running(): boolean {
    return this.timer !== undefined;
  }

  /** Everything recorded so far (EMF and queue samples), in arrival order. */
  samples(): readonly MetricSample[] {
    this.throwIfFailed();
    return this.recorded;
  }

  /** One sample of every watched queue now. */
  async pollOnce(): Promise<void> {
    await Promise.all(
      this.options.queues.map(async (queue) => {
        const timestamp = this.now();
        const attributes = Object.keys(SQS_DEPTH_METRICS) as (keyof typeof SQS_DEPTH_METRICS & QueueAttributeName)[];
        const { Attributes: a = {} } = await this.options.sqs.send(
          new GetQueueAttributesCommand({ QueueUrl: queue.url, AttributeNames: attributes }),
        );
        for (const attribute of attributes) {
          const metricName = SQS_DEPTH_METRICS[attribute];
          const value = Number(a[attribute]);
          if (Number.isFinite(value))
            this.recorded.push({
              namespace: 'AWS/SQS',
              metricName,
              dimensions: { QueueName: queue.queueName },
              timestamp,
              value,
            });
        }
      }),
    );
    this.trim();
  }

  /**
   * Drops what is past the retention or over the ceiling, from the front: samples arrive about in timestamp order, so
   * the oldest are there (one a little out of order waits its turn). In place (`samples()` is the live array), and at
   * most once a second for the retention, since a splice moves the whole array.
   */
  private trim(): void {
    const nowMs = this.now();
    let drop = this.recorded.length > this.maxSamples ? this.recorded.length - Math.floor(this.maxSamples * 0.9) : 0;
    if (this.retentionMs !== Number.POSITIVE_INFINITY && nowMs - this.lastTrimMs >= 1000) {
      this.lastTrimMs = nowMs;
      const cutoff = nowMs - this.retentionMs;
      while (drop < this.recorded.length && this.recorded[drop].timestamp < cutoff) drop++;
    }
    if (drop === 0) return;
    this.recorded.splice(0, drop);
    this.droppedCount += drop;
  }

  private throwIfFailed(): void {
    if (this.failure)
      throw new MetricRecorderError(`sampling the queues' depth failed: ${this.failure.message}`, {
        cause: this.failure,
      });
  }
}

/**
 * The oldest operation's age at completion (ms) among the samples: the job's largest AgeSinceFirstEnqueue, which SQS's
 * own age resets on every deferral; undefined when no operation of the job completed (the run report's figure).
 */
export function maxJobAgeMs(samples: readonly MetricSample[], job: string): number | undefined {
  let max: number | undefined;
  for (const s of samples) {
    if (s.metricName === 'AgeSinceFirstEnqueue' && s.dimensions.job === job && (max === undefined || s.value > max))
      max = s.value;
  }
  return max;
}
