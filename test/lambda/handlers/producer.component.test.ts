import { BACKFILL_GROUP } from '../../../lambda/core/fairness';
import { DeleteCommand, GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { Context, SQSBatchResponse } from 'aws-lambda';
import { DynamoRunStateStore } from '../../../lambda/adapters/admissionState';
import type { AdmissionStep } from '../../../lambda/core/admissionStep';
import { documentClient, resetClients } from '../../../lambda/adapters/clients';
import { logger, metrics } from '../../../lambda/adapters/observability';
import {
  PublishError,
  SqsPublisher,
  type OutgoingMessage,
  type Publisher,
} from '../../../lambda/adapters/sqsPublisher';
import { stalledSince } from '../../../lambda/core/admission';
import type { AnyJob } from '../../../lambda/core/job';
import { parseMessage } from '../../../lambda/core/message';
import { FutureBusinessDateError } from '../../../lambda/core/businessDate';
import { stoppedChains, type RunLedgerItem } from '../../../chaos/producerFaults';
import {
  admissionOptions,
  createProducer,
  handler,
  ProducerEventError,
  producerOptionsFromEnv,
  type ProducerOptions,
  type ProducerSummary,
} from '../../../lambda/handlers/producer';
import { fakeJobCalls, job as fakeJob } from '../../fixtures/jobs/fake-job';
import { startLocalAws, type LocalAws } from '../../support/aws';
import { lambdaContext, sqsEvent, sqsRecord } from '../../support/lambdaEvents';
import { createLedgerTable, createQueue, drainQueue, fakeSettings } from './harness';

const LEDGER_TABLE = 'ledger';
const NOW = new Date('2026-11-29T01:00:03.000Z');
const NOW_MS = NOW.getTime();
// 02:00 in Berlin on the 29th; the fake settings cover the previous day.
const SCHEDULED = '2026-11-29T01:00:00Z';
const BATCH = 'fake-job:2026-11-28:20261129T010000Z';
const ADMISSION_QUEUE = 'http://admission-queue';

let aws: LocalAws;
let queueUrl: string;

/** Records what was sent where (with each message's delay); forwards the work queue's messages to real SQS. */
class RecordingPublisher implements Publisher {
  readonly sent: { queueUrl: string; message: OutgoingMessage }[] = [];
  private readonly real = new SqsPublisher({ sleep: async () => undefined });
  failNextWorkPublish = false;

  async publish(url: string, messages: OutgoingMessage[]) {
    if (url === queueUrl && this.failNextWorkPublish) {
      this.failNextWorkPublish = false;
      // Two of the page's messages went out before the failure, as a partial SendMessageBatch would leave them.
      await this.real.publish(url, messages.slice(0, 2));
      throw new PublishError(`failed to publish ${messages.length - 2} of ${messages.length} messages`, url, {}, 2);
    }
    for (const message of messages) this.sent.push({ queueUrl: url, message });
    if (url === queueUrl)
      return this.real.publish(
        url,
        messages.map((m) => ({ ...m, delaySeconds: 0 })),
      );
    return { published: messages.length, calls: 1, retried: 0 };
  }

  steps(): { step: AdmissionStep; delaySeconds: number }[] {
    return this.sent
      .filter((s) => s.queueUrl === ADMISSION_QUEUE)
      .map((s) => ({ step: JSON.parse(s.message.body) as AdmissionStep, delaySeconds: s.message.delaySeconds ?? 0 }));
  }

  workDelays(): number[] {
    return this.sent.filter((s) => s.queueUrl === queueUrl).map((s) => s.message.delaySeconds ?? 0);
  }
}

let publisher: RecordingPublisher;

function producer(items: number, overrides: Partial<ProducerOptions> = {}) {
  return createProducer({
    job: fakeJob,
    jobDeps: { items },
    settings: fakeSettings(),
    queueUrl,
    admissionQueueUrl: ADMISSION_QUEUE,
    maxMessageBytes: 4096,
    runState: new DynamoRunStateStore({ tableName: LEDGER_TABLE }),
    admission: { ratePerSecond: undefined, horizonMs: 0, groupSize: 10 },
    publisher,
    queueDepth: async () => 0,
    now: () => NOW,
    ...overrides,
  });
}

/** 1 start per second, a 30 s horizon, groups of 10: step 0 admits 30 messages, visible at +0, +10 and +20 s. */
const paced = { ratePerSecond: 1, horizonMs: 30_000, groupSize: 10 };

const direct = async (handle: ReturnType<typeof producer>, event: unknown, context: Context = lambdaContext()) =>
  (await handle(event, context)) as ProducerSummary;
const fromQueue = async (
  handle: ReturnType<typeof producer>,
  step: AdmissionStep,
  context: Context = lambdaContext(),
) => (await handle(sqsEvent(sqsRecord(JSON.stringify(step))), context)) as SQSBatchResponse;

async function batchItem(batchId: string) {
  const { Item } = await documentClient().send(
    new GetCommand({ TableName: LEDGER_TABLE, Key: { pk: 'BATCH#fake-job', sk: batchId } }),
  );
  return Item;
}

/**
 * Removes every run of the fake job from the ledger: a run of a date waits while an earlier run of the same date is
 * still admitting, so a test's runs must not wait behind the runs an earlier test left mid-admission.
 */
async function clearRuns(): Promise<void> {
  const { Items = [] } = await documentClient().send(
    new QueryCommand({
      TableName: LEDGER_TABLE,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': 'BATCH#fake-job' },
      ProjectionExpression: 'pk, sk',
    }),
  );
  for (const item of Items)
    await documentClient().send(new DeleteCommand({ TableName: LEDGER_TABLE, Key: { pk: item.pk, sk: item.sk } }));
}

async function clearRun(batchId: string): Promise<void> {
  await documentClient().send(
    new DeleteCommand({ TableName: LEDGER_TABLE, Key: { pk: 'BATCH#fake-job', sk: batchId } }),
  );
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
    publisher = new RecordingPublisher();
    jest.restoreAllMocks();
    jest.spyOn(metrics, 'addMetric').mockImplementation(() => metrics);
    await drainQueue(queueUrl);
    await clearRuns();
  });

  describe('Method: handler (unlimited admission)', () => {
    it('publishes one validated message per operation and records the run in the ledger', async () => {
      const summary = await direct(producer(3), { scheduledTime: SCHEDULED });

      expect(summary).toEqual({
        batchId: BATCH,
        businessDate: '2026-11-28',
        step: 0,
        outcome: 'admitted',
        pages: 1,
        discovered: 3,
        published: 3,
        continued: false,
        finished: true,
        stoppedAtPageLimit: false,
      });
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
        admission: 'complete',
        step: 1,
        pages: 1,
      });
      expect(await batchItem(BATCH)).not.toHaveProperty('leaseOwner');
      expect(publisher.steps()).toEqual([]);
      expect(metrics.addMetric).toHaveBeenCalledWith('Published', 'Count', 3);
    });

    it('walks every page from the cursor while time remains, with no delay', async () => {
      const summary = await direct(producer(55), { scheduledTime: SCHEDULED, batchId: 'fake-job:2026-11-28:pages' });

      expect(summary).toMatchObject({ pages: 3, discovered: 55, published: 55, continued: false, finished: true });
      expect(fakeJobCalls.discover).toEqual([
        { businessDate: '2026-11-28', cursor: undefined, pageSize: 25 },
        { businessDate: '2026-11-28', cursor: '25', pageSize: 25 },
        { businessDate: '2026-11-28', cursor: '50', pageSize: 25 },
      ]);
      expect(await publishedOperationIds()).toHaveLength(55);
      expect(new Set(publisher.workDelays())).toEqual(new Set([0]));
    });

    it('continues through the admission queue at once when the time budget runs low, and the next step finishes the run', async () => {
      const batchId = 'fake-job:2026-11-28:continued';
      // 100 s at the start; 25 s after the first page, under the 30 s reserve (30% of the budget).
      const remaining = [100_000, 25_000];
      const context = lambdaContext(() => remaining.shift() ?? 25_000);
      const handle = producer(55);

      expect(await direct(handle, { scheduledTime: SCHEDULED, batchId }, context)).toMatchObject({
        pages: 1,
        discovered: 25,
        continued: true,
        nextStepInSeconds: 0,
        finished: false,
      });
      expect(publisher.steps()).toEqual([
        {
          step: { kind: 'admission-step', batchId, businessDate: '2026-11-28', step: 1, scheduledTime: SCHEDULED },
          delaySeconds: 0,
        },
      ]);
      expect(await batchItem(batchId)).toMatchObject({
        step: 1,
        cursor: '25',
        admission: 'admitting',
        continuationSent: 1,
      });
      expect(await batchItem(batchId)).not.toHaveProperty('finishedAt');

      expect(await fromQueue(handle, publisher.steps()[0].step)).toEqual({ batchItemFailures: [] });
      expect(await publishedOperationIds()).toHaveLength(55);
      expect(await batchItem(batchId)).toMatchObject({
        step: 2,
        discovered: 55,
        published: 55,
        pages: 3,
        admission: 'complete',
        startedAt: NOW.toISOString(),
        finishedAt: NOW.toISOString(),
      });
    });

    it('publishes at least one page per step however short the timeout, so the chain always makes progress', async () => {
      const batchId = 'fake-job:2026-11-28:short-timeout';
      // A 15 s function whose first page already took nearly all of it.
      const remaining = [15_000, 1_000];
      const summary = await direct(
        producer(55),
        { scheduledTime: SCHEDULED, batchId },
        lambdaContext(() => remaining.shift() ?? 1_000),
      );
      expect(summary).toMatchObject({ pages: 1, discovered: 25, continued: true, nextStepInSeconds: 0 });
      // A 15 s function is not all reserve: half of it at most, so one with time to spare walks on.
      // (Another date: a second run of the same date would wait for the first, still admitting.)
      const roomy = await direct(
        producer(55),
        { businessDate: '2026-11-27', batchId: 'fake-job:2026-11-27:short-timeout-roomy' },
        lambdaContext(() => 15_000),
      );
      expect(roomy).toMatchObject({ pages: 3, discovered: 55, continued: false, finished: true });
    });

    it('does nothing when the same scheduled run is delivered again after it finished', async () => {
      const handle = producer(12);
      const a = await direct(handle, { scheduledTime: SCHEDULED, batchId: 'fake-job:2026-11-28:again' });
      const firstIds = await publishedOperationIds();
      const b = await direct(handle, { scheduledTime: SCHEDULED, batchId: 'fake-job:2026-11-28:again' });
      expect(b).toMatchObject({ batchId: a.batchId, outcome: 'stale', published: 0 });
      expect(await publishedOperationIds()).toEqual([]);
      expect(firstIds).toHaveLength(12);
      expect(await batchItem(a.batchId)).toMatchObject({ discovered: 12, published: 12 });
    });

    it('names the batch by its scheduled time, so a repeated schedule has the same batch and operation IDs', async () => {
      const a = await direct(producer(2, { now: () => new Date('2026-11-30T01:00:03Z') }), {
        scheduledTime: '2026-11-30T01:00:00Z',
      });
      expect(a.batchId).toBe('fake-job:2026-11-29:20261130T010000Z');
      expect(await publishedOperationIds()).toEqual(['fake:item-0:2026-11-29', 'fake:item-1:2026-11-29']);
    });

    it('honours an explicit business date, and names a run without a scheduled time as a new manual batch', async () => {
      const summary = await direct(producer(1), { businessDate: '2026-10-01' });
      expect(summary.businessDate).toBe('2026-10-01');
      expect(summary.batchId).toMatch(/^fake-job:2026-10-01:manual-[0-9a-f]{8}$/);
      expect(await publishedOperationIds()).toEqual(['fake:item-0:2026-10-01']);
    });

    it('derives the business date from the current time when the event is empty', async () => {
      const summary = await direct(producer(0), undefined);
      expect(summary).toMatchObject({
        businessDate: '2026-11-28',
        pages: 1,
        discovered: 0,
        published: 0,
        finished: true,
      });
    });

    it('stops at maxPagesPerRun with a warning and no continuation', async () => {
      const warn = jest.spyOn(logger, 'warn');
      const handle = producer(100, { settings: fakeSettings({ pageSize: 10, maxPagesPerRun: 2 }) });
      const summary = await direct(handle, { scheduledTime: SCHEDULED, batchId: 'fake-job:2026-11-28:capped' });

      expect(summary).toMatchObject({ pages: 2, published: 20, continued: false, stoppedAtPageLimit: true });
      expect(publisher.steps()).toEqual([]);
      expect(await batchItem('fake-job:2026-11-28:capped')).toMatchObject({ admission: 'page-limit', cursor: '20' });
      expect(warn).toHaveBeenCalledWith(
        'stopped at maxPagesPerRun with work remaining; raise it or the page size, or catch up',
        {
          maxPagesPerRun: 2,
          cursor: '20',
        },
      );
    });

    it('rejects an invalid event, naming every problem', async () => {
      await expect(producer(1)({ businessDate: '2026-02-30', batchId: 'has space' }, lambdaContext())).rejects.toThrow(
        new ProducerEventError(
          'invalid producer event: businessDate: must be a real calendar date; batchId: may hold only letters, digits and : _ . @ # / + = - (no spaces or control characters)',
          [],
        ),
      );
    });

    it("refuses a direct invoke of a business date after the job's latest, naming it, before it reads or writes anything", async () => {
      const error = jest.spyOn(logger, 'error');
      const message =
        'business date 2027-12-04 is in the future: the latest for fake-job now is 2026-11-28 (Europe/Berlin, offset -1)';

      await expect(producer(3)({ businessDate: '2027-12-04', backfill: true }, lambdaContext())).rejects.toThrow(
        new FutureBusinessDateError('fake-job', '2027-12-04', '2026-11-28', fakeSettings()),
      );
      await expect(
        producer(3)({ businessDate: '2026-11-29', batchId: 'fake-job:2026-11-29:manual' }, lambdaContext()),
      ).rejects.toThrow(
        'business date 2026-11-29 is in the future: the latest for fake-job now is 2026-11-28 (Europe/Berlin, offset -1)',
      );

      expect(error).toHaveBeenCalledWith('refused a business date in the future; nothing was admitted', {
        businessDate: '2027-12-04',
        error: expect.objectContaining({ message }),
      });
      expect(fakeJobCalls.discover).toEqual([]);
      expect(publisher.sent).toEqual([]);
      expect(await batchItem('fake-job:2026-11-29:manual')).toBeUndefined();
      expect(await publishedOperationIds()).toEqual([]);
    });

    it('refuses a Scheduler input whose scheduled time makes a business date after the latest', async () => {
      await expect(direct(producer(3), { scheduledTime: '2027-12-05T01:00:00Z' })).rejects.toThrow(
        'business date 2027-12-04 is in the future: the latest for fake-job now is 2026-11-28 (Europe/Berlin, offset -1)',
      );
      expect(fakeJobCalls.discover).toEqual([]);
      expect(await batchItem('fake-job:2027-12-04:20271205T010000Z')).toBeUndefined();
      expect(await publishedOperationIds()).toEqual([]);
    });

    it('counts nothing for a page whose publishing failed, and the retried step publishes it again from the same cursor', async () => {
      const batchId = 'fake-job:2026-11-28:failing';
      const handle = producer(3);
      const context = lambdaContext();
      publisher.failNextWorkPublish = true;
      await expect(direct(handle, { scheduledTime: SCHEDULED, batchId }, context)).rejects.toThrow(
        'failed to publish 1 of 3 messages',
      );
      expect(await batchItem(batchId)).toMatchObject({ step: 0, pages: 0, admission: 'admitting' });
      expect(await batchItem(batchId)).not.toHaveProperty('discovered');
      // The failed invocation gave its lease up before failing ...
      expect(await batchItem(batchId)).not.toHaveProperty('leaseOwner');
      expect(await batchItem(batchId)).not.toHaveProperty('leaseUntilMs');

      // ... so Lambda's retry (the same event, the same request ID) takes the step at once and re-publishes the page
      // from the same cursor; the ledger counts it once.
      expect(await direct(producer(3), { scheduledTime: SCHEDULED, batchId }, context)).toMatchObject({
        outcome: 'admitted',
        discovered: 3,
        published: 3,
        finished: true,
      });
      expect(await batchItem(batchId)).toMatchObject({ discovered: 3, published: 3, pages: 1, admission: 'complete' });
      // Two copies went out before the failure: idempotency absorbs them, the ledger never counted them.
      expect(await publishedOperationIds()).toEqual([
        'fake:item-0:2026-11-28',
        'fake:item-0:2026-11-28',
        'fake:item-1:2026-11-28',
        'fake:item-1:2026-11-28',
        'fake:item-2:2026-11-28',
      ]);
    });
  });

  describe('Method: handler (rows that cannot become messages)', () => {
    const BAD_BATCH = 'fake-job:2026-11-28:bad-rows';
    const SPACE_REASON =
      'operationId: may hold only letters, digits and : _ . @ # / + = - (no spaces or control characters)';

    /**
     * The fake job with bad rows on its first page: two it hands back itself, and three operations it returns anyway
     * that break the contract (an ID with a space, a resource its schema refuses, a message over the size cap).
     */
    const badRowsJob: AnyJob = {
      ...fakeJob,
      async discover(deps, request) {
        const page = await fakeJob.discover(deps, request);
        if (request.cursor !== undefined) return page;
        return {
          ...page,
          operations: [
            ...page.operations,
            { operationId: 'fake:has space:2026-11-28', resource: { id: 'has-space' } },
            { operationId: 'fake:BAD:2026-11-28', resource: { id: 'BAD' } },
            { operationId: 'fake:big:2026-11-28', resource: { id: 'big', tenant: 'x'.repeat(5000) } },
          ],
          invalid: [
            {
              key: 'row\u2028one',
              reason: 'uploadId: may hold only letters, digits and _ . @ # / + = - (no ":" or spaces)',
            },
            { key: 'row-two', reason: 'deleteAfter: must be a UTC timestamp with milliseconds' },
          ],
        };
      },
    };

    const invalidRowItems = async (batchId: string) => {
      const { Items = [] } = await documentClient().send(
        new QueryCommand({
          TableName: LEDGER_TABLE,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': `INVALID_ROW#fake-job#${batchId}` },
        }),
      );
      return Items.map(({ key, reasons, page, batchId: batch, job, rejectedAt, expiresAt }) => ({
        key,
        reasons,
        page,
        batchId: batch,
        job,
        rejectedAt,
        expiresAt,
      })).sort((a, b) => (String(a.key) < String(b.key) ? -1 : 1));
    };

    it('publishes the good operations, records each bad row with its key and reasons, counts them apart, and succeeds', async () => {
      const warn = jest.spyOn(logger, 'warn');
      const handle = producer(3, {
        job: badRowsJob,
        runState: new DynamoRunStateStore({ tableName: LEDGER_TABLE, now: () => NOW }),
      });

      const summary = await direct(handle, { scheduledTime: SCHEDULED, batchId: BAD_BATCH });

      expect(summary).toEqual({
        batchId: BAD_BATCH,
        businessDate: '2026-11-28',
        step: 0,
        outcome: 'admitted',
        pages: 1,
        discovered: 3,
        published: 3,
        invalidRows: 5,
        continued: false,
        finished: true,
        stoppedAtPageLimit: false,
      });
      expect(await publishedOperationIds()).toEqual([
        'fake:item-0:2026-11-28',
        'fake:item-1:2026-11-28',
        'fake:item-2:2026-11-28',
      ]);
      // discovered counts what was published, so completed + rejected + deadLettered = discovered still holds.
      expect(await batchItem(BAD_BATCH)).toMatchObject({
        discovered: 3,
        published: 3,
        invalidRows: 5,
        pages: 1,
        admission: 'complete',
      });
      const expiresAt = Math.floor(NOW_MS / 1000) + 14 * 86_400;
      const common = { page: 1, batchId: BAD_BATCH, job: 'fake-job', rejectedAt: NOW.toISOString(), expiresAt };
      expect(await invalidRowItems(BAD_BATCH)).toEqual([
        {
          key: 'fake:BAD:2026-11-28',
          reasons: ['resource.id: Invalid string: must match pattern /^[a-z0-9-]+$/'],
          ...common,
        },
        {
          key: 'fake:big:2026-11-28',
          reasons: [expect.stringMatching(/^body is \d+ bytes, over the 4096-byte cap$/)],
          ...common,
        },
        { key: 'fake:has space:2026-11-28', reasons: [SPACE_REASON], ...common },
        { key: 'row-two', reasons: ['deleteAfter: must be a UTC timestamp with milliseconds'], ...common },
        // A key is escaped as a reason is: a line separator would make the record read differently from what it holds.
        {
          key: 'row\\u2028one',
          reasons: ['uploadId: may hold only letters, digits and _ . @ # / + = - (no ":" or spaces)'],
          ...common,
        },
      ]);
      expect(metrics.addMetric).toHaveBeenCalledWith('DiscoveryRowsRejected', 'Count', 5);
      expect(warn).toHaveBeenCalledWith(
        'source rows that cannot become messages were recorded in the run ledger and skipped; `ops audit` lists them',
        expect.objectContaining({ page: 1, invalidRows: 5 }),
      );
    });

    it('writes the same records once when a failed step publishes the page again', async () => {
      const batchId = `${BAD_BATCH}-retried`;
      const context = lambdaContext();
      publisher.failNextWorkPublish = true;
      await expect(
        direct(producer(3, { job: badRowsJob }), { scheduledTime: SCHEDULED, batchId }, context),
      ).rejects.toThrow('failed to publish 1 of 3 messages');
      expect(await batchItem(batchId)).not.toHaveProperty('invalidRows');

      expect(
        await direct(producer(3, { job: badRowsJob }), { scheduledTime: SCHEDULED, batchId }, context),
      ).toMatchObject({ published: 3, invalidRows: 5 });
      expect(await batchItem(batchId)).toMatchObject({ discovered: 3, invalidRows: 5 });
      expect((await invalidRowItems(batchId)).map((i) => i.key)).toEqual([
        'fake:BAD:2026-11-28',
        'fake:big:2026-11-28',
        'fake:has space:2026-11-28',
        'row-two',
        'row\\u2028one',
      ]);
    });

    it('moves the cursor past a page of nothing but bad rows, and a step from the queue succeeds', async () => {
      const batchId = `${BAD_BATCH}-whole-page`;
      const allBadFirstPage: AnyJob = {
        ...fakeJob,
        async discover(deps, request) {
          if (request.cursor === undefined)
            return { operations: [], invalid: [{ key: 'only-row', reason: 'id: must not be empty' }], nextCursor: '0' };
          return fakeJob.discover(deps, request);
        },
      };
      await new DynamoRunStateStore({ tableName: LEDGER_TABLE }).ensure('fake-job', batchId, {
        businessDate: '2026-11-28',
        startedAt: NOW.toISOString(),
      });

      const response = await fromQueue(producer(2, { job: allBadFirstPage }), {
        kind: 'admission-step',
        batchId,
        businessDate: '2026-11-28',
        step: 0,
      });

      expect(response).toEqual({ batchItemFailures: [] });
      expect(await batchItem(batchId)).toMatchObject({
        pages: 2,
        discovered: 2,
        published: 2,
        invalidRows: 1,
        admission: 'complete',
      });
      expect(await publishedOperationIds()).toEqual(['fake:item-0:2026-11-28', 'fake:item-1:2026-11-28']);
      expect((await invalidRowItems(batchId)).map(({ key, reasons }) => ({ key, reasons }))).toEqual([
        { key: 'only-row', reasons: ['id: must not be empty'] },
      ]);
    });
  });

  describe('Method: handler (a job with a completion SLO)', () => {
    it('gives every message of the run its SLO deadline: the scheduled time plus the window', async () => {
      const handle = producer(2, { settings: fakeSettings({ slo: { objective: 0.99, completeWithinMinutes: 120 } }) });
      await direct(handle, { scheduledTime: SCHEDULED, batchId: 'fake-job:2026-11-28:slo' });
      const dueBy = (await drainQueue(queueUrl)).map((m) => JSON.parse(m.Body as string).dueBy);
      expect(dueBy).toEqual(['2026-11-29T03:00:00.000Z', '2026-11-29T03:00:00.000Z']);
      // Without an SLO, no deadline is carried.
      await direct(producer(1), { scheduledTime: SCHEDULED, batchId: 'fake-job:2026-11-28:no-slo' });
      expect((await drainQueue(queueUrl)).map((m) => JSON.parse(m.Body as string))).toEqual([
        expect.not.objectContaining({ dueBy: expect.anything() }),
      ]);
    });
  });

  describe('Method: handler (a page taken over after a kill)', () => {
    it('counts as discovered, once, what a killed attempt of a page found and the attempt that took the page over did not', async () => {
      const batchId = 'fake-job:2026-11-28:orphans';
      publisher.failNextWorkPublish = true;
      // The first attempt discovered three and published two before it failed (as a kill mid-publish would leave it).
      await expect(direct(producer(3), { scheduledTime: SCHEDULED, batchId })).rejects.toThrow(
        'failed to publish 1 of 3 messages',
      );
      // By the retry, item-2 is no longer eligible (another batch of the date applied it): the page finds two.
      expect(await direct(producer(2), { scheduledTime: SCHEDULED, batchId })).toMatchObject({
        outcome: 'admitted',
        discovered: 2,
        finished: true,
      });
      // The run discovered three operations: item-2 is its orphan, resolved by its completion record when read.
      expect(await batchItem(batchId)).toMatchObject({
        discovered: 3,
        published: 2,
        pages: 1,
        orphans: ['fake:item-2:2026-11-28'],
        admission: 'complete',
      });
      // Both attempts' pages are kept: the date's audit lists the union.
      const { Items } = await documentClient().send(
        new QueryCommand({
          TableName: LEDGER_TABLE,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': `PAGES#fake-job#${batchId}` },
        }),
      );
      expect((Items ?? []).map((i) => i.count).sort()).toEqual([2, 3]);
    });
  });

  describe('Method: handler (paced admission)', () => {
    it('admits one horizon of work, each group of one batch delayed to its first slot, and sends the next step for half a horizon later', async () => {
      const batchId = 'fake-job:2026-11-28:paced';
      const summary = await direct(producer(100, { admission: paced }), { scheduledTime: SCHEDULED, batchId });

      expect(summary).toMatchObject({
        pages: 2,
        discovered: 30,
        published: 30,
        continued: true,
        nextStepInSeconds: 5,
        finished: false,
      });
      // Pages of 25 then 5: never more than the horizon's 30.
      expect(fakeJobCalls.discover.map((d) => d.pageSize)).toEqual([25, 5]);
      expect(publisher.workDelays()).toEqual([...Array(10).fill(0), ...Array(10).fill(10), ...Array(10).fill(20)]);
      expect(publisher.steps()).toEqual([
        {
          step: { kind: 'admission-step', batchId, businessDate: '2026-11-28', step: 1, scheduledTime: SCHEDULED },
          delaySeconds: 5,
        },
      ]);
      expect(await batchItem(batchId)).toMatchObject({
        step: 1,
        cursor: '30',
        admission: 'admitting',
        plannedUntilMs: NOW_MS + 20_000,
        nextStepAt: new Date(NOW_MS + 5_000).toISOString(),
        admissionRatePerMinute: 60,
        discovered: 30,
        // The job's own count, taken once at the start: what is not yet admitted is eligible - discovered.
        eligible: 100,
      });
    });

    it("marks a catch-up's messages backfill, all in the one backfill group, keeps the mark in its next step, and a live run does not queue behind them", async () => {
      const settings = fakeSettings({ concurrencyPerKey: { field: 'id', maxConcurrent: 2 } });
      const catchUp = 'fake-job:2026-11-25:catch-up';
      await direct(producer(100, { admission: paced, settings }), {
        businessDate: '2026-11-25',
        batchId: catchUp,
        backfill: true,
      });

      const work = publisher.sent.filter((s) => s.queueUrl === queueUrl).map((s) => s.message);
      expect(work).toHaveLength(30);
      expect(work.every((m) => (JSON.parse(m.body) as { backfill?: boolean }).backfill === true)).toBe(true);
      // One tenant for all of backfill: with its backlog in flight, the fair queue delivers live work first.
      expect(new Set(work.map((m) => m.groupId))).toEqual(new Set([BACKFILL_GROUP]));
      expect(publisher.steps()[0].step).toMatchObject({ step: 1, backfill: true });
      expect(await batchItem(catchUp)).toMatchObject({ backfill: true, published: 30 });

      // Tonight's run beside it: the queue holds the catch-up's 30, which the consumers let live work pass.
      publisher = new RecordingPublisher();
      const live = await direct(producer(100, { admission: paced, settings, queueDepth: async () => 30 }), {
        scheduledTime: SCHEDULED,
        batchId: 'fake-job:2026-11-28:beside',
      });
      expect(live.published).toBe(30);
      expect(publisher.workDelays()).toEqual([...Array(10).fill(0), ...Array(10).fill(10), ...Array(10).fill(20)]);
      const liveWork = publisher.sent.filter((s) => s.queueUrl === queueUrl).map((s) => s.message);
      expect(liveWork.every((m) => !('backfill' in (JSON.parse(m.body) as object)))).toBe(true);
      // Live work's tenant is its key (here the resource's id, the job's per-key field).
      expect(liveWork.map((m) => m.groupId)).toEqual(
        liveWork.map((m) => (JSON.parse(m.body) as { resource: { id: string } }).resource.id),
      );
      // A queue of live work still comes first: 10 more than the catch-up's, and the run admits after them.
      publisher = new RecordingPublisher();
      await direct(producer(100, { admission: paced, settings, queueDepth: async () => 40 }), {
        scheduledTime: SCHEDULED,
        batchId: 'fake-job:2026-11-28:behind',
      });
      expect(publisher.workDelays()).toEqual([...Array(10).fill(10), ...Array(10).fill(20)]);
      // The catch-up's messages settled: no later test's run has them ahead of it.
      await documentClient().send(
        new DeleteCommand({ TableName: LEDGER_TABLE, Key: { pk: 'BATCH#fake-job', sk: catchUp } }),
      );
    });

    it('shows each group one batching window before its first slot, and plans from the slots', async () => {
      const batchId = 'fake-job:2026-11-28:lead';
      await direct(producer(100, { admission: { ...paced, leadMs: 3000 } }), { scheduledTime: SCHEDULED, batchId });
      expect(publisher.workDelays()).toEqual([...Array(10).fill(0), ...Array(10).fill(7), ...Array(10).fill(17)]);
      expect(await batchItem(batchId)).toMatchObject({ plannedUntilMs: NOW_MS + 20_000 });
    });

    it('admits after what the queue already holds, and only what fits the horizon', async () => {
      const batchId = 'fake-job:2026-11-28:queued';
      const depth = [0, 20];
      const handle = producer(100, { admission: paced, queueDepth: async () => depth.shift() ?? 0 });
      await direct(handle, { scheduledTime: SCHEDULED, batchId });
      publisher.sent.length = 0;

      // 20 messages still queued take 20 s; the run's own last message was planned at +20 s: the next starts at +21 s.
      await fromQueue(handle, { kind: 'admission-step', batchId, businessDate: '2026-11-28', step: 1 });
      expect(publisher.workDelays()).toEqual(Array(9).fill(21));
      expect(await batchItem(batchId)).toMatchObject({
        step: 2,
        discovered: 39,
        cursor: '39',
        plannedUntilMs: NOW_MS + 21_000,
      });
    });

    it('admits nothing while the queue holds a horizon of work, and comes back when it has drained, not at once', async () => {
      const batchId = 'fake-job:2026-11-28:full';
      const handle = producer(100, { admission: paced, queueDepth: async () => 90 });
      const summary = await direct(handle, { scheduledTime: SCHEDULED, batchId });
      expect(summary).toMatchObject({ pages: 0, published: 0, continued: true });
      // 90 queued messages drain in 90 s; the next step comes when 15 s of work (half the horizon) is left: after 74 s.
      expect(publisher.steps()).toEqual([expect.objectContaining({ delaySeconds: 74 })]);
      expect(await batchItem(batchId)).toMatchObject({ step: 1, pages: 0, admission: 'admitting' });
    });

    it('reads the rate, horizon and group from the job settings, and admits without limit when pacing or admission is off', () => {
      const settings = fakeSettings({
        rateLimit: { startsPerInterval: 80, intervalSeconds: 60, burst: 1 },
        admission: { horizonSeconds: 300, batchSize: 10 },
      });
      expect(admissionOptions(settings)).toEqual({
        ratePerSecond: 80 / 60,
        horizonMs: 300_000,
        groupSize: 10,
        leadMs: 0,
      });
      // A batch of 50 at 80/min spans 37 s, past the 10 s short wait: groups of 13 (10 s of slots). A group is shown
      // one batching window early (the event source waits that long for a batch it cannot fill, or that its pollers
      // split), but never so early that its last slot falls past the short wait: 13 slots span 9 s of the 10.
      expect(
        admissionOptions({ ...settings, admission: { horizonSeconds: 300, batchSize: 50, batchingWindowSeconds: 2 } }),
      ).toMatchObject({ groupSize: 13, leadMs: 1000 });
      expect(
        admissionOptions({ ...settings, admission: { horizonSeconds: 300, batchSize: 10, batchingWindowSeconds: 1 } }),
      ).toMatchObject({ groupSize: 10, leadMs: 1000 });
      expect(admissionOptions({ ...settings, admission: undefined }).ratePerSecond).toBeUndefined();
      expect(admissionOptions({ ...settings, pacing: { enabled: false } }).ratePerSecond).toBeUndefined();
    });
  });

  describe('Method: handler (runs of one business date)', () => {
    // Two runs of tonight's date: the scheduled one, and a re-run started while it is still admitting.
    const RERUN = 'fake-job:2026-11-28:rerun';
    let clock: number;
    /** Operations the consumers have completed: discovery leaves them out, as the application's index does. */
    let completed: Set<string>;
    const indexedJob = {
      ...fakeJob,
      discover: async (deps: never, request: never) => {
        const page = await (fakeJob as AnyJob).discover(deps, request);
        return { ...page, operations: page.operations.filter((o) => !completed.has(o.operationId)) };
      },
    } as AnyJob;
    const runProducer = (items: number, overrides: Partial<ProducerOptions> = {}) =>
      producer(items, { job: indexedJob, admission: paced, now: () => new Date(clock), ...overrides });
    const workOf = (batchId: string) =>
      publisher.sent
        .filter(
          (s) => s.queueUrl === queueUrl && (JSON.parse(s.message.body) as { batchId: string }).batchId === batchId,
        )
        .map((s) => s.message.operationId);
    const stepsOf = (batchId: string) => publisher.steps().filter((s) => s.step.batchId === batchId);
    const item = async (batchId: string) => (await batchItem(batchId)) as Record<string, unknown>;

    beforeEach(() => {
      clock = NOW_MS;
      completed = new Set();
    });

    it('holds a re-run of the date while the first run is admitting and until its last slots have passed, then admits only what is not completed', async () => {
      const info = jest.spyOn(logger, 'info');
      // The first run admits 30 of 40 (one horizon at 1/s) and comes back in 5 s.
      expect(await direct(runProducer(40), { scheduledTime: SCHEDULED })).toMatchObject({
        batchId: BATCH,
        outcome: 'admitted',
        published: 30,
        continued: true,
        nextStepInSeconds: 5,
      });

      // The re-run, 2 s later: it admits nothing and comes back when the first run's next step is due (at +5 s, but at
      // least 5 s from now).
      clock = NOW_MS + 2_000;
      const rerun = await direct(runProducer(40), { businessDate: '2026-11-28', batchId: RERUN });
      expect(rerun).toMatchObject({
        outcome: 'waiting',
        pages: 0,
        discovered: 0,
        published: 0,
        continued: true,
        nextStepInSeconds: 5,
      });
      expect(fakeJobCalls.discover.filter((d) => d.cursor === undefined)).toHaveLength(1);
      expect(workOf(RERUN)).toEqual([]);
      expect(stepsOf(RERUN)).toEqual([
        { step: { kind: 'admission-step', batchId: RERUN, businessDate: '2026-11-28', step: 1 }, delaySeconds: 5 },
      ]);
      expect(info).toHaveBeenCalledWith('admission waits for an earlier run of the business date', {
        step: 0,
        earlierBatchId: BATCH,
        earlierRun: 'admitting',
        delaySeconds: 5,
      });
      // The waiting run is admitting, its next step ahead: neither ops status nor the chaos harness takes it for stalled.
      const waiting = await item(RERUN);
      expect(waiting).toMatchObject({
        admission: 'admitting',
        step: 1,
        pages: 0,
        nextStepAt: new Date(clock + 5_000).toISOString(),
        waitingFor: BATCH,
        continuationSent: 1,
      });
      expect(stalledSince(waiting, clock, 1_000)).toBeUndefined();
      expect(stoppedChains([waiting as unknown as RunLedgerItem], clock + 4_000, 1_000)).toEqual([]);

      // The first run's 30 complete; its step 1 (at +5 s) admits the last 10, planned for +21 s, and ends admission.
      for (let i = 0; i < 30; i++) completed.add(`fake:item-${i}:2026-11-28`);
      clock = NOW_MS + 5_000;
      await fromQueue(runProducer(40), stepsOf(BATCH)[0].step);
      expect(await item(BATCH)).toMatchObject({
        admission: 'complete',
        discovered: 40,
        plannedUntilMs: NOW_MS + 21_000,
      });

      // The re-run's step 1 (+7 s): the first run admits no more, but its last 10 are still queued ahead of their
      // slots (the last group starts from +21 s to +31 s): discovery would find them all. It waits for them.
      clock = NOW_MS + 7_000;
      await fromQueue(runProducer(40), stepsOf(RERUN)[0].step);
      expect(stepsOf(RERUN)[1]).toEqual({ step: expect.objectContaining({ step: 2 }), delaySeconds: 24 });
      expect(info).toHaveBeenCalledWith(
        'admission waits for an earlier run of the business date',
        expect.objectContaining({
          step: 1,
          earlierBatchId: BATCH,
          earlierRun: 'admission ended, its last slots still ahead',
        }),
      );
      expect(workOf(RERUN)).toEqual([]);

      // By +31 s all but one have completed (item-39 failed and is being retried): the re-run admits that one alone.
      for (let i = 30; i < 39; i++) completed.add(`fake:item-${i}:2026-11-28`);
      clock = NOW_MS + 31_000;
      await fromQueue(runProducer(40), stepsOf(RERUN)[1].step);
      expect(workOf(RERUN)).toEqual(['fake:item-39:2026-11-28']);
      expect(await item(RERUN)).toMatchObject({ admission: 'complete', step: 3, discovered: 1, published: 1 });
      expect(await item(RERUN)).not.toHaveProperty('waitingFor');
      // The first run published each operation once; nothing of it went out twice.
      expect(workOf(BATCH)).toHaveLength(40);
      expect(new Set(workOf(BATCH)).size).toBe(40);
    });

    it('does not hold a re-run behind an earlier run whose chain has stalled, at the page limit, or done with its plan', async () => {
      const store = new DynamoRunStateStore({ tableName: LEDGER_TABLE });
      // The scheduled run admitted its first 30; its step 1 (due at +5 s) was lost to the producer DLQ.
      await direct(runProducer(100), { scheduledTime: SCHEDULED });
      // An earlier run at the page limit, and one that finished long ago: neither admits again.
      await store.ensure('fake-job', 'fake-job:2026-11-28:capped', {
        businessDate: '2026-11-28',
        startedAt: new Date(NOW_MS - 60_000).toISOString(),
      });
      await documentClient().send(
        new UpdateCommand({
          TableName: LEDGER_TABLE,
          Key: { pk: 'BATCH#fake-job', sk: 'fake-job:2026-11-28:capped' },
          UpdateExpression: 'SET admission = :a, plannedUntilMs = :p',
          ExpressionAttributeValues: { ':a': 'page-limit', ':p': NOW_MS - 30_000 },
        }),
      );
      await store.ensure('fake-job', 'fake-job:2026-11-28:done', {
        businessDate: '2026-11-28',
        startedAt: new Date(NOW_MS - 120_000).toISOString(),
      });
      await documentClient().send(
        new UpdateCommand({
          TableName: LEDGER_TABLE,
          Key: { pk: 'BATCH#fake-job', sk: 'fake-job:2026-11-28:done' },
          UpdateExpression: 'SET admission = :a',
          ExpressionAttributeValues: { ':a': 'complete' },
        }),
      );

      // Within its redelivery (the producer's timeout and the queue's visibility margin), the first run may still go
      // on: a re-run 2 minutes past its due step waits ...
      clock = NOW_MS + 5_000 + 120_000;
      expect(await direct(runProducer(100), { businessDate: '2026-11-28', batchId: RERUN })).toMatchObject({
        outcome: 'waiting',
        published: 0,
      });
      await clearRun(RERUN);

      // ... but the operator's re-run, once the alarm has named the stalled run, admits at once.
      clock = NOW_MS + 5_000 + 15 * 60_000;
      expect(stalledSince((await item(BATCH)) as { admission?: string; nextStepAt?: string }, clock, 60_000)).toBe(
        new Date(NOW_MS + 5_000).toISOString(),
      );
      expect(await direct(runProducer(100), { businessDate: '2026-11-28', batchId: RERUN })).toMatchObject({
        outcome: 'admitted',
        published: 30,
      });
      expect(await item(RERUN)).not.toHaveProperty('waitingFor');

      // The stalled run, continued later (ops continue), is the earlier one: it does not wait for the re-run either.
      clock += 1_000;
      publisher.sent.length = 0;
      await fromQueue(runProducer(100), {
        kind: 'admission-step',
        batchId: BATCH,
        businessDate: '2026-11-28',
        step: 1,
        scheduledTime: SCHEDULED,
      });
      expect(workOf(BATCH).length).toBeGreaterThan(0);
    });

    it('never lets two runs wait for each other: runs started together admit in batch-ID order, and live runs before backfill', async () => {
      const store = new DynamoRunStateStore({ tableName: LEDGER_TABLE });
      const [a, b] = ['fake-job:2026-11-28:a', 'fake-job:2026-11-28:b'];
      // Started at the same instant (both start facts written), their first steps at once.
      for (const batchId of [b, a])
        await store.ensure('fake-job', batchId, { businessDate: '2026-11-28', startedAt: NOW.toISOString() });
      const summaries = await Promise.all(
        [b, a].map((batchId) => direct(runProducer(100), { businessDate: '2026-11-28', batchId })),
      );
      expect(summaries.map((s) => [s.batchId, s.outcome])).toEqual([
        [b, 'waiting'],
        [a, 'admitted'],
      ]);
      expect(await item(b)).toMatchObject({ waitingFor: a });
      // However often they meet, the same one goes first.
      clock = NOW_MS + 5_000;
      expect(await fromQueue(runProducer(100), stepsOf(a)[0].step)).toEqual({ batchItemFailures: [] });
      expect(await item(a)).toMatchObject({ step: 2, discovered: 44 });
      expect(await fromQueue(runProducer(100), stepsOf(b)[0].step)).toEqual({ batchItemFailures: [] });
      expect(await item(b)).toMatchObject({ step: 2, pages: 0, waitingFor: a });

      // A catch-up of the date that started first does not hold tonight's run back: live work goes first ...
      await clearRuns();
      publisher.sent.length = 0;
      clock = NOW_MS;
      const catchUp = 'fake-job:2026-11-28:catch-up';
      expect(
        await direct(runProducer(100), { businessDate: '2026-11-28', batchId: catchUp, backfill: true }),
      ).toMatchObject({ outcome: 'admitted', published: 30 });
      clock = NOW_MS + 2_000;
      expect(await direct(runProducer(100), { scheduledTime: SCHEDULED })).toMatchObject({
        batchId: BATCH,
        outcome: 'admitted',
        published: 30,
      });
      // ... and the catch-up's next step waits for it (known backfill from its ledger item, whatever its step carries).
      clock = NOW_MS + 5_000;
      const { backfill: _mark, ...unmarked } = stepsOf(catchUp)[0].step;
      await fromQueue(runProducer(100), unmarked);
      expect(await item(catchUp)).toMatchObject({ step: 2, waitingFor: BATCH, published: 30 });
    });
  });

  describe('Method: handler (faults)', () => {
    // A fresh run per test.
    let runs = 0;
    let batchId: string;
    let step1: AdmissionStep;

    beforeEach(() => {
      batchId = `fake-job:2026-11-28:faults-${++runs}`;
      step1 = { kind: 'admission-step', batchId, businessDate: '2026-11-28', step: 1 };
    });

    it('ignores a step the run is already past', async () => {
      const handle = producer(100, { admission: paced });
      await direct(handle, { batchId, businessDate: '2026-11-28' });
      await fromQueue(handle, step1);
      publisher.sent.length = 0;

      // Step 1 delivered a second time, after it ended: nothing is published and no second chain starts.
      expect(await fromQueue(handle, step1)).toEqual({ batchItemFailures: [] });
      expect(publisher.sent).toEqual([]);
      expect(await batchItem(batchId)).toMatchObject({ step: 2 });
    });

    it('re-sends the next step when the step that ended crashed before sending it', async () => {
      const handle = producer(100, { admission: paced });
      await direct(handle, { batchId, businessDate: '2026-11-28' });
      // As if step 0 ended but died before its continuation went out (or was marked sent).
      await documentClient().send(
        new UpdateCommand({
          TableName: LEDGER_TABLE,
          Key: { pk: 'BATCH#fake-job', sk: batchId },
          UpdateExpression: 'SET continuationSent = :n',
          ExpressionAttributeValues: { ':n': 0 },
        }),
      );
      publisher.sent.length = 0;

      // Lambda retries the crashed step 0: it is past, but its continuation was never sent.
      await direct(handle, { batchId, businessDate: '2026-11-28' });
      expect(publisher.steps()).toEqual([{ step: expect.objectContaining({ step: 1 }), delaySeconds: 5 }]);
      expect(publisher.workDelays()).toEqual([]);
      expect(await batchItem(batchId)).toMatchObject({ continuationSent: 1 });
    });

    it('leaves a held step to its holder: a duplicate from the queue does nothing, a direct one leaves a takeover step for when the lease ends', async () => {
      const handle = producer(100, { admission: paced });
      // A first delivery of the schedule holds step 0's lease for 40 s (it is still publishing, or it died).
      await new DynamoRunStateStore({ tableName: LEDGER_TABLE }).ensure('fake-job', batchId, {
        businessDate: '2026-11-28',
        startedAt: NOW.toISOString(),
      });
      await documentClient().send(
        new UpdateCommand({
          TableName: LEDGER_TABLE,
          Key: { pk: 'BATCH#fake-job', sk: batchId },
          UpdateExpression: 'SET leaseOwner = :o, leaseUntilMs = :u',
          ExpressionAttributeValues: { ':o': 'first-delivery', ':u': NOW_MS + 40_000 },
        }),
      );

      expect(await fromQueue(handle, { ...step1, step: 0 })).toEqual({ batchItemFailures: [] });
      expect(publisher.sent).toEqual([]);

      const second = await direct(handle, { batchId, businessDate: '2026-11-28' });
      expect(second).toMatchObject({ outcome: 'in-progress', published: 0, continued: true, nextStepInSeconds: 41 });
      expect(publisher.steps()).toEqual([
        { step: { kind: 'admission-step', batchId, businessDate: '2026-11-28', step: 0 }, delaySeconds: 41 },
      ]);

      // The takeover step, once the lease has expired, admits the run as if nothing had happened.
      const later = producer(100, { admission: paced, now: () => new Date(NOW_MS + 41_000) });
      publisher.sent.length = 0;
      await fromQueue(later, publisher.steps()[0]?.step ?? { ...step1, step: 0 });
      expect(await batchItem(batchId)).toMatchObject({ step: 1, discovered: 30 });
      expect(await batchItem(batchId)).not.toHaveProperty('leaseOwner');
    });

    it('admits a schedule delivered twice at once with the same request ID only once', async () => {
      // Lambda delivers an async event at least once: a duplicate keeps the payload and the request ID, and may run
      // concurrently with the first copy. The lease is each invocation's own, so only one copy holds step 0.
      const handle = producer(55);
      const event = { scheduledTime: SCHEDULED, batchId };
      const requestId = lambdaContext().awsRequestId;
      const summaries = await Promise.all([
        direct(handle, event, { ...lambdaContext(), awsRequestId: requestId }),
        direct(handle, event, { ...lambdaContext(), awsRequestId: requestId }),
      ]);

      const admitted = summaries.filter((s) => s.outcome === 'admitted');
      expect(admitted).toEqual([expect.objectContaining({ pages: 3, discovered: 55, published: 55, finished: true })]);
      const other = summaries.find((s) => s.outcome !== 'admitted');
      expect(['in-progress', 'stale']).toContain(other?.outcome);
      expect(other).toMatchObject({ pages: 0, discovered: 0, published: 0 });
      // Each record published once, by the copy that admitted; the ledger counts each once.
      const ids = await publishedOperationIds();
      expect(ids).toHaveLength(55);
      expect(new Set(ids).size).toBe(55);
      expect(fakeJobCalls.discover).toHaveLength(3);
      expect(await batchItem(batchId)).toMatchObject({
        step: 1,
        pages: 3,
        discovered: 55,
        published: 55,
        admission: 'complete',
      });
      expect(await batchItem(batchId)).not.toHaveProperty('leaseOwner');

      // A takeover step the other copy left finds the run past step 0 and does nothing.
      const takeover = publisher.steps().filter((s) => s.step.step === 0);
      expect(takeover).toHaveLength(other?.outcome === 'in-progress' ? 1 : 0);
      publisher.sent.length = 0;
      for (const { step } of takeover) expect(await fromQueue(handle, step)).toEqual({ batchItemFailures: [] });
      expect(publisher.sent).toEqual([]);
    });

    it('releases the lease of a step from the queue that failed, so its redelivery takes the step at once', async () => {
      const handle = producer(100, { admission: paced });
      await direct(handle, { batchId, businessDate: '2026-11-28' });
      await drainQueue(queueUrl);
      publisher.failNextWorkPublish = true;
      expect(await fromQueue(handle, step1)).toEqual({ batchItemFailures: [{ itemIdentifier: expect.any(String) }] });
      expect(await batchItem(batchId)).toMatchObject({ step: 1, pages: 2, discovered: 30 });
      expect(await batchItem(batchId)).not.toHaveProperty('leaseOwner');

      // SQS's redelivery of the same record admits the step from the committed cursor.
      expect(await fromQueue(handle, step1)).toEqual({ batchItemFailures: [] });
      expect(await batchItem(batchId)).toMatchObject({ step: 2, discovered: 39, cursor: '39' });
    });

    it('fails the step with its own error when the lease cannot be released, leaving the lease to expire', async () => {
      const runState = new DynamoRunStateStore({ tableName: LEDGER_TABLE });
      jest.spyOn(runState, 'release').mockRejectedValue(new Error('ledger unavailable'));
      const warn = jest.spyOn(logger, 'warn');
      publisher.failNextWorkPublish = true;
      await expect(direct(producer(3, { runState }), { batchId, businessDate: '2026-11-28' })).rejects.toThrow(
        'failed to publish 1 of 3 messages',
      );
      expect(warn).toHaveBeenCalledWith(
        'could not release the admission lease of a failed step; it expires at the deadline',
        { step: 0, error: new Error('ledger unavailable') },
      );
      expect(await batchItem(batchId)).toMatchObject({ leaseUntilMs: NOW_MS + 60_000 });
    });

    it.each([
      ["this invocation's form", (requestId: string) => `${requestId}/7d1c8f5e-0b7a-4a47-9a43-3f8f6d0c2b11`],
      ['the request ID alone, as an earlier producer wrote it', (requestId: string) => requestId],
    ])(
      'leaves a step leased by a crashed invocation (owner in %s) to expire, even for the retry with its request ID',
      async (_form, ownerOf) => {
        // The first delivery of the schedule took step 0 and died (killed, timed out) without releasing it.
        const context = lambdaContext();
        await new DynamoRunStateStore({ tableName: LEDGER_TABLE }).ensure('fake-job', batchId, {
          businessDate: '2026-11-28',
          startedAt: NOW.toISOString(),
        });
        await documentClient().send(
          new UpdateCommand({
            TableName: LEDGER_TABLE,
            Key: { pk: 'BATCH#fake-job', sk: batchId },
            UpdateExpression: 'SET leaseOwner = :o, leaseUntilMs = :u',
            ExpressionAttributeValues: { ':o': ownerOf(context.awsRequestId), ':u': NOW_MS + 40_000 },
          }),
        );

        // Lambda's retry, with the same request ID, cannot tell it from a live duplicate: it leaves a takeover step.
        const retry = await direct(
          producer(100, { admission: paced }),
          { batchId, businessDate: '2026-11-28' },
          context,
        );
        expect(retry).toMatchObject({ outcome: 'in-progress', published: 0, continued: true, nextStepInSeconds: 41 });
        expect(publisher.workDelays()).toEqual([]);
        expect(await batchItem(batchId)).toMatchObject({
          leaseOwner: ownerOf(context.awsRequestId),
          leaseUntilMs: NOW_MS + 40_000,
          pages: 0,
        });

        // Once the lease has expired, the same request ID takes the step over.
        const later = producer(100, { admission: paced, now: () => new Date(NOW_MS + 40_001) });
        expect(await direct(later, { batchId, businessDate: '2026-11-28' }, context)).toMatchObject({
          outcome: 'admitted',
          discovered: 30,
        });
        expect(await batchItem(batchId)).toMatchObject({ step: 1, discovered: 30 });
      },
    );

    it('fails an invalid step record so SQS retries it and then dead-letters it, naming the problem', async () => {
      const error = jest.spyOn(logger, 'error');
      const response = await producer(1)(
        sqsEvent(sqsRecord('{"kind":"admission-step","batchId":"b","step":-1}', { messageId: 'm-1' })),
        lambdaContext(),
      );
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-1' }] });
      expect(error).toHaveBeenCalledWith('admission step failed; SQS retries it, then moves it to the producer DLQ', {
        messageId: 'm-1',
        error: new ProducerEventError(
          'invalid admission step: businessDate: Invalid input: expected string, received undefined; step: Too small: expected number to be >=0',
          [],
        ),
      });
    });

    it("fails a step of a business date after the job's latest, naming it, so it is dead-lettered, never admitted", async () => {
      const error = jest.spyOn(logger, 'error');
      const future = {
        kind: 'admission-step',
        batchId: 'fake-job:2027-12-04:manual-1',
        businessDate: '2027-12-04',
        step: 0,
      };

      const response = await producer(3)(
        sqsEvent(sqsRecord(JSON.stringify(future), { messageId: 'm-3' })),
        lambdaContext(),
      );

      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-3' }] });
      expect(error).toHaveBeenCalledWith('admission step failed; SQS retries it, then moves it to the producer DLQ', {
        messageId: 'm-3',
        error: new FutureBusinessDateError('fake-job', '2027-12-04', '2026-11-28', fakeSettings()),
      });
      expect((error.mock.calls[0][1] as { error: Error }).error.message).toBe(
        'business date 2027-12-04 is in the future: the latest for fake-job now is 2026-11-28 (Europe/Berlin, offset -1)',
      );
      expect(fakeJobCalls.discover).toEqual([]);
      expect(publisher.sent).toEqual([]);
    });

    it('fails a step whose run has no state, so the gap is dead-lettered and alarmed rather than lost', async () => {
      const response = (await producer(1)(
        sqsEvent(sqsRecord(JSON.stringify({ ...step1, batchId: 'fake-job:2026-11-28:unknown' }), { messageId: 'm-2' })),
        lambdaContext(),
      )) as SQSBatchResponse;
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-2' }] });
    });
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
  const base = {
    JOB_NAME: 'fake-job',
    JOB_SETTINGS: JSON.stringify(fakeSettings({ settings: { items: 4 } })),
    QUEUE_URL: 'http://queue',
    ADMISSION_QUEUE_URL: 'http://admission',
    LEDGER_TABLE_NAME: 'ledger',
  };

  it('builds the producer options from the environment and the job', () => {
    const options = producerOptionsFromEnv({ ...base, MAX_MESSAGE_BYTES: '2048' }, () => ({ job: fakeJob }));
    expect(options).toMatchObject({
      job: fakeJob,
      jobDeps: { items: 4 },
      queueUrl: 'http://queue',
      admissionQueueUrl: 'http://admission',
      maxMessageBytes: 2048,
      settings: { pageSize: 25 },
    });
  });

  it('names the missing admission queue', () => {
    const { ADMISSION_QUEUE_URL: _omit, ...env } = base;
    expect(() => producerOptionsFromEnv(env, () => ({ job: fakeJob }))).toThrow(
      'environment variable ADMISSION_QUEUE_URL is not set',
    );
  });
});
