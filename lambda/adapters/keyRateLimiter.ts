// Per-key pacing edge: one fleet-wide limit per key (a tenant, a merchant account), beside the job-wide limiter. Each
// key is its own GCRA item (`<limiter key>#key#<value>`) advanced by the same compare-and-set as the job-wide limiter,
// and, with the adaptive rate on, its own rate item that its 429s cut and its quiet starts raise: a throttle on one
// key slows that key, not the job. An operator's override for a key (`ops limits set`) is read from the job's LIMITS
// item at most every OVERRIDE_REFRESH_MS per container. Costs: a key's start is one write (and, adaptive, a read of its
// rate item at most every refreshMs); an idle key costs nothing, its items expire by TTL.
//
// Hand-written for the reason rateLimiter.ts is: no library paces per key against shared DynamoDB state; this file only
// chooses the limit and the item, the rule and the storage are those files'.
import { GetItemCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  effectiveKeyLimit,
  keyLimitOverrideSchema,
  keyLimitsItemKey,
  OVERRIDE_REFRESH_MS,
  OVERRIDES_ATTRIBUTE,
  perKeyItemKey,
  type KeyLimit,
  type KeyLimitOverride,
} from '../core/keyLimits';
import type { JobRuntimeSettings } from '../core/constants';
import { describeIssues } from '../core/issues';
import { AdaptiveDynamoDbRateLimiter, type RateChange } from './adaptiveRateLimiter';
import { dynamoClient } from './clients';
import { logger } from './observability';
import { DynamoDbRateLimiter, type RateLimiter } from './rateLimiter';

type PerKey = NonNullable<JobRuntimeSettings['rateLimit']['perKey']>;

/**
 * How far ahead a busy key's queue reaches: records past it wait for the key's next token like any deferral. An hour
 * keeps a deep backlog's returns spread while bounding how long one record's place is held.
 */
export const MAX_QUEUE_BEHIND_MS = 3_600_000;

/** The item a key's waiting records take their places on, beside its token item. */
export const backlogItemKey = (limiterKey: string, value: string): string =>
  `${perKeyItemKey(limiterKey, value)}#queue`;

export interface KeyRateLimiterOptions {
  tableName: string;
  /** The job whose overrides apply (`LIMITS#<job>`). */
  job: string;
  /** The job's limiter key (its downstream): keys of jobs sharing a downstream share their allowance. */
  limiterKey: string;
  /** The job's per-key default, as deployed. */
  perKey: PerKey;
  /** Cut a key's rate on its 429s, and raise it again on quiet starts. */
  adaptive: boolean;
  /** Jitter margin each key's window is stretched by (the job-wide limiter's). @default 0 */
  safetyMarginMs?: number;
  /** @default dynamoClient() */
  client?: DynamoDBClient;
  /** Epoch ms. @default Date.now */
  clock?: () => number;
  /** @default OVERRIDE_REFRESH_MS */
  overridesRefreshMs?: number;
}

/** A key's answer for a start at a given moment. */
export type KeyAnswer = { granted: true } | { granted: false; waitMs: number };

export class KeyRateLimiter {
  private readonly clock: () => number;
  private readonly client: DynamoDBClient;
  private readonly byLimit = new Map<string, RateLimiter & Partial<AdaptiveDynamoDbRateLimiter>>();
  private overrides: { map: Map<string, KeyLimitOverride>; readAtMs: number } | undefined;

  constructor(private readonly options: KeyRateLimiterOptions) {
    this.clock = options.clock ?? Date.now;
    this.client = options.client ?? dynamoClient();
    this.limiterFor(this.limitOf(undefined)); // validates the default once, here
  }

  /** The resource field whose value is the key. */
  get field(): string {
    return this.options.perKey.field;
  }

  /** The key's limit now: its override if it has one, else the job's default (both after headroom). */
  async limit(value: string): Promise<KeyLimit> {
    return this.limitOf((await this.overridesNow()).get(value));
  }

  /**
   * A token for a start at exactly `atMs` (the moment the record's job-wide slot comes), or how long until the key
   * has one. Never waits: a record whose key is busy is deferred by the key's wait.
   * @throws the limiter's error when DynamoDB fails
   */
  async acquireAt(value: string, atMs: number): Promise<KeyAnswer> {
    const limiter = this.limiterFor(await this.limit(value));
    const acquired = await limiter.acquire(perKeyItemKey(this.options.limiterKey, value), 1, { maxWaitMs: 0, atMs });
    return acquired.granted > 0 ? { granted: true } : { granted: false, waitMs: acquired.waitMs };
  }

  /**
   * A busy key's record takes its place in the key's queue: a token on the key's backlog item, at the key's rate, as far
   * ahead as the key's waiting records reach (up to MAX_QUEUE_BEHIND_MS). Returns the wait until that place comes, so
   * a key's backlog comes back spread at its rate, about once per record, instead of all at its next token. The place
   * is not a start: the record still asks the key for a token when it comes back.
   * @throws the limiter's error when DynamoDB fails
   */
  async queueBehind(value: string): Promise<number> {
    const limit = await this.limit(value);
    const limiter = this.limiterFor(limit);
    const acquired = await limiter.acquire(backlogItemKey(this.options.limiterKey, value), 1, {
      maxWaitMs: MAX_QUEUE_BEHIND_MS,
      priority: 'backfill',
    });
    const at = acquired.granted > 0 ? acquired.startAtMs[0] : this.clock() + acquired.waitMs;
    return Math.max(0, at - this.clock());
  }

  /** The key's downstream answered 429/503: cut that key's rate (adaptive only). */
  async throttled(value: string): Promise<RateChange | undefined> {
    const limiter = this.limiterFor(await this.limit(value));
    return limiter.throttled?.(perKeyItemKey(this.options.limiterKey, value));
  }

  /** The key's starts succeeded: a recovery step when one is due (adaptive only; free at the ceiling). */
  async succeeded(value: string): Promise<RateChange | undefined> {
    const limiter = this.limiterFor(await this.limit(value));
    return limiter.succeeded?.(perKeyItemKey(this.options.limiterKey, value));
  }

  private limitOf(override: KeyLimitOverride | undefined): KeyLimit {
    return effectiveKeyLimit(this.options.perKey, override);
  }

  /** One limiter per distinct limit (the default, and each override's): they share the table and the key items. */
  private limiterFor(limit: KeyLimit): RateLimiter & Partial<AdaptiveDynamoDbRateLimiter> {
    const id = `${limit.startsPerInterval}/${limit.intervalSeconds}/${limit.burst}`;
    let limiter = this.byLimit.get(id);
    if (!limiter) {
      const limits = {
        startsPerInterval: limit.startsPerInterval,
        intervalMs: limit.intervalSeconds * 1000,
        burst: limit.burst,
        safetyMarginMs: this.options.safetyMarginMs ?? 0,
      };
      const common = { tableName: this.options.tableName, limits, client: this.client, clock: this.clock };
      limiter = this.options.adaptive ? new AdaptiveDynamoDbRateLimiter(common) : new DynamoDbRateLimiter(common);
      this.byLimit.set(id, limiter);
    }
    return limiter;
  }

  /**
   * The job's overrides, read at most every refresh period (eventually consistent: an override set now applies within
   * the period). A failed read keeps the last copy, or the defaults: pacing goes on at the configured limits.
   */
  private async overridesNow(): Promise<Map<string, KeyLimitOverride>> {
    const refreshMs = this.options.overridesRefreshMs ?? OVERRIDE_REFRESH_MS;
    if (this.overrides && this.clock() - this.overrides.readAtMs < refreshMs) return this.overrides.map;
    let map = this.overrides?.map ?? new Map<string, KeyLimitOverride>();
    try {
      const { Item } = await this.client.send(
        new GetItemCommand({
          TableName: this.options.tableName,
          Key: { pk: { S: keyLimitsItemKey(this.options.job) } },
          ProjectionExpression: '#o',
          ExpressionAttributeNames: { '#o': OVERRIDES_ATTRIBUTE },
        }),
      );
      map = parseOverrides(Item);
    } catch (error) {
      logger.warn('per-key overrides could not be read; the last known limits apply', {
        job: this.options.job,
        error: error as Error,
      });
    }
    this.overrides = { map, readAtMs: this.clock() };
    return map;
  }
}

/**
 * An override's attributes as plain values: numbers and strings are all it holds. Hand-written instead of the SDK's
 * unmarshall, which is not among the names the functions' SDK layer carries (lambda/sdk-slim).
 */
function plain(attribute: AttributeValue): unknown {
  if (!attribute.M) return undefined;
  return Object.fromEntries(Object.entries(attribute.M).map(([k, v]) => [k, v.N !== undefined ? Number(v.N) : v.S]));
}

/** The overrides of a LIMITS item; an entry that does not parse is skipped with a warning (the default applies). */
function parseOverrides(item: Record<string, AttributeValue> | undefined): Map<string, KeyLimitOverride> {
  const map = new Map<string, KeyLimitOverride>();
  const raw = item?.[OVERRIDES_ATTRIBUTE];
  if (!raw) return map;
  for (const [key, attribute] of Object.entries(raw.M ?? {})) {
    const parsed = keyLimitOverrideSchema.safeParse(plain(attribute));
    if (parsed.success) map.set(key, parsed.data);
    else logger.warn('per-key override ignored: it does not parse', { key, issues: describeIssues(parsed.error) });
  }
  return map;
}
