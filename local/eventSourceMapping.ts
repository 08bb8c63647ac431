// Queue -> consumer: emulates Lambda's SQS event source mapping (pollers that scale as AWS's do, batching window,
// maximum concurrency, the 6 MB payload cap, partial batch responses). Visibility, receive counts and the DLQ move
// after maxReceiveCount are SQS's job: local-aws-sqs performs the redrive itself when a message's visibility times out
// at its maxReceiveCount-th receive, so the mapping, like Lambda's, never deletes a failed message or touches its
// visibility; it simply leaves it. The one visibility change it makes is Lambda's own: records received beyond the
// payload cap are released at once for a later batch. With `onMetric` it publishes what a mapping whose MetricsConfig
// asks for EventCount publishes on AWS (EVENT_COUNT_METRICS), so the alarms on them run on a local run's samples.
import { randomUUID } from 'node:crypto';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import type { MetricSample } from './metricsTap';

/** A synchronous invocation's request payload is at most 6 MB (Lambda quotas); a batch never exceeds it. */
export const SYNC_INVOCATION_PAYLOAD_LIMIT_BYTES = 6_291_456;

/**
 * How Lambda scales an SQS event source (services-sqs-scaling): five concurrent batches when messages arrive, up to
 * 300 more per minute while messages are still available, at most 1,000 at once; back to five when traffic is low,
 * and as few as two when the mapping sets no maximum concurrency.
 */
export const SQS_SCALING = { initialBatches: 5, scaleUpPerMinute: 300, floorBatches: 2, maximumBatches: 1000 } as const;

export interface EventSourceMappingConfig {
  uuid?: string;
  functionName: string;
  queueUrl: string;
  queueArn: string;
  /** @default 10 */
  batchSize?: number;
  /** @default 0 */
  maximumBatchingWindowSeconds?: number;
  /** ScalingConfig.MaximumConcurrency; absent means 1,000 batches, and the function's own concurrency, bound the pollers. */
  maximumConcurrency?: number;
  /** FunctionResponseTypes includes ReportBatchItemFailures. @default false */
  reportBatchItemFailures?: boolean;
  /** @default true */
  enabled?: boolean;
  region: string;
}

/**
 * An event source mapping's event counts (AWS/Lambda, dimension EventSourceMappingUUID), as published here per
 * delivered batch: the records polled and invoked with, those the invocation failed (it threw, timed out or was
 * throttled: the whole batch; else the ones it listed in batchItemFailures) and those deleted after it. An SQS mapping
 * drops nothing (DroppedEventCount): failed messages stay on the queue and its redrive policy retires them.
 */
export const EVENT_COUNT_METRICS = {
  polled: 'PolledEventCount',
  invoked: 'InvokedEventCount',
  failedInvoke: 'FailedInvokeEventCount',
  deleted: 'DeletedEventCount',
} as const;

/** What an invocation of the target function did: a value, or an error (threw, timed out, throttled). */
export type Invoker = (event: SQSEvent) => Promise<unknown>;

export interface EventSourceMappingStats {
  invocations: number;
  /** Messages deleted after a successful invocation. */
  acknowledged: number;
  /** Messages left on the queue because the invocation failed or listed them as failures. */
  failed: number;
  /** Invocations that threw (including timeouts). */
  invocationErrors: number;
  /** Same message returned twice in one receive response (a local-aws-sqs quirk), dropped. */
  duplicatesDropped: number;
  /** Records received that did not fit the batch's payload cap, released back to the queue for a later batch. */
  releasedOverPayloadCap: number;
  /** Most invocations running at once. */
  peakConcurrency: number;
  /** Most batch pollers running at once (the scaling's high point; at most `concurrency`). */
  peakPollers: number;
  /** SentTimestamp (ms) of the oldest message in the latest batch: how far behind the consumer runs. */
  oldestSentTimestamp?: number;
}

/** The ramp's constants; each defaults to AWS's (SQS_SCALING). Tests speed them up; the product keeps AWS's. */
export interface EventSourceScaling {
  /** Concurrent batches when messages are available, and the level traffic falls back to. @default 5 */
  initialBatches?: number;
  /** Pollers added per minute while messages are still available. @default 300 */
  scaleUpPerMinute?: number;
  /** Lowest level when the queue stays empty; only without maximumConcurrency (AWS keeps five with it). @default 2 */
  floorBatches?: number;
}

export interface EventSourceMappingOptions {
  sqs: SQSClient;
  invoke: Invoker;
  /** The target's own concurrency cap (reserved concurrency or the local unreserved cap). */
  functionConcurrency: number;
  log?: (line: string) => void;
  /** Idle poll backoff bounds. @default [50, 500] */
  idlePollMs?: [number, number];
  /** @default AWS's: SQS_SCALING */
  scaling?: EventSourceScaling;
  /** Largest serialized event handed to the function. @default SYNC_INVOCATION_PAYLOAD_LIMIT_BYTES */
  maxPayloadBytes?: number;
  /** Called each time the number of pollers changes, with the new number (for reports and tests). */
  onPollersChanged?: (pollers: number) => void;
  /** Receives the mapping's event counts (EVENT_COUNT_METRICS) as CloudWatch would store them; none when absent. */
  onMetric?: (sample: MetricSample) => void;
  /**
   * The ramp's clock: calls `tick` every `everyMs` until the function it returns is called. A test ticks it by hand,
   * to count pollers per tick rather than time them.
   * @default setInterval (unref'd: the ramp alone does not keep the process alive)
   */
  rampTicks?: (tick: () => void, everyMs: number) => () => void;
}

function intervalTicks(tick: () => void, everyMs: number): () => void {
  const timer = setInterval(tick, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The SQS record Lambda hands the function, built from a received message. */
export function toSqsRecord(message: Message, queueArn: string, region: string): SQSRecord {
  const attrs = message.Attributes ?? {};
  return {
    messageId: message.MessageId!,
    receiptHandle: message.ReceiptHandle!,
    body: message.Body ?? '',
    attributes: {
      ApproximateReceiveCount: attrs.ApproximateReceiveCount ?? '1',
      SentTimestamp: attrs.SentTimestamp ?? String(Date.now()),
      SenderId: attrs.SenderId ?? 'local',
      ApproximateFirstReceiveTimestamp: attrs.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
    },
    messageAttributes: Object.fromEntries(
      Object.entries(message.MessageAttributes ?? {}).map(([k, v]) => [
        k,
        {
          stringValue: v.StringValue,
          binaryValue: v.BinaryValue ? Buffer.from(v.BinaryValue).toString('base64') : undefined,
          stringListValues: [],
          binaryListValues: [],
          dataType: v.DataType ?? 'String',
        },
      ]),
    ),
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}

/**
 * Which messages of a batch the function succeeded on, per the documented rules: a thrown error fails the whole
 * batch; with ReportBatchItemFailures, the listed itemIdentifiers fail and the rest succeed; a malformed response, or
 * an identifier that is empty or not in the batch, fails the whole batch.
 */
export function failedMessageIds(
  outcome: { ok: true; value: unknown } | { ok: false },
  batch: string[],
  reportBatchItemFailures: boolean,
): Set<string> {
  if (!outcome.ok) return new Set(batch);
  if (!reportBatchItemFailures) return new Set();
  const value = outcome.value as { batchItemFailures?: unknown } | null;
  if (
    value === null ||
    value === undefined ||
    typeof value !== 'object' ||
    value.batchItemFailures === undefined ||
    value.batchItemFailures === null
  ) {
    return new Set();
  }
  if (!Array.isArray(value.batchItemFailures)) return new Set(batch);
  const ids = new Set<string>();
  for (const item of value.batchItemFailures as { itemIdentifier?: unknown }[]) {
    const id = item?.itemIdentifier;
    if (typeof id !== 'string' || id === '' || !batch.includes(id)) return new Set(batch);
    ids.add(id);
  }
  return ids;
}

/** `{"Records":[]}`: the event's bytes around its records. */
const EVENT_ENVELOPE_BYTES = Buffer.byteLength(JSON.stringify({ Records: [] }));

/** A batch being gathered: its records and the size of the event they make, kept under the payload cap. */
class Batch {
  readonly messages: Message[] = [];
  readonly records: SQSRecord[] = [];
  /** Received but over the cap: to be released. */
  readonly overflow: Message[] = [];
  private bytes = EVENT_ENVELOPE_BYTES;

  constructor(
    private readonly capBytes: number,
    private readonly queueArn: string,
    private readonly region: string,
  ) {}

  get length(): number {
    return this.records.length;
  }

  /** Whether the cap stopped the batch: nothing more is gathered once a record did not fit. */
  get capped(): boolean {
    return this.overflow.length > 0;
  }

  /** Adds in order while the event stays within the cap; the first record that does not fit, and all after it, overflow. */
  add(messages: Message[]): void {
    for (const m of messages) {
      if (this.capped) {
        this.overflow.push(m);
        continue;
      }
      const record = toSqsRecord(m, this.queueArn, this.region);
      const size = Buffer.byteLength(JSON.stringify(record)) + (this.records.length > 0 ? 1 : 0);
      // A batch always takes its first record: SQS caps a message far below the payload cap, so this only matters
      // with a lowered cap, and an empty batch would never drain the queue.
      if (this.records.length > 0 && this.bytes + size > this.capBytes) {
        this.overflow.push(m);
        continue;
      }
      this.bytes += size;
      this.messages.push(m);
      this.records.push(record);
    }
  }
}

export class SqsEventSourceMapping {
  public readonly uuid: string;
  public readonly config: Required<Omit<EventSourceMappingConfig, 'maximumConcurrency' | 'uuid'>> & {
    maximumConcurrency?: number;
  };
  private running = false;
  private readonly pollers = new Set<Promise<void>>();
  private live = 0;
  private active = 0;
  /** Records in the batches being invoked (recordsHeld). */
  private held = 0;
  /**
   * Whether messages are still available, as the latest receive saw it: it returned all it asked for (or more than
   * fit the payload cap). That answer comes with every receive, so the scaler costs no SQS request of its own; a
   * GetQueueAttributes per decision would add one, and its counts are approximate anyway. A receive that returns
   * fewer than asked (the visible messages ran out) clears it.
   */
  private backlog = false;
  private stopRamp?: () => void;
  private readonly scaling: Required<EventSourceScaling>;
  private readonly stats: EventSourceMappingStats = {
    invocations: 0,
    acknowledged: 0,
    failed: 0,
    invocationErrors: 0,
    duplicatesDropped: 0,
    releasedOverPayloadCap: 0,
    peakConcurrency: 0,
    peakPollers: 0,
  };

  constructor(
    config: EventSourceMappingConfig,
    private readonly options: EventSourceMappingOptions,
  ) {
    this.uuid = config.uuid ?? randomUUID();
    this.config = {
      functionName: config.functionName,
      queueUrl: config.queueUrl,
      queueArn: config.queueArn,
      batchSize: config.batchSize ?? 10,
      maximumBatchingWindowSeconds: config.maximumBatchingWindowSeconds ?? 0,
      maximumConcurrency: config.maximumConcurrency,
      reportBatchItemFailures: config.reportBatchItemFailures ?? false,
      enabled: config.enabled ?? true,
      region: config.region,
    };
    this.scaling = {
      initialBatches: options.scaling?.initialBatches ?? SQS_SCALING.initialBatches,
      scaleUpPerMinute: options.scaling?.scaleUpPerMinute ?? SQS_SCALING.scaleUpPerMinute,
      floorBatches: options.scaling?.floorBatches ?? SQS_SCALING.floorBatches,
    };
  }

  /**
   * The most pollers (concurrent batches) the mapping can reach: the lowest of its maximum concurrency, the 1,000
   * batches an event source mapping processes at most, and the function's concurrency. The pollers start lower and
   * ramp up to it (activePollers).
   */
  get concurrency(): number {
    return Math.min(
      this.config.maximumConcurrency ?? SQS_SCALING.maximumBatches,
      SQS_SCALING.maximumBatches,
      this.options.functionConcurrency,
    );
  }

  /** Batch pollers running now: between the floor and `concurrency`, following the queue. */
  get activePollers(): number {
    return this.live;
  }

  /** The SQS client the mapping polls with (its function's role, on the local stack): for request counting. */
  get client(): SQSClient {
    return this.options.sqs;
  }

  get statistics(): EventSourceMappingStats {
    return { ...this.stats };
  }

  /** Invocations running now. */
  get inFlight(): number {
    return this.active;
  }

  /**
   * Records in the batches of the invocations running now: work the function holds, as against in-flight messages
   * no invocation holds (a failed record waiting out its visibility timeout).
   */
  get recordsHeld(): number {
    return this.held;
  }

  get state(): 'Enabled' | 'Disabled' {
    return this.running ? 'Enabled' : 'Disabled';
  }

  /** The level pollers start at and traffic falls back to. */
  private get lowTraffic(): number {
    return Math.min(this.scaling.initialBatches, this.concurrency);
  }

  /** The fewest pollers kept while the queue stays empty: AWS's cost optimization does not apply with a maximum concurrency. */
  private get floor(): number {
    return this.config.maximumConcurrency === undefined
      ? Math.min(this.scaling.floorBatches, this.lowTraffic)
      : this.lowTraffic;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.config.enabled = true;
    this.backlog = false;
    for (let i = 0; i < this.lowTraffic; i++) this.spawn();
    if (this.scaling.scaleUpPerMinute > 0) {
      // One poller per tick: 300 a minute is one every 200 ms, never a burst.
      this.stopRamp = (this.options.rampTicks ?? intervalTicks)(() => {
        if (this.running && this.backlog && this.live < this.concurrency) this.spawn();
      }, 60_000 / this.scaling.scaleUpPerMinute);
    }
  }

  /** Stops polling; invocations in flight finish and acknowledge. */
  async stop(): Promise<void> {
    this.running = false;
    this.config.enabled = false;
    this.stopRamp?.();
    this.stopRamp = undefined;
    await Promise.all([...this.pollers]);
  }

  private spawn(): void {
    this.live++;
    this.stats.peakPollers = Math.max(this.stats.peakPollers, this.live);
    this.options.onPollersChanged?.(this.live);
    const poller: Promise<void> = this.poll().finally(() => this.pollers.delete(poller));
    this.pollers.add(poller);
  }

  /** Messages arrived while fewer than the low-traffic level poll (after a quiet spell at the floor): back to it at once. */
  private topUp(): void {
    while (this.running && this.live < this.lowTraffic) this.spawn();
  }

  /**
   * Whether a poller that just found the queue empty retires: at once above the low-traffic level; below it, down to
   * the floor, only once it has polled empty long enough for its backoff to reach the maximum.
   */
  private retires(idleMs: number, maxIdleMs: number): boolean {
    if (this.live > this.lowTraffic) return true;
    return this.live > this.floor && idleMs >= maxIdleMs;
  }

  private async receive(max: number, seen: Set<string>): Promise<Message[]> {
    const asked = Math.min(10, max);
    const got = await this.options.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: this.config.queueUrl,
        MaxNumberOfMessages: asked,
        // local-aws-sqs holds a long poll for its full duration; short polls plus the backoff below are equivalent.
        WaitTimeSeconds: 0,
        AttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    const messages = got.Messages ?? [];
    this.backlog = messages.length >= asked;
    const fresh: Message[] = [];
    for (const m of messages) {
      if (seen.has(m.MessageId!)) {
        this.stats.duplicatesDropped++;
        continue;
      }
      seen.add(m.MessageId!);
      fresh.push(m);
    }
    return fresh;
  }

  /** One poller: gathers a batch (size, window or payload cap, whichever first), invokes, acknowledges. */
  private async poll(): Promise<void> {
    const [minIdle, maxIdle] = this.options.idlePollMs ?? [50, 500];
    const cap = this.options.maxPayloadBytes ?? SYNC_INVOCATION_PAYLOAD_LIMIT_BYTES;
    let idle = minIdle;
    try {
      while (this.running) {
        try {
          const seen = new Set<string>();
          const batch = new Batch(cap, this.config.queueArn, this.config.region);
          batch.add(await this.receive(this.config.batchSize, seen));
          if (batch.length === 0) {
            if (this.retires(idle, maxIdle)) return;
            await sleep(idle);
            idle = Math.min(maxIdle, idle * 2);
            continue;
          }
          idle = minIdle;
          this.topUp();
          const windowEnds = Date.now() + this.config.maximumBatchingWindowSeconds * 1000;
          while (this.running && !batch.capped && batch.length < this.config.batchSize && Date.now() < windowEnds) {
            const more = await this.receive(this.config.batchSize - batch.length, seen);
            batch.add(more);
            if (more.length === 0) await sleep(Math.min(minIdle * 2, Math.max(0, windowEnds - Date.now())));
          }
          if (batch.capped) await this.release(batch.overflow);
          await this.deliver(batch);
        } catch (error) {
          this.options.log?.(
            `event source mapping ${this.uuid} (${this.config.functionName}): ${(error as Error).message}`,
          );
          await sleep(maxIdle);
        }
      }
    } finally {
      // Synchronous with the decision to leave, so the next poller's retires() already counts this one gone.
      this.live--;
      this.options.onPollersChanged?.(this.live);
    }
  }

  /** Makes records that did not fit the payload cap visible again at once, for a later batch (as Lambda does). */
  private async release(messages: Message[]): Promise<void> {
    // They were received, so more is waiting than one batch carries.
    this.backlog = true;
    for (let i = 0; i < messages.length; i += 10) {
      const chunk = messages.slice(i, i + 10);
      const result = await this.options.sqs.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: this.config.queueUrl,
          Entries: chunk.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle!, VisibilityTimeout: 0 })),
        }),
      );
      this.stats.releasedOverPayloadCap += result.Successful?.length ?? 0;
      // Not released: it stays invisible until its visibility timeout, then comes back; slower, never lost.
      for (const f of result.Failed ?? [])
        this.options.log?.(
          `event source mapping ${this.uuid}: release over the payload cap failed: ${f.Code} ${f.Message}`,
        );
    }
  }

  private publish(metricName: (typeof EVENT_COUNT_METRICS)[keyof typeof EVENT_COUNT_METRICS], value: number): void {
    this.options.onMetric?.({
      namespace: 'AWS/Lambda',
      metricName,
      dimensions: { EventSourceMappingUUID: this.uuid },
      timestamp: Date.now(),
      value,
    });
  }

  private async deliver(batch: Batch): Promise<void> {
    const event: SQSEvent = { Records: batch.records };
    const ids = batch.messages.map((m) => m.MessageId!);
    this.publish(EVENT_COUNT_METRICS.polled, ids.length);
    this.publish(EVENT_COUNT_METRICS.invoked, ids.length);
    this.stats.oldestSentTimestamp = Math.min(
      ...batch.messages.map((m) => Number(m.Attributes?.SentTimestamp ?? Date.now())),
    );
    this.active++;
    this.held += ids.length;
    this.stats.peakConcurrency = Math.max(this.stats.peakConcurrency, this.active);
    this.stats.invocations++;
    let outcome: { ok: true; value: unknown } | { ok: false };
    try {
      outcome = { ok: true, value: await this.options.invoke(event) };
    } catch (error) {
      this.stats.invocationErrors++;
      this.options.log?.(
        `event source mapping ${this.uuid}: ${this.config.functionName} failed a batch of ${ids.length}: ${(error as Error).message}`,
      );
      outcome = { ok: false };
    } finally {
      this.active--;
      this.held -= ids.length;
    }
    const failed = failedMessageIds(outcome, ids, this.config.reportBatchItemFailures);
    const done = batch.messages.filter((m) => !failed.has(m.MessageId!));
    this.stats.failed += failed.size;
    if (failed.size > 0) this.publish(EVENT_COUNT_METRICS.failedInvoke, failed.size);
    for (let i = 0; i < done.length; i += 10) {
      const chunk = done.slice(i, i + 10);
      const result = await this.options.sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: this.config.queueUrl,
          Entries: chunk.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
      this.stats.acknowledged += result.Successful?.length ?? 0;
      if (result.Successful?.length) this.publish(EVENT_COUNT_METRICS.deleted, result.Successful.length);
      for (const f of result.Failed ?? [])
        this.options.log?.(`event source mapping ${this.uuid}: delete failed: ${f.Code} ${f.Message}`);
    }
  }
}
