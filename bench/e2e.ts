// Benchmark (`npm run bench`), the whole pipeline: opens a LocalSession (local/session.ts: the synthesized stack on the
// embedded servers, every job with its fixture and fake downstream), runs one cycle of every job (each paced at its
// configured rate, time-scaled where that would take too long; or pacing off) with the demo records its fixture seeds,
// and counts every AWS request the pipeline makes, per job and in all; then measures the emulators' own ceiling
// (receive + delete, conditional writes) in the same process, to read the jobs/s against. It names no job.
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { relative, resolve } from 'node:path';
import { CreateTableCommand, DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { appEnv, ensureAppStack } from '../local/assembly';
import {
  fixturePath,
  loadFixture,
  maxInAnyWindow,
  type DownstreamOptions,
  type JobFixture,
  type SeededDemo,
} from '../local/fixture';
import { jobViews, previewPlan, type JobView } from '../local/jobs';
import { LOCAL_CREDENTIALS, startDynamoDb, startSqs, type ObservedRequest } from '../local/servers';
import { LocalSession, SESSION_USER_AGENT, type SessionJob } from '../local/session';
import type { EventSourceMappingStats } from '../local/eventSourceMapping';
import type { StackPlan } from '../local/plan';
import { loadTemplate, type CloudFormationTemplate } from '../local/template';
import { mapBounded } from '../lambda/adapters/sqsPublisher';
import { admissionGroupSize } from '../lambda/core/admission';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import { parseMessage } from '../lambda/core/message';
import { pacingSettings, safetyMarginMs as safetyMarginFor } from '../lambda/core/pacingSettings';
import { accessKeyOf } from '../local/iamWiring';
import {
  actionOf,
  DYNAMO_READ_ACTIONS,
  DYNAMO_WRITE_ACTIONS,
  limiterItemKind,
  type CountedRequest,
} from './countingProxy';
import { defaultCountOf, warmUpCountOf } from './counts';
import {
  batchedFigures,
  checkGoals,
  limiterFigures,
  slotWaitGbSeconds,
  type GoalCheck,
  type LimiterFigures,
  type PerJobFigures,
  type RunCounts,
  type TimedInvocation,
} from './perJob';
import type { Architecture } from './prices';
import { effectFigures, itemEffectFigures, type EffectFigures, type ItemEffectFigures } from './runEffects';

/** Consumer executions per job in the bench run (the template's MaximumConcurrency is 5 to 10). */
export const DEFAULT_BENCH_CONSUMER_CONCURRENCY = 2;

/**
 * Every fake downstream in the bench answers at once and never throttles: the run measures the pipeline, not a
 * provider's quota (the pacing is the job's own, from its settings).
 */
export const BENCH_DOWNSTREAM: DownstreamOptions = {
  quota: { startsPerWindow: 1_000_000_000, windowSeconds: 60, maxConcurrent: 10_000 },
  latencyMs: 1,
};

export class E2eBenchError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'E2eBenchError';
  }
}

export interface E2eOptions {
  /** The CDK app's folder (cdk.json; each job's fixture is the local.ts beside its entry). */
  cwd: string;
  /** @default "cdk.out" */
  assemblyDir?: string;
  /** The environment synthesized (`-c env=<env>`). @default "dev" in this repository, none in a team's app */
  env?: string;
  /** The stack holding the jobs, where several of the app's stacks do. @default the one that does */
  stack?: string;
  /**
   * Demo records per job, by job name (its fixture seeds them); 0 leaves the job out of the run. @default for a job
   * not named: DEFAULT_COUNT_MULTIPLE times its fixture's defaultCount (bench/counts.ts); a job without a fixture seeds
   * nothing and runs on what its own resources hold
   */
  counts?: Record<string, number>;
  /**
   * `configured`: every job paced at its own configured rate (JOB_SETTINGS as synthesized), time-scaled per
   * `maxPacedSeconds` and `intervalSeconds`. `off`: every job's `pacing: false` (no shared limiter, no admission, only
   * the concurrency cap), so the counts are the pipeline's own and the jobs/s is bound by the emulators.
   * @default "configured"
   */
  pacing?: 'configured' | 'off';
  /** Pace every job at this many starts per minute (60 s interval, burst 1) instead of its configured rate; unscaled. */
  ratePerMinute?: number;
  /**
   * Configured pacing: a job whose seeded operations would take longer than this at its configured rate runs with its
   * time scaled (a shorter rate-limit interval, and the admission horizon and the short wait shortened alike) so that it
   * takes about this long. @default no limit (every job at its real rate)
   */
  maxPacedSeconds?: number;
  /** Configured pacing: run these jobs (by name) at this rate-limit interval, in seconds; wins over maxPacedSeconds. */
  intervalSeconds?: Record<string, number>;
  /** Treat these jobs (by name) as configured at this effective rate (burst 1) instead of the synthesized one, before any scaling. */
  rateLimits?: Record<string, { startsPerInterval: number; intervalSeconds: number }>;
  /** False removes `admission` from every job's JOB_SETTINGS: the producer publishes every page at once. @default true */
  admission?: boolean;
  /** Run only these jobs (seed and fire only theirs). @default every job */
  jobs?: string[];
  /** Event source MaximumConcurrency per job, overriding the template's (fewer workers contend less for 2 cores). @default 2 */
  consumerConcurrency?: number;
  /** Give up when the run has not settled by then. @default 300 */
  timeoutSeconds?: number;
  progress?: (line: string) => void;
  /** Function output and runtime notes. @default dropped */
  log?: (source: string, line: string) => void;
}

/** How one job was paced in the run. */
export interface JobPacing {
  /** Effective starts per configured interval (after headroom), as synthesized or as `ratePerMinute` set it. */
  startsPerInterval: number;
  configuredIntervalSeconds: number;
  /** The interval the run used: shorter than configured when time was scaled. */
  runIntervalSeconds: number;
  /** configured / run interval: 1 is the real rate. */
  timeScale: number;
  /** Admission horizon, configured and as run (absent: unlimited admission). */
  horizonSeconds?: { configured: number; run: number };
  /** The consumer's short wait for a slot, configured and as run. */
  shortWaitMs: { configured: number; run: number };
  /** The consumer's event source batching window, configured and as run (absent: none). */
  batchingWindowSeconds?: { configured: number; run: number };
}

export interface JobRunFigures {
  /** What one of the job's demo records is called (its fixture's unit); absent for a job without a fixture. */
  unit?: string;
  operations: number;
  acknowledged: number;
  failed: number;
  /** Receives of the job's messages by its consumer (acknowledged + failed): per operation, 1 means no deferral. */
  deliveries: number;
  invocations: { producer: number; consumer: number };
  /** Producer and consumer duration times memory, as measured in this run (at its time scale). */
  gbSeconds: number;
  /**
   * The GB-seconds at the configured rate: the measured ones plus the slot waits (estimated from the job's starts:
   * its fake downstream's arrivals, or the consumer's logged apply starts) grown by the time scale. Equal to gbSeconds
   * when unscaled; undefined when scaled but no start of the job was observed.
   */
  gbSecondsAtRealRate?: number;
  /** Undefined: pacing off. */
  pacing?: JobPacing;
  /** Messages in the job's DLQ once the run settled. */
  deadLettered: number;
  /** First operation published to the job's last acknowledgement. */
  seconds: number;
  /** What this job's requests came to: SQS by the job's queues, DynamoDB by the job's functions, its invocations. */
  counts: RunCounts;
  /** This job's requests per operation, and the per-job goals checked on them. */
  perJob: PerJobFigures;
  goals: GoalCheck[];
  /** Effects per seeded operation in the measured cycle (exactly once is the goal). */
  effects: EffectFigures;
  /** Whose reading the effects are: the job's fixture (the downstream's own) or the pipeline's record (no fixture). */
  effectsSource: 'fixture' | 'pipeline';
  /** Where one operation touches several items (the fixture says which): each item touched once is the goal. */
  itemEffects?: ItemEffectFigures;
  /** Requests the job's fake downstream answered 429; absent when it cannot tell (effects on AWS). */
  throttled?: number;
  /** Paced: the job's most starts in any window of the run interval, next to the allowance (`pacing.startsPerInterval`). */
  maxStartsInAnyInterval?: number;
  /** The limiter table's writes, lost races and reads: by item kind, and the slots item's per consumer invocation. */
  limiter?: LimiterFigures;
}

export interface E2eResult {
  counts: RunCounts;
  pacing: 'configured' | 'off' | 'fixed';
  /** Set for `fixed`. */
  ratePerMinute: number | undefined;
  admission: boolean;
  consumerConcurrency: number;
  seconds: number;
  jobsPerSec: number;
  /** Messages the event sources left on the queue (failed): 0 in a clean run. */
  failedMessages: number;
  /** Messages in the jobs' DLQs once the run settled. */
  deadLettered: number;
  perJobName: Record<string, JobRunFigures>;
  /** DynamoDB requests by "role action status": how many, and the units they consumed (what dominates the overhead). */
  dynamoRequests: Record<string, { requests: number; units: number }>;
  /** SQS requests the functions and event sources made, by action (the session's own depth polls left out). */
  sqsRequests: Record<string, number>;
  /** Where the measured run's CPU went, by process (Linux only): what bounds jobs/s on a machine of few cores. */
  cpu?: CpuFigures;
}

type TableRole = 'idempotency' | 'ledger' | 'limiter' | 'business';

/** Units one counted DynamoDB request consumed. A refused conditional write reports none locally; AWS bills it 1. */
function unitsOf(r: CountedRequest): number {
  return r.capacityUnits ?? (r.status >= 400 ? 1 : 0);
}

/**
 * The shortest rate-limit interval (whole seconds) a job can be time-scaled to and still behave as at its configured
 * rate. The producer makes each group of one event-source batch visible at the group's first slot, but SQS delays are
 * whole seconds: once a group's slots span less than a second, several groups become visible in the same second, the
 * event source hands them to several consumers at once, and the later ones defer what the earlier ones hold the slots
 * for. No such bunching happens at the real rate (a group spans 7.5 s at 80 starts/min), so a faster run would measure
 * the scaling, not the design. A group spans `group / rate` seconds; scaled by k it must stay at least 1 s.
 */
export function shortestFaithfulIntervalSeconds(settings: JobRuntimeSettings): number {
  const { startsPerInterval, intervalSeconds } = settings.rateLimit;
  // Without admission (the settings as synthesized always have it) every message is its own group.
  const group = admissionGroupSize(
    settings.admission?.batchSize ?? 1,
    startsPerInterval / intervalSeconds,
    pacingSettings(settings).shortWaitMs,
  );
  return Math.min(intervalSeconds, Math.max(1, Math.ceil(startsPerInterval / group)));
}

/**
 * The rate-limit interval (whole seconds, as JOB_SETTINGS requires) that runs `operations` at the job's rate in about
 * `maxSeconds`: the configured one when that is already short enough, and never below `floorSeconds` (the shortest
 * faithful interval), where the run takes longer than asked rather than measure an artefact.
 */
export function scaledIntervalSeconds(
  rate: { startsPerInterval: number; intervalSeconds: number },
  operations: number,
  maxSeconds: number,
  floorSeconds = 1,
): number {
  const seconds = (operations * rate.intervalSeconds) / rate.startsPerInterval;
  if (seconds <= maxSeconds) return rate.intervalSeconds;
  return Math.min(
    rate.intervalSeconds,
    Math.max(floorSeconds, 1, Math.floor((rate.intervalSeconds * maxSeconds) / seconds)),
  );
}

/**
 * The least safety margin a time-scaled run keeps: 20 ms let the provider count 81 starts in a window of 80 (stop 44's
 * runs); 50 held 80 of 80 in every paced run of a full `npm run bench`.
 */
export const SCALED_RUN_MARGIN_MS = 50;

/**
 * A job's settings with time scaled to `runIntervalSeconds`: the rate-limit interval, and by the same factor the
 * admission horizon, the consumer's short wait and its event source's batching window (whole seconds, at least 1), so
 * that what is measured in counts (deliveries, requests) is what the configured rate would give. Not scalable, and so
 * left as they are: SQS delays (whole seconds: at a large scale, groups the producer spaces apart become visible in
 * the same second), the deferral backoff, the limiter's safety margin (at least SCALED_RUN_MARGIN_MS, set in the run's
 * pacing block: a start's jitter is real time whatever the scale).
 */
export function scaleJobSettings(
  settings: JobRuntimeSettings,
  runIntervalSeconds: number,
  batchingWindowSeconds = 0,
): { settings: JobRuntimeSettings; pacing: JobPacing } {
  const configured = settings.rateLimit.intervalSeconds;
  const timeScale = configured / runIntervalSeconds;
  const shortWait = pacingSettings(settings).shortWaitMs;
  // The short wait covers one batch's slots plus slack for what takes real time whatever the scale (the batching
  // window, the event source's polls, an invocation): the slots shrink with the scale, the slack does not, or a
  // compressed run would leave a batch a tenth of its lead and defer what the real rate starts on time.
  const batchSpanMs = settings.admission
    ? ((settings.admission.batchSize - 1) * configured * 1000) / settings.rateLimit.startsPerInterval
    : shortWait;
  const slackMs = Math.max(0, shortWait - batchSpanMs);
  const runShortWait = Math.min(
    shortWait,
    Math.max(1, Math.round(Math.min(batchSpanMs, shortWait) / timeScale + slackMs)),
  );
  // The margin absorbs a start's jitter (its wake, its claim, its request's way), which the scale does not shrink.
  // Derived from the run's interval it fell to the 20 ms floor (a 60 s window scaled to 4 s), below what this machine's
  // loaded local stack takes: the fake provider counted 81 starts in a window of 80. The configured interval's whole
  // margin (250 ms) would be 6% of the scaled window where the real rate pays 0.4%, and the run's slot waits, scaled
  // back to the real rate, would overstate its GB-seconds by as much; so the run keeps SCALED_RUN_MARGIN_MS, or the
  // configured margin when that is less.
  const configuredMarginMs = pacingSettings(settings).limits.safetyMarginMs;
  const safetyMarginMs = Math.min(
    configuredMarginMs,
    Math.max(safetyMarginFor(runIntervalSeconds * 1000), SCALED_RUN_MARGIN_MS),
  );
  const next: JobRuntimeSettings = {
    ...settings,
    rateLimit: { ...settings.rateLimit, intervalSeconds: runIntervalSeconds },
    ...(timeScale === 1 ? {} : { pacing: { ...settings.pacing, shortWaitMs: runShortWait, safetyMarginMs } }),
  };
  let horizonSeconds: JobPacing['horizonSeconds'];
  if (settings.admission) {
    const run = Math.max(1, Math.round(settings.admission.horizonSeconds / timeScale));
    next.admission = { ...settings.admission, horizonSeconds: run };
    horizonSeconds = { configured: settings.admission.horizonSeconds, run };
  }
  return {
    settings: next,
    pacing: {
      startsPerInterval: settings.rateLimit.startsPerInterval,
      configuredIntervalSeconds: configured,
      runIntervalSeconds,
      timeScale,
      horizonSeconds,
      shortWaitMs: { configured: shortWait, run: runShortWait },
      batchingWindowSeconds:
        batchingWindowSeconds > 0
          ? { configured: batchingWindowSeconds, run: Math.max(1, Math.round(batchingWindowSeconds / timeScale)) }
          : undefined,
    },
  };
}

/** Requests counted for one job, or under UNATTRIBUTED for no job (a queue or a function no job owns). */
interface Tally {
  /** SQS requests on the job's queues, by action. */
  sqs: Record<string, number>;
  /** The event sources' receives on the job's queues. */
  receives: { withMessages: number; empty: number };
}

const UNATTRIBUTED = '';

/** One seeded, fired and settled cycle. */
interface Cycle {
  /** Epoch ms the cycle began (before seeding): its effects are the ones from here on. */
  since: number;
  /** Just before the first schedule fired: the ledger batches of the cycle started after it. */
  sinceIso: string;
  /** performance.now() just before the first schedule fired. */
  t0: number;
  /** performance.now() of each job's last acknowledgement. */
  lastAckAt: Map<string, number>;
  seeded: Map<string, SeededDemo>;
  fired: Set<string>;
  /** CPU seconds by process from just before the first schedule fired to the run's settling (undefined off Linux). */
  cpu?: CpuFigures;
}

/**
 * Where the CPU of a measured run went, by process: this one (the local runtime: the servers, the IAM gateways, the
 * event sources, the session), each function's execution environments (summed by function), and any other child
 * process (an emulator run in its own process). Read off /proc, so on Linux only.
 */
export interface CpuFigures {
  /** The window the figures cover: from just before the first schedule fired until the run was seen to settle. */
  wallSeconds: number;
  /** CPU cores this machine offers (os.availableParallelism()). */
  cores: number;
  /** CPU seconds of this process (every thread of it). */
  runtime: number;
  /** CPU seconds of each function's execution environments, by function name. */
  functions: Record<string, number>;
  /** CPU seconds of the other child processes, by what they run (e.g. "dynalite"). */
  others: Record<string, number>;
  /** All of the above. */
  total: number;
}

const basenameOf = (path: string) => path.slice(path.lastIndexOf('/') + 1);

/** CPU seconds (user + system) of this process and of each child, by label; undefined where /proc is not there. */
export function cpuSnapshot(): Map<string, number> | undefined {
  const ticksPerSecond = 100;
  const stat = (pid: string): { ppid: number; seconds: number } | undefined => {
    try {
      const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // The command name is in parentheses and may hold spaces: the fields after it are what is read.
      const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
      return { ppid: Number(fields[1]), seconds: (Number(fields[11]) + Number(fields[12])) / ticksPerSecond };
    } catch {
      return undefined;
    }
  };
  const self = stat('self');
  if (!self) return undefined;
  const out = new Map<string, number>([['runtime', self.seconds]]);
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const pid of pids) {
    const s = stat(pid);
    if (!s || s.ppid !== process.pid) continue;
    let label: string;
    try {
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      const fn = environ.find((e) => e.startsWith('AWS_LAMBDA_FUNCTION_NAME='));
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      // A server process (local/servers.ts) names what it runs in its argument; anything else by its program.
      const server = /"kind":"(\w+)"/.exec(cmdline)?.[1];
      label = fn
        ? `function:${fn.slice('AWS_LAMBDA_FUNCTION_NAME='.length)}`
        : (server ?? (basenameOf(cmdline.split(' ')[0] ?? '') || `pid ${pid}`));
    } catch {
      continue;
    }
    out.set(label, (out.get(label) ?? 0) + s.seconds);
  }
  return out;
}

/** What the CPU came to between two snapshots (a process started in between counts from zero). */
export function cpuBetween(
  before: Map<string, number> | undefined,
  after: Map<string, number> | undefined,
  wallSeconds: number,
): CpuFigures | undefined {
  if (!before || !after) return undefined;
  const figures: CpuFigures = {
    wallSeconds,
    cores: availableParallelism(),
    runtime: 0,
    functions: {},
    others: {},
    total: 0,
  };
  for (const [label, seconds] of after) {
    const used = Math.max(0, seconds - (before.get(label) ?? 0));
    if (label === 'runtime') figures.runtime = used;
    else if (label.startsWith('function:')) figures.functions[label.slice('function:'.length)] = used;
    else figures.others[label] = used;
    figures.total += used;
  }
  return figures;
}

/** The queue a request names (JSON protocol QueueUrl, a query-protocol form field, or the request path), by its name. */
function queueNameOf(r: ObservedRequest): string | undefined {
  let url: string | undefined;
  try {
    const json = JSON.parse(r.body) as { QueueUrl?: unknown };
    if (typeof json.QueueUrl === 'string') url = json.QueueUrl;
  } catch {
    // A query-protocol body is form-encoded.
    url = new URLSearchParams(r.body).get('QueueUrl') ?? undefined;
  }
  return lastSegment(url ?? r.url);
}

const lastSegment = (url: string | undefined): string | undefined =>
  url?.split('?')[0].split('/').filter(Boolean).pop();

export async function runE2eBench(options: E2eOptions): Promise<E2eResult> {
  const plan = planRun(options);
  const counts = newRequestCounts(plan.names);
  let session: LocalSession | undefined;
  try {
    session = await openSession(plan, counts, options.log);
    const run: E2eRun = { plan, counts, session };
    instrumentSession(run);
    const driven = await driveCycles(run);
    const perJobName = await measureJobs(run, driven);
    return reportRun(run, driven, perJobName);
  } finally {
    await session?.close();
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Set up: the run planned from the template before any server exists, and the counters the session feeds.

/** What the run is, decided before the local stack starts: its template, its jobs, and each job's settings. */
interface RunPlan {
  progress: (line: string) => void;
  cwd: string;
  env: string | undefined;
  assemblyDir: string;
  timeoutSeconds: number;
  stackName: string;
  /** The stack's template as the run deploys it: consumer concurrency and scaled batching windows set. */
  template: CloudFormationTemplate;
  consumerConcurrency: number;
  mode: E2eResult['pacing'];
  ratePerMinute: number | undefined;
  admission: boolean;
  /** Every job of the stack. */
  names: string[];
  fixtures: Map<string, JobFixture | undefined>;
  /** The jobs the run seeds and fires. */
  selectedNames: string[];
  /** Demo records a job seeds in the measured cycle. */
  countOf: (name: string) => number;
  /** Each job's JOB_SETTINGS for the run (its producer and consumer get the same). */
  runSettings: Map<string, JobRuntimeSettings>;
  /** How each job is paced in the run; none with pacing off. */
  pacingByJob: Map<string, JobPacing>;
}

/** What every phase after the set up shares: the plan, the counters, the open session. */
interface E2eRun {
  plan: RunPlan;
  counts: RequestCounts;
  session: LocalSession;
}

function planRun(options: E2eOptions): RunPlan {
  const progress = options.progress ?? (() => undefined);
  const cwd = resolve(options.cwd);
  const env = appEnv(cwd, options.env);
  const assemblyDir = options.assemblyDir ?? 'cdk.out';
  const consumerConcurrency = options.consumerConcurrency ?? DEFAULT_BENCH_CONSUMER_CONCURRENCY;
  const { artifact, template } = loadRunTemplate(options, { cwd, env, assemblyDir, consumerConcurrency, progress });
  const { ratePerMinute } = options;
  const mode: E2eResult['pacing'] = ratePerMinute !== undefined ? 'fixed' : (options.pacing ?? 'configured');
  const admission = options.admission ?? true;

  // Each job's settings for the run, decided once from a plan of the template before any server exists (the session
  // plans the same template alike); the producer and the consumer of a job get the same.
  const planned = previewPlan(template, artifact.stackName);
  const preview = jobViews(planned);
  const names = [...preview.keys()];
  const fixtures = new Map<string, JobFixture | undefined>(
    names.map((name) => [name, loadFixture(cwd, name, preview.get(name)?.entry)]),
  );
  checkJobNames(options, cwd, preview, fixtures);
  const countOf = (name: string) => options.counts?.[name] ?? defaultCountOf(fixtures.get(name));
  const selectedNames = selectJobs(options, names, fixtures, countOf);
  const { runSettings, pacingByJob } = planJobSettings(options, {
    template,
    planned,
    preview,
    mode,
    admission,
    operationsOf: (name) => (selectedNames.includes(name) ? countOf(name) : 0),
  });
  return {
    progress,
    cwd,
    env,
    assemblyDir,
    timeoutSeconds: options.timeoutSeconds ?? 300,
    stackName: artifact.stackName,
    template,
    consumerConcurrency,
    mode,
    ratePerMinute,
    admission,
    names,
    fixtures,
    selectedNames,
    countOf,
    runSettings,
    pacingByJob,
  };
}

/** The app's stack (synthesized if missing) and its template, each event source at the run's consumer concurrency. */
function loadRunTemplate(
  options: E2eOptions,
  at: {
    cwd: string;
    env: string | undefined;
    assemblyDir: string;
    consumerConcurrency: number;
    progress: (line: string) => void;
  },
) {
  // The session would synthesize a missing assembly too; the bench reads the template first to plan the run.
  const artifact = ensureAppStack({
    env: at.env,
    stack: options.stack,
    assemblyDir: at.assemblyDir,
    cwd: at.cwd,
    log: (line) => at.progress(`e2e: ${line}`),
  });
  const template = loadTemplate(artifact.templateFile);
  for (const resource of Object.values(template.Resources)) {
    if (resource.Type !== 'AWS::Lambda::EventSourceMapping' || !resource.Properties) continue;
    resource.Properties.ScalingConfig = { MaximumConcurrency: at.consumerConcurrency };
  }
  return { artifact, template };
}

/** Refuses counts or jobs that name no job of the stack, and a count for a job without a fixture to seed it. */
function checkJobNames(
  options: E2eOptions,
  cwd: string,
  preview: ReadonlyMap<string, JobView>,
  fixtures: ReadonlyMap<string, JobFixture | undefined>,
): void {
  const names = [...preview.keys()];
  for (const [what, given] of [
    ['counts', Object.keys(options.counts ?? {})],
    ['jobs', options.jobs ?? []],
  ] as const) {
    const unknown = given.filter((n) => !preview.has(n));
    if (unknown.length > 0)
      throw new E2eBenchError(
        `${what} name ${unknown.join(', ')}, not a job of the stack (jobs: ${names.join(', ') || 'none'})`,
      );
  }
  for (const [name, n] of Object.entries(options.counts ?? {})) {
    if (n > 0 && !fixtures.get(name)) {
      throw new E2eBenchError(
        `job ${name} has no local fixture (${relative(cwd, fixturePath(cwd, name, preview.get(name)?.entry))}) to seed ${n} records with`,
      );
    }
  }
}

/** The jobs the run seeds and fires. */
function selectJobs(
  options: E2eOptions,
  names: string[],
  fixtures: ReadonlyMap<string, JobFixture | undefined>,
  countOf: (name: string) => number,
): string[] {
  // A job with a fixture runs when it seeds something; one without runs on what its resources hold, unless given 0.
  const selectedNames = names.filter(
    (name) =>
      (options.jobs === undefined || options.jobs.includes(name)) &&
      (fixtures.get(name) ? countOf(name) > 0 : options.counts?.[name] !== 0),
  );
  if (selectedNames.length === 0)
    throw new E2eBenchError(`nothing to run: every job was left out or given 0 (jobs: ${names.join(', ') || 'none'})`);
  return selectedNames;
}

/**
 * Each job's settings for the run and how it is paced: pacing off, at a fixed rate, or at its configured (or given)
 * rate, time-scaled as the options ask. A scaled job's event source batching window is scaled in the template too.
 */
function planJobSettings(
  options: E2eOptions,
  plan: {
    template: CloudFormationTemplate;
    planned: StackPlan;
    preview: ReadonlyMap<string, JobView>;
    mode: E2eResult['pacing'];
    admission: boolean;
    operationsOf: (name: string) => number;
  },
): { runSettings: Map<string, JobRuntimeSettings>; pacingByJob: Map<string, JobPacing> } {
  const { template, planned, mode } = plan;
  const runSettings = new Map<string, JobRuntimeSettings>();
  const pacingByJob = new Map<string, JobPacing>();
  for (const job of plan.preview.values()) {
    const next: JobRuntimeSettings = structuredClone(job.settings);
    if (!plan.admission) delete next.admission;
    if (mode === 'off') {
      next.pacing = { ...next.pacing, enabled: false };
      runSettings.set(job.name, next);
      continue;
    }
    if (mode === 'fixed') next.rateLimit = { startsPerInterval: options.ratePerMinute!, intervalSeconds: 60, burst: 1 };
    const rate = options.rateLimits?.[job.name];
    if (rate) next.rateLimit = { ...rate, burst: 1 };
    const runInterval = runIntervalOf(options, mode, job, next.rateLimit, plan.operationsOf(job.name));
    const mappingId = planned.mappings.find((m) => m.functionName === job.consumer?.name)?.logicalId;
    const mapping = mappingId === undefined ? undefined : template.Resources[mappingId];
    const scaled = scaleJobSettings(
      next,
      runInterval,
      Number(mapping?.Properties?.MaximumBatchingWindowInSeconds ?? 0),
    );
    runSettings.set(job.name, scaled.settings);
    pacingByJob.set(job.name, scaled.pacing);
    // The batching window is time too: scaled alike (whole seconds, at least 1 when the template has one).
    if (mapping?.Properties && scaled.pacing.batchingWindowSeconds)
      mapping.Properties.MaximumBatchingWindowInSeconds = scaled.pacing.batchingWindowSeconds.run;
  }
  return { runSettings, pacingByJob };
}

/** A paced job's rate-limit interval in the run: as given, scaled to maxPacedSeconds, or its rate's own. */
function runIntervalOf(
  options: E2eOptions,
  mode: E2eResult['pacing'],
  job: JobView,
  rateLimit: JobRuntimeSettings['rateLimit'],
  operations: number,
): number {
  const explicit = options.intervalSeconds?.[job.name];
  return (
    explicit ??
    (mode === 'configured' && options.maxPacedSeconds !== undefined
      ? scaledIntervalSeconds(
          rateLimit,
          operations,
          options.maxPacedSeconds,
          shortestFaithfulIntervalSeconds({ ...job.settings, rateLimit }),
        )
      : rateLimit.intervalSeconds)
  );
}

/**
 * The run's counters. DynamoDB requests are counted as the server saw them (its process reports each one it answered,
 * with the capacity it consumed: the session asks for ConsumedCapacity on every request), by the job of the function
 * that signed it: each function's role session has its own access key, so each job's units are its own though the
 * state tables are shared. A request IAM refused never reached the server, and is not counted (AWS bills none for it
 * either). The session's own requests (seeding, depth and ledger reads) sign with the administrator's key and are left
 * out.
 */
interface RequestCounts {
  /** Set for the measured cycle alone: nothing is counted outside it. */
  on: boolean;
  jobOfAccessKey: Map<string, string>;
  jobOfQueue: Map<string, string>;
  dynamoByJob: Map<string, CountedRequest[]>;
  tallies: Map<string, Tally>;
  /** Every function's invocations while counting: duration and memory, and (time-scaled jobs) the operations they ran. */
  timed: Map<string, TimedInvocation[]>;
}

function newRequestCounts(names: string[]): RequestCounts {
  return {
    on: false,
    jobOfAccessKey: new Map(),
    jobOfQueue: new Map(),
    dynamoByJob: new Map<string, CountedRequest[]>([...names, UNATTRIBUTED].map((name) => [name, []])),
    tallies: new Map(),
    timed: new Map(),
  };
}

function tallyOf(counts: RequestCounts, job: string | undefined): Tally {
  const key = job ?? UNATTRIBUTED;
  let t = counts.tallies.get(key);
  if (!t) counts.tallies.set(key, (t = { sqs: {}, receives: { withMessages: 0, empty: 0 } }));
  return t;
}

/** One DynamoDB request of a function, counted for its job: its action, table, status and consumed capacity. */
function countDynamo(counts: RequestCounts, r: ObservedRequest): void {
  const key = accessKeyOf({ headers: r.headers, url: r.url });
  const job = key === undefined ? undefined : counts.jobOfAccessKey.get(key);
  if (job === undefined) return;
  let request: Record<string, unknown> = {};
  let answer: { ConsumedCapacity?: { CapacityUnits?: number } | { CapacityUnits?: number }[] } = {};
  try {
    request = JSON.parse(r.body) as Record<string, unknown>;
    answer = r.responseBody ? (JSON.parse(r.responseBody) as typeof answer) : {};
  } catch {
    // Not JSON (dynalite refused it as such): still counted, without table or capacity.
  }
  const consumed =
    answer.ConsumedCapacity === undefined
      ? undefined
      : (Array.isArray(answer.ConsumedCapacity) ? answer.ConsumedCapacity : [answer.ConsumedCapacity]).reduce(
          (sum, c) => sum + (c.CapacityUnits ?? 0),
          0,
        );
  const items = request.RequestItems as Record<string, unknown> | undefined;
  counts.dynamoByJob.get(job)!.push({
    service: 'dynamodb',
    action: actionOf(r.headers, r.url, r.body),
    status: r.status,
    table: typeof request.TableName === 'string' ? request.TableName : items ? Object.keys(items)[0] : undefined,
    ...(typeof (request.Key as { pk?: { S?: unknown } } | undefined)?.pk?.S === 'string'
      ? { pk: (request.Key as { pk: { S: string } }).pk.S }
      : {}),
    capacityUnits: consumed,
  });
}

/**
 * One request a local server answered, while counting. Every SQS request reaches the server, the functions' and the
 * event sources' alike: counted there, by the queue it names, leaving out the session's own (its depth polls while
 * settling).
 */
function countRequest(counts: RequestCounts, service: string, r: ObservedRequest): void {
  if (service === 'dynamodb') {
    if (counts.on) countDynamo(counts, r);
    return;
  }
  if (service !== 'sqs' || !counts.on) return;
  if (`${r.headers['user-agent'] ?? ''} ${r.headers['x-amz-user-agent'] ?? ''}`.includes(SESSION_USER_AGENT)) return;
  const action = actionOf(r.headers, r.url, r.body);
  const tally = tallyOf(counts, counts.jobOfQueue.get(queueNameOf(r) ?? ''));
  tally.sqs[action] = (tally.sqs[action] ?? 0) + 1;
}

/** Opens the local stack on the planned template, each job with its run settings, feeding the counters. */
function openSession(plan: RunPlan, counts: RequestCounts, log: E2eOptions['log']): Promise<LocalSession> {
  plan.progress(
    `e2e: starting the local stack (${describePacing(plan.mode, plan.ratePerMinute)}${plan.admission ? '' : ', admission off'})`,
  );
  return LocalSession.open({
    cwd: plan.cwd,
    env: plan.env,
    // The stack chosen above: the session finds the same one in the assembly.
    stack: plan.stackName,
    assemblyDir: plan.assemblyDir,
    template: () => plan.template,
    jobSettings: (settings) => structuredClone(plan.runSettings.get(settings.jobName) ?? settings),
    downstream: () => BENCH_DOWNSTREAM,
    returnConsumedCapacity: true,
    environment: (_fn, vars) => {
      if (vars.AWS_ACCESS_KEY_ID)
        counts.jobOfAccessKey.set(
          vars.AWS_ACCESS_KEY_ID,
          vars.JOB_NAME !== undefined && counts.dynamoByJob.has(vars.JOB_NAME) ? vars.JOB_NAME : UNATTRIBUTED,
        );
      return vars;
    },
    // Only the lines the run reads are parsed here: the main thread also runs the servers and the event sources.
    log: (source, line) => {
      log?.(source, line);
    },
    onRequest: (service, r) => countRequest(counts, service, r),
  });
}

/** Attributes each queue to its job, and counts the event sources' receives and every function's invocations. */
function instrumentSession(run: E2eRun): void {
  attributeQueues(run);
  countReceives(run);
  timeInvocations(run);
}

function attributeQueues({ session: s, plan, counts }: E2eRun): void {
  for (const job of s.jobs.values()) {
    for (const url of [job.queueUrl, job.admissionQueueUrl, job.dlqUrl]) {
      const name = lastSegment(url);
      if (name) counts.jobOfQueue.set(name, job.name);
    }
    const pacing = plan.pacingByJob.get(job.name);
    if (pacing && pacing.timeScale !== 1 && plan.selectedNames.includes(job.name))
      plan.progress(`e2e: ${job.name}: ${describeScale(pacing)}`);
  }
}

/**
 * The event sources' receives: SDK middleware on their clients (each polls with its function's role) sees how many
 * messages each one returned.
 */
function countReceives({ session: s, counts }: E2eRun): void {
  for (const client of new Set(s.stack.mappings.map((m) => m.client)))
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const out = await next(args);
        if (counts.on && context.commandName === 'ReceiveMessageCommand') {
          const queue = lastSegment((args.input as { QueueUrl?: string }).QueueUrl) ?? '';
          const tally = tallyOf(counts, counts.jobOfQueue.get(queue));
          if (((out.output as { Messages?: unknown[] }).Messages ?? []).length > 0) tally.receives.withMessages++;
          else tally.receives.empty++;
        }
        return out;
      },
      { step: 'initialize', name: 'benchReceiveCounter' },
    );
}

/** How a time-scaled job's consumer names the operations an invocation carried. */
interface OperationKeys {
  maxBytes: number;
  keyOf: (message: { operationId: string; resource: Record<string, unknown> }) => string | undefined;
}

/**
 * Durations, for GB-seconds: the mappings and the scheduler's asynchronous invocations both go through fn.invoke, so
 * timing it there sees every invocation. The consumer of a time-scaled job also keeps which operations each
 * invocation carried, to tell its slot waits (which grow with the time scale) from its work: the operation key its
 * fixture gives the message's resource where its fake downstream logs starts by that key, else the operation ID (the
 * consumer logs when each operation's apply began).
 */
function timeInvocations(run: E2eRun): void {
  const { session: s, counts } = run;
  const keyed = operationKeysByConsumer(run);
  for (const fn of s.stack.runtime.list()) {
    const invoke = fn.invoke.bind(fn);
    const memoryMb = fn.spec.memoryMb ?? 128;
    const keys = keyed.get(fn.spec.name);
    fn.invoke = async (event: unknown) => {
      const startMs = Date.now();
      try {
        return await invoke(event);
      } finally {
        if (counts.on) {
          const list = counts.timed.get(fn.spec.name) ?? [];
          list.push({
            startMs,
            endMs: Date.now(),
            memoryMb,
            keys: keys ? operationKeysOf(event, keys.maxBytes, keys.keyOf) : [],
          });
          counts.timed.set(fn.spec.name, list);
        }
      }
    };
  }
}

/** The time-scaled jobs' consumers, by function name, with how each names its operations. */
function operationKeysByConsumer({ session: s, plan }: E2eRun): Map<string, OperationKeys> {
  const keyed = new Map<string, OperationKeys>();
  for (const job of s.jobs.values()) {
    if (!job.consumer || (plan.pacingByJob.get(job.name)?.timeScale ?? 1) === 1) continue;
    const { fixture, downstream } = job;
    // Apply starts read off the consumer's logs: a time-scaled job without a fake downstream to log them.
    if (!(fixture && downstream)) s.watchApplies(job.name);
    keyed.set(job.consumer.name, {
      maxBytes: job.settings.maxMessageBytes,
      keyOf: fixture && downstream ? (m) => fixture.operationKeyOf(m.resource) : (m) => m.operationId,
    });
  }
  return keyed;
}

// ---------------------------------------------------------------------------------------------------------------------
// Drive: a warm-up cycle, then the measured one.

/** The measured cycle, and what the counters and statistics stood at before it. */
interface Driven {
  cycle: Cycle;
  /** Each function's invocations before the measured cycle. */
  invocationsBefore: Map<string, number>;
  /** Each event source's statistics before the measured cycle, by its function. */
  statsBefore: Map<string, EventSourceMappingStats>;
  /** First schedule fired to the last acknowledgement of the measured cycle. */
  seconds: number;
}

async function driveCycles(run: E2eRun): Promise<Driven> {
  const { session: s, plan, counts } = run;
  // A small warm-up cycle on the day before first: each execution environment's first invocation builds its clients
  // and fetches its secrets, which is cold-start cost (measured apart), not cost per job.
  const now = new Date();
  await runCycle(
    run,
    new Date(now.getTime() - 86_400_000),
    (name) => warmUpCountOf(plan.fixtures.get(name), plan.countOf(name)),
    () => s.startConsumers(),
  );
  const invocationsBefore = new Map(s.stack.runtime.list().map((fn) => [fn.spec.name, fn.invocationCount]));
  const statsBefore = new Map(s.stack.mappings.map((m) => [m.config.functionName, m.statistics]));
  const cycle = await runCycle(run, now, plan.countOf, () => {
    for (const list of counts.dynamoByJob.values()) list.length = 0;
    counts.tallies.clear();
    counts.timed.clear();
    counts.on = true;
  });
  counts.on = false;
  const runEnd = Math.max(cycle.t0, ...cycle.lastAckAt.values());
  return { cycle, invocationsBefore, statsBefore, seconds: (runEnd - cycle.t0) / 1000 };
}

/** Seeds each selected job for the business date `at` gives it, fires their schedules and waits until the run settled. */
async function runCycle(
  run: E2eRun,
  at: Date,
  countFor: (name: string) => number,
  beforeFire: () => void,
): Promise<Cycle> {
  const since = Date.now();
  const seeded = await seedJobs(run, at, countFor);
  beforeFire();
  const sinceIso = new Date().toISOString();
  const cpuBefore = cpuSnapshot();
  const t0 = performance.now();
  const fired = await fireSchedules(run, at);
  // The clock stops at each job's last acknowledgement, not when the run is seen to have settled.
  const acks = watchAcknowledgements(run);
  const settled = await settleWhileWatching(run, sinceIso, acks);
  const cpu = cpuBetween(cpuBefore, cpuSnapshot(), (performance.now() - t0) / 1000);
  if (!settled)
    throw new E2eBenchError(
      `the run did not settle within ${run.plan.timeoutSeconds} s (${acks.acknowledged()} messages acknowledged)`,
    );
  return { since, sinceIso, t0, lastAckAt: acks.lastAckAt, seeded, fired, cpu };
}

async function seedJobs(
  { session: s, plan }: E2eRun,
  at: Date,
  countFor: (name: string) => number,
): Promise<Map<string, SeededDemo>> {
  const seeded = new Map<string, SeededDemo>();
  for (const name of plan.selectedNames) {
    const businessDate = s.businessDateFor(name, at);
    const demo = await s.seed(name, countFor(name), businessDate);
    seeded.set(name, demo);
    plan.progress(`e2e: ${name}: seeded ${businessDate}: ${demo.summary}`);
  }
  return seeded;
}

/** Fires each selected job's schedule (a job without one is left out) for `at`: the jobs fired. */
async function fireSchedules({ session: s, plan }: E2eRun, at: Date): Promise<Set<string>> {
  const fired = new Set<string>();
  for (const name of plan.selectedNames) {
    if (!s.job(name).scheduleName) continue;
    await s.fire(name, { scheduledTime: at, businessDate: s.businessDateFor(name, at) });
    fired.add(name);
  }
  return fired;
}

/** The selected jobs' acknowledgements from now on, and when each job's last one was seen (`track` looks). */
interface Acknowledgements {
  lastAckAt: Map<string, number>;
  track: () => void;
  /** Messages acknowledged since the watch began, all jobs together. */
  acknowledged: () => number;
}

function watchAcknowledgements({ session: s, plan }: E2eRun): Acknowledgements {
  const { selectedNames } = plan;
  const acknowledgedOf = (name: string) => s.job(name).mapping?.statistics.acknowledged ?? 0;
  const lastAckAt = new Map<string, number>();
  const acks = new Map(selectedNames.map((n) => [n, acknowledgedOf(n)]));
  const ackedBefore = [...acks.values()].reduce((a, b) => a + b, 0);
  const track = () => {
    for (const n of selectedNames) {
      const a = acknowledgedOf(n);
      if (a === acks.get(n)) continue;
      acks.set(n, a);
      lastAckAt.set(n, performance.now());
    }
  };
  const acknowledged = () => selectedNames.reduce((sum, n) => sum + acknowledgedOf(n), 0) - ackedBefore;
  return { lastAckAt, track, acknowledged };
}

/** Waits for the run to settle (false: not by the timeout), tracking acknowledgements and saying how far it got. */
async function settleWhileWatching(
  { session: s, plan }: E2eRun,
  sinceIso: string,
  acks: Acknowledgements,
): Promise<boolean> {
  const timer = setInterval(acks.track, 50);
  let lastProgress = Date.now();
  let settled: boolean;
  try {
    settled = await s.settle({
      deadline: Date.now() + plan.timeoutSeconds * 1000,
      jobs: plan.selectedNames,
      since: sinceIso,
      onPoll: () => {
        if (Date.now() - lastProgress < 5000) return;
        lastProgress = Date.now();
        plan.progress(`e2e: ${acks.acknowledged()} messages acknowledged`);
      },
    });
  } finally {
    clearInterval(timer);
  }
  acks.track();
  return settled;
}

// ---------------------------------------------------------------------------------------------------------------------
// Measure: each job's figures from the measured cycle.

/** The role of the table a counted request named: the state tables by the functions' environment, else business. */
function tableRoleOf(s: LocalSession): (r: CountedRequest) => TableRole {
  const roles = new Map<string, TableRole>();
  for (const fn of s.stack.plan.functions) {
    if (fn.environment.IDEMPOTENCY_TABLE_NAME) roles.set(fn.environment.IDEMPOTENCY_TABLE_NAME, 'idempotency');
    if (fn.environment.LEDGER_TABLE_NAME) roles.set(fn.environment.LEDGER_TABLE_NAME, 'ledger');
    if (fn.environment.LIMITER_TABLE_NAME) roles.set(fn.environment.LIMITER_TABLE_NAME, 'limiter');
  }
  return (r: CountedRequest) => roles.get(r.table ?? '') ?? 'business';
}

function architectureOf(template: CloudFormationTemplate, fn: { logicalId: string } | undefined): Architecture {
  return ((template.Resources[fn?.logicalId ?? '']?.Properties?.Architectures ?? []) as string[])[0] === 'arm64'
    ? 'arm64'
    : 'x86_64';
}

const gbSecondsOf = (list: TimedInvocation[] | undefined) =>
  (list ?? []).reduce((sum, i) => sum + ((i.endMs - i.startMs) / 1000) * (i.memoryMb / 1024), 0);

const dynamoOf = (counts: RequestCounts, name: string) => counts.dynamoByJob.get(name) ?? [];

async function measureJobs(run: E2eRun, driven: Driven): Promise<E2eResult['perJobName']> {
  const roleOf = tableRoleOf(run.session);
  const perJobName: E2eResult['perJobName'] = {};
  for (const name of run.plan.selectedNames) perJobName[name] = await measureJob(run, driven, roleOf, name);
  return perJobName;
}

/** A job's deliveries (acknowledged and failed) and invocations in the measured cycle, and their GB-seconds. */
function jobWork({ session: s, counts }: E2eRun, driven: Driven, job: SessionJob) {
  const stats = job.mapping?.statistics;
  const before = driven.statsBefore.get(job.consumer?.name ?? '');
  const invocationsOf = (name: string | undefined) =>
    name ? s.stack.runtime.get(name).invocationCount - (driven.invocationsBefore.get(name) ?? 0) : 0;
  return {
    acked: (stats?.acknowledged ?? 0) - (before?.acknowledged ?? 0),
    failed: (stats?.failed ?? 0) - (before?.failed ?? 0),
    producer: invocationsOf(job.producer?.name),
    consumer: invocationsOf(job.consumer?.name),
    gbSeconds:
      gbSecondsOf(counts.timed.get(job.producer?.name ?? '')) + gbSecondsOf(counts.timed.get(job.consumer?.name ?? '')),
  };
}

/**
 * A time-scaled job's GB-seconds at its configured rate: the measured ones plus its slot waits grown by the time
 * scale; undefined when no start of the job was observed. Unscaled: the measured ones.
 */
function gbSecondsAtRealRate(
  run: E2eRun,
  job: SessionJob,
  pacing: JobPacing | undefined,
  gbSeconds: number,
  since: number,
): number | undefined {
  if (!pacing || pacing.timeScale === 1) return gbSeconds;
  const starts = startsByKey(run.session, job, since);
  return starts.size === 0
    ? undefined
    : gbSeconds +
        (pacing.timeScale - 1) *
          slotWaitGbSeconds(run.counts.timed.get(job.consumer?.name ?? '') ?? [], (key) => starts.get(key) ?? []);
}

async function measureJob(
  run: E2eRun,
  driven: Driven,
  roleOf: (r: CountedRequest) => TableRole,
  name: string,
): Promise<JobRunFigures> {
  const { session: s, plan } = run;
  const { cycle } = driven;
  const job = s.job(name);
  const work = jobWork(run, driven, job);
  const seeded = cycle.seeded.get(name)!;
  const reading = await s.effects(name, seeded, { since: cycle.since });
  const operations = job.fixture
    ? seeded.expectedOperations.length
    : (await s.ledgerTotals(name, cycle.sinceIso)).discovered;
  const pacing = plan.pacingByJob.get(name);
  const atRealRate = gbSecondsAtRealRate(run, job, pacing, work.gbSeconds, cycle.since);
  const deadLettered = (await s.depth(job.dlqUrl)).total;
  const dynamo = dynamoOf(run.counts, name);
  const counts = runCountsOf({
    jobs: operations,
    deliveries: work.acked + work.failed,
    tallies: [tallyOf(run.counts, name)],
    dynamo,
    roleOf,
    lambda: {
      producerInvocations: work.producer,
      consumerInvocations: work.consumer,
      gbSeconds: work.gbSeconds,
      gbSecondsAtRealRate: atRealRate,
      architecture: architectureOf(plan.template, job.consumer),
    },
    scheduledRuns: cycle.fired.has(name) ? 1 : 0,
  });
  const perJob = batchedFigures(counts).perJob;
  return {
    unit: job.fixture?.unit,
    operations,
    acknowledged: work.acked,
    failed: work.failed,
    deliveries: work.acked + work.failed,
    invocations: { producer: work.producer, consumer: work.consumer },
    gbSeconds: work.gbSeconds,
    gbSecondsAtRealRate: atRealRate,
    pacing,
    deadLettered,
    seconds: ((cycle.lastAckAt.get(name) ?? cycle.t0) - cycle.t0) / 1000,
    counts,
    perJob,
    goals: checkGoals(perJob),
    effects: effectFigures(reading, seeded, operations),
    effectsSource: reading.source,
    itemEffects: itemEffectFigures(reading),
    throttled: reading.throttled,
    maxStartsInAnyInterval: pacing ? maxInAnyWindow(reading.starts, pacing.runIntervalSeconds * 1000) : undefined,
    limiter: limiterFigures(
      dynamo
        .filter((r) => roleOf(r) === 'limiter')
        .map((r) => ({ action: r.action, status: r.status, kind: limiterItemKind(r.pk ?? '') })),
      work.consumer,
    ),
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Report: the whole run's figures, the jobs' added up.

/** The jobs' figures added up, in the jobs' order; the GB-seconds at the real rates undefined if any job's are. */
function totalsOf(perJobName: E2eResult['perJobName']) {
  const totals = {
    operations: 0,
    deliveries: 0,
    failed: 0,
    deadLettered: 0,
    producer: 0,
    consumer: 0,
    gbSeconds: 0,
    gbSecondsAtRealRate: 0 as number | undefined,
  };
  for (const job of Object.values(perJobName)) {
    totals.operations += job.operations;
    totals.deliveries += job.deliveries;
    totals.failed += job.failed;
    totals.deadLettered += job.deadLettered;
    totals.producer += job.invocations.producer;
    totals.consumer += job.invocations.consumer;
    totals.gbSeconds += job.gbSeconds;
    totals.gbSecondsAtRealRate =
      job.gbSecondsAtRealRate === undefined || totals.gbSecondsAtRealRate === undefined
        ? undefined
        : totals.gbSecondsAtRealRate + job.gbSecondsAtRealRate;
  }
  return totals;
}

/** DynamoDB requests by "role action status": how many, and the units they consumed. */
function dynamoRequestsOf(
  requests: CountedRequest[],
  roleOf: (r: CountedRequest) => TableRole,
): E2eResult['dynamoRequests'] {
  const dynamoRequests: E2eResult['dynamoRequests'] = {};
  for (const r of requests) {
    const key = `${roleOf(r)} ${r.action} ${r.status}`;
    dynamoRequests[key] = {
      requests: (dynamoRequests[key]?.requests ?? 0) + 1,
      units: (dynamoRequests[key]?.units ?? 0) + unitsOf(r),
    };
  }
  return dynamoRequests;
}

/** SQS requests by action, all tallies together. */
function sqsRequestsOf(tallies: Tally[]): Record<string, number> {
  const sqsRequests: Record<string, number> = {};
  for (const t of tallies)
    for (const [action, n] of Object.entries(t.sqs)) sqsRequests[action] = (sqsRequests[action] ?? 0) + n;
  return sqsRequests;
}

function reportRun(run: E2eRun, driven: Driven, perJobName: E2eResult['perJobName']): E2eResult {
  const { session: s, plan, counts } = run;
  const roleOf = tableRoleOf(s);
  const totals = totalsOf(perJobName);
  const allDynamo = [...counts.dynamoByJob.keys()].flatMap((name) => dynamoOf(counts, name));
  const allTallies = [...counts.tallies.values()];
  const firstConsumer = plan.selectedNames.map((n) => s.job(n).consumer).find((c) => c !== undefined);
  const runCounts = runCountsOf({
    jobs: totals.operations,
    deliveries: totals.deliveries,
    tallies: allTallies,
    dynamo: allDynamo,
    roleOf,
    lambda: {
      producerInvocations: totals.producer,
      consumerInvocations: totals.consumer,
      gbSeconds: totals.gbSeconds,
      gbSecondsAtRealRate: totals.gbSecondsAtRealRate,
      architecture: architectureOf(plan.template, firstConsumer),
    },
    scheduledRuns: driven.cycle.fired.size,
  });
  return {
    counts: runCounts,
    pacing: plan.mode,
    ratePerMinute: plan.ratePerMinute,
    admission: plan.admission,
    consumerConcurrency: plan.consumerConcurrency,
    seconds: driven.seconds,
    jobsPerSec: totals.operations / Math.max(driven.seconds, 1e-3),
    failedMessages: totals.failed,
    deadLettered: totals.deadLettered,
    perJobName,
    dynamoRequests: dynamoRequestsOf(allDynamo, roleOf),
    sqsRequests: sqsRequestsOf(allTallies),
    cpu: driven.cycle.cpu,
  };
}

/** RunCounts from counted requests: SQS by action and receives, DynamoDB units by table role. */
function runCountsOf(input: {
  jobs: number;
  deliveries: number;
  tallies: Tally[];
  dynamo: CountedRequest[];
  roleOf: (r: CountedRequest) => TableRole;
  lambda: RunCounts['lambda'];
  scheduledRuns: number;
}): RunCounts {
  const action = (...actions: string[]) =>
    input.tallies.reduce((sum, t) => sum + actions.reduce((s, a) => s + (t.sqs[a] ?? 0), 0), 0);
  const dynamo: RunCounts['dynamo'] = {
    idempotency: { write: 0, read: 0 },
    ledger: { write: 0, read: 0 },
    limiter: { write: 0, read: 0 },
    business: { write: 0, read: 0 },
  };
  for (const r of input.dynamo) {
    if (DYNAMO_WRITE_ACTIONS.has(r.action)) dynamo[input.roleOf(r)].write += unitsOf(r);
    else if (DYNAMO_READ_ACTIONS.has(r.action)) dynamo[input.roleOf(r)].read += unitsOf(r);
  }
  return {
    jobs: input.jobs,
    deliveries: input.deliveries,
    sqs: {
      sendCalls: action('SendMessage', 'SendMessageBatch'),
      receiveCalls: input.tallies.reduce((sum, t) => sum + t.receives.withMessages, 0),
      emptyReceiveCalls: input.tallies.reduce((sum, t) => sum + t.receives.empty, 0),
      deleteCalls: action('DeleteMessage', 'DeleteMessageBatch'),
      // The producer reads its queue's depth once per admission step: a billed request like any other.
      attributeCalls: action('GetQueueAttributes'),
    },
    dynamo,
    lambda: input.lambda,
    scheduledRuns: input.scheduledRuns,
  };
}

/** The keys of the operations an SQS event carries (job messages only: an admission step has none). */
function operationKeysOf(
  event: unknown,
  maxBytes: number,
  keyOf: (message: { operationId: string; resource: Record<string, unknown> }) => string | undefined,
): string[] {
  const records = (event as { Records?: { body?: string }[] } | undefined)?.Records ?? [];
  const keys: string[] = [];
  for (const r of records) {
    const parsed = parseMessage(r.body ?? '', maxBytes);
    const key = parsed.ok ? keyOf(parsed.message) : undefined;
    if (key !== undefined) keys.push(key);
  }
  return keys;
}

/**
 * When each of the job's operations started, by the key its consumer's invocations carry: the fake downstream's
 * arrivals by operation key, or the consumer's logged apply starts by operation ID.
 */
function startsByKey(session: LocalSession, job: SessionJob, since: number): ReadonlyMap<string, number[]> {
  if (job.fixture && job.downstream) {
    const starts = new Map<string, number[]>();
    for (const a of job.downstream.arrivals)
      if (a.at >= since) starts.set(a.operationKey, [...(starts.get(a.operationKey) ?? []), a.at]);
    return starts;
  }
  return session.pipelineLog.startsByOperation(job.consumer?.name, since);
}

export function describePacing(mode: E2eResult['pacing'], ratePerMinute?: number): string {
  if (mode === 'off') return 'pacing off: the pipeline alone';
  if (mode === 'fixed') return `each job paced at ${ratePerMinute}/min, burst 1`;
  return 'pacing on, each job at its configured rate';
}

/** e.g. "interval scaled 60 s -> 24 s (x2.5), admission horizon 300 s -> 120 s, short wait 10000 ms -> 4000 ms". */
export function describeScale(p: JobPacing): string {
  const parts = [
    `interval scaled ${p.configuredIntervalSeconds} s -> ${p.runIntervalSeconds} s (x${+p.timeScale.toFixed(2)})`,
  ];
  if (p.horizonSeconds) parts.push(`admission horizon ${p.horizonSeconds.configured} s -> ${p.horizonSeconds.run} s`);
  parts.push(`short wait ${p.shortWaitMs.configured} ms -> ${p.shortWaitMs.run} ms`);
  if (p.batchingWindowSeconds)
    parts.push(`batching window ${p.batchingWindowSeconds.configured} s -> ${p.batchingWindowSeconds.run} s`);
  return parts.join(', ');
}

export interface EmulatorCeiling {
  /** Messages received and deleted per second (ReceiveMessage of 10 + DeleteMessageBatch, 5 loops in flight). */
  sqsReceiveDeletePerSec: number;
  /** Conditional PutItem (attribute_not_exists) per second, 10 in flight. */
  dynamoConditionalWritesPerSec: number;
}

/**
 * The embedded servers' own ceiling, measured directly (no Lambda runtime, no pipeline logic), each run as the local
 * stack runs it: SQS in this process, dynalite in a process of its own.
 */
export async function measureEmulatorCeiling(
  messages: number,
  writes: number,
  progress: (line: string) => void = () => undefined,
): Promise<EmulatorCeiling> {
  const [sqsServer, dynamoServer] = await Promise.all([startSqs(), startDynamoDb({ childProcess: true })]);
  const sqs = new SQSClient({ endpoint: sqsServer.endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
  const ddb = new DynamoDBClient({
    endpoint: dynamoServer.endpoint,
    region: 'us-east-1',
    credentials: LOCAL_CREDENTIALS,
  });
  try {
    progress(`emulator ceiling: ${messages} messages received + deleted, ${writes} conditional writes`);
    const sqsReceiveDeletePerSec = await measureReceiveDelete(sqs, messages);
    const dynamoConditionalWritesPerSec = await measureConditionalWrites(ddb, writes);
    return { sqsReceiveDeletePerSec, dynamoConditionalWritesPerSec };
  } finally {
    sqs.destroy();
    ddb.destroy();
    await Promise.all([sqsServer.close(), dynamoServer.close()]);
  }
}

/** Messages received and deleted per second from a queue filled first (the filling not timed). */
async function measureReceiveDelete(sqs: SQSClient, messages: number): Promise<number> {
  const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'bench-ceiling' }))).QueueUrl!;
  await fillQueue(sqs, queueUrl, messages);
  const t = performance.now();
  const drained = await drainQueue(sqs, queueUrl, messages);
  return drained / ((performance.now() - t) / 1000);
}

/** Sends `messages` small messages, in batches of 10, 5 batches in flight. */
async function fillQueue(sqs: SQSClient, queueUrl: string, messages: number): Promise<void> {
  const chunks = Array.from({ length: Math.ceil(messages / 10) }, (_, i) => i);
  await mapBounded(chunks, 5, (i) =>
    sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: Array.from({ length: Math.min(10, messages - i * 10) }, (_, j) => ({
          Id: String(j),
          MessageBody: `{"n":${i * 10 + j}}`,
        })),
      }),
    ),
  );
}

/** Receives (10 at a time) and deletes the queue's messages in 5 loops at once: how many were drained. */
async function drainQueue(sqs: SQSClient, queueUrl: string, messages: number): Promise<number> {
  let drained = 0;
  const loop = async () => {
    while (drained < messages) {
      const got = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
      );
      const batch = got.Messages ?? [];
      if (batch.length === 0) {
        // Another loop holds the last messages in flight; stop rather than spin until they time out.
        if (drained + 10 * 5 >= messages) return;
        continue;
      }
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: batch.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
      drained += batch.length;
    }
  };
  await Promise.all(Array.from({ length: 5 }, loop));
  return drained;
}

/** Conditional PutItems (attribute_not_exists) per second on a fresh table, 10 in flight. */
async function measureConditionalWrites(ddb: DynamoDBClient, writes: number): Promise<number> {
  await ddb.send(
    new CreateTableCommand({
      TableName: 'bench-ceiling',
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  const t = performance.now();
  await mapBounded(
    Array.from({ length: writes }, (_, i) => i),
    10,
    (i) =>
      ddb.send(
        new PutItemCommand({
          TableName: 'bench-ceiling',
          Item: { id: { S: `op-${i}` }, status: { S: 'INPROGRESS' } },
          ConditionExpression: 'attribute_not_exists(id)',
        }),
      ),
  );
  return writes / ((performance.now() - t) / 1000);
}
