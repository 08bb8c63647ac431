// Operator CLI: the run ledger's read side (lambda/adapters/ledger.ts writes the counters, admissionState.ts the run's
// admission state): batches per job and rejections, each batch checked against discovered = completed + rejected +
// deadLettered (batchReconciles; the key layout and the rule are lambda/core/ledgerContract.ts).
import { GetCommand, QueryCommand, type QueryCommandInput } from '@aws-sdk/lib-dynamodb';
import { batchCountersOf, batchIdOf, batchOutstanding, batchReconciles, ledgerKeys } from '../lambda/core/ledgerContract';
import type { OpsClients } from './clients';

/** One batch as the operator sees it. Counters absent from the item are 0. */
export interface BatchView {
  batchId: string;
  businessDate?: string;
  scheduledTime?: string;
  startedAt?: string;
  finishedAt?: string;
  discovered: number;
  published: number;
  consumed: number;
  completed: number;
  duplicates: number;
  /** Records handed back to SQS for a retryable failure (each redelivery of one record counts again). */
  retries: number;
  rejected: number;
  deferred: number;
  throttled: number;
  deadLettered: number;
  /** The oldest message's age when consumed, since its first enqueue (deferrals do not reset it); null if none yet. */
  oldestMessageAgeSeconds: number | null;
  /**
   * Where the run's admission is: `admitting`, `complete` or `page-limit` (AdmissionStatus in
   * lambda/core/ledgerContract.ts); absent on a batch that has no admission state (written before
   * admission existed). A value this CLI does not know is kept as written, so a newer producer's state is shown.
   */
  admission?: string;
  /** The admission step the chain expects next. */
  step?: number;
  /** Pages admitted so far. */
  pages: number;
  /** The job's count of eligible records at the run's start, when the job can count them. */
  eligible?: number;
  /** Starts per minute admission planned with; absent when admission is unlimited. */
  admissionRatePerMinute?: number;
  /** When the next admission step is due (ISO), while admitting. */
  nextStepAt?: string;
  /** While a step is being taken: until when its lease holds (ISO). */
  leaseUntil?: string;
  /** discovered - (completed + rejected + deadLettered): still queued, in flight or lost (batchOutstanding). */
  outstanding: number;
  /** Every discovered operation is accounted for, and admission has ended (batchReconciles). */
  reconciles: boolean;
}

export interface RejectionView {
  rejectedAt?: string;
  messageId?: string;
  batchId?: string;
  operationId?: string;
  reasons: string[];
  body?: string;
  truncated?: boolean;
}

const n = (v: unknown): number => (typeof v === 'number' ? v : 0);
const s = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const optionalN = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

export function toBatchView(item: Record<string, unknown>): BatchView {
  const counters = batchCountersOf(item);
  const admission = s(item.admission);
  return {
    batchId: batchIdOf(item),
    businessDate: s(item.businessDate),
    scheduledTime: s(item.scheduledTime),
    startedAt: s(item.startedAt),
    finishedAt: s(item.finishedAt),
    discovered: counters.discovered,
    published: counters.published,
    consumed: counters.consumed,
    completed: counters.completed,
    duplicates: counters.duplicates,
    retries: counters.retries,
    rejected: counters.rejected,
    deferred: counters.deferred,
    throttled: counters.throttled,
    deadLettered: counters.deadLettered,
    admission,
    step: optionalN(item.step),
    pages: n(item.pages),
    eligible: optionalN(item.eligible),
    admissionRatePerMinute: optionalN(item.admissionRatePerMinute),
    nextStepAt: s(item.nextStepAt),
    leaseUntil: typeof item.leaseUntilMs === 'number' ? new Date(item.leaseUntilMs).toISOString() : undefined,
    oldestMessageAgeSeconds: typeof item.oldestMessageAgeMs === 'number' ? Math.round(item.oldestMessageAgeMs / 1000) : null,
    outstanding: batchOutstanding(counters),
    // A batch still admitting has work the ledger has not discovered yet: it cannot reconcile before admission ends.
    reconciles: batchReconciles({ ...counters, admission }),
  };
}

/**
 * The latest `limit` batches of a job, newest first. Batch IDs start `<job>:<businessDate>:`, so the sort key orders
 * them by business date; within one date, manual (catch-up) runs sort after scheduled ones.
 */
export async function latestBatches(clients: OpsClients, table: string, job: string, limit: number): Promise<BatchView[]> {
  const response = await clients.dynamo.send(
    new QueryCommand({
      TableName: table,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': ledgerKeys.batchPartition(job) },
      ScanIndexForward: false,
      Limit: limit,
    }),
  );
  return (response.Items ?? []).map(toBatchView);
}

/**
 * One batch, read consistently (a recovery decides on it), or undefined when the ledger has no such batch. Its
 * businessDate and scheduledTime are the start facts every admission step of the run carries.
 */
export async function readBatch(clients: OpsClients, table: string, job: string, batchId: string): Promise<BatchView | undefined> {
  const response = await clients.dynamo.send(new GetCommand({ TableName: table, Key: ledgerKeys.batch(job, batchId), ConsistentRead: true }));
  return response.Item ? toBatchView(response.Item) : undefined;
}

/** Every batch of a job whose batch ID starts with `prefix` (e.g. the batches of one business date). */
export async function batchesWithPrefix(clients: OpsClients, table: string, job: string, prefix: string): Promise<BatchView[]> {
  const items = await queryAll(clients, {
    TableName: table,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': ledgerKeys.batchPartition(job), ':prefix': prefix },
  });
  return items.map(toBatchView);
}

/** The rejections of a job that carry this operation ID (the partition is read page by page, filtered server-side). */
export async function rejectionsOf(clients: OpsClients, table: string, job: string, operationId: string): Promise<RejectionView[]> {
  const items = await queryAll(clients, {
    TableName: table,
    KeyConditionExpression: 'pk = :pk',
    FilterExpression: 'operationId = :op',
    ExpressionAttributeValues: { ':pk': ledgerKeys.rejectionPartition(job), ':op': operationId },
  });
  return items.map((item) => ({
    rejectedAt: s(item.rejectedAt),
    messageId: s(item.messageId),
    batchId: s(item.batchId),
    operationId: s(item.operationId),
    reasons: Array.isArray(item.reasons) ? item.reasons.map(String) : [],
    body: s(item.body),
    truncated: typeof item.truncated === 'boolean' ? item.truncated : undefined,
  }));
}

async function queryAll(clients: OpsClients, input: QueryCommandInput): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await clients.dynamo.send(new QueryCommand({ ...input, ExclusiveStartKey: start }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}
