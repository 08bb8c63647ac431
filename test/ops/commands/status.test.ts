import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { DynamoRunStateStore } from '../../../lambda/adapters/admissionState';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import {
  batchStatus,
  OLDEST_WORK_NOTE,
  oldestWork,
  PROJECTION_NOTE,
  type StatusResult,
} from '../../../ops/commands/status';
import type { BatchView } from '../../../ops/ledger';
import { type OpsFixture, startOpsFixture } from '../fixture';

describe('Function: batchStatus', () => {
  const now = new Date('2026-11-03T03:00:00.000Z');
  const base: BatchView = {
    batchId: 'alpha:2026-11-03:20261103T010000Z',
    businessDate: '2026-11-03',
    startedAt: '2026-11-03T01:00:02.000Z',
    discovered: 200,
    invalidRows: 0,
    published: 200,
    consumed: 160,
    completed: 150,
    completedElsewhere: 0,
    adopted: 0,
    duplicates: 0,
    retries: 0,
    rejected: 2,
    deferred: 0,
    throttled: 0,
    deadLettered: 1,
    admission: 'admitting',
    step: 2,
    pages: 2,
    eligible: 1000,
    admissionRatePerMinute: 30,
    nextStepAt: '2026-11-03T02:55:00.000Z',
    oldestMessageAgeSeconds: null,
    invocations: 0,
    drainPerMinute: 0,
    outstanding: 47,
    reconciles: false,
  };
  const derived = (batch: Partial<BatchView>, stallMinutes?: number) => {
    const { notYetAdmitted, workLeft, workLeftBasis, projectedFinish, stalled } = batchStatus(
      { ...base, ...batch },
      { job: 'alpha', now, stallMinutes },
    );
    return { notYetAdmitted, workLeft, workLeftBasis, projectedFinish, stalled };
  };

  it("forecasts a running batch at the rate it drains at, against the job's SLO, past it or inside it", () => {
    const running: BatchView = {
      ...base,
      scheduledTime: '2026-11-03T02:00:00.000Z',
      admission: 'complete',
      discovered: 12_000,
      completed: 0,
      rejected: 0,
      deadLettered: 0,
      drainPerMinute: 78,
    };
    const slo = { slo: { objective: 0.99, completeWithinMinutes: 120 }, timeZone: 'UTC' };
    // 12,000 at 78 a minute: 154 minutes; 99% (11,880) by 05:33, the deadline 02:00 + 120 min = 04:00.
    expect(batchStatus(running, { job: 'alpha', now, slo }).forecast).toEqual({
      left: 12_000,
      drainPerMinute: 78,
      projectedFinish: '2026-11-03T05:34:00.000Z',
      slo: {
        objective: 0.99,
        completeWithinMinutes: 120,
        deadline: '2026-11-03T04:00:00.000Z',
        objectiveLeft: 11_880,
        objectiveMetAt: '2026-11-03T05:33:00.000Z',
        withinSlo: false,
        minutesPastSlo: 93,
      },
      text: '12,000 left at 78/min: done 05:34; 99% by 05:33, 93 min past the SLO (04:00)',
    });
    const fast = batchStatus(
      { ...running, drainPerMinute: 240 },
      { job: 'alpha', now, slo: { ...slo, timeZone: 'Europe/Berlin' } },
    ).forecast;
    expect(fast).toMatchObject({
      slo: { withinSlo: true, minutesPastSlo: -10 },
      text: '12,000 left at 240/min: done 04:50; 99% by 04:50, inside the SLO (05:00, 10 min to spare)',
    });
    // Without an SLO: the projection alone; finished: no forecast.
    expect(batchStatus(running, { job: 'alpha', now }).forecast?.text).toBe('12,000 left at 78/min: done 05:34');
    expect(batchStatus({ ...running, completed: 12_000 }, { job: 'alpha', now, slo }).forecast).toBeNull();
  });

  it('projects an admitting batch from its eligible count and admission rate', () => {
    // 1000 eligible - 153 settled = 847 left; at 30 a minute that is 28 min 14 s.
    expect(derived({})).toEqual({
      notYetAdmitted: 800,
      workLeft: 847,
      workLeftBasis: 'eligible',
      projectedFinish: '2026-11-03T03:28:14.000Z',
      stalled: null,
    });
  });

  it('says not-yet-admitted is unknown, and projects from what is discovered, when the job does not count eligible records', () => {
    expect(derived({ eligible: undefined })).toEqual({
      notYetAdmitted: null,
      workLeft: 47,
      workLeftBasis: 'discovered',
      projectedFinish: '2026-11-03T03:01:34.000Z',
      stalled: null,
    });
  });

  it('never counts less work left than is discovered and unsettled', () => {
    // Records appeared after the count at the run's start.
    expect(derived({ eligible: 150 })).toMatchObject({ notYetAdmitted: 0, workLeft: 47 });
  });

  it('projects from what is discovered once admission is complete, and not at all once everything settled', () => {
    expect(derived({ admission: 'complete', nextStepAt: undefined })).toEqual({
      notYetAdmitted: 0,
      workLeft: 47,
      workLeftBasis: 'discovered',
      projectedFinish: '2026-11-03T03:01:34.000Z',
      stalled: null,
    });
    expect(derived({ admission: 'complete', nextStepAt: undefined, completed: 197 })).toMatchObject({
      workLeft: 0,
      projectedFinish: null,
    });
  });

  it('keeps the un-admitted rest of a run that stopped at the page limit out of its work left', () => {
    expect(derived({ admission: 'page-limit', nextStepAt: undefined })).toMatchObject({
      notYetAdmitted: 800,
      workLeft: 47,
    });
  });

  it('has no projection without an admission rate (unlimited admission)', () => {
    expect(derived({ admissionRatePerMinute: undefined })).toMatchObject({ workLeft: 847, projectedFinish: null });
  });

  it('knows nothing of admission for a batch without admission state', () => {
    expect(
      derived({
        admission: undefined,
        step: undefined,
        eligible: undefined,
        admissionRatePerMinute: undefined,
        nextStepAt: undefined,
      }),
    ).toEqual({
      notYetAdmitted: null,
      workLeft: 47,
      workLeftBasis: 'discovered',
      projectedFinish: null,
      stalled: null,
    });
  });

  it('names a stall when the next step is more than the grace period overdue', () => {
    expect(derived({ nextStepAt: '2026-11-03T02:44:30.000Z' }).stalled).toEqual({
      name: 'admission stalled',
      since: '2026-11-03T02:44:30.000Z',
      overdueMinutes: 15,
      fix: 'ops continue --job alpha --batch alpha:2026-11-03:20261103T010000Z',
      message:
        'admission stalled since 2026-11-03T02:44:30.000Z (15 min overdue): step 2 is probably in the producer DLQ; ' +
        'first step of the fix: ops continue --job alpha --batch alpha:2026-11-03:20261103T010000Z',
    });
  });

  it('does not name a stall within the grace period, nor while a step holds its lease, nor once admission ended', () => {
    expect(derived({ nextStepAt: '2026-11-03T02:45:00.000Z' }).stalled).toBeNull();
    expect(derived({ nextStepAt: '2026-11-03T02:00:00.000Z' }, 61).stalled).toBeNull();
    expect(
      derived({ nextStepAt: '2026-11-03T02:00:00.000Z', leaseUntil: '2026-11-03T03:05:00.000Z' }).stalled,
    ).toBeNull();
    expect(derived({ nextStepAt: '2026-11-03T02:00:00.000Z', admission: 'complete' }).stalled).toBeNull();
  });

  it('measures a run whose first step never ended from its start', () => {
    expect(derived({ nextStepAt: undefined, step: 0 }).stalled).toMatchObject({
      since: '2026-11-03T01:00:02.000Z',
      overdueMinutes: 119,
    });
  });
});

describe('Function: oldestWork', () => {
  const batch = (batchId: string, startedAt: string | undefined, outstanding: number) =>
    ({ batchId, startedAt, outstanding }) as BatchView;
  const now = new Date('2026-11-02T03:00:00.000Z');

  it('is 0 when the queue is empty', () => {
    expect(
      oldestWork({ url: 'q', visible: 0, inFlight: 0, delayed: 0 }, [batch('b1', '2026-11-01T00:00:00.000Z', 2)], now),
    ).toEqual({ ageSeconds: 0, source: 'queue-empty' });
  });

  it('measures from the start of the oldest batch with outstanding work', () => {
    const batches = [
      batch('new', '2026-11-02T02:00:00.000Z', 1),
      batch('old', '2026-11-02T01:00:00.000Z', 3),
      batch('settled', '2026-11-01T01:00:00.000Z', 0),
    ];

    expect(oldestWork({ url: 'q', visible: 0, inFlight: 1, delayed: 0 }, batches, now)).toEqual({
      ageSeconds: 7200,
      source: 'ledger-oldest-unsettled-batch',
      batchId: 'old',
    });
  });

  it('says it is unknown when messages wait but no batch shown explains them', () => {
    expect(
      oldestWork(
        { url: 'q', visible: 0, inFlight: 0, delayed: 2 },
        [batch('settled', '2026-11-01T01:00:00.000Z', 0)],
        now,
      ),
    ).toEqual({ ageSeconds: null, source: 'unavailable' });
  });
});

describe('Function: status (ops status)', () => {
  let f: OpsFixture;
  const STALLED = 'beta:2026-11-03:20261103T010000Z';
  const COMPLETE = 'beta:2026-11-02:manual-1';
  const NOW = new Date('2026-11-03T03:00:00.000Z');

  beforeAll(async () => {
    f = await startOpsFixture(['alpha', 'beta']);
    // Written by the runtime's own ledger adapter, so the CLI's reading is pinned to what the handlers write.
    const ledger = new DynamoLedger({ tableName: f.tables.ledger, client: f.dynamo });
    await ledger.addToBatch(
      'alpha',
      'alpha:2026-11-01:20261101T010000Z',
      { discovered: 5, published: 5 },
      { businessDate: '2026-11-01', startedAt: '2026-11-01T01:00:05.000Z' },
    );
    await ledger.addToBatch(
      'alpha',
      'alpha:2026-11-01:20261101T010000Z',
      {},
      { finishedAt: '2026-11-01T01:00:09.000Z' },
    );
    // Two consumer invocations' items, as the consumer writes them: one rejection, one dead-letter (no completion
    // since), one of the completions adopted from an invocation that never wrote (inv-killed), one duplicate.
    await ledger.recordInvocation('alpha', 'alpha:2026-11-01:20261101T010000Z', 'inv-1', {
      consumed: 4,
      completed: 2,
      retries: 3,
      throttled: 2,
      oldestMessageAgeMs: 61_400,
      rejectedMessages: ['m-poison'],
      deadLetteredOperations: ['alpha:op-5 downstream answered 422'],
    });
    await ledger.recordInvocation('alpha', 'alpha:2026-11-01:20261101T010000Z', 'inv-2', {
      consumed: 2,
      duplicates: 1,
      oldestMessageAgeMs: 3_000,
      replays: ['inv-killed alpha:op-3', 'inv-1 alpha:op-1'],
    });
    await ledger.addToBatch(
      'alpha',
      'alpha:2026-11-02:20261102T010000Z',
      { discovered: 4, published: 4, completed: 1 },
      { businessDate: '2026-11-02', startedAt: '2026-11-02T01:00:05.000Z' },
    );
    for (const body of ['{"operationId":"a"}', '{"operationId":"b"}'])
      await f.sqs.send(new SendMessageCommand({ QueueUrl: f.jobs.alpha.queueUrl, MessageBody: body }));
    await f.sqs.send(new SendMessageCommand({ QueueUrl: f.jobs.alpha.dlqUrl, MessageBody: '{"operationId":"c"}' }));

    // beta's runs are admitted: their state is written by the producer's own run-state adapter, step by step.
    const runs = new DynamoRunStateStore({ tableName: f.tables.ledger, client: f.dynamo });
    const at = (iso: string) => Date.parse(iso);
    await runs.ensure('beta', STALLED, {
      businessDate: '2026-11-03',
      scheduledTime: '2026-11-03T01:00:00Z',
      startedAt: '2026-11-03T01:00:02.000Z',
      admissionRatePerMinute: 30,
      eligible: 1000,
    });
    for (const [step, nextStepAt] of [
      [0, '2026-11-03T01:05:00.000Z'],
      [1, '2026-11-03T02:40:00.000Z'],
    ] as const) {
      await runs.lease(
        'beta',
        STALLED,
        step,
        `owner-${step}`,
        at('2026-11-03T01:00:03.000Z'),
        at('2026-11-03T01:15:00.000Z'),
      );
      await runs.commitPage('beta', STALLED, step, `owner-${step}`, {
        cursor: `page-${step + 1}`,
        discovered: 100,
        published: 100,
        plannedUntilMs: at(nextStepAt),
      });
      await runs.endStep('beta', STALLED, step, `owner-${step}`, {
        status: 'admitting',
        nextStepAt,
        plannedUntilMs: at(nextStepAt),
      });
    }
    await ledger.addToBatch('beta', STALLED, { consumed: 160, completed: 150, rejected: 2, deadLettered: 1 }, {});
    await runs.ensure('beta', COMPLETE, {
      businessDate: '2026-11-02',
      startedAt: '2026-11-02T01:00:02.000Z',
      admissionRatePerMinute: 30,
    });
    await runs.lease('beta', COMPLETE, 0, 'owner-0', at('2026-11-02T01:00:03.000Z'), at('2026-11-02T01:15:00.000Z'));
    // Two source rows its discovery could not turn into messages: recorded, skipped, counted apart from discovered.
    await runs.recordInvalidRows('beta', COMPLETE, 1, [
      { key: 'row 1', reasons: ['id: bad'] },
      { key: 'row:2', reasons: ['id: bad'] },
    ]);
    await runs.commitPage('beta', COMPLETE, 0, 'owner-0', {
      cursor: undefined,
      discovered: 3,
      published: 3,
      invalidRows: 2,
      finishedAt: '2026-11-02T01:00:04.000Z',
    });
    await runs.endStep('beta', COMPLETE, 0, 'owner-0', { status: 'complete' });
    await ledger.addToBatch('beta', COMPLETE, { consumed: 3, completed: 3 }, {});
    // The stalled run's lost step is not here; another run's next step waits, delayed until due.
    await f.sqs.send(
      new SendMessageCommand({
        QueueUrl: f.jobs.beta.admissionQueueUrl,
        MessageBody: '{"kind":"admission-step"}',
        DelaySeconds: 600,
      }),
    );
  });
  afterAll(async () => {
    await f.stop();
  });

  it('reports every job with queue depths, oldest work, and its latest batches newest first', async () => {
    const out = await f.run(['status', '--json']);

    expect(out.code).toBe(0);
    const result = out.json<StatusResult>();
    expect(result).toMatchObject({
      ok: true,
      command: 'status',
      stackName: 'PacedJobs-test',
      source: 'local',
      stallMinutes: 15,
      notes: [OLDEST_WORK_NOTE, PROJECTION_NOTE],
    });
    expect(result.jobs.map((j) => j.job)).toEqual(['alpha', 'beta']);
    const [alpha, beta] = result.jobs;
    expect(alpha.queue).toEqual({ url: f.jobs.alpha.queueUrl, visible: 2, inFlight: 0, delayed: 0 });
    expect(alpha.dlq).toEqual({ url: f.jobs.alpha.dlqUrl, visible: 1, inFlight: 0, delayed: 0 });
    expect(alpha.admissionQueue).toEqual({ url: f.jobs.alpha.admissionQueueUrl, visible: 0, inFlight: 0, delayed: 0 });
    expect(alpha.oldestWork).toMatchObject({
      source: 'ledger-oldest-unsettled-batch',
      batchId: 'alpha:2026-11-02:20261102T010000Z',
    });
    expect(alpha.oldestWork.ageSeconds).toBeGreaterThan(0);
    expect(alpha.batches).toEqual([
      {
        batchId: 'alpha:2026-11-02:20261102T010000Z',
        businessDate: '2026-11-02',
        startedAt: '2026-11-02T01:00:05.000Z',
        discovered: 4,
        invalidRows: 0,
        published: 4,
        consumed: 0,
        completed: 1,
        completedElsewhere: 0,
        adopted: 0,
        duplicates: 0,
        retries: 0,
        rejected: 0,
        deferred: 0,
        throttled: 0,
        deadLettered: 0,
        pages: 0,
        oldestMessageAgeSeconds: null,
        invocations: 0,
        drainPerMinute: 0,
        outstanding: 3,
        reconciles: false,
        notYetAdmitted: null,
        workLeft: 3,
        workLeftBasis: 'discovered',
        projectedFinish: null,
        stalled: null,
        // The job's SLO (the producer's JOB_SETTINGS: 99% within 120 min of the start); nothing drains, so no projection.
        forecast: {
          left: 3,
          drainPerMinute: 0,
          projectedFinish: null,
          slo: {
            objective: 0.99,
            completeWithinMinutes: 120,
            deadline: '2026-11-02T03:00:05.000Z',
            objectiveLeft: 3,
            objectiveMetAt: null,
            withinSlo: null,
            minutesPastSlo: null,
          },
          text: '3 left, nothing settled in the last 10 min; the SLO (99% by 04:00) cannot be projected',
        },
      },
      {
        batchId: 'alpha:2026-11-01:20261101T010000Z',
        businessDate: '2026-11-01',
        startedAt: '2026-11-01T01:00:05.000Z',
        finishedAt: '2026-11-01T01:00:09.000Z',
        discovered: 5,
        invalidRows: 0,
        published: 5,
        consumed: 6,
        completed: 3,
        completedElsewhere: 0,
        adopted: 1,
        duplicates: 2,
        retries: 3,
        rejected: 1,
        deferred: 0,
        throttled: 2,
        deadLettered: 1,
        pages: 0,
        oldestMessageAgeSeconds: 61,
        invocations: 2,
        // Its two invocation items were written just now: 2 completed, 1 rejected, 1 dead-lettered over 10 minutes.
        drainPerMinute: 0.4,
        outstanding: 0,
        reconciles: true,
        notYetAdmitted: null,
        workLeft: 0,
        workLeftBasis: 'discovered',
        projectedFinish: null,
        stalled: null,
        forecast: null,
      },
    ]);
    expect(beta).toMatchObject({ job: 'beta', oldestWork: { ageSeconds: 0, source: 'queue-empty' } });
    expect(beta.queue.visible + beta.dlq.visible).toBe(0);
    expect(beta.batches.map((b) => b.batchId)).toEqual([STALLED, COMPLETE]);
  });

  it("reports each batch's admission from its ledger item, with the admission queue depth, projection and stall", async () => {
    const out = await f.run(['status', '--job', 'beta', '--json'], { now: NOW });

    expect(out.code).toBe(0);
    const [beta] = out.json<StatusResult>().jobs;
    expect(beta.admissionQueue).toEqual({ url: f.jobs.beta.admissionQueueUrl, visible: 0, inFlight: 0, delayed: 1 });
    const [stalled, complete] = beta.batches;
    expect(stalled).toMatchObject({
      batchId: STALLED,
      businessDate: '2026-11-03',
      scheduledTime: '2026-11-03T01:00:00Z',
      admission: 'admitting',
      step: 2,
      pages: 2,
      eligible: 1000,
      discovered: 200,
      published: 200,
      completed: 150,
      admissionRatePerMinute: 30,
      nextStepAt: '2026-11-03T02:40:00.000Z',
      notYetAdmitted: 800,
      workLeft: 847,
      workLeftBasis: 'eligible',
      projectedFinish: '2026-11-03T03:28:14.000Z',
      stalled: {
        name: 'admission stalled',
        since: '2026-11-03T02:40:00.000Z',
        overdueMinutes: 20,
        fix: `ops continue --job beta --batch ${STALLED}`,
        message: `admission stalled since 2026-11-03T02:40:00.000Z (20 min overdue): step 2 is probably in the producer DLQ; first step of the fix: ops continue --job beta --batch ${STALLED}`,
      },
    });
    expect(stalled.leaseUntil).toBeUndefined();
    expect(complete).toMatchObject({
      batchId: COMPLETE,
      admission: 'complete',
      step: 1,
      pages: 1,
      discovered: 3,
      invalidRows: 2,
      completed: 3,
      finishedAt: '2026-11-02T01:00:04.000Z',
      notYetAdmitted: 0,
      workLeft: 0,
      projectedFinish: null,
      stalled: null,
      reconciles: true,
    });
    expect(complete.eligible).toBeUndefined();
    expect(complete.nextStepAt).toBeUndefined();
  });

  it('prints the admission table and names the stall in the text output', async () => {
    const out = await f.run(['status', '--job', 'beta'], { now: NOW });

    expect(out.code).toBe(0);
    const rows = out.stdout.split('\n').map((l) => l.replace(/\s+/g, ' '));
    const queues = rows.indexOf(
      '│ job │ queued │ in flight │ delayed │ oldest work (s) │ DLQ │ steps queued │ steps delayed │',
    );
    expect(rows[queues + 2]).toBe('│ beta │ 0 │ 0 │ 0 │ 0 │ 0 │ 0 │ 1 │');
    const admission = rows.indexOf('Admission');
    expect(rows[admission + 2]).toBe(
      '│ job │ batch │ admission │ step │ pages │ eligible │ discovered │ published │ not admitted │ rate/min │ next step at │ work left │ projected finish │',
    );
    expect(rows[admission + 4]).toBe(
      `│ beta │ ${STALLED} │ admitting │ 2 │ 2 │ 1000 │ 200 │ 200 │ 800 │ 30 │ 2026-11-03T02:40:00.000Z │ 847 │ 2026-11-03T03:28:14.000Z │`,
    );
    expect(rows[admission + 6]).toBe(`│ beta │ ${COMPLETE} │ complete │ 1 │ 1 │ - │ 3 │ 3 │ 0 │ 30 │ - │ 0 │ - │`);
    // Its two invalid source rows beside what it discovered.
    expect(rows).toContain(
      `│ beta │ ${COMPLETE} │ 3 │ 2 │ 3 │ 3 │ 0 │ 0 │ 0 │ 0 │ 0 │ 0 │ 0 │ - │ 0 │ yes │ 2026-11-02T01:00:02Z │ 2026-11-02T01:00:04Z │`,
    );
    expect(out.stdout).toContain(
      `\nGaps\nbeta ${STALLED}: admission stalled since 2026-11-03T02:40:00.000Z (20 min overdue): step 2 is probably in the producer DLQ; ` +
        `first step of the fix: ops continue --job beta --batch ${STALLED}\n\nnote: `,
    );
    expect(out.stdout).toContain(`note: ${PROJECTION_NOTE}`);
  });

  it('takes a longer grace period with --stall-minutes', async () => {
    const json = await f.run(['status', '--job', 'beta', '--stall-minutes', '30', '--json'], { now: NOW });
    const text = await f.run(['status', '--job', 'beta', '--stall-minutes', '30'], { now: NOW });

    expect(json.json<StatusResult>()).toMatchObject({ stallMinutes: 30 });
    expect(json.json<StatusResult>().jobs[0].batches.map((b) => b.stalled)).toEqual([null, null]);
    expect(text.stdout).toContain('\nGaps: none (no admitting batch is more than 30 min past its next step)\n');
  });

  it('rejects a --stall-minutes outside 1..1440', async () => {
    const out = await f.run(['status', '--stall-minutes', '0']);

    expect(out.code).toBe(2);
    expect(out.stderr).toBe('error: --stall-minutes must be a whole number from 1 to 1440, got "0"\n');
  });

  it('limits the batches with --batches and the jobs with --job', async () => {
    const out = await f.run(['status', '--job', 'alpha', '--batches', '1', '--json']);

    const result = out.json<StatusResult>();
    expect(result.jobs.map((j) => [j.job, j.batches.map((b) => b.batchId)])).toEqual([
      ['alpha', ['alpha:2026-11-02:20261102T010000Z']],
    ]);
  });

  it('prints tables by default, flagging a batch that does not reconcile', async () => {
    const out = await f.run(['status']);

    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/^PacedJobs-test \(local\) at /);
    const row = out.stdout.split('\n').find((l) => l.includes('alpha:2026-11-02:20261102T010000Z'));
    const lines = out.stdout.split('\n').map((l) => l.replace(/\s+/g, ' '));
    expect(lines).toContain(
      '│ job │ batch │ discovered │ invalid rows │ consumed │ completed │ elsewhere │ rejected │ DLQ │ dupes │ retries │ deferred │ 429s │ oldest (s) │ outstanding │ reconciles │ started │ finished │',
    );
    // An unfinished batch: its start, no finish yet.
    expect(row?.replace(/\s+/g, ' ')).toBe(
      '│ alpha │ alpha:2026-11-02:20261102T010000Z │ 4 │ 0 │ 0 │ 1 │ 0 │ 0 │ 0 │ 0 │ 0 │ 0 │ 0 │ - │ 3 │ NO │ 2026-11-02T01:00:05Z │ - │',
    );
    // Consumed beside discovered, retries between the duplicates and the deferrals, then started and finished.
    expect(lines).toContain(
      '│ alpha │ alpha:2026-11-01:20261101T010000Z │ 5 │ 0 │ 6 │ 3 │ 0 │ 1 │ 1 │ 2 │ 3 │ 0 │ 2 │ 61 │ 0 │ yes │ 2026-11-01T01:00:05Z │ 2026-11-01T01:00:09Z │',
    );
    expect(out.stdout).toContain(`note: ${OLDEST_WORK_NOTE}`);
  });

  it('rejects a --batches outside 1..50', async () => {
    const out = await f.run(['status', '--batches', '0']);

    expect(out.code).toBe(2);
    expect(out.stderr).toBe('error: --batches must be a whole number from 1 to 50, got "0"\n');
  });
});
