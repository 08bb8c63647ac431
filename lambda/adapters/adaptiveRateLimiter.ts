// Fleet-wide pacing edge, adaptive: the shared limiter at a rate that 429s lower and quiet windows raise again, up to
// the configured ceiling. The current rate is one DynamoDB item next to the limiter's own, so every instance uses it.
//
// Hand-written for the same reason as rateLimiter.ts: the AIMD rule is the pure core's (core/pacing/adaptiveRate.ts);
// this file only stores its state with compare-and-set writes. Costs, per downstream key:
//   - a read of the rate item at most once per `refreshMs` per container (eventually consistent; cached between);
//   - a write only when the rate actually changes: at most one cut per cooldown and one recovery step per
//     `recoverEveryMs`, fleet-wide (a lost race re-reads and usually finds the change already made).
//
// Why mixing rates keeps the guarantee: while a cut propagates, instances pace the same TAT item with different
// emission intervals. Cut rates use burst 1, so a token's tolerance equals its own interval; for the last token l of any
// window, (k - 1) * T_ceiling + T_l <= TAT_l - start_f < W + T_l, which gives k <= R as in gcra.ts. The configured
// burst is kept only at the ceiling, where the proof in gcra.ts applies unchanged.
import { ConditionalCheckFailedException, DynamoDBClient, GetItemCommand, UpdateItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { initialRate, onSucceeded, onThrottled, type AdaptiveRateOptions, type AdaptiveRateState } from '../core/pacing/adaptiveRate';
import type { RateLimitSpec } from '../core/pacing/gcra';
import { dynamoClient } from './clients';
import { DynamoDbRateLimiter, RateLimiterError, type AcquireOptions, type Acquisition, type RateLimiter } from './rateLimiter';

/** A change this call made to the shared rate; undefined when it made none (another instance may have). */
export interface RateChange {
  from: number;
  to: number;
}

/** What the consumer reports back after an invocation, so the shared rate can adapt. */
export interface RateFeedback {
  /** The downstream answered 429/503 on `key`: cut the shared rate (at most once per cooldown). */
  throttled(key: string): Promise<RateChange | undefined>;
  /** Starts on `key` succeeded without a throttle: take a recovery step when one is due. */
  succeeded(key: string): Promise<RateChange | undefined>;
}

export interface AdaptiveDynamoDbRateLimiterOptions {
  /** The ceiling allowance (after headroom), its burst and jitter margin: what DynamoDbRateLimiter takes. */
  limits: RateLimitSpec;
  /** The limiter table: GCRA items under `key`, rate items under `key#rate`. */
  tableName: string;
  /**
   * The AIMD rule's tuning. @default { floor: 1, decreaseFactor: 0.5, decreaseCooldownMs: the window length,
   * increaseStep: 10% of the ceiling (at least 1), recoverEveryMs: a sixth of the window }
   *
   * Why recovery is quicker than the cooldown: one window's 429s describe one event, so cuts are at most one per window;
   * but a cut undone at 5% per window (the textbook additive step) takes ten windows, and under recurring transient 429
   * storms (the provider's, not ours) the rate then settles near a tenth of the allowance: halved once a window,
   * regaining 5%. At 10% every sixth of a window a cut is undone within the next window, so the rate sits at the
   * allowance between storms, while a provider whose real tolerance is lower still gets cut back once per window.
   */
  adaptive?: Partial<Omit<AdaptiveRateOptions, 'ceiling'>>;
  /** How long a container trusts the rate it last read. Bounds how fast a cut reaches the fleet. @default min(5000, interval / 6) */
  refreshMs?: number;
  /** Passed to each DynamoDbRateLimiter. @default 0 */
  leadMs?: number;
  /**
   * Lanes the allowance is split into (DynamoDbRateLimiter's `lanes`); a rate cut below it uses one lane per start
   * allowed. @default 1
   */
  lanes?: number;
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

/** Keys whose rate a container keeps: per-key limits can reach a million keys; a forgotten one is read again. */
const MAX_CACHED_RATES = 10_000;

export class AdaptiveDynamoDbRateLimiter implements RateLimiter, RateFeedback {
  public readonly tableName: string;
  private readonly limits: RateLimitSpec;
  private readonly rule: AdaptiveRateOptions;
  private readonly refreshMs: number;
  private readonly leadMs: number;
  public readonly lanes: number;
  private readonly idleTtlSeconds: number;
  private readonly maxAttempts: number;
  private readonly client: DynamoDBClient;
  private readonly clock: () => number;
  /** One GCRA limiter per rate in use: they share the key's TAT item, each spacing its own tokens. */
  private readonly byRate = new Map<number, DynamoDbRateLimiter>();
  private readonly cached = new Map<string, Versioned & { readAtMs: number }>();

  /** @throws PacingConfigError on bad limits or adaptive options */
  constructor(options: AdaptiveDynamoDbRateLimiterOptions) {
    this.tableName = options.tableName;
    this.limits = options.limits;
    const ceiling = options.limits.startsPerInterval;
    this.rule = {
      ceiling,
      recoverEveryMs: Math.max(1, Math.round(options.limits.intervalMs / 6)),
      decreaseCooldownMs: options.limits.intervalMs,
      increaseStep: Math.max(1, Math.round(ceiling * 0.1)),
      ...options.adaptive,
    };
    initialRate(this.rule); // validates the rule once, here
    // A cut must reach the fleet within a fraction of the window: at a 60 s window that is the 5 s it always was, at a
    // short one (a 1 s window) 5 s would be five windows at the old rate.
    this.refreshMs = options.refreshMs ?? Math.min(5000, Math.round(options.limits.intervalMs / 6));
    this.leadMs = options.leadMs ?? 0;
    this.lanes = options.lanes ?? 1;
    this.idleTtlSeconds = options.idleTtlSeconds ?? 86_400;
    this.maxAttempts = options.maxAttempts ?? 4;
    this.client = options.client ?? dynamoClient();
    this.clock = options.clock ?? Date.now;
    this.limiterFor(ceiling); // validates the limits once, here
  }

  async acquire(key: string, count: number, options?: AcquireOptions): Promise<Acquisition> {
    const { state } = await this.current(key);
    return this.limiterFor(state.rate).acquire(key, count, options);
  }

  async liveAt(key: string, maxAgeMs: number): Promise<number | undefined> {
    const { state } = await this.current(key);
    return this.limiterFor(state.rate).liveAt(key, maxAgeMs);
  }

  /** The rate the fleet is pacing `key` at now (cached up to refreshMs). */
  async currentRate(key: string): Promise<number> {
    return (await this.current(key)).state.rate;
  }

  async throttled(key: string): Promise<RateChange | undefined> {
    return this.change(key, (state, nowMs) => onThrottled(state, nowMs, this.rule));
  }

  async succeeded(key: string): Promise<RateChange | undefined> {
    const { state } = await this.current(key);
    // The common case, at the ceiling, costs nothing.
    if (state.rate >= this.rule.ceiling) return undefined;
    return this.change(key, (s, nowMs) => onSucceeded(s, nowMs, this.rule));
  }

  private limiterFor(rate: number): DynamoDbRateLimiter {
    let limiter = this.byRate.get(rate);
    if (!limiter) {
      // Below the ceiling, burst 1: see the file comment for why that keeps the window guarantee while rates mix.
      const limits = rate >= this.limits.startsPerInterval ? this.limits : { ...this.limits, startsPerInterval: rate, burst: 1 };
      // Lanes keep their per-lane shares monotone in the rate (lambda/core/pacing/lanes.ts), so mixing rates on the lanes stays safe.
      limiter = new DynamoDbRateLimiter({ tableName: this.tableName, limits, leadMs: this.leadMs, lanes: Math.min(this.lanes, rate), client: this.client, clock: this.clock });
      this.byRate.set(rate, limiter);
    }
    return limiter;
  }

  /** Keeps a key's rate as read (most recent last: past MAX_CACHED_RATES the oldest is forgotten, and read again). */
  private cache(key: string, versioned: Versioned): void {
    this.cached.delete(key);
    this.cached.set(key, { ...versioned, readAtMs: this.clock() });
    while (this.cached.size > MAX_CACHED_RATES) this.cached.delete(this.cached.keys().next().value as string);
  }

  private async current(key: string): Promise<Versioned> {
    const hit = this.cached.get(key);
    if (hit && this.clock() - hit.readAtMs < this.refreshMs) return hit;
    return this.read(key, false);
  }

  /** Applies `step` with compare-and-set on the version; a lost race re-reads and decides again. */
  private async change(key: string, step: (state: AdaptiveRateState, nowMs: number) => AdaptiveRateState): Promise<RateChange | undefined> {
    let known = await this.current(key);
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      const nowMs = Math.floor(this.clock());
      const next = step(known.state, nowMs);
      if (next === known.state || (next.rate === known.state.rate && next.changedAtMs === known.state.changedAtMs)) return undefined;
      if (await this.write(key, known.version, next)) {
        this.cache(key, { state: next, version: known.version + 1 });
        return next.rate === known.state.rate ? undefined : { from: known.state.rate, to: next.rate };
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
      ':changed': { N: String(next.changedAtMs ?? 0) },
      ':decreased': { N: String(next.decreasedAtMs ?? 0) },
      ':version': { N: String(version) },
      ':next': { N: String(version + 1) },
      ':expires': { N: String(Math.ceil((next.changedAtMs ?? this.clock()) / 1000) + this.idleTtlSeconds) },
    };
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: itemKey } },
          UpdateExpression: 'SET rate = :rate, changedAtMs = :changed, decreasedAtMs = :decreased, version = :next, expiresAt = :expires',
          ConditionExpression: version === 0 ? 'attribute_not_exists(version)' : 'version = :version',
          ExpressionAttributeValues: version === 0 ? Object.fromEntries(Object.entries(values).filter(([k]) => k !== ':version')) : values,
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw new RateLimiterError(`adaptive rate item "${itemKey}" in table "${this.tableName}": write failed: ${(error as Error).message}`, itemKey, this.tableName, { cause: error });
    }
  }

  private async read(key: string, consistent: boolean): Promise<Versioned> {
    const itemKey = rateItemKey(key);
    let item: Record<string, AttributeValue> | undefined;
    try {
      ({ Item: item } = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: { pk: { S: itemKey } }, ConsistentRead: consistent })));
    } catch (error) {
      throw new RateLimiterError(`adaptive rate item "${itemKey}" in table "${this.tableName}": read failed: ${(error as Error).message}`, itemKey, this.tableName, { cause: error });
    }
    const versioned = item ? this.parse(item) : { state: initialRate(this.rule), version: 0 };
    this.cache(key, versioned);
    return versioned;
  }

  private parse(item: Record<string, AttributeValue>): Versioned {
    const num = (name: string): number | undefined => (item[name]?.N === undefined ? undefined : Number(item[name].N));
    const changedAtMs = num('changedAtMs') || undefined;
    const decreasedAtMs = num('decreasedAtMs') || undefined;
    // A lowered ceiling (a new deployment) applies at once; a raised one is reached by recovery.
    const rate = Math.min(this.rule.ceiling, Math.max(this.rule.floor ?? 1, num('rate') ?? this.rule.ceiling));
    return { state: { rate, changedAtMs, decreasedAtMs }, version: num('version') ?? 0 };
  }
}
