import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, resetClients } from '../../../lambda/adapters/clients';
import { DynamoLedger, MAX_REJECTED_BODY_BYTES, truncateUtf8 } from '../../../lambda/adapters/ledger';
import { startLocalAws, type LocalAws } from '../../support/aws';
import { countDynamoCalls, createLedgerTable } from '../handlers/harness';

const TABLE = 'ledger-adapter';
const NOW = new Date('2026-11-29T02:00:00.000Z');
const EPOCH = Math.floor(NOW.getTime() / 1000);

describe('Class: DynamoLedger', () => {
  let aws: LocalAws;
  let ledger: DynamoLedger;

  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    await createLedgerTable(TABLE);
    ledger = new DynamoLedger({ tableName: TABLE, now: () => NOW, retentionDays: 30 });
  });

  afterAll(async () => {
    resetClients();
    await aws.stop();
  });

  const batch = async (batchId: string) =>
    (await documentClient().send(new GetCommand({ TableName: TABLE, Key: { pk: 'BATCH#fake-job', sk: batchId } })))
      .Item;

  describe('Method: addToBatch', () => {
    it('adds counters atomically across concurrent writers', async () => {
      await Promise.all(
        Array.from({ length: 20 }, () =>
          ledger.addToBatch('fake-job', 'b-concurrent', { completed: 1, duplicates: 1 }),
        ),
      );
      await ledger.addToBatch('fake-job', 'b-concurrent', { rejected: 2, deferred: 1, deadLettered: 1 });
      expect(await batch('b-concurrent')).toEqual({
        pk: 'BATCH#fake-job',
        sk: 'b-concurrent',
        job: 'fake-job',
        completed: 20,
        duplicates: 20,
        rejected: 2,
        deferred: 1,
        deadLettered: 1,
        expiresAt: EPOCH + 30 * 86_400,
      });
    });

    it('writes the run identity and start once, and the finish time last', async () => {
      await ledger.addToBatch(
        'fake-job',
        'b-info',
        {},
        { businessDate: '2026-11-28', scheduledTime: '2026-11-29T01:00:00Z', startedAt: 'first' },
      );
      await ledger.addToBatch(
        'fake-job',
        'b-info',
        { discovered: 5, published: 5 },
        { startedAt: 'second', finishedAt: 'early' },
      );
      await ledger.addToBatch('fake-job', 'b-info', { discovered: 2, published: 2 }, { finishedAt: 'late' });
      expect(await batch('b-info')).toMatchObject({
        businessDate: '2026-11-28',
        scheduledTime: '2026-11-29T01:00:00Z',
        startedAt: 'first',
        finishedAt: 'late',
        discovered: 7,
        published: 7,
      });
    });

    it('keeps the oldest message age as a running maximum while the counters always add', async () => {
      await ledger.addToBatch('fake-job', 'b-age', { consumed: 2, completed: 2 }, { oldestMessageAgeMs: 5_000 });
      await ledger.addToBatch('fake-job', 'b-age', { consumed: 1, completed: 1 }, { oldestMessageAgeMs: 1_200 });
      await ledger.addToBatch('fake-job', 'b-age', { consumed: 1, completed: 1 }, { oldestMessageAgeMs: 9_000 });
      expect(await batch('b-age')).toMatchObject({ consumed: 4, completed: 4, oldestMessageAgeMs: 9_000 });
    });

    it('sends an age only when it may raise the maximum, so a smaller age costs no failed conditional write', async () => {
      const calls = countDynamoCalls();
      try {
        await ledger.addToBatch('fake-job', 'b-age-known', { completed: 1 }, { oldestMessageAgeMs: 9_000 });
        // Another container raised the maximum meanwhile: this one's larger age loses its conditional write once...
        await new DynamoLedger({ tableName: TABLE, now: () => NOW }).addToBatch(
          'fake-job',
          'b-age-known',
          {},
          { oldestMessageAgeMs: 20_000 },
        );
        await ledger.addToBatch('fake-job', 'b-age-known', { completed: 1 }, { oldestMessageAgeMs: 15_000 });
        // ... and then knows better: ages up to 15 s go with the counters alone, one write each.
        const before = calls.calls.length;
        for (const age of [3_000, 14_000, 15_000])
          await ledger.addToBatch('fake-job', 'b-age-known', { completed: 1 }, { oldestMessageAgeMs: age });
        expect(calls.calls.length - before).toBe(3);
      } finally {
        calls.stop();
      }
      expect(await batch('b-age-known')).toMatchObject({ completed: 5, oldestMessageAgeMs: 20_000 });
    });
  });

  describe('Method: recordRejection', () => {
    it('keeps the reasons, the IDs and a body truncated to 4 KB under REJECTED#<job>', async () => {
      const body = `{"x":"${'é'.repeat(3000)}"}`;
      await ledger.recordRejection({
        job: 'fake-job',
        messageId: 'm-1',
        reasons: ['a', 'b'],
        body,
        batchId: 'b-1',
        operationId: 'op:1',
      });

      const { Items = [] } = await documentClient().send(
        new QueryCommand({
          TableName: TABLE,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': 'REJECTED#fake-job' },
        }),
      );
      expect(Items).toHaveLength(1);
      const item = Items[0];
      expect(item).toMatchObject({
        sk: '2026-11-29T02:00:00.000Z#m-1',
        job: 'fake-job',
        messageId: 'm-1',
        reasons: ['a', 'b'],
        batchId: 'b-1',
        operationId: 'op:1',
        bodyBytes: Buffer.byteLength(body),
        truncated: true,
        rejectedAt: NOW.toISOString(),
        // The ledger keeps its items 30 days; a rejected body, which may hold personal data, 14 at most.
        expiresAt: EPOCH + 14 * 86_400,
      });
      expect(Buffer.byteLength(item.body)).toBeLessThanOrEqual(MAX_REJECTED_BODY_BYTES);
      expect(body.startsWith(item.body)).toBe(true);
    });

    it('expires a rejection within 14 days by default, while batch counts keep the default 90', async () => {
      const defaults = new DynamoLedger({ tableName: TABLE, now: () => NOW });
      await defaults.recordRejection({ job: 'default-job', messageId: 'm-d', reasons: ['r'], body: '{}' });
      await defaults.addToBatch('default-job', 'b-d', { discovered: 1 });
      const rejection = await documentClient().send(
        new QueryCommand({
          TableName: TABLE,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': 'REJECTED#default-job' },
        }),
      );
      expect(rejection.Items?.map((i) => i.expiresAt)).toEqual([EPOCH + 14 * 86_400]);
      const counts = await documentClient().send(
        new GetCommand({ TableName: TABLE, Key: { pk: 'BATCH#default-job', sk: 'b-d' } }),
      );
      expect(counts.Item?.expiresAt).toBe(EPOCH + 90 * 86_400);
    });

    it('expires a rejection with the ledger when the ledger keeps items less than 14 days', async () => {
      await new DynamoLedger({ tableName: TABLE, now: () => NOW, retentionDays: 7 }).recordRejection({
        job: 'short-job',
        messageId: 'm-s',
        reasons: ['r'],
        body: '{}',
      });
      const { Items = [] } = await documentClient().send(
        new QueryCommand({
          TableName: TABLE,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': 'REJECTED#short-job' },
        }),
      );
      expect(Items.map((i) => i.expiresAt)).toEqual([EPOCH + 7 * 86_400]);
    });

    it('surfaces a write failure to the caller', async () => {
      await expect(
        new DynamoLedger({ tableName: 'missing-table' }).recordRejection({
          job: 'fake-job',
          messageId: 'm',
          reasons: [],
          body: '',
        }),
      ).rejects.toThrow('Requested resource not found');
    });
  });
});

describe('Function: truncateUtf8', () => {
  it('leaves a short text alone', () => {
    expect(truncateUtf8('abc', 3)).toEqual({ text: 'abc', truncated: false });
  });

  it('never cuts through a multi-byte character', () => {
    expect(truncateUtf8('aéé', 4)).toEqual({ text: 'aé', truncated: true });
  });
});
