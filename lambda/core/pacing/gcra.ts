// Pacing math (pure): the GCRA rule every consumer instance applies to one downstream key's shared state.
//
// Hand-written: the rule is a dozen lines, and no maintained package exposes GCRA as pure state math with reservations
// (the libraries we know own their storage: Redis, in-memory). The storage half lives in lambda/adapters/rateLimiter.ts.
//
// ## The rule
// State is one number, the theoretical arrival time TAT (microseconds since the epoch). Tokens are reserved one after
// another: with base = max(TAT, now), token j (1-based) of a request moves TAT to base + j*T and may start at
//   start_j = max(now, base + j*T - D)
// where T is the emission interval and D = B*T the tolerance (B = burst). A request for n tokens takes, in one write,
// the longest prefix whose starts are within `maxWaitMs` of now: a block costs one write however large it is, and its
// tokens are spread out in time rather than started together.
//
// ## Why T = (W + margin) / (R - B + 1), not W / R
// A textbook GCRA with T = W/R and burst B lets R + B - 1 starts into one sliding window of length W: B back to back
// after an idle spell, then one every T. We promise "at most R starts in ANY window of length W", so the burst has to be
// paid for out of the rate. Proof sketch, for a half-open window [s, s + W) on integer milliseconds holding k starts:
//   - Take the in-window tokens in the order their writes were applied (the item's compare-and-set linearises them;
//     the callers' clocks need not be monotonic). Let f be the first and l the last of them.
//   - Lower bound: TAT_f >= start_f + T (if start_f = now_f then TAT_f >= now_f + T because base >= now_f; otherwise
//     TAT_f = start_f + D >= start_f + T). Every later token adds exactly T to TAT, so TAT_l >= start_f + k*T.
//   - Upper bound: TAT_l <= start_l + D (equality when start_l = TAT_l - D, and start_l = now_l > TAT_l - D otherwise).
//   - Callers receive start times rounded UP to whole milliseconds (startAtMs), so start_f > s - 1 ms and
//     start_l <= s + W - 1 ms, giving k*T < W + D = W + B*T, i.e. k < W/T + B <= (R - B + 1) + B = R + 1. So k <= R.
// T is rounded up to whole microseconds, which only lowers the rate. The guarantee is about the start times the limiter
// hands out. A caller that starts late (timer lateness, network jitter before the provider logs the arrival) can bunch
// two starts closer than planned; `safetyMarginMs` stretches the window the rate is spread over so jitter smaller than
// the margin cannot push a start into the next window.
//
// Utilization therefore peaks at (R - B + 1) / R * W / (W + margin): keep B small (1 for strict pacing). Blocks do
// not need a burst here, because a block's tokens are spread, not started together.
import { assertNoProblems } from './errors';

/** What a downstream allows, as configured. */
export interface RateLimitSpec {
  /** Starts allowed in any sliding window of `intervalMs`. */
  startsPerInterval: number;
  /** The window length in milliseconds. */
  intervalMs: number;
  /**
   * Tokens that may start back to back after an idle spell. Each unit of burst costs one start per window of sustained
   * rate (see the proof above). @default 1
   */
  burst?: number;
  /** Extra window length the rate is spread over, to absorb start-time jitter. @default 0 */
  safetyMarginMs?: number;
}

/** The derived GCRA parameters, in integer microseconds so the arithmetic is exact. */
export interface GcraLimits {
  /** T: the spacing between tokens at the sustained rate. */
  emissionIntervalUs: number;
  /** D = B * T: how far TAT may run ahead of a token's start. */
  toleranceUs: number;
  burst: number;
}

/** The stored state of one limiter key; absent for a key never used (or expired, which is the same as long idle). */
export interface GcraState {
  /** Theoretical arrival time, microseconds since the epoch. */
  tatUs: number;
}

export interface ReserveRequest {
  /** The caller's clock, integer milliseconds since the epoch (Date.now()). */
  nowMs: number;
  /** Tokens wanted (e.g. one per record in the batch). */
  count: number;
  /** Longest wait the caller accepts for a token's start; 0 takes only tokens that may start now. @default 0 */
  maxWaitMs?: number;
}

export interface Reservation {
  /** Tokens granted, 0..count: the first `granted` records may proceed. */
  granted: number;
  /** For each granted token, the earliest time it may start, epoch milliseconds, ascending. */
  startAtMs: number[];
  /** The state to store: unchanged when nothing was granted (no write needed). */
  state: GcraState | undefined;
  /**
   * When granted < count: milliseconds from now until the first token not granted could start if it were reserved now
   * (a hint, others may take it first). 0 when everything was granted.
   */
  waitMs: number;
}

const US_PER_MS = 1000;

/**
 * Derives GCRA parameters that keep every sliding window of `intervalMs` at or below `startsPerInterval` starts.
 * @throws PacingConfigError naming every bad value
 */
export function gcraLimits(spec: RateLimitSpec): GcraLimits {
  const { startsPerInterval: r, intervalMs: w } = spec;
  const burst = spec.burst ?? 1;
  const margin = spec.safetyMarginMs ?? 0;
  const problems: string[] = [];
  if (!Number.isSafeInteger(r) || r < 1) problems.push(`startsPerInterval must be a positive integer (got ${r})`);
  if (!Number.isFinite(w) || w <= 0) problems.push(`intervalMs must be a positive number (got ${w})`);
  if (!Number.isSafeInteger(burst) || burst < 1) problems.push(`burst must be a positive integer (got ${burst})`);
  else if (Number.isSafeInteger(r) && burst > r)
    problems.push(`burst must be at most startsPerInterval (${r}) (got ${burst})`);
  if (!Number.isFinite(margin) || margin < 0) problems.push(`safetyMarginMs must be zero or more (got ${margin})`);
  assertNoProblems('rate limit', problems);
  const emissionIntervalUs = Math.ceil(((w + margin) * US_PER_MS) / (r - burst + 1));
  return { emissionIntervalUs, toleranceUs: burst * emissionIntervalUs, burst };
}

/**
 * Reserves up to `count` tokens against `state` (see the file comment for the rule and its guarantee).
 * @throws PacingConfigError when `nowMs` is not an integer, or `count` / `maxWaitMs` is out of range
 */
export function reserve(state: GcraState | undefined, request: ReserveRequest, limits: GcraLimits): Reservation {
  const { nowMs, count } = request;
  const maxWaitMs = request.maxWaitMs ?? 0;
  const problems: string[] = [];
  if (!Number.isSafeInteger(nowMs)) problems.push(`nowMs must be integer milliseconds (got ${nowMs})`);
  if (!Number.isSafeInteger(count) || count < 1) problems.push(`count must be a positive integer (got ${count})`);
  if (!Number.isFinite(maxWaitMs) || maxWaitMs < 0) problems.push(`maxWaitMs must be zero or more (got ${maxWaitMs})`);
  assertNoProblems('reservation', problems);

  const { emissionIntervalUs: t, toleranceUs: d } = limits;
  const now = nowMs * US_PER_MS;
  const base = state === undefined ? now : Math.max(state.tatUs, now);
  const startUs = (j: number): number => Math.max(now, base + j * t - d);
  const latest = now + maxWaitMs * US_PER_MS;

  // start_j grows with j, so the grant is a prefix; solve for it instead of looping over a possibly large count.
  // start_j <= latest  <=>  base + j*t - d <= latest (the `now` side always holds).
  const fit = Math.floor((latest + d - base) / t);
  const granted = Math.max(0, Math.min(count, fit));
  const startAtMs: number[] = [];
  for (let j = 1; j <= granted; j++) startAtMs.push(Math.ceil(startUs(j) / US_PER_MS));
  const waitMs = granted < count ? Math.ceil((startUs(granted + 1) - now) / US_PER_MS) : 0;
  return {
    granted,
    startAtMs,
    state: granted > 0 ? { tatUs: base + granted * t } : state,
    waitMs,
  };
}

/**
 * A partial block behind a queue is refused unless it holds at least the whole request or this share of what the
 * wait holds on an idle key (1/SLIVER_SHARE): see reserveBlock.
 */
export const SLIVER_SHARE = 4;

export interface BlockRequest extends ReserveRequest {
  /** Spreads the refused callers' return (waitMs), uniform in [0, 1). @default Math.random */
  random?: () => number;
}

/**
 * `reserve`, without slivers behind a queue: when the key's TAT is ahead of now (other callers hold slots queued) and
 * only part of the block fits the wait, a part smaller than min(count, capacity / SLIVER_SHARE) is refused, capacity
 * being the tokens the wait holds on an idle key. Its waitMs is then the time until that many would fit, plus a
 * jitter (see below).
 *
 * Why: with more demand than allowance (a fleet-wide backlog), the queue stands at the wait's horizon and the horizon
 * opens one token per spacing. Every caller that looks then finds a sliver of one or two tokens; taking it costs a
 * write (and a lost race for all but the first of those who saw it), and the batch's rest comes back for another write.
 * At 64 instances that was several writes per start. Refusing slivers makes each write a whole block, and the jitter
 * spreads the refused callers' return, so they do not all come back to race for the same room. It costs the allowance
 * nothing: a queue a wait deep is already reserved ahead of now.
 * Without a queue (an idle key), partial blocks are granted as `reserve` does.
 */
export function reserveBlock(state: GcraState | undefined, request: BlockRequest, limits: GcraLimits): Reservation {
  const reservation = reserve(state, request, limits);
  const now = request.nowMs * US_PER_MS;
  if (reservation.granted === 0 || reservation.granted === request.count || state === undefined || state.tatUs <= now) {
    return reservation;
  }
  const { emissionIntervalUs: t, toleranceUs: d } = limits;
  const waitUs = (request.maxWaitMs ?? 0) * US_PER_MS;
  const capacity = Math.floor((waitUs + d) / t);
  const smallest = Math.min(request.count, Math.max(1, Math.ceil(capacity / SLIVER_SHARE)));
  if (reservation.granted >= smallest) return reservation;
  // `smallest` tokens fit once base + smallest*t - d <= now' + wait, i.e. this long from now.
  const fitsInUs = state.tatUs + smallest * t - d - (now + waitUs);
  // The caller may come back any time from then until the queue ahead has run down to one such part (a wait less two
  // parts after that): the allowance stays reserved meanwhile, however late in that span it comes. Spreading the
  // refused callers over all of it, not just over one part's time, leaves fewer of them looking at the horizon in
  // the same round trip, each of whom could lose the room to another.
  const spreadUs = Math.max(smallest * t, waitUs + d - 2 * smallest * t);
  const jitterUs = (request.random ?? Math.random)() * spreadUs;
  return { granted: 0, startAtMs: [], state, waitMs: Math.ceil((fitsInUs + jitterUs) / US_PER_MS) };
}
