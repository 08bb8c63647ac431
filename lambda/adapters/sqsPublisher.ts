// The producer's (and the consumer's re-publish) edge to SQS: SendMessageBatch in calls of 10, bounded parallelism,
// and retries of the entries SQS reports as Failed.
import { SendMessageBatchCommand, type SendMessageBatchRequestEntry, type SQSClient } from '@aws-sdk/client-sqs';
import { SQS_MAX_DELAY_SECONDS, SQS_MAX_MESSAGE_BYTES } from '../core/constants';
import { PacedJobsError } from '../core/errors';
import { assertBackoffOptions, backoffMs, type BackoffOptions, type RandomSource } from '../core/pacing/backoff';
import { sqsClient } from './clients';

/** One message to send. `operationId` names it in errors; SQS never sees it as an entry ID (it may hold ':'). */
export interface OutgoingMessage {
  operationId: string;
  body: string;
  /** 0..900; a deferral's wait. @default 0 (the queue's own delay) */
  delaySeconds?: number;
  /** String message attributes; empty values are dropped (SQS rejects them). */
  attributes?: Record<string, string>;
  /**
   * The message's tenant on a standard queue (SQS fair queues: MessageGroupId), e.g. the per-key limit's key: SQS
   * delivers quiet tenants' messages ahead of a noisy tenant's backlog. @default none
   */
  groupId?: string;
}

export interface PublishSummary {
  published: number;
  /** SendMessageBatch calls made, retries included. */
  calls: number;
  /** Entries sent again after SQS reported them Failed. */
  retried: number;
}

/** What the handlers depend on; tests may substitute it. */
export interface Publisher {
  publish(queueUrl: string, messages: OutgoingMessage[]): Promise<PublishSummary>;
}

export interface SqsPublisherOptions {
  /** @default the container's shared SQS client, resolved on first use */
  client?: Pick<SQSClient, 'send'>;
  /** Attempts per entry, the first included. @default 5 */
  maxAttempts?: number;
  /** SendMessageBatch calls in flight at once. @default 5 */
  parallelCalls?: number;
  /** First backoff ceiling; doubles per attempt (lambda/core/pacing/backoff.ts). @default 100 */
  baseDelayMs?: number;
  /** Backoff ceiling; at least baseDelayMs. @default 5000 */
  maxDelayMs?: number;
  /** @default setTimeout */
  sleep?: (ms: number) => Promise<void>;
  /** @default Math.random */
  random?: RandomSource;
}

/** SQS's ceiling for entries per SendMessageBatch call. */
export const MAX_BATCH_ENTRIES = 10;

export class PublishError extends PacedJobsError {
  constructor(
    message: string,
    public readonly queueUrl: string,
    /** Operation IDs that were not published, with the last reason SQS gave for each. */
    public readonly failures: Record<string, string>,
    /** How many of the messages were published before giving up. */
    public readonly published: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'PublishError';
  }

  get failedOperationIds(): string[] {
    return Object.keys(this.failures);
  }
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class SqsPublisher implements Publisher {
  private readonly maxAttempts: number;
  private readonly parallelCalls: number;
  private readonly backoff: BackoffOptions;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: RandomSource;

  constructor(private readonly options: SqsPublisherOptions = {}) {
    this.maxAttempts = options.maxAttempts ?? 5;
    this.parallelCalls = options.parallelCalls ?? 5;
    this.backoff = { baseMs: options.baseDelayMs ?? 100, capMs: options.maxDelayMs ?? 5000 };
    this.sleep = options.sleep ?? defaultSleep;
    this.random = options.random ?? Math.random;
    if (!Number.isInteger(this.maxAttempts) || this.maxAttempts < 1)
      throw new RangeError(`maxAttempts must be a positive integer, got ${this.maxAttempts}`);
    if (!Number.isInteger(this.parallelCalls) || this.parallelCalls < 1)
      throw new RangeError(`parallelCalls must be a positive integer, got ${this.parallelCalls}`);
    assertBackoffOptions(this.backoff);
  }

  /** @throws PublishError listing every operation ID that could not be published. */
  async publish(queueUrl: string, messages: OutgoingMessage[]): Promise<PublishSummary> {
    for (const m of messages) {
      if (
        m.delaySeconds !== undefined &&
        (!Number.isInteger(m.delaySeconds) || m.delaySeconds < 0 || m.delaySeconds > SQS_MAX_DELAY_SECONDS)
      ) {
        throw new RangeError(
          `delaySeconds for ${m.operationId} must be an integer from 0 to ${SQS_MAX_DELAY_SECONDS}, got ${m.delaySeconds}`,
        );
      }
    }
    const chunks = chunkForBatch(messages);
    const outcomes = await mapBounded(chunks, this.parallelCalls, (chunk) => this.sendChunk(queueUrl, chunk));
    const summary: PublishSummary = { published: 0, calls: 0, retried: 0 };
    const failures: Record<string, string> = {};
    for (const o of outcomes) {
      summary.published += o.published;
      summary.calls += o.calls;
      summary.retried += o.retried;
      Object.assign(failures, o.failures);
    }
    const failed = Object.keys(failures);
    if (failed.length > 0) {
      throw new PublishError(
        `failed to publish ${failed.length} of ${messages.length} messages to ${queueUrl}: ${failed.join(', ')}`,
        queueUrl,
        failures,
        summary.published,
      );
    }
    return summary;
  }

  private async sendChunk(queueUrl: string, chunk: OutgoingMessage[]) {
    const client = this.options.client ?? sqsClient();
    // Entry IDs only need to be unique within one call; the index into the chunk is, and is always a valid ID.
    let pending = chunk.map((message, index) => ({ id: String(index), message }));
    const failures: Record<string, string> = {};
    let published = 0;
    let calls = 0;
    let retried = 0;
    for (let attempt = 1; pending.length > 0; attempt++) {
      if (attempt > 1) {
        retried += pending.length;
        // Full jitter, so parallel callers do not retry in lockstep; the first retry is the backoff's attempt 0.
        await this.sleep(backoffMs(attempt - 2, this.backoff, this.random));
      }
      calls++;
      let result;
      try {
        result = await client.send(
          new SendMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: pending.map(({ id, message }) => toEntry(id, message)),
          }),
        );
      } catch (error) {
        // The SDK has already retried the call itself; what reaches us is final for these entries.
        for (const { message } of pending)
          failures[message.operationId] = `SendMessageBatch failed: ${(error as Error).message}`;
        return { published, calls, retried, failures };
      }
      published += result.Successful?.length ?? 0;
      const failedById = new Map((result.Failed ?? []).map((f) => [f.Id, f]));
      const next: typeof pending = [];
      for (const entry of pending) {
        const failure = failedById.get(entry.id);
        if (!failure) continue;
        const reason = `${failure.Code ?? 'Unknown'}: ${failure.Message ?? 'no message'}`;
        // A sender fault (bad attribute, oversize body) fails the same way every time; only server faults can heal.
        if (failure.SenderFault || attempt >= this.maxAttempts) failures[entry.message.operationId] = reason;
        else next.push(entry);
      }
      pending = next;
    }
    return { published, calls, retried, failures };
  }
}

function toEntry(id: string, message: OutgoingMessage): SendMessageBatchRequestEntry {
  const attributes = Object.entries(message.attributes ?? {}).filter(([, v]) => v !== '');
  return {
    Id: id,
    MessageBody: message.body,
    DelaySeconds: message.delaySeconds,
    ...(message.groupId !== undefined ? { MessageGroupId: message.groupId } : {}),
    MessageAttributes: attributes.length
      ? Object.fromEntries(attributes.map(([k, v]) => [k, { DataType: 'String', StringValue: v }]))
      : undefined,
  };
}

/** Splits into calls of at most 10 entries whose bodies together stay within SQS's per-call payload ceiling. */
export function chunkForBatch(messages: OutgoingMessage[], maxBytes = SQS_MAX_MESSAGE_BYTES): OutgoingMessage[][] {
  const chunks: OutgoingMessage[][] = [];
  let current: OutgoingMessage[] = [];
  let bytes = 0;
  for (const m of messages) {
    const size = Buffer.byteLength(m.body, 'utf8');
    if (current.length === MAX_BATCH_ENTRIES || (current.length > 0 && bytes + size > maxBytes)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(m);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/**
 * Promise.all with at most `limit` in flight. Hand-written: the usual library (p-limit) is ESM-only, which this
 * CommonJS build and its tests cannot require, and the whole pool is a dozen lines.
 */
export async function mapBounded<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
