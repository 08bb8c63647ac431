// Pacing math (pure): one key's allowance split into lanes, so a block of slots can match the pace its caller really
// starts at.
//
// ## Why lanes
// A consumer runs its records one after another (the concurrency cap is the number of concurrent invocations). With one
// GCRA frontier, a block of n slots is spaced by the key's emission interval T; a container whose applies take A > T
// reaches slot j about j*(A - T) late, and a slot reached later than the tolerance is lost to the whole fleet. So blocks
// had to stay small (1 + tolerance / (A - T) slots), and a batch of 50 cost a limiter write every few records. Spacing
// one frontier's tokens at A instead would waste the gaps: nobody else can take a slot behind a single TAT.
//
// Lanes keep the gaps usable. The allowance R is split into L lanes (shares r_i summing to R), each its own GCRA with
// burst 1 and spacing T_i = (W + margin) / r_i, i.e. about L*T. A caller that starts at most one record per `pace`
// takes the m = floor(T_L / pace) lanes whose next slot is earliest (one lane when it is slower than a lane; one more
// when that one is idle, see reserveLanes), and its block's tokens alternate between them, each at least `pace` after
// the last: the whole block is reachable on time, so a batch costs one limiter write, while the lanes it leaves are
// taken by the fleet's other containers.
//
// ## The guarantee
// Each lane is a GCRA with burst 1: a token on lane i starts at s >= max(TAT_i, now) and moves TAT_i to s + T_i, the
// same as a one-token reservation decided at "now" = s (starting later than the earliest allowed only lowers the rate).
// By the proof in gcra.ts with B = 1, any window of W holds at most r_i of lane i's starts, so at most sum r_i = R of
// the key's. The stored lanes are written with compare-and-set on every lane a block uses (rateLimiter.ts).
//
// What lanes change: after an idle spell, up to L containers may each start at once on their own idle lane (still at
// most R in any window; a single container's own starts are never closer than T). The configured burst (B > 1) is a
// one-lane feature: with B > 1 the key keeps one lane.
import { PacingConfigError } from './errors';
import { gcraLimits, reserve, type GcraLimits, type GcraState, type RateLimitSpec, type ReserveRequest } from './gcra';

/** Lanes a key is split into at most: enough that one lane's rounding loss is small, few enough to keep items small. */
export const MAX_LANES = 16;

/** The lanes a key of `spec` is split into: one with a burst above 1 (a one-lane feature), else up to MAX_LANES and at most R. */
export function laneCount(spec: RateLimitSpec): number {
  if ((spec.burst ?? 1) > 1) return 1;
  return Math.max(1, Math.min(MAX_LANES, spec.startsPerInterval));
}

/**
 * Each lane's GCRA parameters: lane i gets floor(R / L), the first R mod L one more (the shares sum to R), burst 1. One
 * lane is the key's own limits, with its configured burst.
 * @throws PacingConfigError on bad limits, or lanes not from 1 to R, or lanes above 1 with a burst above 1
 */
export function laneLimits(spec: RateLimitSpec, lanes: number): GcraLimits[] {
  const r = spec.startsPerInterval;
  if (!Number.isSafeInteger(lanes) || lanes < 1 || (Number.isSafeInteger(r) && lanes > r)) {
    throw new PacingConfigError(
      `invalid rate limit: lanes must be an integer from 1 to startsPerInterval (${r}) (got ${lanes})`,
    );
  }
  if (lanes === 1) return [gcraLimits(spec)];
  if ((spec.burst ?? 1) > 1)
    throw new PacingConfigError(`invalid rate limit: a burst above 1 needs one lane (got ${lanes})`);
  return Array.from({ length: lanes }, (_, i) =>
    gcraLimits({ ...spec, startsPerInterval: Math.floor(r / lanes) + (i < r % lanes ? 1 : 0), burst: 1 }),
  );
}

export interface LaneRequest extends ReserveRequest {
  /**
   * The caller starts its tokens one after another, each at least this long after the last (its apply time). Lanes
   * above one only: the block is planned at this pace, on as many lanes as the caller can keep up with. @default 0
   */
  paceMs?: number;
  /** Picks among lanes free at about the same time, so callers reading the item together do not all race for one. */
  random?: () => number;
}

export interface LaneReservation {
  /** Tokens granted, 0..count. */
  granted: number;
  /** Each granted token's start, epoch ms, ascending (at least paceMs apart with lanes). */
  startAtMs: number[];
  /** The lanes the block moved, by index, with their new state: what the write must store. Empty when nothing was granted. */
  lanes: Map<number, GcraState>;
  /** When granted < count: ms from now until the next token could start; else 0. */
  waitMs: number;
}

const US_PER_MS = 1000;

/**
 * Reserves up to `count` tokens across the lanes (see the file comment). `states[i]` is lane i as last seen, undefined
 * for a lane never used; `limits` from laneLimits, one per lane.
 * @throws PacingConfigError when the request is out of range
 */
export function reserveLanes(
  states: readonly (GcraState | undefined)[],
  request: LaneRequest,
  limits: readonly GcraLimits[],
): LaneReservation {
  if (limits.length === 1) {
    const one = reserve(states[0], request, limits[0]);
    return {
      granted: one.granted,
      startAtMs: one.startAtMs,
      waitMs: one.waitMs,
      lanes: one.granted > 0 && one.state ? new Map([[0, one.state]]) : new Map(),
    };
  }
  const paceMs = request.paceMs ?? 0;
  if (!Number.isFinite(paceMs) || paceMs < 0)
    throw new PacingConfigError(`invalid reservation: paceMs must be zero or more (got ${paceMs})`);
  // Validates nowMs, count and maxWaitMs as the one-lane rule does (its answer is not used).
  reserve(states[0], request, limits[0]);

  const now = request.nowMs * US_PER_MS;
  const latest = now + (request.maxWaitMs ?? 0) * US_PER_MS;
  const lanes = limits.length;
  const meanSpacing = limits.reduce((sum, l) => sum + l.emissionIntervalUs, 0) / lanes;
  // A caller's own tokens are never closer than the key's spacing, as with one lane.
  const pace = Math.max(paceMs * US_PER_MS, meanSpacing / lanes);
  const random = request.random ?? Math.random;
  const avail = states.map((s) => Math.max(s?.tatUs ?? now, now));
  const sorted = [...avail].sort((a, b) => a - b);
  // The lanes the caller keeps up with in full. Between whole lanes (pace does not divide the lane spacing) it takes
  // one lane more when that lane is idle: it then runs at its own pace and leaves part of that lane unused, which
  // nobody else was using; a busy lane is left whole to the container already on it.
  const whole = Math.max(1, Math.min(lanes, Math.floor(meanSpacing / pace)));
  const m = whole < lanes && whole * pace < meanSpacing && sorted[whole] <= now ? whole + 1 : whole;
  // The m earliest lanes, but picked at random among those free within one lane spacing of the m-th earliest:
  // containers that read the item at about the same moment would otherwise all choose the same lanes and lose races
  // to each other. The caller starts at most one lane spacing later; the lane it left is the next caller's.
  const mth = sorted[m - 1];
  const order = states.map(() => random());
  const chosen = avail
    .map((_, i) => i)
    .filter((i) => avail[i] <= mth + meanSpacing)
    .sort((a, b) => order[a] - order[b])
    .slice(0, m);

  const startAtMs: number[] = [];
  const moved = new Map<number, GcraState>();
  let previous = Number.NEGATIVE_INFINITY;
  const nextStart = (): { lane: number; at: number } => {
    const lane = chosen.reduce((best, i) => (avail[i] < avail[best] ? i : best), chosen[0]);
    return { lane, at: Math.max(avail[lane], previous + pace) };
  };
  while (startAtMs.length < request.count) {
    const { lane, at } = nextStart();
    if (at > latest) break;
    startAtMs.push(Math.ceil(at / US_PER_MS));
    avail[lane] = at + limits[lane].emissionIntervalUs;
    moved.set(lane, { tatUs: avail[lane] });
    previous = at;
  }
  const granted = startAtMs.length;
  return {
    granted,
    startAtMs,
    lanes: moved,
    waitMs: granted < request.count ? Math.ceil((nextStart().at - now) / US_PER_MS) : 0,
  };
}
