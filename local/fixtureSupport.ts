// What a fixture and the fake HTTP API both use: the fixture's error, and the counts effects are read with. Apart from
// fixture.ts (which re-exports them as part of `paced-jobs/fixture`), so fakeHttpApi.ts, which fixture.ts re-exports
// too, needs no import of fixture.ts: the two would be a cycle.

/** A job's fixture could not do what was asked (seed, read, load), naming the job. */
export class FixtureError extends Error {
  constructor(
    message: string,
    public readonly job: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'FixtureError';
  }
}

/** The most timestamps in any window of `windowMs` (a sliding window: the rate check on starts). */
export function maxInAnyWindow(timestamps: readonly number[], windowMs: number): number {
  const sorted = [...timestamps].sort((a, b) => a - b);
  let best = 0;
  for (let lo = 0, hi = 0; hi < sorted.length; hi++) {
    while (sorted[hi] - sorted[lo] >= windowMs) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

/** How many times each key occurs: effects per operation. */
export function tally(keys: readonly string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const k of keys) m.set(k, (m.get(k) ?? 0) + 1);
  return m;
}
