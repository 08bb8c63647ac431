// Benchmark scenario (`npm run bench:pacing -- --scenario quota-drop`), outside the deployed system: the provider's
// true quota falls below the configured allowance for a while, then comes back, and nobody tells the fleet. The same
// fleet as the default scenario (K instances, each its own limiter on one shared DynamoDB item) drains a backlog that
// never runs out, once with the adaptive rate (AdaptiveDynamoDbRateLimiter, told of each batch's 429s the way the
// consumer tells it) and once at the fixed configured rate, against the same schedule.
//
// What it reports, per window of the schedule: the provider's true allowance, the starts it accepted, its 429s, and the
// adaptive rate; over the run, utilization of the TRUE allowance (accepted / the sum of the windows' allowances),
// throttledShare (429s / requests), and recoveryWindows (whole windows after the restore before the first window whose
// accepted starts reach 90% of the restored quota; null if none does).
//
// Time is compressed as in the default scenario: a 1 s window stands for a production window of a minute, so what is
// set in proportion to the window is kept in proportion: the short wait (the consumer's 10 s in 60 s is a sixth of the
// window; 5 s here would book five windows ahead at a rate the provider no longer takes), and the adaptive rule's own
// times, which AdaptiveDynamoDbRateLimiter derives from the window.
import { AdaptiveDynamoDbRateLimiter } from '../lambda/adapters/adaptiveRateLimiter';
import { DynamoDbRateLimiter, type RateLimiter } from '../lambda/adapters/rateLimiter';
import type { AdaptiveRateOptions } from '../lambda/core/pacing/adaptiveRate';
import { gcraLimits, type RateLimitSpec } from '../lambda/core/pacing/gcra';
import { maxInAnyWindow } from '../lambda/core/pacing/slidingWindow';
import { sleepUntil } from '../lambda/core/pacing/sleep';
import {
  Backlog,
  LEAD_MS,
  type LimiterRequests,
  limiterInstance,
  newRun,
  now,
  type Run,
  send,
  startLimiterTable,
  withDefaults,
  type LimiterTable,
} from './pacingFleet';
import { Prng } from '../chaos/prng';
import { type ProviderLog, startQuotaProviderProcess } from './quotaProviderProcess';

/** A stretch of the schedule: `windows` windows at `share` of the configured allowance. */
export interface QuotaPhase {
  windows: number;
  share: number;
}

export type QuotaDropMode = 'adaptive' | 'fixed';

export interface QuotaDropOptions {
  /** The window the quota is counted over. @default 1000 */
  windowMs?: number;
  /**
   * The configured allowance (the adaptive rate's ceiling, the fixed rate) and the provider's full quota. @default 200
   *
   * Why 200, not the default scenario's 20: finding a restored quota within a window or two means probing above the
   * lowered one about once a window, and a probe that finds the line costs at least one 429. At 10 starts a window
   * (20 halved) that alone is a 10% share; the 2% goal needs a lowered quota of about a hundred starts a window.
   */
  allowedPerWindow?: number;
  /** The provider's quota over time. @default 10 windows at 1, 30 at 0.5, 10 at 1 */
  phases?: QuotaPhase[];
  /** Concurrent consumer instances K. @default 8 */
  instances?: number;
  /** Messages per batch an instance takes (one limiter call, one rate report per batch). @default 10 */
  batchSize?: number;
  /** The short wait. @default windowMs / 6 (see the file comment) */
  maxWaitMs?: number;
  /** Window stretch absorbing start-time jitter. @default 25 */
  safetyMarginMs?: number;
  /** An instance that wakes later than this after its reserved start gives the slot up. @default 10 */
  lateToleranceMs?: number;
  /** Overrides of the adaptive rule (AdaptiveDynamoDbRateLimiter's `adaptive`), for tuning. @default none */
  adaptive?: Partial<Omit<AdaptiveRateOptions, 'ceiling'>>;
  /** How long an instance trusts its copy of the rate. @default AdaptiveDynamoDbRateLimiter's */
  refreshMs?: number;
  /** Which runs, in order. @default ['adaptive', 'fixed'] */
  modes?: QuotaDropMode[];
  /**
   * Transient 429 storms on top of the quota, as `npm run chaos` injects them, in the window's proportion: storms of
   * W/120 to W/30 every W/15 to W/5 (the chaos mix's 0.5-2 s every 4-12 s in a 60 s window), placed by `seed`. The
   * provider refuses every request inside one, whatever the rate. @default none
   */
  storms?: { seed: number };
}

/** A storm: every request in [fromMs, toMs) refused, ms after the schedule's start. */
export interface StormSpan {
  fromMs: number;
  toMs: number;
}

/** Storms over `totalMs`, in the chaos mix's proportion of the window (see QuotaDropOptions.storms), from a seed. */
export function planStorms(totalMs: number, windowMs: number, seed: number): StormSpan[] {
  const dice = new Prng(seed);
  const between = (lo: number, hi: number) => lo + dice.next() * (hi - lo);
  const storms: StormSpan[] = [];
  for (let t = between(windowMs / 15, windowMs / 5); t < totalMs; ) {
    const length = between(windowMs / 120, windowMs / 30);
    storms.push({ fromMs: Math.round(t), toMs: Math.round(Math.min(totalMs, t + length)) });
    t += length + between(windowMs / 15, windowMs / 5);
  }
  return storms;
}

/** The provider's schedule: each window's allowance, with the storms cut in as steps to 0 and back. */
export function scheduleSteps(
  allowed: number[],
  windowMs: number,
  storms: StormSpan[],
): { atMs: number; allowedPerWindow: number }[] {
  const at = (t: number) => allowed[Math.min(allowed.length - 1, Math.floor(t / windowMs))];
  const points = [
    ...allowed.map((a, k) => ({ atMs: k * windowMs, allowedPerWindow: a })),
    ...storms.flatMap((s) => [
      { atMs: s.fromMs, allowedPerWindow: 0 },
      { atMs: s.toMs, allowedPerWindow: at(s.toMs) },
    ]),
  ].sort((x, y) => x.atMs - y.atMs);
  // A window's own step inside a storm keeps the storm's 0 until the storm ends.
  return points.map((p) =>
    p.allowedPerWindow > 0 && storms.some((s) => p.atMs > s.fromMs && p.atMs < s.toMs)
      ? { ...p, allowedPerWindow: 0 }
      : p,
  );
}

/** One window of the schedule, as the provider saw it. */
export interface QuotaWindow {
  /** Its start, ms after the schedule's start. */
  atMs: number;
  /** The provider's true quota in it. */
  allowed: number;
  /** Requests it accepted (starts). */
  starts: number;
  /** Requests it answered 429. */
  throttled: number;
  /** The rate the fleet paced at as the window ended (the adaptive rate, as the shared state gives it; fixed: configured). */
  rate: number;
}

/** One phase of the schedule, summed. */
export interface PhaseSummary {
  /** Its first window's index. */
  fromWindow: number;
  windows: number;
  /** The provider's quota per window in it. */
  allowedPerWindow: number;
  starts: number;
  throttled: number;
  /** Its starts over its windows' allowance. */
  utilization: number;
  /** Its 429s over its requests. */
  throttledShare: number;
}

export interface QuotaDropModeReport {
  /** The configured allowance: the fixed rate, the adaptive rate's ceiling. */
  configuredPerWindow: number;
  /** Accepted starts over the sum of the windows' true allowances. */
  utilization: number;
  /** 429s over requests. */
  throttledShare: number;
  /** Whole windows after the restore before one reached 90% of the restored quota; null: none did, or no restore. */
  recoveryWindows: number | null;
  requests: number;
  accepted: number;
  throttled: number;
  /** The most requests in any sliding window: never above the configured allowance (the fleet-wide guarantee). */
  maxStartsInAnyWindow: number;
  missedSlots: number;
  limiterErrors: number;
  /** Lowest and last adaptive rate over the run (at window ends and decreases). */
  lowestRate: number;
  finalRate: number;
  /** Every decrease of the shared rate, ms after the schedule's start (rises need no write: they follow from the time). */
  rateChanges: { atMs: number; from: number; to: number }[];
  dynamodb: LimiterRequests;
  /** Per phase: where the 429s and the unused allowance were (the drop's first window is the provider's own refusal). */
  phases: PhaseSummary[];
  /** With storms: accepted starts outside them against the true allowance over the time outside them. */
  outsideStorms?: { utilization: number; stormMs: number; accepted: number; allowed: number };
  windows: QuotaWindow[];
}

export interface QuotaDropGoals {
  utilization: number;
  throttledShare: number;
  recoveryWindows: number;
}

export interface QuotaDropReport {
  scenario: 'quota-drop';
  windowMs: number;
  allowedPerWindow: number;
  instances: number;
  phases: QuotaPhase[];
  /** The storms cut into the schedule (QuotaDropOptions.storms), ms after its start; none without. */
  storms: StormSpan[];
  /** What the adaptive rate must meet: utilization at least, throttled share and recovery windows at most. */
  goals: QuotaDropGoals;
  adaptive?: QuotaDropModeReport & { goalsMet: Record<keyof QuotaDropGoals, boolean> };
  fixed?: QuotaDropModeReport;
}

export const QUOTA_DROP_GOALS: QuotaDropGoals = { utilization: 0.9, throttledShare: 0.02, recoveryWindows: 2 };

export const QUOTA_DROP_DEFAULTS = {
  windowMs: 1000,
  allowedPerWindow: 200,
  phases: [
    { windows: 10, share: 1 },
    { windows: 30, share: 0.5 },
    { windows: 10, share: 1 },
  ] as QuotaPhase[],
  instances: 8,
  batchSize: 10,
  safetyMarginMs: 25,
  lateToleranceMs: 10,
  modes: ['adaptive', 'fixed'] as QuotaDropMode[],
};

/** The short wait the scenario uses by default: the consumer's share of a production window. */
export const defaultQuotaDropMaxWaitMs = (windowMs: number): number => Math.round(windowMs / 6);

/** The schedule's allowance per window; throws naming every bad phase. */
export function phaseAllowances(phases: QuotaPhase[], allowedPerWindow: number): number[] {
  const problems = phases.flatMap((p, i) => [
    ...(Number.isSafeInteger(p.windows) && p.windows >= 1
      ? []
      : [`phase ${i}: windows must be a positive integer (got ${p.windows})`]),
    ...(p.share > 0 && p.share <= 1 && Math.round(p.share * allowedPerWindow) >= 1
      ? []
      : [
          `phase ${i}: share must be in (0, 1] and leave at least 1 start per window of ${allowedPerWindow} (got ${p.share})`,
        ]),
  ]);
  if (phases.length === 0) problems.push('at least one phase is needed');
  if (problems.length > 0) throw new Error(`invalid quota-drop phases: ${problems.join('; ')}`);
  return phases.flatMap((p) => Array.from({ length: p.windows }, () => Math.round(p.share * allowedPerWindow)));
}

/** The window the quota last rose in (the restore), or undefined when it never rises. */
export function restoreWindow(allowed: number[]): number | undefined {
  for (let k = allowed.length - 1; k > 0; k--) if (allowed[k] > allowed[k - 1]) return k;
  return undefined;
}

/** Whole windows from `restore` before one whose starts reach 90% of its allowance; null when none does. */
export function recoveryWindows(
  windows: Pick<QuotaWindow, 'allowed' | 'starts'>[],
  restore: number | undefined,
): number | null {
  if (restore === undefined) return null;
  for (let k = restore; k < windows.length; k++) if (windows[k].starts >= 0.9 * windows[k].allowed) return k - restore;
  return null;
}

const round = (n: number, digits: number): number => Number(n.toFixed(digits));

/** Runs the scenario's modes one after another, each against a fresh provider on the same schedule. */
export async function runQuotaDropBench(input: QuotaDropOptions = {}): Promise<QuotaDropReport> {
  const { adaptive, refreshMs, maxWaitMs: _, storms: stormOption, ...common } = input;
  const o = { ...withDefaults(QUOTA_DROP_DEFAULTS, common), adaptive, refreshMs };
  const maxWaitMs = input.maxWaitMs ?? defaultQuotaDropMaxWaitMs(o.windowMs);
  const allowed = phaseAllowances(o.phases, o.allowedPerWindow);
  const storms = stormOption ? planStorms(allowed.length * o.windowMs, o.windowMs, stormOption.seed) : [];
  const spec: RateLimitSpec = {
    startsPerInterval: o.allowedPerWindow,
    intervalMs: o.windowMs,
    safetyMarginMs: o.safetyMarginMs,
  };
  const table = await startLimiterTable();
  const report: QuotaDropReport = {
    scenario: 'quota-drop',
    windowMs: o.windowMs,
    allowedPerWindow: o.allowedPerWindow,
    instances: o.instances,
    phases: o.phases,
    storms,
    goals: QUOTA_DROP_GOALS,
  };
  try {
    for (const mode of o.modes) {
      const result = await runMode(mode, table, spec, allowed, { ...o, maxWaitMs, storms });
      if (mode === 'adaptive') report.adaptive = { ...result, goalsMet: goalsMet(result) };
      else report.fixed = result;
    }
  } finally {
    await table.close();
  }
  return report;
}

function goalsMet(m: QuotaDropModeReport): Record<keyof QuotaDropGoals, boolean> {
  return {
    utilization: m.utilization >= QUOTA_DROP_GOALS.utilization,
    throttledShare: m.throttledShare <= QUOTA_DROP_GOALS.throttledShare,
    recoveryWindows: m.recoveryWindows !== null && m.recoveryWindows <= QUOTA_DROP_GOALS.recoveryWindows,
  };
}

type ModeOptions = typeof QUOTA_DROP_DEFAULTS &
  Pick<QuotaDropOptions, 'adaptive' | 'refreshMs'> & { maxWaitMs: number; storms: StormSpan[] };

/** The fleet for one mode: adaptive limiters (each its own copy of the shared rate) or fixed ones, one per instance. */
function fleet(mode: QuotaDropMode, table: LimiterTable, spec: RateLimitSpec, o: ModeOptions) {
  const { client, tableName } = table;
  const adaptive =
    mode === 'adaptive'
      ? Array.from(
          { length: o.instances },
          () =>
            new AdaptiveDynamoDbRateLimiter({
              tableName,
              client,
              limits: spec,
              leadMs: LEAD_MS,
              adaptive: o.adaptive,
              refreshMs: o.refreshMs,
            }),
        )
      : undefined;
  const limiters: RateLimiter[] =
    adaptive ??
    Array.from(
      { length: o.instances },
      () => new DynamoDbRateLimiter({ tableName, client, limits: spec, leadMs: LEAD_MS }),
    );
  return { adaptive, limiters };
}

/** What one mode's run saw: the provider's log, the fleet's run, when the schedule started, and the sampled rates. */
interface Measured {
  log: ProviderLog;
  run: Run;
  startAt: number;
  sampled: number[];
}

/** Runs the fleet against the provider's schedule, after a warm-up outside the measurement. */
async function measure(
  mode: QuotaDropMode,
  table: LimiterTable,
  spec: RateLimitSpec,
  allowed: number[],
  o: ModeOptions,
): Promise<Measured> {
  const key = `bench-quota-drop-${mode}`;
  const { adaptive, limiters } = fleet(mode, table, spec, o);
  const provider = await startQuotaProviderProcess({ allowedPerWindow: o.allowedPerWindow, windowMs: o.windowMs });
  // Never starved: more than the whole schedule can accept, so every window has work waiting.
  const backlog = new Backlog(allowed.reduce((a, b) => a + b, 0) + 2 * o.allowedPerWindow + o.instances * o.batchSize);
  // The rate as the first instance paces it (its copy of the state and its own evidence for the ramp), sampled as each
  // window ends; a sample only reads the state when the instance's copy is due for a refresh anyway.
  const sampler = adaptive?.[0];
  const sampled: number[] = [];
  let log;
  let run;
  let startAt = 0;
  try {
    // Warm-up outside the measurement, as in a warm container: connections, the limiter's write, conflict and read
    // paths, and the rate item's read, compare-and-set and conflict paths (one cut, raced for), all on another key.
    await Promise.all(Array.from({ length: o.instances }, () => send(provider.warmUpUrl, -1)));
    for (let r = 0; r < 3; r++)
      await Promise.all(limiters.map((l) => l.acquire(`${key}-warm-up`, 1, { maxWaitMs: 60_000 })));
    if (adaptive) await Promise.all(adaptive.map((l) => l.throttled(`${key}-warm-up`)));
    // The schedule starts a moment from now, once the provider has it; the fleet starts with it.
    startAt = Math.ceil(now()) + 200;
    await provider.schedule(
      scheduleSteps(allowed, o.windowMs, o.storms).map((step) => ({ ...step, atMs: startAt + step.atMs })),
    );
    run = newRun(backlog, provider.url, startAt + allowed.length * o.windowMs, key);
    await sleepUntil(startAt, now);
    table.counter.start();
    const sampling = (async () => {
      for (let k = 0; k < allowed.length; k++) {
        await sleepUntil(startAt + (k + 1) * o.windowMs - 1, now);
        sampled.push(sampler ? await sampler.currentRate(key) : o.allowedPerWindow);
      }
    })();
    await Promise.all([
      ...limiters.map((limiter, i) =>
        limiterInstance(run!, limiter, {
          batchSize: o.batchSize,
          maxWaitMs: o.maxWaitMs,
          lateToleranceMs: o.lateToleranceMs,
          spacingMs: gcraLimits(spec).emissionIntervalUs / 1000,
          feedback: adaptive?.[i],
        }),
      ),
      sampling,
    ]);
  } finally {
    backlog.dispose();
    log = await provider.finish();
  }
  return { log, run, startAt, sampled };
}

/** Each phase's starts, 429s and utilization, from the windows in order (the phases cover them all). */
export function phaseSummaries(windows: QuotaWindow[], phases: readonly { windows: number }[]): PhaseSummary[] {
  let fromWindow = 0;
  return phases.map((p): PhaseSummary => {
    const slice = windows.slice(fromWindow, fromWindow + p.windows);
    const sum = (f: (w: QuotaWindow) => number) => slice.reduce((a, w) => a + f(w), 0);
    const [phaseStarts, phaseThrottled, phaseAllowed] = [
      sum((w) => w.starts),
      sum((w) => w.throttled),
      sum((w) => w.allowed),
    ];
    const summary = {
      fromWindow,
      windows: p.windows,
      allowedPerWindow: slice[0].allowed,
      starts: phaseStarts,
      throttled: phaseThrottled,
      utilization: round(phaseStarts / phaseAllowed, 4),
      throttledShare:
        phaseStarts + phaseThrottled === 0 ? 0 : round(phaseThrottled / (phaseStarts + phaseThrottled), 4),
    };
    fromWindow += p.windows;
    return summary;
  });
}

/**
 * Utilization over the time outside the storms: the starts accepted then (`accepted`, ms from the schedule's start)
 * against the true allowance over that time, window by window.
 */
export function outsideStormsFigures(
  allowed: readonly number[],
  accepted: readonly number[],
  windowMs: number,
  storms: readonly StormSpan[],
): NonNullable<QuotaDropModeReport['outsideStorms']> {
  const inStorm = (t: number) => storms.some((st) => t >= st.fromMs && t < st.toMs);
  let allowedOutside = 0;
  allowed.forEach((a, k) => {
    const [from, to] = [k * windowMs, (k + 1) * windowMs];
    const stormMs = storms.reduce((sum, st) => sum + Math.max(0, Math.min(to, st.toMs) - Math.max(from, st.fromMs)), 0);
    allowedOutside += (a * (windowMs - stormMs)) / windowMs;
  });
  const acceptedOutside = accepted.filter((t) => !inStorm(t)).length;
  return {
    utilization: round(acceptedOutside / allowedOutside, 4),
    stormMs: storms.reduce((sum, st) => sum + st.toMs - st.fromMs, 0),
    accepted: acceptedOutside,
    allowed: Math.round(allowedOutside),
  };
}

async function runMode(
  mode: QuotaDropMode,
  table: LimiterTable,
  spec: RateLimitSpec,
  allowed: number[],
  o: ModeOptions,
): Promise<QuotaDropModeReport> {
  const { log, run, startAt, sampled } = await measure(mode, table, spec, allowed, o);
  const endAt = startAt + allowed.length * o.windowMs;
  const inRun = (t: number) => t >= startAt && t < endAt;
  const arrivals = log.arrivals.filter(inRun);
  const accepted = log.accepted.filter(inRun);
  const dynamodb = table.counter.stop(arrivals.length, mode === 'adaptive');
  const perWindow = (times: number[]) => {
    const counts = allowed.map(() => 0);
    for (const t of times) counts[Math.floor((t - startAt) / o.windowMs)]++;
    return counts;
  };
  const starts = perWindow(accepted);
  const requests = perWindow(arrivals);
  const changes = run.rateChanges.map((c) => ({ atMs: Math.round(c.atMs - startAt), from: c.from, to: c.to }));
  const windows: QuotaWindow[] = allowed.map((a, k) => ({
    atMs: k * o.windowMs,
    allowed: a,
    starts: starts[k],
    throttled: requests[k] - starts[k],
    rate: sampled[k] ?? o.allowedPerWindow,
  }));
  const rates = [o.allowedPerWindow, ...changes.map((c) => c.to), ...sampled];
  const throttled = arrivals.length - accepted.length;
  const outsideStorms =
    o.storms.length > 0
      ? outsideStormsFigures(
          allowed,
          accepted.map((t) => t - startAt),
          o.windowMs,
          o.storms,
        )
      : undefined;
  return {
    configuredPerWindow: o.allowedPerWindow,
    utilization: round(accepted.length / allowed.reduce((a, b) => a + b, 0), 4),
    throttledShare: arrivals.length === 0 ? 0 : round(throttled / arrivals.length, 4),
    recoveryWindows: recoveryWindows(windows, restoreWindow(allowed)),
    requests: arrivals.length,
    accepted: accepted.length,
    throttled,
    maxStartsInAnyWindow: maxInAnyWindow(arrivals, o.windowMs),
    missedSlots: run.missedSlots,
    limiterErrors: run.limiterErrors,
    lowestRate: Math.min(...rates),
    finalRate: sampled[sampled.length - 1] ?? o.allowedPerWindow,
    rateChanges: changes,
    dynamodb,
    phases: phaseSummaries(windows, o.phases),
    ...(outsideStorms ? { outsideStorms } : {}),
    windows,
  };
}

/** The report as text: each mode's figures against the goals, then the windows side by side. */
export function formatQuotaDrop(report: QuotaDropReport): string {
  const lines: string[] = [];
  const g = report.goals;
  const restore = restoreWindow(phaseAllowances(report.phases, report.allowedPerWindow));
  lines.push(
    `quota-drop: ${report.instances} instances, configured ${report.allowedPerWindow} per ${report.windowMs} ms; provider quota ` +
      report.phases
        .map((p) => `${p.windows} windows at ${Math.round(p.share * report.allowedPerWindow)}`)
        .join(', then '),
  );
  const summary = (name: string, m: QuotaDropModeReport | undefined, met?: Record<keyof QuotaDropGoals, boolean>) => {
    if (!m) return;
    const mark = (ok: boolean | undefined) => (ok === undefined ? '' : ok ? ' (met)' : ' (NOT MET)');
    lines.push(
      `${name.padEnd(8)} utilization ${m.utilization} (goal >= ${g.utilization})${mark(met?.utilization)}, ` +
        `throttled share ${m.throttledShare} (goal <= ${g.throttledShare})${mark(met?.throttledShare)}, ` +
        `recovery ${m.recoveryWindows ?? (restore === undefined ? 'n/a (no restore)' : 'never')} windows (goal <= ${g.recoveryWindows})${mark(met?.recoveryWindows)}; ` +
        `${m.accepted} accepted, ${m.throttled} 429s of ${m.requests} requests, max ${m.maxStartsInAnyWindow} in any window, ` +
        (m.outsideStorms ? `utilization outside ${report.storms.length} storms ${m.outsideStorms.utilization}, ` : '') +
        `rate low ${m.lowestRate} last ${m.finalRate}, ${m.dynamodb.writesPerStart} writes / ${m.dynamodb.readsPerStart} reads / ` +
        `${m.dynamodb.lostRacesPerStart} lost races per start`,
    );
  };
  summary('adaptive', report.adaptive, report.adaptive?.goalsMet);
  summary('fixed', report.fixed);
  for (const [name, m] of [
    ['adaptive', report.adaptive],
    ['fixed', report.fixed],
  ] as const) {
    if (!m) continue;
    lines.push(
      `${name.padEnd(8)} by phase: ` +
        m.phases
          .map(
            (p) =>
              `windows ${p.fromWindow}-${p.fromWindow + p.windows - 1} at ${p.allowedPerWindow}: utilization ${p.utilization}, ${p.throttled} 429s (${p.throttledShare})`,
          )
          .join('; '),
    );
  }
  lines.push('window  allowed  adaptive: starts 429s rate  fixed: starts 429s');
  const n = (report.adaptive ?? report.fixed)?.windows.length ?? 0;
  for (let k = 0; k < n; k++) {
    const a = report.adaptive?.windows[k];
    const f = report.fixed?.windows[k];
    const w = (a ?? f) as QuotaWindow;
    lines.push(
      `${String(k).padStart(6)}  ${String(w.allowed).padStart(7)}  ` +
        `${a ? `${String(a.starts).padStart(16)} ${String(a.throttled).padStart(4)} ${String(a.rate).padStart(4)}` : ' '.repeat(26)}  ` +
        `${f ? `${String(f.starts).padStart(13)} ${String(f.throttled).padStart(4)}` : ''}`,
    );
  }
  return `${lines.join('\n')}\n`;
}
