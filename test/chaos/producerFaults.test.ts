import {
  admissionStepOf,
  ChainRecoveryError,
  ProducerFaultInjector,
  producerInvocationOf,
  producerMessagesByBatch,
  recoveryStepBody,
  stoppedChains,
  type RunLedgerItem,
} from '../../chaos/producerFaults';
import type { InvocationHandle } from '../../local/lambdaRuntime';

const JOB = 'payments-job';
const BATCH = `${JOB}:2026-01-15:20260116T020000Z`;
/** The batch of a producer re-run of the same date, a few seconds after the schedule's. */
const RERUN_BATCH = `${JOB}:2026-01-15:20260116T020004Z`;

/** An invocation handle that records its kill, as the local runtime's would. */
function handle(): InvocationHandle & { killed: boolean } {
  const h = { killed: false, ended: false, kill: () => false };
  h.kill = () => {
    if (h.ended) return false;
    h.ended = true;
    h.killed = true;
    return true;
  };
  return h;
}

const stepEvent = (step: number, messageId: string, receiveCount = 1, batchId = BATCH) => ({
  Records: [
    {
      messageId,
      eventSource: 'aws:sqs',
      body: JSON.stringify({ kind: 'admission-step', batchId, businessDate: '2026-01-15', step }),
      attributes: { ApproximateReceiveCount: String(receiveCount) },
    },
  ],
});
const directEvent = (scheduledTime = '2026-01-16T02:00:00Z') => ({ scheduledTime, businessDate: '2026-01-15' });

/** Dice that always fire and always pick the lowest value, so each decision is the test's to state. */
const sure = { chance: (p: number) => p > 0, int: (min: number) => min };
/** Dice that always fire and always pick the highest value: step 2, where the doomed step was once chosen by number. */
const highest = { chance: (p: number) => p > 0, int: (_min: number, max: number) => max };

describe('Function: producerInvocationOf', () => {
  it('reads an admission step from its SQS record, and the batch of a direct event as the producer derives it', () => {
    expect(producerInvocationOf(stepEvent(3, 'm1', 2), JOB)).toEqual({
      kind: 'step',
      batchId: BATCH,
      step: 3,
      messageId: 'm1',
      receiveCount: 2,
    });
    expect(producerInvocationOf(directEvent(), JOB)).toEqual({ kind: 'direct', batchId: BATCH });
    expect(producerInvocationOf({ businessDate: '2026-01-15', batchId: 'b-7' }, JOB)).toEqual({
      kind: 'direct',
      batchId: 'b-7',
    });
  });

  it('names no batch for a manual run without one, or a record that is not a step', () => {
    expect(producerInvocationOf({ businessDate: '2026-01-15' }, JOB)).toBeUndefined();
    expect(producerInvocationOf({ Records: [{ messageId: 'm', body: 'not json' }] }, JOB)).toBeUndefined();
    expect(producerInvocationOf({ Records: [{ messageId: 'm', body: '{"kind":"other"}' }] }, JOB)).toBeUndefined();
  });
});

describe('Function: admissionStepOf', () => {
  it('reads the batch and step of a step message, and nothing of another body', () => {
    expect(
      admissionStepOf(JSON.stringify({ kind: 'admission-step', batchId: 'b', businessDate: '2026-01-15', step: 2 })),
    ).toEqual({ batchId: 'b', step: 2 });
    expect(admissionStepOf('{"scheduledTime":"2026-01-16T02:00:00Z"}')).toBeUndefined();
    expect(admissionStepOf('')).toBeUndefined();
  });
});

describe('Function: stoppedChains', () => {
  const now = Date.parse('2026-01-16T02:10:00Z');
  const item = (over: Partial<RunLedgerItem>): RunLedgerItem => ({
    sk: 'b',
    admission: 'admitting',
    step: 2,
    nextStepAt: '2026-01-16T02:09:00Z',
    businessDate: '2026-01-15',
    ...over,
  });

  it('finds a run still admitting whose next step is overdue and unleased', () => {
    expect(stoppedChains([item({})], now, 1000).map((i) => i.sk)).toEqual(['b']);
  });

  it('leaves a step not yet due, a step under a live lease, and a finished run', () => {
    expect(stoppedChains([item({ nextStepAt: '2026-01-16T02:09:59.500Z' })], now, 1000)).toEqual([]);
    expect(stoppedChains([item({ leaseUntilMs: now + 5000 })], now, 1000)).toEqual([]);
    expect(stoppedChains([item({ admission: 'complete' })], now, 1000)).toEqual([]);
  });

  it('counts a step 0 that never ended (no nextStepAt) as due since the run started, and an expired lease as none', () => {
    const stuck = item({ step: 0, nextStepAt: undefined, startedAt: '2026-01-16T02:00:00Z', leaseUntilMs: now - 1 });
    expect(stoppedChains([stuck], now, 1000)).toEqual([stuck]);
  });
});

describe('Function: recoveryStepBody', () => {
  it("is a step message for the run's current step, with its scheduled time when it has one", () => {
    expect(
      JSON.parse(
        recoveryStepBody({ sk: BATCH, step: 4, businessDate: '2026-01-15', scheduledTime: '2026-01-16T02:00:00Z' }),
      ),
    ).toEqual({
      kind: 'admission-step',
      batchId: BATCH,
      businessDate: '2026-01-15',
      step: 4,
      scheduledTime: '2026-01-16T02:00:00Z',
    });
    expect(JSON.parse(recoveryStepBody({ sk: 'b', step: 0, businessDate: '2026-01-15' }))).toEqual({
      kind: 'admission-step',
      batchId: 'b',
      businessDate: '2026-01-15',
      step: 0,
    });
  });

  it('throws naming the item when it holds no step to recover', () => {
    expect(() => recoveryStepBody({ sk: 'b-1', businessDate: '2026-01-15' })).toThrow(
      new ChainRecoveryError('ledger item b-1 has no admission step or business date to recover the chain from', 'b-1'),
    );
  });
});

describe('Function: producerMessagesByBatch', () => {
  it("groups the producer's fresh messages by batch and skips deferrals (they carry attempt) and poison", () => {
    const entries = [
      { MessageBody: JSON.stringify({ batchId: 'a', operationId: 'op-1', enqueuedAt: 't' }) },
      { MessageBody: JSON.stringify({ batchId: 'a', operationId: 'op-2', enqueuedAt: 't' }) },
      { MessageBody: JSON.stringify({ batchId: 'a', operationId: 'op-3', attempt: 0 }) },
      { MessageBody: JSON.stringify({ batchId: 'b', operationId: 'op-1' }) },
      { MessageBody: 'not json at all' },
    ];
    expect([...producerMessagesByBatch(entries)]).toEqual([
      ['a', ['op-1', 'op-2']],
      ['b', ['op-1']],
    ]);
  });
});

describe('Class: ProducerFaultInjector', () => {
  const injector = (over: { killRate?: number; deadLetters?: number; on?: boolean } = {}) =>
    new ProducerFaultInjector({
      jobName: JOB,
      killRate: over.killRate ?? 1,
      deadLetters: over.deadLetters ?? 0,
      dice: sure,
      isOn: () => over.on ?? true,
    });

  describe('Method: onPublish', () => {
    it("kills the chosen invocation at its page's call, and counts a direct step 0 apart", () => {
      const faults = injector();
      const direct = handle();
      faults.onInvoke(directEvent(), direct);
      faults.onPublish(BATCH, ['op-1', 'op-2']);
      expect(direct.killed).toBe(true);
      expect(faults.counts).toMatchObject({ killsArmed: 1, killsMidPublish: 1, killsMidPublishDirect: 1 });
    });

    it('spares a chosen invocation that ended first, and counts the operations published again', () => {
      const faults = injector({ killRate: 0 });
      const step = handle();
      faults.onInvoke(stepEvent(1, 'm1'), step);
      faults.onPublish(BATCH, ['op-1', 'op-2']);
      faults.onPublish(BATCH, ['op-2']);
      expect(step.killed).toBe(false);
      expect(faults.counts).toMatchObject({
        killsArmed: 0,
        killsMidPublish: 0,
        republishedMessages: 1,
        admissionStepsDelivered: 1,
      });
    });

    it('arms nothing while the faults are off', () => {
      const faults = injector({ on: false });
      const step = handle();
      faults.onInvoke(stepEvent(1, 'm1'), step);
      faults.onPublish(BATCH, ['op-1']);
      expect(step.killed).toBe(false);
      expect(faults.counts.killsArmed).toBe(0);
    });
  });

  describe('Method: onInvoke', () => {
    it("never makes a direct event's retry (the same event) a candidate, so the retry leaves its takeover step", () => {
      const faults = injector();
      const event = directEvent();
      const first = handle();
      faults.onInvoke(event, first);
      first.kill();
      const retry = handle();
      faults.onInvoke(event, retry);
      faults.onPublish(BATCH, ['op-1']);
      expect(retry.killed).toBe(false);
    });

    it('kills a doomed step on every receive, and never dooms a recovery the harness sent', () => {
      const faults = injector({ killRate: 0, deadLetters: 2 });
      // Step 0 is never doomed: the first continuation is.
      const step0 = handle();
      faults.onInvoke(stepEvent(0, 'm0'), step0);
      expect(step0.killed).toBe(false);
      const receives = [handle(), handle(), handle()];
      receives.forEach((h, i) => faults.onInvoke(stepEvent(1, 'm1', i + 1), h));
      expect(receives.map((h) => h.killed)).toEqual([true, true, true]);
      faults.exemptMessage('m-recovery');
      const recovery = handle();
      faults.onInvoke(stepEvent(1, 'm-recovery'), recovery);
      expect(recovery.killed).toBe(false);
      expect(faults.counts).toMatchObject({ stepsDoomed: 1, doomedReceivesKilled: 3 });
    });

    it('dooms the first continuation delivered, so a step is doomed even when every run ends at step 1', () => {
      // The deliveries under which a seed-42 CI run doomed nothing (its dice had chosen step 2), as the runs' logs show
      // them: the schedule's run and its re-run of the date; the first run's step 1 killed mid-publish, and redelivered
      // a visibility timeout later, by when the re-run's step 1 had admitted the rest of the date; each run ended at
      // step 1, and no step 2 came.
      const faults = new ProducerFaultInjector({
        jobName: JOB,
        killRate: 0,
        deadLetters: 1,
        dice: highest,
        isOn: () => true,
      });
      faults.onInvoke(directEvent(), handle());
      faults.onInvoke(directEvent('2026-01-16T02:00:04Z'), handle());
      const first = handle();
      faults.onInvoke(stepEvent(1, 'm1'), first);
      // The kill mid-publish that holds this run's chain up (nothing left to kill once the step is doomed).
      first.kill();
      const rerun = handle();
      faults.onInvoke(stepEvent(1, 'm2', 1, RERUN_BATCH), rerun);
      const redelivered = handle();
      faults.onInvoke(stepEvent(1, 'm1', 2), redelivered);
      expect(rerun.killed).toBe(false);
      expect(redelivered.killed).toBe(true);
      // Both receives killed: at the admission queue's maxReceiveCount (2 in the CI run), SQS dead-letters it.
      expect(faults.counts).toMatchObject({ stepsDoomed: 1, doomedReceivesKilled: 2, admissionStepsDelivered: 3 });
    });

    it('dooms no step delivered while the faults are off, and only the first continuations when they are on', () => {
      let on = false;
      const faults = new ProducerFaultInjector({
        jobName: JOB,
        killRate: 0,
        deadLetters: 1,
        dice: sure,
        isOn: () => on,
      });
      const off = handle();
      faults.onInvoke(stepEvent(1, 'm1'), off);
      on = true;
      const [first, later] = [handle(), handle()];
      faults.onInvoke(stepEvent(2, 'm2'), first);
      faults.onInvoke(stepEvent(3, 'm3'), later);
      expect([off.killed, first.killed, later.killed]).toEqual([false, true, false]);
      expect(faults.counts).toMatchObject({ stepsDoomed: 1, doomedReceivesKilled: 1 });
    });
  });
});
