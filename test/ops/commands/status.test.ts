import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { OLDEST_WORK_NOTE, oldestWork, type StatusResult } from '../../../ops/commands/status';
import type { BatchView } from '../../../ops/ledger';
import { OpsFixture, startOpsFixture } from '../fixture';

describe('Function: oldestWork', () => {
  const batch = (batchId: string, startedAt: string | undefined, outstanding: number) => ({ batchId, startedAt, outstanding }) as BatchView;
  const now = new Date('2026-11-02T03:00:00.000Z');

  it('is 0 when the queue is empty', () => {
    expect(oldestWork({ url: 'q', visible: 0, inFlight: 0, delayed: 0 }, [batch('b1', '2026-11-01T00:00:00.000Z', 2)], now)).toEqual({ ageSeconds: 0, source: 'queue-empty' });
  });

  it('measures from the start of the oldest batch with outstanding work', () => {
    const batches = [batch('new', '2026-11-02T02:00:00.000Z', 1), batch('old', '2026-11-02T01:00:00.000Z', 3), batch('settled', '2026-11-01T01:00:00.000Z', 0)];

    expect(oldestWork({ url: 'q', visible: 0, inFlight: 1, delayed: 0 }, batches, now)).toEqual({ ageSeconds: 7200, source: 'ledger-oldest-unsettled-batch', batchId: 'old' });
  });

  it('says it is unknown when messages wait but no batch shown explains them', () => {
    expect(oldestWork({ url: 'q', visible: 0, inFlight: 0, delayed: 2 }, [batch('settled', '2026-11-01T01:00:00.000Z', 0)], now)).toEqual({ ageSeconds: null, source: 'unavailable' });
  });
});

describe('Function: status (ops status)', () => {
  let f: OpsFixture;

  beforeAll(async () => {
    f = await startOpsFixture(['alpha', 'beta']);
    // Written by the runtime's own ledger adapter, so the CLI's reading is pinned to what the handlers write.
    const ledger = new DynamoLedger({ tableName: f.tables.ledger, client: f.dynamo });
    await ledger.addToBatch('alpha', 'alpha:2026-11-01:20261101T010000Z', { discovered: 5, published: 5 }, { businessDate: '2026-11-01', startedAt: '2026-11-01T01:00:05.000Z' });
    await ledger.addToBatch('alpha', 'alpha:2026-11-01:20261101T010000Z', { consumed: 6, completed: 3, rejected: 1, deadLettered: 1, duplicates: 2, throttled: 2 }, { finishedAt: '2026-11-01T01:00:09.000Z', oldestMessageAgeMs: 61_400 });
    await ledger.addToBatch('alpha', 'alpha:2026-11-02:20261102T010000Z', { discovered: 4, published: 4, completed: 1 }, { businessDate: '2026-11-02', startedAt: '2026-11-02T01:00:05.000Z' });
    for (const body of ['{"operationId":"a"}', '{"operationId":"b"}']) await f.sqs.send(new SendMessageCommand({ QueueUrl: f.jobs.alpha.queueUrl, MessageBody: body }));
    await f.sqs.send(new SendMessageCommand({ QueueUrl: f.jobs.alpha.dlqUrl, MessageBody: '{"operationId":"c"}' }));
  });
  afterAll(async () => {
    await f.stop();
  });

  it('reports every job with queue depths, oldest work, and its latest batches newest first', async () => {
    const out = await f.run(['status', '--json']);

    expect(out.code).toBe(0);
    const result = out.json<StatusResult>();
    expect(result).toMatchObject({ ok: true, command: 'status', stackName: 'PacedJobs-test', source: 'local', notes: [OLDEST_WORK_NOTE] });
    expect(result.jobs.map((j) => j.job)).toEqual(['alpha', 'beta']);
    const [alpha, beta] = result.jobs;
    expect(alpha.queue).toEqual({ url: f.jobs.alpha.queueUrl, visible: 2, inFlight: 0, delayed: 0 });
    expect(alpha.dlq).toEqual({ url: f.jobs.alpha.dlqUrl, visible: 1, inFlight: 0, delayed: 0 });
    expect(alpha.oldestWork).toMatchObject({ source: 'ledger-oldest-unsettled-batch', batchId: 'alpha:2026-11-02:20261102T010000Z' });
    expect(alpha.oldestWork.ageSeconds).toBeGreaterThan(0);
    expect(alpha.batches).toEqual([
      {
        batchId: 'alpha:2026-11-02:20261102T010000Z',
        businessDate: '2026-11-02',
        startedAt: '2026-11-02T01:00:05.000Z',
        discovered: 4,
        published: 4,
        consumed: 0,
        completed: 1,
        duplicates: 0,
        rejected: 0,
        deferred: 0,
        throttled: 0,
        deadLettered: 0,
        oldestMessageAgeSeconds: null,
        outstanding: 3,
        reconciles: false,
      },
      {
        batchId: 'alpha:2026-11-01:20261101T010000Z',
        businessDate: '2026-11-01',
        startedAt: '2026-11-01T01:00:05.000Z',
        finishedAt: '2026-11-01T01:00:09.000Z',
        discovered: 5,
        published: 5,
        consumed: 6,
        completed: 3,
        duplicates: 2,
        rejected: 1,
        deferred: 0,
        throttled: 2,
        deadLettered: 1,
        oldestMessageAgeSeconds: 61,
        outstanding: 0,
        reconciles: true,
      },
    ]);
    expect(beta).toMatchObject({ job: 'beta', oldestWork: { ageSeconds: 0, source: 'queue-empty' }, batches: [] });
    expect(beta.queue.visible + beta.dlq.visible).toBe(0);
  });

  it('limits the batches with --batches and the jobs with --job', async () => {
    const out = await f.run(['status', '--job', 'alpha', '--batches', '1', '--json']);

    const result = out.json<StatusResult>();
    expect(result.jobs.map((j) => [j.job, j.batches.map((b) => b.batchId)])).toEqual([['alpha', ['alpha:2026-11-02:20261102T010000Z']]]);
  });

  it('prints tables by default, flagging a batch that does not reconcile', async () => {
    const out = await f.run(['status']);

    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/^PacedJobs-test \(local\) at /);
    const row = out.stdout.split('\n').find((l) => l.includes('alpha:2026-11-02:20261102T010000Z'));
    expect(row?.replace(/\s+/g, ' ')).toBe('│ alpha │ alpha:2026-11-02:20261102T010000Z │ 4 │ 1 │ 0 │ 0 │ 0 │ 0 │ 0 │ - │ 3 │ NO │');
    expect(out.stdout).toContain(`note: ${OLDEST_WORK_NOTE}`);
  });

  it('rejects a --batches outside 1..50', async () => {
    const out = await f.run(['status', '--batches', '0']);

    expect(out.code).toBe(2);
    expect(out.stderr).toBe('error: --batches must be a whole number from 1 to 50, got "0"\n');
  });
});
