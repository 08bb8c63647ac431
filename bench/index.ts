// Benchmark (`npm run bench [-- --json]`), outside the deployed system: producer throughput, AWS requests and cost per
// job (every job of the stack with its fixture's demo records, each paced at its configured rate, time-scaled where
// needed), bundle size and cold init, local end-to-end throughput, and a backlog of many times one job's rate with and
// without admission. A table on stdout, or one JSON document with --json; progress always on stderr. Names no job: the
// jobs, and the units `--<unit> n` counts in, come from the stack and the jobs' fixtures.
import { Command, InvalidArgumentError, Option } from 'commander';
import { formatTable } from '../local/report';
import { collectCount, DEFAULT_COUNT_MULTIPLE, fixtureUnits, resolveCounts, unitOptionName } from './counts';
import {
  DEFAULT_BACKLOG_MULTIPLE,
  DEFAULT_BACKLOG_SHORT_MULTIPLE,
  runBacklogBench,
  type BacklogDesignFigures,
  type BacklogReport,
} from './backlog';
import { runColdStartBench, BUNDLE_BYTES_GOAL, INIT_MS_GOAL, type BundleFigures } from './coldStart';
import {
  DEFAULT_BENCH_CONSUMER_CONCURRENCY,
  describePacing,
  describeScale,
  measureEmulatorCeiling,
  runE2eBench,
  type EmulatorCeiling,
  type E2eResult,
  type JobRunFigures,
} from './e2e';
import { batchedFigures, checkGoals, naiveFigures, PER_JOB_GOALS, type DesignFigures, type GoalCheck } from './perJob';
import { US_EAST_1_PRICES } from './prices';
import { runProducerBench, type ProducerBenchResult } from './producer';

/** A default local run should take a few minutes: a job slower than this at its configured rate runs time-scaled. */
export const DEFAULT_MAX_PACED_SECONDS = 120;

export interface BenchOptions {
  /** The CDK app's folder (cdk.json): where the command runs. */
  cwd: string;
  /** The stack holding the jobs, where several of the app's stacks do. @default the one that does (here PacedJobs-dev) */
  stack?: string;
  /** The app's cloud assembly, relative to `cwd` (synthesized there when it lacks the stack). @default "cdk.out" */
  assemblyDir?: string;
  producer: boolean;
  requests: boolean;
  coldStart: boolean;
  e2e: boolean;
  /** @default false */
  backlog?: boolean;
  ops: number;
  /**
   * Demo records per job of the local run, by job name; 0 leaves a job out. @default for a job not named:
   * DEFAULT_COUNT_MULTIPLE times its fixture's defaultCount
   */
  counts?: Record<string, number>;
  initRuns: number;
  ceilingMessages: number;
  timeoutSeconds: number;
  /** False: every job's `pacing: false`, the pipeline alone (reported as such). @default true */
  pacing?: boolean;
  /** Pace every job at this fixed rate instead of its configured one (unscaled). */
  ratePerMinute?: number;
  /** @default DEFAULT_MAX_PACED_SECONDS */
  maxPacedSeconds?: number;
  /** @default DEFAULT_BENCH_CONSUMER_CONCURRENCY */
  consumerConcurrency?: number;
  /** @default DEFAULT_BACKLOG_MULTIPLE */
  backlogMultiple?: number;
  /** @default DEFAULT_BACKLOG_SHORT_MULTIPLE */
  backlogShortMultiple?: number;
  /** @default the shortest faithful interval (see bench/backlog.ts) */
  backlogIntervalSeconds?: number;
  /** Run the design before admission too. @default true */
  backlogBaseline?: boolean;
  /** The job the backlog part runs. @default the first job whose fixture offers a fake downstream */
  backlogJob?: string;
  progress?: (line: string) => void;
}

export interface BenchReport {
  producer?: ProducerBenchResult;
  perJob?: DesignFigures['perJob'] & {
    goals: GoalCheck[];
    naive: DesignFigures['perJob'];
    /** GB-seconds per job at the configured rates (the measured ones where the run was not time-scaled). */
    lambdaGbSecondsAtRealRate?: number;
  };
  costPerMillionUsd?: {
    batched: number;
    naive: number;
    /** With the GB-seconds at the configured rates; undefined when a scaled job's waits could not be estimated. */
    batchedAtRealRate?: number;
    breakdown: {
      batched: DesignFigures['costPerMillionUsd'];
      naive: DesignFigures['costPerMillionUsd'];
      batchedAtRealRate?: DesignFigures['costPerMillionUsd'];
    };
    prices: typeof US_EAST_1_PRICES;
    architecture: string;
  };
  bundles?: Record<string, BundleFigures & { meetsSizeGoal: boolean; meetsInitGoal: boolean }>;
  /** DynamoDB requests of the local run by "role action status" (see E2eResult). */
  dynamoRequests?: E2eResult['dynamoRequests'];
  /** SQS requests of the local run by action. */
  sqsRequests?: E2eResult['sqsRequests'];
  e2e?: {
    jobsPerSec: number;
    emulatorCeilingPerSec: number;
    seconds: number;
    jobs: number;
    deliveries: number;
    ceiling: EmulatorCeiling;
    byJob: E2eResult['perJobName'];
    /** CPU seconds by process over the measured cycle (Linux): what bounds jobs/s on a machine of few cores. */
    cpu?: E2eResult['cpu'];
  };
  counts?: E2eResult['counts'];
  /** How the local run was paced (see bench/e2e.ts), and each job's figures with its time scale. */
  localRun?: {
    pacing: E2eResult['pacing'];
    ratePerMinute: number | undefined;
    consumerConcurrency: number;
    /** Configured pacing: jobs slower than this at their rate ran time-scaled. */
    maxPacedSeconds: number | undefined;
    deadLettered: number;
    jobs: E2eResult['perJobName'];
  };
  backlog?: BacklogReport;
}

export async function runBench(o: BenchOptions): Promise<BenchReport> {
  const progress = o.progress ?? (() => undefined);
  const report: BenchReport = {};
  if (o.producer) {
    report.producer = await runProducerBench({ operations: o.ops, progress });
  }
  if (o.coldStart) report.bundles = coldStartPart(o, progress);
  if (o.requests || o.e2e) {
    const { run, maxPacedSeconds } = await localRunPart(o, progress);
    report.counts = run.counts;
    report.dynamoRequests = run.dynamoRequests;
    report.sqsRequests = run.sqsRequests;
    report.localRun = {
      pacing: run.pacing,
      ratePerMinute: run.ratePerMinute,
      consumerConcurrency: run.consumerConcurrency,
      maxPacedSeconds,
      deadLettered: run.deadLettered,
      jobs: run.perJobName,
    };
    if (o.requests) Object.assign(report, requestsPart(run));
    if (o.e2e) report.e2e = await e2ePart(o, run, progress);
  }
  if (o.backlog) {
    report.backlog = await runBacklogBench({
      cwd: o.cwd,
      stack: o.stack,
      assemblyDir: o.assemblyDir,
      job: o.backlogJob,
      multiple: o.backlogMultiple,
      shortMultiple: o.backlogShortMultiple,
      intervalSeconds: o.backlogIntervalSeconds,
      baseline: o.backlogBaseline,
      consumerConcurrency: o.consumerConcurrency,
      timeoutSeconds: o.timeoutSeconds,
      progress,
    });
  }
  return report;
}

/** The cold-start part: each handler kind's bundle and init, against the goals. */
function coldStartPart(o: BenchOptions, progress: (line: string) => void): NonNullable<BenchReport['bundles']> {
  const bundles = runColdStartBench({
    cwd: o.cwd,
    stack: o.stack,
    assemblyDir: o.assemblyDir,
    runs: o.initRuns,
    progress,
  });
  return Object.fromEntries(
    Object.entries(bundles).map(([k, b]) => [
      k,
      { ...b, meetsSizeGoal: b.bytes < BUNDLE_BYTES_GOAL, meetsInitGoal: b.initMsMedian < INIT_MS_GOAL },
    ]),
  );
}

/** The local run of every job, paced as the options say (the requests and the end-to-end parts both read it). */
async function localRunPart(
  o: BenchOptions,
  progress: (line: string) => void,
): Promise<{ run: E2eResult; maxPacedSeconds: number | undefined }> {
  const pacing = o.pacing ?? true;
  const maxPacedSeconds =
    pacing && o.ratePerMinute === undefined ? (o.maxPacedSeconds ?? DEFAULT_MAX_PACED_SECONDS) : undefined;
  const run = await runE2eBench({
    cwd: o.cwd,
    stack: o.stack,
    assemblyDir: o.assemblyDir,
    counts: o.counts,
    timeoutSeconds: o.timeoutSeconds,
    pacing: pacing ? 'configured' : 'off',
    ratePerMinute: pacing ? o.ratePerMinute : undefined,
    maxPacedSeconds,
    consumerConcurrency: o.consumerConcurrency,
    progress,
  });
  return { run, maxPacedSeconds };
}

/** The requests part: per job, batched against naive, with the goals, and the cost per million. */
function requestsPart(run: E2eResult): Pick<BenchReport, 'perJob' | 'costPerMillionUsd'> {
  const batched = batchedFigures(run.counts);
  const naive = naiveFigures(run.counts);
  const real =
    run.counts.lambda.gbSecondsAtRealRate === undefined ? undefined : batchedFigures(run.counts, { atRealRate: true });
  return {
    perJob: {
      ...batched.perJob,
      goals: checkGoals(batched.perJob),
      naive: naive.perJob,
      lambdaGbSecondsAtRealRate: real?.perJob.lambdaGbSeconds,
    },
    costPerMillionUsd: {
      batched: batched.costPerMillionUsd.total,
      naive: naive.costPerMillionUsd.total,
      batchedAtRealRate: real?.costPerMillionUsd.total,
      breakdown: {
        batched: batched.costPerMillionUsd,
        naive: naive.costPerMillionUsd,
        batchedAtRealRate: real?.costPerMillionUsd,
      },
      prices: US_EAST_1_PRICES,
      architecture: run.counts.lambda.architecture,
    },
  };
}

/** The end-to-end part: the local run's jobs/s next to the emulators' own ceiling, measured after it. */
async function e2ePart(
  o: BenchOptions,
  run: E2eResult,
  progress: (line: string) => void,
): Promise<NonNullable<BenchReport['e2e']>> {
  const ceiling = await measureEmulatorCeiling(o.ceilingMessages, o.ceilingMessages, progress);
  const writesPerJob = Math.max(1, batchedFigures(run.counts).perJob.dynamoWriteUnits);
  return {
    jobsPerSec: run.jobsPerSec,
    // Each job needs one receive+delete and ~writesPerJob conditional writes; the slower of the two bounds it.
    emulatorCeilingPerSec: Math.min(
      ceiling.sqsReceiveDeletePerSec,
      ceiling.dynamoConditionalWritesPerSec / writesPerJob,
    ),
    seconds: run.seconds,
    jobs: run.counts.jobs,
    deliveries: run.counts.deliveries,
    ceiling,
    byJob: run.perJobName,
    ...(run.cpu ? { cpu: run.cpu } : {}),
  };
}

const pacingNote = (r: BenchReport) => {
  const l = r.localRun;
  if (!l) return '';
  const scaled =
    l.pacing === 'configured' && Object.values(l.jobs).some((j) => j.pacing && j.pacing.timeScale !== 1)
      ? `, time-scaled where a job would take over ${l.maxPacedSeconds} s`
      : '';
  return `${describePacing(l.pacing, l.ratePerMinute)}${scaled}`;
};
const f = (n: number, digits = 2) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** The producer part: batched against naive sends, and what that means on AWS. */
function formatProducer(p: NonNullable<BenchReport['producer']>): string[] {
  const out: string[] = [];
  out.push(`Producer throughput (${p.operations.toLocaleString('en-US')} operations into local SQS)`);
  out.push(
    formatTable(
      ['design', 'calls', 'messages/s'],
      [
        ['batched (SendMessageBatch x10, 5 in flight)', p.batchedCalls, f(p.batchedPerSec, 0)],
        ['naive (SendMessage per op, 5 in flight)', p.naiveCalls, f(p.naivePerSec, 0)],
        ['ratio batched/naive', '', `${f(p.ratio)}x`],
      ],
    ),
  );
  const j = p.projection;
  out.push(
    `Projection for ${j.operations.toLocaleString('en-US')} operations on AWS at ${j.callLatencyMs} ms per send call, ${j.parallelCalls} calls in flight: ` +
      `batched ${f(j.batched.seconds, 0)} s (${j.batched.invocations} invocation(s) of 900 s less the 30% reserve), naive ${f(j.naive.seconds, 0)} s ` +
      `(${j.naive.invocations} invocations). One invocation publishes about ${j.batchedPagesPerInvocation} pages before continuing; ` +
      `maxPagesPerRun caps a run at ${j.operationsPerRunAtPageLimit.toLocaleString('en-US')} operations.`,
  );
  out.push('');
  return out;
}

/** AWS requests per job, batched against naive, with the goals and the cost per million. */
function formatRequestsPerJob(
  r: BenchReport,
  b: NonNullable<BenchReport['perJob']>,
  c: NonNullable<BenchReport['costPerMillionUsd']>,
): string[] {
  const out: string[] = [];
  const n = b.naive;
  const goal = (m: string) => {
    const g = b.goals.find((x) => x.metric === m);
    return g ? `<= ${g.goal}: ${g.met ? 'met' : 'NOT met'}` : '';
  };
  const realRate =
    b.lambdaGbSecondsAtRealRate !== undefined && Math.abs(b.lambdaGbSecondsAtRealRate - b.lambdaGbSeconds) > 1e-9;
  out.push(`AWS requests per job (local run of every job, ${r.counts?.jobs ?? 0} jobs, ${pacingNote(r)})`);
  out.push(
    formatTable(
      ['per job', 'batched', 'naive', 'goal'],
      [
        [
          'SQS requests (send + receive + delete + depth)',
          f(b.sqsRequests, 3),
          f(n.sqsRequests, 3),
          goal('sqsRequests'),
        ],
        ['  idle polls, apart', f(b.sqsIdlePolls, 3), '', ''],
        [
          'DynamoDB write units (overhead)',
          f(b.dynamoWriteUnits, 3),
          f(n.dynamoWriteUnits, 3),
          goal('dynamoWriteUnits'),
        ],
        ['DynamoDB read units (overhead)', f(b.dynamoReadUnits, 3), f(n.dynamoReadUnits, 3), ''],
        [
          '  business write / read units, apart',
          `${f(b.businessWriteUnits, 3)} / ${f(b.businessReadUnits, 3)}`,
          '',
          '',
        ],
        ['Lambda invocations', f(b.lambdaInvocations, 3), f(n.lambdaInvocations, 3), goal('lambdaInvocations')],
        ['Lambda GB-s (as run)', f(b.lambdaGbSeconds, 4), f(n.lambdaGbSeconds, 4), ''],
        ...(realRate
          ? [['Lambda GB-s at the configured rates (est.)', f(b.lambdaGbSecondsAtRealRate!, 4), '', '']]
          : []),
        ['deliveries (1 = no deferral)', f(b.deliveries, 3), '', ''],
        [`cost per 1M jobs, USD (us-east-1, ${c.architecture}, GB-s as run)`, f(c.batched), f(c.naive), ''],
        ...(realRate && c.batchedAtRealRate !== undefined
          ? [['cost per 1M jobs, USD, GB-s at the configured rates (est.)', f(c.batchedAtRealRate), '', '']]
          : []),
      ],
    ),
  );
  out.push('');
  return out;
}

/** The local run, job by job: its pacing and figures, its requests and effects, and its limiter. */
function formatLocalRun(r: BenchReport, l: NonNullable<BenchReport['localRun']>): string[] {
  return [...formatLocalRunJobs(r, l), ...formatRequestsAndEffects(l), ...formatLimiter(l)];
}

/** Each job's pacing (configured, as run, the time scale) and its figures per job, then how each scaled job ran. */
function formatLocalRunJobs(r: BenchReport, l: NonNullable<BenchReport['localRun']>): string[] {
  const out: string[] = [];
  out.push(`Local run per job (${pacingNote(r)})`);
  out.push(
    formatTable(
      [
        'job',
        'rate, starts/interval',
        'run at',
        'time scale',
        'jobs',
        'deliveries/job',
        'invocations/job',
        'GB-s/job as run',
        'GB-s/job at its rate (est.)',
        'DLQ',
        'seconds',
      ],
      Object.entries(l.jobs).map(([name, j]) => {
        const per = (x: number) => x / Math.max(1, j.operations);
        return [
          name,
          j.pacing ? `${j.pacing.startsPerInterval}/${j.pacing.configuredIntervalSeconds} s` : 'pacing off',
          j.pacing ? `${j.pacing.startsPerInterval}/${j.pacing.runIntervalSeconds} s` : '-',
          j.pacing ? `x${f(j.pacing.timeScale, 2)}` : '-',
          j.operations,
          f(per(j.deliveries), 3),
          f(per(j.invocations.producer + j.invocations.consumer), 3),
          f(per(j.gbSeconds), 4),
          j.gbSecondsAtRealRate === undefined ? 'not estimated' : f(per(j.gbSecondsAtRealRate), 4),
          j.deadLettered,
          f(j.seconds, 1),
        ];
      }),
    ),
  );
  for (const [name, j] of Object.entries(l.jobs))
    if (j.pacing && j.pacing.timeScale !== 1) out.push(`${name}: ${describeScale(j.pacing)}`);
  out.push('');
  return out;
}

/** Each job's requests against the per-job goals, and its effects as its fixture reads them. */
function formatRequestsAndEffects(l: NonNullable<BenchReport['localRun']>): string[] {
  const out: string[] = [];
  out.push(
    "Requests and effects per job, by job (each job's own queues, functions and DynamoDB requests; effects as its fixture reads them)",
  );
  const goal = (j: JobRunFigures, m: keyof typeof PER_JOB_GOALS, digits: number) => {
    const g = j.goals.find((x) => x.metric === m);
    return `${f(j.perJob[m], digits)}${g && !g.met ? ' (NOT met)' : ''}`;
  };
  out.push(
    formatTable(
      [
        'job',
        `SQS requests (<= ${PER_JOB_GOALS.sqsRequests})`,
        `write units (<= ${PER_JOB_GOALS.dynamoWriteUnits})`,
        `invocations (<= ${PER_JOB_GOALS.lambdaInvocations})`,
        'deliveries',
        'applied exactly once',
        'missing / repeated / unexpected',
        'most starts in any interval (allowed)',
      ],
      Object.entries(l.jobs).map(([name, j]) => [
        name,
        goal(j, 'sqsRequests', 3),
        goal(j, 'dynamoWriteUnits', 3),
        goal(j, 'lambdaInvocations', 3),
        f(j.perJob.deliveries, 3),
        `${j.effects.exactlyOnce} of ${j.effects.expected}${j.unit ? ` ${j.unit}` : ''}${j.effectsSource === 'pipeline' ? " (pipeline's record)" : ''}`,
        `${j.effects.missing} / ${j.effects.repeated} / ${j.effects.unexpected}`,
        j.maxStartsInAnyInterval === undefined || !j.pacing
          ? '-'
          : `${j.maxStartsInAnyInterval} (${j.pacing.startsPerInterval}) per ${j.pacing.runIntervalSeconds} s`,
      ]),
    ),
  );
  out.push('');
  return out;
}

/** The paced jobs' limiter: the slots item per consumer invocation, and every limiter item; none if none was paced. */
function formatLimiter(l: NonNullable<BenchReport['localRun']>): string[] {
  const paced = Object.entries(l.jobs).filter(([, j]) => j.pacing && j.limiter);
  if (paced.length === 0) return [];
  const out: string[] = [];
  out.push(
    'The limiter, by job: the slots item per consumer invocation (the block, its refills, lost races), and every limiter item in total',
  );
  const kinds = (j: JobRunFigures) =>
    Object.entries(j.limiter?.byKind ?? {})
      .map(([k, v]) => `${k} ${v.writes}w/${v.lostRaces}l/${v.reads}r`)
      .join(', ') || '-';
  out.push(
    formatTable(
      [
        'job',
        'consumer invocations',
        'slot writes / invocation (<= 1)',
        'lost races / invocation',
        'slot reads / invocation',
        'all items: writes / lost / reads',
      ],
      paced.map(([name, j]) => {
        const lim = j.limiter as NonNullable<JobRunFigures['limiter']>;
        return [
          name,
          lim.consumerInvocations,
          f(lim.slotsPerInvocation.writes, 3),
          f(lim.slotsPerInvocation.lostRaces, 3),
          f(lim.slotsPerInvocation.reads, 3),
          kinds(j),
        ];
      }),
    ),
  );
  out.push('');
  return out;
}

/** The cold-start part: each handler's bundle and its init time. */
function formatBundles(bundles: NonNullable<BenchReport['bundles']>): string[] {
  const out: string[] = [];
  out.push('Cold start (bundles from the cloud assembly; fresh node process, median)');
  out.push(
    formatTable(
      [
        'handler',
        'bytes',
        'layer bytes (once per stack)',
        'init ms',
        'of which SDK alone',
        'unbundled init ms',
        'unbundled/bundled',
        'goals (<250 KB, <100 ms)',
      ],
      Object.entries(bundles).map(([k, b]) => [
        k,
        b.bytes.toLocaleString('en-US'),
        b.layerBytes.toLocaleString('en-US'),
        f(b.initMsMedian, 1),
        f(b.sdkInitMsMedian, 1),
        f(b.unbundledInitMsMedian, 1),
        `${f(b.unbundledRatio)}x`,
        `${b.meetsSizeGoal ? 'size met' : 'size NOT met'}, ${b.meetsInitGoal ? 'init met' : 'init NOT met'}`,
      ]),
    ),
  );
  out.push('');
  return out;
}

/** The end-to-end part: the pipeline against the emulators' own ceiling, and its CPU. */
function formatE2e(r: BenchReport, e: NonNullable<BenchReport['e2e']>): string[] {
  const out: string[] = [];
  out.push(`Local end-to-end (${pacingNote(r)}) vs the emulators measured directly`);
  out.push(
    formatTable(
      ['measure', 'per second'],
      [
        [`pipeline jobs/s (${e.jobs} jobs, ${e.deliveries} deliveries, ${f(e.seconds, 1)} s)`, f(e.jobsPerSec, 1)],
        ['emulator ceiling (jobs/s bound)', f(e.emulatorCeilingPerSec, 1)],
        ['  SQS receive + delete, messages/s', f(e.ceiling.sqsReceiveDeletePerSec, 0)],
        ['  DynamoDB conditional writes/s', f(e.ceiling.dynamoConditionalWritesPerSec, 0)],
      ],
    ),
  );
  if (e.cpu) {
    const perJob = (s: number) => `${f((s * 1000) / Math.max(1, e.jobs), 1)} ms`;
    out.push(
      `CPU per job over the measured cycle (${f(e.cpu.wallSeconds, 1)} s on ${e.cpu.cores} cores): runtime ${perJob(e.cpu.runtime)}, ` +
        `functions ${perJob(Object.values(e.cpu.functions).reduce((a, b) => a + b, 0))}, ` +
        `${
          Object.entries(e.cpu.others)
            .map(([k, v]) => `${k} ${perJob(v)}`)
            .join(', ') || 'no other process'
        }; all ${perJob(e.cpu.total)}`,
    );
  }
  out.push('');
  return out;
}

/** The report as Markdown-friendly tables (what docs/performance.md shows). */
export function formatBench(r: BenchReport): string {
  return [
    ...(r.producer ? formatProducer(r.producer) : []),
    ...(r.perJob && r.costPerMillionUsd ? formatRequestsPerJob(r, r.perJob, r.costPerMillionUsd) : []),
    ...(r.localRun ? formatLocalRun(r, r.localRun) : []),
    ...(r.bundles ? formatBundles(r.bundles) : []),
    ...(r.e2e ? formatE2e(r, r.e2e) : []),
    ...(r.backlog ? [formatBacklog(r.backlog)] : []),
  ].join('\n');
}

/** The backlog part: the design at two lengths and the design before admission, per job. */
export function formatBacklog(k: BacklogReport): string {
  const out: string[] = [];
  out.push(
    `Backlog: ${k.job}, ${k.jobs.toLocaleString('en-US')} jobs = ${k.multiple}x its ${k.ratePerMinute} starts/min (after headroom), run time-scaled`,
  );
  out.push(`  ${k.note}`);
  const columns: [string, BacklogDesignFigures][] = [
    [`admission, ${k.multiple}x`, k],
    ...(k.baseline
      ? [[`all at once (before admission), ${k.baseline.multiple}x`, k.baseline] as [string, BacklogDesignFigures]]
      : []),
    [`admission, ${k.short.multiple}x`, k.short],
  ];
  const goalOf = (m: keyof typeof PER_JOB_GOALS) => `<= ${PER_JOB_GOALS[m]}`;
  const row = (label: string, value: (d: BacklogDesignFigures) => string, goal = ''): string[] => [
    label,
    ...columns.map(([, d]) => value(d)),
    goal,
  ];
  const opt = (x: number | undefined, digits: number) => (x === undefined ? 'not estimated' : f(x, digits));
  out.push(
    formatTable(
      ['per job', ...columns.map(([h]) => h), 'goal'],
      [
        row('deliveries (receives of job messages / jobs)', (d) => f(d.deliveriesPerJob, 3), '<= 1.2'),
        row('SQS requests', (d) => f(d.sqsRequestsPerJob, 3), goalOf('sqsRequests')),
        row('DynamoDB write units (overhead)', (d) => f(d.dynamoWriteUnitsPerJob, 3), goalOf('dynamoWriteUnits')),
        row('DynamoDB read units (overhead)', (d) => f(d.dynamoReadUnitsPerJob, 3)),
        row('Lambda invocations', (d) => f(d.lambdaInvocationsPerJob, 3), goalOf('lambdaInvocations')),
        row('Lambda GB-s (as run, scaled time)', (d) => f(d.lambdaGbSecondsPerJob, 4)),
        row(`Lambda GB-s at ${k.ratePerMinute}/min (est.)`, (d) => opt(d.lambdaGbSecondsPerJobAtRealRate, 4)),
        row('cost per 1M jobs, USD (GB-s as run)', (d) => f(d.costPerMillionUsd)),
        row(`cost per 1M jobs, USD (GB-s at ${k.ratePerMinute}/min, est.)`, (d) =>
          opt(d.costPerMillionUsdAtRealRate, 2),
        ),
        row('dead-lettered (messages)', (d) => String(d.deadLettered), '0'),
        row('operations applied exactly once', (d) =>
          d.effects ? `${d.effects.exactlyOnce} of ${d.effects.expected}` : '-',
        ),
        row(
          `most starts in any ${k.pacing.runIntervalSeconds} s (allowed)`,
          (d) => `${d.maxStartsInAnyInterval ?? '-'} (${d.allowedPerInterval})`,
        ),
        row('run, seconds (scaled time)', (d) => f(d.seconds, 1)),
      ],
    ),
  );
  const v = k.flat;
  out.push(
    `Deliveries per job ${f(v.short.deliveriesPerJob, 3)} (${v.short.multiple}x) -> ${f(v.long.deliveriesPerJob, 3)} (${v.long.multiple}x); ` +
      `cost per 1M jobs $${f(v.short.costPerMillionUsd)} -> $${f(v.long.costPerMillionUsd)}: ${v.flat ? 'flat' : 'GROWS'} with the backlog's length (tolerance ${Math.round(v.tolerance * 100)}%)`,
  );
  return out.join('\n');
}

const positiveInt =
  (name: string) =>
  (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < 1)
      throw new InvalidArgumentError(`${name} must be a positive whole number, got "${value}"`);
    return n;
  };

/** Whole numbers from 0 (a count of 0 leaves a job out of the run). */
const wholeNumber =
  (name: string) =>
  (value: string): number => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be a whole number, got "${value}"`);
    return Number(value);
  };

/** The bench's own options, before the unit aliases the fixtures bring. */
function baseProgram(): Command {
  return new Command('npm run bench --')
    .description(
      'Producer throughput, AWS requests and cost per job (every job of the stack, each paced at its configured rate), bundle size and cold init, local end-to-end throughput, ' +
        `and a backlog of ${DEFAULT_BACKLOG_MULTIPLE}x one job's rate with and without admission. Runs every part unless some are named.`,
    )
    .option('--json', 'one JSON document on stdout (progress on stderr)', false)
    .option(
      '--stack <name>',
      "the stack holding the jobs, where several of the app's stacks do (default: the one that does; here PacedJobs-dev)",
    )
    .option('--cdk-out <dir>', "the app's cloud assembly folder, relative to the app's (default: cdk.out)")
    .option('--producer', 'run the producer throughput part', false)
    .option('--requests', 'run the requests-per-job and cost part (a local run of every job)', false)
    .option('--cold-start', 'run the bundle size and cold init part', false)
    .option('--e2e', 'run the local end-to-end throughput part (shares its local run with --requests)', false)
    .option('--backlog', 'run the backlog part (three time-scaled runs of the backlog job)')
    .option('--no-backlog', 'skip the backlog part when running every part')
    .option('--ops <n>', 'operations the producer part publishes each way', positiveInt('--ops'), 100_000)
    .option(
      '--count <job=n>',
      `demo records one job seeds for the local run (repeatable; 0 leaves the job out); a job not named seeds ${DEFAULT_COUNT_MULTIPLE}x its fixture's defaultCount`,
      collectCount,
    )
    .option(
      '--no-pacing',
      "run the local run with pacing off (every job's pacing: false): the pipeline alone, reported as such",
    )
    .option(
      '--rate <perMinute>',
      'pace every job at this many starts per minute in the local run instead of its configured rate, unscaled',
      positiveInt('--rate'),
    )
    .option(
      '--paced-seconds <n>',
      'a job whose seeded count would take longer than this at its configured rate runs time-scaled to about this long',
      positiveInt('--paced-seconds'),
      DEFAULT_MAX_PACED_SECONDS,
    )
    .option(
      '--backlog-job <name>',
      'the job the backlog part runs (default: the first job whose fixture offers a fake downstream, a real quota)',
    )
    .option(
      '--backlog-multiple <n>',
      `the backlog, in multiples of the backlog job's per-minute starts`,
      positiveInt('--backlog-multiple'),
      DEFAULT_BACKLOG_MULTIPLE,
    )
    .option(
      '--backlog-short-multiple <n>',
      'the shorter backlog the design also runs at, to check the cost per job stays flat',
      positiveInt('--backlog-short-multiple'),
      DEFAULT_BACKLOG_SHORT_MULTIPLE,
    )
    .option(
      '--no-backlog-baseline',
      'in the backlog part, skip the run of the design before admission (for a long backlog)',
    )
    .option(
      '--backlog-interval <seconds>',
      'the rate-limit interval the backlog runs use instead of the configured one (time scale = configured / this; default: the shortest that still measures the design)',
      positiveInt('--backlog-interval'),
    )
    .option(
      '--consumer-concurrency <n>',
      'consumer executions per job in the local run',
      positiveInt('--consumer-concurrency'),
      DEFAULT_BENCH_CONSUMER_CONCURRENCY,
    )
    .option('--init-runs <n>', 'fresh processes per cold-init median', positiveInt('--init-runs'), 7)
    .option(
      '--ceiling-messages <n>',
      'messages and writes for the emulator ceiling',
      positiveInt('--ceiling-messages'),
      5000,
    )
    .option('--timeout <seconds>', 'give up when the local run has not settled by then', positiveInt('--timeout'), 300);
}

/** `--<unit> <n>`: an alias of `--count <job>=<n>` for the job whose fixture counts in that unit. */
export interface UnitAlias {
  unit: string;
  /** Where commander keeps its value in `opts()`. */
  attribute: string;
}

/** The aliases the units give: each unit that is a usable option name and not one of the bench's own. */
export function unitAliases(units: Iterable<string>): UnitAlias[] {
  const reserved = new Set(baseProgram().options.flatMap((o) => [o.name(), o.name().replace(/^no-/, '')]));
  return [...new Set(units)].flatMap((unit) => {
    const name = unitOptionName(unit, reserved);
    return name === undefined ? [] : [{ unit, attribute: new Option(`--${name} <n>`).attributeName() }];
  });
}

/** The CLI, with `--<unit> <n>` for each unit of the jobs' fixtures (unit -> jobs, as fixtureUnits finds them). */
export function buildProgram(units: ReadonlyMap<string, readonly string[]> = new Map()): Command {
  const program = baseProgram();
  for (const { unit } of unitAliases(units.keys())) {
    const jobs = units.get(unit) ?? [];
    program.addOption(
      new Option(`--${unit} <n>`, `alias of --count ${jobs.join('|')}=<n> (its fixture counts in ${unit})`).argParser(
        wholeNumber(`--${unit}`),
      ),
    );
  }
  return program;
}

/** The counts by job name the parsed flags give: every --count, and each unit alias resolved to its job. */
export function countsFromFlags(
  flags: Record<string, unknown>,
  units: ReadonlyMap<string, readonly string[]>,
): Record<string, number> {
  const byUnit: Record<string, number> = {};
  for (const { unit, attribute } of unitAliases(units.keys()))
    if (typeof flags[attribute] === 'number') byUnit[unit] = flags[attribute];
  return resolveCounts((flags.count as Record<string, number> | undefined) ?? {}, byUnit, units);
}

async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  let units: Map<string, string[]>;
  try {
    units = fixtureUnits(process.cwd(), process.argv.slice(2));
  } catch (error) {
    const e = error as Error;
    process.stderr.write(`npm run bench failed: ${e.name}: ${e.message}\n`);
    process.exit(1);
  }
  const program = buildProgram(units);
  program.parse(process.argv);
  const flags = program.opts();
  // --backlog names the part; --no-backlog leaves it out of "every part"; neither: undefined.
  const any = flags.producer || flags.requests || flags.coldStart || flags.e2e || flags.backlog === true;
  try {
    const report = await runBench({
      cwd: process.cwd(),
      stack: flags.stack,
      ...(flags.cdkOut === undefined ? {} : { assemblyDir: flags.cdkOut }),
      producer: !any || flags.producer,
      requests: !any || flags.requests,
      coldStart: !any || flags.coldStart,
      e2e: !any || flags.e2e,
      backlog: flags.backlog === true || (!any && flags.backlog !== false),
      ops: flags.ops,
      counts: countsFromFlags(flags, units),
      initRuns: flags.initRuns,
      ceilingMessages: flags.ceilingMessages,
      timeoutSeconds: flags.timeout,
      pacing: flags.pacing,
      ratePerMinute: flags.rate,
      maxPacedSeconds: flags.pacedSeconds,
      consumerConcurrency: flags.consumerConcurrency,
      backlogMultiple: flags.backlogMultiple,
      backlogShortMultiple: flags.backlogShortMultiple,
      backlogIntervalSeconds: flags.backlogInterval,
      backlogBaseline: flags.backlogBaseline,
      backlogJob: flags.backlogJob,
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
