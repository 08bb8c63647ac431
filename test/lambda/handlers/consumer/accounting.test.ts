import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';
import { BatchTally } from '../../../../lambda/adapters/ledger';
import { logger } from '../../../../lambda/adapters/observability';
import { Accounting, salvageIds, withUnwrittenBatches } from '../../../../lambda/handlers/consumer/accounting';
import { BATCH, FakeLedger, message, NOW, operationId, record, recordMetrics, tallied } from './fakes';

const OTHER_BATCH = 'fake-job:2026-11-27:20261128T020000Z';
const INVOCATION = 'invocation-1';

let ledger: FakeLedger;
let tally: BatchTally;
let metricsSeen: ReturnType<typeof recordMetrics>;

const accounting = (maxReceiveCount?: number) =>
  new Accounting({ jobName: 'fake-job', ledger, maxReceiveCount, now: () => NOW });

/** A record on its `receives`-th receive. */
const receivedTimes = (key: string, receives: number): SQSRecord => {
  const r = record(key);
  return { ...r, attributes: { ...r.attributes, ApproximateReceiveCount: String(receives) } };
};

describe('Function: salvageIds', () => {
  it('keeps the IDs a rejected body still carries, when they are valid IDs', () => {
    expect(salvageIds(JSON.stringify({ batchId: BATCH, operationId: 'op-1', version: 9 }))).toEqual({
      batchId: BATCH,
      operationId: 'op-1',
    });
    expect(salvageIds(JSON.stringify({ batchId: 'has space', operationId: 42 }))).toEqual({
      batchId: undefined,
      operationId: undefined,
    });
  });

  it('answers nothing for a body that is not a JSON object', () => {
    expect(salvageIds('{not json')).toEqual({});
    expect(salvageIds('null')).toEqual({});
  });
});

describe('Class: Accounting', () => {
  beforeAll(() => logger.setLogLevel('SILENT'));

  beforeEach(() => {
    jest.restoreAllMocks();
    metricsSeen = recordMetrics();
    ledger = new FakeLedger();
    tally = new BatchTally();
  });

  describe('Method: duplicate', () => {
    it('counts a duplicate when the completion names no batch', () => {
      expect(accounting().duplicate(message('a'), tally, undefined)).toBe('duplicate');
      expect(tallied(tally)).toEqual({ [BATCH]: { duplicates: 1 } });
      expect(metricsSeen.calls).toEqual([['DuplicatesSuppressed', 1]]);
    });

    it('notes a replay, by the completing invocation, when its own batch completed it', () => {
      expect(accounting().duplicate(message('a'), tally, { batchId: BATCH, invocationId: 'inv-7' }, 'applied')).toBe(
        'duplicate',
      );
      expect(tallied(tally)).toEqual({ [BATCH]: { replays: [`inv-7 ${operationId('a')}`] } });
    });

    it('notes a completion elsewhere, by the completing batch, when another batch completed it', () => {
      expect(accounting().duplicate(message('a'), tally, { batchId: OTHER_BATCH, invocationId: 'inv-7' })).toBe(
        'duplicate',
      );
      expect(tallied(tally)).toEqual({ [BATCH]: { elsewhere: [`${OTHER_BATCH} ${operationId('a')}`] } });
    });
  });

  describe('Method: reject', () => {
    it('writes the review record with the IDs the body still carries, and notes the message under its batch', async () => {
      const rec = record('bad', message('bad', { jobType: 'other-job' }));
      expect(await accounting().reject(rec, ['jobType: expected "fake-job", got "other-job"'], tally)).toBe('rejected');

      expect(ledger.rejections).toEqual([
        {
          job: 'fake-job',
          messageId: 'msg-bad',
          reasons: ['jobType: expected "fake-job", got "other-job"'],
          body: rec.body,
          batchId: BATCH,
          operationId: operationId('bad'),
        },
      ]);
      expect(tallied(tally)).toEqual({ [BATCH]: { rejectedMessages: ['msg-bad'] } });
      expect(metricsSeen.calls).toEqual([['Rejected', 1]]);
    });

    it('keeps an unreadable body for review without noting it under any batch', async () => {
      await accounting().reject(record('junk', '{not json'), ['body is not valid JSON'], tally);
      expect(ledger.rejections).toEqual([
        { job: 'fake-job', messageId: 'msg-junk', reasons: ['body is not valid JSON'], body: '{not json' },
      ]);
      expect(tallied(tally)).toEqual({});
    });

    it('throws, counting nothing, when the review record cannot be written (the message would vanish)', async () => {
      ledger.rejectionError = new Error('PutItem failed');
      await expect(accounting().reject(record('bad', '{}'), ['body: bad'], tally)).rejects.toThrow('PutItem failed');
      expect(metricsSeen.calls).toEqual([]);
      expect(tallied(tally)).toEqual({});
    });
  });

  describe('Method: fail', () => {
    it('counts a retry and rethrows the same error', () => {
      const error = new Error('downstream timed out');
      expect(() => accounting(5).fail(receivedTimes('a', 4), message('a'), error, tally)).toThrow(error);
      expect(tallied(tally)).toEqual({ [BATCH]: { retries: 1 } });
      expect(metricsSeen.calls).toEqual([['Failed', 1]]);
    });

    it('counts it dead-lettered, not retried, on its last allowed receive', () => {
      const error = new Error('downstream timed out');
      expect(() =>
        accounting(5).fail(receivedTimes('a', 5), message('a', { dueBy: '2026-11-29T06:00:00.000Z' }), error, tally),
      ).toThrow(error);
      expect(tallied(tally)).toEqual({
        [BATCH]: {
          deadLetteredOperations: [
            `${operationId('a')} failed on its last allowed receive (5); SQS moves it to the DLQ: downstream timed out`,
          ],
        },
      });
      expect(metricsSeen.calls).toEqual([
        ['Failed', 1],
        ['DeadLettered', 1],
        ['SloFailed', 1],
      ]);
    });

    it("counts a retry, however many receives, when the queue's maxReceiveCount is not known", () => {
      expect(() => accounting().fail(receivedTimes('a', 50), message('a'), new Error('boom'), tally)).toThrow('boom');
      expect(tallied(tally)).toEqual({ [BATCH]: { retries: 1 } });
    });

    it("logs the failure as one line: the error, its RecordFailure (the job file it came from, the receive) and the apply's start", () => {
      const error = new TypeError("Cannot read properties of undefined (reading 'balance')");
      const logged = jest.spyOn(logger, 'error').mockImplementation(() => undefined);
      expect(() => accounting(5).fail(receivedTimes('a', 2), message('a'), error, tally, 1_234)).toThrow(error);
      expect(logged.mock.calls).toEqual([
        [
          'record failed; SQS redelivers it after the visibility timeout',
          {
            receives: 2,
            error,
            recordFailure: {
              errorName: 'TypeError',
              errorMessage: "Cannot read properties of undefined (reading 'balance')",
              // Thrown in this test file: the first frame outside the engine, relative to the project.
              jobLocation: expect.stringMatching(/^test\/lambda\/handlers\/consumer\/accounting\.test\.ts:\d+:\d+$/),
              attempt: 2,
            },
            applyStartedAt: 1_234,
          },
        ],
      ]);
    });

    it('logs a failure on the last allowed receive as that, once, without an apply start when none began', () => {
      const logged = jest.spyOn(logger, 'error').mockImplementation(() => undefined);
      expect(() => accounting(5).fail(receivedTimes('a', 5), message('a'), new Error('boom'), tally)).toThrow('boom');
      expect(logged.mock.calls.map(([text, fields]) => [text, Object.keys(fields as object)])).toEqual([
        [
          'failed on its last allowed receive: SQS moves the message to the DLQ',
          ['receives', 'maxReceiveCount', 'error', 'recordFailure'],
        ],
      ]);
    });

    it('names a thrown non-Error in the dead-letter reason', () => {
      expect(() => accounting(1).fail(receivedTimes('a', 1), message('a'), 'plain string', tally)).toThrow(
        'plain string',
      );
      expect(tallied(tally)[BATCH].deadLetteredOperations).toEqual([
        `${operationId('a')} failed on its last allowed receive (1); SQS moves it to the DLQ: plain string`,
      ]);
    });
  });

  describe('Method: completed', () => {
    it('counts the completion, its outcome and its age since first enqueue', () => {
      const first = message('a', { firstEnqueuedAt: '2026-11-29T01:00:05.000Z' });
      expect(accounting().completed(first, 'applied', NOW.getTime() - 100, tally)).toBe('applied');
      expect(accounting().completed(message('b'), 'already-done', NOW.getTime() - 100, tally)).toBe('already-done');

      expect(tallied(tally)).toEqual({ [BATCH]: { completed: 2, oldestMessageAgeMs: 3_600_000 } });
      expect(metricsSeen.calls).toEqual([
        ['Applied', 1],
        ['AgeSinceFirstEnqueue', 3_600_000],
        ['AlreadyDone', 1],
        ['AgeSinceFirstEnqueue', 5_000],
      ]);
    });

    it('meters the SLO against dueBy: met at or before it, missed after', () => {
      accounting().completed(message('a', { dueBy: NOW.toISOString() }), 'applied', 0, tally);
      accounting().completed(message('b', { dueBy: '2026-11-29T02:00:04.999Z' }), 'applied', 0, tally);
      accounting().completed(message('c'), 'applied', 0, tally);
      expect([metricsSeen.total('SloMet'), metricsSeen.total('SloMissed')]).toEqual([1, 1]);
    });
  });

  describe('Methods: deadLettered, deferred, throttled', () => {
    it('note a dead-letter with its reason, a deferral and a throttle under the batch', () => {
      expect(accounting().deadLettered(message('a', { dueBy: NOW.toISOString() }), 'refused with 422', {}, tally)).toBe(
        'dead-lettered',
      );
      expect(accounting().deferred(message('b'), { cause: 'paced' }, tally)).toBe('deferred');
      accounting().throttled(message('c'), tally);

      expect(tallied(tally)).toEqual({
        [BATCH]: { deadLetteredOperations: [`${operationId('a')} refused with 422`], deferred: 1, throttled: 1 },
      });
      expect(metricsSeen.calls).toEqual([
        ['DeadLettered', 1],
        ['SloFailed', 1],
        ['Deferred', 1],
        ['Throttled', 1],
      ]);
    });
  });

  describe('Method: flush', () => {
    it("writes each batch's record once, under the invocation, and answers no failures", async () => {
      tally.add(BATCH, { consumed: 2, completed: 2 });
      tally.add(OTHER_BATCH, { consumed: 1, deferred: 1 });
      expect(await accounting().flush(tally, INVOCATION)).toEqual(new Set());
      expect(ledger.invocations).toEqual([
        { job: 'fake-job', batchId: BATCH, invocationId: INVOCATION, record: { consumed: 2, completed: 2 } },
        { job: 'fake-job', batchId: OTHER_BATCH, invocationId: INVOCATION, record: { consumed: 1, deferred: 1 } },
      ]);
    });

    it('answers the batch IDs whose write failed, counts each, and still writes the others', async () => {
      tally.add(BATCH, { consumed: 1 });
      tally.add(OTHER_BATCH, { consumed: 1 });
      ledger.failingBatches.add(OTHER_BATCH);
      expect(await accounting().flush(tally, INVOCATION)).toEqual(new Set([OTHER_BATCH]));
      expect(ledger.invocations.map((i) => i.batchId)).toEqual([BATCH]);
      expect(metricsSeen.calls).toEqual([['LedgerWriteFailed', 1]]);
    });

    it('writes nothing for an empty tally', async () => {
      expect(await accounting().flush(tally, INVOCATION)).toEqual(new Set());
      expect(ledger.invocations).toEqual([]);
    });
  });
});

describe('Function: withUnwrittenBatches', () => {
  const a = record('a');
  const b = record('b');
  const other = record('o', message('o', { batchId: OTHER_BATCH }));
  /** A rejection whose body still names the unwritten batch, and one that names none. */
  const rejectedInBatch = record('r', JSON.stringify({ batchId: BATCH, version: 9 }));
  const unreadable = record('u', '{not json');
  const records = [a, b, other, rejectedInBatch, unreadable];
  const batchIdOf = (r: SQSRecord) =>
    ({ [a.messageId]: BATCH, [b.messageId]: BATCH, [other.messageId]: OTHER_BATCH })[r.messageId];

  it('answers the response as it was when every batch was written', () => {
    const response: SQSBatchResponse = { batchItemFailures: [{ itemIdentifier: 'msg-a' }] };
    expect(withUnwrittenBatches(response, records, batchIdOf, new Set())).toBe(response);
  });

  it("hands back every record of an unwritten batch, a rejection naming it too, once each; the others' as they were", () => {
    const response: SQSBatchResponse = {
      batchItemFailures: [{ itemIdentifier: 'msg-b' }, { itemIdentifier: 'msg-u' }],
    };
    expect(withUnwrittenBatches(response, records, batchIdOf, new Set([BATCH]))).toEqual({
      batchItemFailures: [
        { itemIdentifier: 'msg-b' },
        { itemIdentifier: 'msg-u' },
        { itemIdentifier: 'msg-a' },
        { itemIdentifier: 'msg-r' },
      ],
    });
  });

  it('keeps a record of a written batch acknowledged', () => {
    expect(withUnwrittenBatches({ batchItemFailures: [] }, records, batchIdOf, new Set([OTHER_BATCH]))).toEqual({
      batchItemFailures: [{ itemIdentifier: 'msg-o' }],
    });
  });
});
