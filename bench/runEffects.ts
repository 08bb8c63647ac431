// Benchmark (`npm run bench`), what each job did in the measured cycle: its fixture's reading of the effects (or the
// pipeline's own record, for a job without a fixture) limited to the cycle, the figures the report gives (exactly once,
// missing, repeated, unexpected), and when each operation's apply began, for the slot-wait estimate.
//
// Why not LocalSession.effects alone: the bench runs a warm-up cycle first on the same session, and the session's
// reading covers every write and downstream arrival since it opened. A warm-up effect would show as unexpected (an
// operation the measured cycle did not seed) and its starts would crowd the first rate window. So the bench hands the
// fixture only what arrived since the cycle began.
import type { EffectReading, SeededDemo } from '../local/fixture';
import type { JobEffects, LocalSession } from '../local/session';

/** The job's effects in the measured cycle: the session's reading from `since` on (a warm-up cycle ran before it). */
export function effectsSince(session: LocalSession, name: string, seeded: SeededDemo, since: number): Promise<JobEffects> {
  return session.effects(name, seeded, { since });
}

/** Effects per seeded operation: exactly once is the goal. */
export interface EffectFigures {
  expected: number;
  exactlyOnce: number;
  missing: number;
  repeated: number;
  unexpected: number;
}

/** Where one operation touches several items: how many were touched, and how many more than once. */
export interface ItemEffectFigures {
  touched: number;
  repeated: number;
}

/**
 * The figures of a reading against what was seeded. A job without a fixture seeded nothing it can name: its expected
 * operations are the ones the pipeline completed, and `operations` (what its producer discovered) counts the missing.
 */
export function effectFigures(reading: EffectReading, seeded: SeededDemo, operations: number): EffectFigures {
  const named = seeded.expectedOperations.length > 0;
  const expected = new Set(named ? seeded.expectedOperations : reading.effectsByOperation.keys());
  const ofExpected = [...expected].map((k) => reading.effectsByOperation.get(k) ?? 0);
  return {
    expected: named ? expected.size : Math.max(operations, expected.size),
    exactlyOnce: ofExpected.filter((n) => n === 1).length,
    missing: ofExpected.filter((n) => n === 0).length + (named ? 0 : Math.max(0, operations - expected.size)),
    repeated: ofExpected.filter((n) => n > 1).length,
    unexpected: reading.unexpectedEffects.length,
  };
}

export function itemEffectFigures(reading: EffectReading): ItemEffectFigures | undefined {
  if (!reading.effectsByItem) return undefined;
  const counts = [...reading.effectsByItem.values()];
  return { touched: counts.length, repeated: counts.filter((n) => n > 1).length };
}
