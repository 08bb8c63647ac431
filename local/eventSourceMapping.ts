// Queue -> consumer: emulates Lambda's SQS event source mapping (pollers, batching window, maximum concurrency, partial
// batch responses). Visibility, receive counts and the DLQ move after maxReceiveCount are SQS's job: local-aws-sqs
// performs the redrive itself when a message's visibility times out at its maxReceiveCount-th receive, so the mapping,
// like Lambda's, never deletes a failed message or touches its visibility; it simply leaves it.
import { randomUUID } from 'node:crypto';
import { DeleteMessageBatchCommand, Message, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';

export interface EventSourceMappingConfig {
  uuid?: string;
  functionName: string;
  queueUrl: string;
  queueArn: string;
  /** @default 10 */
  batchSize?: number;
  /** @default 0 */
  maximumBatchingWindowSeconds?: number;
  /** ScalingConfig.MaximumConcurrency; absent means only the function's own concurrency bounds the pollers. */
  maximumConcurrency?: number;
  /** FunctionResponseTypes includes ReportBatchItemFailures. @default false */
  reportBatchItemFailures?: boolean;
  /** @default true */
  enabled?: boolean;
  region: string;
}

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
  peakConcurrency: number;
  /** SentTimestamp (ms) of the oldest message in the latest batch: how far behind the consumer runs. */
  oldestSentTimestamp?: number;
}

export interface EventSourceMappingOptions {
  sqs: SQSClient;
  invoke: Invoker;
  /** The target's own concurrency cap (reserved concurrency or the local unreserved cap). */
  functionConcurrency: number;
  log?: (line: string) => void;
  /** Idle poll backoff bounds. @default [50, 500] */
  idlePollMs?: [number, number];
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
        { stringValue: v.StringValue, binaryValue: v.BinaryValue ? Buffer.from(v.BinaryValue).toString('base64') : undefined, stringListValues: [], binaryListValues: [], dataType: v.DataType ?? 'String' },
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
export function failedMessageIds(outcome: { ok: true; value: unknown } | { ok: false }, batch: string[], reportBatchItemFailures: boolean): Set<string> {
  if (!outcome.ok) return new Set(batch);
  if (!reportBatchItemFailures) return new Set();
  const value = outcome.value as { batchItemFailures?: unknown } | null;
  if (value === null || value === undefined || typeof value !== 'object' || value.batchItemFailures === undefined || value.batchItemFailures === null) {
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

export class SqsEventSourceMapping {
  public readonly uuid: string;
  public readonly config: Required<Omit<EventSourceMappingConfig, 'maximumConcurrency' | 'uuid'>> & { maximumConcurrency?: number };
  private running = false;
  private pollers: Promise<void>[] = [];
  private active = 0;
  private readonly stats: EventSourceMappingStats = { invocations: 0, acknowledged: 0, failed: 0, invocationErrors: 0, duplicatesDropped: 0, peakConcurrency: 0 };

  constructor(config: EventSourceMappingConfig, private readonly options: EventSourceMappingOptions) {
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
  }

  /** Pollers allowed at once: the lower of the mapping's maximum concurrency and the function's concurrency. */
  get concurrency(): number {
    return Math.min(this.config.maximumConcurrency ?? Number.POSITIVE_INFINITY, this.options.functionConcurrency);
  }

  get statistics(): EventSourceMappingStats {
    return { ...this.stats };
  }

  /** Invocations running now. */
  get inFlight(): number {
    return this.active;
  }

  get state(): 'Enabled' | 'Disabled' {
    return this.running ? 'Enabled' : 'Disabled';
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.config.enabled = true;
    this.pollers = Array.from({ length: this.concurrency }, () => this.poll());
  }

  /** Stops polling; invocations in flight finish and acknowledge. */
  async stop(): Promise<void> {
    this.running = false;
    this.config.enabled = false;
    await Promise.all(this.pollers);
    this.pollers = [];
  }

  private async receive(max: number, seen: Set<string>): Promise<Message[]> {
    const got = await this.options.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: this.config.queueUrl,
        MaxNumberOfMessages: Math.min(10, max),
        // local-aws-sqs holds a long poll for its full duration; short polls plus the backoff below are equivalent.
        WaitTimeSeconds: 0,
        AttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    const fresh: Message[] = [];
    for (const m of got.Messages ?? []) {
      if (seen.has(m.MessageId!)) {
        this.stats.duplicatesDropped++;
        continue;
      }
      seen.add(m.MessageId!);
      fresh.push(m);
    }
    return fresh;
  }

  /** One poller: gathers a batch (size or window, whichever first), invokes, acknowledges. */
  private async poll(): Promise<void> {
    const [minIdle, maxIdle] = this.options.idlePollMs ?? [50, 500];
    let idle = minIdle;
    while (this.running) {
      try {
        const seen = new Set<string>();
        const batch = await this.receive(this.config.batchSize, seen);
        if (batch.length === 0) {
          await sleep(idle);
          idle = Math.min(maxIdle, idle * 2);
          continue;
        }
        idle = minIdle;
        const windowEnds = Date.now() + this.config.maximumBatchingWindowSeconds * 1000;
        while (this.running && batch.length < this.config.batchSize && Date.now() < windowEnds) {
          const more = await this.receive(this.config.batchSize - batch.length, seen);
          batch.push(...more);
          if (more.length === 0) await sleep(Math.min(minIdle * 2, Math.max(0, windowEnds - Date.now())));
        }
        await this.deliver(batch);
      } catch (error) {
        this.options.log?.(`event source mapping ${this.uuid} (${this.config.functionName}): ${(error as Error).message}`);
        await sleep(maxIdle);
      }
    }
  }

  private async deliver(batch: Message[]): Promise<void> {
    const event: SQSEvent = { Records: batch.map((m) => toSqsRecord(m, this.config.queueArn, this.config.region)) };
    const ids = batch.map((m) => m.MessageId!);
    this.stats.oldestSentTimestamp = Math.min(...batch.map((m) => Number(m.Attributes?.SentTimestamp ?? Date.now())));
    this.active++;
    this.stats.peakConcurrency = Math.max(this.stats.peakConcurrency, this.active);
    this.stats.invocations++;
    let outcome: { ok: true; value: unknown } | { ok: false };
    try {
      outcome = { ok: true, value: await this.options.invoke(event) };
    } catch (error) {
      this.stats.invocationErrors++;
      this.options.log?.(`event source mapping ${this.uuid}: ${this.config.functionName} failed a batch of ${batch.length}: ${(error as Error).message}`);
      outcome = { ok: false };
    } finally {
      this.active--;
    }
    const failed = failedMessageIds(outcome, ids, this.config.reportBatchItemFailures);
    const done = batch.filter((m) => !failed.has(m.MessageId!));
    this.stats.failed += failed.size;
    for (let i = 0; i < done.length; i += 10) {
      const chunk = done.slice(i, i + 10);
      const result = await this.options.sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: this.config.queueUrl,
          Entries: chunk.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
      this.stats.acknowledged += result.Successful?.length ?? 0;
      for (const f of result.Failed ?? []) this.options.log?.(`event source mapping ${this.uuid}: delete failed: ${f.Code} ${f.Message}`);
    }
  }
}
