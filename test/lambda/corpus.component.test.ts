// The bad-input corpus (test/corpus/messages.json) fed through the real consumer of each job, mixed with valid messages.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { SQSBatchResponse } from 'aws-lambda';
import { documentClient, resetClients } from '../../lambda/adapters/clients';
import { DynamoLedger } from '../../lambda/adapters/ledger';
import { logger, metrics } from '../../lambda/adapters/observability';
import { HttpProviderClient } from '../../lambda/jobs/payment-reconciliation/providerClient';
import { DynamoDbRateLimiter } from '../../lambda/adapters/rateLimiter';
import { SqsPublisher } from '../../lambda/adapters/sqsPublisher';
import type { AnyJob } from '../../lambda/core/job';
import { createConsumer } from '../../lambda/handlers/consumer';
import * as expiredSessions from '../../lambda/jobs/expired-session-cleanup';
import { session, tenant } from '../../lambda/jobs/expired-session-cleanup/items';
import * as payments from '../../lambda/jobs/payment-reconciliation';
import { unsettledPayment } from '../../lambda/jobs/payment-reconciliation/items';
import * as staleUploads from '../../lambda/jobs/stale-upload-cleanup';
import { pendingUpload } from '../../lambda/jobs/stale-upload-cleanup/items';
import { batchFigures } from '../../ops/ledger';
import { expandBody, messageCases, type MessageCase } from '../corpus/loadCorpus';
import { startLocalAws, type LocalAws } from '../support/aws';
import { startHttpStub, type HttpStub } from '../support/httpStub';
import { lambdaContext, sqsEvent, sqsRecord } from '../support/lambdaEvents';
import { createIdempotencyTable, createLedgerTable, createLimiterTable, createQueue, drainQueue } from './handlers/harness';
import { TABLES as SESSION_TABLES } from '../../lambda/jobs/expired-session-cleanup/test/tables';
import { TABLES as PAYMENT_TABLES } from '../../lambda/jobs/payment-reconciliation/test/tables';
import { TABLES as UPLOAD_TABLES } from '../../lambda/jobs/stale-upload-cleanup/test/tables';
import { createTable, putAll, runtimeSettings } from '../support/jobs';

const TABLES = { ...PAYMENT_TABLES, ...UPLOAD_TABLES, ...SESSION_TABLES };

const DATE = '2026-11-28';
const MAX_MESSAGE_BYTES = 262_144;
/** Bad cases per SQS batch; each batch also carries VALID_PER_BATCH valid messages, at the start and in the middle. */
const BAD_PER_BATCH = 8;
const VALID_PER_BATCH = 2;

interface JobUnderTest {
  job: AnyJob;
  deps: unknown;
  /** Seeds what one valid message needs and returns its body. */
  seedValid(n: number): Promise<string>;
  /** Whether the valid message's effect is visible downstream. */
  applied(n: number): Promise<boolean>;
}

const envelope = (jobType: string, operationId: string, resource: Record<string, unknown>) =>
  JSON.stringify({
    version: 1,
    jobType,
    operationId,
    batchId: `${jobType}:${DATE}:corpus`,
    businessDate: DATE,
    resource,
    enqueuedAt: '2026-11-29T02:00:00.000Z',
  });

const get = async (table: string, key: Record<string, string>) =>
  (await documentClient().send(new GetCommand({ TableName: table, Key: key, ConsistentRead: true }))).Item;

let aws: LocalAws;
let stub: HttpStub;
const deletedObjects: string[] = [];

function jobsUnderTest(): JobUnderTest[] {
  const paymentDeps = payments.createDeps(
    runtimeSettings({ jobName: payments.JOB_NAME, tables: { payments: TABLES.payments.name }, secrets: { apiKey: 'corpus/api-key' }, settings: { provider: 'acme', providerBaseUrl: stub.url } }),
  );
  return [
    {
      job: expiredSessions.job,
      deps: expiredSessions.createDeps(
        runtimeSettings({ jobName: expiredSessions.JOB_NAME, tables: { tenants: TABLES.tenants.name, sessions: TABLES.sessions.name }, settings: { sessionMaxAgeDays: 30, deleteChunkSize: 25 } }),
      ),
      async seedValid(n) {
        await putAll(documentClient(), TABLES.tenants.name, [tenant(`ok-${n}`)]);
        await putAll(documentClient(), TABLES.sessions.name, [session({ tenantId: `ok-${n}`, sessionId: 's-1', lastSeenAt: '2025-01-01T00:00:00.000Z' })]);
        return envelope(expiredSessions.JOB_NAME, `ok-${n}:expired-sessions:${DATE}`, { tenantId: `ok-${n}` });
      },
      applied: async (n) => (await get(TABLES.sessions.name, { tenantId: `ok-${n}`, sessionId: 's-1' })) === undefined,
    },
    {
      job: payments.job,
      deps: { ...paymentDeps, client: new HttpProviderClient({ baseUrl: stub.url, apiKey: async () => 'corpus-test-key' }) },
      async seedValid(n) {
        await putAll(documentClient(), TABLES.payments.name, [unsettledPayment({ paymentId: `ok-${n}`, businessDate: DATE })]);
        return envelope(payments.JOB_NAME, `reconcile:acme:ok-${n}:${DATE}`, { paymentId: `ok-${n}` });
      },
      applied: async (n) => (await get(TABLES.payments.name, { paymentId: `ok-${n}` }))?.reconciledBy === `reconcile:acme:ok-${n}:${DATE}`,
    },
    {
      job: staleUploads.job,
      deps: {
        ...staleUploads.createDeps(runtimeSettings({ jobName: staleUploads.JOB_NAME, tables: { uploads: TABLES.uploads.name }, buckets: { uploads: 'corpus-bucket' } })),
        // S3 is not among the local servers this suite starts; the object store is the job's own port, so a recorder stands in.
        objects: { deleteObject: async (_bucket: string, key: string) => void deletedObjects.push(key) },
      },
      async seedValid(n) {
        const item = pendingUpload({ uploadId: `ok-${n}`, deleteAfter: '2026-11-20T00:00:00.000Z' });
        await putAll(documentClient(), TABLES.uploads.name, [item]);
        return envelope(staleUploads.JOB_NAME, `stale-upload:ok-${n}:${item.deleteAfter}`, { uploadId: `ok-${n}`, objectKey: item.objectKey, deleteAfter: item.deleteAfter });
      },
      applied: async (n) => (await get(TABLES.uploads.name, { uploadId: `ok-${n}` })) === undefined && deletedObjects.includes(`uploads/ok-${n}.bin`),
    },
  ];
}

const allCases = messageCases();

describe('Function: createConsumer', () => {
  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    logger.setLogLevel('SILENT');
    stub = await startHttpStub();
    stub.handle((req, res) => {
      const paymentId = decodeURIComponent(req.url.split('/')[3]);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ paymentId, status: 'settled', providerReference: `prov-${paymentId}` }));
    });
    const raw = new DynamoDBClient({});
    await Promise.all([
      createIdempotencyTable('idempotency'),
      createLedgerTable('ledger'),
      createLimiterTable('limiter'),
      ...Object.values(TABLES).map((spec) => createTable(raw, spec)),
    ]);
    raw.destroy();
  });

  afterAll(async () => {
    resetClients();
    await stub.close();
    await aws.stop();
  });

  it('has cases for every job and for every category the corpus promises', () => {
    expect(new Set(allCases.map((c) => c.job))).toEqual(new Set([expiredSessions.JOB_NAME, payments.JOB_NAME, staleUploads.JOB_NAME]));
    expect(new Set(allCases.map((c) => c.name)).size).toBe(allCases.length);
    for (const needle of ['not valid JSON', 'Unrecognized key', 'unsupported message version', 'jobType: expected', 'at most 256 characters', 'byte cap', 'real calendar date', 'form YYYY-MM-DD']) {
      expect(allCases.some((c) => c.expect.includes(needle))).toBe(true);
    }
  });

  describe.each([expiredSessions.JOB_NAME, payments.JOB_NAME, staleUploads.JOB_NAME])('Method: handler (bad-input corpus, %s)', (jobName) => {
    const cases = allCases.filter((c) => c.job === jobName);
    const responses: SQSBatchResponse[] = [];
    const rejections = new Map<string, { reasons: string[]; body: string; bodyBytes: number; truncated: boolean }>();
    const validCount = Math.ceil(cases.length / BAD_PER_BATCH) * VALID_PER_BATCH;
    const metricCalls: [string, number][] = [];
    const logLines: string[] = [];
    let target: JobUnderTest;
    let queueUrl: string;
    let dlqUrl: string;

    beforeAll(async () => {
      jest.spyOn(metrics, 'addMetric').mockImplementation((name, _unit, value) => {
        metricCalls.push([name, value]);
        return metrics;
      });
      target = jobsUnderTest().find((t) => t.job.name === jobName) as JobUnderTest;
      [queueUrl, dlqUrl] = await Promise.all([createQueue(`corpus-${jobName}`), createQueue(`corpus-${jobName}-dlq`)]);
      const handle = createConsumer({
        job: target.job,
        jobDeps: target.deps,
        queueUrl,
        dlqUrl,
        idempotencyTableName: 'idempotency',
        idempotencyTtlSeconds: 30 * 86_400,
        maxMessageBytes: MAX_MESSAGE_BYTES,
        ledger: new DynamoLedger({ tableName: 'ledger' }),
        limiter: new DynamoDbRateLimiter({ tableName: 'limiter', limits: { startsPerInterval: 1000, intervalMs: 1000 } }),
        // The limiter never nears its allowance here, so a slow local call must not count as a missed slot.
        pacing: { key: `corpus-${jobName}`, lateToleranceMs: 60_000 },
        publisher: new SqsPublisher({ sleep: async () => undefined }),
      });
      let valid = 0;
      const capture = (chunk: string | Uint8Array) => {
        logLines.push(...String(chunk).split('\n').filter(Boolean));
        return true;
      };
      const out = jest.spyOn(process.stdout, 'write').mockImplementation(capture);
      const err = jest.spyOn(process.stderr, 'write').mockImplementation(capture);
      logger.setLogLevel('INFO');
      try {
        for (let i = 0; i < cases.length; i += BAD_PER_BATCH) {
          const bad = cases.slice(i, i + BAD_PER_BATCH).map((c, j) => sqsRecord(expandBody(c.body), { messageId: `bad-${i + j}` }));
          const ok = [];
          for (let k = 0; k < VALID_PER_BATCH; k++) ok.push(sqsRecord(await target.seedValid(valid), { messageId: `ok-${valid++}` }));
          const middle = Math.floor(bad.length / 2);
          responses.push(await handle(sqsEvent(ok[0], ...bad.slice(0, middle), ...ok.slice(1), ...bad.slice(middle)), lambdaContext()));
        }
      } finally {
        logger.setLogLevel('SILENT');
        out.mockRestore();
        err.mockRestore();
      }
      const { Items = [] } = await documentClient().send(
        new QueryCommand({ TableName: 'ledger', KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': `REJECTED#${jobName}` } }),
      );
      for (const item of Items) rejections.set(item.messageId as string, item as never);
    });

    afterAll(() => jest.restoreAllMocks());

    it('acknowledges every record of every mixed batch: nothing is reported failed, so nothing is retried', () => {
      expect(responses.length).toBeGreaterThan(0);
      expect(responses).toEqual(responses.map(() => ({ batchItemFailures: [] })));
    });

    it('applies the valid messages that shared the batches with the bad ones', async () => {
      const applied = await Promise.all(Array.from({ length: validCount }, (_, n) => target.applied(n)));
      expect(applied).toEqual(applied.map(() => true));
    });

    it('re-publishes nothing: no deferral to the queue and nothing dead-lettered', async () => {
      expect(await drainQueue(queueUrl)).toEqual([]);
      expect(await drainQueue(dlqUrl)).toEqual([]);
    });

    it('records exactly one review record per bad case and none for a valid message, and meters each rejection', async () => {
      expect([...rejections.keys()].sort()).toEqual(cases.map((_, i) => `bad-${i}`).sort());
      const total = (name: string) => metricCalls.filter(([n]) => n === name).reduce((sum, [, v]) => sum + v, 0);
      expect([total('Rejected'), total('Applied'), total('Failed'), total('Deferred'), total('DeadLettered')]).toEqual([cases.length, validCount, 0, 0, 0]);
      // The valid messages' batch counts its completions; a rejected body cannot be trusted to name a batch, so only
      // those that carry this batch's ID are counted against it.
      const batchId = `${jobName}:${DATE}:corpus`;
      const batch = await batchFigures(documentClient(), { ledger: 'ledger', idempotency: 'idempotency' }, jobName, { sk: batchId });
      expect(batch).toMatchObject({ completed: validCount });
    });

    it('logs each rejection as one JSON line that carries no raw control or bidirectional characters from the body', () => {
      const rejected = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.message === 'message rejected and kept for review');
      expect(rejected.map((l) => l.messageId).sort()).toEqual(cases.map((_, i) => `bad-${i}`).sort());
      // JSON escapes C0 controls, but not bidi overrides, zero-width characters or line separators.
      expect(logLines.filter((l) => /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]/.test(l))).toEqual([]);
    });

    it.each(cases.map((c, i) => [c.name, i, c] as [string, number, MessageCase]))('rejects "%s" with a reason naming the problem', (_name, i, c) => {
      const body = expandBody(c.body);
      const record = rejections.get(`bad-${i}`);
      expect(record?.reasons).toEqual(expect.arrayContaining([expect.stringContaining(c.expect)]));
      // The review record keeps the body as it arrived, cut to a bounded excerpt when it is large.
      expect(record?.bodyBytes).toBe(Buffer.byteLength(body, 'utf8'));
      expect(body.startsWith(record?.body ?? '\u0000')).toBe(true);
      expect(record?.truncated).toBe(Buffer.byteLength(body, 'utf8') > 4096);
    });
  });
});
