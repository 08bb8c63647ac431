// What CloudWatch would have collected from a local run, for the local alarm evaluator (local/alarms.ts): the
// functions' EMF metrics off their log lines (as CloudWatch extracts them) and the queues' depth metrics, sampled with
// GetQueueAttributes against the local SQS server (CloudWatch's AWS/SQS metrics are SQS's own answers, sampled).
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
}

/**
 * Collects metric samples: every EMF line fed to `observe` (always), and each watched queue's depth between `start`
 * and `stop`. A failed poll is not swallowed: `stop` (and `samples`) rethrow it.
 */
export class MetricRecorder {
  private readonly recorded: MetricSample[] = [];
  private readonly pollIntervalMs: number;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private failure: Error | undefined;

  constructor(private readonly options: MetricRecorderOptions) {
    this.pollIntervalMs = options.pollIntervalMs ?? 250;
  }

  /** Feeds one line a function wrote (the session's `log` option); lines that are not EMF documents are ignored. */
  observe(line: string, arrivedAtMs = Date.now()): void {
    for (const sample of emfSamples(line, arrivedAtMs)) this.recorded.push(sample);
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
        const timestamp = Date.now();
        const attributes = Object.keys(SQS_DEPTH_METRICS) as (keyof typeof SQS_DEPTH_METRICS & QueueAttributeName)[];
        const { Attributes: a = {} } = await this.options.sqs.send(new GetQueueAttributesCommand({ QueueUrl: queue.url, AttributeNames: attributes }));
        for (const attribute of attributes) {
          const metricName = SQS_DEPTH_METRICS[attribute];
          const value = Number(a[attribute]);
          if (Number.isFinite(value)) this.recorded.push({ namespace: 'AWS/SQS', metricName, dimensions: { QueueName: queue.queueName }, timestamp, value });
        }
      }),
    );
  }

  private throwIfFailed(): void {
    if (this.failure) throw new MetricRecorderError(`sampling the queues' depth failed: ${this.failure.message}`, { cause: this.failure });
  }
}
