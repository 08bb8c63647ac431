// Admission: how much of a run's backlog the producer lets into the queue now, and when each admitted message becomes
// visible. Pure arithmetic, no AWS: the producer feeds it the queue's depth and the run's state, and publishes by it.
//
// Why admission exists: the event source pulls batches as fast as its concurrency allows, far faster than a rate limit
// lets them start, so a queue holding hours of work is received, deferred and received again all night. Admission keeps
// the queue at most `horizonMs` of work deep, the rest waits in the application's tables where discovery finds it, and
// each admitted message is delayed until about when its rate-limit slot comes, in groups of one event-source batch, so
// a batch arrives whole, near its slots, and starts without a deferral.
import { SQS_MAX_DELAY_SECONDS } from './constants';
import { PacedJobsError } from './errors';

export interface AdmissionInput {
  nowMs: number;
  /** Messages already in the work queue (visible + in flight + delayed), whatever batch they belong to. */
  queueDepth: number;
  /** Starts per second the fleet may make (the limiter's allowance). Undefined: unlimited, admit everything now. */
  ratePerSecond: number | undefined;
  /** How much work (in time at the rate) the queue may hold. */
  horizonMs: number;
  /** When the run's last admitted message was planned to become visible (epoch ms), if it admitted any. */
  plannedUntilMs?: number;
}

export interface AdmissionPlan {
  /** Messages to admit in this step (Infinity when unlimited). */
  admit: number;
  /** When the first admitted message should become visible (epoch ms). */
  firstVisibleMs: number;
}

/** Thrown for inputs no admission could be planned from. */
export class AdmissionError extends PacedJobsError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AdmissionError';
  }
}

/**
 * The queue drains at the rate, so new work should start becoming visible when what is queued has started: at the later
 * of `now + depth / rate` (what the queue holds, however it got there: other batches, deferrals, a slow provider) and
 * just after the run's own last planned message. Admit what fits between then and `now + horizon`.
 */
export function planAdmission(input: AdmissionInput): AdmissionPlan {
  const { nowMs, queueDepth, ratePerSecond, horizonMs } = input;
  if (ratePerSecond === undefined) return { admit: Number.POSITIVE_INFINITY, firstVisibleMs: nowMs };
  if (!(ratePerSecond > 0) || !Number.isFinite(ratePerSecond))
    throw new AdmissionError(`ratePerSecond must be a positive number (got ${ratePerSecond})`);
  if (!(horizonMs > 0)) throw new AdmissionError(`horizonMs must be positive (got ${horizonMs})`);
  const spacingMs = 1000 / ratePerSecond;
  const afterQueue = nowMs + Math.max(0, queueDepth) * spacingMs;
  const afterOwn = input.plannedUntilMs === undefined ? nowMs : input.plannedUntilMs + spacingMs;
  const firstVisibleMs = Math.max(nowMs, afterQueue, afterOwn);
  const admit = Math.max(0, Math.floor(((nowMs + horizonMs - firstVisibleMs) * ratePerSecond) / 1000));
  return { admit, firstVisibleMs };
}

/**
 * When admitted message `index` (0-based, within this step) becomes visible: messages go in groups of `groupSize` (one
 * event-source batch), each group at its first slot, so one receive gathers the whole batch and its slots follow.
 */
export function visibleAtMs(
  index: number,
  plan: AdmissionPlan,
  ratePerSecond: number | undefined,
  groupSize: number,
): number {
  if (ratePerSecond === undefined) return plan.firstVisibleMs;
  const group = Math.floor(index / Math.max(1, groupSize));
  return plan.firstVisibleMs + (group * Math.max(1, groupSize) * 1000) / ratePerSecond;
}

/** The SQS delay that makes a message visible at `visibleAtMs` (whole seconds, 0..900). */
export function delaySecondsUntil(visibleAtMs: number, nowMs: number): number {
  return Math.min(SQS_MAX_DELAY_SECONDS, Math.max(0, Math.round((visibleAtMs - nowMs) / 1000)));
}

/**
 * How long until the next admission step: when the queue has drained to half the horizon, so it never runs dry while
 * the step is on its way, and steps stay few (one per half horizon). Unlimited admission continues at once.
 * @returns whole seconds, 0..900
 */
export function nextStepDelaySeconds(input: {
  nowMs: number;
  plannedUntilMs?: number;
  horizonMs: number;
  ratePerSecond: number | undefined;
  minSeconds?: number;
}): number {
  if (input.ratePerSecond === undefined) return 0;
  const until = input.plannedUntilMs ?? input.nowMs;
  const seconds = Math.floor((until - input.horizonMs / 2 - input.nowMs) / 1000);
  return Math.min(SQS_MAX_DELAY_SECONDS, Math.max(input.minSeconds ?? 1, seconds));
}

/**
 * The largest group whose slots all fall within the consumer's short wait: a group spans `groupSize / rate` seconds,
 * and slots past the short wait would be deferred.
 */
export function admissionGroupSize(batchSize: number, ratePerSecond: number | undefined, shortWaitMs: number): number {
  if (ratePerSecond === undefined) return Math.max(1, batchSize);
  return Math.max(1, Math.min(batchSize, Math.floor((shortWaitMs / 1000) * ratePerSecond)));
}

/**
 * When a run's admission chain stopped, if it did: still admitting, its next step due (`nextStepAt`, or the start for a
 * first step that never ended) more than `graceMs` ago, and no step holding a live lease. Read by `ops status` (the
 * named gap) and the chaos harness (which then continues the chain, as an operator would).
 * @returns the ISO time the step was due, or undefined
 */
export function stalledSince(
  run: { admission?: string; nextStepAt?: string; startedAt?: string; leaseUntilMs?: number },
  nowMs: number,
  graceMs: number,
): string | undefined {
  if (run.admission !== 'admitting') return undefined;
  if (run.leaseUntilMs !== undefined && run.leaseUntilMs > nowMs) return undefined;
  const since = run.nextStepAt ?? run.startedAt;
  const due = since === undefined ? Number.NaN : Date.parse(since);
  return Number.isFinite(due) && nowMs - due > graceMs ? since : undefined;
}

/**
 * A run of the same job and business date, as its ledger item shows it (the producer reads them with one Query per
 * step: RunStateStore.dateRuns).
 */
export interface DateRun {
  batchId: string;
  /** AdmissionStatus: `admitting`, `complete` or `page-limit`. */
  admission?: string;
  startedAt?: string;
  /** A catch-up's run. */
  backfill?: boolean;
  nextStepAt?: string;
  leaseUntilMs?: number;
  /** When its last admitted message was planned to become visible (epoch ms). */
  plannedUntilMs?: number;
}

/** The run a step waits for, and when to look again. */
export interface RunAhead {
  /** The earliest run (runOrder) this one waits for. */
  run: DateRun;
  /** `admitting`: its chain is alive; `plan`: its admission has ended, but its last messages' slots are still ahead. */
  reason: 'admitting' | 'plan';
  /** When the step should look again (epoch ms): no earlier than every run it waits for could let it go. */
  resumeAtMs: number;
}

/**
 * The order runs of one date admit in: live runs before backfill (a catch-up of tonight's date must not hold tonight's
 * run back: live work goes first everywhere else too), then by start time, then by batch ID. Every key is written once,
 * when the run starts (RunStateStore.ensure), so the order is total and never changes: of two runs, exactly one is
 * earlier, so two runs never wait for each other, and the earliest run of a date always admits.
 * @returns negative when `a` admits before `b`
 */
export function runOrder(
  a: Pick<DateRun, 'batchId' | 'startedAt' | 'backfill'>,
  b: Pick<DateRun, 'batchId' | 'startedAt' | 'backfill'>,
): number {
  const klass = (r: Pick<DateRun, 'backfill'>) => (r.backfill === true ? 1 : 0);
  if (klass(a) !== klass(b)) return klass(a) - klass(b);
  const start = Date.parse(a.startedAt ?? '') - Date.parse(b.startedAt ?? '');
  if (start !== 0 && !Number.isNaN(start)) return start;
  return a.batchId < b.batchId ? -1 : a.batchId > b.batchId ? 1 : 0;
}

/**
 * How long an admitting run's next step may be overdue, unleased, before a later run stops waiting for it: a step
 * killed mid-publish holds its lease until its invocation's deadline (`stepTimeoutMs`), and SQS delivers it again one
 * visibility timeout (the producer's timeout + 60 s) after its receive; 30 s more for the event source to poll.
 */
export function activeChainGraceMs(stepTimeoutMs: number): number {
  return stepTimeoutMs + 90_000;
}

/**
 * The earlier run of the date (runOrder) this run must not admit beside, if any. Both would discover what neither has
 * completed, so the later one would re-publish what the earlier one has queued: each copy takes a place in admission's
 * plan and then starts nothing (the consumer's pre-check finds it completed), and the fleet idles for it.
 *
 * An earlier run holds this one back while:
 * - it is **actively admitting**: `admitting` and its chain alive (a live lease, or its next step due less than
 *   `graceMs` ago; a run waiting for a yet earlier run counts, its next step is ahead). A stalled chain (stalledSince:
 *   its step lost to the producer DLQ, or a run long abandoned) does not: an operator's re-run meant to fix it would
 *   otherwise wait for ever; or
 * - its admission has ended (`complete`, or `page-limit`) but its last admitted messages' slots are still ahead
 *   (`plannedUntilMs`, plus `lingerMs` for the last group to start): until then discovery still finds them (queued, not
 *   completed), and this run would re-publish up to a horizon of them behind themselves. This wait is bounded by the
 *   horizon (a plan never reaches further), so it cannot wait for ever either; unlimited admission plans nothing, and
 *   does not wait.
 * Runs this one precedes are ignored, whatever they do: the earliest run of a date always admits.
 */
export function earlierRunAdmitting(
  self: Pick<DateRun, 'batchId' | 'startedAt' | 'backfill'>,
  runs: readonly DateRun[],
  options: { nowMs: number; graceMs: number; lingerMs?: number },
): RunAhead | undefined {
  const { nowMs, graceMs } = options;
  // A run without a start time cannot be placed in the order: it neither waits nor is waited for (as before).
  if (Number.isNaN(Date.parse(self.startedAt ?? ''))) return undefined;
  const ahead: RunAhead[] = [];
  for (const run of runs) {
    if (run.batchId === self.batchId || Number.isNaN(Date.parse(run.startedAt ?? '')) || runOrder(run, self) >= 0)
      continue;
    if (run.admission === 'admitting') {
      if (stalledSince(run, nowMs, graceMs) !== undefined) continue;
      // Holding its lease: its step is being taken now; otherwise its next step is due then (or already, on its way).
      const leased = run.leaseUntilMs !== undefined && run.leaseUntilMs > nowMs;
      const due = Date.parse(run.nextStepAt ?? run.startedAt ?? '');
      ahead.push({ run, reason: 'admitting', resumeAtMs: leased || Number.isNaN(due) ? nowMs : Math.max(nowMs, due) });
    } else if ((run.admission === 'complete' || run.admission === 'page-limit') && run.plannedUntilMs !== undefined) {
      const settledMs = run.plannedUntilMs + (options.lingerMs ?? 0);
      if (settledMs > nowMs) ahead.push({ run, reason: 'plan', resumeAtMs: settledMs });
    }
  }
  if (ahead.length === 0) return undefined;
  ahead.sort((a, b) => runOrder(a.run, b.run));
  return { ...ahead[0], resumeAtMs: Math.max(...ahead.map((a) => a.resumeAtMs)) };
}

/**
 * The delay of a waiting run's next step: until it should look again, at least 5 s (as a step that found the queue
 * full), at most SQS's 900 s. Whole seconds, rounded up, so it never looks again just before.
 */
export function waitDelaySeconds(resumeAtMs: number, nowMs: number): number {
  return Math.min(SQS_MAX_DELAY_SECONDS, Math.max(5, Math.ceil((resumeAtMs - nowMs) / 1000)));
}
