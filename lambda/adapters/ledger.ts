// The run ledger's write side: per-batch counters (producer and consumer) and rejected messages kept for review.
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { PutCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import {
  BATCH_COUNTERS,
  INVOCATION_COUNTERS,
  ledgerKeys,
  REJECTED_RETENTION_DAYS,
  type BatchCounters,
  type InvocationRecord,
} from '../core/ledgerContract';
import { documentClient } from './clients';

// The counters, the key layout and the reconciliation rule are the ledger's contract (lambda/core/ledgerContract.ts).
export type { BatchCounters } from '../core/ledgerContract';

/** Facts about a batch. `startedAt` and the run identity are written once; `finishedAt` by the last producer page. */
export interface BatchInfo {
  businessDate?: string;
  scheduledTime?: string;
  startedAt?: string;
  finishedAt?: string;
  /**
   * The oldest message's age at consumption, since its first enqueue (ms). Kept as a maximum: a smaller value never
   * overwrites a larger one.
   */
  oldestMessageAgeMs?: number;
}

export interface Rejection {
  job: string;
  messageId: string;
  reasons: string[];
  body: string;
  /** Present when the body was JSON enough to hold them. */
  batchId?: string;
  operationId?: string;
}

/** What the consumer depends on. */
export interface Ledger {
  /**
   * One consumer invocation's counts for one batch, written once at its end under its invocation ID: a retried write
   * replaces itself instead of counting twice, and a batch's readers know which invocations wrote (resolveBatch).
   */
  recordInvocation(job: string, batchId: string, invocationId: string, record: InvocationRecord): Promise<void>;
  recordRejection(rejection: Rejection): Promise<void>;
}

export interface DynamoLedgerOptions {
  tableName: string;
  /** @default the container's shared document client, resolved on first use */
  client?: Pick<DynamoDBDocumentClient, 'send'>;
  /**
   * How long ledger items live before DynamoDB's TTL removes them; rejection records at most REJECTED_RETENTION_DAYS.
   * @default 90
   */
  retentionDays?: number;
  /** @default () => new Date() */
  now?: () => Date;
}

/** Longest rejected body kept; enough to diagnose, and far below DynamoDB's 400 KB item limit. */
export const MAX_REJECTED_BODY_BYTES = 4096;

const WRITE_ONCE: (keyof BatchInfo)[] = ['businessDate', 'scheduledTime', 'startedAt'];

/** Batches whose stored oldest age a container remembers; past this, it forgets them all and learns again. */
const KNOWN_OLDEST_LIMIT = 1000;

export class DynamoLedger implements Ledger {
  private readonly retentionSeconds: number;
  private readonly now: () => Date;
  /**
   * Per batch, an age this container knows the stored maximum to be at least (it wrote it, or a write of it lost to a
   * larger one). An age not above it cannot raise the maximum, so it is not sent: with admission, ages hover near the
   * horizon instead of growing as a batch drains, and nearly every conditional write of the maximum would fail (each
   * failure billed, then the counters written again).
   */
  private readonly knownOldest = new Map<string, number>();

  constructor(private readonly options: DynamoLedgerOptions) {
    this.retentionSeconds = (options.retentionDays ?? 90) * 86_400;
    this.now = options.now ?? (() => new Date());
  }

  async recordInvocation(job: string, batchId: string, invocationId: string, record: InvocationRecord): Promise<void> {
    const item: Record<string, unknown> = {
      ...ledgerKeys.invocation(job, batchId, invocationId),
      job,
      batchId,
      at: this.now().toISOString(),
      expiresAt: this.expiresAt(),
    };
    for (const key of INVOCATION_COUNTERS) if (record[key]) item[key] = record[key];
    if (record.oldestMessageAgeMs !== undefined) item.oldestMessageAgeMs = record.oldestMessageAgeMs;
    for (const key of ['replays', 'elsewhere', 'deadLetteredOperations', 'rejectedMessages'] as const)
      if (record[key]?.length) item[key] = record[key];
    await this.client().send(new PutCommand({ TableName: this.options.tableName, Item: item }));
  }

  /**
   * Adds counters and facts to the batch item itself. The consumer writes invocation items instead (recordInvocation);
   * batch items written this way, by consumers before them, are still read (resolveBatch adds their counters).
   */
  async addToBatch(job: string, batchId: string, counters: BatchCounters, info: BatchInfo = {}): Promise<void> {
    const names: Record<string, string> = { '#expiresAt': 'expiresAt', '#job': 'job' };
    const values: Record<string, unknown> = { ':expiresAt': this.expiresAt(), ':job': job };
    const set = ['#expiresAt = if_not_exists(#expiresAt, :expiresAt)', '#job = if_not_exists(#job, :job)'];
    const add: string[] = [];
    for (const key of BATCH_COUNTERS) {
      const value = counters[key];
      if (value === undefined) continue;
      names[`#${key}`] = key;
      values[`:${key}`] = value;
      add.push(`#${key} :${key}`);
    }
    const { oldestMessageAgeMs, ...facts } = info;
    for (const key of Object.keys(facts) as (keyof typeof facts)[]) {
      if (facts[key] === undefined) continue;
      names[`#${key}`] = key;
      values[`:${key}`] = facts[key];
      set.push(WRITE_ONCE.includes(key) ? `#${key} = if_not_exists(#${key}, :${key})` : `#${key} = :${key}`);
    }
    const update = (withAge: boolean) => {
      const expression = `SET ${[...set, ...(withAge ? ['#oldest = :oldest'] : [])].join(', ')}${add.length ? ` ADD ${add.join(', ')}` : ''}`;
      return new UpdateCommand({
        TableName: this.options.tableName,
        Key: ledgerKeys.batch(job, batchId),
        UpdateExpression: expression,
        // A running maximum in the same write as the counters: the age grows as a batch drains, so the condition
        // nearly always holds; when it does not, the counters are written alone.
        ...(withAge ? { ConditionExpression: 'attribute_not_exists(#oldest) OR #oldest < :oldest' } : {}),
        ExpressionAttributeNames: withAge ? { ...names, '#oldest': 'oldestMessageAgeMs' } : names,
        ExpressionAttributeValues: withAge ? { ...values, ':oldest': oldestMessageAgeMs } : values,
      });
    };
    const batchKey = `${job}\u0000${batchId}`;
    const known = this.knownOldest.get(batchKey);
    if (oldestMessageAgeMs === undefined || (known !== undefined && oldestMessageAgeMs <= known)) {
      await this.client().send(update(false));
      return;
    }
    if (this.knownOldest.size >= KNOWN_OLDEST_LIMIT) this.knownOldest.clear();
    try {
      await this.client().send(update(true));
    } catch (error) {
      if (
        !(error instanceof ConditionalCheckFailedException) &&
        (error as Error).name !== 'ConditionalCheckFailedException'
      )
        throw error;
      await this.client().send(update(false));
    }
    // Written, or beaten by a larger stored value: either way the maximum is now at least this.
    this.knownOldest.set(batchKey, oldestMessageAgeMs);
  }

  async recordRejection(rejection: Rejection): Promise<void> {
    const at = this.now();
    const { text, truncated } = truncateUtf8(rejection.body, MAX_REJECTED_BODY_BYTES);
    await this.client().send(
      new PutCommand({
        TableName: this.options.tableName,
        Item: {
          ...ledgerKeys.rejection(rejection.job, at, rejection.messageId),
          job: rejection.job,
          messageId: rejection.messageId,
          reasons: rejection.reasons,
          body: text,
          bodyBytes: Buffer.byteLength(rejection.body, 'utf8'),
          truncated,
          batchId: rejection.batchId,
          operationId: rejection.operationId,
          rejectedAt: at.toISOString(),
          expiresAt: this.expiresAt(Math.min(this.retentionSeconds, REJECTED_RETENTION_DAYS * 86_400), at),
        },
      }),
    );
  }

  private client() {
    return this.options.client ?? documentClient();
  }

  private expiresAt(retentionSeconds = this.retentionSeconds, from = this.now()): number {
    return Math.floor(from.getTime() / 1000) + retentionSeconds;
  }
}

/** Cuts at a character boundary so the stored text stays valid UTF-8 and within `maxBytes`. */
export function truncateUtf8(text: string, maxBytes: number): { text: string; truncated: boolean } {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return { text, truncated: false };
  let out = Buffer.from(text, 'utf8').subarray(0, maxBytes).toString('utf8');
  // A cut through a multi-byte character decodes to U+FFFD (3 bytes); drop characters until it fits.
  while (Buffer.byteLength(out, 'utf8') > maxBytes || out.endsWith('\uFFFD')) out = out.slice(0, -1);
  return { text: out, truncated: true };
}

/**
 * What one consumer invocation saw, per batch ID, flushed as one `recordInvocation` per batch at its end: one ledger
 * write per batch of records instead of one per record, which keeps the pipeline's writes per operation within budget.
 */
export class BatchTally {
  private readonly byBatch = new Map<string, InvocationRecord>();

  private of(batchId: string): InvocationRecord {
    let record = this.byBatch.get(batchId);
    if (record === undefined) this.byBatch.set(batchId, (record = {}));
    return record;
  }

  /** Notes one message's age since first enqueue; the batch keeps the largest. */
  age(batchId: string, ageMs: number): void {
    const record = this.of(batchId);
    record.oldestMessageAgeMs = Math.max(record.oldestMessageAgeMs ?? 0, Math.round(ageMs));
  }

  /** The largest age noted for the batch, if any. */
  oldestAgeMs(batchId: string): number | undefined {
    return this.byBatch.get(batchId)?.oldestMessageAgeMs;
  }

  add(batchId: string, counters: Partial<Record<(typeof INVOCATION_COUNTERS)[number], number>>): void {
    const record = this.of(batchId);
    for (const key of INVOCATION_COUNTERS) {
      const value = counters[key];
      if (value !== undefined) record[key] = (record[key] ?? 0) + value;
    }
  }

  /** Adds one entry to one of the batch's lists (see InvocationRecord). */
  note(
    batchId: string,
    list: 'replays' | 'elsewhere' | 'deadLetteredOperations' | 'rejectedMessages',
    entry: string,
  ): void {
    const record = this.of(batchId);
    (record[list] ??= []).push(entry);
  }

  /** Each batch ID with what the invocation saw of it, in first-seen order. */
  entries(): [string, InvocationRecord][] {
    return [...this.byBatch.entries()];
  }
}
