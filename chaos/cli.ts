// `npm run chaos`: the fault-injection harness's command line; prints the verdict (JSON or text), writes the HTML report
// with the run's charts (always) and the markdown summary (on request), of this run or of the last one with `--report`
// alone, and exits 0 only when every invariant held.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Command, InvalidArgumentError, type OptionValues } from 'commander';
import { CHAOS_DEFAULTS, MIN_PRODUCER_TIMEOUT_SECONDS, runChaos, type ChaosOptions, type ChaosResult } from './run';
import { chaosHtmlReport, formatMarkdown, formatText } from './report';
import { writeHtmlReport } from '../console/report';

const integer =
  (flag: string, min: number) =>
  (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min)
      throw new InvalidArgumentError(`${flag} must be an integer >= ${min}, got "${value}"`);
    return n;
  };
const rate =
  (flag: string) =>
  (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < 0 || n > 1)
      throw new InvalidArgumentError(`${flag} must be a probability between 0 and 1, got "${value}"`);
    return n;
  };

// The run's files are the app's, in its .local folder beside its other local state: never beside this module, which in
// the package is node_modules/paced-jobs/dist.
/** Where every run's result is kept, for `--report` alone, in the app's folder `cwd`. */
export const lastRunFile = (cwd: string): string => join(resolve(cwd), '.local', 'chaos', 'last-run.json');
/** The markdown summary's file when `--report` names none (relative to where the command runs). */
export const DEFAULT_REPORT_FILE = 'chaos-report.md';
/** The HTML report with the run's charts, written after every run (and by `--report` alone, of the last one). */
export const htmlReportFile = (cwd: string): string => join(resolve(cwd), '.local', 'chaos-report.html');

/** What the command does with the parsed flags: `options` undefined asks only for the last run's report. */
type RunChaos = (options: ChaosOptions | undefined, flags: { json: boolean; report?: string }) => Promise<number>;

/** The job and app to drive, the run's size and seed, and what it prints and writes. */
function addTargetOptions(program: Command): Command {
  return program
    .option(
      '--job <name>',
      'the job to drive (default: the first job whose fixture offers a fake downstream, else the first with a fixture)',
    )
    .option(
      '--stack <name>',
      "the stack holding the jobs, where several of the app's stacks do (default: the one that does; in this repository PacedJobs-dev)",
    )
    .option('--cdk-out <dir>', "the app's cloud assembly folder, relative to the app's (default: cdk.out)")
    .option(
      '--ops <n>',
      "operations (the fixture's demo records) to seed and process (required to run)",
      integer('--ops', 1),
    )
    .option('--seed <n>', 'seed of every injection decision (required to run)', integer('--seed', 0))
    .option('--json', 'print one JSON document on stdout', false)
    .option(
      '--report [file]',
      `write a markdown summary of the run (default ${DEFAULT_REPORT_FILE}); alone, of the last run`,
    );
}

/** The job's rate and consumer timeout for the run, and the faults in delivery: duplicates, re-runs, kills. */
function addRateAndDeliveryOptions(program: Command): Command {
  return program
    .option(
      '--rate <n>',
      "the job's starts per minute for this run (its limiter and its fake downstream's quota)",
      integer('--rate', 1),
      CHAOS_DEFAULTS.ratePerMinute,
    )
    .option(
      '--consumer-timeout <s>',
      "the consumer's Lambda timeout locally, seconds",
      integer('--consumer-timeout', 3),
      CHAOS_DEFAULTS.consumerTimeoutSeconds,
    )
    .option(
      '--duplicate-rate <p>',
      'per published message: re-send 1-3 copies',
      rate('--duplicate-rate'),
      CHAOS_DEFAULTS.duplicateRate,
    )
    .option(
      '--producer-reruns <n>',
      'producer re-runs of the same business date',
      integer('--producer-reruns', 0),
      CHAOS_DEFAULTS.producerReruns,
    )
    .option(
      '--kill-rate <p>',
      'per consumer invocation: kill the worker at a random point',
      rate('--kill-rate'),
      CHAOS_DEFAULTS.killRate,
    );
}

/** Faults of the job's fake downstream, per request. */
function addDownstreamFaultOptions(program: Command): Command {
  return program
    .option(
      '--downstream-error-rate <p>',
      "per request at the job's fake downstream: 5xx before the effect",
      rate('--downstream-error-rate'),
      CHAOS_DEFAULTS.downstreamErrorRate,
    )
    .option(
      '--reject-rate <p>',
      "per request at the job's fake downstream: a permanent 422 before the effect (dead-lettered, then redriven once faults are off)",
      rate('--reject-rate'),
      CHAOS_DEFAULTS.rejectRate,
    )
    .option(
      '--slow-rate <p>',
      "per request at the job's fake downstream: 100-800 ms extra latency",
      rate('--slow-rate'),
      CHAOS_DEFAULTS.slowRate,
    )
    .option(
      '--hang-rate <p>',
      "per request at the job's fake downstream: effect applied, answer held past the caller's timeout",
      rate('--hang-rate'),
      CHAOS_DEFAULTS.hangAfterEffectRate,
    )
    .option(
      '--drop-rate <p>',
      "per request at the job's fake downstream: held, then dropped without effect",
      rate('--drop-rate'),
      CHAOS_DEFAULTS.dropBeforeEffectRate,
    )
    .option(
      '--storm-share <p>',
      "share of the fault phase the job's fake downstream spends in 429 storms",
      rate('--storm-share'),
      CHAOS_DEFAULTS.stormShare,
    );
}

/** Faults of the local AWS services the job's functions call, and poison messages. */
function addAwsFaultOptions(program: Command): Command {
  return program
    .option(
      '--dynamo-fault-rate <p>',
      "per DynamoDB request from the job's functions: throttling or internal error",
      rate('--dynamo-fault-rate'),
      CHAOS_DEFAULTS.dynamoFaultRate,
    )
    .option(
      '--dynamo-stall-rate <p>',
      'per consumer claim or pre-check: the DynamoDB request stalls until the Lambda timeout',
      rate('--dynamo-stall-rate'),
      CHAOS_DEFAULTS.dynamoStallRate,
    )
    .option(
      '--s3-fault-rate <p>',
      "per object the job's functions write or delete in S3: its first call fails (503 SlowDown or 500 InternalError)",
      rate('--s3-fault-rate'),
      CHAOS_DEFAULTS.s3FaultRate,
    )
    .option(
      '--poison-rate <p>',
      'poison messages per operation (at least one)',
      rate('--poison-rate'),
      CHAOS_DEFAULTS.poisonRate,
    );
}

/** Faults of the producer and its schedule. */
function addProducerFaultOptions(program: Command): Command {
  return program
    .option(
      '--producer-kill-rate <p>',
      'per producer invocation (direct step 0 or admission step): kill it mid-page, before its commit',
      rate('--producer-kill-rate'),
      CHAOS_DEFAULTS.producerKillRate,
    )
    .option(
      '--producer-dead-letters <n>',
      'admission steps failed on every receive until SQS dead-letters them (the harness then recovers the chain)',
      integer('--producer-dead-letters', 0),
      CHAOS_DEFAULTS.producerDeadLetters,
    )
    .option(
      '--duplicate-schedules <n>',
      'schedule deliveries fired twice for the same scheduled time (the same batch)',
      integer('--duplicate-schedules', 0),
      CHAOS_DEFAULTS.duplicateSchedules,
    );
}

/** The producer's and admission's timings locally, and how long to wait for the run to settle. */
function addTimingOptions(program: Command): Command {
  return program
    .option(
      '--producer-timeout <s>',
      "the producer's Lambda timeout locally, seconds (a killed step's lease lasts this long)",
      integer('--producer-timeout', MIN_PRODUCER_TIMEOUT_SECONDS),
      CHAOS_DEFAULTS.producerTimeoutSeconds,
    )
    .option(
      '--admission-horizon <s>',
      'the admission horizon locally, seconds (default: a quarter of ops / rate, 2 to 300)',
      integer('--admission-horizon', 1),
    )
    .option(
      '--admission-visibility <s>',
      "the admission queue's visibility timeout, seconds (default: producer timeout + the stack's 60 s margin)",
      integer('--admission-visibility', 2),
    )
    .option(
      '--admission-max-receives <n>',
      "receives of an admission step before the producer DLQ (default: the stack's, 5)",
      integer('--admission-max-receives', 1),
    )
    .option(
      '--timeout <s>',
      'give up waiting for the run to settle after this long (default: 900 s, or 4x the paced minimum, ops / rate, if longer; plus (receives + 2) x the step visibility)',
      integer('--timeout', 10),
    );
}

/** The run's options from the parsed flags. */
function chaosOptions(f: OptionValues, cwd: string): ChaosOptions {
  return {
    ops: f.ops,
    seed: f.seed,
    cwd,
    job: f.job,
    stack: f.stack,
    ...(f.cdkOut === undefined ? {} : { assemblyDir: f.cdkOut }),
    ratePerMinute: f.rate,
    consumerTimeoutSeconds: f.consumerTimeout,
    duplicateRate: f.duplicateRate,
    producerReruns: f.producerReruns,
    killRate: f.killRate,
    downstreamErrorRate: f.downstreamErrorRate,
    rejectRate: f.rejectRate,
    slowRate: f.slowRate,
    hangAfterEffectRate: f.hangRate,
    dropBeforeEffectRate: f.dropRate,
    stormShare: f.stormShare,
    dynamoFaultRate: f.dynamoFaultRate,
    dynamoStallRate: f.dynamoStallRate,
    s3FaultRate: f.s3FaultRate,
    poisonRate: f.poisonRate,
    producerKillRate: f.producerKillRate,
    producerDeadLetters: f.producerDeadLetters,
    duplicateSchedules: f.duplicateSchedules,
    producerTimeoutSeconds: f.producerTimeout,
    admissionHorizonSeconds: f.admissionHorizon,
    admissionVisibilitySeconds: f.admissionVisibility,
    admissionMaxReceiveCount: f.admissionMaxReceives,
    timeoutSeconds: f.timeout,
  };
}

/** Runs the chaos run the flags ask for, or with `--report` alone writes the last run's summary. */
function chaosAction(run: RunChaos, cwd: string) {
  return async function (this: Command, f: OptionValues): Promise<void> {
    const report = f.report === true ? DEFAULT_REPORT_FILE : (f.report as string | undefined);
    if (f.ops === undefined && f.seed === undefined && report !== undefined) {
      process.exitCode = await run(undefined, { json: f.json, report });
      return;
    }
    if (f.ops === undefined || f.seed === undefined) {
      this.error(
        `error: ${f.ops === undefined ? '--ops' : '--seed'} is required to run (--ops N --seed S); --report alone writes the last run's summary`,
      );
    }
    process.exitCode = await run(chaosOptions(f, cwd), { json: f.json, report });
  };
}

/**
 * `options` undefined: no run, only the report of the last one (`--report` without `--ops` and `--seed`). `cwd` is the
 * CDK app's folder (cdk.json) the run synthesizes and deploys: where the command runs.
 */
export function buildProgram(run: RunChaos, cwd = process.cwd()): Command {
  const program = new Command('chaos').description(
    "fault-injection run of one job (it needs a local fixture, local.ts beside the job's code) on the local runtime; exits 0 iff every invariant holds",
  );
  for (const addOptions of [
    addTargetOptions,
    addRateAndDeliveryOptions,
    addDownstreamFaultOptions,
    addAwsFaultOptions,
    addProducerFaultOptions,
    addTimingOptions,
  ]) {
    addOptions(program);
  }
  return program.action(chaosAction(run, cwd));
}

export async function main(argv: string[], cwd = process.cwd()): Promise<number> {
  let code = 1;
  const lastRun = lastRunFile(cwd);
  await buildProgram(async (options, flags) => {
    let result: ChaosResult;
    if (options === undefined) {
      if (!existsSync(lastRun))
        throw new Error(`no chaos run on record (${lastRun}); run chaos with --ops N --seed S first`);
      result = JSON.parse(readFileSync(lastRun, 'utf8')) as ChaosResult;
    } else {
      result = await runChaos({ ...options, log: (line) => process.stderr.write(`chaos: ${line}\n`) });
      mkdirSync(dirname(lastRun), { recursive: true });
      writeFileSync(lastRun, `${JSON.stringify(result, null, 2)}\n`);
    }
    // The charts are the HTML report's (and last-run.json keeps them): the JSON on stdout stays the verdict.
    const { charts: _charts, ...verdict } = result;
    process.stdout.write(flags.json ? `${JSON.stringify(verdict, null, 2)}\n` : `${formatText(result)}\n`);
    const what = `${result.job ? `${result.job}, ` : ''}${result.ops} operations, seed ${result.seed}`;
    if (flags.report) {
      const file = resolve(cwd, flags.report);
      writeFileSync(file, formatMarkdown(result));
      process.stderr.write(`chaos: report of the run (${what}) written to ${file}\n`);
    }
    const html = writeHtmlReport(htmlReportFile(cwd), chaosHtmlReport(result));
    process.stderr.write(
      `chaos: charts of the run (${what}) written to ${html}${result.charts ? '' : ' (the recorded run has no charts)'}\n`,
    );
    code = result.ok ? 0 : 1;
    return code;
  }, cwd).parseAsync(argv);
  return code;
}

if (require.main === module) {
  main(process.argv).then(
    (code) => process.exit(code),
    (error: Error) => {
      process.stderr.write(`chaos: ${error.name}: ${error.message}\n`);
      process.exit(2);
    },
  );
}
