import type { JobRuntimeSettings } from '../../../lambda/core/constants';
import { LIMITER_LEAD_MS, pacingSettings, pacingSettingsSchema, safetyMarginMs } from '../../../lambda/core/pacingSettings';
import { SettingsError } from '../../../lambda/core/settings';

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
    expect(pacingSettings(fakeSettings({ rateLimit: { startsPerInterval: 80, intervalSeconds: 60, burst: 1 } }))).toEqual({
      limiterKey: 'fake-job',
      limits: { startsPerInterval: 80, intervalMs: 60_000, burst: 1, safetyMarginMs: 250 },
      leadMs: LIMITER_LEAD_MS,
      lanes: 16,
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

  it('bounds the deferral age by the queue\'s retention unless the setting says otherwise', () => {
    expect(pacingSettings(fakeSettings({ queueRetentionSeconds: 86_400 }))).toMatchObject({ maxDeferralAgeSeconds: 86_400, queueRetentionSeconds: 86_400 });
    expect(pacingSettings(fakeSettings({ queueRetentionSeconds: 86_400, settings: { maxDeferralAgeSeconds: 7200 } }))).toMatchObject({
      maxDeferralAgeSeconds: 7200,
      queueRetentionSeconds: 86_400,
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

  it('refuses a key that misspells a pacing key, with the other problems', () => {
    const settings = fakeSettings({ settings: { shortWaitMS: 3000, maxDeferals: 5, Pacing: false, adaptiveRate: 'yes' } });
    let thrown: unknown;
    try {
      pacingSettings(settings);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(SettingsError);
    expect((thrown as SettingsError).message).toBe(
      'JOB_SETTINGS is invalid for pacing: settings.adaptiveRate must be true or false, got "yes"; settings.shortWaitMS: unknown pacing setting; did you mean shortWaitMs?; settings.maxDeferals: unknown pacing setting; did you mean maxDeferrals?; settings.Pacing: unknown pacing setting; did you mean pacing?',
    );
  });

  it("leaves the job's own keys alone, even those near a short pacing key", () => {
    const settings = fakeSettings({ settings: { provider: 'acme', providerBaseUrl: 'https://x', sessionMaxAgeDays: 30, paging: true, spacing: 2, shortWait: 5 } });
    expect(pacingSettings(settings)).toMatchObject({ limiterKey: 'fake-job', shortWaitMs: 10_000, enabled: true });
  });
});

describe('Schema: pacingSettingsSchema', () => {
  describe('Method: safeParse', () => {
    it('fills the defaults and keeps the job\'s own keys', () => {
      expect(pacingSettingsSchema.parse({ provider: 'acme' })).toStrictEqual({ provider: 'acme', shortWaitMs: 10_000, adaptiveRate: true, pacing: true });
    });

    it.each(['shortWaitMS', 'ShortWaitMs', 'shortwaitms', 'shortWaitsMs', 'shrotWaitMs'])('names shortWaitMs for %s', (key) => {
      expect(pacingSettingsSchema.safeParse({ [key]: 1000 }).error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
        [key, 'unknown pacing setting; did you mean shortWaitMs?'],
      ]);
    });

    it.each([
      ['PACING', 'pacing'],
      ['downstreamkey', 'downstreamKey'],
      ['maxDeferralAgeSecond', 'maxDeferralAgeSeconds'],
      ['adaptiverate', 'adaptiveRate'],
    ])('names the pacing key %s misspells', (key, meant) => {
      expect(pacingSettingsSchema.safeParse({ [key]: 1 }).error?.issues.map((i) => i.message)).toEqual([`unknown pacing setting; did you mean ${meant}?`]);
    });

    it('reports the value problem once per key', () => {
      expect(pacingSettingsSchema.safeParse({ shortWaitMs: -1.5, maxDeferrals: 2 ** 60 }).error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
        ['maxDeferrals', `must be a positive integer, got ${2 ** 60}`],
        ['shortWaitMs', 'must be a positive integer, got -1.5'],
      ]);
    });
  });
});
