import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, resetClients } from '../../../lambda/adapters/clients';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { batchFigures } from '../../../local/ledgerFigures';
import { batchExact } from '../../../lambda/core/ledgerContract';
import { AdaptiveDynamoDbRateLimiter } from '../../../lambda/adapters/adaptiveRateLimiter';
import { DynamoDbRateLimiter, type RateLimiter } from '../../../lambda/adapters/rateLimiter';
import { logger, metrics } from '../../../lambda/adapters/observability';
import { PublishError, SqsPublisher, type Publisher } from '../../../lambda/adapters/sqsPublisher';
import { idempotencyRecordId } from '../../../lambda/core/idempotencyKey';
import { RetryableError, ThrottledError } from '../../../lambda/core/errors';
import { parseRetryAfter } from '../../../lambda/core/retryAfter';
import type { AnyJob, ApplyRequest, ApplyResult } from '../../../lambda/core/job';
import { waitFor } from '../../../local/waitFor';
import type { JobMessage } from '../../../lambda/core/message';
import {
  consumerOptionsFromEnv,
  createConsumer,
  handler,
  type ConsumerOptions,
} from '../../../lambda/handlers/consumer';
import { createDeferralPolicy } from '../../../lambda/core/deferral';
import { fakeJobCalls, job as fakeJob } from '../../fixtures/jobs/fake-job';
import { startLocalAws, type LocalAws } from '../../support/aws';
import { startHttpStub, type HttpStub } from '../../support/httpStub';
import { lambdaContext, sqsEvent, sqsRecord } from '../../support/lambdaEvents';
import type { LimiterPacer } from '../../../lambda/handlers/consumer/limiterPacer';
import {
  acknowledge,
  countDynamoCalls,
  createIdempotencyTable,
  createLedgerTable,
  createLimiterTable,
  createQueue,
  drainQueue,
  receiveEvent,
  sendBodies,
  withPacer,
  type TestPacing,
} from './harness';
import { VirtualClock } from './virtualClock';

const IDEMPOTENCY_TABLE = 'idempotency';
const LEDGER_TABLE = 'ledger';
const LIMITER_TABLE = 'limiter';
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

function consumer(overrides: Partial<Omit<ConsumerOptions, 'pacer'>> & TestPacing = {}) {
  return createConsumer(
    withPacer({
      job: fakeJob,
      jobDeps: { items: 0 },
      queueUrl,
      dlqUrl,
      idempotencyTableName: IDEMPOTENCY_TABLE,
      idempotencyTtlSeconds: 30 * 86_400,
      maxMessageBytes: 2048,
      ledger: new DynamoLedger({ tableName: LEDGER_TABLE, now: () => NOW }),
      // Fast enough that the limiter never makes these tests wait or defer; the pacing tests below use slower ones.
      limiter: new DynamoDbRateLimiter({
        tableName: LIMITER_TABLE,
        limits: { startsPerInterval: 1000, intervalMs: 1000 },
      }),
      // Lateness only matters to a limiter near its allowance; this one never is, so a slow dynalite call cannot defer.
      pacing: { lateToleranceMs: 60_000 },
      publisher: new SqsPublisher({ sleep: async () => undefined }),
      now: () => NOW,
      ...overrides,
    }),
  );
}

const metricTotal = (name: string) => metricCalls.filter(([n]) => n === name).reduce((sum, [, v]) => sum + v, 0);

/** The batch's figures as the operator CLI resolves them (ops/ledger.ts); undefined while the ledger has nothing of it. */
async function batchItem(batchId = BATCH) {
  const { Item } = await documentClient().send(
    new GetCommand({ TableName: LEDGER_TABLE, Key: { pk: 'BATCH#fake-job', sk: batchId } }),
  );
  const figures = await batchFigures(
    documentClient(),
    { ledger: LEDGER_TABLE, idempotency: IDEMPOTENCY_TABLE },
    'fake-job',
    Item ?? { sk: batchId },
  );
  return Item === undefined && figures.invocations === 0 ? undefined : figures;
}

let queueSeq = 0;
/** A queue of its own, for tests that leave delayed messages behind (drainQueue cannot see them to clean up). */
const freshQueue = () => createQueue(`fake-job-paced-${++queueSeq}`);

/** The operation's idempotency record; undefined when it was never claimed. */
async function idempotencyItem(operationId: string) {
  const { Item } = await documentClient().send(
    new GetCommand({ TableName: IDEMPOTENCY_TABLE, Key: { id: idempotencyRecordId('fake-job', operationId) } }),
  );
  return Item;
}

describe('Function: createConsumer', () => {
  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    await Promise.all([
      createIdempotencyTable(IDEMPOTENCY_TABLE),
      createLedgerTable(LEDGER_TABLE),
      createLimiterTable(LIMITER_TABLE),
    ]);
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
      const response = await consumer()(
        sqsEvent(
          sqsRecord(body('happy-1', undefined, { batchId })),
          sqsRecord(body('happy-2', 'already-done', { batchId })),
        ),
        lambdaContext(),
      );

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
      await consumer()(
        sqsEvent(sqsRecord(body('aged', undefined, { firstEnqueuedAt: '2026-11-29T01:00:05.000Z', attempt: 3 }))),
        lambdaContext(),
      );
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
        await consumer()(
          sqsEvent(sqsRecord(body('logged')), sqsRecord('not json', { messageId: 'm-bad' })),
          lambdaContext(),
        );
      } finally {
        logger.setLogLevel('SILENT');
        out.mockRestore();
        err.mockRestore();
      }
      const completed = lines.find((l) => l.message === 'operation completed');
      expect(completed).toMatchObject({
        operationId: 'fake:logged:2026-11-28',
        batchId: BATCH,
        job: 'fake-job',
        outcome: 'applied',
      });
      const rejected = lines.find((l) => l.message === 'message rejected and kept for review');
      expect(rejected).toMatchObject({ messageId: 'm-bad', job: 'fake-job' });
      expect(rejected).not.toHaveProperty('operationId');
    });
  });

  describe('Method: handler (duplicates)', () => {
    it('replays a completed operation from dynalite without applying it again, falling back to a read', async () => {
      const persistenceStore = new DynamoDBPersistenceLayer({ tableName: IDEMPOTENCY_TABLE });
      const getRecord = jest.spyOn(persistenceStore, 'getRecord');
      // The pre-check reports nothing here, as when the first delivery completes between the pre-check and the claim.
      const handle = consumer({ persistenceStore, completedLookup: { completed: async () => new Map() } });
      const batchId = 'fake-job:2026-11-28:dupes';

      const firstWrite = Math.floor(Date.now() / 1000);
      await handle(sqsEvent(sqsRecord(body('dup', undefined, { batchId }))), lambdaContext());
      const firstWritten = Math.ceil(Date.now() / 1000);
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
      await expect(getRecord.mock.results[0].value).resolves.toMatchObject({
        status: 'COMPLETED',
        responseData: { outcome: 'applied', detail: { id: 'dup' } },
      });
      expect(metricTotal('DuplicatesSuppressed')).toBe(1);
      expect(metricTotal('Applied')).toBe(1);
      expect(await batchItem(batchId)).toMatchObject({ completed: 1, duplicates: 1 });
      // The record sits where lambda/core/idempotencyKey.ts says, so operators can find it by operation ID.
      const { Item } = await documentClient().send(
        new GetCommand({
          TableName: IDEMPOTENCY_TABLE,
          Key: { id: idempotencyRecordId('fake-job', 'fake:dup:2026-11-28') },
        }),
      );
      expect(Item).toMatchObject({ status: 'COMPLETED', data: { outcome: 'applied', detail: { id: 'dup' } } });
      // 30 days from the first delivery's write, however long that took (bracketed, not within some seconds of now).
      expect(Item?.expiration).toBeGreaterThanOrEqual(firstWrite + 30 * 86_400);
      expect(Item?.expiration).toBeLessThanOrEqual(firstWritten + 30 * 86_400);
    });

    it('settles an operation already completed before it takes a slot or a claim', async () => {
      const acquire = jest.fn(async (_key: string, count: number) => ({
        granted: count,
        startAtMs: Array(count).fill(Date.now()),
        waitMs: 0,
      }));
      const persistenceStore = new DynamoDBPersistenceLayer({ tableName: IDEMPOTENCY_TABLE });
      const handle = consumer({
        limiter: { acquire },
        persistenceStore,
        pacing: { key: 'precheck', lateToleranceMs: 60_000 },
      });
      const batchId = 'fake-job:2026-11-28:precheck';
      await handle(sqsEvent(sqsRecord(body('pre-done', undefined, { batchId }))), lambdaContext());
      expect(acquire.mock.calls.map(([, count]) => count)).toEqual([1]);
      const save = jest.spyOn(persistenceStore, 'saveInProgress');

      const response = await handle(
        sqsEvent(
          sqsRecord(body('pre-done', undefined, { batchId })),
          sqsRecord(body('pre-new', undefined, { batchId })),
        ),
        lambdaContext(),
      );
      expect(response).toEqual({ batchItemFailures: [] });
      // One slot for the new operation only; the completed one was never claimed again.
      expect(acquire.mock.calls.map(([, count]) => count)).toEqual([1, 1]);
      expect(save).toHaveBeenCalledTimes(1);
      expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual([
        'fake:pre-done:2026-11-28',
        'fake:pre-new:2026-11-28',
      ]);
      expect(metricTotal('DuplicatesSuppressed')).toBe(1);
      expect(await batchItem(batchId)).toMatchObject({ completed: 2, duplicates: 1, consumed: 3 });
    });

    it('falls back to the claim when the pre-check cannot be read', async () => {
      const handle = consumer({ completedLookup: { completed: async () => Promise.reject(new Error('throttled')) } });
      await handle(sqsEvent(sqsRecord(body('pre-down'))), lambdaContext());
      const response = await handle(sqsEvent(sqsRecord(body('pre-down'))), lambdaContext());
      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply).toHaveLength(1);
      expect(metricTotal('DuplicatesSuppressed')).toBe(1);
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
      const second = await consumer({ job: slowJob })(
        sqsEvent(sqsRecord(body('slow'), { messageId: 'm-second' })),
        lambdaContext(),
      );
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
        sqsRecord(
          body('big', undefined, { batchId, resource: { id: 'big', pad: 'x'.repeat(1000) } }).padEnd(3000, ' '),
          { messageId: 'm-size' },
        ),
        sqsRecord(body('other', undefined, { batchId, jobType: 'other-job' }), { messageId: 'm-type' }),
        sqsRecord(body('bad-resource', 'explode', { batchId }), { messageId: 'm-resource' }),
        sqsRecord(body('fine', undefined, { batchId }), { messageId: 'm-fine' }),
      );

      const response = await consumer()(event, lambdaContext());

      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual(['fake:fine:2026-11-28']);
      expect(metricTotal('Rejected')).toBe(5);
      const { Items = [] } = await documentClient().send(
        new QueryCommand({
          TableName: LEDGER_TABLE,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': 'REJECTED#fake-job' },
        }),
      );
      const byMessage = Object.fromEntries(Items.map((i) => [i.messageId, i]));
      expect(byMessage['m-json'].reasons).toEqual([expect.stringMatching(/^body is not valid JSON \(/)]);
      expect(byMessage['m-json'].body).toBe('{not json');
      expect(byMessage['m-schema']).toMatchObject({ batchId });
      expect(byMessage['m-schema']).not.toHaveProperty('operationId');
      expect(byMessage['m-schema'].reasons).toEqual(
        expect.arrayContaining(['operationId: Invalid input: expected string, received undefined']),
      );
      expect(byMessage['m-size'].reasons).toEqual(['body is 3000 bytes, over the 2048-byte cap']);
      expect(byMessage['m-type']).toMatchObject({
        reasons: ['jobType: expected "fake-job", got "other-job"'],
        operationId: 'fake:other:2026-11-28',
        batchId,
      });
      expect(byMessage['m-resource'].reasons).toEqual([
        expect.stringMatching(/^resource\.behaviour: Invalid option: expected one of /),
      ]);
      expect(byMessage['m-fine']).toBeUndefined();
      expect(byMessage['m-json'].sk).toBe('2026-11-29T02:00:05.000Z#m-json');
      // A rejected body may hold personal data: it expires within 14 days, not with the ledger's 90.
      expect(byMessage['m-json'].expiresAt).toBe(Math.floor(NOW.getTime() / 1000) + 14 * 86_400);
      expect(await batchItem(batchId)).toMatchObject({ rejected: 4, completed: 1 });
    });

    it("rejects a raw message of a business date after the job's latest, or a notBefore past the queue's retention: recorded, acknowledged, never applied or re-published", async () => {
      const batchId = 'fake-job:2027-12-04:manual-typo';
      const event = sqsEvent(
        sqsRecord(
          body('typo', undefined, { batchId, businessDate: '2027-12-04', operationId: 'fake:typo:2027-12-04' }),
          { messageId: 'm-future' },
        ),
        sqsRecord(body('sleeper', undefined, { batchId, notBefore: '2030-01-01T00:00:00.000Z' }), {
          messageId: 'm-sleeper',
        }),
        sqsRecord(body('on-time', undefined, { batchId }), { messageId: 'm-on-time' }),
      );

      const publisher = new SqsPublisher({ sleep: async () => undefined });
      const publish = jest.spyOn(publisher, 'publish');

      const response = await consumer({
        businessDates: { timeZone: 'Europe/London', businessDateOffsetDays: -1 },
        queueRetentionSeconds: 345_600,
        publisher,
      })(event, lambdaContext());

      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual(['fake:on-time:2026-11-28']);
      // Neither deferred (re-published) nor dead-lettered.
      expect(publish).not.toHaveBeenCalled();
      const { Items = [] } = await documentClient().send(
        new QueryCommand({
          TableName: LEDGER_TABLE,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': 'REJECTED#fake-job' },
        }),
      );
      const byMessage = Object.fromEntries(Items.map((i) => [i.messageId, i]));
      expect(byMessage['m-future']).toMatchObject({
        operationId: 'fake:typo:2027-12-04',
        reasons: [
          'businessDate: business date 2027-12-04 is in the future: the latest for fake-job now is 2026-11-28 (Europe/London, offset -1)',
        ],
      });
      expect(byMessage['m-sleeper'].reasons).toEqual([
        "notBefore: 2030-01-01T00:00:00.000Z is more than the queue's retention (345600 s) after enqueuedAt 2026-11-29T02:00:00.000Z",
      ]);
      expect(await batchItem(batchId)).toMatchObject({ rejected: 2, completed: 1 });
    });

    it('fails the record when the rejection cannot be recorded, so the message is not lost', async () => {
      const ledger = new DynamoLedger({ tableName: 'no-such-table' });
      const response = await consumer({ ledger })(
        sqsEvent(sqsRecord('{not json', { messageId: 'm-lost' })),
        lambdaContext(),
      );
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-lost' }] });
    });
  });

  describe('Method: handler (failures)', () => {
    it('reports a retryable failure as a batch item failure and lets the retry apply it', async () => {
      const handle = consumer();
      const response = await handle(
        sqsEvent(sqsRecord(body('flaky', 'retryable'), { messageId: 'm-flaky' }), sqsRecord(body('steady'))),
        lambdaContext(),
      );
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-flaky' }] });
      expect(metricTotal('Failed')).toBe(1);
      expect(metricTotal('Applied')).toBe(1);

      // Powertools deleted the in-progress claim, so the redelivery runs apply again (the downstream recovered).
      const retry = await handle(sqsEvent(sqsRecord(body('flaky'))), lambdaContext());
      expect(retry).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply.filter((r) => r.operationId === 'fake:flaky:2026-11-28')).toHaveLength(2);
      expect(metricTotal('Applied')).toBe(2);
    });

    it('counts each retryable failure handed back to SQS as a retry of its batch, in the one ledger write per invocation', async () => {
      const batchId = 'fake-job:2026-11-28:retries';
      const handle = consumer({ maxReceiveCount: 5 });
      const deliver = (behaviour: string | undefined, receives: number) =>
        handle(
          sqsEvent(
            sqsRecord(body('twice-flaky', behaviour, { batchId }), {
              messageId: `m-retry-${receives}`,
              attributes: { ...sqsRecord('').attributes, ApproximateReceiveCount: String(receives) },
            }),
          ),
          lambdaContext(),
        );
      const counter = countDynamoCalls();
      const ledgerWrites = () =>
        counter.calls.filter((c) => c.table === LEDGER_TABLE && c.command === 'PutItemCommand').length;
      try {
        expect(await deliver('retryable', 1)).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-retry-1' }] });
        expect(await batchItem(batchId)).toMatchObject({ consumed: 1, retries: 1 });
        expect(await deliver('retryable', 2)).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-retry-2' }] });
        expect(await deliver(undefined, 3)).toEqual({ batchItemFailures: [] });
      } finally {
        counter.stop();
      }

      const item = await batchItem(batchId);
      expect(item).toMatchObject({ consumed: 3, retries: 2, completed: 1 });
      expect(item?.deadLettered).toBe(0);
      expect(item?.duplicates).toBe(0);
      // One ledger write per invocation, retried or not: no write per retry.
      expect(ledgerWrites()).toBe(3);
      expect(metricTotal('Failed')).toBe(2);
    });

    it('counts a failure on the last allowed receive as dead-lettered, and an earlier one not', async () => {
      const batchId = 'fake-job:2026-11-28:last-receive';
      const handle = consumer({ maxReceiveCount: 3 });
      const attempt = (receives: number) =>
        handle(
          sqsEvent(
            sqsRecord(body('doomed', 'retryable', { batchId }), {
              messageId: `m-${receives}`,
              attributes: { ...sqsRecord('').attributes, ApproximateReceiveCount: String(receives) },
            }),
          ),
          lambdaContext(),
        );
      expect(await attempt(2)).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-2' }] });
      expect(await batchItem(batchId)).toMatchObject({ consumed: 1, retries: 1 });
      expect((await batchItem(batchId))?.deadLettered).toBe(0);
      expect(await attempt(3)).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-3' }] });
      // SQS moves it to the DLQ: dead-lettered, not a retry.
      expect(await batchItem(batchId)).toMatchObject({ consumed: 2, retries: 1, deadLettered: 1 });
      expect(metricTotal('DeadLettered')).toBe(1);
    });

    it('records consumed records and the oldest message age in the batch ledger', async () => {
      const batchId = 'fake-job:2026-11-28:ages';
      const handle = consumer({ now: () => new Date('2026-11-29T02:00:10.000Z') });
      await handle(
        sqsEvent(
          sqsRecord(body('age-young', undefined, { batchId, enqueuedAt: '2026-11-29T02:00:08.000Z' })),
          sqsRecord(
            body('age-old', undefined, {
              batchId,
              enqueuedAt: '2026-11-29T02:00:09.000Z',
              firstEnqueuedAt: '2026-11-29T02:00:01.000Z',
            }),
          ),
        ),
        lambdaContext(),
      );
      expect(await batchItem(batchId)).toMatchObject({ consumed: 2, completed: 2, oldestMessageAgeMs: 9_000 });
    });

    it('reports a handler that throws an unexpected error as a batch item failure', async () => {
      const response = await consumer()(
        sqsEvent(sqsRecord(body('boom', 'crash'), { messageId: 'm-boom' })),
        lambdaContext(),
      );
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-boom' }] });
    });

    it('fails a record whose apply returns something other than an ApplyResult', async () => {
      const badJob = { ...fakeJob, apply: async () => undefined as unknown as ApplyResult };
      const response = await consumer({ job: badJob })(
        sqsEvent(sqsRecord(body('odd'), { messageId: 'm-odd' })),
        lambdaContext(),
      );
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
      const response = await consumer({ publisher })(
        sqsEvent(sqsRecord(body('busy', 'throttled', { batchId }))),
        lambdaContext(),
      );

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
      const { Attributes } = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessagesDelayed'] }),
      );
      sqs.destroy();
      expect(Attributes?.ApproximateNumberOfMessagesDelayed).toBe('1');
      expect(metricTotal('Deferred')).toBe(1);
      expect(await batchItem(batchId)).toMatchObject({ deferred: 1, throttled: 1 });
      expect(metricTotal('Throttled')).toBe(1);
      expect(await drainQueue(dlqUrl)).toEqual([]);
    });

    it('dead-letters a throttled message once the deferral policy gives up', async () => {
      const handle = consumer({
        deferralPolicy: ({ attempt }) => ({ action: 'dead-letter', reason: `throttled after ${attempt} deferrals` }),
      });
      await handle(sqsEvent(sqsRecord(body('tired', 'throttled', { attempt: 7 }))), lambdaContext());
      const dead = await drainQueue(dlqUrl);
      expect(dead.map((m) => m.MessageAttributes?.failureReason?.StringValue)).toEqual(['throttled after 7 deferrals']);
    });
  });
  describe('Method: handler (the SLO indicator)', () => {
    it("meters each outcome against the message's SLO deadline: met, missed, or failed for good", async () => {
      const batchId = 'fake-job:2026-11-28:slo';
      // NOW is 02:00:05; one deadline after it, one before, and a permanent failure.
      await consumer()(
        sqsEvent(
          sqsRecord(body('slo-in-time', undefined, { batchId, dueBy: '2026-11-29T04:00:00.000Z' })),
          sqsRecord(body('slo-late', undefined, { batchId, dueBy: '2026-11-29T02:00:00.000Z' })),
          sqsRecord(body('slo-gone', 'permanent', { batchId, dueBy: '2026-11-29T04:00:00.000Z' })),
          sqsRecord(body('no-slo', undefined, { batchId })),
        ),
        lambdaContext(),
      );
      expect([metricTotal('SloMet'), metricTotal('SloMissed'), metricTotal('SloFailed')]).toEqual([1, 1, 1]);
      expect(metricTotal('Applied')).toBe(3);
    });
  });

  describe('Method: handler (an exact ledger)', () => {
    /** A ledger whose invocation writes fail while `down` is set: the process dies, or DynamoDB refuses the write. */
    const flakyLedger = () => {
      const real = new DynamoLedger({ tableName: LEDGER_TABLE, now: () => NOW });
      const state = { down: true, writes: 0 };
      const ledger = {
        recordRejection: real.recordRejection.bind(real),
        recordInvocation: async (...args: Parameters<DynamoLedger['recordInvocation']>) => {
          if (state.down) throw new Error('killed before the ledger write');
          state.writes++;
          return real.recordInvocation(...args);
        },
      };
      return { ledger, state };
    };

    it('recovers the counts of an invocation killed between its completions and its ledger write, adopting them once', async () => {
      const batchId = 'fake-job:2026-11-28:killed';
      await new DynamoLedger({ tableName: LEDGER_TABLE }).addToBatch('fake-job', batchId, {
        discovered: 2,
        published: 2,
      });
      const { ledger, state } = flakyLedger();
      const handle = consumer({ ledger });
      const records = () => [
        sqsRecord(body('kill-1', undefined, { batchId }), { messageId: 'm-k1' }),
        sqsRecord(body('kill-2', undefined, { batchId }), { messageId: 'm-k2' }),
      ];

      // Both completed, then no ledger write: the records go back to SQS (a killed invocation's would come back too).
      expect(await handle(sqsEvent(...records()), lambdaContext())).toEqual({
        batchItemFailures: [{ itemIdentifier: 'm-k1' }, { itemIdentifier: 'm-k2' }],
      });
      expect(fakeJobCalls.apply).toHaveLength(2);
      expect(await batchItem(batchId)).toMatchObject({ completed: 0, duplicates: 0 });

      state.down = false;
      expect(await handle(sqsEvent(...records()), lambdaContext())).toEqual({ batchItemFailures: [] });
      // Not applied again; their completions adopted from the invocation that never wrote, and the batch is exact.
      expect(fakeJobCalls.apply).toHaveLength(2);
      const recovered = await batchItem(batchId);
      expect(recovered).toMatchObject({ discovered: 2, completed: 2, adopted: 2, duplicates: 0 });
      expect(batchExact(recovered!)).toBe(true);

      // A second redelivery adopts nothing: it is a duplicate.
      await handle(sqsEvent(...records()), lambdaContext());
      expect(await batchItem(batchId)).toMatchObject({ completed: 2, adopted: 2, duplicates: 2 });
      expect(state.writes).toBe(2);
    });

    it('hands back only the records of the batch whose ledger write failed', async () => {
      const real = new DynamoLedger({ tableName: LEDGER_TABLE, now: () => NOW });
      const failing = 'fake-job:2026-11-28:write-fails';
      const fine = 'fake-job:2026-11-28:write-lands';
      const ledger = {
        recordRejection: real.recordRejection.bind(real),
        recordInvocation: async (...args: Parameters<DynamoLedger['recordInvocation']>) => {
          if (args[1] === failing) throw new Error('ProvisionedThroughputExceededException');
          return real.recordInvocation(...args);
        },
      };
      const response = await consumer({ ledger })(
        sqsEvent(
          sqsRecord(body('split-1', undefined, { batchId: failing }), { messageId: 'm-fails' }),
          sqsRecord(body('split-2', undefined, { batchId: fine }), { messageId: 'm-lands' }),
        ),
        lambdaContext(),
      );
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-fails' }] });
      expect(await batchItem(fine)).toMatchObject({ completed: 1 });
      expect(await batchItem(failing)).toBeUndefined();
      expect(metricTotal('LedgerWriteFailed')).toBe(1);
    });

    it("keeps both batches of a re-run exact: an operation the first batch completed is the second's completedElsewhere", async () => {
      const first = 'fake-job:2026-11-28:rerun-first';
      const rerun = 'fake-job:2026-11-28:manual-rerun';
      const ledger = new DynamoLedger({ tableName: LEDGER_TABLE });
      await ledger.addToBatch('fake-job', first, { discovered: 2, published: 2 });
      await ledger.addToBatch('fake-job', rerun, { discovered: 3, published: 3 });
      const handle = consumer();
      await handle(
        sqsEvent(
          sqsRecord(body('rerun-a', undefined, { batchId: first })),
          sqsRecord(body('rerun-b', undefined, { batchId: first })),
        ),
        lambdaContext(),
      );
      // The re-run's copies: two done by the first batch (one delivered twice), one new.
      await handle(
        sqsEvent(
          ...['rerun-a', 'rerun-b', 'rerun-b', 'rerun-c'].map((key) =>
            sqsRecord(body(key, undefined, { batchId: rerun })),
          ),
        ),
        lambdaContext(),
      );
      expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual([
        'fake:rerun-a:2026-11-28',
        'fake:rerun-b:2026-11-28',
        'fake:rerun-c:2026-11-28',
      ]);
      const [a, b] = [await batchItem(first), await batchItem(rerun)];
      expect(a).toMatchObject({ completed: 2, completedElsewhere: 0, duplicates: 0 });
      expect(b).toMatchObject({
        completed: 1,
        completedElsewhere: 2,
        duplicates: 1,
        completedElsewhereBy: { 'fake:rerun-a:2026-11-28': first, 'fake:rerun-b:2026-11-28': first },
      });
      expect([batchExact(a!), batchExact(b!)]).toEqual([true, true]);
    });
  });

  describe('Method: handler (cost per operation)', () => {
    it('takes one block of slots per invocation and writes the ledger once per batch ID: 2.2 writes per operation', async () => {
      const [batchA, batchB] = ['fake-job:2026-11-28:cost-a', 'fake-job:2026-11-28:cost-b'];
      const records = Array.from({ length: 10 }, (_, i) =>
        sqsRecord(body(`cost-${i}`, undefined, { batchId: i < 6 ? batchA : batchB })),
      );
      const counter = countDynamoCalls();
      let response;
      try {
        response = await consumer({ pacing: { key: 'cost', lateToleranceMs: 60_000 } })(
          sqsEvent(...records),
          lambdaContext(),
        );
      } finally {
        counter.stop();
      }

      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply).toHaveLength(10);
      const byTable = (table: string) =>
        counter.calls
          .filter((c) => c.table === table)
          .map((c) => c.command)
          .sort();
      expect(byTable(LIMITER_TABLE)).toEqual(['UpdateItemCommand']);
      // Each invocation's own item per batch (a Put: written once, never read back).
      expect(byTable(LEDGER_TABLE)).toEqual(['PutItemCommand', 'PutItemCommand']);
      // One read for the batch (the completed-operation pre-check), then Powertools' own cost: claim (PutItem) and
      // persist (UpdateItem) per operation.
      expect(byTable(IDEMPOTENCY_TABLE)).toEqual([
        'BatchGetItemCommand',
        ...Array(10).fill('PutItemCommand'),
        ...Array(10).fill('UpdateItemCommand'),
      ]);
      expect(counter.calls).toHaveLength(24);
      expect(await batchItem(batchA)).toMatchObject({ completed: 6 });
      expect(await batchItem(batchB)).toMatchObject({ completed: 4 });
      // At batch size 10 with one batch ID: 10 claims + 10 persists + 1 limiter + 1 ledger = 22 writes, 2.2 each.
    });

    it('with pacing off, touches no limiter and waits for no slot', async () => {
      const records = Array.from({ length: 10 }, (_, i) =>
        sqsRecord(body(`unpaced-${i}`, undefined, { batchId: 'fake-job:2026-11-28:unpaced' })),
      );
      const counter = countDynamoCalls();
      let response;
      try {
        // A clock that moves 5 ms per read: with a slot to be late for, every record would be deferred as too late.
        let t = Date.now();
        response = await consumer({ limiter: undefined, pacing: { key: 'unpaced', clock: () => (t += 5) } })(
          sqsEvent(...records),
          lambdaContext(),
        );
      } finally {
        counter.stop();
      }
      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply).toHaveLength(10);
      const byTable = (table: string) =>
        counter.calls
          .filter((c) => c.table === table)
          .map((c) => c.command)
          .sort();
      expect(byTable(LIMITER_TABLE)).toEqual([]);
      expect(byTable(IDEMPOTENCY_TABLE)).toEqual([
        'BatchGetItemCommand',
        ...Array(10).fill('PutItemCommand'),
        ...Array(10).fill('UpdateItemCommand'),
      ]);
      expect(await batchItem('fake-job:2026-11-28:unpaced')).toMatchObject({ completed: 10 });
      expect(metricTotal('SlotsUnused')).toBe(0);
      expect(metricTotal('Deferred')).toBe(0);
    });
  });

  describe('Method: handler (pacing)', () => {
    /** A limiter allowing `starts` per `intervalMs` on its own key, with no lead or margin so its hints are exact. */
    const slowLimiter = (starts: number, intervalMs: number) =>
      new DynamoDbRateLimiter({ tableName: LIMITER_TABLE, limits: { startsPerInterval: starts, intervalMs } });

    it('defers the records beyond the grant unclaimed, spread by their position, with the operation ID and first enqueue kept', async () => {
      const batchId = 'fake-job:2026-11-28:beyond';
      const queueUrl = await freshQueue();
      const publisher = new SqsPublisher();
      const publish = jest.spyOn(publisher, 'publish');
      const handle = consumer({
        queueUrl,
        limiter: slowLimiter(1, 60_000),
        publisher,
        pacing: { key: 'beyond', shortWaitMs: 0, lateToleranceMs: 60_000, spacingMs: 60_000 },
        deferralPolicy: createDeferralPolicy({ random: () => 0 }),
      });
      const response = await handle(
        sqsEvent(...['b-0', 'b-1', 'b-2'].map((k) => sqsRecord(body(k, undefined, { batchId })))),
        lambdaContext(),
      );

      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual(['fake:b-0:2026-11-28']);
      expect(await idempotencyItem('fake:b-0:2026-11-28')).toMatchObject({ status: 'COMPLETED' });
      expect(await idempotencyItem('fake:b-1:2026-11-28')).toBeUndefined();
      expect(await idempotencyItem('fake:b-2:2026-11-28')).toBeUndefined();
      // One publish for both (one SendMessageBatch). The limiter's hint is one emission interval (60 s) for the first
      // refused record, one more for the next.
      expect(publish).toHaveBeenCalledTimes(1);
      const [url, entries] = publish.mock.calls[0];
      const sent = entries.map((m) => ({ url, delaySeconds: m.delaySeconds, message: JSON.parse(m.body) }));
      expect(sent).toEqual([
        {
          url: queueUrl,
          delaySeconds: 60,
          message: {
            ...JSON.parse(body('b-1', undefined, { batchId })),
            enqueuedAt: NOW.toISOString(),
            firstEnqueuedAt: '2026-11-29T02:00:00.000Z',
            attempt: 0,
            pacedDeferrals: 1,
          },
        },
        {
          url: queueUrl,
          delaySeconds: 120,
          message: {
            ...JSON.parse(body('b-2', undefined, { batchId })),
            enqueuedAt: NOW.toISOString(),
            firstEnqueuedAt: '2026-11-29T02:00:00.000Z',
            attempt: 0,
            pacedDeferrals: 1,
          },
        },
      ]);
      expect(metricTotal('Deferred')).toBe(2);
      expect(await batchItem(batchId)).toMatchObject({ completed: 1, deferred: 2 });
      expect(await batchItem(batchId)).toMatchObject({ throttled: 0 });
    });

    it('fails only the records whose deferral SQS did not take', async () => {
      const publisher: Publisher = {
        publish: async (url, messages) => {
          throw new PublishError(
            'failed to publish 1 of 2 messages',
            url,
            { [messages[1].operationId]: 'InternalError: try again' },
            1,
          );
        },
      };
      const limiter: RateLimiter = { acquire: async () => ({ granted: 0, startAtMs: [], waitMs: 5000 }) };
      const response = await consumer({ limiter, publisher })(
        sqsEvent(
          sqsRecord(body('sent'), { messageId: 'm-sent' }),
          sqsRecord(body('unsent'), { messageId: 'm-unsent' }),
        ),
        lambdaContext(),
      );
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-unsent' }] });
      expect(metricTotal('Deferred')).toBe(1);
      expect(metricTotal('Failed')).toBe(1);
    });

    it('re-publishes a deferred record as a new message whose receive count starts again at 1, and applies it later', async () => {
      const batchId = 'fake-job:2026-11-28:republish';
      const queueUrl = await freshQueue();
      await sendBodies(queueUrl, [body('r-0', undefined, { batchId }), body('r-1', undefined, { batchId })]);
      const event = await receiveEvent(queueUrl);
      expect(event.Records).toHaveLength(2);
      const handle = consumer({
        queueUrl,
        limiter: slowLimiter(1, 1000),
        pacing: { key: 'republish', shortWaitMs: 0, lateToleranceMs: 60_000 },
        deferralPolicy: createDeferralPolicy({ random: () => 0 }),
      });
      const response = await handle(event, lambdaContext());
      await acknowledge(queueUrl, event, response);
      expect(response).toEqual({ batchItemFailures: [] });
      const [applied, deferred] =
        fakeJobCalls.apply.length === 1 &&
        fakeJobCalls.apply[0].operationId === JSON.parse(event.Records[0].body).operationId
          ? event.Records
          : [...event.Records].reverse();
      expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual([JSON.parse(applied.body).operationId]);

      // Delayed by the 1 s hint: nothing visible at once, then a NEW message with a fresh receive count.
      expect((await receiveEvent(queueUrl)).Records).toEqual([]);
      const again = await waitFor(
        'the deferred record delivered again',
        async () => {
          const event = await receiveEvent(queueUrl);
          return event.Records.length > 0 ? event : undefined;
        },
        { timeoutMs: 5000, intervalMs: 100 },
      );
      expect(again.Records).toHaveLength(1);
      const [redelivered] = again.Records;
      expect(redelivered.messageId).not.toBe(deferred.messageId);
      expect(redelivered.attributes.ApproximateReceiveCount).toBe('1');
      expect(JSON.parse(redelivered.body)).toMatchObject({
        operationId: JSON.parse(deferred.body).operationId,
        attempt: 0,
        pacedDeferrals: 1,
        firstEnqueuedAt: '2026-11-29T02:00:00.000Z',
      });

      const later = await handle(again, lambdaContext());
      await acknowledge(queueUrl, again, later);
      expect(later).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply.map((r) => r.operationId).sort()).toEqual([
        'fake:r-0:2026-11-28',
        'fake:r-1:2026-11-28',
      ]);
      expect(await batchItem(batchId)).toMatchObject({ completed: 2, deferred: 1 });
      expect(await drainQueue(queueUrl)).toEqual([]);
    });

    it('gives up a slot it woke too late for, and defers the record unclaimed', async () => {
      const clock = () => Date.parse('2026-11-29T03:00:00.000Z');
      const limiter: RateLimiter = { acquire: async () => ({ granted: 1, startAtMs: [clock() - 500], waitMs: 0 }) };
      const publisher = new SqsPublisher();
      const publish = jest.spyOn(publisher, 'publish');
      const response = await consumer({
        queueUrl: await freshQueue(),
        limiter,
        publisher,
        pacing: { lateToleranceMs: 100, clock },
      })(sqsEvent(sqsRecord(body('late'))), lambdaContext());

      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply).toEqual([]);
      expect(await idempotencyItem('fake:late:2026-11-28')).toBeUndefined();
      expect(publish).toHaveBeenCalledTimes(1);
      // A slot deferral: counted apart, never against the deferral budget.
      expect(JSON.parse(publish.mock.calls[0][1][0].body)).toMatchObject({
        operationId: 'fake:late:2026-11-28',
        attempt: 0,
        pacedDeferrals: 1,
      });
    });

    it("gives up a start the claim pushed past its slot's margin, with the claim released, and defers the record", async () => {
      let nowMs = Date.parse('2026-11-29T03:00:00.000Z');
      const clock = () => nowMs;
      const limiter: RateLimiter = { acquire: async () => ({ granted: 1, startAtMs: [clock()], waitMs: 0 }) };
      // A slow claim: the table answers 300 ms later, past the 100 ms tolerance (half the margin the window absorbs).
      const persistenceStore = new DynamoDBPersistenceLayer({ tableName: IDEMPOTENCY_TABLE });
      const save = persistenceStore.saveInProgress.bind(persistenceStore);
      jest.spyOn(persistenceStore, 'saveInProgress').mockImplementation(async (...args) => {
        await save(...args);
        nowMs += 300;
      });
      const publisher = new SqsPublisher();
      const publish = jest.spyOn(publisher, 'publish');
      const response = await consumer({
        queueUrl: await freshQueue(),
        limiter,
        publisher,
        persistenceStore,
        pacing: { lateToleranceMs: 100, clock },
      })(sqsEvent(sqsRecord(body('slow-claim'))), lambdaContext());

      expect(response).toEqual({ batchItemFailures: [] });
      expect(fakeJobCalls.apply).toEqual([]);
      expect(await idempotencyItem('fake:slow-claim:2026-11-28')).toBeUndefined();
      expect(JSON.parse(publish.mock.calls[0][1][0].body)).toMatchObject({
        operationId: 'fake:slow-claim:2026-11-28',
        attempt: 0,
        pacedDeferrals: 1,
      });
    });

    it('replaces slots that passed while earlier records were applying, instead of deferring their records', async () => {
      // Slots 30 ms apart, applies that take 100 ms: without replacement every record after the first would be late.
      // On a virtual clock, so the slots, the applies and the starts are exact whatever the machine's load.
      const clock = new VirtualClock();
      const granted: { count: number; slots: number[] }[] = [];
      const limiter: RateLimiter = {
        acquire: async (_key, count) => {
          const slots = Array.from({ length: count }, (_, i) => clock.now() + i * 30);
          granted.push({ count, slots });
          return { granted: count, startAtMs: slots, waitMs: 0 };
        },
      };
      const starts: number[] = [];
      const slowJob = {
        ...fakeJob,
        apply: async (deps: unknown, request: Parameters<typeof fakeJob.apply>[1]) => {
          starts.push(clock.now());
          await clock.sleep(100);
          return fakeJob.apply(deps as Parameters<typeof fakeJob.apply>[0], request);
        },
      };
      const publisher = new SqsPublisher();
      const publish = jest.spyOn(publisher, 'publish');
      const records = ['slow-1', 'slow-2', 'slow-3', 'slow-4'].map((k) => sqsRecord(body(k)));
      const pacing = { key: 'slow', lateToleranceMs: 20, clock: clock.now, sleep: clock.sleep };
      const response = await consumer({ job: slowJob, queueUrl: await freshQueue(), limiter, publisher, pacing })(
        sqsEvent(...records),
        lambdaContext(),
      );

      expect(response).toEqual({ batchItemFailures: [] });
      expect(publish).not.toHaveBeenCalled();
      expect(metricTotal('Applied')).toBe(4);
      // One block for the batch, then a fresh slot of one whenever every slot left had passed (an apply takes 100 ms,
      // so a block of one is all this container can start on time once it has measured that). The first apply ends at
      // 100 ms: the block's slots at 30 and 60 ms have passed, the one at 90 ms is within the tolerance.
      expect(granted.map((g) => g.count)).toEqual([4, 1, 1]);
      // The passed slots are allowance the fleet lost, and the metric says how many.
      expect(metricTotal('SlotsUnused')).toBe(2);
      // Every start is at a slot the limiter granted, or within the tolerance after it: the block's first, its last
      // 10 ms late, then each fresh one at once.
      expect(starts).toEqual([granted[0].slots[0], granted[0].slots[3] + 10, granted[1].slots[0], granted[2].slots[0]]);
    });

    it('takes only the slots this container can start on time once it has measured its applies, the rest when reached', async () => {
      // Slots 10 ms apart, applies of 60 ms, 45 ms tolerance: one slot per block is all that can be started on time (the
      // second slot would be reached 50 ms late). On a virtual clock, so the measure is the applies' exact 60 ms.
      const clock = new VirtualClock();
      const granted: number[] = [];
      const limiter: RateLimiter = {
        acquire: async (_key, count) => {
          granted.push(count);
          return {
            granted: count,
            startAtMs: Array.from({ length: count }, (_, i) => clock.now() + i * 10),
            waitMs: 0,
          };
        },
      };
      const slowJob = {
        ...fakeJob,
        apply: async (deps: unknown, request: Parameters<typeof fakeJob.apply>[1]) => {
          await clock.sleep(60);
          return fakeJob.apply(deps as Parameters<typeof fakeJob.apply>[0], request);
        },
      };
      const publisher = new SqsPublisher();
      const publish = jest.spyOn(publisher, 'publish');
      const handle = consumer({
        job: slowJob,
        queueUrl: await freshQueue(),
        limiter,
        publisher,
        pacing: { key: 'measured', lateToleranceMs: 45, spacingMs: 10, clock: clock.now, sleep: clock.sleep },
      });
      await handle(sqsEvent(sqsRecord(body('measure-0'))), lambdaContext());
      expect(granted).toEqual([1]);
      const response = await handle(
        sqsEvent(...['measure-1', 'measure-2', 'measure-3'].map((k) => sqsRecord(body(k)))),
        lambdaContext(),
      );

      expect(response).toEqual({ batchItemFailures: [] });
      expect(publish).not.toHaveBeenCalled();
      expect(metricTotal('Applied')).toBe(4);
      // Without the measure, the batch would take a block of 3 and lose 2 of its slots to lateness.
      expect(granted).toEqual([1, 1, 1, 1]);
      expect(metricTotal('SlotsUnused')).toBe(0);
    });

    it("gives a duplicate's slot to the next record, since no downstream call used it", async () => {
      const clock = new VirtualClock();
      const pacing = { key: 'dup-slot', lateToleranceMs: 60_000, clock: clock.now, sleep: clock.sleep };
      const handle = (acquire: RateLimiter['acquire'], job = fakeJob) =>
        consumer({ job, limiter: { acquire }, pacing });
      const now = async (_key: string, count: number) => ({
        granted: count,
        startAtMs: Array(count).fill(clock.now()),
        waitMs: 0,
      });
      await handle(now)(sqsEvent(sqsRecord(body('dup-slot-done'))), lambdaContext());

      // The duplicate's slot is now, the new record's own is 30 s later: it starts on the duplicate's instead of waiting.
      let ownSlot = 0;
      const spaced = async (_key: string, count: number) => {
        ownSlot = clock.now() + 30_000;
        return { granted: count, startAtMs: [clock.now(), ownSlot], waitMs: 0 };
      };
      const starts: Record<string, number> = {};
      const timedJob = {
        ...fakeJob,
        apply: async (deps: unknown, request: Parameters<typeof fakeJob.apply>[1]) => {
          starts[request.operationId] = clock.now();
          return fakeJob.apply(deps as Parameters<typeof fakeJob.apply>[0], request);
        },
      };
      const response = await handle(spaced, timedJob)(
        sqsEvent(sqsRecord(body('dup-slot-done')), sqsRecord(body('dup-slot-new'))),
        lambdaContext(),
      );
      expect(response).toEqual({ batchItemFailures: [] });
      expect(metricTotal('DuplicatesSuppressed')).toBe(1);
      expect(Object.keys(starts)).toEqual(['fake:dup-slot-new:2026-11-28']);
      expect(starts['fake:dup-slot-new:2026-11-28']).toBeLessThan(ownSlot);
    });

    it('keeps back 5 s of the invocation for the last apply, or a quarter of a short invocation', async () => {
      const acquire = jest.fn(async (_key: string, count: number, _options?: { maxWaitMs?: number }) => ({
        granted: count,
        startAtMs: Array(count).fill(0),
        waitMs: 0,
      }));
      const handle = consumer({
        limiter: { acquire },
        pacing: { key: 'reserve', shortWaitMs: 60_000, lateToleranceMs: Number.MAX_SAFE_INTEGER },
      });
      await handle(
        sqsEvent(sqsRecord(body('reserve-1'))),
        lambdaContext(() => 60_000),
      );
      await handle(
        sqsEvent(sqsRecord(body('reserve-2'))),
        lambdaContext(() => 10_000),
      );
      expect(acquire.mock.calls.map(([, , o]) => o)).toEqual([
        { maxWaitMs: 55_000, priority: 'live' },
        { maxWaitMs: 7_500, priority: 'live' },
      ]);
    });

    it('bounds the block by the short wait and by the time the invocation has left', async () => {
      const acquire = jest.fn(async (_key: string, count: number) => ({
        granted: count,
        startAtMs: Array(count).fill(0),
        waitMs: 0,
      }));
      const handle = consumer({
        limiter: { acquire },
        pacing: { key: 'provider-x', shortWaitMs: 8000, reserveMs: 5000, lateToleranceMs: Number.MAX_SAFE_INTEGER },
      });
      await handle(
        sqsEvent(sqsRecord(body('bound-1')), sqsRecord(body('bound-2')), sqsRecord('not json')),
        lambdaContext(() => 60_000),
      );
      await handle(
        sqsEvent(sqsRecord(body('bound-3'))),
        lambdaContext(() => 9_000),
      );
      await handle(
        sqsEvent(sqsRecord(body('bound-4'))),
        lambdaContext(() => 3_000),
      );
      expect(acquire.mock.calls).toEqual([
        ['provider-x', 2, { maxWaitMs: 8000, priority: 'live' }],
        ['provider-x', 1, { maxWaitMs: 4000, priority: 'live' }],
        ['provider-x', 1, { maxWaitMs: 0, priority: 'live' }],
      ]);
    });

    it('fails the due records unclaimed when the limiter cannot be asked, and still records the rejections', async () => {
      const limiter = new DynamoDbRateLimiter({
        tableName: 'no-such-limiter',
        limits: { startsPerInterval: 10, intervalMs: 1000 },
      });
      const response = await consumer({ limiter })(
        sqsEvent(sqsRecord(body('no-limiter'), { messageId: 'm-due' }), sqsRecord('{bad', { messageId: 'm-bad-json' })),
        lambdaContext(),
      );
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-due' }] });
      expect(fakeJobCalls.apply).toEqual([]);
      expect(await idempotencyItem('fake:no-limiter:2026-11-28')).toBeUndefined();
      expect(metricTotal('Failed')).toBe(1);
      expect(metricTotal('Rejected')).toBe(1);
    });

    it('re-defers a message whose notBefore is ahead without claiming it or taking a slot, and runs it once it has passed', async () => {
      const publisher = new SqsPublisher();
      const publish = jest.spyOn(publisher, 'publish');
      const acquire = jest.fn(async (_key: string, count: number) => ({
        granted: count,
        startAtMs: Array(count).fill(0),
        waitMs: 0,
      }));
      const handle = consumer({
        queueUrl: await freshQueue(),
        limiter: { acquire },
        publisher,
        pacing: { lateToleranceMs: Number.MAX_SAFE_INTEGER },
      });
      const notBefore = new Date(NOW.getTime() + 2_000_000).toISOString();
      const chained = body('chained', undefined, {
        attempt: 2,
        firstEnqueuedAt: '2026-11-29T01:50:00.000Z',
        notBefore,
      });

      expect(await handle(sqsEvent(sqsRecord(chained)), lambdaContext())).toEqual({ batchItemFailures: [] });
      expect(acquire).not.toHaveBeenCalled();
      expect(fakeJobCalls.apply).toEqual([]);
      expect(await idempotencyItem('fake:chained:2026-11-28')).toBeUndefined();
      const [, [sent]] = publish.mock.calls[0];
      expect(sent.delaySeconds).toBe(900);
      // Same target, same attempt (a continuation is not a new deferral), same first enqueue.
      expect(JSON.parse(sent.body)).toEqual({ ...JSON.parse(chained), enqueuedAt: NOW.toISOString() });

      const last = body('chained', undefined, {
        attempt: 2,
        firstEnqueuedAt: '2026-11-29T01:50:00.000Z',
        notBefore: new Date(NOW.getTime() + 12_300).toISOString(),
      });
      await handle(sqsEvent(sqsRecord(last)), lambdaContext());
      const [, [final]] = publish.mock.calls[1];
      expect(final.delaySeconds).toBe(13);
      expect(JSON.parse(final.body)).not.toHaveProperty('notBefore');

      const due = body('chained', undefined, {
        attempt: 2,
        firstEnqueuedAt: '2026-11-29T01:50:00.000Z',
        notBefore: '2026-11-29T02:00:04.000Z',
      });
      expect(await handle(sqsEvent(sqsRecord(due)), lambdaContext())).toEqual({ batchItemFailures: [] });
      expect(acquire).toHaveBeenCalledTimes(1);
      expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual(['fake:chained:2026-11-28']);
    });
  });

  describe('Method: handler (a record that overruns)', () => {
    /** A job whose `hang-*` resources run until `release` resolves (or 5 s): a call hanging towards its timeout. */
    function hangingJob(release: Promise<unknown>) {
      const applied: string[] = [];
      const job = {
        ...fakeJob,
        apply: async (deps: unknown, request: Parameters<typeof fakeJob.apply>[1]) => {
          if (request.resource.id.startsWith('hang-')) {
            let timer: NodeJS.Timeout | undefined;
            await Promise.race([release, new Promise((r) => (timer = setTimeout(r, 5_000)))]);
            clearTimeout(timer);
          }
          applied.push(request.resource.id);
          return fakeJob.apply(deps as Parameters<typeof fakeJob.apply>[0], request);
        },
      };
      return { job, applied };
    }

    it('sends the records behind a record that runs past its release time back to the queue while it still runs', async () => {
      const batchId = 'fake-job:2026-11-28:release';
      const publisher = new SqsPublisher();
      let published!: () => void;
      const publishedWhileRunning = new Promise<void>((resolve) => (published = resolve));
      const publish = jest.spyOn(publisher, 'publish').mockImplementation(async function (this: SqsPublisher, ...args) {
        published();
        return SqsPublisher.prototype.publish.apply(this, args);
      });
      const { job, applied } = hangingJob(publishedWhileRunning);
      const records = ['done-0', 'hang-1', 'behind-2', 'behind-3'].map((k) =>
        sqsRecord(body(k, undefined, { batchId })),
      );
      // A release time far above a claim and apply on the local table (done-0's), even on a loaded machine: at 50 ms a
      // loaded dynalite made done-0 itself overrun, releasing hang-1 before it started. hang-1 runs until the release.
      const response = await consumer({ job, queueUrl: await freshQueue(), publisher, releaseAfterMs: 1_000 })(
        sqsEvent(...records),
        lambdaContext(),
      );

      expect(response).toEqual({ batchItemFailures: [] });
      // The hanging record ran on (it finished only once the others were sent); the two behind it never started here.
      expect(applied).toEqual(['done-0', 'hang-1']);
      expect(publish).toHaveBeenCalledTimes(1);
      const [, sent] = publish.mock.calls[0];
      expect(sent.map((m) => m.operationId)).toEqual(['fake:behind-2:2026-11-28', 'fake:behind-3:2026-11-28']);
      // Sent as they came (the same operation, not claimed), delayed a little, and acknowledged here.
      expect(sent.every((m) => (m.delaySeconds ?? 0) >= 1)).toBe(true);
      expect(JSON.parse(sent[0].body)).toMatchObject({ operationId: 'fake:behind-2:2026-11-28', pacedDeferrals: 1 });
      expect(await idempotencyItem('fake:behind-2:2026-11-28')).toBeUndefined();
      expect(metricTotal('RecordsReleased')).toBe(2);
      expect(metricTotal('Deferred')).toBe(2);
      expect(await batchItem(batchId)).toMatchObject({ completed: 2, deferred: 2 });
    });

    it('keeps its batch behind a record that is only slow', async () => {
      const publisher = new SqsPublisher();
      const publish = jest.spyOn(publisher, 'publish');
      // 150 ms against the default release time: at least RELEASE_FLOOR_MS (2 s).
      const { job, applied } = hangingJob(new Promise((r) => setTimeout(r, 150)));
      const records = ['hang-slow', 'after-1', 'after-2'].map((k) => sqsRecord(body(k)));
      const response = await consumer({ job, queueUrl: await freshQueue(), publisher })(
        sqsEvent(...records),
        lambdaContext(),
      );

      expect(response).toEqual({ batchItemFailures: [] });
      expect(applied).toEqual(['hang-slow', 'after-1', 'after-2']);
      expect(publish).not.toHaveBeenCalled();
      expect(metricTotal('RecordsReleased')).toBe(0);
    });

    it('fails the released records SQS did not take, so SQS redelivers them', async () => {
      const publisher = new SqsPublisher();
      let published!: () => void;
      const attempted = new Promise<void>((resolve) => (published = resolve));
      jest.spyOn(publisher, 'publish').mockImplementation(async () => {
        published();
        throw new Error('SQS unavailable');
      });
      const { job, applied } = hangingJob(attempted);
      const records = ['hang-a', 'lost-b'].map((k) => sqsRecord(body(k)));
      const response = await consumer({ job, queueUrl: await freshQueue(), publisher, releaseAfterMs: 50 })(
        sqsEvent(...records),
        lambdaContext(),
      );

      expect(applied).toEqual(['hang-a']);
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: records[1].messageId }] });
    });
  });

  describe('Method: handler (throttling)', () => {
    let stub: HttpStub;
    beforeAll(async () => {
      stub = await startHttpStub();
    });
    afterAll(async () => {
      await stub.close();
    });

    /**
     * A job that calls a provider over HTTP as a job's client does (the job API's parseRetryAfter, ThrottledError on a
     * 429 or 503), so Retry-After is parsed as in production.
     */
    const providerJob = (): AnyJob => ({
      ...fakeJob,
      apply: async (_deps: unknown, request: ApplyRequest<{ id: string }>) => {
        fakeJobCalls.apply.push(request as never);
        const what = `provider call for ${request.resource.id}`;
        const response = await fetch(`${stub.url}/items/${encodeURIComponent(request.resource.id)}`, {
          method: 'POST',
          signal: AbortSignal.timeout(2000),
        });
        await response.text();
        if (response.status === 429 || response.status === 503) {
          const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), NOW.getTime());
          throw new ThrottledError(
            `${what}: provider answered ${response.status}${retryAfterMs === undefined ? '' : ` (retry after ${retryAfterMs} ms)`}`,
            retryAfterMs,
          );
        }
        if (!response.ok) throw new RetryableError(`${what}: provider answered ${response.status}`);
        return { outcome: 'applied' as const };
      },
    });

    it('defers a 429 with Retry-After: 7 by exactly 7 s, counting it as throttled and deferred, never failed', async () => {
      stub.reply(429, { error: 'slow down' }, { 'retry-after': '7' });
      const batchId = 'fake-job:2026-11-28:retry-after';
      const queueUrl = await freshQueue();
      const publisher = new SqsPublisher();
      const publish = jest.spyOn(publisher, 'publish');
      const response = await consumer({ queueUrl, job: providerJob(), publisher })(
        sqsEvent(sqsRecord(body('ra-7', undefined, { batchId }))),
        lambdaContext(),
      );

      expect(response).toEqual({ batchItemFailures: [] });
      expect(publish.mock.calls.map(([url, [m]]) => [url, m.delaySeconds, JSON.parse(m.body).attempt])).toEqual([
        [queueUrl, 7, 1],
      ]);
      const sqs = new SQSClient({});
      const { Attributes } = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessagesDelayed'] }),
      );
      sqs.destroy();
      expect(Attributes?.ApproximateNumberOfMessagesDelayed).toBe('1');
      expect(await idempotencyItem('fake:ra-7:2026-11-28')).toBeUndefined();
      expect(await batchItem(batchId)).toMatchObject({ throttled: 1, deferred: 1 });
      expect(metricTotal('Failed')).toBe(0);
    });

    it('backs off within the full-jitter bounds when Retry-After is junk', async () => {
      stub.reply(503, 'maintenance', { 'retry-after': 'soon-ish' });
      const delays: number[] = [];
      const queueUrl = await freshQueue();
      for (const r of [0, 0.5, 0.999]) {
        const publisher = new SqsPublisher();
        const publish = jest.spyOn(publisher, 'publish');
        const deferralPolicy = createDeferralPolicy({ random: () => r, backoff: { baseMs: 2000, capMs: 900_000 } });
        await consumer({ queueUrl, job: providerJob(), publisher, deferralPolicy })(
          sqsEvent(sqsRecord(body(`junk-${String(r).replace('.', '')}`, undefined, { attempt: 2 }))),
          lambdaContext(),
        );
        delays.push(publish.mock.calls[0][1][0].delaySeconds as number);
      }
      // Attempt 2: a uniform wait in [0, 8000) ms, rounded up to whole seconds, at least 1 s.
      expect(delays).toEqual([1, 4, 8]);
    });

    it('dead-letters an operation whose deferral budget is spent, with the reason', async () => {
      stub.reply(429, { error: 'slow down' }, { 'retry-after': '7' });
      const batchId = 'fake-job:2026-11-28:budget';
      const tired = body('tired', undefined, { batchId, attempt: 100 });
      const old = body('old', undefined, { batchId, firstEnqueuedAt: '2026-11-27T02:00:00.000Z', attempt: 3 });
      const deferralPolicy = createDeferralPolicy({ maxAgeSeconds: 86_400 });
      const response = await consumer({ job: providerJob(), deferralPolicy })(
        sqsEvent(sqsRecord(tired), sqsRecord(old)),
        lambdaContext(),
      );

      expect(response).toEqual({ batchItemFailures: [] });
      const dead = await drainQueue(dlqUrl);
      const reason = (operationId: string) =>
        dead.find((m) => m.MessageAttributes?.operationId?.StringValue === operationId)?.MessageAttributes
          ?.failureReason?.StringValue;
      const provider = `throttled: provider call for %s: provider answered 429 (retry after 7000 ms)`;
      expect(reason('fake:tired:2026-11-28')).toBe(
        `deferral budget exhausted: 100 deferrals, the limit is 100 (${provider.replace('%s', 'tired')})`,
      );
      expect(reason('fake:old:2026-11-28')).toBe(
        `deferral budget exhausted: first enqueued 172805 s ago, over the 86400 s limit (${provider.replace('%s', 'old')})`,
      );
      // Re-armed for a redrive: the deferral count starts again, the first enqueue is kept for the true age.
      const bodies = Object.fromEntries(
        dead.map((m) => [JSON.parse(m.Body as string).operationId, JSON.parse(m.Body as string)]),
      );
      expect(bodies['fake:tired:2026-11-28']).toEqual({
        ...JSON.parse(tired),
        firstEnqueuedAt: '2026-11-29T02:00:00.000Z',
        attempt: 0,
        pacedDeferrals: 0,
      });
      expect(bodies['fake:old:2026-11-28']).toEqual({ ...JSON.parse(old), attempt: 0, pacedDeferrals: 0 });
      expect(await drainQueue(queueUrl)).toEqual([]);
      expect(await batchItem(batchId)).toMatchObject({ throttled: 2, deadLettered: 2 });
    });

    it('tells the adaptive rate once per invocation: a cut after any 429, a recovery step after successes only', async () => {
      stub.reply(429, { error: 'slow down' }, { 'retry-after': '7' });
      const limiter = new AdaptiveDynamoDbRateLimiter({
        tableName: LIMITER_TABLE,
        limits: { startsPerInterval: 1000, intervalMs: 1000 },
        refreshMs: 0,
      });
      const throttled = jest.spyOn(limiter, 'throttled');
      const succeeded = jest.spyOn(limiter, 'succeeded');
      const options = {
        queueUrl: await freshQueue(),
        limiter,
        rateFeedback: limiter,
        pacing: { key: 'adaptive', lateToleranceMs: 60_000 },
      };

      const lines: Record<string, unknown>[] = [];
      jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        return true;
      });
      logger.setLogLevel('INFO');
      let response;
      try {
        response = await consumer({ ...options, job: providerJob() })(
          sqsEvent(sqsRecord(body('ad-1')), sqsRecord(body('ad-2'))),
          lambdaContext(),
        );
      } finally {
        logger.setLogLevel('SILENT');
      }
      expect(response).toEqual({ batchItemFailures: [] });
      // With the invocation's counts: both starts, both refused (the rule's evidence for a storm or a line).
      expect(throttled.mock.calls).toEqual([['adaptive', { starts: 2, throttles: 2 }]]);
      // The operator sees the change once, from the instance that made it.
      expect(lines.filter((l) => String(l.message).startsWith('adaptive rate'))).toEqual([
        expect.objectContaining({
          message: 'adaptive rate lowered after a throttle',
          key: 'adaptive',
          from: 1000,
          to: 500,
        }),
      ]);
      expect(succeeded).not.toHaveBeenCalled();
      // Shared through the limiter table: any container building its own limiter now paces at half the rate.
      const other = new AdaptiveDynamoDbRateLimiter({
        tableName: LIMITER_TABLE,
        limits: { startsPerInterval: 1000, intervalMs: 1000 },
      });
      expect(await other.currentRate('adaptive')).toBe(500);

      await consumer(options)(sqsEvent(sqsRecord(body('ad-3'))), lambdaContext());
      expect(succeeded.mock.calls).toEqual([['adaptive', { starts: 1, throttles: 0 }]]);
      expect(throttled).toHaveBeenCalledTimes(1);
    });

    it('keeps the records settled when the adaptive rate cannot be updated', async () => {
      const rateFeedback = {
        throttled: jest.fn(),
        succeeded: jest.fn(async () => Promise.reject(new Error('table gone'))),
      };
      const response = await consumer({ rateFeedback })(sqsEvent(sqsRecord(body('feedback-down'))), lambdaContext());
      expect(response).toEqual({ batchItemFailures: [] });
      expect(rateFeedback.succeeded).toHaveBeenCalledTimes(1);
      expect(await idempotencyItem('fake:feedback-down:2026-11-28')).toMatchObject({ status: 'COMPLETED' });
    });

    it('ends a 429 storm with every operation applied exactly once, receive counts at 1 and nothing in the DLQ', async () => {
      const THROTTLES = 3;
      const batchId = 'fake-job:2026-11-28:storm';
      const queueUrl = await freshQueue();
      const calls = new Map<string, number>();
      const effects: string[] = [];
      const stormJob: AnyJob = {
        ...fakeJob,
        apply: async (_deps: unknown, request: ApplyRequest<{ id: string }>) => {
          const n = (calls.get(request.operationId) ?? 0) + 1;
          calls.set(request.operationId, n);
          if (n <= THROTTLES) throw new ThrottledError(`provider answered 429 for ${request.resource.id}`, 0);
          effects.push(request.operationId);
          return { outcome: 'applied' as const };
        },
      };
      const handle = consumer({
        queueUrl,
        job: stormJob,
        deferralPolicy: createDeferralPolicy({ minDelaySeconds: 0 }),
      });
      const ids = Array.from({ length: 5 }, (_, i) => `storm-${i}`);
      await sendBodies(
        queueUrl,
        ids.map((id) => body(id, undefined, { batchId })),
      );

      const receiveCounts = new Set<string>();
      for (let round = 0; round < 20 && effects.length < ids.length; round++) {
        const event = await receiveEvent(queueUrl);
        if (event.Records.length === 0) continue;
        for (const r of event.Records) receiveCounts.add(r.attributes.ApproximateReceiveCount);
        const response = await handle(event, lambdaContext());
        expect(response).toEqual({ batchItemFailures: [] });
        await acknowledge(queueUrl, event, response);
      }

      expect(effects.sort()).toEqual(ids.map((id) => `fake:${id}:2026-11-28`).sort());
      expect([...calls.values()]).toEqual(Array(5).fill(THROTTLES + 1));
      expect([...receiveCounts]).toEqual(['1']);
      expect(await drainQueue(dlqUrl)).toEqual([]);
      expect(await drainQueue(queueUrl)).toEqual([]);
      expect(await batchItem(batchId)).toMatchObject({ completed: 5, throttled: 15, deferred: 15 });
      expect(metricTotal('DeadLettered')).toBe(0);
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
      jobName: 'fake-job',
      pageSize: 10,
      maxPagesPerRun: 5,
      maxMessageBytes: 4096,
      businessDateOffsetDays: 0,
      timeZone: 'UTC',
      rateLimit: { startsPerInterval: 1, intervalSeconds: 1, burst: 1 },
      concurrency: 1,
      tables: {},
      buckets: {},
      secrets: {},
      settings: { items: 3 },
    }),
    QUEUE_URL: 'http://queue',
    DLQ_URL: 'http://dlq',
    IDEMPOTENCY_TABLE_NAME: 'idem',
    LEDGER_TABLE_NAME: 'ledger',
    LIMITER_TABLE_NAME: 'limiter',
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

  it("hands the planner the job's business-date rule and queue retention, and bounds the deferral age by the retention", () => {
    const settings = JSON.parse(env.JOB_SETTINGS);
    const options = consumerOptionsFromEnv(
      {
        ...env,
        JOB_SETTINGS: JSON.stringify({
          ...settings,
          timeZone: 'Europe/London',
          businessDateOffsetDays: -1,
          queueRetentionSeconds: 3600,
        }),
      },
      loadFixture,
    );
    expect(options).toMatchObject({
      businessDates: { timeZone: 'Europe/London', businessDateOffsetDays: -1 },
      queueRetentionSeconds: 3600,
    });
    const nowMs = Date.parse('2026-11-29T02:00:00.000Z');
    const paced = { cause: { kind: 'paced' as const, waitMs: 0 }, attempt: 0, nowMs };
    expect(options.deferralPolicy?.({ ...paced, firstEnqueuedAtMs: nowMs - 3_601_000 })).toEqual({
      action: 'dead-letter',
      reason:
        'deferral budget exhausted: first enqueued 3601 s ago, over the 3600 s limit (no rate-limit slot within the short wait (next in 0 ms))',
    });
    expect(options.deferralPolicy?.({ ...paced, firstEnqueuedAtMs: nowMs - 3_599_000 })).toMatchObject({
      action: 'defer',
    });
  });

  it('runs without the shared limiter when the job sets pacing: false', () => {
    const settings = JSON.parse(env.JOB_SETTINGS);
    const options = consumerOptionsFromEnv(
      { ...env, JOB_SETTINGS: JSON.stringify({ ...settings, pacing: { enabled: false } }) },
      loadFixture,
    );
    expect((options.pacer as LimiterPacer).options.limiter).toBeUndefined();
    expect((options.pacer as LimiterPacer).options.rateFeedback).toBeUndefined();
  });

  it('paces on the shared limiter table with the allowance from JOB_SETTINGS and the downstream key', () => {
    const settings = JSON.parse(env.JOB_SETTINGS);
    const options = consumerOptionsFromEnv(
      {
        ...env,
        JOB_SETTINGS: JSON.stringify({
          ...settings,
          rateLimit: { startsPerInterval: 10, intervalSeconds: 60, burst: 1 },
          pacing: { downstreamKey: 'provider' },
        }),
      },
      loadFixture,
    );
    const { limiter, rateFeedback, key, shortWaitMs, lateToleranceMs, spacingMs } = (options.pacer as LimiterPacer)
      .options;
    expect(limiter).toBeInstanceOf(AdaptiveDynamoDbRateLimiter);
    expect((limiter as AdaptiveDynamoDbRateLimiter).tableName).toBe('limiter');
    expect(rateFeedback).toBe(limiter);
    // One start every (60 s + the 250 ms margin) / 10.
    expect({ key, shortWaitMs, lateToleranceMs, spacingMs }).toEqual({
      key: 'provider',
      shortWaitMs: 10_000,
      lateToleranceMs: 125,
      spacingMs: 6025,
    });
  });

  it('keeps the rate as configured when adaptiveRate is false', () => {
    const settings = JSON.parse(env.JOB_SETTINGS);
    const options = consumerOptionsFromEnv(
      { ...env, JOB_SETTINGS: JSON.stringify({ ...settings, pacing: { adaptiveRate: false } }) },
      loadFixture,
    );
    expect((options.pacer as LimiterPacer).options.rateFeedback).toBeUndefined();
  });

  it('names a missing limiter table', () => {
    const { LIMITER_TABLE_NAME: _omitted, ...rest } = env;
    expect(() => consumerOptionsFromEnv(rest, loadFixture)).toThrow(
      'environment variable LIMITER_TABLE_NAME is not set',
    );
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
