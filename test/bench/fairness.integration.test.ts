// bench:fairness at a small scale: both pipelines and the live night run end to end and report every field, and the
// direction holds (the quiet tenants finish sooner with per-key flow control, the provider never throttles it). No
// timing goal is asserted: the bench itself measures those, in one run (docs/performance.md).
//
// The time is the quotas' windows: the per-key run paces the noisy tenant at its allowance, so it lasts about
// noisyOps / allowance windows. The windows stay 10 s: the consumer gives up a slot when a record wakes later than
// half the limiter's margin (0.5% of the window, at least 20 ms), and on a window of a few seconds that is 10 ms,
// which a loaded machine's timers overshoot; each miss defers the record by whole seconds that do not scale, and the
// runs then drag past their bound (a 3-s scaling of this case did so with one core kept busy).
import { runFairnessBench } from '../../bench/fairness';

const size = { noisyOps: 400, intervalSeconds: 10, jobQuota: 300, perKeyQuota: 100, perKeyLimit: 80 };

describe('Function: runFairnessBench', () => {
  it('runs first-come and per-key on one workload and a live night beside a catch-up, with per-key ahead for the quiet tenants', async () => {
    const result = await runFairnessBench({
      noisyOps: size.noisyOps,
      quietTenants: 5,
      quietOps: 3,
      intervalSeconds: size.intervalSeconds,
      jobQuota: size.jobQuota,
      perKeyQuota: size.perKeyQuota,
      concurrency: 5,
      liveOps: 60,
      liveTenants: 10,
      catchUpDates: 2,
      runTimeoutMs: 120_000,
    });

    for (const run of [result.baseline, result.perKey]) {
      expect(run.incomplete).toBe(0);
      for (const field of [
        'quietP50Ms',
        'quietP99Ms',
        'noisyP50Ms',
        'noisyP99Ms',
        'utilization',
        'maxKeyStartsInAnyWindow',
        'throttled',
      ] as const) {
        expect(Number.isFinite(run[field])).toBe(true);
      }
    }
    // The provider's per-key quota is 100 per 10 s; first-come sends the noisy tenant at the job's pace
    // and is throttled.
    expect(result.baseline.throttled).toBeGreaterThan(0);
    expect(result.baseline.maxKeyStartsInAnyWindow).toBeGreaterThan(result.perKeyLimit);
    // Per-key flow control holds the noisy tenant to its allowance (80, after headroom), the provider never
    // throttles it, and the quiet tenants no longer wait behind the noisy one.
    expect(result.perKeyLimit).toBe(size.perKeyLimit);
    expect(result.perKey.throttled).toBe(0);
    expect(result.perKey.quietP99Ms).toBeLessThan(result.baseline.quietP99Ms);
    expect(result.quietP99Ms).toBe(result.perKey.quietP99Ms);
    expect(result.liveAloneMs).toBeGreaterThan(0);
    expect(result.liveSlowdown).toBe(Math.round((result.liveWithCatchUpMs / result.liveAloneMs) * 100) / 100);
    expect(result.goals.map((g) => g.name)).toEqual([
      'quiet p99 vs first-come',
      'utilization',
      'max key starts in any window',
      'live slowdown beside a catch-up',
    ]);
  }, 540_000); // four runs of at most runTimeoutMs each, and their pipelines' starts
});
