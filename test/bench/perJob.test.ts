// The per-job arithmetic: measured counts to figures per job, the naive model, and the goal check.
import { batchedFigures, checkGoals, naiveFigures, type RunCounts } from '../../bench/perJob';
import { costFor } from '../../bench/prices';

/** 1,000 jobs in full batches of 10: one send, receive and delete call per 10, two idempotency writes each. */
const steady: RunCounts = {
  jobs: 1000,
  deliveries: 1000,
  sqs: { sendCalls: 100, receiveCalls: 100, emptyReceiveCalls: 40, deleteCalls: 100 },
  dynamo: {
    idempotency: { write: 2000, read: 0 },
    ledger: { write: 102, read: 0 },
    limiter: { write: 100, read: 0 },
    business: { write: 1000, read: 500 },
  },
  lambda: { producerInvocations: 1, consumerInvocations: 100, consumerDurationMs: 100 * 200, memoryMb: 512, architecture: 'arm64' },
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
    const cost = costFor({ sqsRequests: 1, dynamoWriteUnits: 1, dynamoReadUnits: 1, lambdaInvocations: 1, lambdaGbSeconds: 1, schedulerInvocations: 1 });
    expect(cost).toEqual({
      sqs: expect.closeTo(0.4, 10),
      lambdaRequests: expect.closeTo(0.2, 10),
      lambdaDuration: expect.closeTo(13.3334, 10),
      dynamodb: expect.closeTo(0.75, 10),
      scheduler: expect.closeTo(1, 10),
      total: expect.closeTo(15.6834, 10),
    });
  });
});
