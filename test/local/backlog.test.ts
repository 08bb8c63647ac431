// A backlog of many times the rate, at small scale, on the local stack from the cloud assembly: the producer admits it
// step by step, nothing is dead-lettered, every payment is applied once, and deliveries per job stay under the bound.
// Every assertion is a count, not a time, so a busy machine only makes the run slower.
import { runE2eBench, type E2eResult } from '../../bench/e2e';

const JOB = 'payment-reconciliation';
// The job as if configured at 30 starts per 30 s (1/s: one event-source batch of 10 spans 10 s), run ten times faster
// (interval 3 s, and the admission horizon, short wait and batching window alike): 10 starts/s, the fastest at which a
// batch's slots still span SQS's 1 s delay resolution. A backlog of 20 intervals' starts is two admission horizons.
const RATE = { startsPerInterval: 30, intervalSeconds: 30 };
const BACKLOG = 20 * RATE.startsPerInterval;
const DELIVERIES_PER_JOB_BOUND = 1.2;

describe('Backlog: many times the rate, admitted step by step', () => {
  let result: E2eResult;

  beforeAll(async () => {
    result = await runE2eBench({
      cwd: process.cwd(),
      counts: { payments: BACKLOG, uploads: 0, tenants: 0 },
      jobs: [JOB],
      rateLimits: { [JOB]: RATE },
      intervalSeconds: { [JOB]: 3 },
      timeoutSeconds: 150,
    });
  }, 180_000);

  it('ran time-scaled as asked, horizon and short wait alike', () => {
    expect(result.perJobName[JOB].pacing).toEqual({
      startsPerInterval: 30,
      configuredIntervalSeconds: 30,
      runIntervalSeconds: 3,
      timeScale: 10,
      horizonSeconds: { configured: 300, run: 30 },
      shortWaitMs: { configured: 10_000, run: 1000 },
      batchingWindowSeconds: { configured: 5, run: 1 },
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
