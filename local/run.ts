// What `npm start` does: deploys the synthesized stack locally (a LocalSession: every job with its local fixture and
// fake downstream), then either runs one demo cycle of every job (seed, fire, wait until settled, report, and the
// run's charts as an HTML report) or serves the stack with its schedules live, and the web console, until Ctrl-C; the
// charts and the console are views its caller supplies (RunViews: console/localRun.ts, wired by cli/start.ts). It
// names no job: what a job seeds and how its effects are read is its fixture's (lambda/jobs/<name>/local.ts); a job
// without one is judged on the pipeline's own counts.
import { maxJobAgeMs } from './metricSamples';
import { writeEnvFile } from './envFile';
import { createWriteStream, mkdirSync, renameSync, type WriteStream, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { DownstreamQuota, SeededDemo } from './fixture';
import { LocalSession, type JobState } from './session';
import type { Ports } from './stack';
import { UNKNOWN_TYPE_REASON } from './plan';
import {
  buildRunReport,
  formatReport,
  formatTable,
  type JobObservation,
  RecordFailureLog,
  type RunReport,
} from './report';

export interface RunOptions {
  /**
   * The environment synthesized (`-c env=<env>`) and its stack `PacedJobs-<env>`.
   * @default "dev" in this repository, none in a team's app
   */
  env?: string;
  /** The stack holding the jobs, where several do. @default the one stack with jobs */
  stack?: string;
  /** The CDK app's folder (where cdk.json lives). */
  cwd: string;
  /** @default "cdk.out" */
  assemblyDir?: string;
  /** Where endpoints.json and logs/ go. @default ".local" */
  localDir?: string;
  /** Re-synthesize even when the assembly has the stack. */
  synth?: boolean;
  serve: boolean;
  /** Fire every schedule once at start (always true for a demo run). */
  now: boolean;
  /** Business date for the fired cycle; default: what the schedule would compute now. */
  date?: string;
  json: boolean;
  /** Demo records to seed, by job name; a job not named gets its fixture's `defaultCount`. @default {} */
  counts?: Record<string, number>;
  dataDir?: string;
  ports: Ports;
  /** Give up waiting for the run to settle after this long. @default 180 */
  timeoutSeconds?: number;
  /** Execution environments loaded per function before the run, at most. @default each function's concurrency */
  prewarm?: number;
  /** Print function logs to stderr as well as to .local/logs. @default false */
  verbose?: boolean;
  /** Enforce IAM from the template; false (`--no-iam`) warns on every report. @default true */
  iam?: boolean;
  /** The share of asynchronous events delivered twice, as Lambda's at-least-once async queue may. */
  asyncDuplicateRate?: number;
  /** Every job's fake downstream: its quota (default: the job's effective rate and concurrency) and port by job. */
  downstream?: { quota?: Partial<DownstreamQuota>; ports?: Record<string, number> };
  /** With `serve`: also serve the web console on 127.0.0.1 (console/server.ts). @default true */
  console?: boolean;
  /** The console's port. @default a free one */
  consolePort?: number;
  /** Where a demo run writes its HTML report with charts. @default "<localDir>/report.html" */
  reportFile?: string;
}

export interface RunIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  /** Resolves when the user asks to stop (Ctrl-C) in serve mode. */
  stopSignal: Promise<void>;
}

/**
 * What a run shows beside its terminal report, supplied by the command that runs it (cli/start.ts gives the web
 * console's and the charts', console/localRun.ts): the local runtime knows neither. A view not given is left out.
 */
export interface RunViews {
  /** With `serve`: starts the web console of the serving session, before its endpoints file exists. */
  startConsole?(session: LocalSession, port: number | undefined, say: (line: string) => void): Promise<LocalConsole>;
  /** A demo run's charts as one HTML file at `file`; resolves to its path. */
  writeCharts?(
    session: LocalSession,
    report: RunReport,
    file: string,
    run: { started: number; businessDate: string },
  ): Promise<string>;
}

/** The web console of a serving session, listening before the stack's endpoints file exists. */
export interface LocalConsole {
  /** Its address, without its token (endpoints.json lists this one). */
  url: string;
  /** Its address with the session token: printed on the terminal only. */
  tokenUrl: string;
  /** Gives the console its data: the stack as `ops --local` finds it in this endpoints file. */
  load(endpointsFile: string): void;
  close(): Promise<void>;
}

export class RunError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'RunError';
  }
}

/** The failure reason of a message SQS moved itself (the consumer sets one on every message it dead-letters). */
const MOVED_BY_SQS = 'no failureReason: moved by SQS after maxReceiveCount receives';
/** Dead letters read per job for the report's reasons. */
const DLQ_REASONS_READ = 10;

export async function runLocal(options: RunOptions, io: RunIo, views: RunViews = {}): Promise<number> {
  const started = Date.now();
  const say = (line: string) => io.stderr.write(`${line}\n`);
  const cwd = resolve(options.cwd);
  const localDir = resolve(cwd, options.localDir ?? '.local');
  const logs = new RunLogs(join(localDir, 'logs'), (source, line) => {
    if (options.verbose || source === 'provision') say(`[${source}] ${line}`);
  });

  let session: LocalSession | undefined;
  let exitCode = 0;
  try {
    session = await LocalSession.open({
      cwd,
      env: options.env,
      stack: options.stack,
      assemblyDir: options.assemblyDir,
      synth: options.synth,
      dataDir: options.dataDir,
      ports: options.ports,
      iam: options.iam,
      asyncDuplicateRate: options.asyncDuplicateRate,
      log: (source, line) => logs.write(source, line),
      downstream: (job) => ({ quota: options.downstream?.quota, port: options.downstream?.ports?.[job] }),
      // Warmed below, to say how long loading the code took.
      prewarm: false,
    });
    const { plan } = session.stack;
    say(
      `local stack ${plan.stackName} is up: ${plan.queues.length} queues, ${plan.tables.length} tables, ${plan.functions.length} functions, ${plan.schedules.length} schedules (ignored: ${plan.ignored.length} IAM/logging/monitoring resources)`,
    );
    if (plan.notEmulated.length > 0) say(notEmulatedLine(plan.notEmulated));
    const counts = demoCounts(session, options.counts ?? {});
    const warmStarted = Date.now();
    await session.stack.prewarm(options.prewarm);
    say(`loaded the functions' code (${((Date.now() - warmStarted) / 1000).toFixed(1)} s)`);
    if (options.serve) return await serve(session, counts, { options, io, views, localDir, say });
    writeEndpoints(localDir, session);

    const { businessDate, seeded } = await seedAndFire(session, counts, options, say, () => session!.startConsumers());
    const settled = await waitUntilSettled(session, options, io);
    // A team's app has no environment: the report names its stack instead.
    const report = await collectReport(session, seeded, {
      env: options.env,
      stack: session.artifact.stackName,
      businessDate,
      settled,
      started,
      keptData: options.dataDir !== undefined,
      recordFailures: logs.recordFailures,
    });
    if (options.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else io.stdout.write(`${formatReport(report)}\n`);
    if (views.writeCharts) {
      const reportFile = await views.writeCharts(
        session,
        report,
        options.reportFile ? resolve(cwd, options.reportFile) : join(localDir, 'report.html'),
        { started, businessDate },
      );
      // With --json stdout is the one document; the path is for the person at the terminal.
      (options.json ? io.stderr : io.stdout).write(`charts of the run: ${reportFile}\n`);
    }
    exitCode = report.ok ? 0 : 1;
  } finally {
    await session?.close();
    await logs.close();
  }
  return exitCode;
}

/** `--serve`: the stack with its schedules live (and the web console, when the views have one) until Ctrl-C. */
async function serve(
  session: LocalSession,
  counts: Map<string, number>,
  run: { options: RunOptions; io: RunIo; views: RunViews; localDir: string; say: (line: string) => void },
): Promise<number> {
  const { options, io, views, localDir, say } = run;
  // The console listens before endpoints.json is written, so the file names it from its first version on; its data
  // comes from that file, as `ops --local` reads it.
  const web = options.console === false ? undefined : await views.startConsole?.(session, options.consolePort, say);
  try {
    const endpointsFile = writeEndpoints(localDir, session, web ? { console: { url: web.url } } : {});
    web?.load(endpointsFile);
    say(`serving; endpoints in ${endpointsFile}. Ctrl-C to stop.`);
    if (web) {
      say(`console: ${web.tokenUrl}`);
      say(
        `  (the token in that URL is the key to the console's API: endpoints.json lists the console without it; the page keeps it for its tab only)`,
      );
    }
    if (options.now) await seedAndFire(session, counts, options, say);
    session.startConsumers();
    session.stack.scheduler.start();
    for (const s of session.stack.scheduler.list())
      say(`schedule ${s.schedule.name}: ${s.state}${s.nextFire ? `, next ${s.nextFire.toISOString()}` : ''}`);
    await io.stopSignal;
    say('stopping');
  } finally {
    await web?.close();
  }
  return 0;
}

/**
 * The run's logs: a file per source in `dir` (each line timestamped), the consumers' failed-record lines kept for the
 * report's record errors (the batch processor catches what apply throws), and each line offered to `echo`.
 */
export class RunLogs {
  public readonly recordFailures = new RecordFailureLog();
  private readonly files = new Map<string, WriteStream>();

  constructor(
    private readonly dir: string,
    private readonly echo: (source: string, line: string) => void = () => undefined,
  ) {
    mkdirSync(dir, { recursive: true });
  }

  write(source: string, line: string): void {
    this.recordFailures.observe(source, line);
    let file = this.files.get(source);
    if (!file) {
      file = createWriteStream(join(this.dir, `${source.replace(/[^A-Za-z0-9_.-]/g, '_')}.log`), { flags: 'a' });
      this.files.set(source, file);
    }
    file.write(`${new Date().toISOString()} ${line}\n`);
    this.echo(source, line);
  }

  /** Resolves once every file is flushed and closed. */
  async close(): Promise<void> {
    await Promise.all([...this.files.values()].map((f) => new Promise((r) => f.end(r))));
  }
}

/**
 * The one line that names what the local stack left out because it cannot create it and no job needs it (a team's
 * other resources), with the reason when it is not just the type.
 */
export function notEmulatedLine(resources: readonly { logicalId: string; type: string; reason: string }[]): string {
  const items = resources.map(
    (r) => `${r.logicalId} (${r.type}${r.reason === UNKNOWN_TYPE_REASON ? '' : `: ${r.reason}`})`,
  );
  return `not emulated, no job needs them: ${items.join(', ')}`;
}

/**
 * Demo records per job: the count asked for, else the fixture's default. A count for a job the stack does not have,
 * or for a job with no fixture to seed it, is an error that names the job.
 */
function demoCounts(session: LocalSession, asked: Record<string, number>): Map<string, number> {
  for (const [name, n] of Object.entries(asked)) {
    if (!Number.isSafeInteger(n) || n < 0) throw new RunError(`--count ${name}=${n}: a count must be a whole number`);
    const job = session.jobs.get(name);
    if (!job)
      throw new RunError(
        `--count names job "${name}", which the stack does not have (jobs: ${[...session.jobs.keys()].join(', ') || 'none'})`,
      );
    if (!job.fixture && n > 0)
      throw new RunError(
        `--count ${name}=${n}: job ${name} has no local fixture (${job.fixtureFile}) to seed demo records with`,
      );
  }
  return new Map([...session.jobs.values()].map((j) => [j.name, asked[j.name] ?? j.fixture?.defaultCount ?? 0]));
}

/** Seeds each job's demo records and fires one cycle of every job; returns the business date used and what was seeded. */
async function seedAndFire(
  session: LocalSession,
  counts: Map<string, number>,
  options: RunOptions,
  say: (line: string) => void,
  beforeFire?: () => void,
): Promise<{ businessDate: string; seeded: Map<string, SeededDemo> }> {
  const now = new Date();
  const names = [...session.jobs.keys()];
  const dates = new Set(names.map((name) => options.date ?? session.businessDateFor(name, now)));
  if (dates.size > 1)
    say(`note: jobs compute different default business dates (${[...dates].join(', ')}); the demo uses the first`);
  const businessDate = [...dates][0] ?? options.date ?? now.toISOString().slice(0, 10);
  const seeded = new Map<string, SeededDemo>();
  for (const name of names) seeded.set(name, await session.seed(name, counts.get(name) ?? 0, businessDate));
  say(`seeded business date ${businessDate}: ${[...seeded].map(([name, s]) => `${name} ${s.summary}`).join('; ')}`);
  beforeFire?.();
  for (const job of session.jobs.values()) {
    if (!job.scheduleName) continue;
    await session.fire(job.name, { scheduledTime: now, businessDate });
    say(`fired ${job.scheduleName} for ${job.name}`);
  }
  return { businessDate, seeded };
}

/** Waits for the session to settle, showing progress: a live table on a terminal, a line per job every 5 s otherwise. */
async function waitUntilSettled(session: LocalSession, options: RunOptions, io: RunIo): Promise<boolean> {
  // Ctrl-C during a demo run stops waiting; the report then says the run did not settle.
  let interrupted = false;
  void io.stopSignal.then(() => (interrupted = true));
  const tty = io.stderr.isTTY === true && !options.verbose;
  let printedLines = 0;
  let lastPlain = 0;
  const onPoll = (states: Map<string, JobState>) => {
    const rows = [...states].map(([name, s]) => progressRow(session, name, s));
    if (tty) {
      const table = formatTable(
        [
          'job',
          'discovered',
          'published',
          'in flight',
          'completed',
          'duplicates',
          'retries',
          '429s',
          'deferred',
          'rejected',
          'dlq',
          'oldest',
        ],
        rows,
      );
      if (printedLines > 0) io.stderr.write(`\x1b[${printedLines}A\x1b[J`);
      io.stderr.write(`${table}\n`);
      printedLines = table.split('\n').length;
    } else if (Date.now() - lastPlain >= 5000) {
      lastPlain = Date.now();
      for (const r of rows)
        io.stderr.write(
          `progress ${r[0]}: discovered ${r[1]} published ${r[2]} in-flight ${r[3]} completed ${r[4]} duplicates ${r[5]} retries ${r[6]} 429s ${r[7]} deferred ${r[8]} rejected ${r[9]} dlq ${r[10]} oldest ${r[11]}\n`,
        );
    }
  };
  return session.settle({
    deadline: Date.now() + (options.timeoutSeconds ?? 180) * 1000,
    onPoll,
    interrupted: () => interrupted,
  });
}

function progressRow(session: LocalSession, name: string, s: JobState): (string | number)[] {
  const job = session.job(name);
  const stats = job.mapping?.statistics;
  const outstanding = s.queue.visible + s.queue.inFlight;
  const oldest =
    stats?.oldestSentTimestamp && outstanding > 0
      ? `${Math.round((Date.now() - stats.oldestSentTimestamp) / 1000)}s`
      : '-';
  return [
    name,
    s.ledger.discovered,
    s.ledger.published,
    s.queue.inFlight,
    s.ledger.completed,
    s.ledger.duplicates,
    stats?.failed ?? 0,
    // 429s are the fake downstream's to count; a job whose downstream is AWS sees its throttles only as deferrals.
    job.downstream ? job.downstream.throttled : '-',
    s.ledger.deferred,
    s.ledger.rejected,
    s.dlq.total,
    oldest,
  ];
}

/**
 * What a run observed of one job at its end, for the report: the ledger's counts, the DLQ (and a look at why), the
 * effects its fixture (or the pipeline's own record) saw, IAM's denials and the functions' errors.
 */
export async function observeJob(
  session: LocalSession,
  name: string,
  seeded: SeededDemo | undefined,
  extra: { maxJobAgeMs?: number; keptData?: boolean; recordFailures?: RecordFailureLog } = {},
): Promise<JobObservation> {
  const job = session.job(name);
  const ledger = await session.ledgerTotals(name);
  const dlq = await session.depth(job.dlqUrl);
  // A look at up to 10 dead letters; the run is over, so a receive changes nothing that matters.
  const dlqReasons =
    dlq.total > 0
      ? (await session.readQueue(job.dlqUrl, 60, DLQ_REASONS_READ)).map(
          (m) => m.attributes.failureReason ?? MOVED_BY_SQS,
        )
      : [];
  const effects = await session.effects(name, seeded ?? { expectedOperations: [], summary: 'not seeded' });
  return {
    discovered: ledger.discovered,
    published: ledger.published,
    completed: ledger.completed,
    completedElsewhere: ledger.completedElsewhere,
    rejected: ledger.rejected,
    duplicates: ledger.duplicates,
    deferred: ledger.deferred,
    dlq: dlq.total,
    dlqReasons,
    effectsByOperation: effects.effectsByOperation,
    effectsByItem: effects.effectsByItem,
    expectedItems: effects.expectedItems,
    unexpectedEffects: effects.unexpectedEffects,
    effectsSource: effects.source,
    starts: effects.starts,
    // A downstream that cannot tell (AWS itself) leaves throttles to the consumer's own count.
    throttled: effects.throttled ?? ledger.throttled,
    rateLimit: job.settings.rateLimit,
    maxJobAgeMs: extra.maxJobAgeMs,
    keptData: extra.keptData,
    denials: session.denials(name),
    iamEnforced: session.stack.iam.enforced,
    functionErrors: session.functionErrors(name),
    recordFailures: extra.recordFailures?.summary(job.consumer?.name),
    // Where a job without a fixture should get one: beside its entry, as the session found (or would find) it.
    fixtureFile: job.fixtureFile,
  };
}

async function collectReport(
  session: LocalSession,
  seeded: Map<string, SeededDemo>,
  run: {
    env?: string;
    stack: string;
    businessDate: string;
    settled: boolean;
    started: number;
    keptData: boolean;
    recordFailures?: RecordFailureLog;
  },
): Promise<RunReport> {
  const observations = new Map<string, JobObservation>();
  for (const job of session.jobs.values()) {
    observations.set(
      job.name,
      await observeJob(session, job.name, seeded.get(job.name), {
        maxJobAgeMs: maxJobAgeMs(session.metrics.samples(), job.name),
        keptData: run.keptData,
        recordFailures: run.recordFailures,
      }),
    );
  }
  return buildRunReport({
    // A team's app has no environment: the report names its stack (this repository's names both).
    ...(run.env !== undefined ? { env: run.env } : {}),
    stack: run.stack,
    businessDate: run.businessDate,
    settled: run.settled,
    durationMs: Date.now() - run.started,
    jobs: observations,
    warnings: session.warnings(),
  });
}

/**
 * `.local/endpoints.json`: everything a client (the AWS CLI, the ops CLI, a script) needs to use the local stack; and
 * `.local/env.sh` beside it, its `environment` for a shell (local/envFile.ts).
 */
export function writeEndpoints(
  localDir: string,
  session: LocalSession,
  extra: { console?: { url: string } } = {},
): string {
  const { stack } = session;
  const file = join(localDir, 'endpoints.json');
  const doc = {
    stackName: stack.plan.stackName,
    // Where `ops --local` finds each job's code (preflight loads it): a team's app keeps its assembly where it chose.
    templateFile: resolve(session.artifact.templateFile),
    region: stack.region,
    accountId: stack.plan.accountId,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    endpoints: serviceEndpoints(session),
    ...stackResources(stack),
    jobs: jobResources(session),
    outputs: stack.plan.outputs,
    // The web console (npm start -- --serve), without its token: that is printed on the terminal only.
    ...(extra.console ? { console: extra.console } : {}),
    environment: clientEnvironment(session),
  };
  mkdirSync(localDir, { recursive: true });
  // The shell's copy of `environment` first: a client that waits for endpoints.json then finds env.sh beside it.
  writeEnvFile(localDir, doc.environment);
  // Written whole then renamed, so a client polling for the file never reads half of it.
  writeFileSync(`${file}.tmp`, `${JSON.stringify(doc, null, 2)}\n`);
  renameSync(`${file}.tmp`, file);
  return file;
}

/** Each service's endpoint, and each job's fake downstream (the stand-in for its non-AWS API), by job name. */
function serviceEndpoints(session: LocalSession) {
  const { endpoints } = session.stack;
  const downstreams = Object.fromEntries(
    [...session.jobs.values()].flatMap((j) => (j.downstream ? [[j.name, j.downstream.endpoint]] : [])),
  );
  return {
    dynamodb: endpoints.dynamodb,
    sqs: endpoints.sqs,
    s3: endpoints.s3,
    secretsmanager: endpoints.secretsManager,
    lambda: endpoints.lambda,
    scheduler: endpoints.scheduler,
    sns: endpoints.sns,
    cloudwatch: session.metrics.endpoint,
    downstreams,
  };
}

/** The stack's resources by logical ID (event source mappings by UUID), with the names and ARNs a client uses. */
function stackResources(stack: LocalSession['stack']) {
  const { plan } = stack;
  return {
    queues: Object.fromEntries(
      plan.queues.map((q) => [
        q.logicalId,
        {
          name: q.name,
          url: q.url,
          arn: q.arn,
          deadLetterTargetArn: q.deadLetterTargetArn,
          maxReceiveCount: q.maxReceiveCount,
        },
      ]),
    ),
    tables: Object.fromEntries(plan.tables.map((t) => [t.logicalId, t.name])),
    buckets: Object.fromEntries(plan.buckets.map((b) => [b.logicalId, b.name])),
    secrets: Object.fromEntries(plan.secrets.map((s) => [s.logicalId, { name: s.name, arn: s.arn }])),
    functions: Object.fromEntries(plan.functions.map((f) => [f.logicalId, { name: f.name, arn: f.arn }])),
    schedules: Object.fromEntries(
      plan.schedules.map((s) => [
        s.logicalId,
        { name: s.name, arn: s.arn, expression: s.expression, timeZone: s.timeZone },
      ]),
    ),
    eventSourceMappings: Object.fromEntries(
      stack.mappings.map((m) => [m.uuid, { functionName: m.config.functionName, queueArn: m.config.queueArn }]),
    ),
  };
}

/** Each job's functions, queues, schedule and mappings, by job name. */
function jobResources(session: LocalSession) {
  return Object.fromEntries(
    [...session.jobs.values()].map((j) => [
      j.name,
      {
        producer: j.producer?.name,
        consumer: j.consumer?.name,
        queueUrl: j.queueUrl,
        queueArn: j.queueArn,
        dlqUrl: j.dlqUrl,
        dlqArn: j.dlqArn,
        schedule: j.scheduleName,
        eventSourceMapping: j.mapping?.uuid,
        admissionQueueUrl: j.admissionQueueUrl,
        admissionMapping: j.admissionMapping?.uuid,
      },
    ]),
  );
}

/** The environment an AWS SDK or the AWS CLI reads to reach the local stack. */
function clientEnvironment(session: LocalSession) {
  const { region, endpoints } = session.stack;
  return {
    AWS_REGION: region,
    AWS_ACCESS_KEY_ID: 'S3RVER',
    AWS_SECRET_ACCESS_KEY: 'S3RVER',
    AWS_ENDPOINT_URL_DYNAMODB: endpoints.dynamodb,
    AWS_ENDPOINT_URL_SQS: endpoints.sqs,
    AWS_ENDPOINT_URL_S3: endpoints.s3,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoints.secretsManager,
    AWS_ENDPOINT_URL_LAMBDA: endpoints.lambda,
    AWS_ENDPOINT_URL_SCHEDULER: endpoints.scheduler,
    AWS_ENDPOINT_URL_SNS: endpoints.sns,
    AWS_ENDPOINT_URL_CLOUDWATCH: session.metrics.endpoint,
  };
}
