// Pacing math (pure): AIMD on the allowance, for a provider whose real tolerance is not known in advance.
import { assertNoProblems } from './errors';

export interface AdaptiveRateOptions {
  /** The configured allowance: never exceeded. */
  ceiling: number;
  /** Never go below this. @default 1 */
  floor?: number;
  /** Multiplier applied on a throttle. @default 0.5 */
  decreaseFactor?: number;
  /** Starts added per recovery step. @default 1 */
  increaseStep?: number;
  /** Time between recovery steps, and after a cut before the first one. Use the window length or longer. */
  recoverEveryMs: number;
  /**
   * Throttles within this long after a cut do not cut again: the 429s of one overloaded window arrive together and
   * describe one event. @default recoverEveryMs
   */
  decreaseCooldownMs?: number;
}

export interface AdaptiveRateState {
  /** Current allowance in starts per interval (an integer between floor and ceiling). */
  rate: number;
  /** Epoch ms of the last change (cut or recovery step); undefined before any. */
  changedAtMs?: number;
  /** Epoch ms of the last cut; undefined before any. */
  decreasedAtMs?: number;
}

function resolve(options: AdaptiveRateOptions) {
  const floor = options.floor ?? 1;
  const decreaseFactor = options.decreaseFactor ?? 0.5;
  const increaseStep = options.increaseStep ?? 1;
  const decreaseCooldownMs = options.decreaseCooldownMs ?? options.recoverEveryMs;
  const problems: string[] = [];
  if (!Number.isSafeInteger(options.ceiling) || options.ceiling < 1) problems.push(`ceiling must be a positive integer (got ${options.ceiling})`);
  if (!Number.isSafeInteger(floor) || floor < 1 || floor > options.ceiling) problems.push(`floor must be an integer from 1 to ceiling (got ${floor})`);
  if (!(decreaseFactor > 0 && decreaseFactor < 1)) problems.push(`decreaseFactor must be between 0 and 1 exclusive (got ${decreaseFactor})`);
  if (!Number.isSafeInteger(increaseStep) || increaseStep < 1) problems.push(`increaseStep must be a positive integer (got ${increaseStep})`);
  if (!(options.recoverEveryMs > 0)) problems.push(`recoverEveryMs must be positive (got ${options.recoverEveryMs})`);
  if (!(decreaseCooldownMs >= 0)) problems.push(`decreaseCooldownMs must be zero or more (got ${decreaseCooldownMs})`);
  assertNoProblems('adaptive rate', problems);
  return { ceiling: options.ceiling, floor, decreaseFactor, increaseStep, recoverEveryMs: options.recoverEveryMs, decreaseCooldownMs };
}

/** The starting state: the configured ceiling. */
export function initialRate(options: AdaptiveRateOptions): AdaptiveRateState {
  return { rate: resolve(options).ceiling };
}

/** Multiplicative decrease on a 429/503, at most once per cooldown. */
export function onThrottled(state: AdaptiveRateState, nowMs: number, options: AdaptiveRateOptions): AdaptiveRateState {
  const o = resolve(options);
  if (state.decreasedAtMs !== undefined && nowMs - state.decreasedAtMs < o.decreaseCooldownMs) return state;
  const rate = Math.max(o.floor, Math.min(o.ceiling, Math.floor(state.rate * o.decreaseFactor)));
  return { rate, changedAtMs: nowMs, decreasedAtMs: nowMs };
}

/** Additive increase after a success, at most one step per `recoverEveryMs`, never above the ceiling. */
export function onSucceeded(state: AdaptiveRateState, nowMs: number, options: AdaptiveRateOptions): AdaptiveRateState {
  const o = resolve(options);
  if (state.rate >= o.ceiling) return state.rate === o.ceiling ? state : { ...state, rate: o.ceiling };
  if (state.changedAtMs !== undefined && nowMs - state.changedAtMs < o.recoverEveryMs) return state;
  return { ...state, rate: Math.min(o.ceiling, state.rate + o.increaseStep), changedAtMs: nowMs };
}
