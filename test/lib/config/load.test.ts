// Environment selection and validation: one readable message naming every bad key, and the valid environments.
import { ConfigError, loadEnvironment, parseEnvironment } from '../../../lib/config/load';
import { environments } from '../../../lib/config/environments';
import { thrown } from '../../support/thrown';

const goodJob = { schedule: { cron: '0 2 * * ? *', timeZone: 'UTC' }, pacing: { starts: 10 } };

describe('Function: loadEnvironment', () => {
  it('fails with the valid environments when none is chosen', () => {
    expect(() => loadEnvironment(undefined)).toThrow(
      new ConfigError('No environment chosen. Pass -c env=<name>; valid environments: dev, staging, prod.'),
    );
    expect(() => loadEnvironment('')).toThrow(
      'No environment chosen. Pass -c env=<name>; valid environments: dev, staging, prod.',
    );
  });

  it('fails with the valid environments for an unknown name', () => {
    const error = thrown(() => loadEnvironment('nope'), ConfigError);
    expect(error.name).toBe('ConfigError');
    expect(error.message).toBe('Unknown environment "nope". Valid environments: dev, staging, prod.');
  });

  it('does not treat inherited object keys as environments', () => {
    expect(() => loadEnvironment('toString')).toThrow(
      'Unknown environment "toString". Valid environments: dev, staging, prod.',
    );
  });

  it.each(Object.keys(environments))(
    'accepts the shipped %s configuration, with the jobs every environment has',
    (name) => {
      const config = loadEnvironment(name);
      // Whichever jobs the reference app keeps (its examples, and any added by npm run new-job), in the same order.
      expect(Object.keys(config.jobs).length).toBeGreaterThan(0);
      expect(Object.keys(config.jobs)).toEqual(Object.keys(loadEnvironment('dev').jobs));
    },
  );

  it('keeps data and turns on longer log retention where the shipped config says so', () => {
    expect([
      loadEnvironment('dev').retainData,
      loadEnvironment('staging').retainData,
      loadEnvironment('prod').retainData,
    ]).toEqual([false, true, true]);
    expect(loadEnvironment('prod').logRetentionDays).toBe(90);
    expect(loadEnvironment('dev').appResources.create).toBe(true);
    expect(loadEnvironment('prod').appResources.create).toBe(false);
  });

  it('states an EU region for every shipped environment, and protects prod alone', () => {
    expect(
      Object.keys(environments).map((name) => [name, loadEnvironment(name).region, loadEnvironment(name).protected]),
    ).toEqual([
      ['dev', 'eu-west-1', false],
      ['staging', 'eu-west-1', false],
      ['prod', 'eu-west-1', true],
    ]);
  });

  it.each(Object.keys(environments))(
    'names no bucket the shipped %s configuration creates, and every bucket it imports',
    (name) => {
      const { create, buckets } = loadEnvironment(name).appResources;
      // S3 names are global: a name the stack creates could already be another account's.
      for (const bucket of Object.values(buckets)) expect(bucket.bucketName === undefined).toBe(create);
      expect(Object.keys(buckets).length).toBeGreaterThan(0);
    },
  );
});

describe('Function: parseEnvironment', () => {
  it('names every bad key in one message', () => {
    const error = thrown(
      () =>
        parseEnvironment('bad', {
          account: '12',
          region: 'mars',
          logRetentionDays: 0,
          jobs: {
            Bad_Name: goodJob,
            'ok-job': {
              schedule: { cron: '0 2 * * *', timeZone: 'Mars/Base' },
              pacing: { starts: 0, headroom: 2, concurrency: 1, batchSize: 0 },
            },
          },
        }),
      ConfigError,
    );
    expect(error.message).toBe(
      [
        'Invalid configuration for environment "bad":',
        '  - account: must be a 12-digit AWS account ID',
        '  - region: must be an AWS region such as "eu-west-1"',
        '  - logRetentionDays: Too small: expected number to be >=1',
        '  - jobs.Bad_Name: job names are kebab-case, 3 to 32 characters',
        '  - jobs.ok-job.schedule.cron: must be an EventBridge Scheduler cron body with 6 fields and "?" in exactly one of day-of-month and day-of-week, e.g. "0 2 * * ? *"',
        '  - jobs.ok-job.schedule.timeZone: must be an IANA time zone such as "Europe/London" or "UTC"',
        '  - jobs.ok-job.pacing.starts: Too small: expected number to be >0',
        '  - jobs.ok-job.pacing.headroom: Too big: expected number to be <=1',
        '  - jobs.ok-job.pacing.concurrency: Too small: expected number to be >=2',
        '  - jobs.ok-job.pacing.batchSize: Too small: expected number to be >=1',
      ].join('\n'),
    );
    expect(error.problems).toHaveLength(10);
  });

  it('names every cross-field problem in one message', () => {
    const error = thrown(
      () =>
        parseEnvironment('bad', {
          region: 'eu-west-1',
          jobs: {
            'ok-job': {
              ...goodJob,
              idempotencyRecordDays: 10,
              pacing: { starts: 10, batchSize: 100, batchingWindowSeconds: 0 },
              uses: { tables: { t: { ref: 'nope', access: 'read' } }, secrets: { s: { ref: 'gone' } } },
            },
          },
        }),
      ConfigError,
    );
    expect(error.message).toBe(
      [
        'Invalid configuration for environment "bad":',
        '  - jobs.ok-job.idempotencyRecordDays: must be at least queueRetentionDays + 14 (DLQ retention) = 18, so a redrive never repeats an effect',
        '  - jobs.ok-job.pacing.batchingWindowSeconds: must be at least 1 when the batch size (100) is over 10 (an SQS event source rule)',
        '  - jobs.ok-job.uses.tables.t.ref: "nope" is not in appResources.tables (known: none)',
        '  - jobs.ok-job.uses.secrets.s.ref: "gone" is not in appResources.secrets (known: none)',
      ].join('\n'),
    );
  });

  it("names an imported bucket without its name in the environment's one message", () => {
    const staging = environments.staging;
    const input = { ...staging, appResources: { ...staging.appResources, buckets: { uploads: {} } } };
    expect(() => parseEnvironment('staging', input)).toThrow(
      new ConfigError(
        'Invalid configuration for environment "staging":\n  - appResources.buckets.uploads.bucketName: is required when appResources.create is false: the stack imports the existing bucket by its name',
      ),
    );
  });

  it('requires at least one job', () => {
    expect(() => parseEnvironment('empty', { region: 'eu-west-1', jobs: {} })).toThrow(
      'Invalid configuration for environment "empty":\n  - jobs: at least one job is required',
    );
  });

  it('requires the region, with no default, naming it beside every other bad key', () => {
    const { region: _dropped, ...dev } = environments.dev;
    expect(() => parseEnvironment('dev', { ...dev, logRetentionDays: 0 })).toThrow(
      new ConfigError(
        [
          'Invalid configuration for environment "dev":',
          '  - region: is required: the AWS region this environment deploys to, such as "eu-west-1"',
          '  - logRetentionDays: Too small: expected number to be >=1',
        ].join('\n'),
      ),
    );
    expect(() => parseEnvironment('dev', { ...dev, region: 5 })).toThrow(
      '  - region: must be an AWS region such as "eu-west-1"',
    );
  });
});

describe('The completion SLO (slo)', () => {
  // 10 starts x 0.8 headroom = 8 per minute; pageSize x maxPagesPerRun = 10 x 10 = 100 operations a night.
  const night = { ...goodJob, pageSize: 10, maxPagesPerRun: 10 };
  const parse = (slo: unknown) =>
    parseEnvironment('slo', { region: 'eu-west-1', jobs: { 'ok-job': { ...night, slo } } });

  it('accepts an SLO a full run can meet at the paced rate, and hands it to the functions', () => {
    // 99 of 100 operations at 8 a minute take 12.4 minutes.
    expect(parse({ objective: 0.99, completeWithinMinutes: 13 }).jobs['ok-job'].slo).toEqual({
      objective: 0.99,
      completeWithinMinutes: 13,
    });
  });

  it('rejects an objective outside (0, 1) and a window that is not a positive whole number of minutes, naming each', () => {
    expect(thrown(() => parse({ objective: 1, completeWithinMinutes: 0 }), ConfigError).message).toBe(
      [
        'Invalid configuration for environment "slo":',
        '  - jobs.ok-job.slo.objective: must be below 1 (an objective of 100% leaves no error budget; e.g. 0.99)',
        '  - jobs.ok-job.slo.completeWithinMinutes: Too small: expected number to be >0',
      ].join('\n'),
    );
    expect(thrown(() => parse({ objective: 0, completeWithinMinutes: 60 }), ConfigError).message).toContain(
      'jobs.ok-job.slo.objective: must be above 0',
    );
    expect(
      thrown(() => parse({ objective: 0.9, completeWithinMinutes: 60, window: 2 }), ConfigError).message,
    ).toContain('jobs.ok-job.slo: Unrecognized key: "window"');
  });

  it('rejects an SLO a full run cannot meet, saying which window or quota would make it reachable', () => {
    expect(thrown(() => parse({ objective: 0.99, completeWithinMinutes: 10 }), ConfigError).message).toBe(
      [
        'Invalid configuration for environment "slo":',
        '  - jobs.ok-job.slo.completeWithinMinutes: is not reachable: a full run (pageSize 10 x maxPagesPerRun 10 = 100 operations) at 8 starts per 60 s completes 99% of them in 13 minutes; allow at least 13 minutes, raise pacing.starts to at least 13, or lower pageSize x maxPagesPerRun to what one night holds',
      ].join('\n'),
    );
  });
});
