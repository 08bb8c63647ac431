// Admission: how much of a run's backlog the producer lets into the queue now, and when each admitted message becomes
// visible. Pure arithmetic, no AWS: the producer feeds it the queue's depth and the run's state, and publishes by it.
//
// Why admission exists: the event source pulls batches as fast as its concurrency allows, far faster than a rate limit
// lets them start, so a queue holding hours of work is received, deferred and received again all night. Admission keeps
// the queue at most `horizonMs` of work deep, the rest waits in the application's tables where discovery finds it, and
// each admitted message is delayed until about when its rate-limit slot comes, in groups of one event-source batch, so
// a batch arrives whole, near its slots, and starts without a deferral.
import { SQS_MAX_DELAY_SECONDS } from './constants';

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
export class AdmissionError extends Error {
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
  if (!(ratePerSecond > 0) || !Number.isFinite(ratePerSecond)) throw new AdmissionError(`ratePerSecond must be a positive number (got ${ratePerSecond})`);
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
export function visibleAtMs(index: number, plan: AdmissionPlan, ratePerSecond: number | undefined, groupSize: number): number {
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
export function nextStepDelaySeconds(input: { nowMs: number; plannedUntilMs?: number; horizonMs: number; ratePerSecond: number | undefined; minSeconds?: number }): number {
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
export function stalledSince(run: { admission?: string; nextStepAt?: string; startedAt?: string; leaseUntilMs?: number }, nowMs: number, graceMs: number): string | undefined {
  if (run.admission !== 'admitting') return undefined;
  if (run.leaseUntilMs !== undefined && run.leaseUntilMs > nowMs) return undefined;
  const since = run.nextStepAt ?? run.startedAt;
  const due = since === undefined ? Number.NaN : Date.parse(since);
  return Number.isFinite(due) && nowMs - due > graceMs ? since : undefined;
}
