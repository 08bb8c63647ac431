// The benchmark suite end to end at tiny sizes: every part runs and the JSON report has every documented field.
// No timing assertions: this keeps `npm run bench` working, it does not benchmark.
import { runBench, formatBench, type BenchReport } from '../../bench/index';

describe('Function: runBench', () => {
  let report: BenchReport;

  beforeAll(async () => {
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
    report = await runBench({
      cwd: process.cwd(),
      producer: true,
      requests: true,
      coldStart: true,
      e2e: true,
      ops: 200,
      payments: 12,
      uploads: 12,
      tenants: 4,
      initRuns: 1,
      ceilingMessages: 100,
      timeoutSeconds: 60,
    });
  }, 120_000);

  it('reports producer throughput both ways and their ratio', () => {
    expect(report.producer).toEqual(
      expect.objectContaining({ batchedPerSec: expect.any(Number), naivePerSec: expect.any(Number), ratio: expect.any(Number), batchedCalls: 20, naiveCalls: 200 }),
    );
    expect(report.producer?.ratio).toBeCloseTo(report.producer!.batchedPerSec / report.producer!.naivePerSec, 6);
  });

  it('reports requests per job, with the goals checked, and the cost per million for both designs', () => {
    expect(report.perJob).toEqual(
      expect.objectContaining({
        sqsRequests: expect.any(Number),
        dynamoWriteUnits: expect.any(Number),
        dynamoReadUnits: expect.any(Number),
        lambdaInvocations: expect.any(Number),
      }),
    );
    expect(report.perJob?.goals.map((g) => g.metric)).toEqual(['sqsRequests', 'dynamoWriteUnits', 'lambdaInvocations']);
    // Every job went through the pipeline: at least one idempotency claim and completion each, and one delete share.
    expect(report.perJob!.dynamoWriteUnits).toBeGreaterThanOrEqual(2);
    expect(report.counts?.jobs).toBe(28);
    expect(report.perJob?.naive.sqsRequests).toBe(3);
    expect(report.costPerMillionUsd).toEqual(expect.objectContaining({ batched: expect.any(Number), naive: expect.any(Number) }));
    expect(report.costPerMillionUsd!.naive).toBeGreaterThan(report.costPerMillionUsd!.batched);
  });

  it('reports each handler bundle size and init time', () => {
    for (const handler of ['producer', 'consumer']) {
      expect(report.bundles?.[handler]).toEqual(expect.objectContaining({ bytes: expect.any(Number), initMsMedian: expect.any(Number) }));
      expect(report.bundles![handler].bytes).toBeGreaterThan(0);
    }
  });

  it('reports local end-to-end throughput next to the emulator ceiling', () => {
    expect(report.e2e).toEqual(expect.objectContaining({ jobsPerSec: expect.any(Number), emulatorCeilingPerSec: expect.any(Number) }));
    expect(report.e2e!.jobsPerSec).toBeGreaterThan(0);
  });

  it('formats every part as a table', () => {
    const text = formatBench(report);
    for (const title of ['Producer throughput', 'AWS requests per job', 'Cold start', 'Local end-to-end']) expect(text).toContain(title);
  });
});
