// Pins every default in lib/config/schema.ts, so the documented defaults and the code cannot drift apart.
import { bucketActions, tableActions } from '../../../lib/config/access';
import { appResourcesSchema, effectiveRateLimit, environmentSchema, jobSchema, jobUsesSchema, rateLimitSchema, scheduleSchema } from '../../../lib/config/schema';

const minimalJob = { schedule: { cron: '0 2 * * ? *', timeZone: 'UTC' }, rateLimit: { starts: 100 } };

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
  rateLimit: { starts: 100, intervalSeconds: 60, headroom: 0.8, burst: 1, backfillShare: 0.5 },
  concurrency: { max: 5 },
  batchSize: 10,
  batchingWindowSeconds: 5,
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
  admission: { enabled: true, horizonSeconds: 300 },
  alarms: { throttledPerMinute: 10, throttledMinutes: 5, producerDurationFraction: 0.8, stalledMinutes: 15 },
  settings: {},
};

describe('Schema: jobSchema', () => {
  describe('Method: parse', () => {
    it('fills every default of a minimal job', () => {
      expect(jobSchema.parse(minimalJob)).toStrictEqual(jobDefaults);
    });

    it('defaults burst to 1 so the sliding-window guarantee keeps the full sustained rate', () => {
      expect(rateLimitSchema.parse({ starts: 10 })).toStrictEqual({ starts: 10, intervalSeconds: 60, headroom: 0.8, burst: 1, backfillShare: 0.5 });
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
      const result = jobSchema.safeParse({ ...minimalJob, alarms: { producerDurationFraction: 1.5 } });
      expect(result.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toEqual([
        'alarms.producerDurationFraction: Too big: expected number to be <=1',
      ]);
    });

    it('keeps the default idempotency lifetime longer than queue plus DLQ retention', () => {
      const job = jobSchema.parse(minimalJob);
      expect(job.idempotencyRecordDays).toBeGreaterThanOrEqual(job.queueRetentionDays + 14);
    });
  });
});

describe('Schema: rateLimitSchema.shape.perKey', () => {
  const issuesOf = (perKey: Record<string, unknown>) => rateLimitSchema.safeParse({ starts: 100, perKey }).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`);

  it('fills its defaults, and the consumer gets the per-key allowance after headroom beside the job-wide one', () => {
    const rateLimit = rateLimitSchema.parse({ starts: 100, perKey: { key: 'merchantId', starts: 25 } });
    expect(rateLimit.perKey).toEqual({ key: 'merchantId', starts: 25, intervalSeconds: 60, headroom: 0.8, burst: 1 });
    expect(effectiveRateLimit(rateLimit)).toEqual({
      startsPerInterval: 80,
      intervalSeconds: 60,
      burst: 1,
      backfillShare: 0.5,
      perKey: { field: 'merchantId', startsPerInterval: 20, intervalSeconds: 60, burst: 1, headroom: 0.8 },
    });
  });

  it('refuses a per-key limit that leaves no start after headroom, a burst above it, an empty key and an unknown field', () => {
    expect(issuesOf({ key: 'tenantId', starts: 1, headroom: 0.5 })).toEqual(['perKey.starts: 1 x headroom 0.5 leaves no start per interval; raise starts or headroom']);
    expect(issuesOf({ key: 'tenantId', starts: 10, burst: 9 })).toEqual(['perKey.burst: must be at most the 8 starts per interval the key is allowed after headroom']);
    expect(issuesOf({ key: '', starts: 10 })).toEqual(['perKey.key: must name the resource field whose value is the key']);
    expect(issuesOf({ key: 'tenantId', starts: 10, interval: 60 })?.[0]).toMatch(/^perKey: Unrecognized key/);
  });
});

describe('Schema: rateLimitSchema.shape.backfillShare', () => {
  const issuesOf = (backfillShare: unknown) => rateLimitSchema.safeParse({ starts: 100, backfillShare }).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`);

  it('defaults to half the allowance and takes any share above 0 up to all of it', () => {
    expect(rateLimitSchema.parse({ starts: 100 }).backfillShare).toBe(0.5);
    expect(rateLimitSchema.parse({ starts: 100, backfillShare: 1 }).backfillShare).toBe(1);
    expect(effectiveRateLimit(rateLimitSchema.parse({ starts: 100, backfillShare: 0.25 })).backfillShare).toBe(0.25);
  });

  it('refuses a share of nothing or of more than the allowance, naming the key', () => {
    expect(issuesOf(0)).toEqual(['backfillShare: must be above 0 (a share of the allowance, e.g. 0.5)']);
    expect(issuesOf(1.5)).toEqual(['backfillShare: Too big: expected number to be <=1']);
  });
});

describe('Schema: jobSchema.shape.concurrency', () => {
  const parse = (concurrency: unknown) => jobSchema.safeParse({ ...minimalJob, concurrency });
  const issuesOf = (concurrency: unknown) => parse(concurrency).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`);

  it('reads a number as the cap, and the object form with its per-key limit', () => {
    expect(parse(8).data?.concurrency).toEqual({ max: 8 });
    expect(parse(undefined).data?.concurrency).toEqual({ max: 5 });
    expect(parse({ perKey: { key: 'merchantId', max: 2 } }).data?.concurrency).toEqual({ max: 5, perKey: { key: 'merchantId', max: 2 } });
  });

  it('names the bad part of either form', () => {
    expect(issuesOf(1)).toEqual(['concurrency: Too small: expected number to be >=2']);
    expect(issuesOf({ max: 1 })).toEqual(['concurrency.max: Too small: expected number to be >=2']);
    expect(issuesOf({ max: 5, perKey: { key: 'merchantId' } })).toEqual(['concurrency.perKey.max: Invalid input: expected number, received undefined']);
    expect(issuesOf({ max: 5, perKey: { key: '', max: 2 } })).toEqual(['concurrency.perKey.key: must name the resource field whose value is the key']);
    expect(issuesOf('many')).toEqual(['concurrency: Invalid input: expected number, received string']);
  });
});

describe('Schema: jobSchema.shape.settings (the pacing keys of lambda/core/pacingSettings.ts)', () => {
  const issuesOf = (settings: Record<string, unknown>) =>
    jobSchema.safeParse({ ...minimalJob, settings }).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`);

  describe('Method: safeParse', () => {
    it('accepts valid pacing settings and hands the settings on exactly as given (no pacing defaults filled in)', () => {
      const settings = { downstreamKey: 'acme', maxDeferrals: 40, maxDeferralAgeSeconds: 7200, shortWaitMs: 16_000, adaptiveRate: false, pacing: true };
      expect(jobSchema.parse({ ...minimalJob, settings }).settings).toStrictEqual(settings);
    });

    it.each(['shortWaitMS', 'ShortWaitMs', 'shortwaitms'])('refuses %s, naming the pacing key it misspells', (key) => {
      expect(issuesOf({ [key]: 16_000 })).toEqual([`settings.${key}: unknown pacing setting; did you mean shortWaitMs?`]);
    });

    it.each([0, -1, 2.5, '10s'])('refuses shortWaitMs %p, naming the key', (value) => {
      expect(issuesOf({ shortWaitMs: value })).toEqual([`settings.shortWaitMs: must be a positive integer, got ${JSON.stringify(value)}`]);
    });

    it('refuses a deferral budget the message schema could not carry (over 10000), at synth rather than at run time', () => {
      expect(issuesOf({ maxDeferrals: 20_000 })).toEqual(['settings.maxDeferrals: must be at most 10000, got 20000']);
    });

    it("leaves the job's own settings free-form", () => {
      const settings = { provider: 'acme', providerBaseUrl: 'https://api.example.com', sessionMaxAgeDays: 30, paging: true };
      expect(jobSchema.parse({ ...minimalJob, settings }).settings).toStrictEqual(settings);
    });

    it('names every bad setting in one round: a value of the wrong kind, a bad pacing value and a misspelt key', () => {
      expect(issuesOf({ provider: null, shortWaitMs: -1, Pacing: false, maxDeferrals: [3] })).toEqual([
        'settings.provider: must be a string, a number or a boolean',
        'settings.maxDeferrals: must be a string, a number or a boolean',
        'settings.shortWaitMs: must be a positive integer, got -1',
        'settings.Pacing: unknown pacing setting; did you mean pacing?',
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
      expect(result.error?.issues.map((i) => i.message)).toEqual(['must be an IANA time zone such as "Europe/London" or "UTC"']);
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
      expect(environmentSchema.parse({ region: 'eu-west-1', operatorRoles: roles, jobs: { 'a-job': minimalJob } }).operatorRoles).toStrictEqual(roles);
      const bad = environmentSchema.safeParse({ region: 'eu-west-1', operatorRoles: ['arn:aws:iam::123456789012:role/x'], jobs: { 'a-job': minimalJob } });
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
        tables: { a: { ref: 't', apply: ['scan', 'truncate'] }, b: { ref: 't', apply: [] }, c: { ref: 't', access: 'read', discover: 'query' }, d: { ref: 't' } },
        buckets: { e: { ref: 'b', apply: 'query' } },
      });
      expect(result.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
        ['tables.a.apply.1', 'Invalid option: expected one of "get"|"query"|"scan"|"put"|"update"|"delete"|"read"|"write"|"readwrite"'],
        ['tables.b.apply', 'must name at least one mode'],
        ['tables.c.access', 'is shorthand for discover and apply together: give either access, or discover and/or apply'],
        ['tables.d.access', 'is required unless discover or apply is given: one or more of get, query, scan, put, update, delete, read, write, readwrite'],
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
    expect(tableActions(['read']).table).toStrictEqual(tableActions(['get', 'query', 'scan']).table.concat(extra).sort());
    expect(tableActions(['write']).table).toStrictEqual([...tableActions(['put', 'update', 'delete']).table, 'dynamodb:BatchWriteItem', ...extra].sort());
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
      expect(appResourcesSchema.parse({ create: true, buckets: { files: { bucketName: 'my-files' } } }).buckets).toStrictEqual({ files: { bucketName: 'my-files' } });
      const bad = appResourcesSchema.safeParse({ create: true, buckets: { files: { bucketName: 'My_Files' } } });
      expect(bad.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([['buckets.files.bucketName', 'must be a valid S3 bucket name']]);
    });

    it.each([
      ['create false', { create: false }],
      ['create left at its default', {}],
    ])('requires the name of an imported bucket (%s), one issue per unnamed bucket', (_label, create) => {
      const result = appResourcesSchema.safeParse({ ...create, buckets: { files: {}, named: { bucketName: 'named' }, more: {} } });
      const message = 'is required when appResources.create is false: the stack imports the existing bucket by its name';
      expect(result.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
        ['buckets.files.bucketName', message],
        ['buckets.more.bucketName', message],
      ]);
    });
  });
});
