// Benchmark (`npm run bench`), the backlog part: one job (`--backlog-job`, by default the first whose fixture offers a
// fake downstream, a real quota) with a backlog of many times its per-minute rate, run time-scaled (this machine cannot
// afford the hour a 50x backlog takes at the real rate), with admission (the design) and without it (every page
// published at once, as before admission), and the design again at a shorter backlog, to show that deliveries and cost
// per job do not grow with the backlog's length. It names no job.
import { join, relative, resolve } from 'node:path';
import { appEnv, ensureAppStack } from '../local/assembly';
import { fixturePath, loadFixture, type JobFixture } from '../local/fixture';
import { jobViews, previewPlan } from '../local/jobs';
import { loadTemplate } from '../local/template';
import {
  describeScale,
  E2eBenchError,
  runE2eBench,
  scaleJobSettings,
  shortestFaithfulIntervalSeconds,
  type E2eResult,
  type JobPacing,
  type JobRunFigures,
} from './e2e';
import { batchedFigures, checkGoals, flatVerdict, type FlatVerdict, type GoalCheck } from './perJob';

/** Backlog as a multiple of the job's per-minute starts. @default 50 */
export const DEFAULT_BACKLOG_MULTIPLE = 50;
/** The shorter backlog the design also runs at, for the flat check. @default 10 */
export const DEFAULT_BACKLOG_SHORT_MULTIPLE = 10;
/** Growth from the short to the long backlog below this fraction is noise, not growth. */
export const FLAT_TOLERANCE = 0.1;

export interface BacklogOptions {
  /** The CDK app's folder (cdk.json; each job's fixture is the local.ts beside its entry). */
  cwd: string;
  /** The environment synthesized (`-c env=<env>`). @default "dev" in this repository, none in a team's app */
  env?: string;
  /** The stack holding the jobs, where several of the app's stacks do. @default the one that does */
  stack?: string;
  /** The job to run. @default the first job of the stack whose fixture offers a fake downstream (a real quota) */
  job?: string;
  /** @default "cdk.out" */
  assemblyDir?: string;
  /** @default DEFAULT_BACKLOG_MULTIPLE */
  multiple?: number;
  /** @default DEFAULT_BACKLOG_SHORT_MULTIPLE */
  shortMultiple?: number;
  /**
   * The rate-limit interval the runs use instead of the configured one. @default the shortest faithful one
   * (shortestFaithfulIntervalSeconds: e.g. 8 s for 80 starts per 60 s in batches of 10)
   */
  intervalSeconds?: number;
  consumerConcurrency?: number;
  /**
   * Also run the design before admission at the same backlog. @default true; off for a long backlog that only needs
   * the design's figures (every page at once takes as long again, and longer)
   */
  baseline?: boolean;
  /** Floor for each run's settle timeout; each run also gets three times its paced length plus two minutes. @default 300 */
  timeoutSeconds?: number;
  progress?: (line: string) => void;
}

/** One backlog run, per job. */
export interface BacklogDesignFigures {
  multiple: number;
  jobs: number;
  admission: boolean;
  deliveriesPerJob: number;
  sqsRequestsPerJob: number;
  dynamoWriteUnitsPerJob: number;
  dynamoReadUnitsPerJob: number;
  lambdaInvocationsPerJob: number;
  /** As run, at the scaled time. */
  lambdaGbSecondsPerJob: number;
  /** At the configured rate: the slot waits grown by the time scale (estimated from the job's observed starts). */
  lambdaGbSecondsPerJobAtRealRate: number | undefined;
  /** Every request and GB-second as run. */
  costPerMillionUsd: number;
  costPerMillionUsdAtRealRate: number | undefined;
  goals: GoalCheck[];
  deadLettered: number;
  /** First publish to last acknowledgement, at the scaled time. */
  seconds: number;
  effects: JobRunFigures['effects'];
  /** The job's most starts in any run interval (its fixture's reading), against the allowance per interval. */
  maxStartsInAnyInterval: number | undefined;
  allowedPerInterval: number;
  /** What the requests were, to see which dominate. */
  sqsRequests: E2eResult['sqsRequests'];
  dynamoRequests: E2eResult['dynamoRequests'];
}

export interface BacklogReport extends BacklogDesignFigures {
  job: string;
  /** What one of the job's records is called (its fixture's unit). */
  unit: string;
  /** Effective starts per minute at the configured rate (after headroom). */
  ratePerMinute: number;
  pacing: JobPacing;
  /** The shortest interval the job can be scaled to and still measure the design (see shortestFaithfulIntervalSeconds). */
  shortestFaithfulIntervalSeconds: number;
  /** e.g. "interval scaled 60 s -> 3 s (x20), ...": what was scaled, and what could not be. */
  note: string;
  /** The design before admission: `admission` removed from JOB_SETTINGS, every page published at once (unless skipped). */
  baseline?: BacklogDesignFigures;
  /** The design at the shorter backlog. */
  short: BacklogDesignFigures;
  flat: FlatVerdict;
}

/** A run's figures per job, from its counts. */
export function backlogFigures(run: E2eResult, job: string, multiple: number): BacklogDesignFigures {
  const figures = run.perJobName[job];
  if (!figures?.pacing) throw new E2eBenchError(`the backlog run has no paced figures for ${job}`);
  const asRun = batchedFigures(run.counts);
  const real =
    run.counts.lambda.gbSecondsAtRealRate === undefined ? undefined : batchedFigures(run.counts, { atRealRate: true });
  return {
    multiple,
    jobs: run.counts.jobs,
    admission: run.admission,
    deliveriesPerJob: asRun.perJob.deliveries,
    sqsRequestsPerJob: asRun.perJob.sqsRequests,
    dynamoWriteUnitsPerJob: asRun.perJob.dynamoWriteUnits,
    dynamoReadUnitsPerJob: asRun.perJob.dynamoReadUnits,
    lambdaInvocationsPerJob: asRun.perJob.lambdaInvocations,
    lambdaGbSecondsPerJob: asRun.perJob.lambdaGbSeconds,
    lambdaGbSecondsPerJobAtRealRate: real?.perJob.lambdaGbSeconds,
    costPerMillionUsd: asRun.costPerMillionUsd.total,
    costPerMillionUsdAtRealRate: real?.costPerMillionUsd.total,
    goals: checkGoals(asRun.perJob),
    deadLettered: run.deadLettered,
    seconds: run.seconds,
    effects: figures.effects,
    maxStartsInAnyInterval: figures.maxStartsInAnyInterval,
    allowedPerInterval: figures.pacing.startsPerInterval,
    sqsRequests: run.sqsRequests,
    dynamoRequests: run.dynamoRequests,
  };
}

/** The backlog's operations: `multiple` times the job's effective starts per minute. */
export function backlogOperations(
  rate: { startsPerInterval: number; intervalSeconds: number },
  multiple: number,
): number {
  return Math.round((multiple * rate.startsPerInterval * 60) / rate.intervalSeconds);
}

/**
 * The job the backlog part runs: the one named, or the first of the stack's jobs whose fixture offers a fake downstream
 * (a quota of its own to hold, which the run's starts are checked against). A job must have a fixture to seed with:
 * the error names the file (`fixtureFileOf`, relative to the app).
 */
export function backlogJobOf(
  jobs: readonly string[],
  fixtureOf: (job: string) => Pick<JobFixture, 'downstream'> | undefined,
  named?: string,
  fixtureFileOf: (job: string) => string = (job) => join('lambda', 'jobs', job, 'local.ts'),
): string {
  if (named !== undefined) {
    if (!jobs.includes(named))
      throw new E2eBenchError(`--backlog-job ${named}: the stack has no such job (jobs: ${jobs.join(', ') || 'none'})`);
    if (!fixtureOf(named))
      throw new E2eBenchError(
        `--backlog-job ${named}: the job has no local fixture (${fixtureFileOf(named)}) to seed its backlog with`,
      );
    return named;
  }
  const job = jobs.find((j) => fixtureOf(j)?.downstream !== undefined);
  if (!job)
    throw new E2eBenchError(
      `no job of the stack has a fixture with a fake downstream (a real quota) for the backlog part; name one with --backlog-job (jobs: ${jobs.join(', ') || 'none'})`,
    );
  return job;
}

/**
 * What the report says about the scaling: what was scaled and what could not be, and whether the run interval is at or
 * above the shortest faithful one, or BELOW it (the figures then show SQS's whole-second delays, not the design).
 */
export function backlogNote(pacing: JobPacing, faithfulSeconds: number): string {
  return (
    `${describeScale(pacing)}; not scaled: SQS delays (whole seconds), the deferral backoff, the limiter's safety margin. ` +
    (pacing.runIntervalSeconds < faithfulSeconds
      ? `BELOW the shortest faithful interval (${faithfulSeconds} s): admission's groups bunch in SQS's whole-second delays, and the figures show that, not the design`
      : `${faithfulSeconds} s is the shortest interval at which one batch's slots still span SQS's 1 s delay resolution`)
  );
}

export async function runBacklogBench(options: BacklogOptions): Promise<BacklogReport> {
  const progress = options.progress ?? (() => undefined);
  const multiple = options.multiple ?? DEFAULT_BACKLOG_MULTIPLE;
  const shortMultiple = options.shortMultiple ?? DEFAULT_BACKLOG_SHORT_MULTIPLE;
  if (shortMultiple >= multiple)
    throw new E2eBenchError(
      `the short backlog multiple (${shortMultiple}) must be below the backlog multiple (${multiple})`,
    );
  const cwd = resolve(options.cwd);
  const env = appEnv(cwd, options.env);
  // Synthesized when missing, as the runs would: the template sizes the backlog before any of them.
  const artifact = ensureAppStack({
    env,
    stack: options.stack,
    assemblyDir: options.assemblyDir ?? 'cdk.out',
    cwd,
    log: (line) => progress(`backlog: ${line}`),
  });
  // The job's configured rate, from the template, before any server exists: it sizes the backlog.
  const plan = previewPlan(loadTemplate(artifact.templateFile), artifact.stackName);
  const preview = jobViews(plan);
  const entryOf = (name: string) => preview.get(name)?.entry;
  const fixtures = new Map([...preview.keys()].map((name) => [name, loadFixture(cwd, name, entryOf(name))]));
  const fileOf = (name: string) => relative(cwd, fixturePath(cwd, name, entryOf(name)));
  const job = backlogJobOf([...preview.keys()], (name) => fixtures.get(name), options.job, fileOf);
  const unit = fixtures.get(job)!.unit;
  const settings = preview.get(job)!.settings;
  const rate = settings.rateLimit;
  const faithful = shortestFaithfulIntervalSeconds(settings);
  const intervalSeconds = options.intervalSeconds ?? faithful;
  const perSecondAsRun = rate.startsPerInterval / intervalSeconds;

  const run = async (times: number, admission: boolean): Promise<BacklogDesignFigures> => {
    const operations = backlogOperations(rate, times);
    const pacedSeconds = operations / perSecondAsRun;
    progress(
      `backlog: ${job}, ${operations} ${unit} (${times}x ${(rate.startsPerInterval * 60) / rate.intervalSeconds}/min), ${admission ? 'admission' : 'admission off'}, about ${Math.round(pacedSeconds)} s at the scaled rate`,
    );
    const result = await runE2eBench({
      cwd,
      env,
      stack: artifact.stackName,
      assemblyDir: options.assemblyDir,
      counts: { [job]: operations },
      jobs: [job],
      intervalSeconds: { [job]: intervalSeconds },
      admission,
      consumerConcurrency: options.consumerConcurrency,
      timeoutSeconds: Math.max(options.timeoutSeconds ?? 300, Math.ceil(3 * pacedSeconds) + 120),
      progress,
    });
    return backlogFigures(result, job, times);
  };

  const design = await run(multiple, true);
  const baseline = options.baseline === false ? undefined : await run(multiple, false);
  const short = await run(shortMultiple, true);
  // The scaling the runs used (runE2eBench applies the same function), stated once for the report.
  const consumer = preview.get(job)?.consumer;
  const window = plan.mappings.find((m) => m.functionName === consumer?.name)?.maximumBatchingWindowSeconds ?? 0;
  const pacing = scaleJobSettings(settings, intervalSeconds, window).pacing;
  const note = backlogNote(pacing, faithful);
  return {
    ...design,
    job,
    unit,
    ratePerMinute: (rate.startsPerInterval * 60) / rate.intervalSeconds,
    pacing,
    shortestFaithfulIntervalSeconds: faithful,
    note,
    baseline,
    short,
    flat: flatVerdict(
      { multiple: shortMultiple, deliveriesPerJob: short.deliveriesPerJob, costPerMillionUsd: short.costPerMillionUsd },
      { multiple, deliveriesPerJob: design.deliveriesPerJob, costPerMillionUsd: design.costPerMillionUsd },
      FLAT_TOLERANCE,
    ),
  };
}
