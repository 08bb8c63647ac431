// PacedJob: its props validation (every problem in one message) and how a non-default job config reaches the template.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { AppResources } from '../../lib/app-resources';
import { environmentSchema, type JobConfig, jobSchema } from '../../lib/config/schema';
import {
  effectiveRateLimit,
  handlerEntry,
  HANDLERS_DIR,
  type JobGrants,
  MAX_BUCKET_NAME_LENGTH,
  MAX_JOB_SETTINGS_BYTES,
  PacedJob,
  type PacedJobProps,
  producerFunctionName,
  stateTablePartitions,
} from '../../lib/paced-job';
import { rateItemKey } from '../../lambda/adapters/adaptiveRateLimiter';
import { concurrencyItemKey } from '../../lambda/adapters/keyConcurrency';
import { backlogItemKey } from '../../lambda/adapters/keyRateLimiter';
import { idempotencyRecordId } from '../../lambda/core/idempotencyKey';
import { keyLimitsItemKey, perKeyItemKey } from '../../lambda/core/keyLimits';
import { ledgerKeys } from '../../lambda/core/ledgerContract';
import { InvalidPropsError } from '../../lib/props-error';
import { StateTables } from '../../lib/state-tables';
import { testApp } from './cdkContext';
import type { IConstruct } from 'constructs';
import {
  actionsOf,
  actionsOn,
  arnOf,
  importedArn,
  logicalId,
  mentions,
  refOf,
  resourceOf,
  resourcesOf,
  statementsOfRole,
} from './templateHelpers';
import { thrown } from '../support/thrown';

const FIXTURE_HANDLERS = path.join(__dirname, 'fixtures', 'handlers');
const FAKE_JOB = path.join(__dirname, '..', 'fixtures', 'jobs', 'fake-job', 'index.ts');

/** Imported resources, by name; with `create`, the same resources created, the bucket named by CloudFormation. */
const appResourcesConfig = (create = false) =>
  environmentSchema.parse({
    region: 'eu-west-1',
    appResources: {
      create,
      tables: {
        orders: {
          tableName: 'orders-test',
          partitionKey: { name: 'orderId' },
          globalSecondaryIndexes: [{ indexName: 'by-status', partitionKey: { name: 'status' } }],
        },
      },
      buckets: { files: create ? {} : { bucketName: 'files-test' } },
      secrets: { token: { secretName: 'test/token' } },
    },
    jobs: { 'x-job': { schedule: { cron: '0 2 * * ? *', timeZone: 'UTC' }, pacing: { starts: 10 } } },
  }).appResources;

function job(overrides: Record<string, unknown> = {}): JobConfig {
  return jobSchema.parse({ schedule: { cron: '0 2 * * ? *', timeZone: 'UTC' }, pacing: { starts: 10 }, ...overrides });
}

function scaffold(stackName = 'PacedJobs-test', create = false) {
  const app = testApp();
  const stack = new Stack(app, stackName);
  const appResources = new AppResources(stack, 'AppResources', {
    config: appResourcesConfig(create),
    retainData: false,
  });
  const stateTables = new StateTables(stack, 'State', { retainData: false });
  const scheduleGroup = new scheduler.ScheduleGroup(stack, 'ScheduleGroup', { scheduleGroupName: 'paced-jobs-test' });
  return { stack, appResources, stateTables, scheduleGroup };
}

/** A config job's `uses` refs as the app resources' constructs, as the reference app's stack maps them. */
function grantsOf(appResources: AppResources, uses: JobConfig['uses']): JobGrants {
  return {
    tables: Object.fromEntries(
      Object.entries(uses.tables).map(([alias, u]) => [
        alias,
        {
          table: appResources.tables[u.ref],
          discover: u.discover,
          apply: u.apply,
          indexes: appResources.indexNames[u.ref] ?? [],
        },
      ]),
    ),
    buckets: Object.fromEntries(
      Object.entries(uses.buckets).map(([alias, u]) => [
        alias,
        { bucket: appResources.buckets[u.ref], discover: u.discover, apply: u.apply },
      ]),
    ),
    secrets: Object.fromEntries(
      Object.entries(uses.secrets).map(([alias, u]) => [alias, { secret: appResources.secrets[u.ref] }]),
    ),
  };
}

type Built = ReturnType<typeof scaffold>;

/** PacedJob's props for a config job on the scaffold's resources, the fake job as its entry. */
function jobProps(built: Built, jobName: string, config: JobConfig, extra: Partial<PacedJobProps> = {}): PacedJobProps {
  return {
    jobName,
    job: config,
    entry: FAKE_JOB,
    uses: grantsOf(built.appResources, config.uses),
    stateTables: built.stateTables,
    scheduleGroup: built.scheduleGroup,
    logRetentionDays: 30,
    retainData: false,
    handlersDir: FIXTURE_HANDLERS,
    ...extra,
  };
}

describe('Function: effectiveRateLimit', () => {
  it('allows the documented quota less headroom, rounded down, with the configured burst', () => {
    expect(effectiveRateLimit({ starts: 99, intervalSeconds: 60, headroom: 0.8, burst: 1 })).toEqual({
      startsPerInterval: 79,
      intervalSeconds: 60,
      burst: 1,
    });
  });

  it('does not lose a start to floating point when the product is whole', () => {
    expect(effectiveRateLimit({ starts: 100, intervalSeconds: 60, headroom: 0.29, burst: 1 }).startsPerInterval).toBe(
      29,
    );
    expect(effectiveRateLimit({ starts: 100, intervalSeconds: 60, headroom: 0.57, burst: 1 }).startsPerInterval).toBe(
      57,
    );
  });

  it('keeps an explicit burst', () => {
    expect(effectiveRateLimit({ starts: 100, intervalSeconds: 1, headroom: 0.5, burst: 7 })).toEqual({
      startsPerInterval: 50,
      intervalSeconds: 1,
      burst: 7,
    });
  });
});

describe('Function: stateTablePartitions', () => {
  // IAM's StringLike: '*' any run of characters, '?' one.
  const like = (pattern: string) =>
    new RegExp(
      `^${pattern
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '.*')
        .replace(/\?/g, '.')}$`,
    );
  const matches = (patterns: string[], key: string) => patterns.some((p) => like(p).test(key));
  const partitions = stateTablePartitions('pay-job', 'acme');

  it("matches every partition key the job's own code writes, by the Lambda side's own key builders", () => {
    expect(matches(partitions.idempotency, idempotencyRecordId('pay-job', 'reconcile:acme:p-1:2026-12-04'))).toBe(true);
    for (const key of [
      ledgerKeys.batch('pay-job', 'pay-job:2026-12-04:x').pk,
      ledgerKeys.invocation('pay-job', 'pay-job:2026-12-04:x', 'inv-1').pk,
      ledgerKeys.page('pay-job', 'pay-job:2026-12-04:x', 3, 'a').pk,
      ledgerKeys.rejection('pay-job', new Date(0), 'm-1').pk,
      ledgerKeys.invalidRow('pay-job', 'pay-job:2026-12-04:x', 'row 1').pk,
    ])
      expect({ key, matched: matches(partitions.ledger, key) }).toEqual({ key, matched: true });
    for (const key of [
      'acme',
      'acme#2',
      rateItemKey('acme'),
      perKeyItemKey('acme', 't-1'),
      backlogItemKey('acme', 't-1'),
      concurrencyItemKey('acme', 't-1'),
      keyLimitsItemKey('pay-job'),
    ]) {
      expect({ key, matched: matches(partitions.limiter, key) }).toEqual({ key, matched: true });
    }
  });

  it("matches no partition of another job, even one whose name begins with this job's", () => {
    expect(matches(partitions.idempotency, idempotencyRecordId('pay-job-2', 'x'))).toBe(false);
    for (const key of [
      ledgerKeys.batch('pay-job-2', 'b').pk,
      ledgerKeys.invocation('pay-job-2', 'b', 'i').pk,
      ledgerKeys.page('pay-job-2', 'b', 1, 'a').pk,
      ledgerKeys.rejection('other', new Date(0), 'm').pk,
      ledgerKeys.invalidRow('pay-job-2', 'b', 'r').pk,
    ]) {
      expect({ key, matched: matches(partitions.ledger, key) }).toEqual({ key, matched: false });
    }
    for (const key of ['acme2', perKeyItemKey('other', 't-1'), keyLimitsItemKey('pay-job-2')])
      expect({ key, matched: matches(partitions.limiter, key) }).toEqual({ key, matched: false });
  });
});

describe('Function: handlerEntry', () => {
  it("takes a handler's TypeScript source where there is one (the repository), else its JavaScript (the package)", () => {
    expect(handlerEntry(HANDLERS_DIR, 'producer')).toBe(path.join(HANDLERS_DIR, 'producer.ts'));
    const compiled = mkdtempSync(path.join(tmpdir(), 'paced-jobs-handlers-'));
    try {
      writeFileSync(path.join(compiled, 'consumer.js'), 'exports.handler = async () => undefined;\n');
      expect(handlerEntry(compiled, 'consumer')).toBe(path.join(compiled, 'consumer.js'));
    } finally {
      rmSync(compiled, { recursive: true, force: true });
    }
  });
});

describe('Function: producerFunctionName', () => {
  it('joins the stack and job names', () => {
    expect(producerFunctionName('PacedJobs-prod', 'payments-job')).toBe('PacedJobs-prod-payments-job-producer');
  });
});

describe('Class: PacedJob', () => {
  describe('Method: constructor (validation)', () => {
    it('names every problem in one message before building anything', () => {
      const built = scaffold('PacedJobs-a-rather-long-environment-name');
      const { stack } = built;
      const error = thrown(
        () =>
          new PacedJob(
            stack,
            'Bad',
            jobProps(built, 'an-exceptionally-long-job-name-xx', {
              ...job({ pacing: { starts: 1 }, queueRetentionDays: 14, idempotencyRecordDays: 60 }),
              consumerTimeoutSeconds: 8000,
            }),
          ),
        InvalidPropsError,
      );
      expect(error.message).toBe(
        [
          'Invalid props for PacedJob PacedJobs-a-rather-long-environment-name/Bad:',
          '  - producer function name "PacedJobs-a-rather-long-environment-name-an-exceptionally-long-job-name-xx-producer" is 83 characters; Lambda allows at most 64 (shorten the stack or job name)',
          '  - pacing: starts (1) x headroom (0.8) rounds down to 0 starts per interval',
          '  - consumerTimeoutSeconds: 8000 x 6 = 48000s exceeds the SQS visibility timeout limit of 43200s',
          "  - queueRetentionDays: must be less than the DLQ's 14 days (got 14), or a redriven message expires on arrival",
        ].join('\n'),
      );
      expect(stack.node.tryFindChild('Bad')).toBeUndefined();
    });
    it("refuses job settings too large for Lambda's 4 KB of variables", () => {
      const built = scaffold();
      const error = thrown(
        () =>
          new PacedJob(built.stack, 'Big', jobProps(built, 'big-job', job({ settings: { blob: 'x'.repeat(3000) } }))),
        InvalidPropsError,
      );
      expect(error.problems).toEqual([
        // 3000 bytes of settings plus 520 bytes of the settings' other fields.
        "JOB_SETTINGS would be 3520 bytes; keep it within 3072 so all variables fit Lambda's 4 KB",
      ]);
    });

    it('hands the consumer its per-key concurrency and the cap as reserved concurrency', () => {
      const built = scaffold();
      const { stack } = built;
      const keyed = new PacedJob(
        stack,
        'Keyed',
        jobProps(
          built,
          'keyed-job',
          job({ pacing: { starts: 10, concurrency: 6, perKey: { key: 'merchantId', concurrency: 2 } } }),
        ),
      );
      expect(keyed.runtimeSettings.concurrency).toBe(6);
      expect(keyed.runtimeSettings.concurrencyPerKey).toEqual({ field: 'merchantId', maxConcurrent: 2 });
      expect(resourceOf(Template.fromStack(stack), keyed.consumer).Properties.ReservedConcurrentExecutions).toBe(6);
    });

    it("measures a created bucket's name at S3's 63-character maximum, not at the length of its token", () => {
      const built = scaffold('PacedJobs-test', true);
      const { appResources } = built;
      const error = thrown(
        () =>
          new PacedJob(
            built.stack,
            'Near',
            jobProps(
              built,
              'near-job',
              job({
                uses: { buckets: { files: { ref: 'files', access: 'read' } } },
                settings: { blob: 'x'.repeat(2497) },
              }),
            ),
          ),
        InvalidPropsError,
      );
      // 2497 bytes of settings, 63 of the bucket's name once CloudFormation gives it, 531 of the other fields.
      expect(error.problems).toEqual([
        "JOB_SETTINGS would be 3091 bytes; keep it within 3072 so all variables fit Lambda's 4 KB",
      ]);
      // Measured with the token's own text in place of the name, the same settings would have passed.
      expect(3091 - MAX_BUCKET_NAME_LENGTH + appResources.names.buckets.files.length).toBeLessThanOrEqual(
        MAX_JOB_SETTINGS_BYTES,
      );
    });
  });

  describe('Method: constructor (configuration)', () => {
    let template: Template;
    let pacedJob: PacedJob;
    let group: scheduler.ScheduleGroup;

    beforeAll(() => {
      const built = scaffold();
      const { stack, scheduleGroup } = built;
      group = scheduleGroup;
      pacedJob = new PacedJob(
        stack,
        'Custom',
        jobProps(
          built,
          'custom-job',
          job({
            schedule: {
              cron: '5 4 ? * MON-FRI *',
              timeZone: 'America/New_York',
              enabled: false,
              retryAttempts: 0,
              maxEventAgeSeconds: 120,
            },
            pacing: {
              starts: 50,
              intervalSeconds: 10,
              headroom: 0.5,
              burst: 3,
              concurrency: 3,
              batchSize: 50,
              batchingWindowSeconds: 2,
              safetyMarginMs: 300,
            },
            consumerTimeoutSeconds: 120,
            consumerMemoryMb: 1024,
            producerTimeoutSeconds: 600,
            producerMemoryMb: 256,
            maxReceiveCount: 7,
            queueRetentionDays: 2,
            idempotencyRecordDays: 20,
            maxMessageBytes: 4096,
            uses: {
              tables: { orders: { ref: 'orders', access: 'write' } },
              buckets: { files: { ref: 'files', access: 'read' } },
              secrets: { token: { ref: 'token' } },
            },
            settings: { mode: 'strict', limit: 3, dryRun: true },
          }),
          { logRetentionDays: 14 },
        ),
      );
      template = Template.fromStack(stack);
    });

    it("names the job's entry in both functions' Metadata, relative to the app's folder with / separators", () => {
      for (const fn of [pacedJob.producer, pacedJob.consumer]) {
        expect(resourceOf(template, fn).Metadata).toMatchObject({
          'paced-jobs:job-entry': 'test/fixtures/jobs/fake-job/index.ts',
        });
      }
    });

    it('schedules with the configured cron, zone, state and retry policy', () => {
      template.hasResourceProperties('AWS::Scheduler::Schedule', {
        ScheduleExpression: 'cron(5 4 ? * MON-FRI *)',
        ScheduleExpressionTimezone: 'America/New_York',
        State: 'DISABLED',
        Target: { RetryPolicy: { MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 120 } },
      });
    });

    it('puts the schedule in the group it is given, created after it', () => {
      const resource = resourceOf(template, pacedJob.schedule);
      expect(resource.Properties.GroupName).toBe('paced-jobs-test');
      expect(resource.DependsOn).toContain(logicalId(group));
      expect(pacedJob.scheduleGroup).toBe(group);
    });

    it('sizes the queue from the consumer timeout and the configured retention and receive count', () => {
      template.hasResourceProperties('AWS::SQS::Queue', {
        VisibilityTimeout: 720,
        MessageRetentionPeriod: 2 * 86400,
        RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [logicalId(pacedJob.dlq), 'Arn'] }, maxReceiveCount: 7 },
      });
    });

    it('maps the queue with the configured batch, window and concurrency', () => {
      template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        BatchSize: 50,
        MaximumBatchingWindowInSeconds: 2,
        ScalingConfig: { MaximumConcurrency: 3 },
        FunctionResponseTypes: ['ReportBatchItemFailures'],
      });
      template.hasResourceProperties('AWS::Lambda::Function', {
        ReservedConcurrentExecutions: 3,
        Timeout: 120,
        MemorySize: 1024,
      });
      template.hasResourceProperties('AWS::Lambda::Function', {
        FunctionName: 'PacedJobs-test-custom-job-producer',
        Timeout: 600,
        MemorySize: 256,
      });
    });

    it('has both event sources publish their event counts (MetricsConfig EventCount), which the failed-invoke and dropped alarms read', () => {
      const resources = template.toJSON().Resources;
      const mappingOf = (source: typeof pacedJob.eventSource) =>
        resources[(Stack.of(pacedJob).resolve(source.eventSourceMappingId) as { Ref: string }).Ref];
      expect(mappingOf(pacedJob.eventSource)).toMatchObject({
        Type: 'AWS::Lambda::EventSourceMapping',
        Properties: {
          EventSourceArn: arnOf(pacedJob.queue),
          FunctionName: refOf(pacedJob.consumer),
          MetricsConfig: { Metrics: ['EventCount'] },
        },
      });
      expect(mappingOf(pacedJob.admissionEventSource)).toMatchObject({
        Type: 'AWS::Lambda::EventSourceMapping',
        Properties: {
          EventSourceArn: arnOf(pacedJob.admissionQueue),
          FunctionName: refOf(pacedJob.producer),
          MetricsConfig: { Metrics: ['EventCount'] },
        },
      });
    });

    it('hands the functions the effective pacing, the names by alias and the plain settings', () => {
      expect(pacedJob.runtimeSettings).toEqual({
        jobName: 'custom-job',
        pageSize: 500,
        maxPagesPerRun: 200,
        maxMessageBytes: 4096,
        maxReceiveCount: 7,
        businessDateOffsetDays: -1,
        timeZone: 'America/New_York',
        // queueRetentionDays: 2, in seconds.
        queueRetentionSeconds: 172_800,
        rateLimit: { startsPerInterval: 25, intervalSeconds: 10, burst: 3, backfillShare: 0.5 },
        // The documented quota as config states it, for ops preflight's headroom check.
        quota: { starts: 50, headroom: 0.5 },
        concurrency: 3,
        admission: { horizonSeconds: 300, batchSize: 50, batchingWindowSeconds: 2 },
        // A batch of 50 at 25 per 10 s spans 19.6 s of slots: the short wait derived for it (lambda/core/pacingSettings.ts).
        pacing: { shortWaitMs: 21_000, safetyMarginMs: 300, adaptiveRate: true, enabled: true },
        tables: { orders: 'orders-test' },
        buckets: { files: 'files-test' },
        secrets: { token: 'test/token' },
        settings: { mode: 'strict', limit: 3, dryRun: true },
      });
      const consumer = template.toJSON().Resources[logicalId(pacedJob.consumer)];
      expect(consumer.Properties.Environment.Variables).toMatchObject({
        JOB_SETTINGS: JSON.stringify(pacedJob.runtimeSettings),
        IDEMPOTENCY_TTL_SECONDS: '1728000',
        MAX_MESSAGE_BYTES: '4096',
      });
    });

    it("hands the job's SLO to its functions in JOB_SETTINGS, and none when it has none", () => {
      const built = scaffold();
      const withSlo = new PacedJob(
        built.stack,
        'WithSlo',
        jobProps(built, 'with-slo', job({ slo: { objective: 0.99, completeWithinMinutes: 120 } })),
      );
      expect(withSlo.runtimeSettings.slo).toEqual({ objective: 0.99, completeWithinMinutes: 120 });
      const without = new PacedJob(built.stack, 'NoSlo', jobProps(built, 'no-slo', job()));
      expect(without.runtimeSettings).not.toHaveProperty('slo');
    });

    it('accepts a zero batching window for batches of up to 10', () => {
      const built = scaffold();
      const { stack } = built;
      new PacedJob(
        stack,
        'NoWindow',
        jobProps(built, 'no-window', job({ pacing: { starts: 10, batchingWindowSeconds: 0, batchSize: 10 } })),
      );
      Template.fromStack(stack).hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        BatchSize: 10,
        MaximumBatchingWindowInSeconds: 0,
      });
    });

    it('grants a write-only table use without read actions and a read-only bucket use without write actions', () => {
      const statements = statementsOfRole(template, pacedJob.consumer.executionRole);
      expect(actionsOn(statements, importedArn('dynamodb', ':table/orders-test'))).toEqual([
        'dynamodb:BatchWriteItem',
        'dynamodb:ConditionCheckItem',
        'dynamodb:DeleteItem',
        'dynamodb:DescribeTable',
        'dynamodb:PutItem',
        'dynamodb:UpdateItem',
      ]);
      // Writes are on the table alone: no index ARN.
      expect(actionsOn(statements, importedArn('dynamodb', ':table/orders-test/index/by-status'))).toEqual([]);
      expect(
        actionsOn(statements, { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::files-test/*']] }),
      ).toEqual(['s3:GetObject']);
      expect(
        actionsOn(statements, { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::files-test']] }),
      ).toEqual(['s3:ListBucket']);
    });

    it("grants the producer the reading part of each use's access: the read bucket, nothing of the write-only table", () => {
      const statements = statementsOfRole(template, pacedJob.producer.executionRole);
      expect(actionsOn(statements, importedArn('dynamodb', ':table/orders-test'))).toEqual([]);
      expect(
        actionsOn(statements, { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::files-test/*']] }),
      ).toEqual(['s3:GetObject']);
    });
  });

  describe('Method: constructor (a bucket the stack creates, named by CloudFormation)', () => {
    let template: Template;
    let pacedJob: PacedJob;
    let bucket: IConstruct;

    beforeAll(() => {
      const built = scaffold('PacedJobs-test', true);
      const { stack, appResources } = built;
      bucket = appResources.buckets.files;
      pacedJob = new PacedJob(
        stack,
        'Files',
        jobProps(built, 'files-job', job({ uses: { buckets: { files: { ref: 'files', access: 'readwrite' } } } })),
      );
      template = Template.fromStack(stack);
    });

    it.each(['producer', 'consumer'] as const)(
      "hands the %s the bucket's name as its Ref inside JOB_SETTINGS",
      (which) => {
        const value =
          template.toJSON().Resources[logicalId(pacedJob[which])].Properties.Environment.Variables.JOB_SETTINGS;
        // The one reference in the variable is the bucket's Ref: the name is whatever CloudFormation gave it.
        expect(value['Fn::Join'][0]).toBe('');
        const parts = value['Fn::Join'][1] as unknown[];
        expect(parts.filter((p) => typeof p !== 'string')).toEqual([refOf(bucket)]);
        const deployed = JSON.parse(parts.map((p) => (typeof p === 'string' ? p : 'cfn-generated-name')).join(''));
        expect(deployed.buckets).toEqual({ files: 'cfn-generated-name' });
        expect(deployed.tables).toEqual({});
      },
    );

    it("grants on the bucket's ARN attribute and its objects, never on an ARN built from a name", () => {
      const statements = statementsOfRole(template, pacedJob.consumer.executionRole);
      const s3Resources = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('s3:'))).flatMap(resourcesOf);
      expect(s3Resources).toEqual(expect.arrayContaining([arnOf(bucket), { 'Fn::Join': ['', [arnOf(bucket), '/*']] }]));
      expect(JSON.stringify(s3Resources)).not.toContain('s3:::');
      expect(actionsOn(statements, { 'Fn::Join': ['', [arnOf(bucket), '/*']] })).toEqual([
        's3:AbortMultipartUpload',
        's3:DeleteObject',
        's3:GetObject',
        's3:PutObject',
      ]);
      expect(actionsOn(statements, arnOf(bucket))).toEqual(['s3:ListBucket']);
    });
  });

  describe('Method: constructor (least privilege per use)', () => {
    let template: Template;
    let pacedJob: PacedJob;
    let stateTables: StateTables;
    const ordersTable = importedArn('dynamodb', ':table/orders-test');
    const ordersIndex = importedArn('dynamodb', ':table/orders-test/index/by-status');
    const files = { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::files-test']] };
    const fileObjects = { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::files-test/*']] };
    const operator = 'arn:aws:iam::123456789012:role/paced-jobs-operator';

    beforeAll(() => {
      const built = scaffold();
      stateTables = built.stateTables;
      pacedJob = new PacedJob(
        built.stack,
        'Narrow',
        jobProps(
          built,
          'narrow-job',
          job({
            uses: {
              tables: { orders: { ref: 'orders', discover: 'query', apply: ['get', 'delete'] } },
              buckets: { files: { ref: 'files', apply: 'delete' } },
            },
            pacing: { starts: 10, downstreamKey: 'acme' },
          }),
          { operatorRoleArns: [operator] },
        ),
      );
      template = Template.fromStack(built.stack);
    });

    it('grants the producer its discover modes only: Query on the table and on its index by name', () => {
      const statements = statementsOfRole(template, pacedJob.producer.executionRole);
      expect(actionsOn(statements, ordersTable)).toEqual(['dynamodb:Query']);
      expect(actionsOn(statements, ordersIndex)).toEqual(['dynamodb:Query']);
      expect(mentions(statements, 'files-test')).toBe(false);
    });

    it('grants the consumer its apply modes only: get and delete on the table, no index, no Scan or Put; DeleteObject alone', () => {
      const statements = statementsOfRole(template, pacedJob.consumer.executionRole);
      expect(actionsOn(statements, ordersTable)).toEqual([
        'dynamodb:BatchGetItem',
        'dynamodb:DeleteItem',
        'dynamodb:GetItem',
      ]);
      expect(actionsOn(statements, ordersIndex)).toEqual([]);
      expect(actionsOn(statements, fileObjects)).toEqual(['s3:DeleteObject']);
      expect(actionsOn(statements, files)).toEqual([]);
    });

    it("bounds each state-table grant to the job's own partitions (dynamodb:LeadingKeys), with no Scan", () => {
      const grant = (table: IConstruct, actions: string[], keys: string[]) => ({
        Action: actions,
        Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': keys } },
        Effect: 'Allow',
        Resource: arnOf(table),
      });
      const ledgerKeys = [
        'BATCH#narrow-job',
        'REJECTED#narrow-job',
        'INVOCATIONS#narrow-job#*',
        'PAGES#narrow-job#*',
        'INVALID_ROW#narrow-job#*',
      ];
      expect(statementsOfRole(template, pacedJob.consumer.executionRole)).toEqual(
        expect.arrayContaining([
          grant(
            stateTables.idempotencyTable,
            [
              'dynamodb:BatchGetItem',
              'dynamodb:DeleteItem',
              'dynamodb:GetItem',
              'dynamodb:PutItem',
              'dynamodb:UpdateItem',
            ],
            ['narrow-job#*'],
          ),
          grant(stateTables.ledgerTable, ['dynamodb:PutItem', 'dynamodb:UpdateItem'], ledgerKeys),
          // The limiter items are the downstream key's (shared by the jobs that call it), the overrides the job's own.
          grant(
            stateTables.limiterTable,
            ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
            ['acme', 'acme#*', 'LIMITS#narrow-job'],
          ),
        ]),
      );
      expect(statementsOfRole(template, pacedJob.producer.executionRole)).toEqual(
        expect.arrayContaining([
          grant(
            stateTables.ledgerTable,
            ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:UpdateItem'],
            ledgerKeys,
          ),
        ]),
      );
      // Nothing else on the state tables: every statement naming one carries the condition.
      for (const role of [pacedJob.producer.executionRole, pacedJob.consumer.executionRole]) {
        for (const table of [stateTables.idempotencyTable, stateTables.ledgerTable, stateTables.limiterTable]) {
          const unbounded = statementsOfRole(template, role).filter(
            (st) => mentions([st], arnOf(table)) && !('Condition' in st),
          );
          expect(unbounded).toEqual([]);
        }
      }
    });

    it('denies SendMessage on each queue to every principal but its own senders, the operators on the work and admission queues', () => {
      const role = (r: IConstruct) => arnOf(r);
      const scheduleRole = pacedJob.node.findChild('ScheduleRole');
      const expected: [IConstruct, unknown[]][] = [
        [pacedJob.queue, [role(pacedJob.producer.executionRole), role(pacedJob.consumer.executionRole), operator]],
        [pacedJob.admissionQueue, [role(pacedJob.producer.executionRole), operator]],
        [pacedJob.dlq, [role(pacedJob.consumer.executionRole)]],
        [pacedJob.producerDlq, [role(pacedJob.producer.executionRole), role(scheduleRole)]],
      ];
      for (const [queue, senders] of expected) {
        template.hasResourceProperties('AWS::SQS::QueuePolicy', {
          Queues: [{ Ref: logicalId(queue) }],
          PolicyDocument: {
            Statement: Match.arrayWith([
              {
                Sid: 'OnlyOwnSendersSend',
                Effect: 'Deny',
                Principal: { AWS: '*' },
                Action: 'sqs:SendMessage',
                Resource: arnOf(queue),
                Condition: { ArnNotLike: { 'aws:PrincipalArn': senders } },
              },
            ]),
          },
        });
      }
    });
  });
});
