// Fleet-wide pacing edge, adaptive: the shared limiter at a rate that 429s lower and time raises again, up to the
// configured ceiling. The rate's state is one DynamoDB item next to the limiter's own, so every instance uses it.
//
// Hand-written for the same reason as rateLimiter.ts: the rule is the pure core's (core/pacing/adaptiveRate.ts: after
// each decrease a hold, a probe of a start or two, a wait for its verdict, then a doubling ramp, all a function of the
// time since the decrease); this file stores its state with compare-and-set writes, keeps each container's evidence
// for the ramp, and books no further ahead than `rampMaxWaitMs` on the ramp. Costs, per downstream key:
//   - a read of the rate item at most once per `refreshMs` per container (eventually consistent; cached between);
//   - a write only on a throttle that changes the state: a decrease (at most one per throttled probe or ramp, or per
//     cooldown of a held rate), or a note that holds the probe back (at most one per tail); fleet-wide, since a lost
//     race re-reads and usually finds the change already made. Rising costs nothing: every container computes the
//     probe and the ramp from the state it read, at the same times. Quiet starts (succeeded) cost nothing at all.
//
// Why mixing rates keeps the guarantee: while a cut propagates, instances pace the same TAT item with different
// emission intervals. Cut rates use burst 1, so a token's tolerance equals its own interval; for the last token l of any
// window, (k - 1) * T_ceiling + T_l <= TAT_l - start_f < W + T_l, which gives k <= R as in gcra.ts. The configured
// burst is kept only at the ceiling, where the proof in gcra.ts applies unchanged.
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import {
  initialRate,
  onSucceeded,
  onThrottled,
  rateAt,
  type AdaptiveRateOptions,
  type AdaptiveRateState,
  type OutcomeReport,
} from '../core/pacing/adaptiveRate';
import type { RateLimitSpec } from '../core/pacing/gcra';
import { dynamoClient } from './clients';
import {
  DynamoDbRateLimiter,
  RateLimiterError,
  type AcquireOptions,
  type Acquisition,
  type RateLimiter,
} from './rateLimiter';

/** A change this call made to the shared rate; undefined when it made none (another instance may have). */
export interface RateChange {
  from: number;
  to: number;
}

/** What the consumer reports back after an invocation, so the shared rate can adapt. */
export interface RateFeedback {
  /** The downstream answered 429/503 on `key`: lower the shared rate, or note the throttle (core/pacing/adaptiveRate.ts). */
  throttled(key: string, counts?: StartCounts): Promise<RateChange | undefined>;
  /** Starts on `key` succeeded without a throttle: evidence the rate may climb (no write; nothing to report). */
  succeeded(key: string, counts?: StartCounts): Promise<RateChange | undefined>;
}

/**
 * An invocation's downstream calls on a key and how many were answered 429/503. With them the rule can test whether the
 * 429s are a line's or storms' (core/pacing/adaptiveRate.ts); without, every throttle is a line's.
 */
export interface StartCounts {
  starts: number;
  throttles: number;
}

/** Reports a container keeps per key: a few windows of them. */
const MAX_REPORTS = 512;

export interface AdaptiveDynamoDbRateLimiterOptions {
  /** The ceiling allowance (after headroom), its burst and jitter margin: what DynamoDbRateLimiter takes. */
  limits: RateLimitSpec;
  /** The limiter table: GCRA items under `key`, rate items under `key#rate`. */
  tableName: string;
  /**
   * The rule's tuning, in the window W = limits.intervalMs. @default adaptiveDefaults(limits): { floor: 1,
   * decreaseFactor: 0.5, windowMs: W, decreaseCooldownMs: W, holdMs: W / 2, cutHoldMs: 5W / 4, probeMs: W / 4,
   * verdictMs: W / 4, tailMs: W / 4, increaseStep: 4% of the ceiling (at least 1), recoverEveryMs: W / 6 }
   *
   * Why these (bench:pacing --scenario quota-drop measures them against a quota that halves and comes back):
   *   - halving, not the SDK's 0.7: when a quota falls, every start of the next half window is refused whatever the
   *     rate (the provider's window is still full of the old rate), and a cut that leaves the rate over the new line
   *     pays for most of another window of excess before the next cut (measured: about 110 429s for the drop at 0.7
   *     against 65 at 0.5, which took the run over its 2% budget);
   *   - the probe, 4% of the ceiling for a quarter window, is one or two starts more per window: refused only if the
   *     held rate is at the line, so a quota that stays low costs a 429 or two a cycle of about a window;
   *   - the verdict, a quarter window, covers a report's delay (a batch's slots are booked up to the short wait ahead);
   *   - the ramp doubles its step every sixth of a window, so from a held rate at half the ceiling it is back at the
   *     ceiling within about W / 2 + W / 4 + W / 4 + 5W / 6 of the restore: under two windows;
   *   - with the callers' counts (`throttled(key, counts)`), a cut is tested against the rate before it (the core's
   *     "A line or storms"): it then holds 2W, and storms found that way are tolerated for 10W, renewed by more of them.
   */
  adaptive?: Partial<Omit<AdaptiveRateOptions, 'ceiling'>>;
  /**
   * How long a container trusts the rate item it last read: how fast a decrease another container wrote reaches this
   * one (rising needs no read: it follows from the time). @default min(5000, W / 6): a cut that took five windows to
   * reach the fleet (5 s at a 1 s window) would keep most of the fleet over a lowered quota for those five windows;
   * at a 60 s window, 5 s is already a twelfth of it. A container that is throttled learns a cut sooner, from the
   * conflict its own report meets.
   */
  refreshMs?: number;
  /**
   * While the rate ramps past the probe's, the furthest ahead a slot is booked, whatever the caller's maxWaitMs: a
   * rate not yet proven can meet the provider's line at any moment, and every slot booked at it is started anyway (a
   * container does not give booked slots back), so this horizon is most of what a ramp that meets the line costs in
   * 429s. Not much shorter, though: a horizon of a few of the item's round trips leaves contending containers their
   * slots too late to start on. The caller asks again for what was not granted (the consumer's slot pool refills, or
   * defers by the hint). @default W / 12
   */
  rampMaxWaitMs?: number;
  /** Passed to each DynamoDbRateLimiter. @default 0 */
  leadMs?: number;
  /** A rate item idle this long after its last change may be deleted by TTL (and the rate is the ceiling again). @default 86400 */
  idleTtlSeconds?: number;
  /** Compare-and-set attempts per change before giving up. @default 4 */
  maxAttempts?: number;
  /** @default dynamoClient() */
  client?: DynamoDBClient;
  /** Epoch ms. @default Date.now */
  clock?: () => number;
}

/** The stored rate with the version its compare-and-set expects; version 0 means no item yet. */
interface Versioned {
  state: AdaptiveRateState;
  version: number;
}

export const rateItemKey = (key: string): string => `${key}#rate`;

const STATE_FIELDS = [
  'rate',
  'decreasedAtMs',
  'heldBy',
  'throttledAtMs',
  'throttles',
  'from',
  'testFromMs',
  'testShare',
  'calmShare',
  'calmUntilMs',
] as const;
const sameState = (a: AdaptiveRateState, b: AdaptiveRateState): boolean => STATE_FIELDS.every((f) => a[f] === b[f]);

/** The rule's defaults for a limit (see AdaptiveDynamoDbRateLimiterOptions.adaptive for why each). */
export function adaptiveDefaults(limits: RateLimitSpec): AdaptiveRateOptions {
  const w = limits.intervalMs;
  return {
    ceiling: limits.startsPerInterval,
    floor: 1,
    decreaseFactor: 0.5,
    windowMs: w,
    decreaseCooldownMs: w,
    holdMs: Math.round(w / 2),
    cutHoldMs: Math.round(w + w / 4),
    tailMs: Math.round(w / 4),
    increaseStep: Math.max(1, Math.round(limits.startsPerInterval * 0.04)),
    probeMs: Math.max(1, Math.round(w / 4)),
    verdictMs: Math.round(w / 4),
    recoverEveryMs: Math.max(1, Math.round(w / 6)),
  };
}

/** How long a container trusts its copy of the rate by default (see AdaptiveDynamoDbRateLimiterOptions.refreshMs). */
export const defaultRefreshMs = (intervalMs: number): number => Math.min(5000, Math.max(1, Math.round(intervalMs / 6)));

/** Keys whose rate a container keeps: per-key limits can reach a million keys; a forgotten one is read again. */
const MAX_CACHED_RATES = 10_000;

export class AdaptiveDynamoDbRateLimiter implements RateLimiter, RateFeedback {
  public readonly tableName: string;
  private readonly limits: RateLimitSpec;
  private readonly rule: AdaptiveRateOptions;
  private readonly refreshMs: number;
  private readonly rampMaxWaitMs: number;
  private readonly leadMs: number;
  private readonly idleTtlSeconds: number;
  private readonly maxAttempts: number;
  private readonly client: DynamoDBClient;
  private readonly clock: () => number;
  /** One GCRA limiter per rate in use: they share the key's TAT item, each spacing its own tokens. */
  private readonly byRate = new Map<number, DynamoDbRateLimiter>();
  private readonly cached = new Map<string, Versioned & { readAtMs: number }>();
  /** Per key, this container's own reports over the last few windows: the evidence a throttle is read by. */
  private readonly reports = new Map<string, OutcomeReport[]>();

  /** @throws PacingConfigError on bad limits or adaptive options */
  constructor(options: AdaptiveDynamoDbRateLimiterOptions) {
    this.tableName = options.tableName;
    this.limits = options.limits;
    const ceiling = options.limits.startsPerInterval;
    this.rule = { ...adaptiveDefaults(options.limits), ...options.adaptive };
    initialRate(this.rule); // validates the rule once, here
    this.refreshMs = options.refreshMs ?? defaultRefreshMs(options.limits.intervalMs);
    this.rampMaxWaitMs = options.rampMaxWaitMs ?? Math.max(1, Math.round(options.limits.intervalMs / 12));
    this.leadMs = options.leadMs ?? 0;
    this.idleTtlSeconds = options.idleTtlSeconds ?? 86_400;
    this.maxAttempts = options.maxAttempts ?? 4;
    this.client = options.client ?? dynamoClient();
    this.clock = options.clock ?? Date.now;
    this.limiterFor(ceiling); // validates the limits once, here
  }

  async acquire(key: string, count: number, options: AcquireOptions = {}): Promise<Acquisition> {
    const { state } = await this.current(key);
    const rate = rateAt(state, this.clock(), this.rule);
    const ramping = rate > state.rate + (this.rule.increaseStep ?? 1);
    const maxWaitMs = ramping ? Math.min(options.maxWaitMs ?? 0, this.rampMaxWaitMs) : options.maxWaitMs;
    return this.limiterFor(rate).acquire(key, count, { ...options, maxWaitMs });
  }

  async liveAt(key: string, maxAgeMs: number): Promise<number | undefined> {
    return this.limiterFor(await this.currentRate(key)).liveAt(key, maxAgeMs);
  }

  /** The rate the fleet is pacing `key` at now: the rule's, from the state read at most refreshMs ago. */
  async currentRate(key: string): Promise<number> {
    return rateAt((await this.current(key)).state, this.clock(), this.rule);
  }

  async throttled(key: string, counts?: StartCounts): Promise<RateChange | undefined> {
    const history = counts && this.observe(key, counts);
    return this.change(key, (state, nowMs) => onThrottled(state, nowMs, this.rule, history && { history }));
  }

  /** Keeps an invocation's counts with this container's reports on `key` (the last 3 windows, at most MAX_REPORTS). */
  private observe(key: string, counts: StartCounts): readonly OutcomeReport[] {
    const nowMs = this.clock();
    let history = this.reports.get(key);
    if (!history) {
      history = [];
      this.reports.set(key, history);
      if (this.reports.size > MAX_CACHED_RATES) this.reports.delete(this.reports.keys().next().value as string);
    }
    history.push({ atMs: nowMs, starts: counts.starts, throttles: counts.throttles });
    const keepFrom = nowMs - 3 * this.limits.intervalMs;
    while (history.length > MAX_REPORTS || (history.length > 0 && history[0].atMs < keepFrom)) history.shift();
    return history;
  }

  /**
   * Nothing to store: the rate rises with time from the last decrease (see core/pacing/adaptiveRate.ts). The first
   * quiet starts after a probe's verdict start this container's ramp; that evidence stays in this container's copy.
   */
  async succeeded(key: string, counts?: StartCounts): Promise<RateChange | undefined> {
    if (counts) this.observe(key, counts);
    const hit = this.cached.get(key);
    if (hit) {
      const next = onSucceeded(hit.state, this.clock(), this.rule);
      if (next !== hit.state) hit.state = next;
    }
    return undefined;
  }

  private limiterFor(rate: number): DynamoDbRateLimiter {
    let limiter = this.byRate.get(rate);
    if (!limiter) {
      // Below the ceiling, burst 1: see the file comment for why that keeps the window guarantee while rates mix.
      const limits =
        rate >= this.limits.startsPerInterval ? this.limits : { ...this.limits, startsPerInterval: rate, burst: 1 };
      limiter = new DynamoDbRateLimiter({
        tableName: this.tableName,
        limits,
        leadMs: this.leadMs,
        client: this.client,
        clock: this.clock,
      });
      this.byRate.set(rate, limiter);
    }
    return limiter;
  }

  /**
   * Keeps a key's rate as read (most recent last: past MAX_CACHED_RATES the oldest is forgotten, and read again). The
   * container's own evidence for the ramp (quietFromMs, quietAtMs) is kept while the cycle is the same.
   */
  private cache(key: string, versioned: Versioned): Versioned {
    const before = this.cached.get(key)?.state;
    const sameCycle =
      before?.quietFromMs !== undefined &&
      before.decreasedAtMs === versioned.state.decreasedAtMs &&
      before.throttledAtMs === versioned.state.throttledAtMs;
    const state = sameCycle
      ? { ...versioned.state, quietFromMs: before.quietFromMs, quietAtMs: before.quietAtMs }
      : versioned.state;
    this.cached.delete(key);
    const kept = { state, version: versioned.version, readAtMs: this.clock() };
    this.cached.set(key, kept);
    while (this.cached.size > MAX_CACHED_RATES) this.cached.delete(this.cached.keys().next().value as string);
    return kept;
  }

  private async current(key: string): Promise<Versioned> {
    const hit = this.cached.get(key);
    if (hit && this.clock() - hit.readAtMs < this.refreshMs) return hit;
    return this.read(key, false);
  }

  /** Applies `step` with compare-and-set on the version; a lost race re-reads and decides again. */
  private async change(
    key: string,
    step: (state: AdaptiveRateState, nowMs: number) => AdaptiveRateState,
  ): Promise<RateChange | undefined> {
    let known = await this.current(key);
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      const nowMs = Math.floor(this.clock());
      const next = step(known.state, nowMs);
      if (next === known.state || sameState(next, known.state)) return undefined;
      if (await this.write(key, known.version, next)) {
        this.cache(key, { state: next, version: known.version + 1 });
        const [from, to] = [rateAt(known.state, nowMs, this.rule), rateAt(next, nowMs, this.rule)];
        return from === to ? undefined : { from, to };
      }
      known = await this.read(key, true);
    }
    throw new RateLimiterError(
      `adaptive rate item "${rateItemKey(key)}" in table "${this.tableName}": gave up after ${this.maxAttempts} conflicting writes`,
      rateItemKey(key),
      this.tableName,
    );
  }

  private async write(key: string, version: number, next: AdaptiveRateState): Promise<boolean> {
    const itemKey = rateItemKey(key);
    const values: Record<string, AttributeValue> = {
      ':rate': { N: String(next.rate) },
      ':decreased': { N: String(next.decreasedAtMs ?? 0) },
      ':heldBy': { S: next.heldBy ?? 'cut' },
      ':throttled': { N: String(next.throttledAtMs ?? 0) },
      ':throttles': { N: String(next.throttles ?? 0) },
      ':from': { N: String(next.from ?? 0) },
      ':testFrom': { N: String(next.testFromMs ?? 0) },
      ':testShare': { N: String(next.testShare ?? -1) },
      ':calmShare': { N: String(next.calmShare ?? -1) },
      ':calmUntil': { N: String(next.calmUntilMs ?? 0) },
      ':version': { N: String(version) },
      ':next': { N: String(version + 1) },
      ':expires': { N: String(Math.ceil((next.decreasedAtMs ?? this.clock()) / 1000) + this.idleTtlSeconds) },
    };
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: itemKey } },
          // 0 stands for "none" in the times. `rate` is the held rate: what the fleet paces at until the probe.
          UpdateExpression:
            'SET rate = :rate, decreasedAtMs = :decreased, heldBy = :heldBy, throttledAtMs = :throttled, throttles = :throttles, fromRate = :from, testFromMs = :testFrom, testShare = :testShare, calmShare = :calmShare, calmUntilMs = :calmUntil, version = :next, expiresAt = :expires',
          ConditionExpression: version === 0 ? 'attribute_not_exists(version)' : 'version = :version',
          ExpressionAttributeValues:
            version === 0 ? Object.fromEntries(Object.entries(values).filter(([k]) => k !== ':version')) : values,
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw new RateLimiterError(
        `adaptive rate item "${itemKey}" in table "${this.tableName}": write failed: ${(error as Error).message}`,
        itemKey,
        this.tableName,
        { cause: error },
      );
    }
  }

  private async read(key: string, consistent: boolean): Promise<Versioned> {
    const itemKey = rateItemKey(key);
    let item: Record<string, AttributeValue> | undefined;
    try {
      ({ Item: item } = await this.client.send(
        new GetItemCommand({ TableName: this.tableName, Key: { pk: { S: itemKey } }, ConsistentRead: consistent }),
      ));
    } catch (error) {
      throw new RateLimiterError(
        `adaptive rate item "${itemKey}" in table "${this.tableName}": read failed: ${(error as Error).message}`,
        itemKey,
        this.tableName,
        { cause: error },
      );
    }
    const versioned = item ? this.parse(item) : { state: initialRate(this.rule), version: 0 };
    // The copy as kept, with this container's own evidence for the ramp when the cycle is the same.
    return this.cache(key, versioned);
  }

  private parse(item: Record<string, AttributeValue>): Versioned {
    const num = (name: string): number | undefined => (item[name]?.N === undefined ? undefined : Number(item[name].N));
    // Absent or 0: none. An item written by the earlier additive rule has its last cut in decreasedAtMs too.
    const decreasedAtMs = num('decreasedAtMs') || undefined;
    const throttledAtMs = num('throttledAtMs') || undefined;
    const throttles = num('throttles') || undefined;
    // A lowered ceiling (a new deployment) applies at once; a raised one is reached by the ramp.
    const rate = Math.min(this.rule.ceiling, Math.max(this.rule.floor ?? 1, num('rate') ?? this.rule.ceiling));
    const state: AdaptiveRateState = { rate, heldBy: item.heldBy?.S === 'back' ? 'back' : 'cut' };
    if (decreasedAtMs !== undefined) state.decreasedAtMs = decreasedAtMs;
    if (throttledAtMs !== undefined) state.throttledAtMs = throttledAtMs;
    if (throttles !== undefined) state.throttles = throttles;
    // 0 (or -1 for a share) stands for "none", as above.
    const from = num('fromRate') || undefined;
    const testFromMs = num('testFromMs') || undefined;
    const testShare = num('testShare');
    const calmShare = num('calmShare');
    const calmUntilMs = num('calmUntilMs') || undefined;
    if (from !== undefined) state.from = from;
    if (testFromMs !== undefined) state.testFromMs = testFromMs;
    if (testShare !== undefined && testShare >= 0) state.testShare = testShare;
    if (calmShare !== undefined && calmShare >= 0) state.calmShare = calmShare;
    if (calmUntilMs !== undefined) state.calmUntilMs = calmUntilMs;
    return { state, version: num('version') ?? 0 };
  }
}
