// Time scaling of a paced run: which interval a job runs at, what else scales with it, and where scaling must stop.
import {
  SCALED_RUN_MARGIN_MS,
  scaledIntervalSeconds,
  scaleJobSettings,
  shortestFaithfulIntervalSeconds,
} from '../../bench/e2e';
import { backlogOperations } from '../../bench/backlog';
import type { JobRuntimeSettings } from '../../lambda/core/constants';
import { pacingSettings } from '../../lambda/core/pacingSettings';

/** The payment job as synthesized: 80 starts per 60 s after headroom, batches of 10, a 300 s admission horizon. */
const payment: JobRuntimeSettings = {
  jobName: 'payments-job',
  pageSize: 500,
  maxPagesPerRun: 200,
  maxMessageBytes: 262144,
  maxReceiveCount: 5,
  businessDateOffsetDays: -1,
  timeZone: 'Europe/London',
  rateLimit: { startsPerInterval: 80, intervalSeconds: 60, burst: 1 },
  concurrency: 10,
  admission: { horizonSeconds: 300, batchSize: 10 },
  tables: { payments: 'payments-dev' },
  buckets: {},
  secrets: { apiKey: 'paced-jobs/dev/provider-api-key' },
  settings: { provider: 'acme' },
};

describe('Function: scaledIntervalSeconds', () => {
  it('keeps the configured interval when the run is short enough', () => {
    expect(scaledIntervalSeconds(payment.rateLimit, 100, 120)).toBe(60);
  });

  it('shortens the interval so 400 payments at 80/min (300 s) take about 120 s', () => {
    expect(scaledIntervalSeconds(payment.rateLimit, 400, 120)).toBe(24);
  });

  it('never goes below the floor, taking longer rather than measuring an artefact', () => {
    expect(scaledIntervalSeconds(payment.rateLimit, 4000, 120, 8)).toBe(8);
  });
});

describe('Function: shortestFaithfulIntervalSeconds', () => {
  it('is the interval at which one batch of slots spans 1 s: 80 starts in groups of 10 -> 8 s', () => {
    expect(shortestFaithfulIntervalSeconds(payment)).toBe(8);
  });

  it('uses the smaller group when the short wait, not the batch, bounds it (30 per 30 s: 10 s of slots, 10 per group)', () => {
    expect(
      shortestFaithfulIntervalSeconds({
        ...payment,
        rateLimit: { startsPerInterval: 30, intervalSeconds: 30, burst: 1 },
      }),
    ).toBe(3);
    // 12 per 60 s: 2 slots within the 10 s short wait, so groups of 2: 6 s.
    expect(
      shortestFaithfulIntervalSeconds({
        ...payment,
        rateLimit: { startsPerInterval: 12, intervalSeconds: 60, burst: 1 },
      }),
    ).toBe(6);
  });
});

describe('Function: scaleJobSettings', () => {
  it("scales the interval, and by the same factor the horizon, the batching window and the short wait's slots, not its slack nor the safety margin", () => {
    const { settings, pacing } = scaleJobSettings(payment, 8, 5);
    expect(settings.rateLimit).toEqual({ startsPerInterval: 80, intervalSeconds: 8, burst: 1 });
    expect(settings.admission).toEqual({ horizonSeconds: 40, batchSize: 10 });
    // A batch of 10 at 80/min spans 6.75 s of slots (scaled to 0.9 s); the 3.25 s over it stays: 4.15 s.
    expect(settings.settings).toEqual({ provider: 'acme' });
    // The 8 s window's margin is 40 ms, below the least a scaled run keeps: a start's jitter is real time.
    expect(settings.pacing).toEqual({ shortWaitMs: 4150, safetyMarginMs: SCALED_RUN_MARGIN_MS });
    expect(pacingSettings(settings).lateToleranceMs).toBe(SCALED_RUN_MARGIN_MS / 2);
    // Scaled less far, the run interval's own margin is kept when it is larger (30 s: 150 ms)...
    expect(scaleJobSettings(payment, 30, 5).settings.pacing?.safetyMarginMs).toBe(150);
    // ...and a configured margin below the least is kept as configured.
    const tight = { ...payment, pacing: { safetyMarginMs: 30 } };
    expect(scaleJobSettings(tight, 8, 5).settings.pacing?.safetyMarginMs).toBe(30);
    expect(pacing).toEqual({
      startsPerInterval: 80,
      configuredIntervalSeconds: 60,
      runIntervalSeconds: 8,
      timeScale: 7.5,
      horizonSeconds: { configured: 300, run: 40 },
      shortWaitMs: { configured: 10_000, run: 4150 },
      batchingWindowSeconds: { configured: 5, run: 1 },
    });
  });

  it('scales the whole short wait of a job without admission (no batch to span)', () => {
    const { admission: _, ...withoutAdmission } = payment;
    expect(scaleJobSettings(withoutAdmission, 8).settings.pacing).toEqual({
      shortWaitMs: 1333,
      safetyMarginMs: SCALED_RUN_MARGIN_MS,
    });
  });

  it('changes nothing at the configured interval', () => {
    const { settings, pacing } = scaleJobSettings(payment, 60, 5);
    expect(settings).toEqual(payment);
    expect(pacing.timeScale).toBe(1);
    expect(pacing.batchingWindowSeconds).toEqual({ configured: 5, run: 5 });
  });

  it('reports unlimited admission as no horizon', () => {
    const { admission: _, ...withoutAdmission } = payment;
    expect(scaleJobSettings(withoutAdmission, 8).pacing.horizonSeconds).toBeUndefined();
  });
});

describe('Function: backlogOperations', () => {
  it('is the multiple of the per-minute starts: 50 x 80/min = 4000', () => {
    expect(backlogOperations(payment.rateLimit, 50)).toBe(4000);
    expect(backlogOperations({ startsPerInterval: 30, intervalSeconds: 30 }, 20)).toBe(1200);
  });
});
