// Benchmark (`npm run bench`), what each job did in the measured cycle, as figures the report gives: exactly once,
// missing, repeated, unexpected. The reading itself is the session's from the cycle's start on
// (`LocalSession.effects(name, seeded, { since })`): a warm-up cycle runs first on the same session.
import type { EffectReading, SeededDemo } from '../local/fixture';

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
