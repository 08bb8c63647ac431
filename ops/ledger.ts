// Operator CLI: the run ledger's read side (lambda/adapters/ledger.ts writes the consumers' invocation items,
// admissionState.ts the run's admission state): batches per job and rejections, each batch resolved exactly from its
// batch item, its invocation items and the completion records of its dead-lettered operations, and checked against
// discovered = completed + completedElsewhere + rejected + deadLettered (resolveBatch, batchReconciles; the key layout
// and the rules are lambda/core/ledgerContract.ts). The exact figures are read by local/ledgerFigures.ts, below ops/, so the
// local tools read them without the operator CLI.
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import {
  batchIdOf,
  batchOutstanding,
  batchReconciles,
  drainPerMinute,
  invalidRowsOf,
  ledgerKeys,
  resolveBatch,
  type BatchFigures,
} from '../lambda/core/ledgerContract';
import type { OpsClients } from './clients';
import {
  batchFigures,
  type Dynamo,
  figuresOf,
  invocationItems,
  type LedgerTables,
  queryAll,
} from '../local/ledgerFigures';

/** One batch as the operator sees it. Counters absent from the item are 0. */
export interface BatchView {
  batchId: string;
  businessDate?: string;
  scheduledTime?: string;
  /** A catch-up's run: its work is backfill, behind live work. */
  backfill?: true;
  startedAt?: string;
  finishedAt?: string;
  discovered: number;
  /**
   * Source rows discovery could not turn into valid messages: recorded for review (`ops audit` lists them) and skipped.
   * Not part of `discovered`, so not of any equation.
   */
  invalidRows: number;
  published: number;
  consumed: number;
  completed: number;
  /** Operations of this batch another batch of the date completed first (each once). */
  completedElsewhere: number;
  /** Completions recovered from invocations that never wrote their counts; included in `completed`. */
  adopted: number;
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
  /** Consumer invocations that wrote counts for the batch. */
  invocations: number;
  /**
   * Operations settled per minute over the last DRAIN_WINDOW_MINUTES before the read, or the batch's life if shorter
   * (drainPerMinute, from the invocation items' times): the rate the batch is actually draining at. 0 when nothing
   * settled in that window.
   */
  drainPerMinute: number;
  /** discovered - (completed + completedElsewhere + rejected + deadLettered): still queued, in flight or lost (batchOutstanding). */
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

/** A batch as the operator sees it: its item's facts and admission state, and its resolved figures. */
export function toBatchView(
  item: Record<string, unknown>,
  figures: BatchFigures = resolveBatch(batchIdOf(item), item, []),
  drainPerMinute = 0,
): BatchView {
  const counters = figures;
  const admission = s(item.admission);
  return {
    batchId: batchIdOf(item),
    businessDate: s(item.businessDate),
    scheduledTime: s(item.scheduledTime),
    ...(item.backfill === true ? { backfill: true as const } : {}),
    startedAt: s(item.startedAt),
    finishedAt: s(item.finishedAt),
    discovered: counters.discovered,
    invalidRows: invalidRowsOf(item),
    published: counters.published,
    consumed: counters.consumed,
    completed: counters.completed,
    completedElsewhere: counters.completedElsewhere,
    adopted: figures.adopted,
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
    oldestMessageAgeSeconds:
      figures.oldestMessageAgeMs === undefined ? null : Math.round(figures.oldestMessageAgeMs / 1000),
    invocations: figures.invocations,
    drainPerMinute,
    outstanding: batchOutstanding(counters),
    // A batch still admitting has work the ledger has not discovered yet: it cannot reconcile before admission ends.
    reconciles: batchReconciles({ ...counters, admission }),
  };
}

/**
 * The job's newest `limit` batch items, newest first: one page of one query (queryAll would read every batch, since a
 * Limit only bounds each page). `projection` keeps only the attributes named.
 */
export async function latestBatchItems(
  dynamo: Dynamo,
  ledgerTable: string,
  job: string,
  limit: number,
  projection?: string,
): Promise<Record<string, unknown>[]> {
  const response = await dynamo.send(
    new QueryCommand({
      TableName: ledgerTable,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': ledgerKeys.batchPartition(job) },
      ScanIndexForward: false,
      Limit: limit,
      ...(projection ? { ProjectionExpression: projection } : {}),
    }),
  );
  return response.Items ?? [];
}

/**
 * The latest `limit` batches of a job, newest first. Batch IDs start `<job>:<businessDate>:`, so the sort key orders
 * them by business date; within one date, manual (catch-up) runs sort after scheduled ones.
 */
export async function latestBatches(
  clients: OpsClients,
  tables: LedgerTables,
  job: string,
  limit: number,
  now: Date = new Date(),
): Promise<BatchView[]> {
  return Promise.all(
    (await latestBatchItems(clients.dynamo, tables.ledger, job, limit)).map(async (item) => {
      const invocations = await invocationItems(clients.dynamo, tables.ledger, job, batchIdOf(item));
      const drain = drainPerMinute(
        invocations,
        typeof item.startedAt === 'string' ? Date.parse(item.startedAt) : undefined,
        now.getTime(),
      );
      return toBatchView(item, await figuresOf(clients.dynamo, tables, job, item, invocations), drain);
    }),
  );
}

/**
 * One batch, read consistently (a recovery decides on it), or undefined when the ledger has no such batch. Its
 * businessDate and scheduledTime are the start facts every admission step of the run carries.
 */
export async function readBatch(
  clients: OpsClients,
  tables: LedgerTables,
  job: string,
  batchId: string,
): Promise<BatchView | undefined> {
  const response = await clients.dynamo.send(
    new GetCommand({ TableName: tables.ledger, Key: ledgerKeys.batch(job, batchId), ConsistentRead: true }),
  );
  return response.Item
    ? toBatchView(response.Item, await batchFigures(clients.dynamo, tables, job, response.Item))
    : undefined;
}

/** Every batch of a job whose batch ID starts with `prefix` (e.g. the batches of one business date). */
export async function batchesWithPrefix(
  clients: OpsClients,
  tables: LedgerTables,
  job: string,
  prefix: string,
): Promise<BatchView[]> {
  const items = await queryAll(clients.dynamo, {
    TableName: tables.ledger,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': ledgerKeys.batchPartition(job), ':prefix': prefix },
  });
  return Promise.all(
    items.map(async (item) => toBatchView(item, await batchFigures(clients.dynamo, tables, job, item))),
  );
}

/** The rejections of a job that carry this operation ID (the partition is read page by page, filtered server-side). */
export async function rejectionsOf(
  clients: OpsClients,
  table: string,
  job: string,
  operationId: string,
): Promise<RejectionView[]> {
  const items = await queryAll(clients.dynamo, {
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
