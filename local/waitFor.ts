// The one wait-for-condition helper of the local tools and the tests: polls a probe until it yields a value, or fails
// naming what it waited for and what it last saw. A fixed sleep is a guess at how long something takes; this waits for
// the thing itself, bounded. And for the claims a sleep is right for ("nothing took the message while paused"),
// holdsFor waits the whole time but checks all along, instead of once at the end.
//
// Hand-written: p-wait-for is ESM-only, which the tests' CommonJS transform cannot load, and
// wait-for-expect is for jest alone, while npm start, chaos and bench wait with this too.

export class WaitTimeoutError extends Error {
  constructor(
    message: string,
    public readonly last: unknown,
  ) {
    super(message);
    this.name = 'WaitTimeoutError';
  }
}

/** holdsFor's failure: the condition stopped holding before its time was up. */
export class ConditionBrokenError extends Error {
  constructor(
    message: string,
    public readonly afterMs: number,
  ) {
    super(message);
    this.name = 'ConditionBrokenError';
  }
}

export interface WaitOptions {
  /** Give up after this long. @default 30000 */
  timeoutMs?: number;
  /** Between probes. @default 50 */
  intervalMs?: number;
}

export interface HoldOptions {
  /** How long the condition must hold. */
  forMs: number;
  /** Between probes. @default 50 */
  intervalMs?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_INTERVAL_MS = 50;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

function duration(name: string, value: number | undefined, fallback: number): number {
  const ms = value ?? fallback;
  if (!Number.isFinite(ms) || ms < 0)
    throw new RangeError(`${name} must be a finite number of milliseconds, 0 or more; got ${ms}`);
  return ms;
}

/** What the timeout message says the probe last saw: nothing for a probe that only said "not yet". */
function lastSeen(value: unknown): string {
  if (value === undefined || value === false) return '';
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return ` (last saw ${text.length > 500 ? `${text.slice(0, 500)}...` : text})`;
}

/**
 * Waits until `probe` returns something other than `undefined` or `false`, and returns it. The probe runs at once,
 * then every `intervalMs`, and once more at the deadline. A probe that throws ends the wait with its error (a broken
 * probe is not a slow condition). The bound is between probes: a probe that never settles is not cut off.
 *
 *   const item = await waitFor('the ledger item', () => readItem(), { timeoutMs: 10_000 });
 *   await waitFor('an empty queue', async () => (await depth()) === 0);
 */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  options: WaitOptions = {},
): Promise<T> {
  return waitUntil<T>(
    what,
    async () => {
      const value = await probe();
      return value === undefined || value === false ? { last: value } : { done: value as T };
    },
    options,
  );
}

/**
 * Like waitFor, for a probe that reports what it saw: `{ done: value }` ends the wait, `{ last: seen }` keeps waiting
 * and is named in the timeout's message (and is the error's `last`).
 */
export async function waitUntil<T>(
  what: string,
  probe: () => { done: T } | { last: unknown } | Promise<{ done: T } | { last: unknown }>,
  options: WaitOptions = {},
): Promise<T> {
  const timeoutMs = duration('timeoutMs', options.timeoutMs, DEFAULT_TIMEOUT_MS);
  const intervalMs = duration('intervalMs', options.intervalMs, DEFAULT_INTERVAL_MS);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const seen = await probe();
    if ('done' in seen) return seen.done;
    const left = deadline - Date.now();
    if (left <= 0)
      throw new WaitTimeoutError(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastSeen(seen.last)}`,
        seen.last,
      );
    await pause(Math.min(intervalMs, left));
  }
}

/**
 * Checks that `probe` keeps returning true for `forMs`: at once, every `intervalMs`, and at the end. Throws
 * ConditionBrokenError the first time it does not (a probe that throws ends it with its own error).
 *
 *   await holdsFor('the paused queue to keep its message', async () => (await depth()) === 1, { forMs: 700 });
 */
export async function holdsFor(
  what: string,
  probe: () => boolean | Promise<boolean>,
  options: HoldOptions,
): Promise<void> {
  const forMs = duration('forMs', options.forMs, 0);
  const intervalMs = duration('intervalMs', options.intervalMs, DEFAULT_INTERVAL_MS);
  const started = Date.now();
  const end = started + forMs;
  for (;;) {
    if ((await probe()) !== true) {
      const afterMs = Date.now() - started;
      throw new ConditionBrokenError(`${what} stopped holding after ${afterMs} ms of ${forMs}`, afterMs);
    }
    const left = end - Date.now();
    if (left <= 0) return;
    await pause(Math.min(intervalMs, left));
  }
}
