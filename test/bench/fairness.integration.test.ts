// bench:fairness at a small scale: both pipelines and the live night run end to end and report every field, and the
// direction holds (the quiet tenants finish sooner with per-key flow control, the provider never throttles it). No
// timing goal is asserted: the bench itself measures those, in one run (README, Performance).
//
// The time is the quotas' windows: the per-key run paces the noisy tenant at its allowance, so it lasts about
// noisyOps / allowance windows. The suite's case scales the whole workload to 3 s windows with every ratio kept (the
// noisy tenant 4x the per-key quota, the job's quota 3x it), so the first-come run is still throttled and per-key
// still ahead (measured: quiet p99 4.8 s against 13.7 s, 32 429s first-come), and the two workload runs take a third
// of the time. The case as it was (10 s windows, 400 noisy operations) is the full run: `npm run test:bench`
// (BENCH_FULL=1).
import { runFairnessBench } from '../../bench/fairness';

const FULL = process.env.BENCH_FULL === '1';
const size = FULL
  ? { noisyOps: 400, intervalSeconds: 10, jobQuota: 300, perKeyQuota: 100, perKeyLimit: 80 }
  : { noisyOps: 120, intervalSeconds: 3, jobQuota: 90, perKeyQuota: 30, perKeyLimit: 24 };

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
      for (const field of ['quietP50Ms', 'quietP99Ms', 'noisyP50Ms', 'noisyP99Ms', 'utilization', 'maxKeyStartsInAnyWindow', 'throttled'] as const) {
        expect(Number.isFinite(run[field])).toBe(true);
      }
    }
    // The provider's per-key quota is 100 per 10 s (30 per 3 s); first-come sends the noisy tenant at the job's pace
    // and is throttled.
    expect(result.baseline.throttled).toBeGreaterThan(0);
    expect(result.baseline.maxKeyStartsInAnyWindow).toBeGreaterThan(result.perKeyLimit);
    // Per-key flow control holds the noisy tenant to its allowance (80, or 24, after headroom), the provider never
    // throttles it, and the quiet tenants no longer wait behind the noisy one.
    expect(result.perKeyLimit).toBe(size.perKeyLimit);
    expect(result.perKey.throttled).toBe(0);
    expect(result.perKey.quietP99Ms).toBeLessThan(result.baseline.quietP99Ms);
    expect(result.quietP99Ms).toBe(result.perKey.quietP99Ms);
    expect(result.liveAloneMs).toBeGreaterThan(0);
    expect(result.liveSlowdown).toBe(Math.round((result.liveWithCatchUpMs / result.liveAloneMs) * 100) / 100);
    expect(result.goals.map((g) => g.name)).toEqual(['quiet p99 vs first-come', 'utilization', 'max key starts in any window', 'live slowdown beside a catch-up']);
  }, 300_000);
});
