// Which of a batch's operations are already COMPLETED in the idempotency table, asked before the batch takes rate-limit
// slots: a re-run of a business date (a catch-up, a redrive, the producer retried) re-publishes operations that are
// done, and each would otherwise spend a slot of the downstream's quota, at its pace, on a call it never makes.
//
// Hand-written: Powertools' idempotency utility checks one record at the moment it claims it, after the slot is taken;
// it has no batch lookup. This reads the same records (the key is lambda/core/idempotencyKey.ts) with one
// BatchGetItem per 100 operations, eventually consistent (half a read unit each). It only ever skips work: an
// operation it does not report (not found, in progress, expired, unprocessed, or the read failed) takes the normal
// path, where the claim decides.
import { BatchGetItemCommand, DynamoDBClient, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { idempotencyRecordId } from '../core/idempotencyKey';
import { dynamoClient } from './clients';

/** The port the consumer depends on. */
export interface CompletedLookup {
  /** The subset of `operationIds` whose idempotency record is COMPLETED and not expired. */
  completed(jobName: string, operationIds: string[]): Promise<Set<string>>;
}

export interface DynamoCompletedLookupOptions {
  /** Powertools' idempotency table (partition key `id`). */
  tableName: string;
  /** @default dynamoClient() */
  client?: DynamoDBClient;
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

  async completed(jobName: string, operationIds: string[]): Promise<Set<string>> {
    const byRecordId = new Map([...new Set(operationIds)].map((op) => [idempotencyRecordId(jobName, op), op]));
    const ids = [...byRecordId.keys()];
    const done = new Set<string>();
    const nowSeconds = this.clock() / 1000;
    for (let i = 0; i < ids.length; i += KEYS_PER_REQUEST) {
      const { Responses } = await this.client().send(
        new BatchGetItemCommand({
          RequestItems: {
            [this.options.tableName]: {
              Keys: ids.slice(i, i + KEYS_PER_REQUEST).map((id) => ({ id: { S: id } })),
              // Powertools' attribute names (DynamoDBPersistenceLayer defaults).
              ProjectionExpression: '#id, #status, #expiration',
              ExpressionAttributeNames: { '#id': 'id', '#status': 'status', '#expiration': 'expiration' },
            },
          },
        }),
      );
      // Unprocessed keys are simply not reported: those operations take the normal path.
      for (const item of Responses?.[this.options.tableName] ?? []) {
        const operationId = byRecordId.get(item.id?.S ?? '');
        if (operationId !== undefined && isCompleted(item, nowSeconds)) done.add(operationId);
      }
    }
    return done;
  }

  private client(): DynamoDBClient {
    return this.options.client ?? dynamoClient();
  }
}

function isCompleted(item: Record<string, AttributeValue>, nowSeconds: number): boolean {
  const expiration = item.expiration?.N === undefined ? undefined : Number(item.expiration.N);
  return item.status?.S === 'COMPLETED' && (expiration === undefined || expiration > nowSeconds);
}
