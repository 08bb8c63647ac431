import {
  chaosJobResources,
  ChaosError,
  chooseJob,
  dlqOperationOf,
  poisonBodies,
  retimeSettings,
  retimeTemplate,
  templateAdmission,
  templateJobEntries,
  templateJobs,
} from '../../chaos/run';
import type { JobFixture } from '../../local/fixture';
import type { CloudFormationTemplate } from '../../local/template';
import type { JobRuntimeSettings } from '../../lambda/core/constants';
import { parseMessage } from '../../lambda/core/message';
import { MESSAGE_VERSION } from '../../lambda/core/constants';

const fixture = (withDownstream: boolean): JobFixture => ({
  unit: 'widgets',
  defaultCount: 1,
  seed: async () => ({ expectedOperations: [], summary: '' }),
  effects: () => ({ effectsByOperation: new Map(), starts: [], unexpectedEffects: [] }),
  operationKeyOf: (r) => (typeof r.widgetId === 'string' ? r.widgetId : undefined),
  ...(withDownstream ? { downstream: () => ({}) as never } : {}),
});

describe('Function: chooseJob', () => {
  const fixtures: Record<string, JobFixture | undefined> = {
    'job-a': undefined,
    'job-b': fixture(false),
    'job-c': fixture(true),
    'job-d': fixture(true),
  };
  const of = (job: string) => fixtures[job];

  it("defaults to the first job whose fixture offers a fake downstream, in the stack's order", () => {
    expect(chooseJob(['job-a', 'job-b', 'job-c', 'job-d'], of).name).toBe('job-c');
    expect(chooseJob(['job-d', 'job-c'], of).name).toBe('job-d');
  });

  it('defaults to the first job with a fixture when none offers a downstream', () => {
    expect(chooseJob(['job-a', 'job-b'], of)).toEqual({ name: 'job-b', fixture: fixtures['job-b'] });
  });

  it('takes the job named, with or without a downstream', () => {
    expect(chooseJob(['job-a', 'job-b', 'job-c'], of, 'job-b').name).toBe('job-b');
  });

  it('refuses a job without a fixture, naming the file it needs, and a job the stack does not have', () => {
    expect(() => chooseJob(['job-a', 'job-b'], of, 'job-a')).toThrow(
      new ChaosError('job job-a has no local fixture: chaos needs lambda/jobs/job-a/local.ts to seed and see effects'),
    );
    expect(() => chooseJob(['job-a'], of)).toThrow(
      new ChaosError(
        "no job of the stack has a local fixture: chaos needs one, local.ts beside a job's code, to seed and see effects (none of lambda/jobs/job-a/local.ts exists)",
      ),
    );
    expect(() => chooseJob(['job-a', 'job-b'], of, 'job-x')).toThrow(
      new ChaosError('the stack has no job "job-x" (jobs: job-a, job-b)'),
    );
  });

  it("names the fixture file beside the job's entry in a team's app", () => {
    const fileOf = (job: string) => `jobs/${job}/local.ts`;
    expect(() => chooseJob(['job-a', 'job-b'], of, 'job-a', fileOf)).toThrow(
      new ChaosError('job job-a has no local fixture: chaos needs jobs/job-a/local.ts to seed and see effects'),
    );
    expect(() => chooseJob(['job-a'], of, undefined, fileOf)).toThrow(/\(none of jobs\/job-a\/local\.ts exists\)$/);
    expect(() => chooseJob([], of, undefined, fileOf)).toThrow(/\(the stack has no jobs\)$/);
  });
});

const settings = (jobName: string, buckets: Record<string, string> = {}): JobRuntimeSettings =>
  ({
    jobName,
    rateLimit: { startsPerInterval: 80, intervalSeconds: 60, burst: 2 },
    admission: { horizonSeconds: 120 },
    buckets,
    tables: {},
  }) as unknown as JobRuntimeSettings;

/** Two jobs, as the stack lays them out: producer and consumer functions, work and admission queues, a mapping. */
function template(): CloudFormationTemplate {
  const job = (prefix: string, name: string, buckets?: Record<string, string>) => ({
    [`${prefix}Producer`]: {
      Type: 'AWS::Lambda::Function',
      Properties: {
        Timeout: 300,
        Environment: {
          Variables: {
            JOB_NAME: name,
            JOB_SETTINGS: JSON.stringify(settings(name, buckets)),
            ADMISSION_QUEUE_URL: { Ref: `${prefix}AdmissionQueue` },
          },
        },
      },
    },
    [`${prefix}Consumer`]: {
      Type: 'AWS::Lambda::Function',
      Properties: {
        Timeout: 60,
        Environment: {
          Variables: {
            JOB_NAME: name,
            JOB_SETTINGS: JSON.stringify(settings(name, buckets)),
            QUEUE_URL: { Ref: `${prefix}Queue` },
            IDEMPOTENCY_TABLE_NAME: 'idem',
          },
        },
      },
    },
    [`${prefix}Queue`]: { Type: 'AWS::SQS::Queue', Properties: { VisibilityTimeout: 360 } },
    [`${prefix}AdmissionQueue`]: {
      Type: 'AWS::SQS::Queue',
      Properties: { VisibilityTimeout: 360, RedrivePolicy: { deadLetterTargetArn: 'arn', maxReceiveCount: 5 } },
    },
    [`${prefix}Mapping`]: {
      Type: 'AWS::Lambda::EventSourceMapping',
      Properties: { MaximumBatchingWindowInSeconds: 1 },
    },
  });
  return {
    Resources: {
      ...job('A', 'job-a'),
      ...job('B', 'job-b', { files: 'files-dev' }),
      Other: { Type: 'AWS::Lambda::Function', Properties: {} },
    },
  } as unknown as CloudFormationTemplate;
}

describe('Function: templateJobs', () => {
  it("lists the jobs its functions carry, once each, in the template's order", () => {
    expect(templateJobs(template())).toEqual(['job-a', 'job-b']);
  });
});

describe('Function: templateJobEntries', () => {
  it("gives each job its entry from its functions' Metadata, and none for a template without it", () => {
    const t = template() as unknown as { Resources: Record<string, { Metadata?: Record<string, unknown> }> };
    t.Resources.BProducer.Metadata = { 'paced-jobs:job-entry': 'jobs/job-b/index.ts' };
    t.Resources.BConsumer.Metadata = { 'paced-jobs:job-entry': 'jobs/job-b/index.ts' };
    expect(templateJobEntries(t as unknown as CloudFormationTemplate)).toEqual(
      new Map([
        ['job-a', undefined],
        ['job-b', 'jobs/job-b/index.ts'],
      ]),
    );
  });
});

describe('Function: chaosJobResources', () => {
  it("finds the named job's producer, consumer, queues and settings", () => {
    const found = chaosJobResources(template(), 'job-b');
    expect(found.settings.buckets).toEqual({ files: 'files-dev' });
    expect(found.consumer.Properties.Environment.Variables.QUEUE_URL).toEqual({ Ref: 'BQueue' });
    expect(templateAdmission(template(), 'job-b')).toEqual({ visibilityMarginSeconds: 60, maxReceiveCount: 5 });
    expect(() => chaosJobResources(template(), 'job-z')).toThrow(
      new ChaosError(
        'the template has no complete job-z job (producer, consumer with JOB_SETTINGS, their QUEUE_URL and ADMISSION_QUEUE_URL queues)',
      ),
    );
  });
});

describe('Function: retimeTemplate', () => {
  it('retimes the named job only, and drops every batching window', () => {
    const t = retimeTemplate(template(), {
      job: 'job-b',
      consumerTimeoutSeconds: 8,
      admission: { producerTimeoutSeconds: 25, horizonSeconds: 2, visibilitySeconds: 28, maxReceiveCount: 2 },
    });
    const r = t.Resources as Record<string, { Properties: Record<string, any> }>;
    expect([
      r.BConsumer.Properties.Timeout,
      r.BQueue.Properties.VisibilityTimeout,
      r.BProducer.Properties.Timeout,
    ]).toEqual([8, 10, 25]);
    expect(r.BAdmissionQueue.Properties).toEqual({
      VisibilityTimeout: 28,
      RedrivePolicy: { deadLetterTargetArn: 'arn', maxReceiveCount: 2 },
    });
    expect([
      r.AConsumer.Properties.Timeout,
      r.AQueue.Properties.VisibilityTimeout,
      r.AAdmissionQueue.Properties.VisibilityTimeout,
    ]).toEqual([60, 360, 360]);
    expect([
      r.AMapping.Properties.MaximumBatchingWindowInSeconds,
      r.BMapping.Properties.MaximumBatchingWindowInSeconds,
    ]).toEqual([0, 0]);
    // The template handed in is left as it was.
    expect(
      (template().Resources as Record<string, { Properties: Record<string, any> }>).BConsumer.Properties.Timeout,
    ).toBe(60);
  });
});

describe('Function: retimeSettings', () => {
  it('sets the rate per minute and the horizon, keeping the burst', () => {
    const s = retimeSettings(settings('job-a'), { ratePerMinute: 600, horizonSeconds: 2 });
    expect(s.rateLimit).toEqual({ startsPerInterval: 600, intervalSeconds: 60, burst: 2 });
    expect(s.admission).toEqual({ horizonSeconds: 2 });
  });
});

describe('Function: poisonBodies', () => {
  it('are all rejected by the message contract, and name the job where a body names one', () => {
    const bodies = poisonBodies('job-a');
    expect(bodies.map((b) => parseMessage(b, 256 * 1024).ok)).toEqual(bodies.map(() => false));
    expect(bodies.filter((b) => b.includes('"jobType":"job-a"'))).toHaveLength(3);
  });
});

describe('Function: dlqOperationOf', () => {
  const body = (resource: Record<string, string>) =>
    JSON.stringify({
      version: MESSAGE_VERSION,
      jobType: 'job-a',
      operationId: 'op-1',
      batchId: 'b-1',
      businessDate: '2026-01-15',
      resource,
      enqueuedAt: '2026-01-15T00:00:00.000Z',
    });

  it("names the operation by the fixture's key of the message's resource", () => {
    expect(dlqOperationOf(fixture(false), body({ widgetId: 'w-7' }))).toBe('w-7');
  });

  it('names none for a body that is not a message, or a resource the fixture does not know', () => {
    expect(dlqOperationOf(fixture(false), 'not json')).toBeUndefined();
    expect(dlqOperationOf(fixture(false), '{"resource":{"widgetId":"w-7"}}')).toBeUndefined();
    expect(dlqOperationOf(fixture(false), body({ other: 'x' }))).toBeUndefined();
  });
});
