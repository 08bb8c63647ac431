// Pacing decision (pure): wait inside this invocation, or give the message back to SQS with a delay.
import { SQS_MAX_DELAY_SECONDS } from '../constants';
import { assertNoProblems } from './errors';

export interface WaitInput {
  /** The wait needed: from the limiter, a Retry-After hint, or backoff. Negative means none (a date already past). */
  waitMs: number;
  /** What the invocation has left (context.getRemainingTimeInMillis()). */
  remainingTimeMs: number;
  /** The longest wait worth spending inside a function; longer ones are deferred even if time allows. */
  shortWaitMs: number;
  /** Time to keep after the wait for the work itself and the acknowledgement. @default 0 */
  reserveMs?: number;
  /** The caller's clock, epoch milliseconds; dates the deferral. */
  nowMs: number;
}

export type WaitDecision =
  | { action: 'wait-in-function'; waitMs: number }
  | {
      action: 'defer';
      /** SQS DelaySeconds for the re-published message, 0..900, never shorter than the wait that fits in it. */
      delaySeconds: number;
      /** Epoch ms before which the operation must not run; carry it in the message so a chained deferral resumes. */
      notBeforeMs: number;
      /** True when the wait exceeds what one delay covers: on receipt, decide again with notBeforeMs - now. */
      chained: boolean;
    };

/**
 * Decides where a wait happens. A short wait that fits in the remaining time (with `reserveMs` to spare) is spent
 * here; anything else is deferred with DelaySeconds, rounded up so the message never comes back early. SQS caps a
 * delay at 900 s, so a longer wait is chained: the message carries `notBeforeMs`, and each receipt calls this again with
 * `waitMs = notBeforeMs - now` until the remainder is short.
 * @throws PacingConfigError on a non-finite input or a negative threshold
 */
export function decideWait(input: WaitInput): WaitDecision {
  const { remainingTimeMs, shortWaitMs, nowMs } = input;
  const reserveMs = input.reserveMs ?? 0;
  const problems: string[] = [];
  if (!Number.isFinite(input.waitMs)) problems.push(`waitMs must be a finite number (got ${input.waitMs})`);
  if (!Number.isFinite(remainingTimeMs)) problems.push(`remainingTimeMs must be a finite number (got ${remainingTimeMs})`);
  if (!Number.isFinite(shortWaitMs) || shortWaitMs < 0) problems.push(`shortWaitMs must be zero or more (got ${shortWaitMs})`);
  if (!Number.isFinite(reserveMs) || reserveMs < 0) problems.push(`reserveMs must be zero or more (got ${reserveMs})`);
  if (!Number.isFinite(nowMs)) problems.push(`nowMs must be a finite number (got ${nowMs})`);
  assertNoProblems('wait decision', problems);

  const waitMs = Math.max(0, Math.ceil(input.waitMs));
  if (waitMs <= shortWaitMs && waitMs + reserveMs <= remainingTimeMs) {
    return { action: 'wait-in-function', waitMs };
  }
  const needed = Math.ceil(waitMs / 1000);
  return {
    action: 'defer',
    delaySeconds: Math.min(SQS_MAX_DELAY_SECONDS, needed),
    notBeforeMs: nowMs + waitMs,
    chained: needed > SQS_MAX_DELAY_SECONDS,
  };
}
