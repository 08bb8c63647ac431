// Pacing math (pure): exponential backoff with full jitter, the fallback wait when a downstream gives no usable hint.
import { assertNoProblems, PacingConfigError } from './errors';

/** A source of uniform numbers in [0, 1); injectable so tests pin the jitter. */
export type RandomSource = () => number;

export interface BackoffOptions {
  /** The ceiling of the first attempt's wait. */
  baseMs: number;
  /** No wait exceeds this, however many attempts. */
  capMs: number;
}

function optionProblems({ baseMs, capMs }: BackoffOptions): string[] {
  const problems: string[] = [];
  if (!Number.isFinite(baseMs) || baseMs <= 0) problems.push(`baseMs must be a positive number (got ${baseMs})`);
  if (!Number.isFinite(capMs) || capMs < baseMs) problems.push(`capMs must be at least baseMs (got ${capMs})`);
  return problems;
}

/**
 * Checks backoff options where they are configured, so a bad value fails at construction rather than on the first
 * retry, which may come long after (or never in a test).
 * @throws PacingConfigError naming every bad option
 */
export function assertBackoffOptions(options: BackoffOptions): void {
  assertNoProblems('backoff', optionProblems(options));
}

/**
 * "Full jitter": a uniform wait in [0, min(cap, base * 2^attempt)). Spreading retries over the whole range, rather than
 * around a fixed delay, is what stops a fleet that was throttled together from coming back together.
 * @param attempt 0 for the first retry
 * @returns whole milliseconds, 0 <= result < min(capMs, baseMs * 2^attempt) (0 when that ceiling is below 1)
 * @throws PacingConfigError on a bad attempt or options, or a random source outside [0, 1)
 */
export function backoffMs(attempt: number, options: BackoffOptions, random: RandomSource = Math.random): number {
  const { baseMs, capMs } = options;
  const problems = optionProblems(options);
  if (!Number.isSafeInteger(attempt) || attempt < 0) {
    problems.unshift(`attempt must be a non-negative integer (got ${attempt})`);
  }
  assertNoProblems('backoff', problems);
  // 2 ** attempt overflows to Infinity for huge attempts, which the cap absorbs.
  const ceiling = Math.min(capMs, baseMs * 2 ** attempt);
  const r = random();
  if (!(r >= 0 && r < 1)) throw new PacingConfigError(`random source must return a number in [0, 1) (got ${r})`);
  return Math.floor(r * ceiling);
}
