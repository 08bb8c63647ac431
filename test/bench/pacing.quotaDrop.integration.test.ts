import {
  phaseAllowances,
  planStorms,
  recoveryWindows,
  restoreWindow,
  runQuotaDropBench,
  scheduleSteps,
} from '../../bench/quotaDrop';

describe('Function: runQuotaDropBench', () => {
  // Small: 3 instances, 40 per 500 ms window, the provider's quota halved for 8 windows between 4 and 6 at full. A
  // generous margin keeps a busy machine's late starts from bunching. Directions only: no figure, no timing.
  it('lowers the adaptive rate after the quota drops and raises it after the quota comes back, never above the allowance', async () => {
    const report = await runQuotaDropBench({
      windowMs: 500,
      allowedPerWindow: 40,
      instances: 3,
      batchSize: 5,
      safetyMarginMs: 60,
      phases: [
        { windows: 4, share: 1 },
        { windows: 8, share: 0.5 },
        { windows: 6, share: 1 },
      ],
      modes: ['adaptive'],
    });
    const adaptive = report.adaptive!;
    expect(adaptive.windows).toHaveLength(18);
    const low = adaptive.windows.slice(4, 12);
    const lowest = Math.min(...low.map((w) => w.rate), ...adaptive.rateChanges.map((c) => c.to));
    // Fell: the provider's 429s cut the shared rate below the configured allowance.
    expect(lowest).toBeLessThan(40);
    expect(adaptive.throttled).toBeGreaterThan(0);
    // Rose: after the restore the fleet paces above the lowest rate it reached.
    expect(Math.max(...adaptive.windows.slice(12).map((w) => w.rate))).toBeGreaterThan(lowest);
    // The fleet-wide guarantee holds whatever the rate did.
    expect(adaptive.maxStartsInAnyWindow).toBeLessThanOrEqual(40);
    expect(report.fixed).toBeUndefined();
  }, 60_000);
});

describe('Function: phaseAllowances', () => {
  it('is the allowance of each window, in order', () => {
    expect(
      phaseAllowances(
        [
          { windows: 2, share: 1 },
          { windows: 1, share: 0.5 },
        ],
        20,
      ),
    ).toEqual([20, 20, 10]);
  });

  it('throws naming every bad phase', () => {
    expect(() =>
      phaseAllowances(
        [
          { windows: 0, share: 1 },
          { windows: 1, share: 0.01 },
        ],
        20,
      ),
    ).toThrow(
      'invalid quota-drop phases: phase 0: windows must be a positive integer (got 0); phase 1: share must be in (0, 1] and leave at least 1 start per window of 20 (got 0.01)',
    );
  });
});

describe('Function: recoveryWindows', () => {
  const windows = (starts: number[]) => starts.map((s) => ({ allowed: 20, starts: s }));

  it('counts the whole windows after the restore before one reaches 90% of the restored quota', () => {
    expect(recoveryWindows(windows([10, 12, 17, 18, 19]), 1)).toBe(2);
    expect(recoveryWindows(windows([10, 19]), 1)).toBe(0);
  });

  it('is null when no window after the restore reaches it, or there is no restore', () => {
    expect(recoveryWindows(windows([10, 12, 17]), 1)).toBeNull();
    expect(recoveryWindows(windows([19, 19]), restoreWindow([20, 20]))).toBeNull();
  });

  it('takes the restore as the last rise of the schedule', () => {
    expect(restoreWindow([20, 10, 10, 20, 20])).toBe(3);
    expect(restoreWindow([20, 10, 15, 10, 20])).toBe(4);
  });
});

describe('Function: planStorms', () => {
  it('places storms of W/120 to W/30 every W/15 to W/5, the same for the same seed', () => {
    const storms = planStorms(60_000, 1000, 7);
    expect(planStorms(60_000, 1000, 7)).toEqual(storms);
    expect(planStorms(60_000, 1000, 8)).not.toEqual(storms);
    for (const [i, s] of storms.entries()) {
      expect(s.toMs - s.fromMs).toBeGreaterThanOrEqual(8);
      expect(s.toMs - s.fromMs).toBeLessThanOrEqual(34);
      if (i > 0) expect(s.fromMs - storms[i - 1].toMs).toBeGreaterThanOrEqual(66);
      if (i > 0) expect(s.fromMs - storms[i - 1].toMs).toBeLessThanOrEqual(201);
    }
    // About a tenth of the time, as in the chaos mix.
    const stormMs = storms.reduce((sum, s) => sum + s.toMs - s.fromMs, 0);
    expect(stormMs / 60_000).toBeGreaterThan(0.06);
    expect(stormMs / 60_000).toBeLessThan(0.2);
  });
});

describe('Function: scheduleSteps', () => {
  it("cuts each storm in as a quota of 0 and restores the window's own quota after it, also across a window edge", () => {
    const steps = scheduleSteps([20, 10], 1000, [
      { fromMs: 100, toMs: 150 },
      { fromMs: 980, toMs: 1020 },
    ]);
    expect(steps).toEqual([
      { atMs: 0, allowedPerWindow: 20 },
      { atMs: 100, allowedPerWindow: 0 },
      { atMs: 150, allowedPerWindow: 20 },
      { atMs: 980, allowedPerWindow: 0 },
      // The second window starts inside the storm: the storm's 0 holds until it ends.
      { atMs: 1000, allowedPerWindow: 0 },
      { atMs: 1020, allowedPerWindow: 10 },
    ]);
  });
});
