import { type ModeReport, pacingBenchOptions, runPacingBench } from '../../bench/pacing';

const FIELDS: (keyof ModeReport)[] = [
  'allowedPerWindow',
  'maxStartsInAnyWindow',
  'utilization',
  'throttled',
  'p50WaitMs',
  'p99WaitMs',
];

describe('Function: runPacingBench', () => {
  // Tiny numbers: 15 operations, 3 instances, 5 per 500 ms window; a generous margin keeps a busy CI box from bunching
  // starts. No timing assertions beyond the limit itself.
  it('runs both pacers and reports every field, with the shared limiter inside the quota', async () => {
    const report = await runPacingBench({
      windowMs: 500,
      allowedPerWindow: 5,
      instances: 3,
      backlogFactor: 3,
      batchSize: 3,
      maxWaitMs: 2000,
      safetyMarginMs: 60,
    });
    for (const mode of [report.limiter, report.baseline]) {
      for (const field of FIELDS) expect(typeof mode[field]).toBe('number');
      expect(mode.allowedPerWindow).toBe(5);
    }
    expect(report.limiter.maxStartsInAnyWindow).toBeLessThanOrEqual(5);
    expect(report.limiter.throttled).toBe(0);
    // The limiters' own DynamoDB requests, counted at their client: at least a write per start's block, some reads.
    const { dynamodb } = report.limiter;
    expect(dynamodb.writes).toBeGreaterThan(0);
    expect(dynamodb.lostRaces).toBeLessThanOrEqual(dynamodb.writes);
    expect(dynamodb.writesPerStart).toBeCloseTo(dynamodb.writes / report.limiter.requests, 3);
    for (const field of ['readsPerStart', 'lostRacesPerStart'] as const) expect(typeof dynamodb[field]).toBe('number');
    // Three tickers each at the full allowance: the provider sees more than it allows and throttles the excess.
    expect(report.baseline.maxStartsInAnyWindow).toBeGreaterThan(5);
    expect(report.baseline.throttled).toBeGreaterThan(0);
  });
});

describe('Function: pacingBenchOptions', () => {
  it("runs the batch and short wait the consumer derives for the bench's rate, with a backlog that keeps every instance busy", () => {
    // 20 a second: the derived batch is 50 (15 s of slots, capped), its short wait 10 s.
    expect(pacingBenchOptions()).toMatchObject({ batchSize: 50, maxWaitMs: 10_000, backlogFactor: 20, instances: 8 });
    // 64 instances of 50 need 3,200 messages: 160 windows of 20.
    expect(pacingBenchOptions({ instances: 64 }).backlogFactor).toBe(160);
    // 1 a second: 15 s of slots, a batch of 10 (a multiple of 10), so 8 instances need 80 windows of 1.
    expect(pacingBenchOptions({ allowedPerWindow: 1 })).toMatchObject({ batchSize: 10, backlogFactor: 80 });
  });

  it('keeps what it is given', () => {
    expect(pacingBenchOptions({ batchSize: 10, maxWaitMs: 5_000, backlogFactor: 3 })).toMatchObject({
      batchSize: 10,
      maxWaitMs: 5_000,
      backlogFactor: 3,
    });
  });
});
