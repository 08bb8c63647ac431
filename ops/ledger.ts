// Operator CLI: the run ledger's read side (lambda/adapters/ledger.ts writes it): batches per job and rejections, each
// batch checked against discovered = completed + rejected + deadLettered.
import { QueryCommand, type QueryCommandInput } from '@aws-sdk/lib-dynamodb';
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
  rejected: number;
  deferred: number;
  throttled: number;
  deadLettered: number;
  /** The oldest message's age when consumed, since its first enqueue (deferrals do not reset it); null if none yet. */
  oldestMessageAgeSeconds: number | null;
  /** discovered - (completed + rejected + deadLettered): still queued, in flight or lost. */
  outstanding: number;
  /** Every discovered operation is accounted for. */
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

// The ledger's key layout; mirrors ledgerKeys in lambda/adapters/ledger.ts, which the CLI reads as any client would.
const batchPk = (job: string) => `BATCH#${job}`;
const rejectionPk = (job: string) => `REJECTED#${job}`;

const n = (v: unknown): number => (typeof v === 'number' ? v : 0);
const s = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export function toBatchView(item: Record<string, unknown>): BatchView {
  const discovered = n(item.discovered);
  const settled = n(item.completed) + n(item.rejected) + n(item.deadLettered);
  return {
    batchId: String(item.sk),
    businessDate: s(item.businessDate),
    scheduledTime: s(item.scheduledTime),
    startedAt: s(item.startedAt),
    finishedAt: s(item.finishedAt),
    discovered,
    published: n(item.published),
    consumed: n(item.consumed),
    completed: n(item.completed),
    duplicates: n(item.duplicates),
    rejected: n(item.rejected),
    deferred: n(item.deferred),
    throttled: n(item.throttled),
    deadLettered: n(item.deadLettered),
    oldestMessageAgeSeconds: typeof item.oldestMessageAgeMs === 'number' ? Math.round(item.oldestMessageAgeMs / 1000) : null,
    outstanding: discovered - settled,
    reconciles: discovered === settled,
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
      ExpressionAttributeValues: { ':pk': batchPk(job) },
      ScanIndexForward: false,
      Limit: limit,
    }),
  );
  return (response.Items ?? []).map(toBatchView);
}

/** Every batch of a job whose batch ID starts with `prefix` (e.g. the batches of one business date). */
export async function batchesWithPrefix(clients: OpsClients, table: string, job: string, prefix: string): Promise<BatchView[]> {
  const items = await queryAll(clients, {
    TableName: table,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': batchPk(job), ':prefix': prefix },
  });
  return items.map(toBatchView);
}

/** The rejections of a job that carry this operation ID (the partition is read page by page, filtered server-side). */
export async function rejectionsOf(clients: OpsClients, table: string, job: string, operationId: string): Promise<RejectionView[]> {
  const items = await queryAll(clients, {
    TableName: table,
    KeyConditionExpression: 'pk = :pk',
    FilterExpression: 'operationId = :op',
    ExpressionAttributeValues: { ':pk': rejectionPk(job), ':op': operationId },
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
