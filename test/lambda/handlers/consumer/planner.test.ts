import { ApplyTimeEstimator } from '../../../../lambda/core/pacing/applyEstimator';
import { logger } from '../../../../lambda/adapters/observability';
import { RateLimiterError } from '../../../../lambda/adapters/rateLimiter';
import { Planner, validateRecord, type Plan } from '../../../../lambda/handlers/consumer/planner';
import { SlotPool } from '../../../../lambda/handlers/consumer/slotPool';
import { job as fakeJob } from '../../../fixtures/jobs/fake-job';
import {
  BATCH,
  FakeCompletedLookup,
  FakeLimiter,
  grant,
  MAX_MESSAGE_BYTES,
  message,
  NOW,
  operationId,
  record,
} from './fakes';

const KEY = 'fake-provider';
const SPACING_MS = 100;
const T0 = NOW.getTime();

let lookup: FakeCompletedLookup;

/** The fake job's rule: NOW is 03:00 on the 29th in Berlin, so its latest business date is the 28th. */
const BUSINESS_DATES = { timeZone: 'Europe/Berlin', businessDateOffsetDays: -1 };
const RETENTION_SECONDS = 4 * 86_400;

const planner = () =>
  new Planner({
    job: fakeJob,
    maxMessageBytes: MAX_MESSAGE_BYTES,
    completedLookup: lookup,
    spacingMs: SPACING_MS,
    businessDates: BUSINESS_DATES,
    queueRetentionSeconds: RETENTION_SECONDS,
    now: () => NOW,
  });

/** The invocation's pool on `limiter` (undefined: pacing off); `applyMs` seeds the container's apply times. */
function pool(limiter: FakeLimiter | undefined, applyMs?: number): SlotPool {
  const estimator = new ApplyTimeEstimator();
  if (applyMs !== undefined) estimator.record(applyMs);
  return new SlotPool(
    { limiter, key: KEY, shortWaitMs: 10_000, lateToleranceMs: 50, spacingMs: SPACING_MS, clock: () => T0, estimator },
    () => 60_000,
    5_000,
  );
}

/** Each plan's kind (and what decides it), by message ID, in the batch's order. */
function kinds(plans: Map<string, Plan>): Record<string, string> {
  return Object.fromEntries(
    [...plans].map(([id, p]) => {
      switch (p.kind) {
        case 'defer':
          return [
            id,
            p.cause.kind === 'paced'
              ? `defer paced ${p.cause.waitMs}`
              : p.cause.kind === 'not-before'
                ? `defer not-before ${p.cause.notBeforeMs}`
                : 'defer throttled',
          ];
        case 'fail':
          return [id, `fail: ${p.error.message}`];
        default:
          return [id, p.kind];
      }
    }),
  );
}

/** Five due records, a to e. */
const five = () => ['a', 'b', 'c', 'd', 'e'].map((k) => record(k));

describe('Function: validateRecord', () => {
  it('answers the message and the resource as the job parsed it', () => {
    expect(validateRecord(JSON.stringify(message('a')), fakeJob, MAX_MESSAGE_BYTES)).toEqual({
      ok: true,
      message: message('a'),
      resource: { id: 'a' },
    });
  });

  it("names every problem: another job's message and each bad resource field", () => {
    const body = JSON.stringify(message('a', { jobType: 'other-job', resource: { id: 'A B', colour: 'red' } }));
    expect(validateRecord(body, fakeJob, MAX_MESSAGE_BYTES)).toEqual({
      ok: false,
      reasons: [
        'jobType: expected "fake-job", got "other-job"',
        'resource.id: Invalid string: must match pattern /^[a-z0-9-]+$/',
        'resource: Unrecognized key: "colour"',
      ],
    });
  });

  it("rejects what the envelope refuses before asking the job's schema", () => {
    expect(validateRecord(JSON.stringify({ ...message('a'), version: 2 }), fakeJob, MAX_MESSAGE_BYTES)).toEqual({
      ok: false,
      reasons: ['version: unsupported message version (this consumer reads version 1)'],
    });
    const notJson = validateRecord('{not json', fakeJob, MAX_MESSAGE_BYTES);
    expect(notJson.ok).toBe(false);
    expect(!notJson.ok && notJson.reasons).toEqual([expect.stringMatching(/^body is not valid JSON \(/)]);
  });

  it('rejects a body over the size cap', () => {
    const body = JSON.stringify(message('a'));
    expect(validateRecord(body, fakeJob, 100)).toEqual({
      ok: false,
      reasons: [`body is ${Buffer.byteLength(body)} bytes, over the 100-byte cap`],
    });
  });
});

describe('Class: Planner', () => {
  beforeAll(() => logger.setLogLevel('SILENT'));

  beforeEach(() => {
    jest.restoreAllMocks();
    lookup = new FakeCompletedLookup();
  });

  describe('Method: plan (before any slot)', () => {
    it('rejects an invalid record with its reasons, and asks nothing for it', async () => {
      const limiter = new FakeLimiter([grant([T0])]);
      const plans = await planner().plan(
        [record('bad', message('bad', { jobType: 'other-job' })), record('a')],
        pool(limiter),
      );

      expect(plans.get('msg-bad')).toEqual({
        kind: 'reject',
        reasons: ['jobType: expected "fake-job", got "other-job"'],
      });
      expect(plans.get('msg-a')).toEqual({ kind: 'run', message: message('a'), resource: { id: 'a' } });
      expect(lookup.calls).toEqual([{ jobName: 'fake-job', operationIds: [operationId('a')] }]);
      expect(limiter.calls.map((c) => c.count)).toEqual([1]);
    });

    it('defers a record whose notBefore is ahead, and runs one whose notBefore is now or past', async () => {
      const ahead = '2026-11-29T02:10:00.000Z';
      const plans = await planner().plan(
        [
          record('later', message('later', { notBefore: ahead })),
          record('now', message('now', { notBefore: NOW.toISOString() })),
          record('past', message('past', { notBefore: '2026-11-29T01:00:00.000Z' })),
        ],
        pool(undefined),
      );

      expect(plans.get('msg-later')).toEqual({
        kind: 'defer',
        message: message('later', { notBefore: ahead }),
        cause: { kind: 'not-before', notBeforeMs: Date.parse(ahead) },
      });
      expect(kinds(plans)).toEqual({
        'msg-later': `defer not-before ${Date.parse(ahead)}`,
        'msg-now': 'run',
        'msg-past': 'run',
      });
      // The not-yet-due record is not asked about: it takes no slot now either way.
      expect(lookup.calls).toEqual([{ jobName: 'fake-job', operationIds: [operationId('now'), operationId('past')] }]);
    });

    it("rejects a record of a business date after the job's latest, naming it, and asks nothing for it", async () => {
      const limiter = new FakeLimiter([grant([T0])]);
      const future = message('future', { businessDate: '2027-12-04', operationId: 'fake:future:2027-12-04' });
      const plans = await planner().plan([record('future', future), record('a')], pool(limiter));

      expect(plans.get('msg-future')).toEqual({
        kind: 'reject',
        reasons: [
          'businessDate: business date 2027-12-04 is in the future: the latest for fake-job now is 2026-11-28 (Europe/Berlin, offset -1)',
        ],
      });
      expect(kinds(plans)).toEqual({ 'msg-future': 'reject', 'msg-a': 'run' });
      expect(lookup.calls).toEqual([{ jobName: 'fake-job', operationIds: [operationId('a')] }]);
    });

    it('rejects a record whose notBefore is further after its enqueuedAt than the queue keeps a message, and defers one within it', async () => {
      const far = '2026-12-03T02:00:00.001Z';
      const edge = '2026-12-03T02:00:00.000Z';
      const plans = await planner().plan(
        [record('far', message('far', { notBefore: far })), record('edge', message('edge', { notBefore: edge }))],
        pool(undefined),
      );

      expect(plans.get('msg-far')).toEqual({
        kind: 'reject',
        reasons: [
          `notBefore: ${far} is more than the queue's retention (345600 s) after enqueuedAt 2026-11-29T02:00:00.000Z`,
        ],
      });
      expect(kinds(plans)).toEqual({ 'msg-far': 'reject', 'msg-edge': `defer not-before ${Date.parse(edge)}` });
    });

    it("starts a redriven record's deferral age again at its first receive, and leaves a catch-up's alone", async () => {
      const dlqAttributes = {
        failureReason: {
          stringValue: 'downstream refused',
          dataType: 'String',
          stringListValues: [],
          binaryListValues: [],
        },
      };
      const old = message('old', { firstEnqueuedAt: '2026-11-01T02:00:00.000Z' });
      const catchUp = message('catch-up', { backfill: true, firstEnqueuedAt: '2026-11-01T02:00:00.000Z' });
      const plans = await planner().plan(
        [record('old', old, { messageAttributes: dlqAttributes }), record('catch-up', catchUp)],
        pool(undefined),
      );

      expect(plans.get('msg-old')).toEqual({
        kind: 'run',
        message: { ...old, backfill: true, firstEnqueuedAt: NOW.toISOString() },
        resource: { id: 'old' },
      });
      expect(plans.get('msg-catch-up')).toEqual({ kind: 'run', message: catchUp, resource: { id: 'catch-up' } });
    });

    it('asks neither the lookup nor the limiter when nothing is due', async () => {
      const limiter = new FakeLimiter();
      const plans = await planner().plan(
        [record('bad', 'not json'), record('later', message('later', { notBefore: '2026-11-30T00:00:00.000Z' }))],
        pool(limiter),
      );
      expect(Object.values(kinds(plans))).toEqual([
        'reject',
        `defer not-before ${Date.parse('2026-11-30T00:00:00.000Z')}`,
      ]);
      expect(lookup.calls).toEqual([]);
      expect(limiter.calls).toEqual([]);
    });
  });

  describe('Method: plan (the completed pre-check)', () => {
    it('settles the operations already COMPLETED as done, with who completed them, and takes slots only for the rest', async () => {
      const by = { batchId: 'fake-job:2026-11-27:earlier', invocationId: 'inv-1' };
      lookup.done.set(operationId('b'), by).set(operationId('d'), undefined);
      const limiter = new FakeLimiter([grant([T0, T0 + 100, T0 + 200])]);
      const plans = await planner().plan(five(), pool(limiter));

      expect(plans.get('msg-b')).toEqual({ kind: 'done', message: message('b'), by });
      expect(plans.get('msg-d')).toEqual({ kind: 'done', message: message('d'), by: undefined });
      expect(kinds(plans)).toEqual({
        'msg-a': 'run',
        'msg-b': 'done',
        'msg-c': 'run',
        'msg-d': 'done',
        'msg-e': 'run',
      });
      expect(limiter.calls).toEqual([{ key: KEY, count: 3, options: { maxWaitMs: 10_000, priority: 'live' } }]);
    });

    it('takes no slot when every due record is done', async () => {
      lookup.done.set(operationId('a'), undefined).set(operationId('b'), undefined);
      const limiter = new FakeLimiter();
      const plans = await planner().plan([record('a'), record('b')], pool(limiter));
      expect(kinds(plans)).toEqual({ 'msg-a': 'done', 'msg-b': 'done' });
      expect(limiter.calls).toEqual([]);
    });

    it('only skips the shortcut when the lookup fails: every due record takes a slot, and it is logged', async () => {
      const warn = jest.spyOn(logger, 'warn');
      const error = new Error('BatchGetItem throttled');
      lookup.error = error;
      const limiter = new FakeLimiter([grant([T0, T0 + 100])]);
      const plans = await planner().plan([record('a'), record('b')], pool(limiter));

      expect(kinds(plans)).toEqual({ 'msg-a': 'run', 'msg-b': 'run' });
      expect(limiter.calls.map((c) => c.count)).toEqual([2]);
      expect(warn).toHaveBeenCalledWith(
        'completed-operation pre-check failed; every due record takes a slot and the claim decides',
        { error },
      );
    });
  });

  describe('Method: plan (unpaced)', () => {
    it('runs every due record, with no limiter', async () => {
      const plans = await planner().plan(five(), pool(undefined));
      expect(kinds(plans)).toEqual({ 'msg-a': 'run', 'msg-b': 'run', 'msg-c': 'run', 'msg-d': 'run', 'msg-e': 'run' });
    });
  });

  describe('Method: plan (paced: one block)', () => {
    it('runs every record when the whole block is granted, and keeps its slots in the pool', async () => {
      const limiter = new FakeLimiter([grant([T0 + 10, T0 + 110, T0 + 210, T0 + 310, T0 + 410])]);
      const slots = pool(limiter);
      const plans = await planner().plan(five(), slots);

      expect(kinds(plans)).toEqual({ 'msg-a': 'run', 'msg-b': 'run', 'msg-c': 'run', 'msg-d': 'run', 'msg-e': 'run' });
      expect(limiter.calls).toEqual([{ key: KEY, count: 5, options: { maxWaitMs: 10_000, priority: 'live' } }]);
      expect(slots.unused()).toBe(5);
      expect(await slots.next()).toEqual({ startAtMs: T0 + 10 });
    });

    it('asks for no more than the container can start on time, and runs all when that block is granted', async () => {
      // 120 ms applies, 100 ms spacing, 50 ms tolerance: 3 slots usable in one block; the other two refill later.
      const limiter = new FakeLimiter([grant([T0, T0 + 100, T0 + 200])]);
      const plans = await planner().plan(five(), pool(limiter, 120));

      expect(limiter.calls.map((c) => c.count)).toEqual([3]);
      expect(kinds(plans)).toEqual({ 'msg-a': 'run', 'msg-b': 'run', 'msg-c': 'run', 'msg-d': 'run', 'msg-e': 'run' });
    });

    it("runs the granted records and defers the rest now, each by the limiter's hint plus its place times the spacing", async () => {
      const limiter = new FakeLimiter([grant([T0, T0 + 100], 300)]);
      const plans = await planner().plan(five(), pool(limiter));

      expect(kinds(plans)).toEqual({
        'msg-a': 'run',
        'msg-b': 'run',
        'msg-c': 'defer paced 300',
        'msg-d': 'defer paced 400',
        'msg-e': 'defer paced 500',
      });
      expect(plans.get('msg-c')).toEqual({
        kind: 'defer',
        message: message('c'),
        cause: { kind: 'paced', waitMs: 300 },
      });
    });

    it('defers even the records past a smaller block when that block is not granted whole', async () => {
      // A block of 3 (slow applies), 1 granted: the key is busy, so all four others go back now.
      const limiter = new FakeLimiter([grant([T0], 1_000)]);
      const plans = await planner().plan(five(), pool(limiter, 120));

      expect(limiter.calls.map((c) => c.count)).toEqual([3]);
      expect(kinds(plans)).toEqual({
        'msg-a': 'run',
        'msg-b': 'defer paced 1000',
        'msg-c': 'defer paced 1100',
        'msg-d': 'defer paced 1200',
        'msg-e': 'defer paced 1300',
      });
    });

    it('defers every due record when nothing is granted', async () => {
      const limiter = new FakeLimiter([grant([], 2_500)]);
      const plans = await planner().plan([record('a'), record('b')], pool(limiter));
      expect(kinds(plans)).toEqual({ 'msg-a': 'defer paced 2500', 'msg-b': 'defer paced 2600' });
    });

    it('fails every due record, unclaimed, when the limiter cannot be asked; the others keep their plans', async () => {
      const error = new RateLimiterError('DynamoDB unavailable', KEY, 'limiter');
      const logged = jest.spyOn(logger, 'error');
      lookup.done.set(operationId('done'), undefined);
      const limiter = new FakeLimiter([error]);
      const plans = await planner().plan(
        [record('a'), record('bad', '{}'), record('done'), record('b')],
        pool(limiter),
      );

      expect(kinds(plans)).toEqual({
        'msg-a': 'fail: DynamoDB unavailable',
        'msg-bad': 'reject',
        'msg-done': 'done',
        'msg-b': 'fail: DynamoDB unavailable',
      });
      expect(plans.get('msg-a')).toEqual({ kind: 'fail', message: message('a'), error });
      expect(logged).toHaveBeenCalledWith(
        'rate limiter unavailable; the due records will be retried by SQS, unclaimed',
        { key: KEY, error },
      );
    });

    it('plans every record of the batch, once, by message ID', async () => {
      const limiter = new FakeLimiter([grant([T0])]);
      const records = [
        record('a'),
        record('bad', '[]'),
        record('later', message('later', { notBefore: '2026-11-30T00:00:00.000Z' })),
      ];
      const plans = await planner().plan(records, pool(limiter));
      expect([...plans.keys()].sort()).toEqual(records.map((r) => r.messageId).sort());
      expect(plans.get('msg-a')).toMatchObject({ kind: 'run', message: { batchId: BATCH } });
    });
  });
});
