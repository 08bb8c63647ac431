import { LIMITER_LEAD_MS, pacingSettings, safetyMarginMs } from '../../../lambda/handlers/runtime';
import { fakeSettings } from './harness';

describe('Function: safetyMarginMs', () => {
  it('is half a percent of the window, between 20 and 250 ms', () => {
    expect([1000, 10_000, 20_000, 60_000, 3_600_000].map(safetyMarginMs)).toEqual([20, 50, 100, 250, 250]);
  });
});

describe('Function: pacingSettings', () => {
  it('derives the limiter from the effective allowance, keyed on the job name by default', () => {
    expect(pacingSettings(fakeSettings({ rateLimit: { startsPerInterval: 80, intervalSeconds: 60, burst: 1 } }))).toEqual({
      limiterKey: 'fake-job',
      limits: { startsPerInterval: 80, intervalMs: 60_000, burst: 1, safetyMarginMs: 250 },
      leadMs: LIMITER_LEAD_MS,
      lateToleranceMs: 125,
      shortWaitMs: 10_000,
      maxDeferrals: undefined,
      maxDeferralAgeSeconds: undefined,
      adaptiveRate: true,
      enabled: true,
    });
  });

  it('reads the shared downstream key and the deferral budget from the job settings', () => {
    const settings = fakeSettings({ settings: { downstreamKey: 'payments-provider', maxDeferrals: 40, maxDeferralAgeSeconds: 7200, shortWaitMs: 3000, adaptiveRate: false, pacing: false } });
    expect(pacingSettings(settings)).toMatchObject({ limiterKey: 'payments-provider', maxDeferrals: 40, maxDeferralAgeSeconds: 7200, shortWaitMs: 3000, adaptiveRate: false, enabled: false });
  });

  it('names every pacing setting of the wrong type', () => {
    const settings = fakeSettings({ settings: { downstreamKey: '', maxDeferrals: 2.5, maxDeferralAgeSeconds: '1d', shortWaitMs: -1, adaptiveRate: 'yes', pacing: 'off' } });
    expect(() => pacingSettings(settings)).toThrow(
      'JOB_SETTINGS is invalid for pacing: settings.downstreamKey must be a non-empty string, got ""; settings.maxDeferrals must be a positive integer, got 2.5; settings.maxDeferralAgeSeconds must be a positive integer, got "1d"; settings.shortWaitMs must be a positive integer, got -1; settings.adaptiveRate must be true or false, got "yes"; settings.pacing must be true or false, got "off"',
    );
  });
});
