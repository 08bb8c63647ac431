// How a window is counted (pure): the oracle the limiter's tests, the benchmark and reports measure pacing against.

/**
 * The most events in any half-open window [s, s + windowMs), over every possible s. Only windows that open on an event
 * need checking: sliding any other window right until its first event starts it can only add events at its end.
 * @param times event times in milliseconds, in any order
 */
export function maxInAnyWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  let end = 0;
  for (let start = 0; start < sorted.length; start++) {
    if (end < start) end = start;
    while (end < sorted.length && sorted[end] < sorted[start] + windowMs) end++;
    best = Math.max(best, end - start);
  }
  return best;
}

/** Windows (by their opening event's time) that held more than `allowed` events; empty when the limit held. */
export function windowViolations(
  times: readonly number[],
  windowMs: number,
  allowed: number,
): { openedAt: number; count: number }[] {
  const sorted = [...times].sort((a, b) => a - b);
  const found: { openedAt: number; count: number }[] = [];
  let end = 0;
  for (let start = 0; start < sorted.length; start++) {
    if (end < start) end = start;
    while (end < sorted.length && sorted[end] < sorted[start] + windowMs) end++;
    if (end - start > allowed) found.push({ openedAt: sorted[start], count: end - start });
  }
  return found;
}
