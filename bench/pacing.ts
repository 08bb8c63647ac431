// Benchmark (`npm run bench:pacing`), outside the deployed system: K consumer instances drain one backlog against a
// local provider with a quota, paced first by the shared DynamoDB limiter (dynalite), then by a per-process ticker.
// `--scenario quota-drop` (bench/quotaDrop.ts) instead lowers the provider's quota for a while under the adaptive rate.
// Either way it also writes an HTML report with the charts of the run (.local/pacing-report.html): starts per window
// against the allowance, and for quota-drop against the provider's true allowance over time.
//
// Each "instance" is an async worker in this process with its own limiter object, as each Lambda container has its own
// (its own cached TAT); they share only the DynamoDB item, exactly as the fleet does. The baseline gives each instance
// the same allowance on its own, which is what a per-process ticker does: K instances send K times the rate.
// dynalite and the provider run in child processes, as they would be other machines: their CPU cannot stall the
// instances' timers, and the instances' stalls cannot delay the provider's arrival log.
import { join, resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import type { ChartSpec } from '../console/chartSpec';
import { countPerBucket, flat, formatDuration, ofTimes, peakInWindowPerBucket, timeAxis } from '../console/charts';
import { writeHtmlReport, type HtmlReport } from '../console/report';
import { DynamoDbRateLimiter } from '../lambda/adapters/rateLimiter';
import { deriveBatching } from '../lambda/core/pacingSettings';
import { gcraLimits, type GcraState, type RateLimitSpec, reserve } from '../lambda/core/pacing/gcra';
import { maxInAnyWindow } from '../lambda/core/pacing/slidingWindow';
import { sleep, sleepUntil } from '../lambda/core/pacing/sleep';
import {
  Backlog,
  KEY,
  LEAD_MS,
  type LimiterRequests,
  limiterInstance,
  newRun,
  now,
  POLL_MS,
  type Run,
  send,
  startLimiterTable,
  withDefaults,
} from './pacingFleet';
import { startQuotaProviderProcess } from './quotaProviderProcess';
import {
  formatQuotaDrop,
  QUOTA_DROP_DEFAULTS,
  type QuotaDropOptions,
  runQuotaDropBench,
  type QuotaDropModeReport,
  type QuotaDropReport,
} from './quotaDrop';

export interface PacingBenchOptions {
  /** The window the quota is counted over. @default 1000 */
  windowMs?: number;
  /** The provider's quota R per window, and the allowance both pacers are given. @default 20 */
  allowedPerWindow?: number;
  /** Concurrent consumer instances K. @default 8 */
  instances?: number;
  /**
   * Backlog = this many times the per-window allowance. @default enough for every instance's batch (instances x
   * batchSize), at least MIN_BACKLOG_WINDOWS windows' worth: a fleet of K instances is K busy ones
   */
  backlogFactor?: number;
  /**
   * Messages per batch an instance takes (one limiter call per block). @default the batch size the consumer derives
   * for the bench's rate (lambda/core/pacingSettings.ts deriveBatching: 50 at 20 a second)
   */
  batchSize?: number;
  /**
   * The short-wait threshold: tokens further out than this are deferred, not waited for. @default the short wait the
   * consumer derives for the bench's rate (10 s at 20 a second)
   */
  maxWaitMs?: number;
  /**
   * Window stretch absorbing start-time jitter between a reserved start and the provider logging the arrival
   * (timers, the event loop, loopback HTTP, other processes on a busy machine). @default 25
   */
  safetyMarginMs?: number;
  /**
   * An instance that wakes later than this after its reserved start gives the slot up. What is left of the margin
   * (safetyMarginMs - lateToleranceMs) is the budget for the request reaching the provider's log. @default 10
   */
  lateToleranceMs?: number;
  /** How long each start holds an instance after the provider answers: a slow downstream call. @default 0 */
  applyMs?: number;
}

export interface ModeReport {
  /** The provider's quota per window. */
  allowedPerWindow: number;
  /** The most arrivals (accepted or throttled) the provider logged in any sliding window of `windowMs`. */
  maxStartsInAnyWindow: number;
  /**
   * Accepted requests over the allowance's capacity for the time they took:
   *   accepted / (allowedPerWindow * (lastAccepted - firstAccepted + windowMs / allowedPerWindow) / windowMs)
   * i.e. each start is counted as occupying one slot of windowMs / allowedPerWindow, so perfectly even pacing at the
   * allowance scores exactly 1.0; idle slots lower it. (A bursty schedule can score a little over 1.)
   */
  utilization: number;
  /** Requests the provider answered 429. */
  throttled: number;
  /**
   * Time an instance spent blocked on pacing immediately before a request: the limiter call plus the sleep until the
   * reserved start, or the ticker's sleep. Not counted: sending, and time a deferred message spends back in the queue.
   */
  p50WaitMs: number;
  p99WaitMs: number;
  /** Every request that reached the provider. */
  requests: number;
  /** Reserved slots given up because the instance woke later than the tolerance (the limiter only). */
  missedSlots: number;
  /** Limiter calls that failed (lost every race, or DynamoDB failed): the batch went back to the queue, as a deferral. */
  limiterErrors: number;
  elapsedMs: number;
}

/** The shared limiter's run, with the DynamoDB requests its instances made (counted at their client). */
export interface LimiterModeReport extends ModeReport {
  dynamodb: LimiterRequests;
}

export interface PacingBenchReport {
  limiter: LimiterModeReport;
  baseline: ModeReport;
}

/** What the provider logged of one mode's run, epoch ms: the report's charts are drawn from it. */
export interface ModeTimeline {
  /** Every request that reached it, accepted or answered 429. */
  arrivals: number[];
  accepted: number[];
}

/** A run of the default scenario: its report, and each mode's timeline. */
export interface PacingBenchRun {
  report: PacingBenchReport;
  timelines: { limiter: ModeTimeline; baseline: ModeTimeline };
}

/**
 * Where `npm run bench:pacing` writes its HTML report (both scenarios): the .local folder of the folder it runs in
 * (`cwd`), never beside this module (dist/ in the package).
 */
export const pacingReportFile = (cwd: string): string => join(resolve(cwd), '.local', 'pacing-report.html');

/** One consumer instance with a per-process ticker: the same allowance, enforced only within the instance. */
async function tickerInstance(run: Run, spec: RateLimitSpec, batchSize: number): Promise<void> {
  const { backlog } = run;
  const limits = gcraLimits(spec);
  let state: GcraState | undefined;
  while (!backlog.finished) {
    const batch = backlog.take(batchSize);
    if (batch.length === 0) {
      await sleep(POLL_MS);
      continue;
    }
    for (const item of batch) {
      const readyAt = now();
      const tick = reserve(state, { nowMs: Date.now(), count: 1, maxWaitMs: spec.intervalMs }, limits);
      state = tick.state;
      await sleepUntil(tick.startAtMs[0]);
      run.waits.push(now() - readyAt);
      const status = await send(run.url, item);
      // A throttled message goes back to the queue, as a failed batch item would be redelivered.
      if (status === 200) backlog.done();
      else backlog.putBack([item]);
    }
  }
}

/** The p-th percentile (nearest rank) of `values`; `whenEmpty` when there are none. */
export function percentile(values: number[], p: number, whenEmpty = 0): number {
  if (values.length === 0) return whenEmpty;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const round = (n: number, digits: number): number => Number(n.toFixed(digits));

async function runMode(
  options: Required<PacingBenchOptions>,
  instance: (run: Run, index: number) => Promise<void>,
  measure?: { begin(): void; end(starts: number): void },
): Promise<{ report: ModeReport; timeline: ModeTimeline }> {
  const { windowMs, allowedPerWindow, instances, backlogFactor } = options;
  const provider = await startQuotaProviderProcess({ allowedPerWindow, windowMs });
  const backlog = new Backlog(backlogFactor * allowedPerWindow);
  const run = newRun(backlog, provider.url);
  // Warm-up outside the measurement: each instance opens its connection, as a warm container already has one.
  await Promise.all(Array.from({ length: instances }, () => send(provider.warmUpUrl, -1)));
  const began = now();
  measure?.begin();
  let log;
  try {
    await Promise.all(Array.from({ length: instances }, (_, i) => instance(run, i)));
  } finally {
    backlog.dispose();
    log = await provider.finish();
  }
  const { accepted, arrivals, throttled } = log;
  measure?.end(arrivals.length);
  const span = accepted.length === 0 ? 0 : accepted[accepted.length - 1] - accepted[0] + windowMs / allowedPerWindow;
  const report: ModeReport = {
    allowedPerWindow,
    maxStartsInAnyWindow: maxInAnyWindow(arrivals, windowMs),
    utilization: span === 0 ? 0 : round(accepted.length / ((allowedPerWindow * span) / windowMs), 4),
    throttled,
    p50WaitMs: round(percentile(run.waits, 50), 1),
    p99WaitMs: round(percentile(run.waits, 99), 1),
    requests: arrivals.length,
    missedSlots: run.missedSlots,
    limiterErrors: run.limiterErrors,
    elapsedMs: Math.round(now() - began),
  };
  return { report, timeline: { arrivals, accepted } };
}

/** The fixed defaults; the batch, the short wait and the backlog follow from them (pacingBenchOptions). */
export const DEFAULTS: Required<Omit<PacingBenchOptions, 'batchSize' | 'maxWaitMs' | 'backlogFactor'>> = {
  windowMs: 1000,
  allowedPerWindow: 20,
  instances: 8,
  safetyMarginMs: 25,
  lateToleranceMs: 10,
  applyMs: 0,
};

/** The shortest default backlog, in windows of the allowance. */
export const MIN_BACKLOG_WINDOWS = 20;

/**
 * The options a run uses: the given ones, else the defaults, with the batching the product derives for the bench's
 * rate (what a job at that rate deploys, not a figure of the bench's own), and a backlog that keeps every instance busy.
 */
export function pacingBenchOptions(input: PacingBenchOptions = {}): Required<PacingBenchOptions> {
  const base = withDefaults(DEFAULTS, input);
  const batching = deriveBatching({ startsPerInterval: base.allowedPerWindow, intervalSeconds: base.windowMs / 1000 });
  const batchSize = input.batchSize ?? batching.batchSize;
  const busy = Math.ceil((base.instances * batchSize) / base.allowedPerWindow);
  return {
    ...base,
    batchSize,
    maxWaitMs: input.maxWaitMs ?? batching.shortWaitMs,
    backlogFactor: input.backlogFactor ?? Math.max(MIN_BACKLOG_WINDOWS, busy),
  };
}

/** Runs the shared limiter, then the per-process baseline, each against a fresh provider with the same quota. */
export async function runPacingBench(input: PacingBenchOptions = {}): Promise<PacingBenchReport> {
  return (await runPacingBenchWithTimelines(input)).report;
}

/** runPacingBench, with what the provider logged of each mode (for the charts). */
export async function runPacingBenchWithTimelines(input: PacingBenchOptions = {}): Promise<PacingBenchRun> {
  const options = pacingBenchOptions(input);
  const spec: RateLimitSpec = {
    startsPerInterval: options.allowedPerWindow,
    intervalMs: options.windowMs,
    safetyMarginMs: options.safetyMarginMs,
  };
  const table = await startLimiterTable();
  try {
    const { client, tableName, counter } = table;
    // maxAttempts is generous: K instances racing for one item is the point of the exercise.
    // leadMs covers a contended acquire's round trips, so the first slot on an idle key is not missed on arrival.
    const limiters = Array.from(
      { length: options.instances },
      () => new DynamoDbRateLimiter({ limits: spec, tableName, client, maxAttempts: 50, leadMs: LEAD_MS }),
    );
    // Warm-up on another key, racing as the run will: loads the SDK's write, conflict and read paths in each instance,
    // as in a warm container.
    for (let round = 0; round < 3; round++)
      await Promise.all(limiters.map((l) => l.acquire(`${KEY}-warm-up`, 1, { maxWaitMs: 60_000 })));
    // Counted from the first measured acquire: what the fleet's limiters cost per start, lost races included.
    let dynamodb: LimiterRequests | undefined;
    const limiterMode = await runMode(
      options,
      (run, i) =>
        limiterInstance(run, limiters[i], {
          batchSize: options.batchSize,
          maxWaitMs: options.maxWaitMs,
          lateToleranceMs: options.lateToleranceMs,
          spacingMs: gcraLimits(spec).emissionIntervalUs / 1000,
          applyMs: options.applyMs,
        }),
      { begin: () => counter.start(), end: (starts) => (dynamodb = counter.stop(starts)) },
    );
    const baseline = await runMode(options, (run) => tickerInstance(run, spec, options.batchSize));
    return {
      report: {
        limiter: { ...limiterMode.report, dynamodb: dynamodb as LimiterRequests },
        baseline: baseline.report,
      },
      timelines: { limiter: limiterMode.timeline, baseline: baseline.timeline },
    };
  } finally {
    await table.close();
  }
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError('must be zero or a positive integer');
  return n;
}

function fraction(value: string): number {
  const n = Number(value);
  if (!(n > 0 && n < 1)) throw new InvalidArgumentError('must be a number between 0 and 1 exclusive');
  return n;
}

/** `10x1,30x0.5,10x1`: windows x share of the configured allowance, in order. */
function phaseList(value: string): QuotaDropOptions['phases'] {
  return value.split(',').map((part) => {
    const match = /^(\d+)x(\d*\.?\d+)$/.exec(part.trim());
    if (!match) throw new InvalidArgumentError(`"${part}" is not WINDOWSxSHARE (e.g. 30x0.5)`);
    return { windows: Number(match[1]), share: Number(match[2]) };
  });
}

function summarize(name: string, m: ModeReport): string {
  const verdict = m.maxStartsInAnyWindow <= m.allowedPerWindow ? 'within quota' : 'OVER QUOTA';
  return (
    `${name.padEnd(9)} max ${m.maxStartsInAnyWindow}/${m.allowedPerWindow} per window (${verdict}), utilization ${m.utilization}, ` +
    `throttled ${m.throttled}, missed slots ${m.missedSlots}, wait p50 ${m.p50WaitMs} ms p99 ${m.p99WaitMs} ms, ${m.requests} requests in ${m.elapsedMs} ms`
  );
}

function summarizeRequests(d: LimiterRequests): string {
  return (
    `          DynamoDB per start: ${d.writesPerStart} writes, ${d.readsPerStart} reads, ${d.lostRacesPerStart} lost races ` +
    `(${d.writes} / ${d.reads} / ${d.lostRaces})`
  );
}

function summarizeLimiter(m: LimiterModeReport): string {
  return `${summarize('limiter', m)}\n${summarizeRequests(m.dynamodb)}`;
}

/**
 * One mode's charts, from the provider's log: the requests in any window of the quota against it (sliding: the
 * guarantee is per window, so this is the figure maxStartsInAnyWindow is the largest of), and per bucket the accepted
 * starts and the 429s against the allowance's share of a bucket.
 */
export function modeCharts(
  mode: string,
  timeline: ModeTimeline,
  quota: { allowedPerWindow: number; windowMs: number },
): ChartSpec[] {
  const { arrivals, accepted } = timeline;
  // A loop, not Math.min(...arrivals): a long run's log is more arguments than a call takes.
  const fromMs = arrivals.reduce((a, t) => Math.min(a, t), arrivals[0] ?? 0);
  const toMs = arrivals.reduce((a, t) => Math.max(a, t + 1), fromMs);
  const axis = timeAxis({ fromMs, toMs });
  const windowText = formatDuration(quota.windowMs);
  const stepText = formatDuration(axis.stepMs);
  const perBucket = Number(((quota.allowedPerWindow * axis.stepMs) / quota.windowMs).toFixed(2));
  const throttled: number[] = [];
  // The provider logs each accepted request in both lists: its 429s are the arrivals not matched by an acceptance at
  // the same instant.
  const acceptedLeft = new Map<number, number>();
  for (const t of accepted) acceptedLeft.set(t, (acceptedLeft.get(t) ?? 0) + 1);
  for (const t of arrivals) {
    const left = acceptedLeft.get(t) ?? 0;
    if (left > 0) acceptedLeft.set(t, left - 1);
    else throttled.push(t);
  }
  return [
    {
      id: `${mode}:starts`,
      title: `Requests at the provider in any ${windowText} window`,
      unit: `requests per ${windowText}`,
      x: axis.x,
      lines: [
        {
          label: 'requests (accepted and 429s)',
          values: peakInWindowPerBucket(ofTimes(arrivals), axis, quota.windowMs),
        },
        {
          label: `quota (${quota.allowedPerWindow} per ${windowText})`,
          kind: 'limit',
          values: flat(axis, quota.allowedPerWindow),
        },
      ],
    },
    {
      id: `${mode}:rate`,
      title: `Accepted and 429s per ${stepText}`,
      unit: `per ${stepText}`,
      x: axis.x,
      lines: [
        { label: 'accepted', values: countPerBucket(ofTimes(accepted), axis) },
        { label: '429s', values: countPerBucket(ofTimes(throttled), axis) },
        { label: `quota's share (${perBucket} per ${stepText})`, kind: 'limit', values: flat(axis, perBucket) },
      ],
    },
  ];
}

const modeFacts = (m: ModeReport): [string, string][] => [
  [
    'most requests in any window',
    `${m.maxStartsInAnyWindow} of ${m.allowedPerWindow} (${m.maxStartsInAnyWindow <= m.allowedPerWindow ? 'within quota' : 'OVER QUOTA'})`,
  ],
  ['utilization', String(m.utilization)],
  ['429s', String(m.throttled)],
  ['missed slots', String(m.missedSlots)],
  ['wait p50 / p99', `${m.p50WaitMs} ms / ${m.p99WaitMs} ms`],
  ['requests', `${m.requests} in ${m.elapsedMs} ms`],
];

/** The default scenario as an HTML report: the shared limiter and the per-process tickers, each its charts and figures. */
export function pacingHtmlReport(
  run: PacingBenchRun,
  options: { instances: number; allowedPerWindow: number; windowMs: number },
): HtmlReport {
  const { limiter, baseline } = run.report;
  return {
    title: 'bench:pacing: shared limiter vs per-process tickers',
    subtitle: `${options.instances} instances, quota ${options.allowedPerWindow} per ${formatDuration(options.windowMs)}`,
    sections: [
      {
        heading: 'Shared DynamoDB limiter',
        charts: modeCharts('limiter', run.timelines.limiter, options),
        facts: [
          ...modeFacts(limiter),
          [
            'DynamoDB per start',
            `${limiter.dynamodb.writesPerStart} writes, ${limiter.dynamodb.readsPerStart} reads, ${limiter.dynamodb.lostRacesPerStart} lost races`,
          ],
        ],
      },
      {
        heading: 'Per-process tickers (the baseline)',
        charts: modeCharts('baseline', run.timelines.baseline, options),
        facts: modeFacts(baseline),
      },
    ],
  };
}

/**
 * The quota-drop scenario as an HTML report, from the windows its report gives: per window, each mode's accepted
 * starts against the provider's true allowance (and the configured one), each mode's 429s, and the adaptive rate.
 * The report counts windows from each mode's schedule start, so window k is drawn at `startedAtMs` + k windows.
 */
export function quotaDropHtmlReport(report: QuotaDropReport, startedAtMs: number): HtmlReport {
  const modes = (['adaptive', 'fixed'] as const).flatMap((name) =>
    report[name] ? [{ name, m: report[name] as QuotaDropModeReport }] : [],
  );
  const windows = modes[0]?.m.windows ?? [];
  const x = windows.map((w) => (startedAtMs + w.atMs) / 1000);
  const windowText = formatDuration(report.windowMs);
  const limits = [
    { label: "provider's true allowance", kind: 'limit' as const, values: windows.map((w) => w.allowed) },
    {
      label: `configured (${report.allowedPerWindow} per ${windowText})`,
      kind: 'limit' as const,
      values: windows.map(() => report.allowedPerWindow),
    },
  ];
  const charts: ChartSpec[] = [
    {
      id: 'quota-drop:starts',
      title: `Accepted starts per ${windowText} window against the provider's true allowance`,
      unit: `starts per ${windowText}`,
      x,
      lines: [
        ...modes.map(({ name, m }) => ({ label: `${name}: accepted`, values: m.windows.map((w) => w.starts) })),
        ...limits,
      ],
    },
    {
      id: 'quota-drop:throttled',
      title: `429s per ${windowText} window`,
      unit: `429s per ${windowText}`,
      x,
      lines: modes.map(({ name, m }) => ({ label: `${name}: 429s`, values: m.windows.map((w) => w.throttled) })),
    },
  ];
  if (report.adaptive) {
    charts.push({
      id: 'quota-drop:rate',
      title: 'The adaptive rate as each window ended',
      unit: `starts per ${windowText}`,
      x,
      lines: [{ label: 'adaptive rate', values: report.adaptive.windows.map((w) => w.rate) }, ...limits],
    });
  }
  const g = report.goals;
  const facts = modes.flatMap(({ name, m }): [string, string][] => [
    [`${name}: utilization of the true allowance`, `${m.utilization} (goal >= ${g.utilization})`],
    [`${name}: 429 share`, `${m.throttledShare} (goal <= ${g.throttledShare})`],
    [`${name}: recovery`, `${m.recoveryWindows ?? 'never / no restore'} windows (goal <= ${g.recoveryWindows})`],
    [
      `${name}: requests`,
      `${m.accepted} accepted, ${m.throttled} 429s of ${m.requests}; most in any window ${m.maxStartsInAnyWindow}`,
    ],
  ]);
  return {
    title: 'bench:pacing --scenario quota-drop: adaptive vs fixed rate',
    subtitle:
      `${report.instances} instances, configured ${report.allowedPerWindow} per ${windowText}; provider quota ` +
      report.phases
        .map((p) => `${p.windows} windows at ${Math.round(p.share * report.allowedPerWindow)}`)
        .join(', then '),
    sections: [{ heading: 'Per window of the schedule', charts, facts }],
  };
}

const SCENARIOS = ['default', 'quota-drop'] as const;
/** Options only the quota-drop scenario takes, and the one only the default scenario takes. */
const QUOTA_DROP_ONLY = ['phases', 'decreaseFactor', 'refreshMs', 'mode', 'storms'] as const;
const DEFAULT_ONLY = ['backlogFactor', 'applyMs'] as const;
const FLAG: Record<string, string> = {
  phases: '--phases',
  decreaseFactor: '--decrease-factor',
  refreshMs: '--refresh-ms',
  mode: '--mode',
  storms: '--storms',
  backlogFactor: '--backlog-factor',
  applyMs: '--apply-ms',
};

/** bench:pacing's command line (both scenarios' options). */
export function pacingCommand(): Command {
  return new Command()
    .name('bench:pacing')
    .description(
      'Shared DynamoDB limiter vs per-process tickers, against a local provider with a quota (--scenario default); or the ' +
        "adaptive rate vs the fixed rate while the provider's true quota drops and comes back (--scenario quota-drop).",
    )
    .option('--json', 'print one JSON document on stdout', false)
    .option('--scenario <name>', `${SCENARIOS.join(' | ')}`, 'default')
    .option('--window-ms <n>', `quota window in ms (default ${DEFAULTS.windowMs})`, positiveInt)
    .option(
      '--allowed <n>',
      `quota R per window (default ${DEFAULTS.allowedPerWindow}; quota-drop: ${QUOTA_DROP_DEFAULTS.allowedPerWindow})`,
      positiveInt,
    )
    .option('--instances <n>', `concurrent consumer instances K (default ${DEFAULTS.instances})`, positiveInt)
    .option(
      '--backlog-factor <n>',
      `backlog as a multiple of R (default: enough for every instance's batch, at least ${MIN_BACKLOG_WINDOWS}; default scenario only)`,
      positiveInt,
    )
    .option('--batch-size <n>', "messages per batch (default: the consumer's derived batch for the rate)", positiveInt)
    .option(
      '--max-wait-ms <n>',
      "short-wait threshold (default: the consumer's derived short wait for the rate; quota-drop: a sixth of the window)",
      nonNegativeInt,
    )
    .option(
      '--safety-margin-ms <n>',
      `window stretch absorbing start jitter (default ${DEFAULTS.safetyMarginMs})`,
      nonNegativeInt,
    )
    .option(
      '--late-tolerance-ms <n>',
      `give up a slot woken later than this (default ${DEFAULTS.lateToleranceMs})`,
      nonNegativeInt,
    )
    .option(
      '--apply-ms <n>',
      'how long each start holds an instance after the provider answers (default 0)',
      nonNegativeInt,
    )
    .option(
      '--phases <list>',
      "quota-drop: the provider's quota, WINDOWSxSHARE of R, comma-separated (default 10x1,30x0.5,10x1)",
      phaseList,
    )
    .option('--decrease-factor <f>', "quota-drop: the adaptive rule's cut (default the limiter's)", fraction)
    .option(
      '--refresh-ms <n>',
      "quota-drop: how long an instance trusts its copy of the rate (default the limiter's)",
      positiveInt,
    )
    .option('--mode <name>', 'quota-drop: adaptive | fixed | both', 'both')
    .option(
      '--storms <seed>',
      "quota-drop: transient 429 storms on top, in the chaos mix's proportion of the window, placed by this seed",
      nonNegativeInt,
    );
}

async function main(argv: string[]): Promise<void> {
  const program = pacingCommand().parse(argv);
  const o = program.opts<{
    json: boolean;
    scenario: string;
    windowMs?: number;
    allowed?: number;
    instances?: number;
    backlogFactor?: number;
    batchSize?: number;
    maxWaitMs?: number;
    safetyMarginMs?: number;
    lateToleranceMs?: number;
    applyMs?: number;
    phases?: QuotaDropOptions['phases'];
    decreaseFactor?: number;
    refreshMs?: number;
    mode: string;
    storms?: number;
  }>();
  // program.error: commander's own usage error (the message and exit code 1), as for a bad argument.
  if (!(SCENARIOS as readonly string[]).includes(o.scenario))
    program.error(`error: --scenario must be one of ${SCENARIOS.join(', ')} (got "${o.scenario}")`);
  const given = (name: string) => program.getOptionValueSource(name) === 'cli';
  const misplaced = o.scenario === 'quota-drop' ? DEFAULT_ONLY.filter(given) : QUOTA_DROP_ONLY.filter(given);
  if (misplaced.length > 0) {
    program.error(
      `error: ${misplaced.map((m) => FLAG[m]).join(', ')} ${misplaced.length === 1 ? 'does' : 'do'} not apply to --scenario ${o.scenario}`,
    );
  }
  // The report's path comes last, on stderr when stdout is one JSON document.
  const wrote = (path: string) => (o.json ? process.stderr : process.stdout).write(`chart report: ${path}\n`);
  if (o.scenario === 'quota-drop') {
    if (!['adaptive', 'fixed', 'both'].includes(o.mode))
      program.error(`error: --mode must be adaptive, fixed or both (got "${o.mode}")`);
    const startedAtMs = Date.now();
    const report = await runQuotaDropBench({
      windowMs: o.windowMs,
      allowedPerWindow: o.allowed,
      phases: o.phases,
      instances: o.instances,
      batchSize: o.batchSize,
      maxWaitMs: o.maxWaitMs,
      safetyMarginMs: o.safetyMarginMs,
      lateToleranceMs: o.lateToleranceMs,
      refreshMs: o.refreshMs,
      adaptive: o.decreaseFactor === undefined ? undefined : { decreaseFactor: o.decreaseFactor },
      modes: o.mode === 'both' ? ['adaptive', 'fixed'] : [o.mode as 'adaptive' | 'fixed'],
      ...(o.storms === undefined ? {} : { storms: { seed: o.storms } }),
    } satisfies QuotaDropOptions);
    process.stdout.write(o.json ? `${JSON.stringify(report, null, 2)}\n` : formatQuotaDrop(report));
    wrote(writeHtmlReport(pacingReportFile(process.cwd()), quotaDropHtmlReport(report, startedAtMs)));
    return;
  }
  const run = await runPacingBenchWithTimelines({
    windowMs: o.windowMs,
    allowedPerWindow: o.allowed,
    instances: o.instances,
    backlogFactor: o.backlogFactor,
    batchSize: o.batchSize,
    maxWaitMs: o.maxWaitMs,
    safetyMarginMs: o.safetyMarginMs,
    lateToleranceMs: o.lateToleranceMs,
    applyMs: o.applyMs,
  });
  const { report } = run;
  if (o.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    process.stdout.write(`${summarizeLimiter(report.limiter)}\n${summarize('baseline', report.baseline)}\n`);
  }
  const quota = {
    instances: o.instances ?? DEFAULTS.instances,
    allowedPerWindow: report.limiter.allowedPerWindow,
    windowMs: o.windowMs ?? DEFAULTS.windowMs,
  };
  wrote(writeHtmlReport(pacingReportFile(process.cwd()), pacingHtmlReport(run, quota)));
}

if (require.main === module) {
  main(process.argv).catch((error: unknown) => {
    process.stderr.write(
      `bench:pacing failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  });
}
