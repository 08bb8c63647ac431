// The benchmark suite end to end at tiny sizes, on the engine's test app (test/fixtures/app, synthesized by
// globalSetup: its three fixture jobs, quota-caller's fake API among them): every part runs and the JSON report has
// every documented field. No timing assertions: this keeps `npm run bench` working, it does not benchmark.
import { buildProgram, runBench, formatBench, type BenchReport } from '../../bench/index';
import { backlogNote } from '../../bench/backlog';
import type { JobPacing } from '../../bench/e2e';
import {
  OBJECT_SWEEPER,
  QUOTA_CALLER,
  RECORD_WRITER,
  TEST_APP,
  TEST_APP_ASSEMBLY,
  TEST_APP_STACK,
} from '../support/testApp';

// Each backlog run is a whole local session (start, warm-up cycle, run: about 25 s on a loaded machine). The suite runs
// the design at the two lengths and leaves out the run of the design before admission (--no-backlog-baseline, which it
// checks); the full run, `npm run test:bench` (BENCH_FULL=1), adds it and checks its figures as well.
const FULL = process.env.BENCH_FULL === '1';

/** The test app, as a team's app is run: its folder, its assembly, its one stack. */
const app = { cwd: TEST_APP, assemblyDir: TEST_APP_ASSEMBLY, stack: TEST_APP_STACK };

describe('Function: runBench', () => {
  let report: BenchReport;

  beforeAll(async () => {
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
    report = await runBench({
      ...app,
      producer: true,
      requests: true,
      coldStart: true,
      e2e: true,
      ops: 200,
      // The fixture jobs at tiny sizes.
      counts: { [QUOTA_CALLER]: 12, [OBJECT_SWEEPER]: 12, [RECORD_WRITER]: 4 },
      initRuns: 1,
      ceilingMessages: 100,
      timeoutSeconds: 60,
      // 12 calls at 80/min take 9 s: over this, so quota-caller runs time-scaled, and the others do not.
      maxPacedSeconds: 5,
    });
  }, 120_000);

  it('paces every job at its configured rate by default, time-scaling only the job that would run too long', () => {
    expect(report.localRun).toEqual(expect.objectContaining({ pacing: 'configured', maxPacedSeconds: 5 }));
    const jobs = report.localRun!.jobs;
    // 9 s at 80 per 60 s; 5 s asks for 33 s intervals, above the 4 s floor.
    expect(jobs[QUOTA_CALLER].pacing).toEqual(
      expect.objectContaining({
        startsPerInterval: 80,
        configuredIntervalSeconds: 60,
        runIntervalSeconds: 33,
        timeScale: 60 / 33,
      }),
    );
    expect(jobs[OBJECT_SWEEPER].pacing).toEqual(
      expect.objectContaining({ startsPerInterval: 480, runIntervalSeconds: 60, timeScale: 1 }),
    );
    expect(jobs[RECORD_WRITER].pacing).toEqual(
      expect.objectContaining({ startsPerInterval: 480, runIntervalSeconds: 60, timeScale: 1 }),
    );
    for (const job of Object.values(jobs)) {
      expect(job.deadLettered).toBe(0);
      expect(job.acknowledged).toBeGreaterThanOrEqual(job.operations);
      expect(job.gbSeconds).toBeGreaterThan(0);
    }
    // The scaled job's waits are estimated at its real rate: at least the GB-seconds as run (more when its invocations
    // waited for slots, which depends on how a loaded machine's batches fell; the estimate's arithmetic is
    // test/bench/perJob.test.ts's). The unscaled ones are as run.
    expect(jobs[QUOTA_CALLER].gbSecondsAtRealRate).toBeGreaterThanOrEqual(jobs[QUOTA_CALLER].gbSeconds);
    expect(jobs[OBJECT_SWEEPER].gbSecondsAtRealRate).toBe(jobs[OBJECT_SWEEPER].gbSeconds);
  });

  it("reads every job's effects through its fixture: each seeded operation applied exactly once, nothing else touched", () => {
    const jobs = report.localRun!.jobs;
    expect(Object.keys(jobs).sort()).toEqual([OBJECT_SWEEPER, QUOTA_CALLER, RECORD_WRITER]);
    expect(jobs[QUOTA_CALLER]).toEqual(
      expect.objectContaining({ unit: 'calls', effectsSource: 'fixture', throttled: 0 }),
    );
    expect(jobs[QUOTA_CALLER].effects).toEqual({
      expected: 12,
      exactlyOnce: 12,
      missing: 0,
      repeated: 0,
      unexpected: 0,
    });
    expect(jobs[OBJECT_SWEEPER].effects).toEqual({
      expected: 12,
      exactlyOnce: 12,
      missing: 0,
      repeated: 0,
      unexpected: 0,
    });
    expect(jobs[RECORD_WRITER].effects).toEqual({
      expected: 4,
      exactlyOnce: 4,
      missing: 0,
      repeated: 0,
      unexpected: 0,
    });
    // One effect per operation in every fixture job: none reads effects per item (bench/runEffects.ts itemEffectFigures).
    for (const job of Object.values(jobs)) expect(job.itemEffects).toBeUndefined();
    // Every paced job's starts are checked against its allowance per run interval.
    for (const job of Object.values(jobs))
      expect(job.maxStartsInAnyInterval).toBeLessThanOrEqual(job.pacing!.startsPerInterval);
    expect(jobs[QUOTA_CALLER].maxStartsInAnyInterval).toBe(12);
  });

  it("counts each job's own requests, which add up to the whole run's", () => {
    const jobs = Object.values(report.localRun!.jobs);
    const sum = (f: (c: (typeof jobs)[number]['counts']) => number) => jobs.reduce((s, j) => s + f(j.counts), 0);
    const c = report.counts!;
    expect(sum((x) => x.jobs)).toBe(c.jobs);
    // Every job's messages were received by its event source: the receives are counted on the mappings' own clients.
    for (const job of jobs) expect(job.counts.sqs.receiveCalls).toBeGreaterThan(0);
    expect(sum((x) => x.sqs.sendCalls + x.sqs.receiveCalls + x.sqs.deleteCalls + (x.sqs.attributeCalls ?? 0))).toBe(
      c.sqs.sendCalls + c.sqs.receiveCalls + c.sqs.deleteCalls + (c.sqs.attributeCalls ?? 0),
    );
    expect(sum((x) => x.dynamo.idempotency.write + x.dynamo.ledger.write + x.dynamo.limiter.write)).toBeCloseTo(
      c.dynamo.idempotency.write + c.dynamo.ledger.write + c.dynamo.limiter.write,
      6,
    );
    for (const job of jobs) {
      // Each operation was claimed and completed in the idempotency store: at least 2 write units per operation.
      expect(job.perJob.dynamoWriteUnits).toBeGreaterThanOrEqual(2);
      expect(job.perJob.sqsRequests).toBeGreaterThan(0);
      expect(job.goals.map((g) => g.metric)).toEqual(['sqsRequests', 'dynamoWriteUnits', 'lambdaInvocations']);
    }
  });

  it('reports producer throughput both ways and their ratio', () => {
    expect(report.producer).toEqual(
      expect.objectContaining({
        batchedPerSec: expect.any(Number),
        naivePerSec: expect.any(Number),
        ratio: expect.any(Number),
        batchedCalls: 20,
        naiveCalls: 200,
      }),
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
    expect(report.costPerMillionUsd).toEqual(
      expect.objectContaining({
        batched: expect.any(Number),
        naive: expect.any(Number),
        batchedAtRealRate: expect.any(Number),
      }),
    );
    expect(report.costPerMillionUsd!.naive).toBeGreaterThan(report.costPerMillionUsd!.batched);
    // GB-seconds are in the cost, and the real-rate figure adds the time-scaled job's longer waits (none, when no
    // invocation waited for a slot: see the first case).
    expect(report.costPerMillionUsd!.breakdown.batched.lambdaDuration).toBeGreaterThan(0);
    expect(report.perJob!.lambdaGbSecondsAtRealRate).toBeGreaterThanOrEqual(report.perJob!.lambdaGbSeconds);
    expect(report.costPerMillionUsd!.batchedAtRealRate).toBeGreaterThanOrEqual(report.costPerMillionUsd!.batched);
    // Pacing on: the limiter's writes are part of the overhead.
    expect(report.counts!.dynamo.limiter.write).toBeGreaterThan(0);
  });

  it('reports each handler bundle size and init time', () => {
    for (const handler of ['producer', 'consumer']) {
      expect(report.bundles?.[handler]).toEqual(
        expect.objectContaining({ bytes: expect.any(Number), initMsMedian: expect.any(Number) }),
      );
      expect(report.bundles![handler].bytes).toBeGreaterThan(0);
    }
  });

  it('reports local end-to-end throughput next to the emulator ceiling', () => {
    expect(report.e2e).toEqual(
      expect.objectContaining({ jobsPerSec: expect.any(Number), emulatorCeilingPerSec: expect.any(Number) }),
    );
    expect(report.e2e!.jobsPerSec).toBeGreaterThan(0);
  });

  it('formats every part as a table, saying how the run was paced and scaled', () => {
    const text = formatBench(report);
    for (const title of [
      'Producer throughput',
      'AWS requests per job',
      'Local run per job',
      'Requests and effects per job, by job',
      'Cold start',
      'Local end-to-end',
    ])
      expect(text).toContain(title);
    expect(text).toContain('12 of 12 calls');
    expect(text).toContain('4 of 4 items');
    expect(text).toContain('pacing on, each job at its configured rate, time-scaled where a job would take over 5 s');
    expect(text).toContain(
      'quota-caller: interval scaled 60 s -> 33 s (x1.82), admission horizon 300 s -> 165 s, short wait 16000 ms -> 9588 ms, batching window 1 s -> 1 s',
    );
  });
});

describe('Function: runBench, backlog part', () => {
  let report: BenchReport;

  beforeAll(async () => {
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
    // Tiny, and robust on a loaded machine (the figures are not the point here): half and a quarter of a minute's
    // starts (40 and 20 calls) at a 30 s interval, time scale 2. A time-scaled run keeps the window long: the
    // consumer gives up a slot when a record wakes later than half the limiter's margin, 0.5% of the
    // window and at least 20 ms, which a busy machine's timers overshoot at a few seconds' window (at 3 s, beside
    // other CPU-heavy test files, 160 operations did not settle: 49 acknowledged in 138 s).
    report = await runBench({
      ...app,
      producer: false,
      requests: false,
      coldStart: false,
      e2e: false,
      backlog: true,
      backlogMultiple: 0.5,
      backlogShortMultiple: 0.25,
      backlogIntervalSeconds: 30,
      backlogBaseline: FULL,
      ops: 1,
      initRuns: 1,
      ceilingMessages: 1,
      timeoutSeconds: 60,
    });
  }, 360_000);

  it('reports the design (and in the full run the design before admission) per job, and the shorter backlog with the flat verdict', () => {
    const b = report.backlog!;
    // No --backlog-job: the first job whose fixture offers a fake downstream.
    expect(b).toEqual(
      expect.objectContaining({
        job: QUOTA_CALLER,
        unit: 'calls',
        multiple: 0.5,
        jobs: 40,
        ratePerMinute: 80,
        admission: true,
        // Batches of 20 at 80/min (derived from the rate): a group spans 15 s, so a scaled window down to 4 s keeps it
        // at least SQS's 1 s delay resolution.
        shortestFaithfulIntervalSeconds: 4,
      }),
    );
    for (const design of [b, b.baseline, b.short].filter((d) => d !== undefined)) {
      for (const field of [
        'deliveriesPerJob',
        'sqsRequestsPerJob',
        'dynamoWriteUnitsPerJob',
        'lambdaInvocationsPerJob',
        'lambdaGbSecondsPerJob',
        'costPerMillionUsd',
        'deadLettered',
        'seconds',
      ] as const) {
        expect(typeof design[field]).toBe('number');
      }
      expect(design.deliveriesPerJob).toBeGreaterThanOrEqual(1);
      expect(design.deadLettered).toBe(0);
      expect(design.effects).toEqual({
        expected: design.jobs,
        exactlyOnce: design.jobs,
        missing: 0,
        repeated: 0,
        unexpected: 0,
      });
    }
    if (FULL) expect(b.baseline).toEqual(expect.objectContaining({ multiple: 0.5, jobs: 40, admission: false }));
    else expect(b.baseline).toBeUndefined();
    expect(b.short).toEqual(expect.objectContaining({ multiple: 0.25, jobs: 20, admission: true }));
    expect(b.flat).toEqual(
      expect.objectContaining({
        short: expect.objectContaining({ multiple: 0.25 }),
        long: expect.objectContaining({ multiple: 0.5 }),
        flat: expect.any(Boolean),
      }),
    );
    expect(b.pacing).toEqual(
      expect.objectContaining({ configuredIntervalSeconds: 60, runIntervalSeconds: 30, timeScale: 2 }),
    );
  });

  it('formats the backlog, saying how far time was scaled and that 30 s is at or above the faithful interval', () => {
    const text = formatBench(report);
    expect(text).toContain('Backlog: quota-caller, 40 jobs = 0.5x its 80 starts/min (after headroom), run time-scaled');
    expect(text).toContain('interval scaled 60 s -> 30 s (x2)');
    expect(text).toContain(
      "4 s is the shortest interval at which one batch's slots still span SQS's 1 s delay resolution",
    );
    expect(text).not.toContain('BELOW');
  });
});

describe('Function: backlogNote', () => {
  const pacing = (runIntervalSeconds: number): JobPacing => ({
    startsPerInterval: 80,
    configuredIntervalSeconds: 60,
    runIntervalSeconds,
    timeScale: 60 / runIntervalSeconds,
    horizonSeconds: { configured: 300, run: 5 * runIntervalSeconds },
    shortWaitMs: { configured: 16000, run: Math.round((16000 * runIntervalSeconds) / 60) },
  });

  it('says a run interval below the shortest faithful one is BELOW it, and what its figures then show', () => {
    expect(backlogNote(pacing(3), 4)).toBe(
      "interval scaled 60 s -> 3 s (x20), admission horizon 300 s -> 15 s, short wait 16000 ms -> 800 ms; not scaled: SQS delays (whole seconds), the deferral backoff, the limiter's safety margin. " +
        "BELOW the shortest faithful interval (4 s): admission's groups bunch in SQS's whole-second delays, and the figures show that, not the design",
    );
  });

  it('names the shortest faithful interval at or above it', () => {
    for (const interval of [4, 30]) {
      const note = backlogNote(pacing(interval), 4);
      expect(note).toContain(`interval scaled 60 s -> ${interval} s`);
      expect(note).toMatch(
        /4 s is the shortest interval at which one batch's slots still span SQS's 1 s delay resolution$/,
      );
      expect(note).not.toContain('BELOW');
    }
  });
});

describe('Function: buildProgram', () => {
  const parse = (...args: string[]) =>
    buildProgram()
      .exitOverride()
      .parse(['node', 'bench', ...args])
      .opts();

  it('paces by default, runs the backlog at 50x and 10x, and leaves the backlog interval and job to the bench', () => {
    expect(parse()).toEqual(
      expect.objectContaining({ pacing: true, pacedSeconds: 120, backlogMultiple: 50, backlogShortMultiple: 10 }),
    );
    expect(parse().backlog).toBeUndefined();
    expect(parse().backlogInterval).toBeUndefined();
    expect(parse().backlogJob).toBeUndefined();
    expect(parse().count).toBeUndefined();
  });

  it('takes --stack, for an app with several stacks holding jobs', () => {
    expect(parse().stack).toBeUndefined();
    expect(parse('--stack', 'BillingStack').stack).toBe('BillingStack');
  });

  it('takes --cdk-out, for an app that synthesizes elsewhere', () => {
    expect(parse().cdkOut).toBeUndefined();
    expect(parse('--cdk-out', 'out/assembly').cdkOut).toBe('out/assembly');
  });

  it('takes --backlog-job', () => {
    expect(parse('--backlog-job', 'object-sweeper').backlogJob).toBe('object-sweeper');
  });

  it('takes --no-pacing, --backlog, --no-backlog and the backlog settings', () => {
    expect(parse('--no-pacing').pacing).toBe(false);
    expect(parse('--backlog').backlog).toBe(true);
    expect(parse('--no-backlog').backlog).toBe(false);
    expect(parse().backlogBaseline).toBe(true);
    expect(parse('--no-backlog-baseline').backlogBaseline).toBe(false);
    expect(parse('--backlog-multiple', '60', '--backlog-short-multiple', '5', '--backlog-interval', '12')).toEqual(
      expect.objectContaining({ backlogMultiple: 60, backlogShortMultiple: 5, backlogInterval: 12 }),
    );
  });
});
