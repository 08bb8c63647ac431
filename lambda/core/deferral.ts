// The consumer's answer to "not now": how long to defer a message, or when to stop deferring it (the deferral budget).
//
// Deferral re-publishes the message with DelaySeconds instead of failing it, so throttling never raises SQS's receive
// count and never reaches the DLQ through maxReceiveCount. The budget below is what stops an operation from being
// deferred for ever: past it, the message goes to the DLQ with a reason that says which limit it hit.
//
// The budget is a count of failure-driven deferrals: the downstream answered 429/503. A throttle's backoff grows with
// the count (up to 900 s per deferral), so for a downstream that keeps refusing, the default 100 covers about a day. A
// paced deferral (no rate-limit slot soon enough) never spends the budget: pacing is the fleet waiting its turn, not a
// failure, and a backlog of hours would otherwise exhaust any budget by waiting alone. Its delay does not grow past the
// limiter's own wait plus a bounded spread, since a delay that grew with the count would leave a backlog asleep while
// slots go unused. An age limit (since firstEnqueuedAt) bounds every kind: a deployed consumer sets it to the queue's
// retention unless the job says otherwise (lambda/core/pacingSettings.ts). A redriven message starts its age again at
// its first receive after the redrive (the consumer's planner), as its deferral count does, or a redrive of old
// failures would be dead-lettered again at its first deferral.
import { MAX_DEFERRALS, SQS_MAX_DELAY_SECONDS } from './constants';
import { PacedJobsError, type ThrottledError } from './errors';
import { assertBackoffOptions, backoffMs, type RandomSource } from './pacing/backoff';

/** Why a record is not run now. */
export type DeferralCause =
  /** The downstream answered 429/503; `retryAfterMs` on the error is its own hint, when it gave a usable one. */
  | { kind: 'throttled'; error: ThrottledError }
  /** The shared limiter had no slot soon enough (or the slot was missed); `waitMs` is its hint for the next one. */
  | { kind: 'paced'; waitMs: number }
  /** A chained deferral not yet due: the message's `notBefore` is still ahead. Not a new deferral, so no attempt. */
  | { kind: 'not-before'; notBeforeMs: number };

export interface DeferralInput {
  cause: DeferralCause;
  /** Failure-driven deferrals this operation has already had (the message's `attempt`): what the budget counts. */
  attempt: number;
  /** Paced deferrals it has already had (the message's `pacedDeferrals`): they only spread the next paced delay. @default 0 */
  pacedDeferrals?: number;
  /** When the operation was first published (epoch ms): the age budget is measured from it. */
  firstEnqueuedAtMs: number;
  /** Epoch ms. */
  nowMs: number;
}

export type DeferralDecision =
  | {
      action: 'defer';
      /** 0..900, never shorter than the wait it covers (rounded up), unless the wait is longer than 900 s. */
      delaySeconds: number;
      /** Set when the wait is longer than one SQS delay: carry it as the message's `notBefore` to chain the rest. */
      notBeforeMs?: number;
    }
  | { action: 'dead-letter'; reason: string };

export type DeferralPolicy = (input: DeferralInput) => DeferralDecision;

export interface DeferralPolicyOptions {
  /**
   * Failure-driven deferrals (throttled) before the operation is dead-lettered as a terminal failure; paced deferrals
   * do not count. At most 10000. @default 100
   */
  maxDeferrals?: number;
  /**
   * Age since first enqueue past which the operation is dead-lettered instead of deferred again. A deployed consumer
   * always sets it (pacingSettings: the queue's retention by default). @default none: only the deferral count limits
   */
  maxAgeSeconds?: number;
  /** Full-jitter backoff for a throttle without a usable Retry-After. @default { baseMs: 2000, capMs: 900000 } */
  backoff?: { baseMs: number; capMs: number };
  /**
   * A paced deferral waits the limiter's hint plus a full-jitter spread that grows with its paced deferrals up to this cap, so
   * the records of a backlog refused together do not come back together, and a long backlog is not re-read every few
   * seconds. @default 60000
   */
  pacedSpreadCapMs?: number;
  /** Shortest delay for a throttled or paced deferral, so a zero hint cannot make a hot loop through SQS. @default 1 */
  minDelaySeconds?: number;
  /** @default Math.random */
  random?: RandomSource;
}

/**
 * Why a message's `notBefore` cannot be honoured: later than its `enqueuedAt` plus the queue's retention, a wait no
 * message of the queue could serve (a typo or a hostile body, re-published every 15 minutes for ever otherwise).
 * Undefined when it has none or it is within the retention.
 */
export function notBeforeBeyondRetention(
  message: { enqueuedAt: string; notBefore?: string },
  retentionSeconds: number,
): string | undefined {
  if (message.notBefore === undefined) return undefined;
  const waitMs = Date.parse(message.notBefore) - Date.parse(message.enqueuedAt);
  if (!(waitMs > retentionSeconds * 1000)) return undefined;
  const retention = `the queue's retention (${retentionSeconds} s)`;
  return `notBefore: ${message.notBefore} is more than ${retention} after enqueuedAt ${message.enqueuedAt}`;
}

export const DEFAULT_MAX_DEFERRALS = 100;
export const DEFAULT_DEFERRAL_BACKOFF = { baseMs: 2000, capMs: SQS_MAX_DELAY_SECONDS * 1000 };
export const DEFAULT_PACED_SPREAD_CAP_MS = 60_000;

/** Thrown at construction for options that could never defer sensibly. */
export class DeferralPolicyError extends PacedJobsError {
  constructor(
    message: string,
    public readonly problems: string[],
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'DeferralPolicyError';
  }
}

function describe(cause: DeferralCause): string {
  switch (cause.kind) {
    case 'throttled':
      return `throttled: ${cause.error.message}`;
    case 'paced':
      return `no rate-limit slot within the short wait (next in ${cause.waitMs} ms)`;
    case 'not-before':
      return `chained deferral until ${new Date(cause.notBeforeMs).toISOString()}`;
  }
}

/**
 * - throttled: the downstream's Retry-After when it gave one, else exponential backoff with full jitter, capped;
 * - paced: the limiter's hint plus a full-jitter spread on the attempt, capped at `pacedSpreadCapMs`: the delay follows
 *   the limiter's wait, never an ever-growing backoff;
 * - not-before: the rest of the chained wait.
 * A wait longer than 900 s is served by a chain: the decision carries `notBeforeMs` for the message.
 * @throws DeferralPolicyError naming every bad option
 */

export function createDeferralPolicy(options: DeferralPolicyOptions = {}): DeferralPolicy {
  const maxDeferrals = options.maxDeferrals ?? DEFAULT_MAX_DEFERRALS;
  const maxAgeSeconds = options.maxAgeSeconds;
  const backoff = options.backoff ?? DEFAULT_DEFERRAL_BACKOFF;
  const minDelaySeconds = options.minDelaySeconds ?? 1;
  const random = options.random ?? Math.random;
  const pacedSpreadCapMs = options.pacedSpreadCapMs ?? DEFAULT_PACED_SPREAD_CAP_MS;
  const problems: string[] = [];
  if (!Number.isSafeInteger(maxDeferrals) || maxDeferrals < 0 || maxDeferrals > MAX_DEFERRALS)
    problems.push(`maxDeferrals must be an integer from 0 to ${MAX_DEFERRALS} (got ${maxDeferrals})`);
  if (maxAgeSeconds !== undefined && !(maxAgeSeconds > 0))
    problems.push(`maxAgeSeconds must be positive (got ${maxAgeSeconds})`);
  if (!Number.isSafeInteger(minDelaySeconds) || minDelaySeconds < 0 || minDelaySeconds > SQS_MAX_DELAY_SECONDS) {
    problems.push(`minDelaySeconds must be an integer from 0 to ${SQS_MAX_DELAY_SECONDS} (got ${minDelaySeconds})`);
  }
  if (!Number.isFinite(pacedSpreadCapMs) || pacedSpreadCapMs < backoff.baseMs) {
    problems.push(
      `pacedSpreadCapMs must be at least the backoff's baseMs, ${backoff.baseMs} (got ${pacedSpreadCapMs})`,
    );
  }
  if (problems.length > 0) throw new DeferralPolicyError(`invalid deferral policy: ${problems.join('; ')}`, problems);
  // Validates the backoff options once, here, rather than on the first throttle.
  assertBackoffOptions(backoff);

  return ({ cause, attempt, pacedDeferrals = 0, firstEnqueuedAtMs, nowMs }) => {
    const ageMs = nowMs - firstEnqueuedAtMs;
    if (maxAgeSeconds !== undefined && ageMs > maxAgeSeconds * 1000) {
      return {
        action: 'dead-letter',
        reason: `deferral budget exhausted: first enqueued ${Math.floor(ageMs / 1000)} s ago, over the ${maxAgeSeconds} s limit (${describe(cause)})`,
      };
    }
    if (cause.kind === 'throttled' && attempt >= maxDeferrals) {
      return {
        action: 'dead-letter',
        reason: `deferral budget exhausted: ${attempt} deferrals, the limit is ${maxDeferrals} (${describe(cause)})`,
      };
    }
    let waitMs: number;
    let floorSeconds = minDelaySeconds;
    if (cause.kind === 'not-before') {
      waitMs = cause.notBeforeMs - nowMs;
      floorSeconds = 0;
    } else if (cause.kind === 'throttled' && cause.error.retryAfterMs !== undefined) {
      waitMs = cause.error.retryAfterMs;
    } else if (cause.kind === 'paced') {
      waitMs =
        Math.max(0, cause.waitMs) +
        backoffMs(pacedDeferrals, { baseMs: backoff.baseMs, capMs: pacedSpreadCapMs }, random);
    } else {
      waitMs = backoffMs(attempt, backoff, random);
    }
    const seconds = Math.max(floorSeconds, Math.ceil(Math.max(0, waitMs) / 1000));
    if (seconds <= SQS_MAX_DELAY_SECONDS) return { action: 'defer', delaySeconds: seconds };
    // A continuation keeps its original target; a new wait is dated from now, rounded up so it never ends early.
    const notBeforeMs = cause.kind === 'not-before' ? cause.notBeforeMs : nowMs + Math.ceil(waitMs);
    return { action: 'defer', delaySeconds: SQS_MAX_DELAY_SECONDS, notBeforeMs };
  };
}

export const defaultDeferralPolicy: DeferralPolicy = createDeferralPolicy();
