// Per-key concurrency edge: at most N operations in flight per key (a merchant account), fleet-wide, held as leases in
// one DynamoDB item per key (`<limiter key>#conc#<value>`) that lapse on their own when the worker holding them dies.
//
// Hand-written for the reason rateLimiter.ts is: no library keeps a fleet-wide semaphore in DynamoDB. The item's
// `leases` map holds leaseId -> expiry (epoch ms); no locks, no scans, every change one conditional UpdateItem:
//   - the hot path is one write that adds the lease while `size(leases) < max`. size() also counts leases that have
//     expired (their worker timed out or crashed), so it can only refuse too much, never admit too much;
//   - when it is refused, the item is read (DynamoDB returns it with the failure; dynalite does not, hence the read)
//     and the decision is made on live leases: room behind expired ones is taken by one write that removes exactly
//     those (each still holding the expiry we read, so each removal really frees one) and adds ours;
//   - a key this container last found full is read before it is written: a caller polls a busy key every waitMs, and
//     a read costs a fifth of the (billed) failed write. Its own release clears that, the next acquire writes at once.
// The map never holds more than max entries (both writes keep size <= max), so expired entries cannot pile up.
//
// Costs: each lease adds about 20 bytes, and writes are billed per KB of the item, so a key allowing 200 in flight
// pays about 4 write units per acquire. An idle key costs nothing: its item expires by TTL (see ttlSeconds).
import {
  ConditionalCheckFailedException,
  GetItemCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { backoffMs, type RandomSource } from '../core/pacing/backoff';
import { PacedJobsError } from '../core/errors';
import { assertNoProblems, PacingConfigError } from '../core/pacing/errors';
import { sleep } from '../core/pacing/sleep';
import { dynamoClient } from './clients';

/** The limiter table item holding a key's leases: `<limiter key>#conc#<value>`. */
export function concurrencyItemKey(limiterKey: string, key: string): string {
  return `${limiterKey}#conc#${key}`;
}

export interface KeyConcurrencyOptions {
  /** The limiter table: partition key `pk` (S), TTL attribute `expiresAt` (epoch seconds). */
  tableName: string;
  /** The job's limiter key (its downstream): jobs sharing a downstream share its keys' slots. */
  limiterKey: string;
  /** The resource field whose value is the key (kept for the caller, as KeyRateLimiter.field). */
  field: string;
  /** Operations in flight per key, fleet-wide: an integer from 1 to 1000 (the item holds one entry per lease). */
  maxConcurrent: number;
  /** The wait suggested when a key is full, within ±20% so a fleet's retries spread out. @default 1000 */
  busyRetryMs?: number;
  /** Conditional writes tried per acquire before giving up. @default 8 */
  maxAttempts?: number;
  /**
   * The furthest ahead a lease may expire. Every write sets the item's TTL this far (and a minute) past its own
   * clock, which is after every live lease's expiry without reading them: each was at most this long when written,
   * and written no later than now. @default 960000 (Lambda's 15-minute limit and a minute)
   */
  maxLeaseMs?: number;
  /** @default dynamoClient() */
  client?: DynamoDBClient;
  /** Epoch milliseconds. @default Date.now */
  clock?: () => number;
  /** Lease ids, retry jitter and contention backoff. @default Math.random */
  random?: RandomSource;
}

/** One slot of a key, held until released or until `expiresAtMs`, when any container may reclaim it. */
export interface KeyLease {
  key: string;
  leaseId: string;
  expiresAtMs: number;
}

/** A key's answer: a lease, or how long to wait before asking again. */
export type KeyConcurrencyAnswer = { granted: true; lease: KeyLease } | { granted: false; waitMs: number };

/** A call failed for a reason other than the key being full; `itemKey` is the key's item in `tableName`. */
export class KeyConcurrencyError extends PacedJobsError {
  constructor(
    message: string,
    public readonly itemKey: string,
    public readonly tableName: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'KeyConcurrencyError';
  }
}

/** Every conditional write lost to another writer: the key changes faster than this many attempts can get through. */
export class KeyConcurrencyContentionError extends KeyConcurrencyError {
  constructor(
    itemKey: string,
    tableName: string,
    public readonly attempts: number,
    options?: ErrorOptions,
  ) {
    super(
      `key concurrency item "${itemKey}" in table "${tableName}": gave up after ${attempts} conflicting writes; raise maxAttempts`,
      itemKey,
      tableName,
      options,
    );
    this.name = 'KeyConcurrencyContentionError';
  }
}

/** The stored leases (id -> expiry as stored, a DynamoDB number string), or undefined when there is no map yet. */
type Leases = Map<string, string> | undefined;

/** What one write does: create the map with our lease, or add ours after removing `expired` (none on the hot path). */
type Plan = { kind: 'create' } | { kind: 'add'; expired: [string, string][] } | { kind: 'full'; waitMs: number };

const MAX_CONCURRENT = 1000;
/** Expired entries removed per write: keeps the expressions far below DynamoDB's 4 KB limit; one freed slot is enough. */
const MAX_PRUNED_PER_WRITE = 100;
/** Slack on the TTL for clocks that disagree between containers. */
const TTL_SKEW_SECONDS = 60;
/** Backoff between lost races, after the first immediate retry (as the rate limiter's default). */
const CONTENTION_BACKOFF = { baseMs: 5, capMs: 100 };
/** Keys remembered as last seen full, at most: forgetting one only costs a refused write. */
const MAX_KNOWN_FULL = 10_000;
const LEASE_ID_LENGTH = 10;

export class KeyConcurrencyLimiter {
  readonly field: string;
  readonly maxConcurrent: number;
  private readonly tableName: string;
  private readonly limiterKey: string;
  private readonly busyRetryMs: number;
  private readonly maxAttempts: number;
  private readonly maxLeaseMs: number;
  private readonly client: DynamoDBClient;
  private readonly clock: () => number;
  private readonly random: RandomSource;
  /** Items this container last found full (oldest first): their next acquire reads before it writes. */
  private readonly lastSeenFull = new Set<string>();

  /** @throws PacingConfigError naming every bad option */
  constructor(options: KeyConcurrencyOptions) {
    this.tableName = options.tableName;
    this.limiterKey = options.limiterKey;
    this.field = options.field;
    this.maxConcurrent = options.maxConcurrent;
    this.busyRetryMs = options.busyRetryMs ?? 1000;
    this.maxAttempts = options.maxAttempts ?? 8;
    this.maxLeaseMs = options.maxLeaseMs ?? 960_000;
    const problems: string[] = [];
    for (const name of ['tableName', 'limiterKey', 'field'] as const) {
      if (typeof options[name] !== 'string' || options[name] === '')
        problems.push(`${name} must be a non-empty string (got ${JSON.stringify(options[name])})`);
    }
    if (!Number.isSafeInteger(this.maxConcurrent) || this.maxConcurrent < 1 || this.maxConcurrent > MAX_CONCURRENT) {
      problems.push(`maxConcurrent must be an integer from 1 to ${MAX_CONCURRENT} (got ${this.maxConcurrent})`);
    }
    if (!Number.isSafeInteger(this.busyRetryMs) || this.busyRetryMs < 1)
      problems.push(`busyRetryMs must be a positive integer (got ${this.busyRetryMs})`);
    if (!Number.isSafeInteger(this.maxAttempts) || this.maxAttempts < 1)
      problems.push(`maxAttempts must be a positive integer (got ${this.maxAttempts})`);
    if (!Number.isSafeInteger(this.maxLeaseMs) || this.maxLeaseMs < 1)
      problems.push(`maxLeaseMs must be a positive integer (got ${this.maxLeaseMs})`);
    assertNoProblems('key concurrency limiter', problems);
    this.client = options.client ?? dynamoClient();
    this.clock = options.clock ?? Date.now;
    this.random = options.random ?? Math.random;
  }

  /**
   * Takes one of the key's slots until `expiresAtMs` (the caller passes when its invocation must have ended: now +
   * remaining time + a margin). Never waits for a slot: a full key answers how long to wait before asking again.
   * @throws PacingConfigError when expiresAtMs is not a number or more than maxLeaseMs ahead;
   *   KeyConcurrencyContentionError when every write lost a race; KeyConcurrencyError when DynamoDB fails
   */
  async acquire(key: string, expiresAtMs: number): Promise<KeyConcurrencyAnswer> {
    const ahead = expiresAtMs - this.clock();
    if (!Number.isFinite(expiresAtMs) || ahead > this.maxLeaseMs) {
      throw new PacingConfigError(
        `invalid key concurrency lease: expiresAtMs must be at most maxLeaseMs (${this.maxLeaseMs}) ahead (got ${Number.isFinite(ahead) ? `${ahead} ahead` : expiresAtMs})`,
      );
    }
    const itemKey = concurrencyItemKey(this.limiterKey, key);
    const lease: KeyLease = { key, leaseId: this.leaseId(), expiresAtMs: Math.ceil(expiresAtMs) };
    // 'unknown': try the hot-path write blind; its condition is all the knowledge it needs.
    let seen: Leases | 'unknown' = this.lastSeenFull.has(itemKey) ? await this.read(itemKey) : 'unknown';

    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      const plan: Plan = seen === 'unknown' ? { kind: 'add', expired: [] } : this.plan(seen);
      if (plan.kind === 'full') {
        this.rememberFull(itemKey, true);
        return { granted: false, waitMs: plan.waitMs };
      }
      // The first two writes are the hot path and the one made on a fresh read; later ones follow lost races.
      if (attempt > 1) await sleep(backoffMs(attempt - 2, CONTENTION_BACKOFF, this.random));
      const outcome = await this.write(itemKey, lease, plan);
      if (outcome === 'written') {
        this.rememberFull(itemKey, false);
        return { granted: true, lease };
      }
      seen = outcome;
    }
    throw new KeyConcurrencyContentionError(itemKey, this.tableName, this.maxAttempts);
  }

  /**
   * Gives the slot back. Idempotent: a lease already released, reclaimed after expiring, or whose item has expired is
   * fine. Unconditional but for the map existing (REMOVE of a path whose map is missing is a validation error).
   * @throws KeyConcurrencyError when DynamoDB fails
   */
  async release(lease: KeyLease): Promise<void> {
    const itemKey = concurrencyItemKey(this.limiterKey, lease.key);
    this.rememberFull(itemKey, false);
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: itemKey } },
          UpdateExpression: 'REMOVE leases.#id',
          ConditionExpression: 'attribute_exists(leases)',
          ExpressionAttributeNames: { '#id': lease.leaseId },
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return;
      throw this.failure(itemKey, 'release', error);
    }
  }

  /** The next write for the leases just read, or a refusal when the live ones fill the key. */
  private plan(leases: Leases): Plan {
    if (leases === undefined) return { kind: 'create' };
    const now = this.clock();
    const expired: [string, string][] = [];
    let live = 0;
    let earliestLiveMs = Infinity;
    for (const [id, stored] of leases) {
      const at = Number(stored);
      if (at > now) {
        live++;
        earliestLiveMs = Math.min(earliestLiveMs, at);
      } else if (expired.length < MAX_PRUNED_PER_WRITE) {
        expired.push([id, stored]);
      }
    }
    if (live >= this.maxConcurrent) {
      // Slots are usually released before they expire, hence the retry hint; the earliest expiry frees one for sure.
      const jittered = Math.floor(this.busyRetryMs * (0.8 + 0.4 * this.random()));
      return { kind: 'full', waitMs: Math.max(1, Math.min(jittered, Math.ceil(earliestLiveMs - now))) };
    }
    return { kind: 'add', expired };
  }

  /** One conditional write. Returns 'written', or the leases that made its condition fail. */
  private async write(
    itemKey: string,
    lease: KeyLease,
    plan: Exclude<Plan, { kind: 'full' }>,
  ): Promise<'written' | Leases> {
    const ttl: AttributeValue = { N: String(Math.ceil((this.clock() + this.maxLeaseMs) / 1000) + TTL_SKEW_SECONDS) };
    const exp: AttributeValue = { N: String(lease.expiresAtMs) };
    let update: {
      UpdateExpression: string;
      ConditionExpression: string;
      ExpressionAttributeNames?: Record<string, string>;
      ExpressionAttributeValues: Record<string, AttributeValue>;
    };
    if (plan.kind === 'create') {
      update = {
        UpdateExpression: 'SET leases = :leases, expiresAt = :ttl',
        ConditionExpression: 'attribute_not_exists(leases)',
        ExpressionAttributeValues: { ':leases': { M: { [lease.leaseId]: exp } }, ':ttl': ttl },
      };
    } else {
      // Removing k entries known to be there and adding one leaves size - k + 1, which must not exceed max. The id must
      // be new: a repeating random source would otherwise let two holders share one entry.
      const names: Record<string, string> = { '#id': lease.leaseId };
      const values: Record<string, AttributeValue> = {
        ':exp': exp,
        ':ttl': ttl,
        ':limit': { N: String(this.maxConcurrent + plan.expired.length) },
      };
      const unchanged = plan.expired.map(([id, stored], i) => {
        names[`#x${i}`] = id;
        values[`:x${i}`] = { N: stored };
        return ` AND leases.#x${i} = :x${i}`;
      });
      const removals = plan.expired.map((_, i) => `leases.#x${i}`).join(', ');
      update = {
        UpdateExpression: `SET leases.#id = :exp, expiresAt = :ttl${removals ? ` REMOVE ${removals}` : ''}`,
        ConditionExpression: `size(leases) < :limit AND attribute_not_exists(leases.#id)${unchanged.join('')}`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      };
    }
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: itemKey } },
          ...update,
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return 'written';
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw this.failure(itemKey, 'write', error);
      return error.Item ? leasesOf(error.Item) : this.read(itemKey);
    }
  }

  private async read(itemKey: string): Promise<Leases> {
    try {
      const { Item } = await this.client.send(
        new GetItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: itemKey } },
          ConsistentRead: true,
          ProjectionExpression: 'leases',
        }),
      );
      return Item ? leasesOf(Item) : undefined;
    } catch (error) {
      throw this.failure(itemKey, 'read', error);
    }
  }

  private failure(itemKey: string, what: string, error: unknown): KeyConcurrencyError {
    return new KeyConcurrencyError(
      `key concurrency item "${itemKey}" in table "${this.tableName}": ${what} failed: ${(error as Error).message}`,
      itemKey,
      this.tableName,
      { cause: error },
    );
  }

  /** Most recent last, so the oldest is forgotten first past MAX_KNOWN_FULL. */
  private rememberFull(itemKey: string, full: boolean): void {
    this.lastSeenFull.delete(itemKey);
    if (!full) return;
    this.lastSeenFull.add(itemKey);
    if (this.lastSeenFull.size > MAX_KNOWN_FULL)
      this.lastSeenFull.delete(this.lastSeenFull.values().next().value as string);
  }

  /** 10 base-36 characters (about 51 bits): a collision among a key's few leases is out of reach. */
  private leaseId(): string {
    let id = '';
    for (let i = 0; i < LEASE_ID_LENGTH; i++) id += Math.floor(this.random() * 36).toString(36);
    return id;
  }
}

function leasesOf(item: Record<string, AttributeValue>): Leases {
  const map = item.leases?.M;
  if (map === undefined) return undefined;
  return new Map(Object.entries(map).map(([id, v]) => [id, v.N ?? '0']));
}
