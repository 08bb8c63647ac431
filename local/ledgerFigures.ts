// The run ledger's exact figures, as both the operator CLI and the local tools read them: a batch resolved from its batch
// item, its invocation items and the completion records of its dead-lettered operations and orphans (resolveBatch in
// lambda/core/ledgerContract.ts). Here, below ops/ (ops/ledger.ts builds its views on it), so the local runtime's report
// and session read the ledger without importing the operator CLI.
import {
  BatchGetCommand,
  QueryCommand,
  type DynamoDBDocumentClient,
  type QueryCommandInput,
} from '@aws-sdk/lib-dynamodb';
import {
  IdempotencyRecordStatus,
  PERSISTENCE_ATTRIBUTE_KEY_MAPPINGS as ATTR,
} from '@aws-lambda-powertools/idempotency';
import { idempotencyRecordId } from '../lambda/core/idempotencyKey';
import {
  batchIdOf,
  completedByOf,
  deadLetteredOperationsOf,
  ledgerKeys,
  orphansOf,
  resolveBatch,
  type BatchFigures,
  type CompletedBy,
} from '../lambda/core/ledgerContract';

/** The two tables a batch's figures are read from. */
export interface LedgerTables {
  ledger: string;
  idempotency: string;
}

/** A DynamoDB document client, or anything that sends its commands. */
export type Dynamo = Pick<DynamoDBDocumentClient, 'send'>;

/** The consumer invocation items of one batch (INVOCATIONS#<job>#<batchId>), read consistently. */
export function invocationItems(
  dynamo: Dynamo,
  ledgerTable: string,
  job: string,
  batchId: string,
): Promise<Record<string, unknown>[]> {
  return queryAll(dynamo, {
    TableName: ledgerTable,
    KeyConditionExpression: 'pk = :pk',
    ExpressionAttributeValues: { ':pk': ledgerKeys.invocationPartition(job, batchId) },
    ConsistentRead: true,
  });
}

/** BatchGetItem's limit of keys per request. */
const KEYS_PER_REQUEST = 100;
/** First and longest wait before asking again for keys DynamoDB left unprocessed (it does so when throttled). */
const UNPROCESSED_BACKOFF_MS = { first: 50, max: 2000 };

/** What an operation's idempotency record says: Powertools' status, and who completed it (a COMPLETED one). */
export interface IdempotencyState {
  status: string;
  completedBy?: CompletedBy;
}

/**
 * The idempotency record of each of `operationIds` that has one: read consistently, 100 keys a request, asking again
 * (after a growing wait) for the keys DynamoDB leaves unprocessed.
 */
export async function idempotencyStatesOf(
  dynamo: Dynamo,
  idempotencyTable: string,
  job: string,
  operationIds: readonly string[],
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
): Promise<Map<string, IdempotencyState>> {
  const byId = new Map([...new Set(operationIds)].map((op) => [idempotencyRecordId(job, op), op]));
  const keys = [...byId.keys()].map((id) => ({ id }));
  const requests = Array.from({ length: Math.ceil(keys.length / KEYS_PER_REQUEST) }, (_, i) =>
    keys.slice(i * KEYS_PER_REQUEST, (i + 1) * KEYS_PER_REQUEST),
  );
  const out = new Map<string, IdempotencyState>();
  let backoffMs = 0;
  for (let i = 0; i < requests.length; i++) {
    const response = await dynamo.send(
      new BatchGetCommand({ RequestItems: { [idempotencyTable]: { Keys: requests[i], ConsistentRead: true } } }),
    );
    for (const item of response.Responses?.[idempotencyTable] ?? []) {
      const op = byId.get(String(item.id));
      if (op !== undefined)
        out.set(op, { status: String(item[ATTR.statusAttr]), completedBy: completedByOf(item[ATTR.dataAttr]) });
    }
    const unprocessed = (response.UnprocessedKeys?.[idempotencyTable]?.Keys ?? []) as { id: string }[];
    if (unprocessed.length === 0) {
      backoffMs = 0;
      continue;
    }
    requests.push(unprocessed);
    backoffMs = Math.min(UNPROCESSED_BACKOFF_MS.max, backoffMs === 0 ? UNPROCESSED_BACKOFF_MS.first : backoffMs * 2);
    await sleep(backoffMs);
  }
  return out;
}

/**
 * The completion of each operation of `states` that has one (its idempotency record is COMPLETED): who completed it, or
 * undefined for a completion written before completions named their batch.
 */
export function completionsIn(states: ReadonlyMap<string, IdempotencyState>): Map<string, CompletedBy | undefined> {
  return new Map(
    [...states]
      .filter(([, r]) => r.status === IdempotencyRecordStatus.COMPLETED)
      .map(([op, r]): [string, CompletedBy | undefined] => [op, r.completedBy]),
  );
}

/** One batch's exact figures: its item, its invocation items, and the completions of its dead-lettered operations and orphans. */
export async function batchFigures(
  dynamo: Dynamo,
  tables: LedgerTables,
  job: string,
  batchItem: Record<string, unknown>,
): Promise<BatchFigures> {
  return figuresOf(
    dynamo,
    tables,
    job,
    batchItem,
    await invocationItems(dynamo, tables.ledger, job, batchIdOf(batchItem)),
  );
}

/** A batch's exact figures from invocation items already read. */
export async function figuresOf(
  dynamo: Dynamo,
  tables: LedgerTables,
  job: string,
  batchItem: Record<string, unknown>,
  invocations: Record<string, unknown>[],
): Promise<BatchFigures> {
  const batchId = batchIdOf(batchItem);
  const lookUp = [...new Set([...deadLetteredOperationsOf(invocations), ...orphansOf(batchItem)])];
  const completions =
    lookUp.length > 0 ? completionsIn(await idempotencyStatesOf(dynamo, tables.idempotency, job, lookUp)) : new Map();
  return resolveBatch(batchId, batchItem, invocations, completions);
}

export async function queryAll(dynamo: Dynamo, input: QueryCommandInput): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await dynamo.send(new QueryCommand({ ...input, ExclusiveStartKey: start }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}
