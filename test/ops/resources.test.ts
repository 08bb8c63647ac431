import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { type DescribeStacksCommand, GetTemplateCommand, type Output } from '@aws-sdk/client-cloudformation';
import { jobOutputName, JobOutput, type JobOutputKind, StackOutput } from '../../lib/outputs';
import { ResourceDiscoveryError, UsageError } from '../../ops/errors';
import {
  CloudFormationSource,
  jobEntriesFromTemplate,
  jobNamesFromOutputs,
  LocalEndpointsSource,
  resourcesFromOutputs,
} from '../../ops/resources';

/** The outputs lib/stack.ts gives a job: every JobOutput kind, described `<job>: <Kind>`. */
function jobOutputs(job: string): Output[] {
  return (Object.keys(JobOutput) as JobOutputKind[]).map((kind) => ({
    OutputKey: jobOutputName(job, kind),
    OutputValue: `${job}-${kind}`,
    Description: `${job}: ${kind}`,
  }));
}

const tableOutputs: Output[] = [
  { OutputKey: StackOutput.IdempotencyTableName, OutputValue: 'idem' },
  { OutputKey: StackOutput.LedgerTableName, OutputValue: 'ledger' },
];

describe('Function: jobNamesFromOutputs', () => {
  it('finds each job once from its described outputs', () => {
    expect(jobNamesFromOutputs([...jobOutputs('payments-job'), ...jobOutputs('uploads-job'), ...tableOutputs])).toEqual(
      ['payments-job', 'uploads-job'],
    );
  });

  it('ignores a description whose output key does not match it', () => {
    expect(jobNamesFromOutputs([{ OutputKey: 'Something', OutputValue: 'x', Description: 'ghost: QueueUrl' }])).toEqual(
      [],
    );
  });
});

describe('Function: resourcesFromOutputs', () => {
  it('throws naming every missing output', () => {
    const outputs = Object.fromEntries(
      jobOutputs('alpha')
        .filter((o) => !o.OutputKey!.endsWith('DlqArn'))
        .map((o) => [o.OutputKey!, o.OutputValue]),
    );

    expect(() => resourcesFromOutputs('stack PacedJobs-x', ['alpha'], outputs)).toThrow(
      new ResourceDiscoveryError(
        'stack PacedJobs-x lacks the outputs IdempotencyTableName, LedgerTableName, AlphaDlqArn',
        'stack PacedJobs-x',
      ),
    );
  });

  it('names the admission outputs a stack from before admission lacks', () => {
    const before = new Set<JobOutputKind>(['AdmissionQueueUrl', 'AdmissionQueueArn', 'AdmissionMappingUuid']);
    const outputs = Object.fromEntries(
      [
        ...jobOutputs('alpha').filter((o) => !before.has(o.Description!.slice('alpha: '.length) as JobOutputKind)),
        ...tableOutputs,
      ].map((o) => [o.OutputKey!, o.OutputValue]),
    );

    expect(() => resourcesFromOutputs('stack PacedJobs-x', ['alpha'], outputs)).toThrow(
      new ResourceDiscoveryError(
        'stack PacedJobs-x lacks the outputs AlphaAdmissionQueueUrl, AlphaAdmissionQueueArn, AlphaAdmissionMappingUuid',
        'stack PacedJobs-x',
      ),
    );
  });

  it('names the schedule group output a stack from before its schedule group lacks', () => {
    const outputs = Object.fromEntries(
      [...jobOutputs('alpha').filter((o) => o.Description !== 'alpha: ScheduleGroupName'), ...tableOutputs].map((o) => [
        o.OutputKey!,
        o.OutputValue,
      ]),
    );

    expect(() => resourcesFromOutputs('stack PacedJobs-x', ['alpha'], outputs)).toThrow(
      new ResourceDiscoveryError('stack PacedJobs-x lacks the outputs AlphaScheduleGroupName', 'stack PacedJobs-x'),
    );
  });

  it('reads the limiter table when the stack has its output, and loads without it', () => {
    const outputs = Object.fromEntries(
      [...jobOutputs('alpha'), ...tableOutputs].map((o) => [o.OutputKey!, o.OutputValue]),
    );

    expect(
      resourcesFromOutputs('stack PacedJobs-x', ['alpha'], { ...outputs, [StackOutput.LimiterTableName]: 'limiter' })
        .tables,
    ).toEqual({
      idempotency: 'idem',
      ledger: 'ledger',
      limiter: 'limiter',
    });
    // Only the limits commands need it; they name the missing output themselves.
    expect(resourcesFromOutputs('stack PacedJobs-x', ['alpha'], outputs).tables).toEqual({
      idempotency: 'idem',
      ledger: 'ledger',
    });
  });

  it('throws when there is no job', () => {
    expect(() => resourcesFromOutputs('f.json', [], {})).toThrow('f.json describes no jobs');
  });
});

/** A job's function as the construct synthesizes it: its JOB_NAME and the Metadata naming its code's entry. */
const jobFunction = (job: string, entry?: string) => ({
  Type: 'AWS::Lambda::Function',
  Properties: { Environment: { Variables: { JOB_NAME: job, JOB_SETTINGS: '{}' } } },
  Metadata: {
    'aws:cdk:path': `TeamStack/Jobs/${job}`,
    ...(entry !== undefined ? { 'paced-jobs:job-entry': entry } : {}),
  },
});

describe('Function: jobEntriesFromTemplate', () => {
  it("maps each job to the entry its functions' Metadata names, ignoring other resources", () => {
    const template = {
      Resources: {
        UsageReportProducer: jobFunction('usage-report', 'jobs/usage-report/index.ts'),
        UsageReportConsumer: jobFunction('usage-report', 'jobs/usage-report/index.ts'),
        LegacyProducer: jobFunction('legacy'),
        Reports: { Type: 'AWS::DynamoDB::GlobalTable', Metadata: { 'paced-jobs:job-entry': 'not/a/function.ts' } },
        Other: {
          Type: 'AWS::Lambda::Function',
          Metadata: { 'paced-jobs:job-entry': 'no/job/name.ts' },
          Properties: {},
        },
      },
    };
    expect(jobEntriesFromTemplate('stack TeamStack', template)).toEqual({
      'usage-report': 'jobs/usage-report/index.ts',
    });
    expect(jobEntriesFromTemplate('stack TeamStack', {})).toEqual({});
  });

  it("throws when a job's two functions name different entries", () => {
    const template = {
      Resources: { A: jobFunction('usage-report', 'jobs/a.ts'), B: jobFunction('usage-report', 'jobs/b.ts') },
    };
    expect(() => jobEntriesFromTemplate('stack TeamStack', template)).toThrow(
      new ResourceDiscoveryError(
        'stack TeamStack: the functions of job usage-report name two entries, jobs/a.ts and jobs/b.ts (B)',
        'stack TeamStack',
      ),
    );
  });
});

describe('Class: CloudFormationSource, for a stack named by --stack', () => {
  it("reads the named stack's outputs in the SDK's region, with no environment, account or protection", async () => {
    const send = jest.fn().mockResolvedValue({
      Stacks: [{ StackName: 'TeamStack', Outputs: [...jobOutputs('usage-report'), ...tableOutputs] }],
    });
    const identity = jest
      .fn()
      .mockResolvedValue({ account: '111122223333', arn: 'arn:aws:iam::111122223333:user/ops' });

    const source = new CloudFormationSource({
      stackName: 'TeamStack',
      client: { send },
      sdkRegion: async () => 'eu-central-1',
      identity,
    });
    const resources = await source.load();

    expect(source.declaredJobs()).toBeUndefined();
    expect((send.mock.calls[0][0] as DescribeStacksCommand).input).toEqual({ StackName: 'TeamStack' });
    expect(resources).toMatchObject({
      source: 'cloudformation',
      stackName: 'TeamStack',
      region: 'eu-central-1',
      clients: { region: 'eu-central-1' },
    });
    expect(resources).not.toHaveProperty('environment');
    expect(resources).not.toHaveProperty('protected');
    expect(resources.jobs.map((j) => j.job)).toEqual(['usage-report']);
    // The account is asked of STS only when a change names it.
    expect(identity).not.toHaveBeenCalled();
    await expect(resources.callerAccount?.()).resolves.toBe('111122223333');
  });

  it('refuses to guess a region', async () => {
    const send = jest.fn();
    await expect(
      new CloudFormationSource({ stackName: 'TeamStack', client: { send }, sdkRegion: async () => undefined }).load(),
    ).rejects.toThrow(
      new UsageError('no region to find stack TeamStack in: set AWS_REGION (or a region in your AWS profile)'),
    );
    expect(send).not.toHaveBeenCalled();
  });

  it("reads each job's entry from the deployed template when asked", async () => {
    const template = { Resources: { P: jobFunction('usage-report', 'jobs/usage-report/index.ts') } };
    const send = jest.fn(async (command: unknown) =>
      command instanceof GetTemplateCommand
        ? { TemplateBody: JSON.stringify(template) }
        : { Stacks: [{ StackName: 'TeamStack', Outputs: [...jobOutputs('usage-report'), ...tableOutputs] }] },
    );
    const resources = await new CloudFormationSource({
      stackName: 'TeamStack',
      client: { send },
      sdkRegion: async () => 'eu-central-1',
    }).load();
    expect(send).toHaveBeenCalledTimes(1);

    await expect(resources.jobEntries?.()).resolves.toEqual({ 'usage-report': 'jobs/usage-report/index.ts' });
    expect((send.mock.calls[1][0] as GetTemplateCommand).input).toEqual({
      StackName: 'TeamStack',
      TemplateStage: 'Original',
    });
  });

  it('needs an environment or a stack name', () => {
    expect(() => new CloudFormationSource({ stackName: '' })).toThrow(
      new UsageError("a deployed stack needs --env <name> (this repository's PacedJobs-<name>) or --stack <name>"),
    );
  });
});

describe('Class: CloudFormationSource', () => {
  describe('Method: load', () => {
    it('reads the outputs of PacedJobs-<env>', async () => {
      const send = jest.fn().mockResolvedValue({
        Stacks: [
          { StackName: 'PacedJobs-prod', Outputs: [...jobOutputs('beta'), ...jobOutputs('alpha'), ...tableOutputs] },
        ],
      });

      const resources = await new CloudFormationSource({
        environment: 'prod',
        client: { send },
        sdkRegion: async () => undefined,
      }).load();

      expect((send.mock.calls[0][0] as DescribeStacksCommand).input).toEqual({ StackName: 'PacedJobs-prod' });
      expect(resources).toMatchObject({
        source: 'cloudformation',
        stackName: 'PacedJobs-prod',
        tables: { idempotency: 'idem', ledger: 'ledger' },
      });
      expect(resources.jobs.map((j) => j.job)).toEqual(['alpha', 'beta']);
      expect(resources.jobs[0]).toEqual({
        job: 'alpha',
        queueUrl: 'alpha-QueueUrl',
        queueArn: 'alpha-QueueArn',
        dlqUrl: 'alpha-DlqUrl',
        dlqArn: 'alpha-DlqArn',
        producerFunctionName: 'alpha-ProducerFunctionName',
        consumerFunctionName: 'alpha-ConsumerFunctionName',
        scheduleName: 'alpha-ScheduleName',
        scheduleGroupName: 'alpha-ScheduleGroupName',
        eventSourceMappingUuid: 'alpha-EventSourceMappingUuid',
        admissionQueueUrl: 'alpha-AdmissionQueueUrl',
        admissionQueueArn: 'alpha-AdmissionQueueArn',
        admissionMappingUuid: 'alpha-AdmissionMappingUuid',
      });
    });

    it('throws with a hint when the stack cannot be read', async () => {
      const send = jest.fn().mockRejectedValue(new Error('Stack with id PacedJobs-prod does not exist'));

      await expect(
        new CloudFormationSource({ environment: 'prod', client: { send }, sdkRegion: async () => undefined }).load(),
      ).rejects.toThrow(
        'cannot read stack PacedJobs-prod in eu-west-1: Stack with id PacedJobs-prod does not exist (is it deployed in this account and region? use --local for the local stack)',
      );
    });
  });
});

describe('Class: LocalEndpointsSource', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ops-resources-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  describe('Method: load', () => {
    it('throws with a hint when the file is missing', async () => {
      const file = join(dir, 'missing.json');

      await expect(new LocalEndpointsSource(file).load()).rejects.toThrow(
        `cannot read ${file}: ENOENT: no such file or directory, open '${file}' (start the local stack with \`npm start -- --serve\` first)`,
      );
    });

    it('throws naming what the file lacks', async () => {
      const file = join(dir, 'partial.json');
      writeFileSync(
        file,
        JSON.stringify({
          stackName: 'PacedJobs-dev',
          region: 'us-east-1',
          credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
          endpoints: { sqs: 'http://127.0.0.1:1' },
          jobs: {},
          outputs: {},
        }),
      );

      await expect(new LocalEndpointsSource(file).load()).rejects.toThrow(
        `${file} is not a local endpoints file: endpoints.dynamodb: Invalid input: expected string, received undefined; endpoints.lambda: Invalid input: expected string, received undefined; endpoints.scheduler: Invalid input: expected string, received undefined`,
      );
    });

    it('points every client at the local endpoints', async () => {
      const file = join(dir, 'ok.json');
      const outputs = Object.fromEntries(
        [...jobOutputs('alpha'), ...tableOutputs].map((o) => [o.OutputKey!, o.OutputValue!]),
      );
      const endpoints = {
        dynamodb: 'http://127.0.0.1:1',
        sqs: 'http://127.0.0.1:2',
        lambda: 'http://127.0.0.1:3',
        scheduler: 'http://127.0.0.1:4',
        s3: 'http://127.0.0.1:5',
      };
      writeFileSync(
        file,
        JSON.stringify({
          stackName: 'PacedJobs-dev',
          region: 'eu-west-1',
          credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
          endpoints,
          jobs: { alpha: {} },
          outputs,
        }),
      );

      const resources = await new LocalEndpointsSource(file).load();

      expect(resources.clients).toEqual({
        region: 'eu-west-1',
        credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
        endpoints: {
          dynamodb: 'http://127.0.0.1:1',
          sqs: 'http://127.0.0.1:2',
          lambda: 'http://127.0.0.1:3',
          scheduler: 'http://127.0.0.1:4',
          s3: 'http://127.0.0.1:5',
        },
      });
      expect(resources.jobs.map((j) => j.job)).toEqual(['alpha']);
    });

    it("reads each job's entry from the template the local stack runs: the one it names, else cdk.out beside .local", async () => {
      const app = mkdtempSync(join(dir, 'app-'));
      const outputs = Object.fromEntries(
        [...jobOutputs('alpha'), ...tableOutputs].map((o) => [o.OutputKey!, o.OutputValue!]),
      );
      const endpoints = {
        dynamodb: 'http://127.0.0.1:1',
        sqs: 'http://127.0.0.1:2',
        lambda: 'http://127.0.0.1:3',
        scheduler: 'http://127.0.0.1:4',
      };
      const doc = {
        stackName: 'TeamStack',
        region: 'eu-west-1',
        credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
        endpoints,
        jobs: { alpha: {} },
        outputs,
      };
      const write = (path: string, value: unknown) => {
        mkdirSync(dirname(path), { recursive: true });
        writeFileSync(path, JSON.stringify(value));
      };
      write(join(app, '.local', 'endpoints.json'), doc);
      write(join(app, 'cdk.out', 'TeamStack.template.json'), {
        Resources: { P: jobFunction('alpha', 'jobs/alpha/index.ts') },
      });
      const named = join(app, 'synth', 'TeamStack.template.json');
      write(named, { Resources: { P: jobFunction('alpha', 'jobs/alpha/v2.ts') } });
      write(join(app, 'named.json'), { ...doc, templateFile: named });

      const beside = await new LocalEndpointsSource(join(app, '.local', 'endpoints.json')).load();
      await expect(beside.jobEntries?.()).resolves.toEqual({ alpha: 'jobs/alpha/index.ts' });
      const fromFile = await new LocalEndpointsSource(join(app, 'named.json')).load();
      await expect(fromFile.jobEntries?.()).resolves.toEqual({ alpha: 'jobs/alpha/v2.ts' });
      rmSync(join(app, 'cdk.out'), { recursive: true });
      await expect(beside.jobEntries?.()).rejects.toThrow(
        `cannot read the local stack's template ${join(app, '.local', '..', 'cdk.out', 'TeamStack.template.json')}: ENOENT`,
      );
    });
  });
});
