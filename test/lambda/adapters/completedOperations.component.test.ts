import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, resetClients } from '../../../lambda/adapters/clients';
import { DynamoCompletedLookup } from '../../../lambda/adapters/completedOperations';
import { idempotencyRecordId } from '../../../lambda/core/idempotencyKey';
import { startLocalAws, type LocalAws } from '../../support/aws';
import { countDynamoCalls, createIdempotencyTable } from '../handlers/harness';

const TABLE = 'completed-lookup';
const NOW_MS = Date.parse('2026-11-29T02:00:00.000Z');
const NOW_S = NOW_MS / 1000;

/** Records as Powertools writes them: id, status, expiration (epoch s). */
async function seed(records: { op: string; status: string; expiration?: number }[]) {
  for (let i = 0; i < records.length; i += 25) {
    await documentClient().send(
      new BatchWriteCommand({
        RequestItems: {
          [TABLE]: records.slice(i, i + 25).map((r) => ({
            PutRequest: {
              Item: {
                id: idempotencyRecordId('fake-job', r.op),
                status: r.status,
                ...(r.expiration === undefined ? {} : { expiration: r.expiration }),
              },
            },
          })),
        },
      }),
    );
  }
}

describe('Class: DynamoCompletedLookup', () => {
  let aws: LocalAws;
  const lookup = new DynamoCompletedLookup({ tableName: TABLE, clock: () => NOW_MS });

  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    await createIdempotencyTable(TABLE);
    await seed([
      { op: 'done', status: 'COMPLETED', expiration: NOW_S + 3600 },
      { op: 'running', status: 'INPROGRESS', expiration: NOW_S + 3600 },
      { op: 'expired', status: 'COMPLETED', expiration: NOW_S - 1 },
      { op: 'forever', status: 'COMPLETED' },
    ]);
  });

  afterAll(async () => {
    resetClients();
    await aws.stop();
  });

  describe('Method: completed', () => {
    it('reports only operations whose record is COMPLETED and not expired', async () => {
      const done = await lookup.completed('fake-job', ['done', 'running', 'expired', 'forever', 'never-seen', 'done']);
      expect([...done.keys()].sort()).toEqual(['done', 'forever']);
      // Another job's record for the same operation ID would sit under another key.
      expect(await lookup.completed('other-job', ['done'])).toEqual(new Map());
    });

    it('asks in requests of at most 100 keys, one per 100 distinct operations', async () => {
      const ops = Array.from({ length: 250 }, (_, i) => `bulk-${i}`);
      await seed(ops.filter((_, i) => i % 2 === 0).map((op) => ({ op, status: 'COMPLETED', expiration: NOW_S + 60 })));
      const counter = countDynamoCalls();
      let done;
      try {
        done = await lookup.completed('fake-job', [...ops, ...ops]);
      } finally {
        counter.stop();
      }
      expect(counter.calls.map((c) => c.command)).toEqual([
        'BatchGetItemCommand',
        'BatchGetItemCommand',
        'BatchGetItemCommand',
      ]);
      expect(done.size).toBe(125);
      expect(done.has('bulk-0') && !done.has('bulk-1')).toBe(true);
    });

    it('fails with the DynamoDB error when the table cannot be read, so the caller can fall back', async () => {
      await expect(
        new DynamoCompletedLookup({ tableName: 'no-such-table' }).completed('fake-job', ['x']),
      ).rejects.toThrow(/resource not found|ResourceNotFound/i);
    });
  });
});
