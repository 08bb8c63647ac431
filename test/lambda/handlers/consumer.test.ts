import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { Context, SQSEvent } from 'aws-lambda';
import { documentClient, resetClients } from '../../../lambda/adapters/clients';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { logger, metrics } from '../../../lambda/adapters/observability';
import { SqsPublisher } from '../../../lambda/adapters/sqsPublisher';
import { idempotencyRecordId } from '../../../lambda/core/idempotencyKey';
import type { ApplyResult } from '../../../lambda/core/job';
import type { JobMessage } from '../../../lambda/core/message';
import { consumerOptionsFromEnv, createConsumer, handler, type ConsumerOptions } from '../../../lambda/handlers/consumer';
import { fakeJobCalls, job as fakeJob } from '../../fixtures/jobs/fake-job';
import { startLocalAws, type LocalAws } from '../../support/aws';
import { lambdaContext, sqsEvent, sqsRecord } from '../../support/lambdaEvents';
import { createIdempotencyTable, createLedgerTable, createQueue, drainQueue } from './harness';

const IDEMPOTENCY_TABLE = 'idempotency';
const LEDGER_TABLE = 'ledger';
const BATCH = 'fake-job:2026-11-28:20261129T020000Z';

let aws: LocalAws;
let queueUrl: string;
let dlqUrl: string;
let metricCalls: [string, number][];

/** A valid message for the fake job; `key` makes the operation ID unique per test. */
function body(key: string, behaviour?: string, overrides: Partial<JobMessage> = {}): string {
  return JSON.stringify({
    version: 1,
    jobType: 'fake-job',
    operationId: `fake:${key}:2026-11-28`,
    batchId: BATCH,
    businessDate: '2026-11-28',
    resource: { id: key, ...(behaviour ? { behaviour } : {}) },
    enqueuedAt: '2026-11-29T02:00:00.000Z',
    ...overrides,
  });
}

const NOW = new Date('2026-11-29T02:00:05.000Z');

function consumer(overrides: Partial<ConsumerOptions> = {}) {
  return createConsumer({
    job: fakeJob,
    jobDeps: { items: 0 },
    queueUrl,
    dlqUrl,
    idempotencyTableName: IDEMPOTENCY_TABLE,
    idempotencyTtlSeconds: 30 * 86_400,
    maxMessageBytes: 2048,
    ledger: new DynamoLedger({ tableName: LEDGER_TABLE, now: () => NOW }),
    publisher: new SqsPublisher({ sleep: async () => undefined }),
    now: () => NOW,
    ...overrides,
  });
}

const metricTotal = (name: string) => metricCalls.filter(([n]) => n === name).reduce((sum, [, v]) => sum + v, 0);

async function batchItem(batchId = BATCH) {
  const { Item } = await documentClient().send(new GetCommand({ TableName: LEDGER_TABLE, Key: { pk: 'BATCH#fake-job', sk: batchId } }));
  return Item;
}

describe('Function: createConsumer', () => {
  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    await Promise.all([createIdempotencyTable(IDEMPOTENCY_TABLE), createLedgerTable(LEDGER_TABLE)]);
    [queueUrl, dlqUrl] = await Promise.all([createQueue('fake-job'), createQueue('fake-job-dlq')]);
    logger.setLogLevel('SILENT');
  });

  afterAll(async () => {
    resetClients();
    await aws.stop();
  });

  beforeEach(async () => {
    fakeJobCalls.reset();
    metricCalls = [];
    jest.restoreAllMocks();
    jest.spyOn(metrics, 'addMetric').mockImplementation((name, _unit, value) => {
      metricCalls.push([name, value]);
      return metrics;
    });
    await Promise.all([drainQueue(queueUrl), drainQueue(dlqUrl)]);
  });

  describe('Method: handler (happy path)', () => {
    it('applies every record once, acknowledges them, and counts them', async () => {
      const batchId = 'fake-job:2026-11-28:happy';
      const response = await consumer()(sqsEvent(sqsRecord(body('happy-1', undefined, { batchId })), sqsRecord(body('happy-2', 'already-done', { batchId }))), lambdaContext());

      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply.map((r) => [r.operationId, r.batchId, r.businessDate, r.resource])).toEqual([
        ['fake:happy-1:2026-11-28', batchId, '2026-11-28', { id: 'happy-1' }],
        ['fake:happy-2:2026-11-28', batchId, '2026-11-28', { id: 'happy-2', behaviour: 'already-done' }],
      ]);
      expect(fakeJobCalls.apply[0].remainingTimeMs()).toBe(60_000);
      expect(metricTotal('Applied')).toBe(1);
      expect(metricTotal('AlreadyDone')).toBe(1);
      expect(metricCalls.filter(([n]) => n === 'AgeSinceFirstEnqueue')).toEqual([
        ['AgeSinceFirstEnqueue', 5000],
        ['AgeSinceFirstEnqueue', 5000],
      ]);
      expect(await batchItem(batchId)).toMatchObject({ completed: 2 });
    });

    it('measures the age from firstEnqueuedAt when the message was deferred before', async () => {
      await consumer()(sqsEvent(sqsRecord(body('aged', undefined, { firstEnqueuedAt: '2026-11-29T01:00:05.000Z', attempt: 3 }))), lambdaContext());
      expect(metricCalls).toContainEqual(['AgeSinceFirstEnqueue', 3_600_000]);
    });

    it('writes operationId and batchId on every record log line, and clears them before the next record', async () => {
      const lines: Record<string, unknown>[] = [];
      const capture = (chunk: string | Uint8Array) => {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        return true;
      };
      // Powertools writes info to stdout and warnings to stderr.
      const out = jest.spyOn(process.stdout, 'write').mockImplementation(capture);
      const err = jest.spyOn(process.stderr, 'write').mockImplementation(capture);
      logger.setLogLevel('INFO');
      try {
        await consumer()(sqsEvent(sqsRecord(body('logged')), sqsRecord('not json', { messageId: 'm-bad' })), lambdaContext());
      } finally {
        logger.setLogLevel('SILENT');
        out.mockRestore();
        err.mockRestore();
      }
      const completed = lines.find((l) => l.message === 'operation completed');
      expect(completed).toMatchObject({ operationId: 'fake:logged:2026-11-28', batchId: BATCH, job: 'fake-job', outcome: 'applied' });
      const rejected = lines.find((l) => l.message === 'message rejected and kept for review');
      expect(rejected).toMatchObject({ messageId: 'm-bad', job: 'fake-job' });
      expect(rejected).not.toHaveProperty('operationId');
    });
  });

  describe('Method: handler (duplicates)', () => {
    it('replays a completed operation from dynalite without applying it again, falling back to a read', async () => {
      const persistenceStore = new DynamoDBPersistenceLayer({ tableName: IDEMPOTENCY_TABLE });
      const getRecord = jest.spyOn(persistenceStore, 'getRecord');
      const handle = consumer({ persistenceStore });
      const batchId = 'fake-job:2026-11-28:dupes';

      await handle(sqsEvent(sqsRecord(body('dup', undefined, { batchId }))), lambdaContext());
      expect(getRecord).not.toHaveBeenCalled();
      // A redrive or redelivery: a new SQS message ID, other envelope fields changed, the same operation ID.
      const response = await handle(
        sqsEvent(sqsRecord(body('dup', undefined, { batchId, enqueuedAt: '2026-11-30T00:00:00.000Z', attempt: 1 }))),
        lambdaContext(),
      );

      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply).toHaveLength(1);
      // dynalite returns no item with ConditionalCheckFailed, so Powertools must read the stored record instead.
      expect(getRecord).toHaveBeenCalledTimes(1);
      await expect(getRecord.mock.results[0].value).resolves.toMatchObject({ status: 'COMPLETED', responseData: { outcome: 'applied', detail: { id: 'dup' } } });
      expect(metricTotal('DuplicatesSuppressed')).toBe(1);
      expect(metricTotal('Applied')).toBe(1);
      expect(await batchItem(batchId)).toMatchObject({ completed: 1, duplicates: 1 });
      // The record sits where lambda/core/idempotencyKey.ts says, so operators can find it by operation ID.
      const { Item } = await documentClient().send(
        new GetCommand({ TableName: IDEMPOTENCY_TABLE, Key: { id: idempotencyRecordId('fake-job', 'fake:dup:2026-11-28') } }),
      );
      expect(Item).toMatchObject({ status: 'COMPLETED', data: { outcome: 'applied', detail: { id: 'dup' } } });
      expect(Math.abs(Item?.expiration - (Math.round(Date.now() / 1000) + 30 * 86_400))).toBeLessThanOrEqual(5);
    });

    it('suppresses a duplicate within the same batch', async () => {
      const response = await consumer()(sqsEvent(sqsRecord(body('twin')), sqsRecord(body('twin'))), lambdaContext());
      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply).toHaveLength(1);
      expect(metricTotal('DuplicatesSuppressed')).toBe(1);
    });

    it('reports an operation in progress elsewhere as a batch item failure', async () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let started!: () => void;
      const applying = new Promise<void>((resolve) => (started = resolve));
      const slowJob = {
        ...fakeJob,
        apply: async () => {
          started();
          await gate;
          return { outcome: 'applied' as const };
        },
      };
      const first = consumer({ job: slowJob })(sqsEvent(sqsRecord(body('slow'))), lambdaContext());
      await applying;
      const second = await consumer({ job: slowJob })(sqsEvent(sqsRecord(body('slow'), { messageId: 'm-second' })), lambdaContext());
      release();

      expect(second).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-second' }] });
      expect(await first).toEqual({ batchItemFailures: [] });
      expect(metricTotal('Failed')).toBe(1);
    });
  });

  describe('Method: handler (rejections)', () => {
    it('records every invalid message for review, acknowledges it, and still applies the valid one', async () => {
      const batchId = 'fake-job:2026-11-28:rejects';
      const event = sqsEvent(
        sqsRecord('{not json', { messageId: 'm-json' }),
        sqsRecord(JSON.stringify({ version: 1, jobType: 'fake-job', batchId }), { messageId: 'm-schema' }),
        sqsRecord(body('big', undefined, { batchId, resource: { id: 'big', pad: 'x'.repeat(1000) } }).padEnd(3000, ' '), { messageId: 'm-size' }),
        sqsRecord(body('other', undefined, { batchId, jobType: 'other-job' }), { messageId: 'm-type' }),
        sqsRecord(body('bad-resource', 'explode', { batchId }), { messageId: 'm-resource' }),
        sqsRecord(body('fine', undefined, { batchId }), { messageId: 'm-fine' }),
      );

      const response = await consumer()(event, lambdaContext());

      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual(['fake:fine:2026-11-28']);
      expect(metricTotal('Rejected')).toBe(5);
      const { Items = [] } = await documentClient().send(
        new QueryCommand({ TableName: LEDGER_TABLE, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': 'REJECTED#fake-job' } }),
      );
      const byMessage = Object.fromEntries(Items.map((i) => [i.messageId, i]));
      expect(byMessage['m-json'].reasons).toEqual([expect.stringMatching(/^body is not valid JSON \(/)]);
      expect(byMessage['m-json'].body).toBe('{not json');
      expect(byMessage['m-schema']).toMatchObject({ batchId });
      expect(byMessage['m-schema']).not.toHaveProperty('operationId');
      expect(byMessage['m-schema'].reasons).toEqual(expect.arrayContaining(['operationId: Invalid input: expected string, received undefined']));
      expect(byMessage['m-size'].reasons).toEqual(['body is 3000 bytes, over the 2048-byte cap']);
      expect(byMessage['m-type']).toMatchObject({ reasons: ['jobType: expected "fake-job", got "other-job"'], operationId: 'fake:other:2026-11-28', batchId });
      expect(byMessage['m-resource'].reasons).toEqual([
        expect.stringMatching(/^resource\.behaviour: Invalid option: expected one of /),
      ]);
      expect(byMessage['m-fine']).toBeUndefined();
      expect(byMessage['m-json'].sk).toBe('2026-11-29T02:00:05.000Z#m-json');
      expect(byMessage['m-json'].expiresAt).toBe(Math.floor(NOW.getTime() / 1000) + 90 * 86_400);
      expect(await batchItem(batchId)).toMatchObject({ rejected: 4, completed: 1 });
    });

    it('fails the record when the rejection cannot be recorded, so the message is not lost', async () => {
      const ledger = new DynamoLedger({ tableName: 'no-such-table' });
      const response = await consumer({ ledger })(sqsEvent(sqsRecord('{not json', { messageId: 'm-lost' })), lambdaContext());
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-lost' }] });
    });
  });

  describe('Method: handler (failures)', () => {
    it('reports a retryable failure as a batch item failure and lets the retry apply it', async () => {
      const handle = consumer();
      const response = await handle(sqsEvent(sqsRecord(body('flaky', 'retryable'), { messageId: 'm-flaky' }), sqsRecord(body('steady'))), lambdaContext());
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-flaky' }] });
      expect(metricTotal('Failed')).toBe(1);
      expect(metricTotal('Applied')).toBe(1);

      // Powertools deleted the in-progress claim, so the redelivery runs apply again (the downstream recovered).
      const retry = await handle(sqsEvent(sqsRecord(body('flaky'))), lambdaContext());
      expect(retry).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply.filter((r) => r.operationId === 'fake:flaky:2026-11-28')).toHaveLength(2);
      expect(metricTotal('Applied')).toBe(2);
    });

    it('reports a handler that throws an unexpected error as a batch item failure', async () => {
      const response = await consumer()(sqsEvent(sqsRecord(body('boom', 'crash'), { messageId: 'm-boom' })), lambdaContext());
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-boom' }] });
    });

    it('fails a record whose apply returns something other than an ApplyResult', async () => {
      const badJob = { ...fakeJob, apply: async () => undefined as unknown as ApplyResult };
      const response = await consumer({ job: badJob })(sqsEvent(sqsRecord(body('odd'), { messageId: 'm-odd' })), lambdaContext());
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-odd' }] });
    });

    it('sends a permanent failure to the DLQ with its reason and acknowledges it', async () => {
      const batchId = 'fake-job:2026-11-28:permanent';
      const original = body('doomed', 'permanent', { batchId });
      const response = await consumer()(sqsEvent(sqsRecord(original)), lambdaContext());

      expect(response).toEqual({ batchItemFailures: [] });
      const dead = await drainQueue(dlqUrl);
      expect(dead).toHaveLength(1);
      expect(dead[0].Body).toBe(original);
      expect(dead[0].MessageAttributes).toMatchObject({
        failureReason: { DataType: 'String', StringValue: 'downstream refused doomed with 422' },
        operationId: { DataType: 'String', StringValue: 'fake:doomed:2026-11-28' },
        jobType: { DataType: 'String', StringValue: 'fake-job' },
        batchId: { DataType: 'String', StringValue: batchId },
      });
      expect(metricTotal('DeadLettered')).toBe(1);
      expect(await batchItem(batchId)).toMatchObject({ deadLettered: 1 });
      expect(await drainQueue(queueUrl)).toEqual([]);
    });

    it('defers a throttled message to its own queue with the same operation ID and a delay', async () => {
      const batchId = 'fake-job:2026-11-28:throttled';
      const publisher = new SqsPublisher();
      const publish = jest.spyOn(publisher, 'publish');
      const response = await consumer({ publisher })(sqsEvent(sqsRecord(body('busy', 'throttled', { batchId }))), lambdaContext());

      expect(response).toEqual({ batchItemFailures: [] });
      expect(publish).toHaveBeenCalledTimes(1);
      const [url, [sent]] = publish.mock.calls[0];
      expect(url).toBe(queueUrl);
      expect(sent.delaySeconds).toBe(30);
      expect(JSON.parse(sent.body)).toEqual({
        ...JSON.parse(body('busy', 'throttled', { batchId })),
        enqueuedAt: NOW.toISOString(),
        firstEnqueuedAt: '2026-11-29T02:00:00.000Z',
        attempt: 1,
      });
      const sqs = new SQSClient({});
      const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessagesDelayed'] }));
      sqs.destroy();
      expect(Attributes?.ApproximateNumberOfMessagesDelayed).toBe('1');
      expect(metricTotal('Deferred')).toBe(1);
      expect(await batchItem(batchId)).toMatchObject({ deferred: 1 });
      expect(await drainQueue(dlqUrl)).toEqual([]);
    });

    it('dead-letters a throttled message once the deferral policy gives up', async () => {
      const handle = consumer({ deferralPolicy: ({ attempt }) => ({ action: 'dead-letter', reason: `throttled after ${attempt} deferrals` }) });
      await handle(sqsEvent(sqsRecord(body('tired', 'throttled', { attempt: 7 }))), lambdaContext());
      const dead = await drainQueue(dlqUrl);
      expect(dead.map((m) => m.MessageAttributes?.failureReason?.StringValue)).toEqual(['throttled after 7 deferrals']);
    });
  });
});

describe('Function: handler', () => {
  it('fails the invocation with the configuration problem when the job is not configured', async () => {
    const saved = process.env.JOB_NAME;
    delete process.env.JOB_NAME;
    try {
      await expect(handler(sqsEvent(), lambdaContext())).rejects.toThrow('environment variable JOB_NAME is not set');
    } finally {
      if (saved !== undefined) process.env.JOB_NAME = saved;
    }
  });
});

describe('Function: consumerOptionsFromEnv', () => {
  const env = {
    JOB_NAME: 'fake-job',
    JOB_SETTINGS: JSON.stringify({
      jobName: 'fake-job', pageSize: 10, maxPagesPerRun: 5, maxMessageBytes: 4096, businessDateOffsetDays: 0, timeZone: 'UTC',
      rateLimit: { startsPerInterval: 1, intervalSeconds: 1, burst: 1 }, concurrency: 1, tables: {}, buckets: {}, secrets: {}, settings: { items: 3 },
    }),
    QUEUE_URL: 'http://queue',
    DLQ_URL: 'http://dlq',
    IDEMPOTENCY_TABLE_NAME: 'idem',
    LEDGER_TABLE_NAME: 'ledger',
    IDEMPOTENCY_TTL_SECONDS: '2592000',
  };
  const loadFixture = () => ({ job: fakeJob });

  it('builds the consumer options from the environment and the job', () => {
    const options = consumerOptionsFromEnv(env, loadFixture);
    expect(options).toMatchObject({
      job: fakeJob,
      jobDeps: { items: 3 },
      queueUrl: 'http://queue',
      dlqUrl: 'http://dlq',
      idempotencyTableName: 'idem',
      idempotencyTtlSeconds: 2_592_000,
      maxMessageBytes: 4096,
    });
  });

  it('names a missing variable', () => {
    const { DLQ_URL: _omitted, ...rest } = env;
    expect(() => consumerOptionsFromEnv(rest, loadFixture)).toThrow('environment variable DLQ_URL is not set');
  });

  it('rejects an idempotency lifetime that is not a positive integer', () => {
    expect(() => consumerOptionsFromEnv({ ...env, IDEMPOTENCY_TTL_SECONDS: '1h' }, loadFixture)).toThrow(
      'environment variable IDEMPOTENCY_TTL_SECONDS must be a positive integer, got "1h"',
    );
  });

  it('rejects settings written for another job', () => {
    expect(() => consumerOptionsFromEnv({ ...env, JOB_NAME: 'other-job' }, loadFixture)).toThrow(
      'JOB_SETTINGS is for job "fake-job" but JOB_NAME is "other-job"',
    );
  });
});

// Keeps the type imports honest: the handler signature Lambda calls.
export type ConsumerHandler = (event: SQSEvent, context: Context) => Promise<unknown>;
