// PacedJobs in a team's own stack: what it builds around one job that writes a table of the team's through `uses`,
// each use's exact grants, the outputs the tools read, and its props refused in one error before anything is built.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { tableActions } from '../../lib/config/access';
import { InvalidPropsError, type JobProps, PacedJobs, type PacedJobsProps } from '../../lib';
import { jobEntryProblem } from '../../lib/paced-jobs';
import { JobOutput, type JobOutputKind, jobOutputName, StackOutput } from '../../lib/outputs';
import { testApp } from './cdkContext';
import { actionsOn, arnOf, importedArn, logicalId, refOf, resourceOf, statementsOfRole } from './templateHelpers';
import { thrown } from '../support/thrown';

const FAKE_JOB = path.join(__dirname, '..', 'fixtures', 'jobs', 'fake-job', 'index.ts');
const ENTRY_METADATA = 'test/fixtures/jobs/fake-job/index.ts';

const scratch = mkdtempSync(path.join(tmpdir(), 'paced-jobs-entries-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A module file in the scratch folder. */
function moduleFile(name: string, text: string): string {
  const file = path.join(scratch, name);
  writeFileSync(file, text);
  return file;
}

/** The job, on the fake job's code: its own table, written through `uses`. */
const fakeJob = (reports: dynamodb.ITable, overrides: Partial<JobProps> = {}): JobProps => ({
  entry: FAKE_JOB,
  schedule: { cron: '0 4 * * ? *', timeZone: 'Europe/Berlin' },
  pacing: { starts: 600, intervalSeconds: 60 },
  pageSize: 7,
  uses: { tables: { reports: { table: reports, access: 'readwrite' } } },
  settings: { items: 30 },
  ...overrides,
});

function teamStack(id = 'TeamStack') {
  const stack = new Stack(testApp(), id);
  const reports = new dynamodb.TableV2(stack, 'Reports', {
    partitionKey: { name: 'reportId', type: dynamodb.AttributeType.STRING },
  });
  return { stack, reports };
}

describe('Class: PacedJobs', () => {
  describe("Method: constructor (one job in a team's stack, with its own TableV2)", () => {
    let stack: Stack;
    let reports: dynamodb.TableV2;
    let jobs: PacedJobs;
    let template: Template;

    beforeAll(() => {
      ({ stack, reports } = teamStack());
      jobs = new PacedJobs(stack, 'Jobs', { jobs: { 'fake-job': fakeJob(reports) } });
      template = Template.fromStack(stack);
    });

    it('builds the state tables, the schedule group named after the stack, and the job with its functions, queues and schedule', () => {
      const job = jobs.jobs['fake-job'];
      expect(Object.keys(jobs.jobs)).toEqual(['fake-job']);
      for (const table of [
        jobs.stateTables.idempotencyTable,
        jobs.stateTables.ledgerTable,
        jobs.stateTables.limiterTable,
      ]) {
        expect(resourceOf(template, table).Type).toBe('AWS::DynamoDB::Table');
      }
      expect(resourceOf(template, jobs.scheduleGroup).Properties.Name).toBe('paced-jobs-TeamStack');
      expect(resourceOf(template, job.schedule).Properties).toMatchObject({
        GroupName: 'paced-jobs-TeamStack',
        ScheduleExpression: 'cron(0 4 * * ? *)',
        ScheduleExpressionTimezone: 'Europe/Berlin',
      });
      for (const queue of [job.queue, job.dlq, job.admissionQueue, job.producerDlq])
        expect(resourceOf(template, queue).Type).toBe('AWS::SQS::Queue');
      expect(resourceOf(template, job.producer).Properties.FunctionName).toBe('TeamStack-fake-job-producer');
      expect(resourceOf(template, jobs.monitoring.topic).Type).toBe('AWS::SNS::Topic');
      expect(resourceOf(template, jobs.monitoring.dashboard).Type).toBe('AWS::CloudWatch::Dashboard');
    });

    it("names the job's entry in both functions' Metadata, relative to the app's folder, and its name in JOB_NAME", () => {
      const job = jobs.jobs['fake-job'];
      for (const fn of [job.producer, job.consumer]) {
        const resource = resourceOf(template, fn);
        expect(resource.Metadata).toMatchObject({ 'paced-jobs:job-entry': ENTRY_METADATA });
        expect(resource.Properties.Environment.Variables.JOB_NAME).toBe('fake-job');
      }
    });

    it("hands both functions the table's name by its alias in JOB_SETTINGS: a Ref, since CloudFormation names the table", () => {
      const job = jobs.jobs['fake-job'];
      expect(job.runtimeSettings).toMatchObject({
        jobName: 'fake-job',
        pageSize: 7,
        settings: { items: 30 },
        buckets: {},
        secrets: {},
      });
      for (const fn of [job.producer, job.consumer]) {
        const value = resourceOf(template, fn).Properties.Environment.Variables.JOB_SETTINGS;
        const parts = value['Fn::Join'][1] as unknown[];
        expect(parts.filter((p) => typeof p !== 'string')).toEqual([refOf(reports)]);
        const deployed = JSON.parse(parts.map((p) => (typeof p === 'string' ? p : 'TeamStack-Reports-ABC')).join(''));
        expect(deployed.tables).toEqual({ reports: 'TeamStack-Reports-ABC' });
      }
    });

    it("grants the consumer exactly readwrite's actions on the table, the producer exactly read's, and neither any index", () => {
      const job = jobs.jobs['fake-job'];
      const consumer = statementsOfRole(template, job.consumer.executionRole);
      const producer = statementsOfRole(template, job.producer.executionRole);
      expect(actionsOn(consumer, arnOf(reports))).toEqual(tableActions(['readwrite']).table);
      expect(actionsOn(producer, arnOf(reports))).toEqual(tableActions(['read']).table);
      expect(actionsOn(producer, arnOf(reports))).not.toContain('dynamodb:PutItem');
      for (const statements of [consumer, producer]) expect(JSON.stringify(statements)).not.toContain('/index/');
    });

    it('writes every output the tools read under its documented name, at the stack level', () => {
      const outputs = template.toJSON().Outputs as Record<string, { Description?: string }>;
      const names = [
        ...(Object.keys(JobOutput) as JobOutputKind[]).map((kind) => jobOutputName('fake-job', kind)),
        ...Object.values(StackOutput),
      ];
      expect(Object.keys(outputs).sort()).toEqual([...names].sort());
      expect(outputs.FakeJobQueueUrl).toEqual({
        Description: 'fake-job: QueueUrl',
        Value: refOf(jobs.jobs['fake-job'].queue),
      });
      expect(outputs.LedgerTableName).toEqual({ Value: refOf(jobs.stateTables.ledgerTable) });
    });

    it('takes the defaults: 30 days of logs, data deleted with the stack, no e-mail subscription, no operator sender', () => {
      const job = jobs.jobs['fake-job'];
      template.hasResourceProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
      expect(
        Object.values(template.findResources('AWS::Logs::LogGroup')).map((g) => g.Properties.RetentionInDays),
      ).toEqual([30, 30]);
      expect(resourceOf(template, jobs.stateTables.idempotencyTable)).toMatchObject({ DeletionPolicy: 'Delete' });
      expect(resourceOf(template, jobs.scheduleGroup)).toMatchObject({ DeletionPolicy: 'Delete' });
      expect(template.findResources('AWS::SNS::Subscription')).toEqual({});
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [refOf(job.queue)],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Condition: {
                ArnNotLike: {
                  'aws:PrincipalArn': [arnOf(job.producer.executionRole), arnOf(job.consumer.executionRole)],
                },
              },
            }),
          ]),
        },
      });
    });
  });

  describe('Method: constructor (props)', () => {
    it('takes the environment name, log retention, retention of data, alarm e-mail and operator roles it is given', () => {
      const { stack, reports } = teamStack();
      const jobs = new PacedJobs(stack, 'Jobs', {
        environmentName: 'reports-prod',
        logRetentionDays: 90,
        retainData: true,
        alarmEmail: 'oncall@example.com',
        operatorRoles: ['team-operator'],
        jobs: { 'fake-job': fakeJob(reports) },
      });
      const template = Template.fromStack(stack);
      const job = jobs.jobs['fake-job'];
      expect(resourceOf(template, jobs.scheduleGroup)).toMatchObject({
        DeletionPolicy: 'Retain',
        Properties: { Name: 'paced-jobs-reports-prod' },
      });
      expect(resourceOf(template, jobs.stateTables.ledgerTable)).toMatchObject({ DeletionPolicy: 'Retain' });
      expect(
        Object.values(template.findResources('AWS::Logs::LogGroup')).map((g) => g.Properties.RetentionInDays),
      ).toEqual([90, 90]);
      template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'oncall@example.com' });
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [refOf(job.queue)],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Condition: {
                ArnNotLike: {
                  'aws:PrincipalArn': Match.arrayWith([
                    {
                      'Fn::Join': [
                        '',
                        ['arn:', { Ref: 'AWS::Partition' }, ':iam::', { Ref: 'AWS::AccountId' }, ':role/team-operator'],
                      ],
                    },
                  ]),
                },
              },
            }),
          ]),
        },
      });
    });

    it('grants imported resources by their modes: Query on the named index alone, DeleteObject on the objects, the secret to the consumer', () => {
      const { stack } = teamStack();
      const orders = dynamodb.Table.fromTableName(stack, 'Orders', 'orders-team');
      const files = s3.Bucket.fromBucketName(stack, 'Files', 'files-team');
      const token = secretsmanager.Secret.fromSecretNameV2(stack, 'Token', 'team/token');
      const jobs = new PacedJobs(stack, 'Jobs', {
        jobs: {
          'fake-job': fakeJob(orders, {
            uses: {
              tables: {
                orders: { table: orders, discover: 'query', apply: ['get', 'update'], indexes: ['by-status'] },
              },
              buckets: { files: { bucket: files, apply: 'delete' } },
              secrets: { token: { secret: token } },
            },
          }),
        },
      });
      const template = Template.fromStack(stack);
      const job = jobs.jobs['fake-job'];
      const producer = statementsOfRole(template, job.producer.executionRole);
      const consumer = statementsOfRole(template, job.consumer.executionRole);
      const table = importedArn('dynamodb', ':table/orders-team');
      expect(actionsOn(producer, table)).toEqual(['dynamodb:Query']);
      expect(actionsOn(producer, importedArn('dynamodb', ':table/orders-team/index/by-status'))).toEqual([
        'dynamodb:Query',
      ]);
      expect(actionsOn(consumer, table)).toEqual(['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem']);
      expect(actionsOn(consumer, importedArn('dynamodb', ':table/orders-team/index/by-status'))).toEqual([]);
      expect(
        actionsOn(consumer, { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':s3:::files-team/*']] }),
      ).toEqual(['s3:DeleteObject']);
      const text = (statements: unknown) => JSON.stringify(statements);
      expect(text(producer)).not.toContain('files-team');
      expect(actionsOn(consumer, importedArn('secretsmanager', ':secret:team/token-??????'))).toEqual([
        'secretsmanager:DescribeSecret',
        'secretsmanager:GetSecretValue',
      ]);
      expect(text(producer)).not.toContain('team/token');
      // The names the job reads, by alias, as given: imported resources are known by name at synthesis.
      expect(job.runtimeSettings).toMatchObject({
        tables: { orders: 'orders-team' },
        buckets: { files: 'files-team' },
        secrets: { token: 'team/token' },
      });
    });

    it("lets a table's own KMS key decrypt for the modes that read and encrypt too for those that write", () => {
      const { stack } = teamStack();
      const key = new kms.Key(stack, 'Key');
      const ledger = new dynamodb.Table(stack, 'Audit', {
        partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
        encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryptionKey: key,
      });
      const jobs = new PacedJobs(stack, 'Jobs', {
        jobs: { 'fake-job': fakeJob(ledger, { uses: { tables: { audit: { table: ledger, access: 'readwrite' } } } }) },
      });
      const template = Template.fromStack(stack);
      const onKey = (role: (typeof jobs.jobs)['fake-job']['producer']['executionRole']) =>
        actionsOn(statementsOfRole(template, role), arnOf(key));
      expect(onKey(jobs.jobs['fake-job'].producer.executionRole)).toEqual(['kms:Decrypt']);
      expect(onKey(jobs.jobs['fake-job'].consumer.executionRole)).toEqual([
        'kms:Decrypt',
        'kms:Encrypt',
        'kms:GenerateDataKey*',
        'kms:ReEncrypt*',
      ]);
    });
  });

  describe('Method: constructor (validation)', () => {
    it('names every bad key of every job in one message, and builds nothing', () => {
      const { stack, reports } = teamStack();
      const missing = path.join(scratch, 'missing', 'index.ts');
      const error = thrown(
        () =>
          new PacedJobs(stack, 'Jobs', {
            logRetentionDays: 2,
            jobs: {
              Bad_Name: fakeJob(reports),
              'usage-report': fakeJob(reports, {
                entry: missing,
                schedule: { cron: '0 4 * *', timeZone: 'Europe/Berlin' },
                uses: {
                  tables: {
                    reports: { table: reports, access: 'readwrite', discover: 'get' },
                    archive: { table: 'reports' as unknown as dynamodb.ITable, access: 'read' },
                  },
                },
              }),
              'fake-job': fakeJob(reports, { pacing: { starts: 1 } }),
            },
          }),
        InvalidPropsError,
      );
      expect(error.message).toBe(
        [
          'Invalid props for PacedJobs TeamStack/Jobs:',
          '  - jobs.Bad_Name: job names are kebab-case, 3 to 32 characters',
          '  - logRetentionDays: must be one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653 (got 2)',
          `  - jobs.usage-report.entry: "${missing}" is not a file: give the path of the job's module, which exports \`job = defineJob(...)\``,
          '  - jobs.usage-report.schedule.cron: must be an EventBridge Scheduler cron body with 6 fields and "?" in exactly one of day-of-month and day-of-week, e.g. "0 2 * * ? *"',
          '  - jobs.usage-report.uses.tables.reports.access: is shorthand for discover and apply together: give either access, or discover and/or apply',
          '  - jobs.usage-report.uses.tables.archive.table: must be a DynamoDB table construct (an ITable: Table, TableV2, Table.fromTableName)',
          '  - jobs.fake-job.pacing: starts (1) x headroom (0.8) rounds down to 0 starts per interval',
        ].join('\n'),
      );
      expect(stack.node.tryFindChild('Jobs')).toBeUndefined();
    });

    it("applies config's rules between a job's keys, and PacedJob's limits, under the job's name", () => {
      const { stack, reports } = teamStack('AnExceptionallyLongTeamStackName');
      const error = thrown(
        () =>
          new PacedJobs(stack, 'Jobs', {
            jobs: {
              'usage-report-for-every-account': fakeJob(reports, { queueRetentionDays: 10, idempotencyRecordDays: 20 }),
              'fake-job': fakeJob(reports, { pacing: { starts: 600, batchSize: 20, batchingWindowSeconds: 0 } }),
            },
          }),
        InvalidPropsError,
      );
      expect(error.problems).toEqual([
        'jobs.usage-report-for-every-account.idempotencyRecordDays: must be at least queueRetentionDays + 14 (DLQ retention) = 24, so a redrive never repeats an effect',
        'jobs.fake-job.pacing.batchingWindowSeconds: must be at least 1 when the batch size (20) is over 10 (an SQS event source rule)',
      ]);
      const limits = thrown(
        () =>
          new PacedJobs(stack, 'Jobs', {
            jobs: {
              'usage-report-for-every-account': fakeJob(reports),
              'fake-job': fakeJob(reports, { pacing: { starts: 600, downstreamKey: 'acme*' } }),
            },
          }),
        InvalidPropsError,
      );
      expect(limits.problems).toEqual([
        'jobs.usage-report-for-every-account: producer function name "AnExceptionallyLongTeamStackName-usage-report-for-every-account-producer" is 72 characters; Lambda allows at most 64 (shorten the stack or job name)',
        'jobs.fake-job.pacing.downstreamKey: may not hold "*", "?" or "$": it names the job\'s limiter items in its IAM policy',
      ]);
    });

    it('refuses a stack without jobs, an environment name Scheduler cannot take, an e-mail that is none and a blank operator command', () => {
      const { stack } = teamStack();
      const error = thrown(
        () =>
          new PacedJobs(stack, 'Jobs', {
            jobs: {},
            environmentName: 'has space',
            alarmEmail: 'oncall',
            operatorCommand: ' ',
          }),
        InvalidPropsError,
      );
      expect(error.problems).toEqual([
        'jobs: at least one job is required',
        'alarmEmail: Invalid email address',
        'operatorCommand: must name a command',
        'environmentName: "has space" makes the schedule group name "paced-jobs-has space"; Scheduler allows 1-64 characters of 0-9, a-z, A-Z, "-", "_" and "."',
      ]);
    });

    it('fails naming the file when the entry exports no `job`, or cannot be parsed', () => {
      const { stack, reports } = teamStack();
      const noJob = moduleFile('no-job.ts', 'export const jobs = 1;\nexport function helper(): void {}\n');
      const broken = moduleFile('broken.ts', 'export const job = ;\n');
      const error = thrown(
        () =>
          new PacedJobs(stack, 'Jobs', {
            jobs: {
              'fake-job': fakeJob(reports, { entry: noJob }),
              'usage-report': fakeJob(reports, { entry: broken }),
            },
          }),
        InvalidPropsError,
      );
      expect(error.problems).toEqual([
        `jobs.fake-job.entry: "${noJob}" exports no \`job\` (it exports helper, jobs): a job's module exports \`export const job = defineJob({ ... })\``,
        `jobs.usage-report.entry: "${broken}" cannot be parsed: Unexpected ";" (line 1)`,
      ]);
    });

    it('refuses a second PacedJobs in one stack: the outputs the tools read take fixed names', () => {
      const { stack, reports } = teamStack();
      new PacedJobs(stack, 'Jobs', { jobs: { 'fake-job': fakeJob(reports) } });
      const error = thrown(
        () => new PacedJobs(stack, 'MoreJobs', { jobs: { 'usage-report': fakeJob(reports) } }),
        InvalidPropsError,
      );
      expect(error.message).toBe(
        'Invalid props for PacedJobs TeamStack/MoreJobs:\n' +
          "  - one PacedJobs per stack: TeamStack/Jobs already holds this stack's jobs (the stack outputs the tools read take fixed names); add the jobs there, or use another stack",
      );
      expect(stack.node.tryFindChild('MoreJobs')).toBeUndefined();
    });
  });
});

describe('Function: jobEntryProblem', () => {
  it('accepts a module exporting `job`, by name or re-exported by name', () => {
    expect(jobEntryProblem(FAKE_JOB)).toBeUndefined();
    const reexport = moduleFile(
      'reexport.ts',
      `export { job } from ${JSON.stringify(FAKE_JOB.replace(/\.ts$/, ''))};\n`,
    );
    expect(jobEntryProblem(reexport)).toBeUndefined();
  });

  it('accepts a CommonJS module that assigns exports.job (compiled TypeScript), and refuses one that does not', () => {
    expect(
      jobEntryProblem(
        moduleFile('compiled.js', '"use strict";\nexports.job = void 0;\nexports.job = { name: "x" };\n'),
      ),
    ).toBeUndefined();
    const other = moduleFile('other.js', 'module.exports.jobs = 1;\n');
    expect(jobEntryProblem(other)).toBe(
      `"${other}" exports no \`job\`: a job's module exports \`export const job = defineJob({ ... })\``,
    );
  });

  it('refuses a folder: the entry is the module file itself', () => {
    expect(jobEntryProblem(scratch)).toBe(
      `"${scratch}" is not a file: give the path of the job's module, which exports \`job = defineJob(...)\``,
    );
  });
});

describe('Type: PacedJobsProps', () => {
  it("takes the issue's example as written", () => {
    const { stack, reports } = teamStack();
    const props: PacedJobsProps = { jobs: { 'fake-job': fakeJob(reports) } };
    expect(() => new PacedJobs(stack, 'Jobs', props)).not.toThrow();
    expect(logicalId(reports)).toMatch(/^Reports/);
  });
});
