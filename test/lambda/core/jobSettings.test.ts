import type { JobRuntimeSettings } from '../../../lambda/core/constants';
import { JobSettingsReader } from '../../../lambda/core/jobSettings';
import { SettingsError } from '../../../lambda/core/settings';

const settings = (over: Partial<JobRuntimeSettings> = {}): JobRuntimeSettings => ({
  jobName: 'demo-job',
  pageSize: 10,
  maxPagesPerRun: 5,
  maxMessageBytes: 262144,
  businessDateOffsetDays: -1,
  timeZone: 'UTC',
  rateLimit: { startsPerInterval: 10, intervalSeconds: 60, burst: 10 },
  concurrency: 2,
  tables: { things: 'things-dev' },
  buckets: {},
  secrets: {},
  settings: { url: 'https://x', size: 25 },
  ...over,
});

describe('Class: JobSettingsReader', () => {
  describe('Method: done', () => {
    it('returns the values when everything is present', () => {
      const read = new JobSettingsReader(settings());
      const values = [read.name('tables', 'things'), read.string('url'), read.integer('size', { min: 1, max: 100 })];
      read.done();
      expect(values).toEqual(['things-dev', 'https://x', 25]);
    });

    it('applies the fallback only for an absent integer', () => {
      const read = new JobSettingsReader(settings());
      expect(read.integer('timeout', { min: 1, max: 10, fallback: 5 })).toBe(5);
      read.done();
    });

    it('throws one SettingsError naming every gap', () => {
      const read = new JobSettingsReader(settings());
      read.name('tables', 'other');
      read.name('buckets', 'files');
      read.string('size');
      read.integer('size', { min: 1, max: 10 });
      expect(() => read.done()).toThrow(
        new SettingsError(
          'demo-job: job settings are incomplete: tables.other is missing (it has: things); buckets.files is missing (it has: none); settings.size must be a non-empty string (got 25); settings.size must be an integer from 1 to 10 (got 25)',
        ),
      );
    });
  });
});
