// Pacing's only effect: waiting on a timer (no AWS). Kept apart from the math so the math stays synchronous.

/** Resolves after `ms` milliseconds (at once for 0 or less). The production wait every injectable `sleep` defaults to. */
export function sleep(ms: number): Promise<void> {
  if (!(ms > 0)) return Promise.resolve();
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Resolves once `clock()` has reached `epochMs`: the way a caller honours a reserved start time. Timers and the wall
 * clock can disagree by a millisecond, and starting early is the one thing a reservation forbids, so it re-checks
 * (each pass sleeps the remainder; there is no busy loop).
 */
export async function sleepUntil(
  epochMs: number,
  clock: () => number = Date.now,
  wait: (ms: number) => Promise<void> = sleep,
): Promise<void> {
  for (let left = epochMs - clock(); left > 0; left = epochMs - clock()) {
    await wait(left);
  }
}

/**
 * Waits for a reserved start and says whether the slot is still usable. The limiter's guarantee holds for starts that
 * happen at their reserved time; a caller woken much later (a frozen container, a blocked event loop) would bunch
 * its start with the slots after it, so past `lateToleranceMs` it must give the slot up and ask again. Keep the
 * tolerance below the limiter's safetyMarginMs, which is the jitter the window was stretched to absorb. `clock` and `wait`
 * go together (a test's virtual clock gives both, so the wait moves the time the slot is checked on).
 * @returns true to start now, false when the slot was missed
 */
export async function waitForSlot(
  startAtMs: number,
  lateToleranceMs: number,
  clock: () => number = Date.now,
  wait: (ms: number) => Promise<void> = sleep,
): Promise<boolean> {
  await sleepUntil(startAtMs, clock, wait);
  return clock() - startAtMs <= lateToleranceMs;
}
