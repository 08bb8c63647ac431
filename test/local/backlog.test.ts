// A backlog of many times the rate, at small scale, on the local stack from the cloud assembly: the producer admits it
// step by step, nothing is dead-lettered, every payment is applied once, and deliveries per job stay under the bound.
// Every assertion is a count, not a time, so a busy machine only makes the run slower.
import { runE2eBench, type E2eResult } from '../../bench/e2e';

const JOB = 'payment-reconciliation';
// The payment job at its own rate (80 starts per 60 s after headroom, in batches of 20 that span 15 s of slots), run ten
// times faster (the admission horizon, the short wait's slots and the batching window alike, as far as SQS's whole
// seconds allow): 13.3 starts/s, a batch's slots span 1.5 s. A backlog of 10 minutes' starts is two admission horizons.
// The rate is given over 10 minutes (800, the same 80 a minute), so the run's window is 60 s, not 6: the window
// decides how late a record may wake for its slot before it is deferred (125 ms, as deployed, not the 15 ms of a 6-s
// window, which a loaded machine's timers overshoot, deferring records by unscaled seconds and delivering them again).
const RATE = { startsPerInterval: 800, intervalSeconds: 600 };
const BACKLOG = RATE.startsPerInterval;
const DELIVERIES_PER_JOB_BOUND = 1.2;

describe('Backlog: many times the rate, admitted step by step', () => {
  let result: E2eResult;

  beforeAll(async () => {
    result = await runE2eBench({
      cwd: process.cwd(),
      counts: { [JOB]: BACKLOG },
      jobs: [JOB],
      rateLimits: { [JOB]: RATE },
      intervalSeconds: { [JOB]: 60 },
      timeoutSeconds: 150,
    });
  }, 180_000);

  it('ran time-scaled as asked, horizon and short wait alike', () => {
    expect(result.perJobName[JOB].pacing).toEqual({
      startsPerInterval: 800,
      configuredIntervalSeconds: 600,
      runIntervalSeconds: 60,
      timeScale: 10,
      horizonSeconds: { configured: 300, run: 30 },
      // 20 slots at 80/min span 14.25 s, scaled to 1.425 s; the 1.75 s of slack over them is not scaled.
      shortWaitMs: { configured: 16_000, run: 3175 },
      batchingWindowSeconds: { configured: 1, run: 1 },
    });
  });

  it('admitted the backlog in several steps, not all at once', () => {
    // One direct invocation for step 0, then at least one step from the admission queue per further horizon's worth.
    expect(result.perJobName[JOB].invocations.producer).toBeGreaterThanOrEqual(3);
  });

  it('dead-lettered nothing and applied every payment exactly once', () => {
    const job = result.perJobName[JOB];
    expect(job.deadLettered).toBe(0);
    expect(result.failedMessages).toBe(0);
    expect(job.effects).toEqual({ expected: BACKLOG, exactlyOnce: BACKLOG, missing: 0, repeated: 0, unexpected: 0 });
  });

  it('delivered each job at most 1.2 times on average (receives of job messages per job)', () => {
    const job = result.perJobName[JOB];
    expect(job.operations).toBe(BACKLOG);
    expect(job.deliveries).toBe(job.acknowledged + job.failed);
    expect(job.deliveries / job.operations).toBeLessThanOrEqual(DELIVERIES_PER_JOB_BOUND);
  });
});
