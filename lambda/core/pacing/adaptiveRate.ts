// Pacing math (pure): the allowance a fleet paces at when the provider's real quota is not known in advance, or
// changes. Throttles lower it, time raises it again, never above the configured ceiling.
//
// ## Why not plain AIMD
// A provider's quota is a line, not a loss probability: the best rate is the highest one that draws no 429, held there.
// Halving on every 429 and adding a little per quiet period (AIMD) saws between half the line and the line: it uses
// about three quarters of a lowered quota and is throttled on every tooth. The rule here keeps what the AWS SDK's
// adaptive retry mode (CUBIC) gets right: a multiplicative cut when the line falls, growth that is slow next to the
// last good rate and fast beyond it, and a rate that is a function of the time since the last cut, so raising it needs
// no message (every container of the fleet computes the same rate from the same shared state: only throttles write).
// And it uses what a paced fleet knows that a TCP sender does not: the rate it paced at, and for how long.
//
// ## A cycle, after each decrease
//   hold     at the held rate: `holdMs`, or `cutHoldMs` after a cut (a cut leaves the provider's window with a hole
//            where it refused everything, and a probe into the hole would pass whatever the line: the window must
//            refill at the new rate first);
//   probe    `probeMs` at `increaseStep` above it: a start or two more per window than the held rate (increaseStep *
//            probeMs / windowMs). A sliding-window quota refuses them only if the held rate is at the line, so a
//            failed probe costs a 429 or two;
//   verdict  `verdictMs` back at the held rate, long enough for the probe's 429s to be reported;
//   ramp     unreported, the line has moved: from the first quiet starts seen after the verdict, the rate climbs,
//            its step over the held rate doubling every `recoverEveryMs` from the probe's, to the ceiling; but
//            never more than one step past the last step quiet starts were seen at. A stalled or idle fleet (one
//            that does not send at its rate) does not climb on time alone, as the SDK caps its rate at twice what
//            it measured being sent.
//
// ## A throttle
//   - in the probe or the verdict (or after it, before any quiet starts, within a window): the probe found the line; a
//     new cycle at the same held rate; a start under it if
//     the hold before drew a 429 too (the held rate was at the line: an estimate of it can be a start optimistic when
//     the fleet sends less than it paces, or its starts bunch); a cut if the hold drew 429s more than once (the held
//     rate was well over the line);
//   - on the ramp (or within a window of its reaching the ceiling): the line is below the ramp's rate; a new cycle at
//     the mean rate paced over the window that ended two reports' delays (2 * verdictMs) ago (what the provider's
//     window held no later than its first 429, so about the line, even when a stalled container reports late) less a
//     probe's worth of starts (a fleet sends a little less than it paces); but at the held rate if the ramp was
//     throttled within a tenth above it (a gap in the provider's window, not a moved line, is the likelier cause);
//   - while holding: within `tailMs` of the decrease it is that decrease's own event (instances not yet told, the
//     provider's window still full of the old rate) and is ignored; later, within `decreaseCooldownMs`, it is noted
//     and holds the probe back; after the cooldown the held rate has drawn 429s for a window: it steps down by one
//     start if it came from a probe or the ramp and drew them once (it was about at the line), else it is cut by
//     `decreaseFactor` (the line fell further);
//   - steady (at the ceiling for a window, or before any throttle): the line fell under a rate it used to take: cut
//     to `decreaseFactor` of the rate.
//
// ## A line or storms (with the reporter's evidence: its own starts and 429s, report by report)
// A provider can also refuse for a moment whatever the rate: an overloaded one's storms, a neighbour's burst. Cutting
// for those saves no 429 (the storms refuse the same share of any rate) and only loses throughput; read as a line,
// storms that recur inside every window cut a held rate again and again, to nothing. Nothing in one report tells them
// apart: a storm's first 429s and a lowered quota's look alike, and a container's reports can span several storms. The
// rate does: a line refuses more of a higher rate, storms the same share of any. So, with evidence:
//   - a cut remembers the rate it came from (`from`) and holds a window past its cooldown (`cutHoldMs` at least);
//   - the early look (`stormCheckMs`, half a window): a line that fell under `from` keeps refusing nearly every start
//     while the provider's window is still full of `from`'s starts, W * (1 - line / from) long; storms are over in
//     seconds. So if the reporter's starts since the cut were mostly accepted, the test below starts at once instead
//     of after the refill (each share leaves out the report that brought the throttle: it is chosen for its 429);
//   - once the provider's window has refilled at the held rate, if that rate is still refused (over half a window, at
//     least `minStarts` starts of the reporter's), it is either a line far under it (`lineShare` or more refused: cut
//     again) or a test: back at `from`, the held rate's share noted (`testShare`);
//   - the test's verdict, after the refill at `from` and half a window more: refused more than `testShare` plus
//     `elasticMargin`, a line (a back cycle at what `from` accepted, less the storms' share); else storms (`calmShare`:
//     steady at `from`, and for `calmMs` a throttle with no more than that share plus the margin of the reporter's
//     last window refused cuts nothing, in any phase; the same storms renew it). No verdict in three windows: given up.
// Measured (bench:pacing --scenario quota-drop, and with --storms): the lowered quota is tracked as without the test,
// and storms alone keep about the fixed rate's throughput instead of collapsing it.
//
// Never above `ceiling` (the configured allowance) and never below `floor`.
import { assertNoProblems } from './errors';

export interface AdaptiveRateOptions {
  /** The configured allowance: never exceeded. */
  ceiling: number;
  /** Never go below this. @default 1 */
  floor?: number;
  /** Multiplier on the rate when the provider throttles a rate it used to take. @default 0.5 */
  decreaseFactor?: number;
  /** The probe, in starts per interval above the held rate; the ramp's steps double from it. @default 1 */
  increaseStep?: number;
  /** Time between ramp steps. Use a fraction of the window. */
  recoverEveryMs: number;
  /** The window the quota is counted over. @default 6 * recoverEveryMs */
  windowMs?: number;
  /** A held rate is cut (or stepped down) only once it has drawn 429s this long after it was set. @default windowMs */
  decreaseCooldownMs?: number;
  /** The hold after a decrease back to the line (or after a throttle noted while holding) before the probe. @default windowMs / 2 */
  holdMs?: number;
  /**
   * The hold after a cut: long enough for the provider's window to refill at the new rate after its last 429 (noted
   * up to a tail before it). @default windowMs + tailMs
   */
  cutHoldMs?: number;
  /** The probe's length. @default windowMs / 4 */
  probeMs?: number;
  /** The wait after the probe for its 429s to be reported, before the ramp. @default windowMs / 4 */
  verdictMs?: number;
  /** Throttles this soon after a decrease belong to its own event. @default windowMs / 4 */
  tailMs?: number;
  /**
   * A test's verdict and the calm rule need at least this many of the reporter's own starts in the span, over at least
   * half a window (a verdict is taken at a throttled report, which biases a short span's share up). @default 15
   */
  minStarts?: number;
  /**
   * How much more of its starts refused, at the higher rate than at the lower, make the 429s the rate's. A line met at
   * half the rate refuses about half of the full rate; storms refuse the same share of either, give or take a sample's
   * noise. @default 0.25
   */
  elasticMargin?: number;
  /** A held rate refused this share or more after the refill is over a line, without a test. @default 0.5 */
  lineShare?: number;
  /** How long a storm level found by a test is tolerated without a cut. @default 10 * windowMs */
  calmMs?: number;
  /**
   * The early look at a testable cut: from a sixth of this long after it until this long, the reporter's starts since
   * the cut (half of minStarts at least) refused less than `lineShare` test the rate it came from at once (a line at
   * half of it or lower refuses every start for at least this long after it falls). 0: no early look.
   * @default windowMs / 2
   */
  stormCheckMs?: number;
}

/** One report of the reporting container on the key: its starts and their 429s, at `atMs`. */
export interface OutcomeReport {
  atMs: number;
  starts: number;
  throttles: number;
}

/**
 * What the reporting container saw: its reports on the key over the last few windows, oldest first, the last one the
 * report that brought this throttle (onThrottled leaves it out of every share: it is chosen for its 429).
 */
export interface ThrottleEvidence {
  history: readonly OutcomeReport[];
}

/** Why the rate is held where it is: the outcome of the last decrease. */
export type HeldBy = 'cut' | 'back';

export interface AdaptiveRateState {
  /** The held rate, starts per interval: what the fleet paces at while it holds (an integer from floor to ceiling). */
  rate: number;
  /** Epoch ms of the last decrease: the current cycle's start. Undefined: steady at `rate`, no cycle. */
  decreasedAtMs?: number;
  /** 'cut': a cut or a step down; 'back': back after a probe or the ramp met the line. @default 'cut' */
  heldBy?: HeldBy;
  /** Epoch ms of the latest throttle noted while holding, past the tail: the probe waits the hold from it. */
  throttledAtMs?: number;
  /** Throttles noted while holding this cycle (at most one per tail). @default 0 */
  throttles?: number;
  /**
   * Epoch ms of the first and of the latest quiet starts seen after this cycle's verdict: where the ramp starts, and
   * how far it may go (onSucceeded sets them). Local to whoever holds the state: not shared, each container ramps on
   * its own evidence.
   */
  quietFromMs?: number;
  quietAtMs?: number;
  /** The rate before the last cut: where a test goes back to. */
  from?: number;
  /** A test under way since this epoch ms: back at `rate` (the rate before the cut), measuring its share of 429s. */
  testFromMs?: number;
  /** The share of 429s the lower rate drew, after the provider's window had refilled at it. */
  testShare?: number;
  /** A storm level a test found: 429s up to this share (plus the margin) cut nothing until calmUntilMs. */
  calmShare?: number;
  calmUntilMs?: number;
}

type Resolved = Required<AdaptiveRateOptions>;

function resolve(options: AdaptiveRateOptions): Resolved {
  const floor = options.floor ?? 1;
  const decreaseFactor = options.decreaseFactor ?? 0.5;
  const increaseStep = options.increaseStep ?? 1;
  const windowMs = options.windowMs ?? 6 * options.recoverEveryMs;
  const decreaseCooldownMs = options.decreaseCooldownMs ?? windowMs;
  const holdMs = options.holdMs ?? windowMs / 2;
  const cutHoldMs = options.cutHoldMs ?? windowMs + (options.tailMs ?? windowMs / 4);
  const probeMs = options.probeMs ?? windowMs / 4;
  const verdictMs = options.verdictMs ?? windowMs / 4;
  const tailMs = options.tailMs ?? windowMs / 4;
  const minStarts = options.minStarts ?? 15;
  const elasticMargin = options.elasticMargin ?? 0.25;
  const lineShare = options.lineShare ?? 0.5;
  const calmMs = options.calmMs ?? 10 * windowMs;
  const stormCheckMs = options.stormCheckMs ?? windowMs / 2;
  const problems: string[] = [];
  if (!Number.isSafeInteger(options.ceiling) || options.ceiling < 1)
    problems.push(`ceiling must be a positive integer (got ${options.ceiling})`);
  if (!Number.isSafeInteger(floor) || floor < 1 || floor > options.ceiling)
    problems.push(`floor must be an integer from 1 to ceiling (got ${floor})`);
  if (!(decreaseFactor > 0 && decreaseFactor < 1))
    problems.push(`decreaseFactor must be between 0 and 1 exclusive (got ${decreaseFactor})`);
  if (!Number.isSafeInteger(increaseStep) || increaseStep < 1)
    problems.push(`increaseStep must be a positive integer (got ${increaseStep})`);
  if (!(options.recoverEveryMs > 0)) problems.push(`recoverEveryMs must be positive (got ${options.recoverEveryMs})`);
  for (const [name, value] of [
    ['windowMs', windowMs],
    ['probeMs', probeMs],
  ] as const) {
    if (!(value > 0)) problems.push(`${name} must be positive (got ${value})`);
  }
  for (const [name, value] of [
    ['decreaseCooldownMs', decreaseCooldownMs],
    ['holdMs', holdMs],
    ['cutHoldMs', cutHoldMs],
    ['verdictMs', verdictMs],
    ['tailMs', tailMs],
    ['stormCheckMs', stormCheckMs],
  ] as const) {
    if (!(value >= 0)) problems.push(`${name} must be zero or more (got ${value})`);
  }
  assertNoProblems('adaptive rate', problems);
  return {
    ceiling: options.ceiling,
    floor,
    decreaseFactor,
    increaseStep,
    recoverEveryMs: options.recoverEveryMs,
    windowMs,
    decreaseCooldownMs,
    holdMs,
    cutHoldMs,
    probeMs,
    verdictMs,
    tailMs,
    minStarts,
    elasticMargin,
    lineShare,
    calmMs,
    stormCheckMs,
  };
}

/** The starting state: steady at the configured ceiling. @throws PacingConfigError naming every bad option */
export function initialRate(options: AdaptiveRateOptions): AdaptiveRateState {
  return { rate: resolve(options).ceiling };
}

interface Cycle {
  held: number;
  probeAt: number;
  verdictAt: number;
  rampAt: number;
  /** Ramp steps until the ceiling: step k (from 0) is held + increaseStep * 2^k. */
  stepsToCeiling: number;
  /** The furthest step the evidence allows: one past the step quiet starts were last seen at. */
  maxStep: number;
}

function cycleOf(state: AdaptiveRateState, o: Resolved): Cycle | undefined {
  const held = Math.min(o.ceiling, state.rate);
  if (state.decreasedAtMs === undefined || held >= o.ceiling) return undefined;
  // A cut that can be tested (it came with evidence: `from`) holds until a measurement after the refill is in.
  const hold =
    (state.heldBy ?? 'cut') === 'cut'
      ? state.from !== undefined
        ? Math.max(o.cutHoldMs, o.decreaseCooldownMs + o.windowMs)
        : o.cutHoldMs
      : o.holdMs;
  const probeAt = Math.max(state.decreasedAtMs, state.throttledAtMs ?? Number.NEGATIVE_INFINITY) + hold;
  const verdictAt = probeAt + o.probeMs;
  // No evidence yet: the ramp is not due (verdict until quiet starts are seen).
  const seen = state.quietFromMs !== undefined && state.quietFromMs >= verdictAt + o.verdictMs;
  const rampAt = seen ? (state.quietFromMs as number) : Number.POSITIVE_INFINITY;
  const stepsToCeiling = Math.max(0, Math.ceil(Math.log2((o.ceiling - held) / o.increaseStep)));
  const maxStep = seen ? Math.floor(((state.quietAtMs ?? rampAt) - rampAt) / o.recoverEveryMs) + 1 : 0;
  return { held, probeAt, verdictAt, rampAt, stepsToCeiling, maxStep };
}

/** The ramp's step at `nowMs` (from 0, at most stepsToCeiling, and as far as the evidence allows), or -1 before it. */
function rampStep(c: Cycle, nowMs: number, o: Resolved): number {
  if (nowMs < c.rampAt) return -1;
  return Math.min(c.stepsToCeiling, c.maxStep, Math.floor((nowMs - c.rampAt) / o.recoverEveryMs));
}

const rampRate = (c: Cycle, step: number, o: Resolved): number =>
  Math.min(o.ceiling, c.held + o.increaseStep * 2 ** step);

/**
 * The mean of the cycle's rate over [fromMs, toMs). Before the cycle started it counts the held rate, which can only
 * understate what was paced then (the cycle began with a decrease).
 */
function meanRate(c: Cycle, fromMs: number, toMs: number, o: Resolved): number {
  if (!(toMs > fromMs)) return c.held;
  const pieces: [number, number][] = [
    [Number.NEGATIVE_INFINITY, c.held],
    [c.probeAt, Math.min(o.ceiling, c.held + o.increaseStep)],
    [c.verdictAt, c.held],
    ...Array.from({ length: Math.min(c.stepsToCeiling, c.maxStep) + 1 }, (_, k): [number, number] => [
      c.rampAt + k * o.recoverEveryMs,
      rampRate(c, k, o),
    ]),
  ];
  let sum = 0;
  for (let i = 0; i < pieces.length; i++) {
    const start = Math.max(fromMs, pieces[i][0]);
    const end = Math.min(toMs, i + 1 < pieces.length ? pieces[i + 1][0] : Number.POSITIVE_INFINITY);
    if (end > start) sum += (end - start) * pieces[i][1];
  }
  return sum / (toMs - fromMs);
}

/** The rate to pace at now, starts per interval: the held rate, the probe, or the ramp (see the file comment). */
export function rateAt(state: AdaptiveRateState, nowMs: number, options: AdaptiveRateOptions): number {
  const o = resolve(options);
  const c = cycleOf(state, o);
  if (!c || nowMs < c.probeAt) return Math.min(o.ceiling, state.rate);
  if (nowMs < c.verdictAt) return Math.min(o.ceiling, c.held + o.increaseStep);
  if (nowMs < c.rampAt) return c.held;
  return rampRate(c, rampStep(c, nowMs, o), o);
}

/** The reporter's starts and 429s in [fromMs, toMs]. */
function outcomes(evidence: ThrottleEvidence, fromMs: number, toMs: number): { starts: number; share: number } {
  let starts = 0;
  let throttles = 0;
  for (const r of evidence.history) {
    if (r.atMs < fromMs || r.atMs > toMs) continue;
    starts += r.starts;
    throttles += r.throttles;
  }
  return { starts, share: starts > 0 ? throttles / starts : 0 };
}

/** The storm level a test found, while it holds. */
const calmOf = (state: AdaptiveRateState, nowMs: number) =>
  state.calmUntilMs !== undefined && state.calmUntilMs > nowMs
    ? { calmShare: state.calmShare, calmUntilMs: state.calmUntilMs }
    : {};

/**
 * A test under way (a cut tried against the rate before it): its verdict once the higher rate's window has run, or
 * the state as it is while the test still measures. Undefined once the test is over: the throttle is decided as any.
 */
function throttledInTest(
  state: AdaptiveRateState,
  nowMs: number,
  o: Resolved,
  evidence: ThrottleEvidence,
): AdaptiveRateState | undefined {
  if (state.testFromMs === undefined || nowMs >= state.testFromMs + 3 * o.windowMs) return undefined;
  if (nowMs < state.testFromMs + 1.5 * o.windowMs) return state;
  const high = outcomes(evidence, state.testFromMs + o.windowMs, nowMs);
  if (high.starts < o.minStarts) return state;
  const { testFromMs: _t, testShare: low = 0, from: _f, ...rest } = state;
  if (high.share > low + o.elasticMargin) {
    // The line's: what the higher rate's window accepted, less the refusals the lower rate drew too (storms on top).
    const rate = Math.max(o.floor, Math.floor(state.rate * (1 - (high.share - low))));
    return { ...calmOf(state, nowMs), rate, decreasedAtMs: nowMs, heldBy: 'back' };
  }
  return { ...rest, calmShare: Math.max(low, high.share), calmUntilMs: nowMs + o.calmMs };
}

/**
 * A storm level a test found: 429s within it of the starts are the storms', in any phase (a probe's or a ramp's small
 * excess is lost in them; a line well over the rate still shows). Undefined when the level does not hold the throttle.
 */
function throttledInCalm(
  state: AdaptiveRateState,
  nowMs: number,
  o: Resolved,
  evidence: ThrottleEvidence,
): AdaptiveRateState | undefined {
  if (state.calmUntilMs === undefined || state.calmUntilMs <= nowMs) return undefined;
  const recent = outcomes(evidence, nowMs - o.windowMs, nowMs);
  if (recent.starts < o.minStarts) return state;
  if (recent.share > (state.calmShare ?? 0) + o.elasticMargin) return undefined;
  // The same storms: they keep the level tolerated (renewed when half its time is gone: one write per calmMs / 2).
  return state.calmUntilMs - nowMs < o.calmMs / 2 ? { ...state, calmUntilMs: nowMs + o.calmMs } : state;
}

/**
 * A throttle while a cut holds, before its probe: whether what the cut still draws tells storms (or a line near the
 * rate it came from) from a line that fell, so the rate before it is tested. Undefined: the throttle is the hold's own.
 */
function throttledAfterCut(
  state: AdaptiveRateState,
  nowMs: number,
  o: Resolved,
  evidence: ThrottleEvidence,
): AdaptiveRateState | undefined {
  const { from, decreasedAtMs } = state;
  if ((state.heldBy ?? 'cut') !== 'cut' || from === undefined || decreasedAtMs === undefined) return undefined;
  // The rate the cut came from, tried again: the test whose verdict throttledInTest gives.
  const testFrom = (share: number): AdaptiveRateState => ({
    ...calmOf(state, nowMs),
    rate: from,
    testFromMs: nowMs,
    testShare: share,
  });
  const since = nowMs - decreasedAtMs;
  // Right after the cut: a line under the rate it came from still refuses nearly every start, since the provider's
  // window is full of that rate's starts and stays full for W * (1 - line / from); storms are over in seconds. So
  // refusals of well under half of the reporter's starts since the cut mean storms or a line near `from`: test at once.
  // Half of minStarts is enough here: a fallen line refuses every start of the span, so a few accepted ones are
  // already storms' evidence (and a look that finds too few tries again at the next throttle).
  if (since >= o.stormCheckMs / 6 && since < o.stormCheckMs) {
    const after = outcomes(evidence, decreasedAtMs + 1, nowMs);
    if (after.starts >= Math.ceil(o.minStarts / 2) && after.share < o.lineShare) return testFrom(after.share);
  }
  // The cut's own hold, once the provider's window has refilled at the held rate: measure what it still refuses.
  if (since >= o.decreaseCooldownMs) {
    const low = outcomes(evidence, decreasedAtMs + o.windowMs, nowMs);
    if (since < o.decreaseCooldownMs + o.windowMs / 2 || low.starts < o.minStarts) return state;
    if (low.share < o.lineShare) return testFrom(low.share);
  }
  return undefined;
}

/**
 * A decrease on a 429/503, or a note of it, or nothing (see the file comment); with evidence, also the test that tells
 * a line from storms: a cut whose lower rate still draws 429s after the provider's window refilled is tried against
 * the rate before it. A line refuses more of a higher rate; storms refuse the same share of any.
 */
export function onThrottled(
  state: AdaptiveRateState,
  nowMs: number,
  options: AdaptiveRateOptions,
  given?: ThrottleEvidence,
): AdaptiveRateState {
  const o = resolve(options);
  // The report that brought this throttle is left out of every share: it is chosen for having a 429 (a storm that hit
  // one batch whole is all of it), so counting it would make storms look like a line to a container with few starts.
  const evidence = given && { history: given.history.slice(0, -1) };
  const tested = evidence && throttledInTest(state, nowMs, o, evidence);
  if (tested) return tested;
  if (state.testFromMs !== undefined) state = (({ testFromMs: _t, testShare: _s, ...rest }) => rest)(state);
  const c = cycleOf(state, o);
  const calm = evidence && throttledInCalm(state, nowMs, o, evidence);
  if (calm) return calm;
  const afterCut = evidence && c && nowMs < c.probeAt ? throttledAfterCut(state, nowMs, o, evidence) : undefined;
  if (afterCut) return afterCut;
  // The starts a probe adds to a window: the margin a ramp's estimate is taken down by.
  const probeStarts = Math.max(1, Math.floor((o.increaseStep * o.probeMs) / o.windowMs));
  const cycle = (rate: number, heldBy: HeldBy): AdaptiveRateState => ({
    ...calmOf(state, nowMs),
    rate: Math.max(o.floor, Math.min(o.ceiling, rate)),
    decreasedAtMs: nowMs,
    heldBy,
  });
  // With evidence, a cut remembers the rate it came from: where its test goes back to (see above).
  const cut = (rate: number): AdaptiveRateState => ({
    ...cycle(Math.floor(rate * o.decreaseFactor), 'cut'),
    ...(evidence ? { from: Math.min(o.ceiling, rate) } : {}),
  });
  if (!c) return cut(Math.min(o.ceiling, state.rate));
  if (nowMs < c.probeAt) {
    const since = nowMs - (state.decreasedAtMs as number);
    if (since < o.tailMs) return state;
    if (since < o.decreaseCooldownMs) {
      // Noted at most once per tail (each note is a write): it moves the probe to a hold after it.
      if (state.throttledAtMs !== undefined && nowMs - state.throttledAtMs < o.tailMs) return state;
      return { ...state, throttledAtMs: nowMs, throttles: (state.throttles ?? 0) + 1 };
    }
    return (state.heldBy ?? 'cut') === 'back' && (state.throttles ?? 0) <= 1 ? cycle(c.held - 1, 'cut') : cut(c.held);
  }
  if (nowMs < c.rampAt) {
    // A window past the verdict with no ramp (nothing was sent): the held rate's throttle, as after a hold's cooldown.
    if (nowMs >= c.verdictAt + o.verdictMs + o.windowMs)
      return (state.heldBy ?? 'cut') === 'back' ? cycle(c.held - 1, 'cut') : cut(c.held);
    // A held rate that drew a 429 too gives up one start: less than the probe adds, so the next probe still fails
    // rather than passing on the slack the step down made (a passing probe ramps, and a ramp costs more 429s).
    const drew = state.throttles ?? 0;
    return drew === 0 ? cycle(c.held, 'back') : drew === 1 ? cycle(c.held - 1, 'back') : cut(c.held);
  }
  const step = rampStep(c, nowMs, o);
  if (step >= c.stepsToCeiling && nowMs - (c.rampAt + c.stepsToCeiling * o.recoverEveryMs) >= o.windowMs)
    return cut(o.ceiling);
  // What the provider's window held no later than its first 429: the rate paced over the window that ended two reports'
  // delays ago (a stalled container reports late, and a ramp climbs fast), less a probe's worth of starts, since a
  // fleet sends a little less than it paces and the estimate is only as good.
  // Trusted only for a ramp that got well past the held rate: one throttled within a tenth of it is more likely to
  // have run into a gap in the provider's window (starts the fleet paced but did not send: a stall, missed slots)
  // than to have found a line that moved; it proves nothing past the held rate, and goes back to it.
  const until = nowMs - 2 * o.verdictMs;
  const mean = meanRate(c, until - o.windowMs, until, o);
  const took = mean - c.held >= c.held / 10 ? Math.floor(mean) - probeStarts : c.held;
  return cycle(Math.min(rampRate(c, step, o) - 1, Math.max(c.held, took)), 'back');
}

/**
 * Quiet starts after a cycle's verdict: evidence for the ramp (quietFromMs, quietAtMs: local to the state's holder).
 * Nothing shared changes, the rate rises with time (rateAt). A state read before the ceiling was lowered is brought
 * down to it.
 */
export function onSucceeded(state: AdaptiveRateState, nowMs: number, options: AdaptiveRateOptions): AdaptiveRateState {
  const o = resolve(options);
  const clamped = state.rate > o.ceiling ? { ...state, rate: o.ceiling } : state;
  const c = cycleOf(clamped, o);
  if (!c || nowMs < c.verdictAt + o.verdictMs || (clamped.quietAtMs !== undefined && nowMs <= clamped.quietAtMs))
    return clamped;
  return { ...clamped, quietFromMs: clamped.quietFromMs ?? nowMs, quietAtMs: nowMs };
}
