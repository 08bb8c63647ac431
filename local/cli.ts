// `npm start` and `paced-jobs start`: the command line of the local runtime (flags, validation, exit codes); run.ts
// does the work. It runs in a CDK app's folder: this repository (its environments, `--env dev` by default) or a team's
// app using PacedJobs (its stack found by its jobs, or named with --stack). It names no job: demo sizes are
// `--count <job>=<n>`, and each job's fixture unit is a flag of its own (`--<unit> <n>`).
import { resolve } from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option, type OptionValues } from 'commander';
import { chooseStack, isReferenceApp, StackChoiceError } from './assembly';
import { FixtureError, jobFolders, loadFixture } from './fixture';
import { JOB_ENTRY_METADATA } from './plan';
import { runLocal, type RunOptions, type RunViews } from './run';
import { loadTemplate } from './template';

const positiveInt =
  (name: string) =>
  (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n))
      throw new InvalidArgumentError(`${name} must be a whole number, got "${value}"`);
    return n;
  };

const port = (value: string): number => {
  const n = positiveInt('port')(value);
  if (n < 1 || n > 65535) throw new InvalidArgumentError(`port must be between 1 and 65535, got ${n}`);
  return n;
};

const share = (value: string): number => {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1)
    throw new InvalidArgumentError(`--async-duplicate-rate must be a share between 0 and 1, got "${value}"`);
  return n;
};

const isoDate = (value: string): string => {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value) || !new Date(`${value}T00:00:00Z`).toISOString().startsWith(value)) {
    throw new InvalidArgumentError(`expected a calendar date YYYY-MM-DD, got "${value}"`);
  }
  return value;
};

/** `--<unit> <n>` stands for `--count <job>=<n>`, for the job whose fixture calls its demo records <unit>. */
export interface UnitFlag {
  unit: string;
  job: string;
  defaultCount: number;
}

/** A unit that can be a long flag of its own. */
const FLAG_NAME = /^[a-z][a-z0-9-]*$/;

/**
 * One flag per fixture unit. A unit two fixtures share, or one that is not a flag name, gets none (`--count` still
 * works). A fixture that fails to load gets none either: the run loads it again and fails with the fixture's own error.
 */
export function unitFlags(
  cwd: string,
  jobs: string[],
  entryOf: (job: string) => string | undefined = () => undefined,
): UnitFlag[] {
  const flags: UnitFlag[] = [];
  for (const job of jobs) {
    let fixture;
    try {
      fixture = loadFixture(cwd, job, entryOf(job));
    } catch (error) {
      if (error instanceof FixtureError) continue;
      throw error;
    }
    if (fixture && FLAG_NAME.test(fixture.unit))
      flags.push({ unit: fixture.unit, job, defaultCount: fixture.defaultCount });
  }
  return flags.filter((f) => flags.filter((g) => g.unit === f.unit).length === 1);
}

/**
 * `<job>=<n>`, repeatable: one value per job, the job one of the app's when they are known before the run (`jobs`); a
 * job the stack turns out not to have is refused by the run itself.
 */
const perJob =
  (flag: string, jobs: AppJobs | undefined, parse: (value: string) => number) =>
  (value: string, previous: Record<string, number> | undefined): Record<string, number> => {
    const at = value.lastIndexOf('=');
    if (at <= 0) throw new InvalidArgumentError(`${flag} takes <job>=<n>, got "${value}"`);
    const job = value.slice(0, at);
    if (jobs && !jobs.names.includes(job))
      throw new InvalidArgumentError(
        `${flag}: no job "${job}" (${jobs.source} has: ${jobs.names.join(', ') || 'none'})`,
      );
    return { ...previous, [job]: parse(value.slice(at + 1)) };
  };

/** The app's jobs as known before a run: names, where they were found, each one's entry (its fixture's folder). */
export interface AppJobs {
  names: string[];
  /** For messages: "lambda/jobs", or the stack they were read from. */
  source: string;
  entries: Map<string, string | undefined>;
}

/**
 * The app's jobs before anything is synthesized: in this repository the folders of lambda/jobs (as always); in a team's
 * app, the jobs of the stack its existing cloud assembly holds (`--cdk-out`, `--stack`, `--env` as the command line
 * gives them). Undefined when there is no assembly yet, or it does not say which stack: the run synthesizes and
 * decides, and its own errors say why.
 */
export function appJobs(cwd: string, argv: readonly string[]): AppJobs | undefined {
  if (isReferenceApp(cwd)) {
    const names = jobFolders(cwd);
    return { names, source: 'lambda/jobs', entries: new Map(names.map((n) => [n, undefined])) };
  }
  try {
    const artifact = chooseStack(resolve(cwd, optionValue(argv, '--cdk-out') ?? 'cdk.out'), {
      stack: optionValue(argv, '--stack'),
      env: optionValue(argv, '--env'),
    });
    const entries = new Map<string, string | undefined>();
    for (const r of Object.values(loadTemplate(artifact.templateFile).Resources)) {
      const name = (r.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables
        ?.JOB_NAME;
      if (r.Type !== 'AWS::Lambda::Function' || typeof name !== 'string') continue;
      const entry = r.Metadata?.[JOB_ENTRY_METADATA];
      entries.set(name, typeof entry === 'string' ? entry : entries.get(name));
    }
    return { names: [...entries.keys()].sort(), source: `stack ${artifact.stackName}`, entries };
  } catch (error) {
    // No assembly yet, or no one stack to take: the run synthesizes, chooses again, and fails with this error if it must.
    if (error instanceof StackChoiceError) return undefined;
    throw error;
  }
}

/** The value of a long option in raw arguments (`--name v` or `--name=v`; the last one wins, as commander's does). */
export function optionValue(argv: readonly string[], name: string): string | undefined {
  let value: string | undefined;
  argv.forEach((arg, i) => {
    if (arg === name && i + 1 < argv.length) value = argv[i + 1];
    else if (arg.startsWith(`${name}=`)) value = arg.slice(name.length + 1);
  });
  return value;
}

/** How buildProgram is called from runStartCli. */
export interface ProgramOptions {
  /** The program's name in help and errors. @default "npm start --" here, "paced-jobs start" in a team's app */
  name?: string;
  /** The raw arguments, read before parsing for what decides the app's jobs (--cdk-out, --stack, --env). @default [] */
  argv?: readonly string[];
}

/**
 * The command line for the app in `cwd` (`--app` is read by runStartCli before it builds this, so `cwd` is already the
 * app's folder): its flags, with one per job fixture's unit, and the run as its action. The flags are added group by
 * group, in the order help lists them.
 */
export function buildProgram(
  run: (options: RunOptions) => Promise<number>,
  cwd = process.cwd(),
  programOptions: ProgramOptions = {},
): Command {
  const reference = isReferenceApp(cwd);
  const jobs = appJobs(cwd, programOptions.argv ?? []);
  const program = new Command(programOptions.name ?? (reference ? 'npm start --' : 'paced-jobs start')).description(
    "Run the app's synthesized PacedJobs stack on embedded AWS-protocol servers: one demo cycle of every job, or --serve.",
  );
  addAppOptions(program, reference);
  addModeOptions(program);
  addDemoOptions(program, jobs);
  addDownstreamOptions(program);
  addRuntimeOptions(program);
  addPortOptions(program, jobs);
  program.showHelpAfterError();
  const units = addUnitFlags(program, cwd, jobs);
  return program.action(async (flags) => {
    await run(runOptionsOf(flags, cwd, units));
  });
}

/** Which app, environment and stack to run. */
function addAppOptions(program: Command, reference: boolean): void {
  program
    .option('--app <dir>', "the CDK app's folder, where its cdk.json is (default: the current folder)")
    .addOption(
      reference
        ? new Option('--env <name>', 'environment whose synthesized template to run (cdk synth -c env=<name>)').default(
            'dev',
          )
        : new Option(
            '--env <name>',
            'passed to cdk synth as -c env=<name>; its stack PacedJobs-<name> is run when the app has one',
          ),
    )
    .option(
      '--stack <name>',
      'the stack holding the jobs, when several stacks of the app use PacedJobs (its name, or Stage/Stack)',
    );
}

/** A demo run or --serve, and what the run shows: the console, the report, the JSON document. */
function addModeOptions(program: Command): void {
  program
    .option(
      '--serve',
      'keep running: fire schedules on their crons, serve the web console and write .local/endpoints.json until Ctrl-C',
      false,
    )
    .addOption(
      new Option(
        '--console-port <port>',
        "with --serve: the web console's port on 127.0.0.1 (default: a free one)",
      ).argParser(port),
    )
    .option('--no-console', 'with --serve: do not serve the web console')
    .option(
      '--report <file>',
      'where a demo run writes its HTML report with the charts (default: <local-dir>/report.html)',
    )
    .option(
      '--now',
      'fire every schedule once at start (always done in a demo run; with --serve also seeds demo data)',
      false,
    )
    .option(
      '--date <YYYY-MM-DD>',
      'business date for the fired cycle (default: what each schedule would compute now)',
      isoDate,
    )
    .option('--json', 'print the report as one JSON document on stdout (progress and logs go to stderr)', false);
}

/** The demo's size, the folders the run reads and writes, and how long it waits to settle. */
function addDemoOptions(program: Command, jobs: AppJobs | undefined): void {
  program
    .option(
      '--count <job>=<n>',
      "demo records to seed for a job (repeatable; default: the job's fixture's defaultCount)",
      perJob('--count', jobs, positiveInt('--count')),
    )
    .option('--data-dir <dir>', 'keep DynamoDB data (dynalite LevelDB) in this folder across runs')
    .option('--cdk-out <dir>', 'cloud assembly folder', 'cdk.out')
    .option('--local-dir <dir>', 'where endpoints.json and logs/ are written', '.local')
    .option('--synth', 're-run cdk synth even when the cloud assembly already holds the stack', false)
    .option(
      '--timeout <seconds>',
      'give up waiting for the run to settle after this long',
      positiveInt('--timeout'),
      180,
    );
}

/** Every fake downstream's quota, window and concurrency. */
function addDownstreamOptions(program: Command): void {
  program
    .option(
      '--downstream-quota <n>',
      "every fake downstream: starts allowed per window (default: its job's configured rate)",
      positiveInt('--downstream-quota'),
    )
    .option(
      '--downstream-window <seconds>',
      "every fake downstream: the quota's window (default: its job's rate-limit interval)",
      positiveInt('--downstream-window'),
    )
    .option(
      '--downstream-concurrency <n>',
      "every fake downstream: concurrent requests allowed (default: its job's concurrency)",
      positiveInt('--downstream-concurrency'),
    );
}

/** The local runtime: warm environments, logs, IAM, Lambda's duplicate deliveries. */
function addRuntimeOptions(program: Command): void {
  program
    .option(
      '--prewarm <n>',
      "execution environments to load per function before the run, at most (default: each function's concurrency)",
      positiveInt('--prewarm'),
    )
    .option('--verbose', 'also print function logs on stderr (they always go to .local/logs)', false)
    .option('--no-iam', 'do not enforce IAM (every report then warns; denials are listed as what AWS would refuse)')
    .option(
      '--async-duplicate-rate <share>',
      'share of asynchronous events Lambda delivers twice (0 to 1)',
      share,
      0.01,
    );
}

/** The servers' ports and the fake downstreams', each a free one unless given. */
function addPortOptions(program: Command, jobs: AppJobs | undefined): void {
  program
    .addOption(new Option('--dynamodb-port <port>', 'DynamoDB port (default: a free one)').argParser(port))
    .addOption(new Option('--sqs-port <port>', 'SQS port (default: a free one)').argParser(port))
    .addOption(new Option('--s3-port <port>', 'S3 port (default: a free one)').argParser(port))
    .addOption(new Option('--lambda-port <port>', 'Lambda API port (default: a free one)').argParser(port))
    .addOption(
      new Option('--scheduler-port <port>', 'EventBridge Scheduler API port (default: a free one)').argParser(port),
    )
    .addOption(new Option('--secrets-port <port>', 'Secrets Manager port (default: a free one)').argParser(port))
    .option(
      '--downstream-port <job>=<port>',
      "a job's fake downstream port (repeatable; default: a free one)",
      perJob('--downstream-port', jobs, port),
    );
}

/** `--<unit> <n>` for each job fixture's unit no other flag has taken; the units that got a flag. */
function addUnitFlags(program: Command, cwd: string, jobs: AppJobs | undefined): UnitFlag[] {
  const units = (jobs ? unitFlags(cwd, jobs.names, (job) => jobs.entries.get(job)) : []).filter(
    (u) => !program.options.some((o) => o.long === `--${u.unit}`),
  );
  for (const u of units)
    program.option(
      `--${u.unit} <n>`,
      `demo ${u.unit} to seed: --count ${u.job}=<n> (default ${u.defaultCount})`,
      positiveInt(`--${u.unit}`),
    );
  return units;
}

/** The run's options from the parsed flags: a fixture unit's flag stands for `--count <job>=<n>`. */
function runOptionsOf(flags: OptionValues, cwd: string, units: UnitFlag[]): RunOptions {
  const counts: Record<string, number> = {};
  for (const u of units) if (flags[camel(u.unit)] !== undefined) counts[u.job] = flags[camel(u.unit)];
  // --count is the flag the aliases stand for: it wins where both name one job.
  Object.assign(counts, flags.count);
  return {
    env: flags.env,
    stack: flags.stack,
    cwd,
    assemblyDir: flags.cdkOut,
    localDir: flags.localDir,
    synth: flags.synth,
    serve: flags.serve,
    console: flags.console,
    consolePort: flags.consolePort,
    reportFile: flags.report,
    now: flags.now,
    date: flags.date,
    json: flags.json,
    counts,
    dataDir: flags.dataDir,
    timeoutSeconds: flags.timeout,
    prewarm: flags.prewarm,
    verbose: flags.verbose,
    iam: flags.iam,
    asyncDuplicateRate: flags.asyncDuplicateRate,
    downstream: {
      quota: {
        startsPerWindow: flags.downstreamQuota,
        windowSeconds: flags.downstreamWindow,
        maxConcurrent: flags.downstreamConcurrency,
      },
      ports: flags.downstreamPort,
    },
    ports: {
      dynamodb: flags.dynamodbPort,
      sqs: flags.sqsPort,
      s3: flags.s3Port,
      lambda: flags.lambdaPort,
      secretsManager: flags.secretsPort,
      scheduler: flags.schedulerPort,
    },
  };
}

/** Commander's attribute name for a long flag: `--max-items` is `maxItems`. */
const camel = (flag: string) => flag.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());

export interface StartCliOptions {
  /** Where the command runs: the app's folder, unless `--app` names another (relative to it). @default process.cwd() */
  cwd?: string;
  /** The program's name in help and errors. @default "npm start --" in this repository, else "paced-jobs start" */
  name?: string;
  /** @default process.stdout and process.stderr */
  stdout?: NodeJS.WritableStream;
  stderr?: NodeJS.WritableStream & { isTTY?: boolean };
  /** What the run shows beside its report (cli/start.ts: the web console, the charts). @default none */
  views?: RunViews;
}

/**
 * `paced-jobs start` (and `npm start`): parses `argv`, the arguments after the command (`['--json', '--stack', 'A']`),
 * runs the local proof on the app in `cwd` (or `--app`), and resolves to the exit code: 0 when every check passed,
 * 1 when one failed or the arguments are wrong, 2 when the run could not be made (synthesis, no PacedJobs, a
 * provisioning refusal), 0 after --help. It does not exit the process; with --serve it runs until SIGINT or SIGTERM.
 */
export async function runStartCli(argv: readonly string[], options: StartCliOptions = {}): Promise<number> {
  // The SDK's Node 20 notice is not this tool's to show, and it would break the --json contract's clean stderr story.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const stdout = options.stdout ?? process.stdout;
  const stderr = options.stderr ?? process.stderr;
  const cwd = resolve(options.cwd ?? process.cwd(), optionValue(argv, '--app') ?? '.');
  let resolveStop!: () => void;
  const stopSignal = new Promise<void>((r) => (resolveStop = r));
  let stoppingSince = 0;
  const onSignal = () => {
    // A second Ctrl-C while shutting down means "now". A wrapper (npm, tsx) may relay the first one twice, hence the
    // grace second.
    if (stoppingSince > 0 && Date.now() - stoppingSince > 1000) process.exit(130);
    stoppingSince ||= Date.now();
    resolveStop();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let exitCode = 0;
  let name = options.name ?? 'paced-jobs start';
  try {
    const program = buildProgram(
      async (runOptions) => (exitCode = await runLocal(runOptions, { stdout, stderr, stopSignal }, options.views)),
      cwd,
      { name: options.name, argv },
    );
    name = program.name();
    program
      .exitOverride()
      .configureOutput({ writeOut: (text) => stdout.write(text), writeErr: (text) => stderr.write(text) });
    await program.parseAsync([...argv], { from: 'user' });
  } catch (error) {
    // Commander has printed its own message (a bad flag, or the help asked for): its code is the exit code.
    if (error instanceof CommanderError) return error.exitCode;
    const e = error as Error;
    // "npm start failed", not "npm start -- failed": the usage line's `--` is how npm passes flags on, not the command.
    stderr.write(`${name.replace(/ --$/, '')} failed: ${e.name}: ${e.message}\n`);
    if (e.cause) stderr.write(`  caused by: ${(e.cause as Error).message ?? String(e.cause)}\n`);
    return 2;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  return exitCode;
}

async function main(): Promise<void> {
  const code = await runStartCli(process.argv.slice(2));
  // Worker threads and sockets are closed by then; exit explicitly so a stray timer cannot hold the CLI open.
  process.exit(code);
}

if (require.main === module) void main();
