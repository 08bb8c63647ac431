import { BACKFILL_GROUP } from '../../../../lambda/core/fairness';
import { createDeferralPolicy, type DeferralCause } from '../../../../lambda/core/deferral';
import { ThrottledError } from '../../../../lambda/core/errors';
import { InvalidMessageError, parseMessage, serializeMessage, type JobMessage } from '../../../../lambda/core/message';
import { BatchTally } from '../../../../lambda/adapters/ledger';
import { logger } from '../../../../lambda/adapters/observability';
import { PublishError, type OutgoingMessage } from '../../../../lambda/adapters/sqsPublisher';
import { Accounting } from '../../../../lambda/handlers/consumer/accounting';
import { Deferrer } from '../../../../lambda/handlers/consumer/deferrer';
import {
  BATCH,
  ENQUEUED_AT,
  FakeLedger,
  FakePublisher,
  MAX_MESSAGE_BYTES,
  message,
  NOW,
  operationId,
  record,
  recordMetrics,
  tallied,
} from './fakes';

const QUEUE_URL = 'https://sqs.us-east-1.amazonaws.com/000000000000/fake-job';
const DLQ_URL = 'https://sqs.us-east-1.amazonaws.com/000000000000/fake-job-dlq';
/** The throttle budget of these tests: a message at attempt 3 is past it. */
const MAX_DEFERRALS = 3;

let publisher: FakePublisher;
let tally: BatchTally;
let metricsSeen: ReturnType<typeof recordMetrics>;

/** No jitter (random 0): a paced deferral waits the hint exactly, a throttle without a hint the 1 s floor. */
function deferrer(maxMessageBytes = MAX_MESSAGE_BYTES): Deferrer {
  return new Deferrer({
    queueUrl: QUEUE_URL,
    dlqUrl: DLQ_URL,
    maxMessageBytes,
    publisher,
    policy: createDeferralPolicy({ maxDeferrals: MAX_DEFERRALS, random: () => 0 }),
    accounting: new Accounting({ jobName: 'fake-job', ledger: new FakeLedger(), now: () => NOW }),
    now: () => NOW,
  });
}

/** The message an outgoing body carries. */
function bodyOf(outgoing: OutgoingMessage): JobMessage {
  const parsed = parseMessage(outgoing.body, MAX_MESSAGE_BYTES);
  if (!parsed.ok) throw new Error(`not a valid message: ${parsed.reasons.join('; ')}`);
  return parsed.message;
}

const paced = (waitMs: number): DeferralCause => ({ kind: 'paced', waitMs });
const throttled = (retryAfterMs?: number): DeferralCause => ({
  kind: 'throttled',
  error: new ThrottledError('downstream answered 429', retryAfterMs),
});
const budgetReason = `deferral budget exhausted: 3 deferrals, the limit is 3 (throttled: downstream answered 429)`;

describe('Class: Deferrer', () => {
  beforeAll(() => logger.setLogLevel('SILENT'));

  beforeEach(() => {
    jest.restoreAllMocks();
    metricsSeen = recordMetrics();
    publisher = new FakePublisher();
    tally = new BatchTally();
  });

  describe('Method: prepare (deferral)', () => {
    it('re-publishes a paced record to its queue after the hint, counting a paced deferral and no attempt', () => {
      const prepared = deferrer().prepare(message('a'), paced(2_500), tally);

      expect(prepared.queueUrl).toBe(QUEUE_URL);
      expect(prepared.outgoing).toEqual({ operationId: operationId('a'), body: expect.any(String), delaySeconds: 3 });
      expect(bodyOf(prepared.outgoing)).toEqual({
        ...message('a'),
        enqueuedAt: NOW.toISOString(),
        firstEnqueuedAt: ENQUEUED_AT,
        attempt: 0,
        pacedDeferrals: 1,
      });
    });

    it('counts nothing until the message is sent and settled', () => {
      const prepared = deferrer().prepare(message('a'), paced(0), tally);
      expect(tallied(tally)).toEqual({});
      expect(metricsSeen.calls).toEqual([]);

      expect(prepared.settle()).toBe('deferred');
      expect(tallied(tally)).toEqual({ [BATCH]: { deferred: 1 } });
      expect(metricsSeen.calls).toEqual([['Deferred', 1]]);
    });

    it('spends one attempt of the budget on a throttle, waits its Retry-After, and leaves pacedDeferrals as they were', () => {
      const prepared = deferrer().prepare(message('a', { attempt: 1, pacedDeferrals: 4 }), throttled(30_000), tally);
      expect(prepared.outgoing.delaySeconds).toBe(30);
      expect(bodyOf(prepared.outgoing)).toMatchObject({ attempt: 2, pacedDeferrals: 4 });

      const fresh = deferrer().prepare(message('b'), throttled(), tally);
      expect(fresh.outgoing.delaySeconds).toBe(1);
      expect(bodyOf(fresh.outgoing)).toMatchObject({ attempt: 1 });
      expect(bodyOf(fresh.outgoing).pacedDeferrals).toBeUndefined();
    });

    it('keeps the first enqueue time of a message deferred before', () => {
      const first = '2026-11-29T01:00:00.000Z';
      const prepared = deferrer().prepare(
        message('a', { firstEnqueuedAt: first, pacedDeferrals: 2 }),
        paced(1_000),
        tally,
      );
      expect(bodyOf(prepared.outgoing)).toMatchObject({
        firstEnqueuedAt: first,
        enqueuedAt: NOW.toISOString(),
        pacedDeferrals: 3,
      });
    });

    it('chains a wait longer than 900 s through notBefore, dated from now', () => {
      const prepared = deferrer().prepare(message('a'), paced(3_600_000), tally);
      expect(prepared.outgoing.delaySeconds).toBe(900);
      expect(bodyOf(prepared.outgoing).notBefore).toBe('2026-11-29T03:00:05.000Z');
    });

    it('continues a chain to its own target without counting a new deferral, and drops notBefore once one delay covers it', () => {
      const target = NOW.getTime() + 2_000_000;
      const carried = message('a', { notBefore: new Date(target).toISOString(), attempt: 2, pacedDeferrals: 5 });
      const longWay = deferrer().prepare(carried, { kind: 'not-before', notBeforeMs: target }, tally);
      expect(longWay.outgoing.delaySeconds).toBe(900);
      expect(bodyOf(longWay.outgoing)).toMatchObject({
        notBefore: new Date(target).toISOString(),
        attempt: 2,
        pacedDeferrals: 5,
      });

      const near = NOW.getTime() + 600_500;
      const lastLeg = deferrer().prepare(
        message('a', { notBefore: new Date(near).toISOString() }),
        { kind: 'not-before', notBeforeMs: near },
        tally,
      );
      // Rounded up: the message never comes back before its target.
      expect(lastLeg.outgoing.delaySeconds).toBe(601);
      expect(bodyOf(lastLeg.outgoing).notBefore).toBeUndefined();
    });

    it('drops a passed notBefore when a due record is deferred for another cause', () => {
      const prepared = deferrer().prepare(message('a', { notBefore: '2026-11-29T01:00:00.000Z' }), paced(1_000), tally);
      expect(bodyOf(prepared.outgoing).notBefore).toBeUndefined();
    });

    it('throws InvalidMessageError when the re-published message no longer fits', () => {
      // The original fits exactly; the deferral adds firstEnqueuedAt, attempt and pacedDeferrals.
      const original = message('a');
      const size = Buffer.byteLength(serializeMessage(original, MAX_MESSAGE_BYTES));
      const tight = deferrer(size);
      expect(() => tight.prepare(original, paced(0), tally)).toThrow(InvalidMessageError);
      expect(() => tight.prepare(original, paced(0), tally)).toThrow(
        new RegExp(
          `^refusing to publish an invalid message for ${operationId('a')}: body is \\d+ bytes, over the ${size}-byte cap$`,
        ),
      );
    });
  });

  describe('Method: prepare (dead-letter)', () => {
    it('sends a throttle past the budget to the DLQ with its reason, the copy re-armed with attempt 0', () => {
      const carried = message('a', {
        attempt: MAX_DEFERRALS,
        pacedDeferrals: 7,
        firstEnqueuedAt: '2026-11-28T20:00:00.000Z',
        notBefore: '2026-11-29T01:00:00.000Z',
      });
      const prepared = deferrer().prepare(carried, throttled(), tally);

      expect(prepared.queueUrl).toBe(DLQ_URL);
      expect(prepared.outgoing).toEqual({
        operationId: operationId('a'),
        body: expect.any(String),
        attributes: {
          failureReason: budgetReason,
          operationId: operationId('a'),
          jobType: 'fake-job',
          batchId: BATCH,
          failedAt: NOW.toISOString(),
        },
        // It comes back only by a redrive, as backfill: the fair queue's one backfill tenant.
        groupId: BACKFILL_GROUP,
      });
      // A redrive starts with a fresh budget, keeps the true age, and is due at once.
      expect(bodyOf(prepared.outgoing)).toEqual({
        ...message('a'),
        firstEnqueuedAt: '2026-11-28T20:00:00.000Z',
        attempt: 0,
        pacedDeferrals: 0,
      });
    });

    it('settles as dead-lettered, noting the operation and its reason for the ledger', () => {
      const prepared = deferrer().prepare(message('a', { attempt: MAX_DEFERRALS }), throttled(), tally);
      expect(prepared.settle()).toBe('dead-lettered');
      expect(tallied(tally)).toEqual({ [BATCH]: { deadLetteredOperations: [`${operationId('a')} ${budgetReason}`] } });
      expect(metricsSeen.total('DeadLettered')).toBe(1);
      expect(metricsSeen.total('Deferred')).toBe(0);
    });

    it('never dead-letters a paced deferral, however many came before', () => {
      const prepared = deferrer().prepare(
        message('a', { attempt: MAX_DEFERRALS, pacedDeferrals: 500 }),
        paced(1_000),
        tally,
      );
      expect(prepared.queueUrl).toBe(QUEUE_URL);
      expect(bodyOf(prepared.outgoing)).toMatchObject({ attempt: MAX_DEFERRALS, pacedDeferrals: 501 });
    });
  });

  describe('Method: defer', () => {
    it('publishes one message to the queue, then settles it', async () => {
      expect(await deferrer().defer(message('a'), paced(4_000), tally)).toBe('deferred');
      expect(publisher.calls).toHaveLength(1);
      expect(publisher.calls[0].queueUrl).toBe(QUEUE_URL);
      expect(publisher.calls[0].messages.map((m) => [m.operationId, m.delaySeconds])).toEqual([[operationId('a'), 4]]);
      expect(tallied(tally)).toEqual({ [BATCH]: { deferred: 1 } });
    });

    it('throws the publish error and counts nothing when the message could not be sent', async () => {
      publisher.failWith = () => new Error('SQS unavailable');
      await expect(deferrer().defer(message('a'), paced(4_000), tally)).rejects.toThrow('SQS unavailable');
      expect(tallied(tally)).toEqual({});
      expect(metricsSeen.total('Deferred')).toBe(0);
    });
  });

  describe('Method: deadLetter', () => {
    it('sends the message to the DLQ as it came, with its reason, and notes it', async () => {
      const rec = record('a', message('a', { attempt: 2 }));
      const outcome = await deferrer().deadLetter(
        rec,
        message('a', { attempt: 2 }),
        'downstream refused a with 422',
        tally,
        { status: 422 },
      );

      expect(outcome).toBe('dead-lettered');
      expect(publisher.calls).toEqual([
        {
          queueUrl: DLQ_URL,
          messages: [
            {
              operationId: operationId('a'),
              body: rec.body,
              attributes: {
                failureReason: 'downstream refused a with 422',
                operationId: operationId('a'),
                jobType: 'fake-job',
                batchId: BATCH,
                failedAt: NOW.toISOString(),
              },
              groupId: BACKFILL_GROUP,
            },
          ],
        },
      ]);
      expect(tallied(tally)).toEqual({
        [BATCH]: { deadLetteredOperations: [`${operationId('a')} downstream refused a with 422`] },
      });
    });

    it('escapes control, bidi and invisible characters of the reason, in the DLQ attribute and the ledger alike', async () => {
      await deferrer().deadLetter(
        record('a'),
        message('a'),
        'downstream refused "x\u202egnp.exe"\u2028forged line\u0085\u200b',
        tally,
      );

      const escaped = 'downstream refused "x\\u202egnp.exe"\\u2028forged line\\u0085\\u200b';
      expect(publisher.calls[0].messages[0].attributes?.failureReason).toBe(escaped);
      expect(tallied(tally)).toEqual({ [BATCH]: { deadLetteredOperations: [`${operationId('a')} ${escaped}`] } });
    });

    it('cuts the reason attribute to 1000 characters', async () => {
      await deferrer().deadLetter(record('a'), message('a'), 'x'.repeat(1500), tally);
      expect(publisher.calls[0].messages[0].attributes?.failureReason).toBe('x'.repeat(1000));
    });

    it('throws, and notes nothing, when the DLQ did not take it', async () => {
      publisher.failWith = () => new Error('SQS unavailable');
      await expect(deferrer().deadLetter(record('a'), message('a'), 'refused', tally)).rejects.toThrow(
        'SQS unavailable',
      );
      expect(tallied(tally)).toEqual({});
    });
  });

  describe('Method: deferBlock', () => {
    /** Three paced records for the queue and one throttle past the budget for the DLQ. */
    const items = () => [
      { record: record('a'), message: message('a'), cause: paced(1_000) },
      { record: record('b'), message: message('b'), cause: paced(1_100) },
      { record: record('x'), message: message('x', { attempt: MAX_DEFERRALS }), cause: throttled() },
      { record: record('c'), message: message('c'), cause: paced(1_200) },
    ];

    it('makes one publish per queue, and settles every record', async () => {
      const results = await deferrer().deferBlock(items(), tally);

      expect(publisher.calls.map((c) => [c.queueUrl, c.messages.map((m) => m.operationId)])).toEqual([
        [QUEUE_URL, [operationId('a'), operationId('b'), operationId('c')]],
        [DLQ_URL, [operationId('x')]],
      ]);
      expect(Object.fromEntries(results)).toEqual({
        'msg-a': 'deferred',
        'msg-b': 'deferred',
        'msg-x': 'dead-lettered',
        'msg-c': 'deferred',
      });
      expect(tallied(tally)).toEqual({
        [BATCH]: { deferred: 3, deadLetteredOperations: [`${operationId('x')} ${budgetReason}`] },
      });
    });

    it('fails only the records SQS did not take when the publish reports which (PublishError); the others settle', async () => {
      const error = new PublishError(
        '1 of 3 messages not published',
        QUEUE_URL,
        { [operationId('b')]: 'InternalError' },
        2,
      );
      publisher.failWith = (queueUrl) => (queueUrl === QUEUE_URL ? error : undefined);
      const results = await deferrer().deferBlock(items(), tally);

      expect(Object.fromEntries(results)).toEqual({
        'msg-a': 'deferred',
        'msg-b': error,
        'msg-x': 'dead-lettered',
        'msg-c': 'deferred',
      });
      expect(tallied(tally)).toEqual({
        [BATCH]: { deferred: 2, deadLetteredOperations: [`${operationId('x')} ${budgetReason}`] },
      });
    });

    it("fails every record of a queue whose publish failed without saying which; the other queue's settle", async () => {
      const error = new Error('SQS unavailable');
      publisher.failWith = (queueUrl) => (queueUrl === QUEUE_URL ? error : undefined);
      const results = await deferrer().deferBlock(items(), tally);

      expect(Object.fromEntries(results)).toEqual({
        'msg-a': error,
        'msg-b': error,
        'msg-x': 'dead-lettered',
        'msg-c': error,
      });
      expect(tallied(tally)).toEqual({ [BATCH]: { deadLetteredOperations: [`${operationId('x')} ${budgetReason}`] } });
      expect(metricsSeen.total('Deferred')).toBe(0);
    });

    it('answers the error of a record whose deferral cannot be prepared, and still sends the others', async () => {
      // The larger message fits the cap exactly; its deferral's added fields push it over, while the small one still fits.
      const big = message('big', { resource: { id: 'big', note: 'n'.repeat(600) } });
      const size = Buffer.byteLength(serializeMessage(big, MAX_MESSAGE_BYTES));
      const tight = deferrer(size);
      const results = await tight.deferBlock(
        [
          { record: record('a'), message: message('a'), cause: paced(0) },
          { record: record('big', big), message: big, cause: paced(0) },
        ],
        tally,
      );

      expect(results.get('msg-a')).toBe('deferred');
      expect(results.get('msg-big')).toBeInstanceOf(InvalidMessageError);
      expect(publisher.calls.map((c) => c.messages.map((m) => m.operationId))).toEqual([[operationId('a')]]);
    });
  });
});
