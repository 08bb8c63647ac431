// Fine-grained template assertions on the dev (creates app resources) and prod (imports them, retains data) stacks of
// the test environments (test/fixtures/environments.ts), synthesized without bundling (cdkContext.ts).
import * as path from 'node:path';
import { Match, Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { loadEnvironment as loadFrom, parseEnvironment } from '../../lib/config/load';
import { environments } from '../fixtures/environments';
import { InvalidPropsError } from '../../lib/props-error';
import { PacedJobsStack } from '../../lib/stack';
import { jobBatching } from '../../lib/config/schema';
import { applyChanges, stackConfigCases, type ConfigCase } from '../corpus/loadCorpus';
import type { PacedJob } from '../../lib/paced-job';
import { testApp } from './cdkContext';
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
  type Statement,
  statementsOfRole,
} from './templateHelpers';

const FAKE_JOB = path.join(__dirname, '..', 'fixtures', 'jobs', 'fake-job', 'index.ts');
/** The test environments (test/fixtures/environments.ts), shaped as the reference app's, with jobs of their own. */
const loadEnvironment = (name: string) => loadFrom(name, environments);

interface Built {
  stack: PacedJobsStack;
  template: Template;
}

function build(environmentName: string): Built {
  const app = testApp();
  const stack = new PacedJobsStack(app, `PacedJobs-${environmentName}`, {
    environmentName,
    config: loadEnvironment(environmentName),
    // Every job's code is the fake job's: the stack bundles nothing here (testApp), and reads no job's code.
    jobEntry: () => FAKE_JOB,
  });
  return { stack, template: Template.fromStack(stack) };
}

/** Every Allow statement of a job function's role. */
function statementsOf(template: Template, job: PacedJob, which: 'producer' | 'consumer'): Statement[] {
  return statementsOfRole(template, job[which].executionRole);
}

function variablesOf(template: Template, fn: IConstruct): Record<string, unknown> {
  const resource = template.toJSON().Resources[logicalId(fn)];
  return resource.Properties.Environment.Variables;
}

let dev: Built;
let prod: Built;

beforeAll(() => {
  dev = build('dev');
  prod = build('prod');
});

describe('Class: PacedJobsStack', () => {
  describe('Method: constructor (schedules)', () => {
    it('schedules the producer with the cron in its time zone, the retry policy and the producer DLQ', () => {
      const job = prod.stack.jobs['payments-job'];
      prod.template.hasResourceProperties('AWS::Scheduler::Schedule', {
        ScheduleExpression: 'cron(0 2 * * ? *)',
        ScheduleExpressionTimezone: 'Europe/London',
        State: 'ENABLED',
        FlexibleTimeWindow: { Mode: 'OFF' },
        Target: {
          Arn: arnOf(job.producer),
          Input: '{"scheduledTime":"<aws.scheduler.scheduled-time>"}',
          RetryPolicy: { MaximumRetryAttempts: 3, MaximumEventAgeInSeconds: 3600 },
          DeadLetterConfig: { Arn: arnOf(job.producerDlq) },
          RoleArn: arnOf(job.node.findChild('ScheduleRole')),
        },
      });
      prod.template.hasResourceProperties('AWS::Scheduler::Schedule', {
        ScheduleExpression: 'cron(30 3 * * ? *)',
        ScheduleExpressionTimezone: 'UTC',
        Target: { Arn: arnOf(prod.stack.jobs['uploads-job'].producer) },
      });
    });

    it("puts every job's schedule in the environment's one schedule group, paced-jobs-<env>, named in GroupName and created first", () => {
      const groups = prod.template.findResources('AWS::Scheduler::ScheduleGroup');
      expect(Object.keys(groups)).toEqual([logicalId(prod.stack.scheduleGroup)]);
      // Tags are the stack's (project, environment), which CloudFormation puts on the group too.
      expect(resourceOf(prod.template, prod.stack.scheduleGroup)).toMatchObject({
        Properties: { Name: 'paced-jobs-prod' },
      });
      const schedules = prod.template.findResources('AWS::Scheduler::Schedule');
      expect(Object.keys(schedules).sort()).toEqual(
        Object.values(prod.stack.jobs)
          .map((j) => logicalId(j.schedule))
          .sort(),
      );
      for (const schedule of Object.values(schedules)) {
        expect(schedule.Properties.GroupName).toBe('paced-jobs-prod');
        expect(schedule.DependsOn).toContain(logicalId(prod.stack.scheduleGroup));
      }
      for (const job of Object.values(prod.stack.jobs)) expect(job.scheduleGroup).toBe(prod.stack.scheduleGroup);
      expect(resourceOf(dev.template, dev.stack.scheduleGroup).Properties.Name).toBe('paced-jobs-dev');
    });

    it('keeps the schedule group with the data: retained where the environment retains data (prod), deleted where not (dev)', () => {
      expect(resourceOf(prod.template, prod.stack.scheduleGroup)).toMatchObject({
        DeletionPolicy: 'Retain',
        UpdateReplacePolicy: 'Retain',
      });
      expect(resourceOf(dev.template, dev.stack.scheduleGroup)).toMatchObject({
        DeletionPolicy: 'Delete',
        UpdateReplacePolicy: 'Delete',
      });
    });

    it('refuses, through a CloudFormation rule, a deploy to any region but the configured one', () => {
      for (const [built, env] of [
        [dev, 'dev'],
        [prod, 'prod'],
      ] as const) {
        const region = loadEnvironment(env).region;
        expect(built.template.toJSON().Rules.DeployedInConfiguredRegion).toEqual({
          Assertions: [
            {
              Assert: { 'Fn::Equals': [{ Ref: 'AWS::Region' }, region] },
              AssertDescription: `Environment ${env} is configured for region ${region} (lib/config/environments.ts); deploy it there`,
            },
          ],
        });
      }
    });

    it('refuses an environment name that would make an invalid schedule group name, before building anything', () => {
      const app = testApp();
      expect(
        () =>
          new PacedJobsStack(app, 'PacedJobs-bad', { environmentName: 'has space', config: loadEnvironment('dev') }),
      ).toThrow(
        'Invalid props for PacedJobsStack PacedJobs-bad:\n  - environmentName "has space" makes the schedule group name "paced-jobs-has space"; ' +
          'Scheduler allows 1-64 characters of 0-9, a-z, A-Z, "-", "_" and "."',
      );
      expect(app.node.tryFindChild('PacedJobs-bad')).toBeUndefined();
    });

    it('lets the schedule role invoke only its own producer and write only its own producer DLQ', () => {
      const job = prod.stack.jobs['sessions-job'];
      const role = job.node.findChild('ScheduleRole');
      prod.template.hasResourceProperties('AWS::IAM::Policy', {
        Roles: [{ Ref: logicalId(role) }],
        PolicyDocument: {
          Statement: [
            {
              Action: 'lambda:InvokeFunction',
              Effect: 'Allow',
              Resource: [arnOf(job.producer), { 'Fn::Join': ['', [arnOf(job.producer), ':*']] }],
            },
            { Action: 'sqs:SendMessage', Effect: 'Allow', Resource: arnOf(job.producerDlq) },
          ],
        },
      });
    });
  });

  describe('Method: constructor (queues)', () => {
    it('gives the job queue a visibility timeout of 6x the consumer timeout, its retention, SSE and a redrive to its DLQ', () => {
      const job = prod.stack.jobs['payments-job'];
      expect(resourceOf(prod.template, job.queue)).toMatchObject({
        Type: 'AWS::SQS::Queue',
        Properties: {
          VisibilityTimeout: 360,
          MessageRetentionPeriod: 4 * 86400,
          SqsManagedSseEnabled: true,
          RedrivePolicy: { deadLetterTargetArn: arnOf(job.dlq), maxReceiveCount: 5 },
        },
      });
    });

    it('keeps both dead-letter queues for 14 days, encrypted, with no redrive of their own', () => {
      for (const queue of [prod.stack.jobs['payments-job'].dlq, prod.stack.jobs['payments-job'].producerDlq]) {
        const props = prod.template.toJSON().Resources[logicalId(queue)].Properties;
        expect(props).toEqual({ MessageRetentionPeriod: 1209600, SqsManagedSseEnabled: true, Tags: expect.any(Array) });
      }
    });

    it('denies every non-TLS request on each queue', () => {
      const job = prod.stack.jobs['uploads-job'];
      for (const queue of [job.queue, job.dlq, job.producerDlq]) {
        prod.template.hasResourceProperties('AWS::SQS::QueuePolicy', {
          Queues: [refOf(queue)],
          PolicyDocument: {
            Statement: Match.arrayWith([
              {
                Action: 'sqs:*',
                Effect: 'Deny',
                Principal: { AWS: '*' },
                Condition: { Bool: { 'aws:SecureTransport': 'false' } },
                Resource: arnOf(queue),
              },
            ]),
          },
        });
      }
    });

    it("lets only the job's functions and the configured operator role send to its work queue, every other principal denied", () => {
      const job = prod.stack.jobs['uploads-job'];
      const operator = {
        'Fn::Join': [
          '',
          ['arn:', { Ref: 'AWS::Partition' }, ':iam::', { Ref: 'AWS::AccountId' }, ':role/paced-jobs-operator'],
        ],
      };
      expect(loadEnvironment('prod').operatorRoles).toEqual(['paced-jobs-operator']);
      prod.template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [refOf(job.queue)],
        PolicyDocument: {
          Statement: Match.arrayWith([
            {
              Sid: 'OnlyOwnSendersSend',
              Action: 'sqs:SendMessage',
              Effect: 'Deny',
              Principal: { AWS: '*' },
              Condition: {
                ArnNotLike: {
                  'aws:PrincipalArn': [arnOf(job.producer.executionRole), arnOf(job.consumer.executionRole), operator],
                },
              },
              Resource: arnOf(job.queue),
            },
          ]),
        },
      });
    });
  });

  describe('Method: constructor (consumers)', () => {
    it.each(['payments-job', 'uploads-job', 'sessions-job'])(
      'maps the %s queue to its consumer with the batch settings, maxConcurrency equal to the reservation, and partial failures',
      (jobName) => {
        const job = prod.stack.jobs[jobName];
        const config = loadEnvironment('prod').jobs[jobName];
        const { concurrency } = config.pacing;
        const { batchSize, batchingWindowSeconds } = jobBatching(config);
        prod.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
          EventSourceArn: arnOf(job.queue),
          FunctionName: refOf(job.consumer),
          BatchSize: batchSize,
          MaximumBatchingWindowInSeconds: batchingWindowSeconds,
          ScalingConfig: { MaximumConcurrency: concurrency },
          FunctionResponseTypes: ['ReportBatchItemFailures'],
        });
        prod.template.hasResourceProperties('AWS::Lambda::Function', {
          FunctionName: Match.absent(),
          ReservedConcurrentExecutions: concurrency,
          Timeout: 60,
          MemorySize: 512,
          Runtime: 'nodejs22.x',
          Architectures: ['arm64'],
          TracingConfig: { Mode: 'Active' },
          LoggingConfig: { LogGroup: refOf(job.consumer.functionLogGroup) },
          Description: `${jobName}: applies each operation once, paced, from the job queue`,
        });
      },
    );

    it('never lets the event source scale past the consumer reservation', () => {
      const resources = prod.template.toJSON().Resources;
      for (const job of Object.values(prod.stack.jobs)) {
        const reserved = resources[logicalId(job.consumer)].Properties.ReservedConcurrentExecutions;
        const mapping = Object.values(resources).find(
          (r) =>
            (r as { Type: string }).Type === 'AWS::Lambda::EventSourceMapping' &&
            JSON.stringify(r).includes(logicalId(job.consumer)),
        ) as { Properties: { ScalingConfig: { MaximumConcurrency: number } } };
        expect(mapping.Properties.ScalingConfig.MaximumConcurrency).toBeLessThanOrEqual(reserved);
      }
    });

    it('hands the consumer exactly its variables: names and settings, never a secret value', () => {
      const job = prod.stack.jobs['payments-job'];
      const { idempotencyTable, ledgerTable, limiterTable } = prod.stack.stateTables;
      expect(variablesOf(prod.template, job.consumer)).toEqual({
        JOB_NAME: 'payments-job',
        JOB_SETTINGS: JSON.stringify({
          jobName: 'payments-job',
          pageSize: 500,
          maxPagesPerRun: 58,
          maxMessageBytes: 262144,
          maxReceiveCount: 5,
          businessDateOffsetDays: -1,
          timeZone: 'Europe/London',
          queueRetentionSeconds: 345_600,
          rateLimit: { startsPerInterval: 80, intervalSeconds: 60, burst: 1, backfillShare: 0.5 },
          quota: { starts: 100, headroom: 0.8 },
          concurrency: 10,
          admission: { horizonSeconds: 300, batchSize: 20, batchingWindowSeconds: 1 },
          slo: { objective: 0.99, completeWithinMinutes: 360 },
          tables: { payments: 'payments-prod' },
          buckets: {},
          secrets: { apiKey: 'paced-jobs/prod/provider-api-key' },
          // Derived from the rate: 20 payments span 14.25 s of slots at 80 a minute (lambda/core/pacingSettings.ts).
          pacing: { shortWaitMs: 16_000, adaptiveRate: true, enabled: true },
          settings: { provider: 'acme', providerBaseUrl: 'https://api.payments.example.com' },
        }),
        QUEUE_URL: refOf(job.queue),
        DLQ_URL: refOf(job.dlq),
        ADMISSION_QUEUE_URL: refOf(job.admissionQueue),
        LEDGER_TABLE_NAME: refOf(ledgerTable),
        IDEMPOTENCY_TABLE_NAME: refOf(idempotencyTable),
        LIMITER_TABLE_NAME: refOf(limiterTable),
        IDEMPOTENCY_TTL_SECONDS: String(30 * 86400),
        MAX_MESSAGE_BYTES: '262144',
        POWERTOOLS_SERVICE_NAME: 'payments-job',
        POWERTOOLS_METRICS_NAMESPACE: 'PacedJobs',
        NODE_OPTIONS: '--enable-source-maps',
      });
    });

    it('puts no secret value or secret reference in any function environment, even where the stack creates the secret', () => {
      const secret = dev.stack.appResources.secrets.providerApiKey;
      const functions = dev.template.findResources('AWS::Lambda::Function');
      const environments = JSON.stringify(
        Object.values(functions).map((f) => (f as { Properties: { Environment: unknown } }).Properties.Environment),
      );
      expect(environments).not.toContain('resolve:secretsmanager');
      expect(environments).not.toContain(logicalId(secret));
      expect(environments).not.toContain('SecretString');
    });
  });

  describe('Method: constructor (producers)', () => {
    it('names the producer <stack>-<job>-producer and gives it the shared variables only', () => {
      const job = prod.stack.jobs['uploads-job'];
      prod.template.hasResourceProperties('AWS::Lambda::Function', {
        FunctionName: 'PacedJobs-prod-uploads-job-producer',
        Timeout: 300,
        MemorySize: 512,
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        ReservedConcurrentExecutions: Match.absent(),
        DeadLetterConfig: { TargetArn: arnOf(job.producerDlq) },
        TracingConfig: { Mode: 'Active' },
      });
      const variables = variablesOf(prod.template, job.producer);
      expect(Object.keys(variables).sort()).toEqual([
        'ADMISSION_QUEUE_URL',
        'DLQ_URL',
        'JOB_NAME',
        'JOB_SETTINGS',
        'LEDGER_TABLE_NAME',
        'NODE_OPTIONS',
        'POWERTOOLS_METRICS_NAMESPACE',
        'POWERTOOLS_SERVICE_NAME',
        'QUEUE_URL',
      ]);
      expect(JSON.parse(variables.JOB_SETTINGS as string)).toMatchObject({
        rateLimit: { startsPerInterval: 2400, intervalSeconds: 60, burst: 1 },
        tables: { uploads: 'uploads-prod' },
        buckets: { uploads: 'paced-jobs-uploads-prod' },
      });
    });

    it('keeps each function log group for the configured retention', () => {
      const job = prod.stack.jobs['uploads-job'];
      expect(resourceOf(prod.template, job.producer.functionLogGroup)).toMatchObject({
        Type: 'AWS::Logs::LogGroup',
        Properties: { RetentionInDays: 90 },
        DeletionPolicy: 'Retain',
      });
      expect(resourceOf(dev.template, dev.stack.jobs['uploads-job'].consumer.functionLogGroup)).toMatchObject({
        Properties: { RetentionInDays: 30 },
        DeletionPolicy: 'Delete',
      });
    });
  });

  describe('Method: constructor (least privilege)', () => {
    it('lets the producer invoke nothing, read only what its discovery reads, and send only to its own queues', () => {
      const job = prod.stack.jobs['sessions-job'];
      const statements = statementsOf(prod.template, job, 'producer');
      // Continuations go through the admission queue: the producer never invokes a function.
      expect(statements.filter((s) => actionsOf(s).some((a) => a.startsWith('lambda:Invoke')))).toEqual([]);
      expect(actionsOn(statements, arnOf(job.queue))).toEqual([
        'sqs:GetQueueAttributes',
        'sqs:GetQueueUrl',
        'sqs:SendMessage',
      ]);
      // Its admission queue: it sends its next steps there, and its event source mapping consumes them.
      expect(actionsOn(statements, arnOf(job.admissionQueue))).toEqual([
        'sqs:ChangeMessageVisibility',
        'sqs:DeleteMessage',
        'sqs:GetQueueAttributes',
        'sqs:GetQueueUrl',
        'sqs:ReceiveMessage',
        'sqs:SendMessage',
      ]);
      // Its own asynchronous-invocation DLQ (Lambda writes failed scheduled invocations there with the function's role).
      expect(actionsOn(statements, arnOf(job.producerDlq))).toEqual(['sqs:SendMessage']);
      const sendTargets = statements.filter((s) => actionsOf(s).includes('sqs:SendMessage')).flatMap(resourcesOf);
      expect(sendTargets).toHaveLength(3);
      const writeTargets = statements.filter((s) => actionsOf(s).includes('dynamodb:PutItem')).flatMap(resourcesOf);
      expect(writeTargets).toEqual([arnOf(prod.stack.stateTables.ledgerTable)]);
      // Discovery scans the tenants; the sessions are apply's alone.
      expect(JSON.stringify(statements)).toContain(':table/tenants-prod"');
      expect(JSON.stringify(statements)).not.toContain(':table/sessions-prod');
      expect(mentions(statements, arnOf(prod.stack.stateTables.limiterTable))).toBe(false);
      expect(mentions(statements, arnOf(prod.stack.stateTables.idempotencyTable))).toBe(false);
      expect(
        statements.some((s) => actionsOf(s).some((a) => a.startsWith('s3:') || a.startsWith('secretsmanager:'))),
      ).toBe(false);
    });

    it("keeps one job's consumer away from another job's queues, tables, bucket and secret", () => {
      const payments = prod.stack.jobs['payments-job'];
      const uploads = prod.stack.jobs['uploads-job'];
      const paymentsConsumer = statementsOf(prod.template, payments, 'consumer');
      const uploadsConsumer = statementsOf(prod.template, uploads, 'consumer');

      for (const queue of [uploads.queue, uploads.dlq, uploads.producerDlq])
        expect(mentions(paymentsConsumer, arnOf(queue))).toBe(false);
      for (const queue of [payments.queue, payments.dlq, payments.producerDlq])
        expect(mentions(uploadsConsumer, arnOf(queue))).toBe(false);
      expect(JSON.stringify(paymentsConsumer)).not.toContain('uploads-prod');
      expect(JSON.stringify(uploadsConsumer)).not.toContain('payments-prod');
      expect(uploadsConsumer.some((s) => actionsOf(s).some((a) => a.startsWith('secretsmanager:')))).toBe(false);
      expect(paymentsConsumer.some((s) => actionsOf(s).some((a) => a.startsWith('s3:')))).toBe(false);
    });

    it('gives the consumer its queue, its DLQ, the state tables and exactly the declared access to its uses', () => {
      const job = prod.stack.jobs['payments-job'];
      const statements = statementsOf(prod.template, job, 'consumer');
      expect(actionsOn(statements, arnOf(job.queue))).toEqual([
        'sqs:ChangeMessageVisibility',
        'sqs:DeleteMessage',
        'sqs:GetQueueAttributes',
        'sqs:GetQueueUrl',
        'sqs:ReceiveMessage',
        'sqs:SendMessage',
      ]);
      expect(actionsOn(statements, arnOf(job.dlq))).toEqual([
        'sqs:GetQueueAttributes',
        'sqs:GetQueueUrl',
        'sqs:SendMessage',
      ]);
      // The state tables: the job's own partitions only, with the actions its code uses (no Scan).
      const { idempotencyTable, ledgerTable, limiterTable } = prod.stack.stateTables;
      expect(actionsOn(statements, arnOf(idempotencyTable))).toEqual([
        'dynamodb:BatchGetItem',
        'dynamodb:DeleteItem',
        'dynamodb:GetItem',
        'dynamodb:PutItem',
        'dynamodb:UpdateItem',
      ]);
      expect(actionsOn(statements, arnOf(ledgerTable))).toEqual(['dynamodb:PutItem', 'dynamodb:UpdateItem']);
      expect(actionsOn(statements, arnOf(limiterTable))).toEqual(['dynamodb:GetItem', 'dynamodb:UpdateItem']);
      const onIdempotency = statements.filter((s) => mentions([s], arnOf(idempotencyTable)));
      expect(onIdempotency.map((s) => (s as { Condition?: unknown }).Condition)).toEqual([
        { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['payments-job#*'] } },
      ]);
      // apply: ['get', 'update']: the payment read by key and its outcome written; no Query, Scan, Put or index.
      const payments = importedArn('dynamodb', ':table/payments-prod');
      const paymentIndex = importedArn('dynamodb', ':table/payments-prod/index/unsettled-by-date');
      expect(actionsOn(statements, payments)).toEqual([
        'dynamodb:BatchGetItem',
        'dynamodb:GetItem',
        'dynamodb:UpdateItem',
      ]);
      expect(actionsOn(statements, paymentIndex)).toEqual([]);
      // discover: 'query': the producer queries the unsettled index, and may not touch an item.
      const producer = statementsOf(prod.template, job, 'producer');
      expect(actionsOn(producer, payments)).toEqual(['dynamodb:Query']);
      expect(actionsOn(producer, paymentIndex)).toEqual(['dynamodb:Query']);
      const secret = statements.filter((s) =>
        JSON.stringify(resourcesOf(s)).includes(':secret:paced-jobs/prod/provider-api-key-??????'),
      );
      expect(secret.flatMap(actionsOf).sort()).toEqual([
        'secretsmanager:DescribeSecret',
        'secretsmanager:GetSecretValue',
      ]);
    });

    it("grants sessions-job's producer Scan on the tenants, its consumer the sessions index's Query and DeleteItem", () => {
      const job = prod.stack.jobs['sessions-job'];
      const consumer = statementsOf(prod.template, job, 'consumer');
      const producer = statementsOf(prod.template, job, 'producer');
      const tenants = importedArn('dynamodb', ':table/tenants-prod');
      const sessions = importedArn('dynamodb', ':table/sessions-prod');
      const sessionsIndex = importedArn('dynamodb', ':table/sessions-prod/index/by-last-seen');
      expect(actionsOn(producer, tenants)).toEqual(['dynamodb:Scan']);
      expect(actionsOn(producer, sessions)).toEqual([]);
      expect(actionsOn(consumer, tenants)).toEqual([]);
      expect(actionsOn(consumer, sessions)).toEqual(['dynamodb:DeleteItem', 'dynamodb:Query']);
      expect(actionsOn(consumer, sessionsIndex)).toEqual(['dynamodb:Query']);
    });

    it("grants uploads-job's producer the deadline index's Query, its consumer GetItem and DeleteItem on the uploads", () => {
      const job = prod.stack.jobs['uploads-job'];
      const uploads = importedArn('dynamodb', ':table/uploads-prod');
      const uploadsIndex = importedArn('dynamodb', ':table/uploads-prod/index/by-deadline');
      expect(actionsOn(statementsOf(prod.template, job, 'producer'), uploads)).toEqual(['dynamodb:Query']);
      expect(actionsOn(statementsOf(prod.template, job, 'producer'), uploadsIndex)).toEqual(['dynamodb:Query']);
      expect(actionsOn(statementsOf(prod.template, job, 'consumer'), uploads)).toEqual([
        'dynamodb:BatchGetItem',
        'dynamodb:DeleteItem',
        'dynamodb:GetItem',
      ]);
      expect(actionsOn(statementsOf(prod.template, job, 'consumer'), uploadsIndex)).toEqual([]);
    });

    it("hands dev's uploads-job functions the created bucket's Ref, and grants on its ARN attribute", () => {
      const job = dev.stack.jobs['uploads-job'];
      const bucket = dev.stack.appResources.buckets.uploads;
      for (const fn of [job.producer, job.consumer]) {
        const parts = (variablesOf(dev.template, fn).JOB_SETTINGS as { 'Fn::Join': [string, unknown[]] })[
          'Fn::Join'
        ][1];
        expect(parts.filter((p) => typeof p !== 'string')).toEqual([refOf(bucket)]);
        expect(JSON.parse(parts.map((p) => (typeof p === 'string' ? p : '<bucket>')).join(''))).toMatchObject({
          tables: { uploads: 'uploads-dev' },
          buckets: { uploads: '<bucket>' },
        });
      }
      const statements = statementsOf(dev.template, job, 'consumer');
      const objects = { 'Fn::Join': ['', [arnOf(bucket), '/*']] };
      expect(actionsOn(statements, objects)).toEqual(['s3:DeleteObject']);
      const s3Resources = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('s3:'))).flatMap(resourcesOf);
      expect(s3Resources).toEqual([objects]);
    });

    it("grants the upload cleaner s3:DeleteObject alone, on its bucket's objects: no read, list, put or legal hold", () => {
      const job = prod.stack.jobs['uploads-job'];
      const statements = statementsOf(prod.template, job, 'consumer');
      const objects = { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::paced-jobs-uploads-prod/*']] };
      expect(actionsOn(statements, objects)).toEqual(['s3:DeleteObject']);
      const s3 = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('s3:')));
      expect(s3.flatMap(actionsOf)).toEqual(['s3:DeleteObject']);
      expect(JSON.stringify(s3.flatMap(resourcesOf)).match(/s3:::[^"]*/g)).toEqual(['s3:::paced-jobs-uploads-prod/*']);
      expect(
        statementsOf(prod.template, job, 'producer').some((s) => actionsOf(s).some((a) => a.startsWith('s3:'))),
      ).toBe(false);
    });
  });

  describe('Method: constructor (state tables)', () => {
    it.each([
      ['dev', 'Delete'],
      ['prod', 'Retain'],
    ])('builds the idempotency table in %s: key id, TTL expiration, on-demand, PITR, encrypted, %s', (env, policy) => {
      const { stack, template } = env === 'dev' ? dev : prod;
      expect(resourceOf(template, stack.stateTables.idempotencyTable)).toMatchObject({
        Properties: {
          KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
          AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
          TimeToLiveSpecification: { AttributeName: 'expiration', Enabled: true },
          BillingMode: 'PAY_PER_REQUEST',
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          SSESpecification: { SSEEnabled: true },
        },
        DeletionPolicy: policy,
        UpdateReplacePolicy: policy,
      });
    });

    it('builds the ledger (pk, sk, TTL expiresAt) and the limiter (pk, TTL expiresAt), retained in prod', () => {
      const { ledgerTable, limiterTable } = prod.stack.stateTables;
      expect(resourceOf(prod.template, ledgerTable)).toMatchObject({
        Properties: {
          KeySchema: [
            { AttributeName: 'pk', KeyType: 'HASH' },
            { AttributeName: 'sk', KeyType: 'RANGE' },
          ],
          TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
          BillingMode: 'PAY_PER_REQUEST',
          SSESpecification: { SSEEnabled: true },
        },
        DeletionPolicy: 'Retain',
      });
      expect(resourceOf(prod.template, limiterTable)).toMatchObject({
        Properties: {
          KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
          TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
          BillingMode: 'PAY_PER_REQUEST',
          SSESpecification: { SSEEnabled: true },
        },
        DeletionPolicy: 'Retain',
      });
    });
  });

  describe('Method: constructor (app resources)', () => {
    it('creates the configured tables in dev, with their indexes', () => {
      dev.template.hasResourceProperties('AWS::DynamoDB::Table', {
        TableName: 'payments-dev',
        KeySchema: [{ AttributeName: 'paymentId', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        SSESpecification: { SSEEnabled: true },
        GlobalSecondaryIndexes: [
          {
            IndexName: 'unsettled-by-date',
            KeySchema: [
              { AttributeName: 'unsettledDate', KeyType: 'HASH' },
              { AttributeName: 'paymentId', KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'ALL' },
          },
        ],
      });
    });

    it('creates the uploads bucket in dev: named by CloudFormation, private, TLS only, encrypted, access-logged', () => {
      const logs = dev.stack.appResources.accessLogsBucket!;
      expect(resourceOf(dev.template, dev.stack.appResources.buckets.uploads).Properties).toMatchObject({
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
        BucketEncryption: {
          ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
        },
        LoggingConfiguration: { DestinationBucketName: refOf(logs), LogFilePrefix: 'uploads/' },
      });
      // S3 names are global: a fixed name could belong to another account and fail a first deploy there.
      dev.template.resourcePropertiesCountIs('AWS::S3::Bucket', { BucketName: Match.anyValue() }, 0);
      dev.template.hasResourceProperties('AWS::S3::Bucket', {
        LoggingConfiguration: Match.anyValue(),
        VersioningConfiguration: Match.absent(),
      });
      dev.template.hasResourceProperties('AWS::S3::BucketPolicy', {
        Bucket: refOf(dev.stack.appResources.buckets.uploads),
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: 'Deny',
              Action: 's3:*',
              Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            }),
          ]),
        },
      });
    });

    it('creates a generated demo secret in dev and only references secrets, tables and buckets by name in prod', () => {
      dev.template.hasResourceProperties('AWS::SecretsManager::Secret', {
        Name: 'paced-jobs/dev/provider-api-key',
        GenerateSecretString: { PasswordLength: 40, ExcludePunctuation: true },
      });
      prod.template.resourcePropertiesCountIs('AWS::SecretsManager::Secret', {}, 0);
      prod.template.resourcePropertiesCountIs('AWS::S3::Bucket', {}, 0);
      expect(
        Object.values(prod.template.findResources('AWS::DynamoDB::Table')).map(
          (t) => (t as { Properties: { TableName?: string } }).Properties.TableName,
        ),
      ).toEqual([undefined, undefined, undefined]);
    });
  });

  describe('Method: constructor (outputs)', () => {
    it('exports each job resource under its documented output name', () => {
      const job = prod.stack.jobs['payments-job'];
      const outputs = prod.template.toJSON().Outputs;
      expect(outputs.PaymentsJobQueueUrl.Value).toEqual(refOf(job.queue));
      expect(outputs.PaymentsJobQueueArn.Value).toEqual(arnOf(job.queue));
      expect(outputs.PaymentsJobDlqUrl.Value).toEqual(refOf(job.dlq));
      expect(outputs.PaymentsJobDlqArn.Value).toEqual(arnOf(job.dlq));
      expect(outputs.PaymentsJobProducerDlqUrl.Value).toEqual(refOf(job.producerDlq));
      expect(outputs.PaymentsJobProducerDlqArn.Value).toEqual(arnOf(job.producerDlq));
      expect(outputs.PaymentsJobProducerFunctionName.Value).toEqual(refOf(job.producer));
      expect(outputs.PaymentsJobConsumerFunctionName.Value).toEqual(refOf(job.consumer));
      expect(outputs.PaymentsJobScheduleName.Value).toEqual(refOf(job.schedule));
      expect(outputs.PaymentsJobScheduleGroupName).toEqual({
        Value: 'paced-jobs-prod',
        Description: 'payments-job: ScheduleGroupName',
      });
      expect(outputs.PaymentsJobEventSourceMappingUuid.Value).toEqual({
        Ref: logicalId(job.consumer.node.children.find((c) => c.node.id.startsWith('SqsEventSource'))!),
      });
      expect(outputs.IdempotencyTableName.Value).toEqual(refOf(prod.stack.stateTables.idempotencyTable));
      expect(outputs.LedgerTableName.Value).toEqual(refOf(prod.stack.stateTables.ledgerTable));
      expect(outputs.LimiterTableName.Value).toEqual(refOf(prod.stack.stateTables.limiterTable));
      expect(outputs.PaymentsJobEventSourceMappingUuid.Description).toBe('payments-job: EventSourceMappingUuid');
      expect(outputs.UploadsJobQueueUrl.Description).toBe('uploads-job: QueueUrl');
      expect(
        Object.keys(outputs)
          .filter((k) => k.startsWith('UploadsJob'))
          .sort(),
      ).toEqual([
        'UploadsJobAdmissionMappingUuid',
        'UploadsJobAdmissionQueueArn',
        'UploadsJobAdmissionQueueUrl',
        'UploadsJobConsumerFunctionName',
        'UploadsJobDlqArn',
        'UploadsJobDlqUrl',
        'UploadsJobEventSourceMappingUuid',
        'UploadsJobProducerDlqArn',
        'UploadsJobProducerDlqUrl',
        'UploadsJobProducerFunctionName',
        'UploadsJobQueueArn',
        'UploadsJobQueueUrl',
        'UploadsJobScheduleGroupName',
        'UploadsJobScheduleName',
      ]);
    });

    it("publishes each app bucket's name: CloudFormation's (a Ref) where the stack creates it, the configured one where it imports it", () => {
      expect(dev.template.toJSON().Outputs.UploadsBucketName).toEqual({
        Value: refOf(dev.stack.appResources.buckets.uploads),
        Description: 'Name of the application bucket appResources.buckets.uploads',
      });
      expect(prod.template.toJSON().Outputs.UploadsBucketName.Value).toBe('paced-jobs-uploads-prod');
      // Not in the `<job>: <Kind>` shape the operator CLI reads job names from.
      expect(prod.template.toJSON().Outputs.UploadsBucketName.Description).not.toMatch(/^(.+): (\w+)$/);
    });
  });
});

describe('Class: PacedJobsStack (the invalid-config corpus)', () => {
  describe('Method: constructor (config the schema accepts but the stack cannot build)', () => {
    // Each case is refused before anything is built (PacedJobs and AppResources check all their props first).
    it.each(stackConfigCases().map((c) => [c.name, c] as [string, ConfigCase]))(
      'refuses %s with the exact message',
      (_name, c) => {
        const config = parseEnvironment('corpus', applyChanges(environments[c.base], c.changes));
        let thrown: unknown;
        try {
          new PacedJobsStack(testApp(), 'PacedJobs-corpus', {
            environmentName: 'corpus',
            config,
            jobEntry: () => FAKE_JOB,
          });
        } catch (error) {
          thrown = error;
        }
        expect(thrown).toBeInstanceOf(InvalidPropsError);
        expect((thrown as InvalidPropsError).message).toBe(c.expect);
      },
    );
  });
});
