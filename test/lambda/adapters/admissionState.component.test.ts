import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, resetClients } from '../../../lambda/adapters/clients';
import { ledgerKeys } from '../../../lambda/core/ledgerContract';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { AdmissionStatus, DynamoRunStateStore } from '../../../lambda/adapters/admissionState';
import { startLocalAws, type LocalAws } from '../../support/aws';
import { createLedgerTable } from '../handlers/harness';

const TABLE = 'run-state-adapter';
const NOW = Date.parse('2026-11-29T02:00:00.000Z');
const start = { businessDate: '2026-11-28', startedAt: new Date(NOW).toISOString(), admissionRatePerMinute: 80 };

describe('Class: DynamoRunStateStore', () => {
  let aws: LocalAws;
  let store: DynamoRunStateStore;
  let runs = 0;
  let batchId: string;

  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    await createLedgerTable(TABLE);
    store = new DynamoRunStateStore({ tableName: TABLE });
  });

  afterAll(async () => {
    resetClients();
    await aws.stop();
  });

  beforeEach(() => {
    batchId = `fake-job:2026-11-28:run-${++runs}`;
  });

  describe('Method: ensure', () => {
    it('creates the run at step 0 once, keeping its start facts and the counters the consumers add beside it', async () => {
      expect(await store.ensure('fake-job', batchId, start)).toMatchObject({
        step: 0,
        status: 'admitting',
        pages: 0,
        continuationSent: -1,
        admissionRatePerMinute: 80,
      });
      await new DynamoLedger({ tableName: TABLE }).addToBatch('fake-job', batchId, { completed: 2 });
      const again = await store.ensure('fake-job', batchId, {
        ...start,
        startedAt: new Date(NOW + 60_000).toISOString(),
        admissionRatePerMinute: 40,
      });
      expect(again).toMatchObject({ step: 0, startedAt: start.startedAt, admissionRatePerMinute: 80 });
      expect(await store.read('fake-job', batchId)).toMatchObject({ step: 0 });
    });

    it('reads nothing for a batch without admission state', async () => {
      await new DynamoLedger({ tableName: TABLE }).addToBatch('fake-job', batchId, { completed: 1 });
      expect(await store.read('fake-job', batchId)).toBeUndefined();
    });
  });

  describe('Method: lease', () => {
    it('lets one owner hold a step until its lease expires, and no one take a step the run is not at', async () => {
      await store.ensure('fake-job', batchId, start);
      expect(await store.lease('fake-job', batchId, 0, 'a', NOW, NOW + 10_000)).toBe(true);
      expect(await store.lease('fake-job', batchId, 0, 'b', NOW + 5_000, NOW + 15_000)).toBe(false);
      // The holder may renew its own lease; after it expires another owner takes the step over.
      expect(await store.lease('fake-job', batchId, 0, 'a', NOW + 5_000, NOW + 12_000)).toBe(true);
      expect(await store.lease('fake-job', batchId, 0, 'b', NOW + 12_001, NOW + 20_000)).toBe(true);
      expect(await store.lease('fake-job', batchId, 1, 'c', NOW, NOW + 1)).toBe(false);
    });
  });

  describe('Method: release', () => {
    it('gives the lease up only for its holder at that step, so another owner takes the step at once', async () => {
      await store.ensure('fake-job', batchId, start);
      expect(await store.lease('fake-job', batchId, 0, 'req-1/a', NOW, NOW + 10_000)).toBe(true);
      // Not the holder (another invocation of the same request ID), or not the step: the lease stays.
      expect(await store.release('fake-job', batchId, 0, 'req-1/b')).toBe(false);
      expect(await store.release('fake-job', batchId, 1, 'req-1/a')).toBe(false);
      expect(await store.read('fake-job', batchId)).toMatchObject({
        leaseOwner: 'req-1/a',
        leaseUntilMs: NOW + 10_000,
      });

      expect(await store.release('fake-job', batchId, 0, 'req-1/a')).toBe(true);
      const state = await store.read('fake-job', batchId);
      expect(state?.leaseOwner).toBeUndefined();
      expect(state?.leaseUntilMs).toBeUndefined();
      expect(await store.lease('fake-job', batchId, 0, 'req-1/b', NOW + 1, NOW + 10_000)).toBe(true);
      // A lease taken over cannot be released by its former holder.
      expect(await store.release('fake-job', batchId, 0, 'req-1/a')).toBe(false);
      expect(await store.read('fake-job', batchId)).toMatchObject({ leaseOwner: 'req-1/b' });
    });

    it('does nothing once the step has ended', async () => {
      await store.ensure('fake-job', batchId, start);
      await store.lease('fake-job', batchId, 0, 'a', NOW, NOW + 10_000);
      await store.endStep('fake-job', batchId, 0, 'a', {
        status: AdmissionStatus.admitting,
        nextStepAt: '2026-11-29T02:02:30.000Z',
      });
      expect(await store.release('fake-job', batchId, 0, 'a')).toBe(false);
      expect(await store.read('fake-job', batchId)).toMatchObject({ step: 1, nextStepAt: '2026-11-29T02:02:30.000Z' });
    });
  });

  describe('Method: commitPage and endStep', () => {
    it('counts each page once, for the lease holder only, and moves the run to its next step', async () => {
      await store.ensure('fake-job', batchId, start);
      await store.lease('fake-job', batchId, 0, 'a', NOW, NOW + 10_000);
      expect(
        await store.commitPage('fake-job', batchId, 0, 'a', {
          cursor: 'c1',
          discovered: 25,
          published: 25,
          plannedUntilMs: NOW + 20_000,
        }),
      ).toBe(true);
      // A duplicate that never held the lease cannot count its copy of the page.
      expect(await store.commitPage('fake-job', batchId, 0, 'b', { cursor: 'c1', discovered: 25, published: 25 })).toBe(
        false,
      );
      expect(await store.endStep('fake-job', batchId, 0, 'b', { status: AdmissionStatus.admitting })).toBe(false);
      expect(
        await store.endStep('fake-job', batchId, 0, 'a', {
          status: AdmissionStatus.admitting,
          nextStepAt: '2026-11-29T02:02:30.000Z',
          plannedUntilMs: NOW + 20_000,
        }),
      ).toBe(true);
      const state = await store.read('fake-job', batchId);
      expect(state).toMatchObject({
        step: 1,
        cursor: 'c1',
        pages: 1,
        discovered: 25,
        published: 25,
        plannedUntilMs: NOW + 20_000,
        nextStepAt: '2026-11-29T02:02:30.000Z',
      });
      expect(state?.leaseOwner).toBeUndefined();

      // The last page removes the cursor and finishes the run.
      await store.lease('fake-job', batchId, 1, 'c', NOW, NOW + 10_000);
      await store.commitPage('fake-job', batchId, 1, 'c', {
        cursor: undefined,
        discovered: 5,
        published: 5,
        finishedAt: '2026-11-29T02:03:00.000Z',
      });
      await store.endStep('fake-job', batchId, 1, 'c', { status: AdmissionStatus.complete });
      expect(await store.read('fake-job', batchId)).toEqual(
        expect.objectContaining({
          step: 2,
          status: 'complete',
          cursor: undefined,
          nextStepAt: undefined,
          discovered: 30,
          finishedAt: '2026-11-29T02:03:00.000Z',
        }),
      );
      // A finished run lends no lease.
      expect(await store.lease('fake-job', batchId, 2, 'd', NOW, NOW + 1)).toBe(false);
    });
  });

  describe('Method: recordInvalidRows', () => {
    const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ key: `row ${i}`, reasons: [`id: bad ${i}`] }));
    const items = async (of: string) => {
      const { Items = [] } = await documentClient().send(
        new QueryCommand({
          TableName: TABLE,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': `INVALID_ROW#fake-job#${of}` },
        }),
      );
      return Items;
    };

    it('keeps each row with its key, reasons and page for 14 days by default, once however often its page is recorded', async () => {
      const dated = new DynamoRunStateStore({ tableName: TABLE, now: () => new Date(NOW) });
      await dated.recordInvalidRows('fake-job', batchId, 3, rows(30));
      await dated.recordInvalidRows('fake-job', batchId, 3, rows(30));

      const kept = await items(batchId);
      expect(kept).toHaveLength(30);
      expect(kept.find((i) => i.key === 'row 7')).toEqual({
        ...ledgerKeys.invalidRow('fake-job', batchId, 'row 7'),
        job: 'fake-job',
        batchId,
        page: 3,
        key: 'row 7',
        reasons: ['id: bad 7'],
        rejectedAt: new Date(NOW).toISOString(),
        expiresAt: NOW / 1000 + 14 * 86_400,
      });
    });

    it('keeps them as long as it is told to', async () => {
      await new DynamoRunStateStore({
        tableName: TABLE,
        now: () => new Date(NOW),
        invalidRowRetentionDays: 2,
      }).recordInvalidRows('fake-job', batchId, 1, rows(1));
      expect((await items(batchId)).map((i) => i.expiresAt)).toEqual([NOW / 1000 + 2 * 86_400]);
    });

    it("counts a page's invalid rows on the run, apart from what it discovered, once per committed page", async () => {
      await store.ensure('fake-job', batchId, start);
      await store.lease('fake-job', batchId, 0, 'a', NOW, NOW + 10_000);
      await store.commitPage('fake-job', batchId, 0, 'a', { cursor: 'c1', discovered: 3, published: 3 });
      expect(
        await documentClient().send(new GetCommand({ TableName: TABLE, Key: ledgerKeys.batch('fake-job', batchId) })),
      ).not.toHaveProperty('Item.invalidRows');
      await store.commitPage('fake-job', batchId, 0, 'a', {
        cursor: 'c2',
        discovered: 2,
        published: 2,
        invalidRows: 4,
      });
      expect(
        await store.commitPage('fake-job', batchId, 0, 'b', {
          cursor: 'c2',
          discovered: 2,
          published: 2,
          invalidRows: 4,
        }),
      ).toBe(false);
      const { Item } = await documentClient().send(
        new GetCommand({ TableName: TABLE, Key: ledgerKeys.batch('fake-job', batchId) }),
      );
      expect(Item).toMatchObject({ discovered: 5, published: 5, invalidRows: 4 });
    });
  });

  describe('Method: dateRuns', () => {
    it("reads the runs of one business date, with their order and admission facts, and no other date's", async () => {
      const date = '2026-10-02';
      const [live, catchUp] = [`fake-job:${date}:20261003T010000Z`, `fake-job:${date}:manual-0a1b2c3d`];
      await store.ensure('fake-job', live, { ...start, businessDate: date });
      await store.ensure('fake-job', catchUp, { ...start, businessDate: date, backfill: true });
      await store.ensure('fake-job', 'fake-job:2026-10-03:20261004T010000Z', { ...start, businessDate: '2026-10-03' });
      await store.ensure('fake-job', `fake-job:${date}0:other`, { ...start, businessDate: date });
      expect(await store.lease('fake-job', live, 0, 'a', NOW, NOW + 10_000)).toBe(true);
      expect(
        await store.endStep('fake-job', live, 0, 'a', {
          status: AdmissionStatus.admitting,
          nextStepAt: '2026-11-29T02:05:00.000Z',
          plannedUntilMs: NOW + 300_000,
          waitingFor: catchUp,
        }),
      ).toBe(true);

      expect(await store.dateRuns('fake-job', date)).toEqual([
        {
          batchId: live,
          admission: 'admitting',
          startedAt: start.startedAt,
          nextStepAt: '2026-11-29T02:05:00.000Z',
          plannedUntilMs: NOW + 300_000,
        },
        { batchId: catchUp, admission: 'admitting', startedAt: start.startedAt, backfill: true },
      ]);
      // The waiting run's mark is on its item until a step ends without waiting; a catch-up's is read back.
      expect(await store.read('fake-job', live)).toMatchObject({ waitingFor: catchUp });
      expect(await store.read('fake-job', catchUp)).toMatchObject({ backfill: true });
      expect(await store.lease('fake-job', live, 1, 'b', NOW, NOW + 10_000)).toBe(true);
      expect(await store.endStep('fake-job', live, 1, 'b', { status: AdmissionStatus.complete })).toBe(true);
      expect(await store.read('fake-job', live)).not.toHaveProperty('waitingFor');
    });
  });

  describe('Method: markContinuation', () => {
    it('only moves forward', async () => {
      await store.ensure('fake-job', batchId, start);
      await store.markContinuation('fake-job', batchId, 2);
      await store.markContinuation('fake-job', batchId, 1);
      expect(await store.read('fake-job', batchId)).toMatchObject({ continuationSent: 2 });
    });
  });
});
