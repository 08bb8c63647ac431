import type { JobRuntimeSettings } from '../../../lambda/core/constants';
import {
  type BatchingInput,
  deriveBatching,
  LIMITER_LEAD_MS,
  MAX_DERIVED_BATCH_SIZE,
  MIN_SHORT_WAIT_MS,
  pacingSettings,
  safetyMarginMs,
} from '../../../lambda/core/pacingSettings';
import { readSettings, SettingsError } from '../../../lambda/core/settings';

const fakeSettings = (over: Partial<JobRuntimeSettings> = {}): JobRuntimeSettings => ({
  jobName: 'fake-job',
  pageSize: 25,
  maxPagesPerRun: 100,
  maxMessageBytes: 8192,
  businessDateOffsetDays: -1,
  timeZone: 'Europe/Berlin',
  rateLimit: { startsPerInterval: 100, intervalSeconds: 60, burst: 1 },
  concurrency: 2,
  tables: {},
  buckets: {},
  secrets: {},
  settings: { items: 0 },
  ...over,
});

describe('Function: safetyMarginMs', () => {
  it('is half a percent of the window, between 20 and 250 ms', () => {
    expect([1000, 10_000, 20_000, 60_000, 3_600_000].map(safetyMarginMs)).toEqual([20, 50, 100, 250, 250]);
  });
});

describe('Function: pacingSettings', () => {
  it('derives the limiter from the effective allowance, keyed on the job name by default', () => {
    expect(
      pacingSettings(fakeSettings({ rateLimit: { startsPerInterval: 80, intervalSeconds: 60, burst: 1 } })),
    ).toEqual({
      limiterKey: 'fake-job',
      limits: { startsPerInterval: 80, intervalMs: 60_000, burst: 1, safetyMarginMs: 250 },
      leadMs: LIMITER_LEAD_MS,
      lateToleranceMs: 125,
      shortWaitMs: 10_000,
      maxDeferrals: undefined,
      // Settings deployed before the retention was in them: the config's default retention, 4 days.
      maxDeferralAgeSeconds: 345_600,
      queueRetentionSeconds: 345_600,
      adaptiveRate: true,
      enabled: true,
      // Settings deployed before the share was in them: the default, half the allowance.
      backfillShare: 0.5,
    });
  });

  it("takes the pacing block's safety margin over the derived one, and half of it as the late tolerance", () => {
    const settings = fakeSettings({
      rateLimit: { startsPerInterval: 80, intervalSeconds: 4, burst: 1 },
      pacing: { safetyMarginMs: 250 },
    });
    expect(pacingSettings(settings)).toMatchObject({
      limits: { startsPerInterval: 80, intervalMs: 4000, burst: 1, safetyMarginMs: 250 },
      lateToleranceMs: 125,
    });
    expect(pacingSettings({ ...settings, pacing: {} }).limits.safetyMarginMs).toBe(20);
  });

  it("bounds the deferral age by the queue's retention unless the pacing block says otherwise", () => {
    expect(pacingSettings(fakeSettings({ queueRetentionSeconds: 86_400 }))).toMatchObject({
      maxDeferralAgeSeconds: 86_400,
      queueRetentionSeconds: 86_400,
    });
    expect(
      pacingSettings(fakeSettings({ queueRetentionSeconds: 86_400, pacing: { maxDeferralAgeSeconds: 7200 } })),
    ).toMatchObject({
      maxDeferralAgeSeconds: 7200,
      queueRetentionSeconds: 86_400,
    });
  });

  it('reads the shared downstream key, the waits, the deferral budget and the switches from the pacing block', () => {
    const settings = fakeSettings({
      pacing: {
        downstreamKey: 'payments-provider',
        maxDeferrals: 40,
        maxDeferralAgeSeconds: 7200,
        shortWaitMs: 3000,
        adaptiveRate: false,
        enabled: false,
      },
    });
    expect(pacingSettings(settings)).toMatchObject({
      limiterKey: 'payments-provider',
      maxDeferrals: 40,
      maxDeferralAgeSeconds: 7200,
      shortWaitMs: 3000,
      adaptiveRate: false,
      enabled: false,
    });
  });

  it("reads nothing pacing-related from the job's own settings", () => {
    const settings = fakeSettings({
      settings: { shortWaitMs: 3000, pacing: false, downstreamKey: 'other', adaptiveRate: false },
    });
    expect(pacingSettings(settings)).toMatchObject({
      limiterKey: 'fake-job',
      shortWaitMs: MIN_SHORT_WAIT_MS,
      adaptiveRate: true,
      enabled: true,
    });
  });

  it('takes the per-key limits and the backfill share from the rate and concurrency settings', () => {
    const perKey = { field: 'tenantId', startsPerInterval: 8, intervalSeconds: 60, burst: 1, headroom: 0.8 };
    const settings = fakeSettings({
      rateLimit: { startsPerInterval: 80, intervalSeconds: 60, burst: 1, perKey, backfillShare: 0.25 },
      concurrencyPerKey: { field: 'tenantId', maxConcurrent: 2 },
    });
    expect(pacingSettings(settings)).toMatchObject({
      perKey,
      backfillShare: 0.25,
      concurrencyPerKey: { field: 'tenantId', maxConcurrent: 2 },
    });
  });
});

describe('Function: deriveBatching', () => {
  const at = (startsPerMinute: number, over: Partial<BatchingInput> = {}) =>
    deriveBatching({ startsPerInterval: startsPerMinute, intervalSeconds: 60, ...over });
  const all = ['batchSize', 'shortWaitMs', 'batchingWindowSeconds'];

  it('gives payment reconciliation (80 a minute after headroom) 20 a batch, its slots waited for in 16 s', () => {
    // 20 payments span 19 emission intervals of 0.75 s = 14.25 s of slots, plus a second's slack.
    expect(at(80)).toEqual({ batchSize: 20, batchingWindowSeconds: 1, shortWaitMs: 16_000, derived: all });
  });

  it('gives session expiry (480 a minute) and stale uploads (2,400 a minute) the largest derived batch', () => {
    expect(at(480)).toEqual({
      batchSize: MAX_DERIVED_BATCH_SIZE,
      batchingWindowSeconds: 1,
      shortWaitMs: MIN_SHORT_WAIT_MS,
      derived: all,
    });
    expect(at(2400)).toEqual({
      batchSize: MAX_DERIVED_BATCH_SIZE,
      batchingWindowSeconds: 1,
      shortWaitMs: MIN_SHORT_WAIT_MS,
      derived: all,
    });
  });

  it('gives 1 a minute a batch of one, no window, the floor of a short wait', () => {
    expect(at(1)).toEqual({ batchSize: 1, batchingWindowSeconds: 0, shortWaitMs: MIN_SHORT_WAIT_MS, derived: all });
  });

  it('caps 10,000 a minute at the largest derived batch', () => {
    expect(at(10_000)).toMatchObject({
      batchSize: MAX_DERIVED_BATCH_SIZE,
      batchingWindowSeconds: 1,
      shortWaitMs: MIN_SHORT_WAIT_MS,
    });
  });

  it('rounds a batch of 10 or more down to a multiple of 10 (each receive returns at most 10), and keeps a smaller one', () => {
    expect([40, 48, 56, 120, 199].map((rate) => at(rate).batchSize)).toEqual([10, 10, 10, 30, 40]);
    expect([4, 8, 36].map((rate) => at(rate).batchSize)).toEqual([1, 2, 9]);
    expect(at(36).batchingWindowSeconds).toBe(0);
  });

  it('derives from the rate per second whatever the interval (100 an hour is 1.67 a minute)', () => {
    expect(deriveBatching({ startsPerInterval: 100, intervalSeconds: 3600 })).toMatchObject({
      batchSize: 1,
      shortWaitMs: MIN_SHORT_WAIT_MS,
    });
    expect(deriveBatching({ startsPerInterval: 8, intervalSeconds: 1 })).toMatchObject({ batchSize: 50 });
  });

  it('keeps what the job set and derives the rest around it', () => {
    // A batch of 50 set at 80 a minute spans 36.75 s of slots: the short wait follows, within half the 60 s timeout.
    expect(at(80, { batchSize: 50 })).toEqual({
      batchSize: 50,
      batchingWindowSeconds: 1,
      shortWaitMs: 30_000,
      derived: ['shortWaitMs', 'batchingWindowSeconds'],
    });
    expect(at(80, { batchSize: 50, consumerTimeoutSeconds: 120 })).toMatchObject({ shortWaitMs: 38_000 });
    expect(at(80, { shortWaitMs: 5000, batchingWindowSeconds: 3 })).toEqual({
      batchSize: 20,
      batchingWindowSeconds: 3,
      shortWaitMs: 5000,
      derived: ['batchSize'],
    });
  });
});

describe('Function: readSettings (the pacing block)', () => {
  const env = (pacing: unknown) => ({ JOB_SETTINGS: JSON.stringify({ ...fakeSettings(), pacing }) });

  it('reads a valid pacing block', () => {
    expect(readSettings(env({ shortWaitMs: 3000, enabled: false })).pacing).toEqual({
      shortWaitMs: 3000,
      enabled: false,
    });
  });

  it('names every pacing value of the wrong type', () => {
    expect(() =>
      readSettings(env({ downstreamKey: '', maxDeferrals: 2.5, shortWaitMs: -1, adaptiveRate: 'yes', enabled: 'off' })),
    ).toThrow(SettingsError);
    expect(() =>
      readSettings(env({ downstreamKey: '', maxDeferrals: 2.5, shortWaitMs: -1, adaptiveRate: 'yes', enabled: 'off' })),
    ).toThrow(
      /JOB_SETTINGS is invalid: pacing\.downstreamKey: .*; pacing\.maxDeferrals: .*; pacing\.shortWaitMs: .*; pacing\.adaptiveRate: .*; pacing\.enabled: /,
    );
  });
});
