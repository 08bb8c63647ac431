// The bad-input corpus driver: bad SQS message bodies fed through a job's real consumer, mixed with valid messages,
// on local DynamoDB and SQS. The engine's corpus (test/corpus/messages.json) runs on the fake job
// (test/lambda/corpus.component.test.ts); each example job runs its own cases (lambda/jobs/<job>/test/).
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { SQSBatchResponse } from 'aws-lambda';
import { documentClient, resetClients } from '../../lambda/adapters/clients';
import { DynamoLedger } from '../../lambda/adapters/ledger';
import { logger, metrics } from '../../lambda/adapters/observability';
import { DynamoDbRateLimiter } from '../../lambda/adapters/rateLimiter';
import { SqsPublisher } from '../../lambda/adapters/sqsPublisher';
import type { AnyJob } from '../../lambda/core/job';
import { createConsumer } from '../../lambda/handlers/consumer';
import { batchFigures } from '../../local/ledgerFigures';
import { expandBody, type MessageCase } from '../corpus/loadCorpus';
import {
  createIdempotencyTable,
  createLedgerTable,
  createLimiterTable,
  createQueue,
  drainQueue,
  withPacer,
} from '../lambda/handlers/harness';
import { startLocalAws, type LocalAws } from './aws';
import { lambdaContext, sqsEvent, sqsRecord } from './lambdaEvents';

/** The business date of every corpus message. */
export const CORPUS_DATE = '2026-11-28';
const MAX_MESSAGE_BYTES = 262_144;
/** Bad cases per SQS batch; each batch also carries VALID_PER_BATCH valid messages, at the start and in the middle. */
const BAD_PER_BATCH = 8;
const VALID_PER_BATCH = 2;

/** The job a corpus is fed to, set up on the local servers the driver has started. */
export interface JobUnderTest {
  job: AnyJob;
  deps: unknown;
  /** Seeds what one valid message needs and returns its body. */
  seedValid(n: number): Promise<string>;
  /** Whether the valid message's effect is visible downstream. */
  applied(n: number): Promise<boolean>;
  /** Stops whatever the setup started (an HTTP stub). */
  close?(): Promise<void>;
}

/** A message envelope of the corpus's batch, for a valid message's body. */
export const corpusEnvelope = (jobType: string, operationId: string, resource: Record<string, unknown>): string =>
  JSON.stringify({
    version: 1,
    jobType,
    operationId,
    batchId: `${jobType}:${CORPUS_DATE}:corpus`,
    businessDate: CORPUS_DATE,
    resource,
    enqueuedAt: '2026-11-29T02:00:00.000Z',
  });

/** An item of a table on local DynamoDB, read consistently. */
export const getItem = async (table: string, key: Record<string, string>) =>
  (await documentClient().send(new GetCommand({ TableName: table, Key: key, ConsistentRead: true }))).Item;

/**
 * Registers the corpus tests of one job: `setup` runs once local DynamoDB and SQS are up (and the runtime's state
 * tables exist) and creates what the job needs; `cases` are its bad bodies.
 */
export function describeMessageCorpus(jobName: string, cases: MessageCase[], setup: () => Promise<JobUnderTest>): void {
  describe(`Method: handler (bad-input corpus, ${jobName})`, () => {
    const responses: SQSBatchResponse[] = [];
    const rejections = new Map<string, { reasons: string[]; body: string; bodyBytes: number; truncated: boolean }>();
    const validCount = Math.ceil(cases.length / BAD_PER_BATCH) * VALID_PER_BATCH;
    const metricCalls: [string, number][] = [];
    const logLines: string[] = [];
    let aws: LocalAws;
    let target: JobUnderTest;
    let queueUrl: string;
    let dlqUrl: string;

    beforeAll(async () => {
      aws = await startLocalAws();
      resetClients();
      logger.setLogLevel('SILENT');
      await Promise.all([
        createIdempotencyTable('idempotency'),
        createLedgerTable('ledger'),
        createLimiterTable('limiter'),
      ]);
      target = await setup();
      jest.spyOn(metrics, 'addMetric').mockImplementation((name, _unit, value) => {
        metricCalls.push([name, value]);
        return metrics;
      });
      [queueUrl, dlqUrl] = await Promise.all([createQueue(`corpus-${jobName}`), createQueue(`corpus-${jobName}-dlq`)]);
      const handle = createConsumer(
        withPacer({
          job: target.job,
          jobDeps: target.deps,
          queueUrl,
          dlqUrl,
          idempotencyTableName: 'idempotency',
          idempotencyTtlSeconds: 30 * 86_400,
          maxMessageBytes: MAX_MESSAGE_BYTES,
          ledger: new DynamoLedger({ tableName: 'ledger' }),
          limiter: new DynamoDbRateLimiter({
            tableName: 'limiter',
            limits: { startsPerInterval: 1000, intervalMs: 1000 },
          }),
          // The limiter never nears its allowance here, so a slow local call must not count as a missed slot.
          pacing: { key: `corpus-${jobName}`, lateToleranceMs: 60_000 },
          publisher: new SqsPublisher({ sleep: async () => undefined }),
        }),
      );
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
          const bad = cases
            .slice(i, i + BAD_PER_BATCH)
            .map((c, j) => sqsRecord(expandBody(c.body), { messageId: `bad-${i + j}` }));
          const ok = [];
          for (let k = 0; k < VALID_PER_BATCH; k++)
            ok.push(sqsRecord(await target.seedValid(valid), { messageId: `ok-${valid++}` }));
          const middle = Math.floor(bad.length / 2);
          responses.push(
            await handle(
              sqsEvent(ok[0], ...bad.slice(0, middle), ...ok.slice(1), ...bad.slice(middle)),
              lambdaContext(),
            ),
          );
        }
      } finally {
        logger.setLogLevel('SILENT');
        out.mockRestore();
        err.mockRestore();
      }
      const { Items = [] } = await documentClient().send(
        new QueryCommand({
          TableName: 'ledger',
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': `REJECTED#${jobName}` },
        }),
      );
      for (const item of Items) rejections.set(item.messageId as string, item as never);
    });

    afterAll(async () => {
      jest.restoreAllMocks();
      resetClients();
      await target?.close?.();
      await aws?.stop();
    });

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
      expect([total('Rejected'), total('Applied'), total('Failed'), total('Deferred'), total('DeadLettered')]).toEqual([
        cases.length,
        validCount,
        0,
        0,
        0,
      ]);
      // The valid messages' batch counts its completions; a rejected body cannot be trusted to name a batch, so only
      // those that carry this batch's ID are counted against it.
      const batchId = `${jobName}:${CORPUS_DATE}:corpus`;
      const batch = await batchFigures(documentClient(), { ledger: 'ledger', idempotency: 'idempotency' }, jobName, {
        sk: batchId,
      });
      expect(batch).toMatchObject({ completed: validCount });
    });

    it('logs each rejection as one JSON line that carries no raw control or bidirectional characters from the body', () => {
      const rejected = logLines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.message === 'message rejected and kept for review');
      expect(rejected.map((l) => l.messageId).sort()).toEqual(cases.map((_, i) => `bad-${i}`).sort());
      // JSON escapes C0 controls, but not bidi overrides, zero-width characters or line separators.
      expect(
        logLines.filter((l) =>
          /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]/.test(l),
        ),
      ).toEqual([]);
    });

    it.each(cases.map((c, i) => [c.name, i, c] as [string, number, MessageCase]))(
      'rejects "%s" with a reason naming the problem',
      (_name, i, c) => {
        const body = expandBody(c.body);
        const record = rejections.get(`bad-${i}`);
        expect(record?.reasons).toEqual(expect.arrayContaining([expect.stringContaining(c.expect)]));
        // The review record keeps the body as it arrived, cut to a bounded excerpt when it is large.
        expect(record?.bodyBytes).toBe(Buffer.byteLength(body, 'utf8'));
        expect(body.startsWith(record?.body ?? '\u0000')).toBe(true);
        expect(record?.truncated).toBe(Buffer.byteLength(body, 'utf8') > 4096);
      },
    );
  });
}
