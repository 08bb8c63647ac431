// Pins every default in lib/config/schema.ts, so the documented defaults and the code cannot drift apart.
import { bucketActions, tableActions } from '../../../lib/config/access';
import {
  appResourcesSchema,
  effectiveRateLimit,
  environmentSchema,
  jobBatching,
  jobSchema,
  jobUsesSchema,
  pacingSchema,
  scheduleSchema,
} from '../../../lib/config/schema';

const minimalJob = { schedule: { cron: '0 2 * * ? *', timeZone: 'UTC' }, pacing: { starts: 100 } };

const jobDefaults = {
  schedule: {
    cron: '0 2 * * ? *',
    timeZone: 'UTC',
    businessDateOffsetDays: -1,
    retryAttempts: 3,
    maxEventAgeSeconds: 3600,
    enabled: true,
  },
  pageSize: 500,
  maxPagesPerRun: 200,
  pacing: {
    starts: 100,
    intervalSeconds: 60,
    headroom: 0.8,
    burst: 1,
    concurrency: 5,
    backfillShare: 0.5,
    adaptiveRate: true,
    enabled: true,
    admission: { enabled: true, horizonSeconds: 300 },
  },
  consumerTimeoutSeconds: 60,
  consumerMemoryMb: 512,
  producerTimeoutSeconds: 300,
  producerMemoryMb: 512,
  maxReceiveCount: 5,
  oldestMessageAgeSloSeconds: 3600,
  queueRetentionDays: 4,
  idempotencyRecordDays: 30,
  maxMessageBytes: 262144,
  uses: { tables: {}, buckets: {}, secrets: {} },
  alarms: { throttledPerMinute: 10, throttledMinutes: 5, producerDurationFraction: 0.8, stalledMinutes: 15 },
  settings: {},
};

const issuesOf = (job: Record<string, unknown>) =>
  jobSchema.safeParse({ ...minimalJob, ...job }).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
const pacingIssuesOf = (pacing: Record<string, unknown>) => issuesOf({ pacing: { starts: 100, ...pacing } });

describe('Schema: jobSchema', () => {
  describe('Method: parse', () => {
    it('fills every default of a minimal job', () => {
      expect(jobSchema.parse(minimalJob)).toStrictEqual(jobDefaults);
    });

    it('defaults burst to 1 so the sliding-window guarantee keeps the full sustained rate', () => {
      expect(pacingSchema.parse({ starts: 10 }).burst).toBe(1);
    });

    it('keeps maxReceiveCount at least 5 by default', () => {
      expect(jobSchema.parse(minimalJob).maxReceiveCount).toBeGreaterThanOrEqual(5);
    });

    it('fills the alarm defaults under a partly given alarms object', () => {
      expect(jobSchema.parse({ ...minimalJob, alarms: { throttledPerMinute: 2 } }).alarms).toStrictEqual({
        throttledPerMinute: 2,
        throttledMinutes: 5,
        producerDurationFraction: 0.8,
        stalledMinutes: 15,
      });
    });

    it('rejects a producer duration fraction above 1', () => {
      expect(issuesOf({ alarms: { producerDurationFraction: 1.5 } })).toEqual([
        'alarms.producerDurationFraction: Too big: expected number to be <=1',
      ]);
    });

    it('keeps the default idempotency lifetime longer than queue plus DLQ retention', () => {
      const job = jobSchema.parse(minimalJob);
      expect(job.idempotencyRecordDays).toBeGreaterThanOrEqual(job.queueRetentionDays + 14);
    });

    it('names a key it does not know, with the key it misspells', () => {
      expect(issuesOf({ pageSise: 10 })).toEqual([': unknown key "pageSise"; did you mean pageSize?']);
    });

    it('names where each key of a config written before the pacing block went', () => {
      expect(
        jobSchema
          .safeParse({ ...minimalJob, rateLimit: { starts: 100 }, batchSize: 20, concurrency: 10 })
          .error?.issues.map((i) => i.message),
      ).toEqual([
        '"rateLimit" has moved: its keys are in pacing (pacing.starts, pacing.intervalSeconds, pacing.headroom, pacing.burst, pacing.maxConcurrent, pacing.perKey, pacing.backfillShare); ' +
          '"batchSize" has moved: use pacing.batchSize (derived from the rate unless set); ' +
          '"concurrency" has moved: use pacing.concurrency (the cap) and pacing.perKey.concurrency (per key)',
      ]);
    });
  });
});

describe('Schema: pacingSchema', () => {
  it("requires the downstream's quota", () => {
    expect(issuesOf({ pacing: {} })).toEqual(['pacing.starts: Invalid input: expected number, received undefined']);
    expect(issuesOf({ pacing: undefined })).toEqual(['pacing: Invalid input: expected object, received undefined']);
  });

  it('names a typo in the block, with the key it misspells (synthesis fails naming it)', () => {
    expect(pacingIssuesOf({ shortWaitMS: 3000 })).toEqual([
      'pacing: unknown key "shortWaitMS"; did you mean shortWaitMs?',
    ]);
    expect(pacingIssuesOf({ concurrncy: 3, rate: 2 })).toEqual([
      'pacing: unknown key "concurrncy"; did you mean concurrency?; unknown key "rate"',
    ]);
  });

  it('refuses a concurrency cap below 2 and a deferral budget the message schema could not carry', () => {
    expect(pacingIssuesOf({ concurrency: 1 })).toEqual(['pacing.concurrency: Too small: expected number to be >=2']);
    expect(pacingIssuesOf({ maxDeferrals: 20_000 })).toEqual([
      'pacing.maxDeferrals: Too big: expected number to be <=10000',
    ]);
  });

  it('takes a safety margin up to a tenth of the interval, and names the bound past it', () => {
    expect(pacingSchema.parse({ starts: 100, safetyMarginMs: 400 }).safetyMarginMs).toBe(400);
    expect(pacingSchema.parse({ starts: 100 }).safetyMarginMs).toBeUndefined();
    expect(pacingIssuesOf({ intervalSeconds: 1, safetyMarginMs: 101 })).toEqual([
      'pacing.safetyMarginMs: must be at most a tenth of the 1 s interval (100 ms)',
    ]);
    expect(pacingIssuesOf({ intervalSeconds: 1, safetyMarginMs: 100 })).toBeUndefined();
  });

  it('refuses a downstream key that would be a wildcard or a variable in the limiter policy', () => {
    expect(pacingIssuesOf({ downstreamKey: 'acme*' })).toEqual([
      'pacing.downstreamKey: may not hold "*", "?" or "$": it names the job\'s limiter items in its IAM policy',
    ]);
    expect(pacingSchema.parse({ starts: 100, downstreamKey: 'acme-payments' }).downstreamKey).toBe('acme-payments');
  });

  it('defaults the backfill share to half the allowance and takes any share above 0 up to all of it', () => {
    expect(pacingSchema.parse({ starts: 100, backfillShare: 1 }).backfillShare).toBe(1);
    expect(effectiveRateLimit(pacingSchema.parse({ starts: 100, backfillShare: 0.25 })).backfillShare).toBe(0.25);
    expect(pacingIssuesOf({ backfillShare: 0 })).toEqual([
      'pacing.backfillShare: must be above 0 (a share of the allowance, e.g. 0.5)',
    ]);
    expect(pacingIssuesOf({ backfillShare: 1.5 })).toEqual([
      'pacing.backfillShare: Too big: expected number to be <=1',
    ]);
  });

  it('fills the admission defaults under a partly given admission object', () => {
    expect(pacingSchema.parse({ starts: 100, admission: { horizonSeconds: 120 } }).admission).toEqual({
      enabled: true,
      horizonSeconds: 120,
    });
    expect(pacingIssuesOf({ admission: { horizon: 120 } })).toEqual(['pacing.admission: unknown key "horizon"']);
  });
});

describe('Schema: pacingSchema.shape.perKey', () => {
  it('fills its defaults, and the consumer gets the per-key allowance after headroom beside the job-wide one', () => {
    const pacing = pacingSchema.parse({ starts: 100, perKey: { key: 'merchantId', starts: 25 } });
    expect(pacing.perKey).toEqual({ key: 'merchantId', starts: 25, intervalSeconds: 60, headroom: 0.8, burst: 1 });
    expect(effectiveRateLimit(pacing)).toEqual({
      startsPerInterval: 80,
      intervalSeconds: 60,
      burst: 1,
      backfillShare: 0.5,
      perKey: { field: 'merchantId', startsPerInterval: 20, intervalSeconds: 60, burst: 1, headroom: 0.8 },
    });
  });

  it('takes a cap on operations in progress per key, alone or beside a rate, on the same key', () => {
    const capped = pacingSchema.parse({ starts: 100, perKey: { key: 'merchantId', concurrency: 2 } });
    expect(capped.perKey?.concurrency).toBe(2);
    expect(effectiveRateLimit(capped).perKey).toBeUndefined();
    expect(
      pacingSchema.parse({ starts: 100, perKey: { key: 'merchantId', starts: 25, concurrency: 2 } }).perKey,
    ).toMatchObject({ starts: 25, concurrency: 2 });
  });

  it('refuses a per-key limit that limits nothing, leaves no start after headroom, a burst above it, an empty key and an unknown field', () => {
    expect(pacingIssuesOf({ perKey: { key: 'tenantId' } })).toEqual([
      'pacing.perKey.starts: is required unless concurrency is given: a per-key limit is a rate (starts), a cap on operations in progress (concurrency), or both',
    ]);
    expect(pacingIssuesOf({ perKey: { key: 'tenantId', starts: 1, headroom: 0.5 } })).toEqual([
      'pacing.perKey.starts: 1 x headroom 0.5 leaves no start per interval; raise starts or headroom',
    ]);
    expect(pacingIssuesOf({ perKey: { key: 'tenantId', starts: 10, burst: 9 } })).toEqual([
      'pacing.perKey.burst: must be at most the 8 starts per interval the key is allowed after headroom',
    ]);
    expect(pacingIssuesOf({ perKey: { key: '', starts: 10 } })).toEqual([
      'pacing.perKey.key: must name the resource field whose value is the key',
    ]);
    expect(pacingIssuesOf({ perKey: { key: 'tenantId', starts: 10, interval: 60 } })).toEqual([
      'pacing.perKey: unknown key "interval"',
    ]);
  });
});

describe('Function: jobBatching', () => {
  const batching = (pacing: Record<string, unknown>, job: Record<string, unknown> = {}) =>
    jobBatching(jobSchema.parse({ ...minimalJob, ...job, pacing: { starts: 100, ...pacing } }));

  it('derives from the rate after headroom (100 documented, 80 allowed: 20 a batch, 16 s short wait, 1 s window)', () => {
    expect(batching({})).toEqual({
      batchSize: 20,
      batchingWindowSeconds: 1,
      shortWaitMs: 16_000,
      derived: ['batchSize', 'shortWaitMs', 'batchingWindowSeconds'],
    });
  });

  it("is not changed by a per-key limit below the job's: a batch mixes keys", () => {
    expect(batching({ perKey: { key: 'tenantId', starts: 6 } })).toEqual(batching({}));
  });

  it("keeps what the job set, and bounds the derived short wait by the consumer's timeout", () => {
    expect(batching({ batchSize: 50 }, { consumerTimeoutSeconds: 20 })).toMatchObject({
      batchSize: 50,
      shortWaitMs: 10_000,
      derived: ['shortWaitMs', 'batchingWindowSeconds'],
    });
  });

  it('refuses a window under 1 s set beside a batch over 10, set or derived (an SQS event source rule)', () => {
    const envIssuesOf = (pacing: Record<string, unknown>) =>
      environmentSchema
        .safeParse({ region: 'eu-west-1', jobs: { 'a-job': { ...minimalJob, pacing: { starts: 100, ...pacing } } } })
        .error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    expect(envIssuesOf({ batchingWindowSeconds: 0 })).toEqual([
      'jobs.a-job.pacing.batchingWindowSeconds: must be at least 1 when the batch size (20) is over 10 (an SQS event source rule)',
    ]);
    expect(envIssuesOf({ batchSize: 10, batchingWindowSeconds: 0 })).toBeUndefined();
  });
});

describe('Schema: jobSchema.shape.settings', () => {
  describe('Method: safeParse', () => {
    it("leaves the job's own settings free-form, even keys near a short pacing name", () => {
      const settings = {
        provider: 'acme',
        providerBaseUrl: 'https://api.example.com',
        sessionMaxAgeDays: 30,
        paging: true,
        spacing: 2,
        shortWait: 5,
      };
      expect(jobSchema.parse({ ...minimalJob, settings }).settings).toStrictEqual(settings);
    });

    it.each([
      ['shortWaitMs', 'shortWaitMs'],
      ['shortWaitMS', 'shortWaitMs'],
      ['maxDeferals', 'maxDeferrals'],
      ['downstreamkey', 'downstreamKey'],
      ['pacing', 'enabled'],
      ['Pacing', 'enabled'],
    ])('refuses the pacing setting %s there, naming pacing.%s', (key, meant) => {
      expect(issuesOf({ settings: { [key]: 1 } })).toEqual([
        `settings.${key}: is a pacing setting: set pacing.${meant} instead`,
      ]);
    });

    it('names every bad setting in one round: a value of the wrong kind and a pacing key', () => {
      expect(issuesOf({ settings: { provider: null, shortWaitMs: -1, maxDeferrals: [3] } })).toEqual([
        'settings.provider: must be a string, a number or a boolean',
        'settings.maxDeferrals: must be a string, a number or a boolean',
        'settings.shortWaitMs: is a pacing setting: set pacing.shortWaitMs instead',
        'settings.maxDeferrals: is a pacing setting: set pacing.maxDeferrals instead',
      ]);
    });
  });
});

describe('Schema: scheduleSchema', () => {
  describe('Method: safeParse', () => {
    it.each([
      ['five fields', '0 2 * * ?'],
      ['no "?"', '0 2 * * * *'],
      ['"?" in both day fields', '0 2 ? * ? *'],
    ])('rejects a cron body with %s', (_label, cron) => {
      const result = scheduleSchema.safeParse({ cron, timeZone: 'UTC' });
      expect(result.success).toBe(false);
      expect(result.error?.issues.map((i) => i.message)).toEqual([
        'must be an EventBridge Scheduler cron body with 6 fields and "?" in exactly one of day-of-month and day-of-week, e.g. "0 2 * * ? *"',
      ]);
    });

    it.each(['Mars/Base', 'GMT', 'not a zone'])('rejects the time zone %s', (timeZone) => {
      const result = scheduleSchema.safeParse({ cron: '0 2 * * ? *', timeZone });
      expect(result.error?.issues.map((i) => i.message)).toEqual([
        'must be an IANA time zone such as "Europe/London" or "UTC"',
      ]);
    });
  });
});

describe('Schema: environmentSchema', () => {
  describe('Method: parse', () => {
    it('fills every environment-level default and leaves account and alarmEmail unset', () => {
      expect(environmentSchema.parse({ region: 'eu-central-1', jobs: { 'a-job': minimalJob } })).toStrictEqual({
        region: 'eu-central-1',
        protected: false,
        retainData: false,
        logRetentionDays: 30,
        appResources: { create: false, tables: {}, buckets: {}, secrets: {} },
        operatorRoles: [],
        jobs: { 'a-job': jobDefaults },
      });
    });

    it('takes operator roles by name, with a path and wildcards, and refuses an ARN, naming the key', () => {
      const roles = ['paced-jobs-operator', 'aws-reserved/sso.amazonaws.com/*AWSReservedSSO_Operator_*'];
      expect(
        environmentSchema.parse({ region: 'eu-west-1', operatorRoles: roles, jobs: { 'a-job': minimalJob } })
          .operatorRoles,
      ).toStrictEqual(roles);
      const bad = environmentSchema.safeParse({
        region: 'eu-west-1',
        operatorRoles: ['arn:aws:iam::123456789012:role/x'],
        jobs: { 'a-job': minimalJob },
      });
      expect(bad.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
        ['operatorRoles.0', 'must be an IAM role name, with its path if it has one ("*" matches any characters)'],
      ]);
    });

    it('defaults a table to string keys and no secondary indexes', () => {
      const parsed = environmentSchema.parse({
        region: 'eu-west-1',
        appResources: { tables: { t: { tableName: 'things', partitionKey: { name: 'id' } } } },
        jobs: { 'a-job': minimalJob },
      });
      expect(parsed.appResources.tables.t).toStrictEqual({
        tableName: 'things',
        partitionKey: { name: 'id', type: 'S' },
        globalSecondaryIndexes: [],
      });
    });
  });
});

describe('Schema: jobUsesSchema', () => {
  describe('Method: safeParse', () => {
    it('reads a mode or a list of modes per function, and access as both (the producer getting its reading modes)', () => {
      const parsed = jobUsesSchema.parse({
        tables: {
          narrow: { ref: 't', discover: 'query', apply: ['get', 'delete'] },
          applyOnly: { ref: 't', apply: ['query', 'delete'] },
          legacy: { ref: 't', access: 'readwrite' },
          writeOnly: { ref: 't', access: 'write' },
        },
        buckets: { cleaner: { ref: 'b', apply: 'delete' }, listed: { ref: 'b', access: ['list', 'get', 'put'] } },
      });
      expect(parsed.tables).toStrictEqual({
        narrow: { ref: 't', discover: ['query'], apply: ['get', 'delete'] },
        applyOnly: { ref: 't', discover: [], apply: ['query', 'delete'] },
        legacy: { ref: 't', discover: ['read'], apply: ['readwrite'] },
        writeOnly: { ref: 't', discover: [], apply: ['write'] },
      });
      expect(parsed.buckets).toStrictEqual({
        cleaner: { ref: 'b', discover: [], apply: ['delete'] },
        listed: { ref: 'b', discover: ['list', 'get'], apply: ['list', 'get', 'put'] },
      });
    });

    it('refuses an unknown mode, an empty list, access beside discover, and a use that names no mode, each by key', () => {
      const result = jobUsesSchema.safeParse({
        tables: {
          a: { ref: 't', apply: ['scan', 'truncate'] },
          b: { ref: 't', apply: [] },
          c: { ref: 't', access: 'read', discover: 'query' },
          d: { ref: 't' },
        },
        buckets: { e: { ref: 'b', apply: 'query' } },
      });
      expect(result.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
        [
          'tables.a.apply.1',
          'Invalid option: expected one of "get"|"query"|"scan"|"put"|"update"|"delete"|"read"|"write"|"readwrite"',
        ],
        ['tables.b.apply', 'must name at least one mode'],
        [
          'tables.c.access',
          'is shorthand for discover and apply together: give either access, or discover and/or apply',
        ],
        [
          'tables.d.access',
          'is required unless discover or apply is given: one or more of get, query, scan, put, update, delete, read, write, readwrite',
        ],
        ['buckets.e.apply', 'Invalid option: expected one of "get"|"list"|"put"|"delete"|"read"|"write"|"readwrite"'],
      ]);
    });
  });
});

describe('Function: tableActions, bucketActions', () => {
  it('grants Query and Scan, and only those, on indexes; ListBucket, and only that, on the bucket', () => {
    expect(tableActions(['get', 'query', 'delete'])).toStrictEqual({
      table: ['dynamodb:BatchGetItem', 'dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:Query'],
      indexes: ['dynamodb:Query'],
    });
    expect(tableActions(['readwrite']).indexes).toStrictEqual(['dynamodb:Query', 'dynamodb:Scan']);
    expect(bucketActions(['delete'])).toStrictEqual({ bucket: [], objects: ['s3:DeleteObject'] });
    expect(bucketActions(['read'])).toStrictEqual({ bucket: ['s3:ListBucket'], objects: ['s3:GetObject'] });
  });

  it('keeps the wide modes the unions of the small ones (plus ConditionCheckItem and DescribeTable for tables)', () => {
    const extra = ['dynamodb:ConditionCheckItem', 'dynamodb:DescribeTable'];
    expect(tableActions(['read']).table).toStrictEqual(
      tableActions(['get', 'query', 'scan']).table.concat(extra).sort(),
    );
    expect(tableActions(['write']).table).toStrictEqual(
      [...tableActions(['put', 'update', 'delete']).table, 'dynamodb:BatchWriteItem', ...extra].sort(),
    );
    expect(tableActions(['readwrite']).table).toStrictEqual(tableActions(['read', 'write']).table);
    expect(bucketActions(['readwrite'])).toStrictEqual(bucketActions(['get', 'list', 'put', 'delete']));
  });
});

describe('Schema: appResourcesSchema', () => {
  describe('Method: safeParse', () => {
    it('leaves a created bucket unnamed by default, so CloudFormation names it', () => {
      expect(appResourcesSchema.parse({ create: true, buckets: { files: {} } }).buckets).toStrictEqual({ files: {} });
    });

    it("keeps a created bucket's explicit name, still validated", () => {
      expect(
        appResourcesSchema.parse({ create: true, buckets: { files: { bucketName: 'my-files' } } }).buckets,
      ).toStrictEqual({ files: { bucketName: 'my-files' } });
      const bad = appResourcesSchema.safeParse({ create: true, buckets: { files: { bucketName: 'My_Files' } } });
      expect(bad.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
        ['buckets.files.bucketName', 'must be a valid S3 bucket name'],
      ]);
    });

    it.each([
      ['create false', { create: false }],
      ['create left at its default', {}],
    ])('requires the name of an imported bucket (%s), one issue per unnamed bucket', (_label, create) => {
      const result = appResourcesSchema.safeParse({
        ...create,
        buckets: { files: {}, named: { bucketName: 'named' }, more: {} },
      });
      const message =
        'is required when appResources.create is false: the stack imports the existing bucket by its name';
      expect(result.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
        ['buckets.files.bucketName', message],
        ['buckets.more.bucketName', message],
      ]);
    });
  });
});
