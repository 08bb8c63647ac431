import { LambdaClient } from '@aws-sdk/client-lambda';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, resetClients } from '../../../lambda/adapters/clients';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { logger, metrics } from '../../../lambda/adapters/observability';
import { PublishError, SqsPublisher, type Publisher } from '../../../lambda/adapters/sqsPublisher';
import { parseMessage } from '../../../lambda/core/message';
import {
  ContinuationError,
  createProducer,
  handler,
  ProducerEventError,
  producerOptionsFromEnv,
  selfInvoke,
  type ContinuationEvent,
  type ProducerOptions,
} from '../../../lambda/handlers/producer';
import { fakeJobCalls, job as fakeJob } from '../../fixtures/jobs/fake-job';
import { startLocalAws, type LocalAws } from '../../support/aws';
import { lambdaContext } from '../../support/lambdaEvents';
import { createLedgerTable, createQueue, drainQueue, fakeSettings } from './harness';

const LEDGER_TABLE = 'ledger';
const NOW = new Date('2026-11-29T01:00:03.000Z');
// 02:00 in Berlin on the 29th; the fake settings cover the previous day.
const SCHEDULED = '2026-11-29T01:00:00Z';
const BATCH = 'fake-job:2026-11-28:20261129T010000Z';

let aws: LocalAws;
let queueUrl: string;
let continuations: ContinuationEvent[];

function producer(items: number, overrides: Partial<ProducerOptions> = {}) {
  return createProducer({
    job: fakeJob,
    jobDeps: { items },
    settings: fakeSettings(),
    queueUrl,
    maxMessageBytes: 4096,
    ledger: new DynamoLedger({ tableName: LEDGER_TABLE, now: () => NOW }),
    publisher: new SqsPublisher({ sleep: async () => undefined }),
    continueRun: async (event) => {
      continuations.push(event);
    },
    now: () => NOW,
    ...overrides,
  });
}

async function batchItem(batchId: string) {
  const { Item } = await documentClient().send(new GetCommand({ TableName: LEDGER_TABLE, Key: { pk: 'BATCH#fake-job', sk: batchId } }));
  return Item;
}

async function publishedOperationIds(): Promise<string[]> {
  return (await drainQueue(queueUrl)).map((m) => JSON.parse(m.Body as string).operationId).sort();
}

describe('Function: createProducer', () => {
  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    await createLedgerTable(LEDGER_TABLE);
    queueUrl = await createQueue('fake-job-producer');
    logger.setLogLevel('SILENT');
  });

  afterAll(async () => {
    resetClients();
    await aws.stop();
  });

  beforeEach(async () => {
    fakeJobCalls.reset();
    continuations = [];
    jest.restoreAllMocks();
    jest.spyOn(metrics, 'addMetric').mockImplementation(() => metrics);
    await drainQueue(queueUrl);
  });

  describe('Method: handler', () => {
    it('publishes one validated message per operation and records the batch', async () => {
      const summary = await producer(3)({ scheduledTime: SCHEDULED }, lambdaContext());

      expect(summary).toEqual({ batchId: BATCH, businessDate: '2026-11-28', pages: 1, discovered: 3, published: 3, continued: false, stoppedAtPageLimit: false });
      const bodies = (await drainQueue(queueUrl)).map((m) => m.Body as string);
      expect(bodies).toHaveLength(3);
      const messages = bodies.map((b) => parseMessage(b, 4096)).map((p) => (p.ok ? p.message : p.reasons));
      expect(messages).toContainEqual({
        version: 1,
        jobType: 'fake-job',
        operationId: 'fake:item-0:2026-11-28',
        batchId: BATCH,
        businessDate: '2026-11-28',
        resource: { id: 'item-0' },
        enqueuedAt: NOW.toISOString(),
        firstEnqueuedAt: NOW.toISOString(),
      });
      expect(await batchItem(BATCH)).toMatchObject({
        job: 'fake-job',
        discovered: 3,
        published: 3,
        businessDate: '2026-11-28',
        scheduledTime: SCHEDULED,
        startedAt: NOW.toISOString(),
        finishedAt: NOW.toISOString(),
      });
      expect(metrics.addMetric).toHaveBeenCalledWith('Published', 'Count', 3);
    });

    it('walks every page from the cursor while time remains', async () => {
      const summary = await producer(55)({ scheduledTime: SCHEDULED, batchId: 'fake-job:2026-11-28:pages' }, lambdaContext());

      expect(summary).toMatchObject({ pages: 3, discovered: 55, published: 55, continued: false });
      expect(fakeJobCalls.discover).toEqual([
        { businessDate: '2026-11-28', cursor: undefined, pageSize: 25 },
        { businessDate: '2026-11-28', cursor: '25', pageSize: 25 },
        { businessDate: '2026-11-28', cursor: '50', pageSize: 25 },
      ]);
      expect(await publishedOperationIds()).toHaveLength(55);
      expect(continuations).toEqual([]);
    });

    it('continues through a new invocation when the time budget runs low, and the continuation finishes the run', async () => {
      const batchId = 'fake-job:2026-11-28:continued';
      // 100 s at the start; 25 s after the first page, under the 30 s reserve (30% of the budget).
      const remaining = [100_000, 25_000];
      const context = lambdaContext(() => remaining.shift() ?? 25_000);

      const first = await producer(55)({ scheduledTime: SCHEDULED, batchId }, context);

      expect(first).toMatchObject({ pages: 1, discovered: 25, continued: true });
      expect(continuations).toEqual([{ businessDate: '2026-11-28', batchId, cursor: '25', page: 1, scheduledTime: SCHEDULED }]);
      expect(await batchItem(batchId)).not.toHaveProperty('finishedAt');

      const second = await producer(55)(continuations[0], lambdaContext());
      expect(second).toMatchObject({ batchId, businessDate: '2026-11-28', pages: 2, discovered: 30, continued: false });
      expect(await publishedOperationIds()).toHaveLength(55);
      expect(await batchItem(batchId)).toMatchObject({ discovered: 55, published: 55, startedAt: NOW.toISOString(), finishedAt: NOW.toISOString() });
    });

    it('yields the same batch and operation IDs when the same scheduled run is repeated', async () => {
      const a = await producer(12)({ scheduledTime: SCHEDULED }, lambdaContext());
      const firstIds = await publishedOperationIds();
      const b = await producer(12)({ scheduledTime: SCHEDULED }, lambdaContext());
      expect(b.batchId).toBe(a.batchId);
      expect(await publishedOperationIds()).toEqual(firstIds);
      expect(firstIds[0]).toBe('fake:item-0:2026-11-28');
    });

    it('honours an explicit business date, and names a run without a scheduled time as a new manual batch', async () => {
      const summary = await producer(1)({ businessDate: '2026-10-01' }, lambdaContext());
      expect(summary.businessDate).toBe('2026-10-01');
      expect(summary.batchId).toMatch(/^fake-job:2026-10-01:manual-[0-9a-f]{8}$/);
      expect(await publishedOperationIds()).toEqual(['fake:item-0:2026-10-01']);
    });

    it('derives the business date from the current time when the event is empty', async () => {
      const summary = await producer(0)(undefined, lambdaContext());
      expect(summary).toMatchObject({ businessDate: '2026-11-28', pages: 1, discovered: 0, published: 0 });
    });

    it('stops at maxPagesPerRun with a warning and no continuation', async () => {
      const warn = jest.spyOn(logger, 'warn');
      const handle = producer(100, { settings: fakeSettings({ pageSize: 10, maxPagesPerRun: 2 }) });
      const summary = await handle({ scheduledTime: SCHEDULED, batchId: 'fake-job:2026-11-28:capped' }, lambdaContext());

      expect(summary).toMatchObject({ pages: 2, published: 20, continued: false, stoppedAtPageLimit: true });
      expect(continuations).toEqual([]);
      expect(warn).toHaveBeenCalledWith('stopped at maxPagesPerRun with work remaining; raise it or the page size, or catch up', {
        maxPagesPerRun: 2,
        cursor: '20',
      });
    });

    it('rejects an invalid event, naming every problem', async () => {
      await expect(producer(1)({ businessDate: '2026-02-30', page: -1 }, lambdaContext())).rejects.toThrow(
        new ProducerEventError('invalid producer event: businessDate: must be a real calendar date; page: Too small: expected number to be >=0', []),
      );
    });

    it('records what was published, then fails the invocation, when publishing fails', async () => {
      const failing: Publisher = {
        publish: async (url) => {
          throw new PublishError('failed to publish 1 of 3 messages', url, { 'fake:item-2:2026-11-28': 'InternalError: boom' }, 2);
        },
      };
      const batchId = 'fake-job:2026-11-28:failing';
      await expect(producer(3, { publisher: failing })({ scheduledTime: SCHEDULED, batchId }, lambdaContext())).rejects.toThrow(
        'failed to publish 1 of 3 messages',
      );
      expect(await batchItem(batchId)).toMatchObject({ discovered: 3, published: 2 });
      expect(await batchItem(batchId)).not.toHaveProperty('finishedAt');
    });
  });
});

describe('Function: selfInvoke', () => {
  const event: ContinuationEvent = { businessDate: '2026-11-28', batchId: BATCH, cursor: '25', page: 1 };

  afterEach(() => {
    jest.restoreAllMocks();
    resetClients();
  });

  it('invokes this function asynchronously with the continuation event', async () => {
    const send = jest.spyOn(LambdaClient.prototype, 'send').mockImplementation(async () => ({ StatusCode: 202 }));
    await selfInvoke('fake-job-producer')(event);
    const input = (send.mock.calls[0][0] as { input: { FunctionName: string; InvocationType: string; Payload: Uint8Array } }).input;
    expect(input.FunctionName).toBe('fake-job-producer');
    expect(input.InvocationType).toBe('Event');
    expect(JSON.parse(Buffer.from(input.Payload).toString('utf8'))).toEqual(event);
  });

  it('throws when Lambda does not accept the invocation', async () => {
    jest.spyOn(LambdaClient.prototype, 'send').mockImplementation(async () => ({ StatusCode: 500 }));
    await expect(selfInvoke('fake-job-producer')(event)).rejects.toThrow(
      new ContinuationError(`continuation of ${BATCH} was not accepted (status 500)`, event),
    );
  });

  it('throws when the function name is unknown', async () => {
    await expect(selfInvoke('')(event)).rejects.toThrow('cannot continue the run: AWS_LAMBDA_FUNCTION_NAME is not set');
  });
});

describe('Function: handler', () => {
  it('fails the invocation with the configuration problem when the job is not configured', async () => {
    const saved = process.env.JOB_NAME;
    delete process.env.JOB_NAME;
    try {
      await expect(handler({}, lambdaContext())).rejects.toThrow('environment variable JOB_NAME is not set');
    } finally {
      if (saved !== undefined) process.env.JOB_NAME = saved;
    }
  });
});

describe('Function: producerOptionsFromEnv', () => {
  it('builds the producer options from the environment and the job', () => {
    const env = { JOB_NAME: 'fake-job', JOB_SETTINGS: JSON.stringify(fakeSettings({ settings: { items: 4 } })), QUEUE_URL: 'http://queue', LEDGER_TABLE_NAME: 'ledger', MAX_MESSAGE_BYTES: '2048' };
    const options = producerOptionsFromEnv(env, () => ({ job: fakeJob }));
    expect(options).toMatchObject({ job: fakeJob, jobDeps: { items: 4 }, queueUrl: 'http://queue', maxMessageBytes: 2048, settings: { pageSize: 25 } });
  });

  it('names the missing queue', () => {
    const env = { JOB_NAME: 'fake-job', JOB_SETTINGS: JSON.stringify(fakeSettings()), LEDGER_TABLE_NAME: 'ledger' };
    expect(() => producerOptionsFromEnv(env, () => ({ job: fakeJob }))).toThrow('environment variable QUEUE_URL is not set');
  });
});
