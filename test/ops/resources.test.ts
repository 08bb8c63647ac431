import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DescribeStacksCommand, type Output } from '@aws-sdk/client-cloudformation';
import { jobOutputName, JobOutput, type JobOutputKind, StackOutput } from '../../lib/outputs';
import { ResourceDiscoveryError } from '../../ops/errors';
import { CloudFormationSource, jobNamesFromOutputs, LocalEndpointsSource, resourcesFromOutputs } from '../../ops/resources';

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
    expect(jobNamesFromOutputs([...jobOutputs('payment-reconciliation'), ...jobOutputs('stale-upload-cleanup'), ...tableOutputs])).toEqual([
      'payment-reconciliation',
      'stale-upload-cleanup',
    ]);
  });

  it('ignores a description whose output key does not match it', () => {
    expect(jobNamesFromOutputs([{ OutputKey: 'Something', OutputValue: 'x', Description: 'ghost: QueueUrl' }])).toEqual([]);
  });
});

describe('Function: resourcesFromOutputs', () => {
  it('throws naming every missing output', () => {
    const outputs = Object.fromEntries(jobOutputs('alpha').filter((o) => !o.OutputKey!.endsWith('DlqArn')).map((o) => [o.OutputKey!, o.OutputValue]));

    expect(() => resourcesFromOutputs('stack PacedJobs-x', ['alpha'], outputs)).toThrow(
      new ResourceDiscoveryError('stack PacedJobs-x lacks the outputs IdempotencyTableName, LedgerTableName, AlphaDlqArn', 'stack PacedJobs-x'),
    );
  });

  it('names the admission outputs a stack from before admission lacks', () => {
    const before = new Set<JobOutputKind>(['AdmissionQueueUrl', 'AdmissionQueueArn', 'AdmissionMappingUuid']);
    const outputs = Object.fromEntries(
      [...jobOutputs('alpha').filter((o) => !before.has(o.Description!.slice('alpha: '.length) as JobOutputKind)), ...tableOutputs].map((o) => [o.OutputKey!, o.OutputValue]),
    );

    expect(() => resourcesFromOutputs('stack PacedJobs-x', ['alpha'], outputs)).toThrow(
      new ResourceDiscoveryError('stack PacedJobs-x lacks the outputs AlphaAdmissionQueueUrl, AlphaAdmissionQueueArn, AlphaAdmissionMappingUuid', 'stack PacedJobs-x'),
    );
  });

  it('names the schedule group output a stack from before its schedule group lacks', () => {
    const outputs = Object.fromEntries(
      [...jobOutputs('alpha').filter((o) => o.Description !== 'alpha: ScheduleGroupName'), ...tableOutputs].map((o) => [o.OutputKey!, o.OutputValue]),
    );

    expect(() => resourcesFromOutputs('stack PacedJobs-x', ['alpha'], outputs)).toThrow(
      new ResourceDiscoveryError('stack PacedJobs-x lacks the outputs AlphaScheduleGroupName', 'stack PacedJobs-x'),
    );
  });

  it('reads the limiter table when the stack has its output, and loads without it', () => {
    const outputs = Object.fromEntries([...jobOutputs('alpha'), ...tableOutputs].map((o) => [o.OutputKey!, o.OutputValue]));

    expect(resourcesFromOutputs('stack PacedJobs-x', ['alpha'], { ...outputs, [StackOutput.LimiterTableName]: 'limiter' }).tables).toEqual({
      idempotency: 'idem',
      ledger: 'ledger',
      limiter: 'limiter',
    });
    // Only the limits commands need it; they name the missing output themselves.
    expect(resourcesFromOutputs('stack PacedJobs-x', ['alpha'], outputs).tables).toEqual({ idempotency: 'idem', ledger: 'ledger' });
  });

  it('throws when there is no job', () => {
    expect(() => resourcesFromOutputs('f.json', [], {})).toThrow('f.json describes no jobs');
  });
});

describe('Class: CloudFormationSource', () => {
  describe('Method: load', () => {
    it('reads the outputs of PacedJobs-<env>', async () => {
      const send = jest.fn().mockResolvedValue({ Stacks: [{ StackName: 'PacedJobs-prod', Outputs: [...jobOutputs('beta'), ...jobOutputs('alpha'), ...tableOutputs] }] });

      const resources = await new CloudFormationSource({ environment: 'prod', client: { send }, sdkRegion: async () => undefined }).load();

      expect((send.mock.calls[0][0] as DescribeStacksCommand).input).toEqual({ StackName: 'PacedJobs-prod' });
      expect(resources).toMatchObject({ source: 'cloudformation', stackName: 'PacedJobs-prod', tables: { idempotency: 'idem', ledger: 'ledger' } });
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

      await expect(new CloudFormationSource({ environment: 'prod', client: { send }, sdkRegion: async () => undefined }).load()).rejects.toThrow(
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
      writeFileSync(file, JSON.stringify({ stackName: 'PacedJobs-dev', region: 'us-east-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, endpoints: { sqs: 'http://127.0.0.1:1' }, jobs: {}, outputs: {} }));

      await expect(new LocalEndpointsSource(file).load()).rejects.toThrow(
        `${file} is not a local endpoints file: endpoints.dynamodb: Invalid input: expected string, received undefined; endpoints.lambda: Invalid input: expected string, received undefined; endpoints.scheduler: Invalid input: expected string, received undefined`,
      );
    });

    it('points every client at the local endpoints', async () => {
      const file = join(dir, 'ok.json');
      const outputs = Object.fromEntries([...jobOutputs('alpha'), ...tableOutputs].map((o) => [o.OutputKey!, o.OutputValue!]));
      const endpoints = { dynamodb: 'http://127.0.0.1:1', sqs: 'http://127.0.0.1:2', lambda: 'http://127.0.0.1:3', scheduler: 'http://127.0.0.1:4', s3: 'http://127.0.0.1:5' };
      writeFileSync(file, JSON.stringify({ stackName: 'PacedJobs-dev', region: 'eu-west-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, endpoints, jobs: { alpha: {} }, outputs }));

      const resources = await new LocalEndpointsSource(file).load();

      expect(resources.clients).toEqual({
        region: 'eu-west-1',
        credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
        endpoints: { dynamodb: 'http://127.0.0.1:1', sqs: 'http://127.0.0.1:2', lambda: 'http://127.0.0.1:3', scheduler: 'http://127.0.0.1:4' },
      });
      expect(resources.jobs.map((j) => j.job)).toEqual(['alpha']);
    });
  });
});
