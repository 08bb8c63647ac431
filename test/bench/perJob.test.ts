// The per-job arithmetic: measured counts to figures per job, the naive model, and the goal check.
import { limiterItemKind } from '../../bench/countingProxy';
import {
  batchedFigures,
  checkGoals,
  flatVerdict,
  limiterFigures,
  naiveFigures,
  slotWaitGbSeconds,
  type RunCounts,
} from '../../bench/perJob';
import { costFor } from '../../bench/prices';

/** 1,000 jobs in full batches of 10: one send, receive and delete call per 10, two idempotency writes each. */
const steady: RunCounts = {
  jobs: 1000,
  deliveries: 1000,
  sqs: { sendCalls: 100, receiveCalls: 100, emptyReceiveCalls: 40, deleteCalls: 100, attributeCalls: 0 },
  dynamo: {
    idempotency: { write: 2000, read: 0 },
    ledger: { write: 102, read: 0 },
    limiter: { write: 100, read: 0 },
    business: { write: 1000, read: 500 },
  },
  // 100 invocations of 200 ms at 512 MB.
  lambda: { producerInvocations: 1, consumerInvocations: 100, gbSeconds: 100 * 0.2 * 0.5, architecture: 'arm64' },
  scheduledRuns: 1,
};

describe('Function: batchedFigures', () => {
  it('divides every counted request by the jobs, keeping idle polls and business units apart', () => {
    const { perJob } = batchedFigures(steady);
    expect(perJob.sqsRequests).toBeCloseTo(0.3, 10);
    expect(perJob.sqsIdlePolls).toBeCloseTo(0.04, 10);
    expect(perJob.dynamoWriteUnits).toBeCloseTo(2.202, 10);
    expect(perJob.businessWriteUnits).toBe(1);
    expect(perJob.lambdaInvocations).toBeCloseTo(0.101, 10);
    expect(perJob.lambdaGbSeconds).toBeCloseTo((20 * 0.5) / 1000, 10);
  });

  it("counts the producer's queue-depth reads as SQS requests", () => {
    const { perJob } = batchedFigures({ ...steady, sqs: { ...steady.sqs, attributeCalls: 10 } });
    expect(perJob.sqsRequests).toBeCloseTo(0.31, 10);
  });

  it('prices the GB-seconds at the configured rate when asked, and the measured ones otherwise', () => {
    const scaled: RunCounts = { ...steady, lambda: { ...steady.lambda, gbSeconds: 10, gbSecondsAtRealRate: 40 } };
    expect(batchedFigures(scaled).perJob.lambdaGbSeconds).toBeCloseTo(0.01, 10);
    expect(batchedFigures(scaled, { atRealRate: true }).perJob.lambdaGbSeconds).toBeCloseTo(0.04, 10);
    expect(batchedFigures(steady, { atRealRate: true }).perJob.lambdaGbSeconds).toBeCloseTo(0.01, 10);
    expect(batchedFigures(scaled, { atRealRate: true }).costPerMillionUsd.lambdaDuration).toBeCloseTo(
      0.04 * 0.0000133334 * 1e6,
      6,
    );
  });
});

describe('Function: slotWaitGbSeconds', () => {
  // 1024 MB, so GB-s = seconds. Starts at 0 ms, 1000 ms and 2000 ms after the invocation began; 100 ms of work after
  // the last one: 2000 ms to the last start, less 3 records x 100 ms of work, is 1.7 s of waiting.
  const invocation = { startMs: 10_000, endMs: 12_100, memoryMb: 1024, keys: ['a', 'b', 'c'] };
  const starts: Record<string, number[]> = { a: [10_000], b: [11_000], c: [12_000] };

  it("takes each invocation's time to its last start, less one record's work per record", () => {
    expect(slotWaitGbSeconds([invocation], (k) => starts[k] ?? [])).toBeCloseTo(1.7, 10);
  });

  it('ignores starts outside the invocation (a deferred record started later, in another one)', () => {
    const later: Record<string, number[]> = { ...starts, c: [50_000] };
    // Two starts: 1000 ms to the last, 1100 ms of tail work each: no waiting left.
    expect(slotWaitGbSeconds([invocation], (k) => later[k] ?? [])).toBe(0);
  });

  it('is 0 without observed starts', () => {
    expect(slotWaitGbSeconds([invocation], () => [])).toBe(0);
  });
});

describe('Function: flatVerdict', () => {
  const short = { multiple: 10, deliveriesPerJob: 1.0, costPerMillionUsd: 2.0 };

  it('is flat when neither figure grows past the tolerance', () => {
    expect(flatVerdict(short, { multiple: 50, deliveriesPerJob: 1.05, costPerMillionUsd: 2.1 }, 0.1).flat).toBe(true);
  });

  it('grows when the deliveries or the cost per job grow past it', () => {
    expect(flatVerdict(short, { multiple: 50, deliveriesPerJob: 1.2, costPerMillionUsd: 2.0 }, 0.1).flat).toBe(false);
    expect(flatVerdict(short, { multiple: 50, deliveriesPerJob: 1.0, costPerMillionUsd: 2.3 }, 0.1).flat).toBe(false);
  });
});

describe('Function: naiveFigures', () => {
  it('prices one send, receive and delete and one invocation per job, with the per-invocation writes per job', () => {
    const { perJob } = naiveFigures(steady);
    expect(perJob.sqsRequests).toBe(3);
    expect(perJob.lambdaInvocations).toBeCloseTo(1.001, 10);
    expect(perJob.dynamoWriteUnits).toBeCloseTo(2 + 1 + 1.02, 10);
  });
});

describe('Function: checkGoals', () => {
  it('reports each goal met or missed', () => {
    expect(checkGoals(batchedFigures(steady).perJob)).toEqual([
      { metric: 'sqsRequests', value: expect.closeTo(0.3, 10), goal: 0.35, met: true },
      { metric: 'dynamoWriteUnits', value: expect.closeTo(2.202, 10), goal: 2.2, met: false },
      { metric: 'lambdaInvocations', value: expect.closeTo(0.101, 10), goal: 0.1, met: false },
    ]);
  });
});

describe('Function: costFor', () => {
  it('prices a million jobs at the us-east-1 table', () => {
    const cost = costFor({
      sqsRequests: 1,
      dynamoWriteUnits: 1,
      dynamoReadUnits: 1,
      lambdaInvocations: 1,
      lambdaGbSeconds: 1,
      schedulerInvocations: 1,
    });
    expect(cost).toEqual({
      sqs: expect.closeTo(0.4, 10),
      lambdaRequests: expect.closeTo(0.2, 10),
      lambdaDuration: expect.closeTo(13.3334, 10),
      dynamodb: expect.closeTo(0.75, 10),
      scheduler: expect.closeTo(1, 10),
      total: expect.closeTo(15.6834, 10),
    });
  });

  describe('Function: limiterFigures', () => {
    it("counts the limiter's writes, lost races and reads by item kind, and the slots item's per consumer invocation", () => {
      const requests = [
        ...Array.from({ length: 10 }, () => ({
          action: 'UpdateItem',
          status: 200,
          kind: limiterItemKind('payments-provider'),
        })),
        { action: 'UpdateItem', status: 400, kind: limiterItemKind('payments-provider') },
        ...Array.from({ length: 12 }, () => ({
          action: 'GetItem',
          status: 200,
          kind: limiterItemKind('payments-provider'),
        })),
        { action: 'GetItem', status: 200, kind: limiterItemKind('payments-provider#rate') },
        { action: 'UpdateItem', status: 200, kind: limiterItemKind('payments-provider#key#t1#queue') },
      ];
      expect(limiterFigures(requests, 8)).toEqual({
        consumerInvocations: 8,
        slotsPerInvocation: { writes: 1.25, lostRaces: 0.125, reads: 1.5 },
        byKind: {
          slots: { writes: 10, lostRaces: 1, reads: 12 },
          rate: { writes: 0, lostRaces: 0, reads: 1 },
          'key queue': { writes: 1, lostRaces: 0, reads: 0 },
        },
      });
      expect(limiterFigures([], 0).slotsPerInvocation).toEqual({ writes: 0, lostRaces: 0, reads: 0 });
    });

    it("tells the limiter table's items apart by their keys", () => {
      expect(
        ['p', 'p#rate', 'p#key#t', 'p#key#t#rate', 'p#key#t#queue', 'p#conc#t', 'p#backfill', 'LIMITS#job'].map(
          limiterItemKind,
        ),
      ).toEqual([
        'slots',
        'rate',
        'key slots',
        'key rate',
        'key queue',
        'key concurrency',
        'backfill cap',
        'key overrides',
      ]);
    });
  });
});
