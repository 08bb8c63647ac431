// Which of a batch's operations are already COMPLETED in the idempotency table, asked before the batch takes rate-limit
// slots: a re-run of a business date (a catch-up, a redrive, the producer retried) re-publishes operations that are
// done, and each would otherwise spend a slot of the downstream's quota, at its pace, on a call it never makes.
//
// Hand-written: Powertools' idempotency utility checks one record at the moment it claims it, after the slot is taken;
// it has no batch lookup. This reads the same records (the key is lambda/core/idempotencyKey.ts) with one
// BatchGetItem per 100 operations, eventually consistent (half a read unit each). It only ever skips work: an
// operation it does not report (not found, in progress, expired, unprocessed, or the read failed) takes the normal
// path, where the claim decides.
import { BatchGetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { idempotencyRecordId } from '../core/idempotencyKey';
import { COMPLETED_BY_FIELD, completedByOf, type CompletedBy } from '../core/ledgerContract';
import { documentClient } from './clients';

/** The port the consumer depends on. */
export interface CompletedLookup {
  /**
   * The operations of `operationIds` whose idempotency record is COMPLETED and not expired, each with who completed it
   * (undefined for a record written before completions named their batch).
   */
  completed(jobName: string, operationIds: string[]): Promise<ReadonlyMap<string, CompletedBy | undefined>>;
}

export interface DynamoCompletedLookupOptions {
  /** Powertools' idempotency table (partition key `id`). */
  tableName: string;
  /** @default documentClient() */
  client?: Pick<DynamoDBDocumentClient, 'send'>;
  /** Epoch ms, for the records' `expiration` (epoch s). @default Date.now */
  clock?: () => number;
}

/** BatchGetItem's limit of keys per request. */
const KEYS_PER_REQUEST = 100;

export class DynamoCompletedLookup implements CompletedLookup {
  private readonly clock: () => number;

  constructor(private readonly options: DynamoCompletedLookupOptions) {
    this.clock = options.clock ?? Date.now;
  }

  async completed(jobName: string, operationIds: string[]): Promise<Map<string, CompletedBy | undefined>> {
    const byRecordId = new Map([...new Set(operationIds)].map((op) => [idempotencyRecordId(jobName, op), op]));
    const ids = [...byRecordId.keys()];
    const done = new Map<string, CompletedBy | undefined>();
    const nowSeconds = this.clock() / 1000;
    for (let i = 0; i < ids.length; i += KEYS_PER_REQUEST) {
      const { Responses } = await this.client().send(
        new BatchGetCommand({
          RequestItems: {
            [this.options.tableName]: {
              Keys: ids.slice(i, i + KEYS_PER_REQUEST).map((id) => ({ id })),
              // Powertools' attribute names (DynamoDBPersistenceLayer defaults); `data` is the stored result.
              ProjectionExpression: '#id, #status, #expiration, #data.#by',
              ExpressionAttributeNames: {
                '#id': 'id',
                '#status': 'status',
                '#expiration': 'expiration',
                '#data': 'data',
                '#by': COMPLETED_BY_FIELD,
              },
            },
          },
        }),
      );
      // Unprocessed keys are simply not reported: those operations take the normal path.
      for (const item of Responses?.[this.options.tableName] ?? []) {
        const operationId = byRecordId.get(String(item.id ?? ''));
        if (operationId !== undefined && isCompleted(item, nowSeconds)) done.set(operationId, completedByOf(item.data));
      }
    }
    return done;
  }

  private client(): Pick<DynamoDBDocumentClient, 'send'> {
    return this.options.client ?? documentClient();
  }
}

function isCompleted(item: Record<string, unknown>, nowSeconds: number): boolean {
  const expiration = typeof item.expiration === 'number' ? item.expiration : undefined;
  return item.status === 'COMPLETED' && (expiration === undefined || expiration > nowSeconds);
}
