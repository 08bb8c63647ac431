import {
  activeChainGraceMs,
  AdmissionError,
  admissionGroupSize,
  delaySecondsUntil,
  earlierRunAdmitting,
  nextStepDelaySeconds,
  planAdmission,
  runOrder,
  stalledSince,
  visibleAtMs,
  waitDelaySeconds,
  type DateRun,
} from '../../../lambda/core/admission';

const NOW = 1_000_000;

describe('Function: planAdmission', () => {
  it('admits one horizon of work at the rate into an empty queue, starting now', () => {
    // 80 starts a minute for 5 minutes: 400.
    expect(planAdmission({ nowMs: NOW, queueDepth: 0, ratePerSecond: 80 / 60, horizonMs: 300_000 })).toEqual({
      admit: 400,
      firstVisibleMs: NOW,
    });
  });

  it('starts after what the queue holds and admits only the rest of the horizon', () => {
    // 200 queued at 80/min take 150 s; 150 s of the horizon are left: 200 more.
    expect(planAdmission({ nowMs: NOW, queueDepth: 200, ratePerSecond: 80 / 60, horizonMs: 300_000 })).toEqual({
      admit: 200,
      firstVisibleMs: NOW + 150_000,
    });
  });

  it("starts after the run's own last planned message when that is later than the queue says", () => {
    const plan = planAdmission({
      nowMs: NOW,
      queueDepth: 0,
      ratePerSecond: 1,
      horizonMs: 30_000,
      plannedUntilMs: NOW + 10_000,
    });
    expect(plan).toEqual({ admit: 19, firstVisibleMs: NOW + 11_000 });
  });

  it('admits nothing while the queue holds a horizon or more', () => {
    expect(planAdmission({ nowMs: NOW, queueDepth: 500, ratePerSecond: 80 / 60, horizonMs: 300_000 }).admit).toBe(0);
  });

  it('admits everything at once without a rate', () => {
    expect(planAdmission({ nowMs: NOW, queueDepth: 10_000, ratePerSecond: undefined, horizonMs: 0 })).toEqual({
      admit: Number.POSITIVE_INFINITY,
      firstVisibleMs: NOW,
    });
  });

  it('names a rate or horizon no plan can come from', () => {
    expect(() => planAdmission({ nowMs: NOW, queueDepth: 0, ratePerSecond: 0, horizonMs: 1000 })).toThrow(
      new AdmissionError('ratePerSecond must be a positive number (got 0)'),
    );
    expect(() => planAdmission({ nowMs: NOW, queueDepth: 0, ratePerSecond: 1, horizonMs: 0 })).toThrow(
      new AdmissionError('horizonMs must be positive (got 0)'),
    );
  });
});

describe('Function: visibleAtMs', () => {
  const plan = { admit: 30, firstVisibleMs: NOW };

  it('makes each group of one batch visible at its first slot', () => {
    // 2 starts a second, groups of 10: a group every 5 s.
    expect([0, 9, 10, 19, 20].map((i) => visibleAtMs(i, plan, 2, 10) - NOW)).toEqual([0, 0, 5000, 5000, 10_000]);
  });

  it('makes everything visible at once without a rate', () => {
    expect(visibleAtMs(29, plan, undefined, 10)).toBe(NOW);
  });
});

describe('Function: delaySecondsUntil', () => {
  it('rounds to whole seconds within what SQS allows', () => {
    expect([-5000, 0, 1499, 1500, 899_999, 2_000_000].map((ms) => delaySecondsUntil(NOW + ms, NOW))).toEqual([
      0, 0, 1, 2, 900, 900,
    ]);
  });
});

describe('Function: nextStepDelaySeconds', () => {
  it('comes back when the queue has drained to half the horizon', () => {
    expect(
      nextStepDelaySeconds({ nowMs: NOW, plannedUntilMs: NOW + 300_000, horizonMs: 300_000, ratePerSecond: 1 }),
    ).toBe(150);
  });

  it('never comes back sooner than the minimum, nor later than SQS can delay', () => {
    expect(
      nextStepDelaySeconds({ nowMs: NOW, plannedUntilMs: NOW, horizonMs: 300_000, ratePerSecond: 1, minSeconds: 5 }),
    ).toBe(5);
    expect(
      nextStepDelaySeconds({ nowMs: NOW, plannedUntilMs: NOW + 5_000_000, horizonMs: 300_000, ratePerSecond: 1 }),
    ).toBe(900);
  });

  it('continues at once without a rate', () => {
    expect(
      nextStepDelaySeconds({ nowMs: NOW, plannedUntilMs: NOW + 300_000, horizonMs: 300_000, ratePerSecond: undefined }),
    ).toBe(0);
  });
});

describe('Function: admissionGroupSize', () => {
  it("is one event-source batch, cut to the slots that fit the consumer's short wait", () => {
    expect(admissionGroupSize(10, 80 / 60, 10_000)).toBe(10);
    expect(admissionGroupSize(50, 80 / 60, 10_000)).toBe(13);
    expect(admissionGroupSize(50, 40, 10_000)).toBe(50);
    expect(admissionGroupSize(10, 0.01, 10_000)).toBe(1);
  });
});

describe('Function: stalledSince', () => {
  const due = new Date(NOW - 120_000).toISOString();

  it('names when the step of an admitting run was due, once it is overdue past the grace', () => {
    expect(stalledSince({ admission: 'admitting', nextStepAt: due }, NOW, 60_000)).toBe(due);
    expect(stalledSince({ admission: 'admitting', nextStepAt: due }, NOW, 180_000)).toBeUndefined();
    // A first step that never ended has no nextStepAt: it counts from the start.
    expect(stalledSince({ admission: 'admitting', startedAt: due }, NOW, 60_000)).toBe(due);
  });

  it('never calls a finished run, or one whose step holds a live lease, stalled', () => {
    expect(stalledSince({ admission: 'complete', nextStepAt: due }, NOW, 0)).toBeUndefined();
    expect(stalledSince({ admission: 'admitting', nextStepAt: due, leaseUntilMs: NOW + 1 }, NOW, 0)).toBeUndefined();
    expect(stalledSince({ admission: 'admitting', nextStepAt: due, leaseUntilMs: NOW - 1 }, NOW, 0)).toBe(due);
    expect(stalledSince({ admission: 'admitting' }, NOW, 0)).toBeUndefined();
  });
});

describe('Function: earlierRunAdmitting', () => {
  const at = (ms: number) => new Date(NOW + ms).toISOString();
  const self = { batchId: 'job:2026-01-15:b', startedAt: at(0) };
  const options = { nowMs: NOW + 10_000, graceMs: activeChainGraceMs(60_000), lingerMs: 5_000 };
  const earlier = (run: Partial<DateRun>): DateRun => ({
    batchId: 'job:2026-01-15:a',
    startedAt: at(-2_000),
    admission: 'admitting',
    ...run,
  });

  it('orders runs live before backfill, then by start, then by batch ID, the same whichever asks', () => {
    const runs: DateRun[] = [
      { batchId: 'x:backfill-early', startedAt: at(-60_000), backfill: true },
      { batchId: 'x:late', startedAt: at(5_000) },
      { batchId: 'x:b', startedAt: at(0) },
      { batchId: 'x:a', startedAt: at(0) },
    ];
    expect([...runs].sort(runOrder).map((r) => r.batchId)).toEqual(['x:a', 'x:b', 'x:late', 'x:backfill-early']);
    for (const a of runs)
      for (const b of runs) expect(Math.sign(runOrder(a, b))).toBe(a === b ? 0 : -Math.sign(runOrder(b, a)));
  });

  it('waits for an earlier run whose chain is alive, until its next step is due, and never for a later one', () => {
    expect(earlierRunAdmitting(self, [earlier({ nextStepAt: at(30_000) })], options)).toMatchObject({
      reason: 'admitting',
      resumeAtMs: NOW + 30_000,
    });
    // Its step is running now (a live lease), however overdue: look again soon.
    expect(
      earlierRunAdmitting(self, [earlier({ nextStepAt: at(-500_000), leaseUntilMs: NOW + 60_000 })], options),
    ).toMatchObject({ resumeAtMs: NOW + 10_000 });
    // The later run is ignored by the earlier: of two runs, only one waits.
    expect(
      earlierRunAdmitting(
        { batchId: 'job:2026-01-15:a', startedAt: at(-2_000) },
        [{ ...self, admission: 'admitting' }],
        options,
      ),
    ).toBeUndefined();
  });

  it('does not wait for a stalled chain, a run at the page limit or complete with its plan behind it, or a backfill run', () => {
    // Due more than the grace (one redelivery of a killed step) ago, and no lease: lost to the producer DLQ.
    expect(
      earlierRunAdmitting(self, [earlier({ nextStepAt: at(10_000 - options.graceMs - 1) })], options),
    ).toBeUndefined();
    expect(
      earlierRunAdmitting(self, [earlier({ nextStepAt: at(10_000 - options.graceMs + 1) })], options),
    ).toBeDefined();
    expect(
      earlierRunAdmitting(self, [earlier({ admission: 'page-limit', plannedUntilMs: NOW })], options),
    ).toBeUndefined();
    expect(earlierRunAdmitting(self, [earlier({ admission: 'complete' })], options)).toBeUndefined();
    expect(earlierRunAdmitting(self, [earlier({ backfill: true, nextStepAt: at(30_000) })], options)).toBeUndefined();
  });

  it("waits for an ended run's last slots, one group past its plan, and for every earlier run it must", () => {
    expect(
      earlierRunAdmitting(self, [earlier({ admission: 'complete', plannedUntilMs: NOW + 20_000 })], options),
    ).toMatchObject({ reason: 'plan', resumeAtMs: NOW + 25_000 });
    const both = earlierRunAdmitting(
      self,
      [
        earlier({ admission: 'complete', plannedUntilMs: NOW + 20_000 }),
        earlier({ batchId: 'job:2026-01-15:0', startedAt: at(-9_000), nextStepAt: at(15_000) }),
      ],
      options,
    );
    // Named by the earliest, resumed when both could let it go.
    expect(both).toMatchObject({ run: { batchId: 'job:2026-01-15:0' }, resumeAtMs: NOW + 25_000 });
  });

  it("waits at least 5 s and at most SQS's 900 s", () => {
    expect([
      waitDelaySeconds(NOW, NOW),
      waitDelaySeconds(NOW + 12_001, NOW),
      waitDelaySeconds(NOW + 3_600_000, NOW),
    ]).toEqual([5, 13, 900]);
  });
});
