// Benchmark (`npm run bench [-- --json]`), outside the deployed system: producer throughput, AWS requests and cost per
// job, bundle size and cold init, local end-to-end throughput. A table on stdout, or one JSON document with --json;
// progress always on stderr.
import { Command, InvalidArgumentError } from 'commander';
import { formatTable } from '../local/report';
import { runColdStartBench, BUNDLE_BYTES_GOAL, INIT_MS_GOAL, type BundleFigures } from './coldStart';
import { DEFAULT_BENCH_CONSUMER_CONCURRENCY, measureEmulatorCeiling, runE2eBench, type EmulatorCeiling, type E2eResult } from './e2e';
import { batchedFigures, checkGoals, naiveFigures, type DesignFigures, type GoalCheck } from './perJob';
import { US_EAST_1_PRICES } from './prices';
import { runProducerBench, type ProducerBenchResult } from './producer';

export interface BenchOptions {
  cwd: string;
  producer: boolean;
  requests: boolean;
  coldStart: boolean;
  e2e: boolean;
  ops: number;
  payments: number;
  uploads: number;
  tenants: number;
  initRuns: number;
  ceilingMessages: number;
  timeoutSeconds: number;
  /** Pace every job at this rate; undefined (the default): pacing off. */
  ratePerMinute?: number;
  /** @default DEFAULT_BENCH_CONSUMER_CONCURRENCY */
  consumerConcurrency?: number;
  progress?: (line: string) => void;
}

export interface BenchReport {
  producer?: ProducerBenchResult;
  perJob?: DesignFigures['perJob'] & { goals: GoalCheck[]; naive: DesignFigures['perJob'] };
  costPerMillionUsd?: { batched: number; naive: number; breakdown: { batched: DesignFigures['costPerMillionUsd']; naive: DesignFigures['costPerMillionUsd'] }; prices: typeof US_EAST_1_PRICES; architecture: string };
  bundles?: Record<string, BundleFigures & { meetsSizeGoal: boolean; meetsInitGoal: boolean }>;
  /** DynamoDB requests of the local run by "role action status" (see E2eResult). */
  dynamoRequests?: E2eResult['dynamoRequests'];
  e2e?: { jobsPerSec: number; emulatorCeilingPerSec: number; seconds: number; jobs: number; deliveries: number; ceiling: EmulatorCeiling; byJob: E2eResult['perJobName'] };
  counts?: E2eResult['counts'];
  /** How the local run was paced (see bench/e2e.ts). */
  localRun?: { ratePerMinute: number | undefined; consumerConcurrency: number };
}

export async function runBench(o: BenchOptions): Promise<BenchReport> {
  const progress = o.progress ?? (() => undefined);
  const report: BenchReport = {};
  if (o.producer) {
    report.producer = await runProducerBench({ operations: o.ops, progress });
  }
  if (o.coldStart) {
    const bundles = runColdStartBench({ cwd: o.cwd, runs: o.initRuns, progress });
    report.bundles = Object.fromEntries(
      Object.entries(bundles).map(([k, b]) => [k, { ...b, meetsSizeGoal: b.bytes < BUNDLE_BYTES_GOAL, meetsInitGoal: b.initMsMedian < INIT_MS_GOAL }]),
    );
  }
  if (o.requests || o.e2e) {
    const run = await runE2eBench({ cwd: o.cwd, counts: { payments: o.payments, uploads: o.uploads, tenants: o.tenants }, timeoutSeconds: o.timeoutSeconds, ratePerMinute: o.ratePerMinute, consumerConcurrency: o.consumerConcurrency, progress });
    report.counts = run.counts;
    report.dynamoRequests = run.dynamoRequests;
    report.localRun = { ratePerMinute: run.ratePerMinute, consumerConcurrency: run.consumerConcurrency };
    if (o.requests) {
      const batched = batchedFigures(run.counts);
      const naive = naiveFigures(run.counts);
      report.perJob = { ...batched.perJob, goals: checkGoals(batched.perJob), naive: naive.perJob };
      report.costPerMillionUsd = {
        batched: batched.costPerMillionUsd.total,
        naive: naive.costPerMillionUsd.total,
        breakdown: { batched: batched.costPerMillionUsd, naive: naive.costPerMillionUsd },
        prices: US_EAST_1_PRICES,
        architecture: run.counts.lambda.architecture,
      };
    }
    if (o.e2e) {
      const ceiling = await measureEmulatorCeiling(o.ceilingMessages, o.ceilingMessages, progress);
      const writesPerJob = Math.max(1, batchedFigures(run.counts).perJob.dynamoWriteUnits);
      report.e2e = {
        jobsPerSec: run.jobsPerSec,
        // Each job needs one receive+delete and ~writesPerJob conditional writes; the slower of the two bounds it.
        emulatorCeilingPerSec: Math.min(ceiling.sqsReceiveDeletePerSec, ceiling.dynamoConditionalWritesPerSec / writesPerJob),
        seconds: run.seconds,
        jobs: run.counts.jobs,
        deliveries: run.counts.deliveries,
        ceiling,
        byJob: run.perJobName,
      };
    }
  }
  return report;
}

const pacingNote = (ratePerMinute: number | undefined) => (ratePerMinute === undefined ? 'pacing off' : `each job paced at ${ratePerMinute}/min, burst 1`);
const f = (n: number, digits = 2) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** The report as Markdown-friendly tables (what the README's Performance section shows). */
export function formatBench(r: BenchReport): string {
  const out: string[] = [];
  if (r.producer) {
    const p = r.producer;
    out.push(`Producer throughput (${p.operations.toLocaleString('en-US')} operations into local SQS)`);
    out.push(formatTable(['design', 'calls', 'messages/s'], [
      ['batched (SendMessageBatch x10, 5 in flight)', p.batchedCalls, f(p.batchedPerSec, 0)],
      ['naive (SendMessage per op, 5 in flight)', p.naiveCalls, f(p.naivePerSec, 0)],
      ['ratio batched/naive', '', `${f(p.ratio)}x`],
    ]));
    const j = p.projection;
    out.push(
      `Projection for ${j.operations.toLocaleString('en-US')} operations on AWS at ${j.callLatencyMs} ms per send call, ${j.parallelCalls} calls in flight: ` +
        `batched ${f(j.batched.seconds, 0)} s (${j.batched.invocations} invocation(s) of 900 s less the 30% reserve), naive ${f(j.naive.seconds, 0)} s ` +
        `(${j.naive.invocations} invocations). One invocation publishes about ${j.batchedPagesPerInvocation} pages before continuing; ` +
        `maxPagesPerRun caps a run at ${j.operationsPerRunAtPageLimit.toLocaleString('en-US')} operations.`,
    );
    out.push('');
  }
  if (r.perJob && r.costPerMillionUsd) {
    const b = r.perJob;
    const n = b.naive;
    const goal = (m: string) => {
      const g = b.goals.find((x) => x.metric === m);
      return g ? `<= ${g.goal}: ${g.met ? 'met' : 'NOT met'}` : '';
    };
    out.push(`AWS requests per job (local run of every job, ${r.counts?.jobs ?? 0} jobs, ${pacingNote(r.localRun?.ratePerMinute)})`);
    out.push(formatTable(['per job', 'batched', 'naive', 'goal'], [
      ['SQS requests (send + receive + delete)', f(b.sqsRequests, 3), f(n.sqsRequests, 3), goal('sqsRequests')],
      ['  idle polls, apart', f(b.sqsIdlePolls, 3), '', ''],
      ['DynamoDB write units (overhead)', f(b.dynamoWriteUnits, 3), f(n.dynamoWriteUnits, 3), goal('dynamoWriteUnits')],
      ['DynamoDB read units (overhead)', f(b.dynamoReadUnits, 3), f(n.dynamoReadUnits, 3), ''],
      ['  business write / read units, apart', `${f(b.businessWriteUnits, 3)} / ${f(b.businessReadUnits, 3)}`, '', ''],
      ['Lambda invocations', f(b.lambdaInvocations, 3), f(n.lambdaInvocations, 3), goal('lambdaInvocations')],
      ['Lambda GB-s', f(b.lambdaGbSeconds, 4), f(n.lambdaGbSeconds, 4), ''],
      ['deliveries (1 = no deferral)', f(b.deliveries, 3), '', ''],
      [`cost per 1M jobs, USD (us-east-1, ${r.costPerMillionUsd.architecture})`, f(r.costPerMillionUsd.batched), f(r.costPerMillionUsd.naive), ''],
    ]));
    out.push('');
  }
  if (r.bundles) {
    out.push('Cold start (bundles from the cloud assembly; fresh node process, median)');
    out.push(formatTable(['handler', 'bytes', 'layer bytes (once per stack)', 'init ms', 'of which SDK alone', 'unbundled init ms', 'unbundled/bundled', 'goals (<250 KB, <100 ms)'], Object.entries(r.bundles).map(([k, b]) => [
      k, b.bytes.toLocaleString('en-US'), b.layerBytes.toLocaleString('en-US'), f(b.initMsMedian, 1), f(b.sdkInitMsMedian, 1), f(b.unbundledInitMsMedian, 1), `${f(b.unbundledRatio)}x`, `${b.meetsSizeGoal ? 'size met' : 'size NOT met'}, ${b.meetsInitGoal ? 'init met' : 'init NOT met'}`,
    ])));
    out.push('');
  }
  if (r.e2e) {
    const e = r.e2e;
    out.push(`Local end-to-end (${pacingNote(r.localRun?.ratePerMinute)}) vs the emulators measured directly`);
    out.push(formatTable(['measure', 'per second'], [
      [`pipeline jobs/s (${e.jobs} jobs, ${e.deliveries} deliveries, ${f(e.seconds, 1)} s)`, f(e.jobsPerSec, 1)],
      ['emulator ceiling (jobs/s bound)', f(e.emulatorCeilingPerSec, 1)],
      ['  SQS receive + delete, messages/s', f(e.ceiling.sqsReceiveDeletePerSec, 0)],
      ['  DynamoDB conditional writes/s', f(e.ceiling.dynamoConditionalWritesPerSec, 0)],
    ]));
  }
  return out.join('\n');
}

const positiveInt = (name: string) => (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1) throw new InvalidArgumentError(`${name} must be a positive whole number, got "${value}"`);
  return n;
};

export function buildProgram(): Command {
  return new Command('npm run bench --')
    .description('Producer throughput, AWS requests and cost per job, bundle size and cold init, local end-to-end throughput. Runs every part unless some are named.')
    .option('--json', 'one JSON document on stdout (progress on stderr)', false)
    .option('--producer', 'run the producer throughput part', false)
    .option('--requests', 'run the requests-per-job and cost part (a local run of every job)', false)
    .option('--cold-start', 'run the bundle size and cold init part', false)
    .option('--e2e', 'run the local end-to-end throughput part (shares its local run with --requests)', false)
    .option('--ops <n>', 'operations the producer part publishes each way', positiveInt('--ops'), 100_000)
    .option('--payments <n>', 'payments seeded for the local run', positiveInt('--payments'), 400)
    .option('--uploads <n>', 'uploads seeded for the local run', positiveInt('--uploads'), 400)
    .option('--tenants <n>', 'tenants seeded for the local run (3 expired sessions each)', positiveInt('--tenants'), 150)
    .option('--rate <perMinute>', 'pace every job at this many starts per minute in the local run (default: pacing off)', positiveInt('--rate'))
    .option('--consumer-concurrency <n>', 'consumer executions per job in the local run', positiveInt('--consumer-concurrency'), DEFAULT_BENCH_CONSUMER_CONCURRENCY)
    .option('--init-runs <n>', 'fresh processes per cold-init median', positiveInt('--init-runs'), 7)
    .option('--ceiling-messages <n>', 'messages and writes for the emulator ceiling', positiveInt('--ceiling-messages'), 5000)
    .option('--timeout <seconds>', 'give up when the local run has not settled by then', positiveInt('--timeout'), 300);
}

async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const program = buildProgram();
  program.parse(process.argv);
  const flags = program.opts();
  const any = flags.producer || flags.requests || flags.coldStart || flags.e2e;
  try {
    const report = await runBench({
      cwd: process.cwd(),
      producer: !any || flags.producer,
      requests: !any || flags.requests,
      coldStart: !any || flags.coldStart,
      e2e: !any || flags.e2e,
      ops: flags.ops,
      payments: flags.payments,
      uploads: flags.uploads,
      tenants: flags.tenants,
      initRuns: flags.initRuns,
      ceilingMessages: flags.ceilingMessages,
      timeoutSeconds: flags.timeout,
      ratePerMinute: flags.rate,
      consumerConcurrency: flags.consumerConcurrency,
      progress: (line) => process.stderr.write(`${line}\n`),
    });
    process.stdout.write(flags.json ? `${JSON.stringify(report, null, 2)}\n` : `${formatBench(report)}\n`);
    process.exitCode = 0;
  } catch (error) {
    const e = error as Error;
    process.stderr.write(`npm run bench failed: ${e.name}: ${e.message}\n`);
    process.exitCode = 1;
  }
  process.exit(process.exitCode);
}

if (require.main === module) void main();
