// Fleet-wide pacing edge: each downstream key's GCRA state is one DynamoDB item, advanced by compare-and-set writes.
//
// Hand-written on purpose: Powertools has no rate limiter, and the pacing rule itself is the pure core's
// (lambda/core/pacing/gcra.ts). This file only moves that state in and out of DynamoDB without locks:
//   - one lane, busy key (the usual case under load): the block is ADDED to the end of the queue,
//     `SET tat = if_not_exists(tat, now) + n*T`, on the condition only that the key is still busy and the block
//     still fits the wait (acquireByAdding). Such writes commute: K containers adding blocks at once all win, where a
//     compare-and-set on the exact TAT lets one through and bills K-1 lost races (64 instances: 1.4 per start).
//     Behind a queue, a sliver of a block is refused rather than written (gcra.ts reserveBlock): one write, one block;
//   - otherwise (an idle key, or lanes) the write is a compare-and-set against the TAT this container last saw;
//   - when the container's view of the item is older than one emission interval (another container has likely taken
//     slots since, as when admitted batches go to whichever container is free), a consistent read comes first: a read
//     unit costs a fifth of the write a lost race bills;
//   - a lost race (ConditionalCheckFailed) reads the winner's value back and decides again. DynamoDB can return the
//     old item with the failure (ReturnValuesOnConditionCheckFailure); dynalite does not, so a consistent read
//     follows when the failure carries no item;
//   - a key idle past its TAT is the same as a key never used, so a write that finds it idle needs no exact match.
//
//   - with lanes (lambda/core/pacing/lanes.ts) the item holds one TAT per lane (`tat`, `tat1`, ...): a block writes
//     the lanes it used, each on the condition that it still holds the value decided on, so writers on other lanes do
//     not conflict.
//
// Ceiling: one item takes about 1,000 writes per second, and contention costs extra writes (each lost race repeats
// one). A block of n tokens is one write, so tokens per second can exceed writes per second; past roughly 500
// acquisitions per second on one key, use `shards`: N items, each with 1/N of the allowance, picked at random per
// call. The sum of the shards' guarantees is the key's guarantee.
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
  type UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { EnvVar } from '../core/constants';
import { PacedJobsError } from '../core/errors';
import { backoffMs, type RandomSource } from '../core/pacing/backoff';
import {
  type GcraLimits,
  type GcraState,
  type RateLimitSpec,
  reserve,
  reserveBlock,
  type ReserveRequest,
} from '../core/pacing/gcra';
import { laneLimits, reserveLanes } from '../core/pacing/lanes';
import { PacingConfigError } from '../core/pacing/errors';
import { sleep } from '../core/pacing/sleep';
import { requireEnv } from '../core/settings';
import { dynamoClient } from './clients';

export interface AcquireOptions {
  /** Longest wait accepted for a token's start; 0 takes only tokens that may start now. @default 0 */
  maxWaitMs?: number;
  /**
   * Decide as of this moment (epoch ms) instead of the clock: the caller will start exactly then, e.g. a record that
   * holds a job-wide slot at that time asks its key for a token at the same time (with maxWaitMs 0, the token starts
   * exactly at `atMs` or is refused). @default the clock plus leadMs
   */
  atMs?: number;
  /**
   * Whose start this is. A live start also stamps the item (`liveAt`, in the same write), so backfill elsewhere in the
   * fleet knows live work is waiting; a backfill start only learns the stamp (lambda/core/backfill.ts decides with it).
   * @default 'live'
   */
  priority?: 'live' | 'backfill';
  /**
   * The caller starts its tokens one after another, each at least this long after the last (its apply time): a
   * limiter with lanes plans the block at this pace on the lanes the caller can keep up with, so every token of it is
   * reachable on time. A one-lane limiter ignores it. 0 (a container that has not measured its pace yet): the pace
   * the fleet's last block on the item was planned at, kept on the item. @default 0
   */
  paceMs?: number;
}

export interface Acquisition {
  /** Tokens granted, 0..count: the first `granted` operations may run, each at its start time. */
  granted: number;
  /**
   * For each granted token, the epoch millisecond at which it may start, ascending. Start no earlier (sleepUntil); the
   * fleet-wide guarantee ("at most R starts in any window") is about these times. A slot not used is simply lost.
   */
  startAtMs: number[];
  /** When granted < count: ms until the next token could start if asked for now (a hint for deferral); else 0. */
  waitMs: number;
}

/** The port the consumer depends on; DynamoDbRateLimiter is the adapter, tests and the benchmark may supply others. */
export interface RateLimiter {
  /**
   * Reserves up to `count` starts on `key` (one downstream), never more than the allowance in any sliding window.
   * @throws LimiterContentionError when every attempt lost a race; RateLimiterError when DynamoDB fails
   */
  acquire(key: string, count: number, options?: AcquireOptions): Promise<Acquisition>;
  /**
   * When a live start last reserved slots on `key` (epoch ms), as the item says: known from this container's last
   * write or read if that is at most `maxAgeMs` old, else read (one consistent read). Undefined: never, or the limiter
   * does not track it.
   */
  liveAt?(key: string, maxAgeMs: number): Promise<number | undefined>;
  /**
   * Lanes the allowance is split into (lambda/core/pacing/lanes.ts): above one, a block is planned at the caller's
   * `paceMs`, so it may be as large as the caller's work. Undefined or 1: one frontier, and a caller slower than the
   * spacing must keep its blocks small.
   */
  readonly lanes?: number;
}

export interface DynamoDbRateLimiterOptions {
  /** The allowance for every key this limiter paces (after headroom), and the burst and jitter margin. */
  limits: RateLimitSpec;
  /** Table with partition key `pk` (S) and TTL attribute `expiresAt`. @default process.env.LIMITER_TABLE_NAME */
  tableName?: string;
  /** Items the allowance is split across, for keys busier than one item can take. @default 1 */
  shards?: number;
  /**
   * Lanes each item's allowance is split into (lambda/core/pacing/lanes.ts), so blocks can follow a caller slower
   * than the spacing. Needs burst 1 above one lane. @default 1
   */
  lanes?: number;
  /** Conditional writes tried per acquire before giving up. @default 8 */
  maxAttempts?: number;
  /** Backoff between lost races after the first immediate retry. @default { baseMs: 5, capMs: 100 } */
  contentionBackoff?: { baseMs: number; capMs: number };
  /** An item idle this long after its TAT may be deleted by TTL (harmless: an expired key is an idle key). @default 86400 */
  idleTtlSeconds?: number;
  /**
   * Reserve no slot earlier than this long after the decision: roughly the write's round trip, so a token granted on an
   * idle key is not already late (see waitForSlot) by the time the write returns. Costs nothing under load, when slots
   * are in the future anyway. @default 0
   */
  leadMs?: number;
  /** Items whose last TAT the container keeps (the expected value of its next write). @default 10000 */
  maxKnownItems?: number;
  /** @default dynamoClient() */
  client?: DynamoDBClient;
  /** Epoch milliseconds. @default Date.now */
  clock?: () => number;
  /** Shard choice and contention jitter. @default Math.random */
  random?: RandomSource;
}

/** A limiter call failed for a reason other than pacing; `key` is the item, with its shard suffix. */
export class RateLimiterError extends PacedJobsError {
  constructor(
    message: string,
    public readonly key: string,
    public readonly tableName: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'RateLimiterError';
  }
}

/** Every conditional write lost to another writer: the item is hotter than this many attempts can get through. */
export class LimiterContentionError extends RateLimiterError {
  constructor(
    key: string,
    tableName: string,
    public readonly attempts: number,
    options?: ErrorOptions,
  ) {
    super(
      `rate limiter item "${key}" in table "${tableName}": gave up after ${attempts} conflicting writes; raise maxAttempts or shards`,
      key,
      tableName,
      options,
    );
    this.name = 'LimiterContentionError';
  }
}

const US_PER_MS = 1000;

export class DynamoDbRateLimiter implements RateLimiter {
  public readonly tableName: string;
  public readonly shards: number;
  public readonly lanes: number;
  /** Per shard, per lane: each holds its share of the allowance. */
  private readonly shardLimits: GcraLimits[][];
  private readonly maxAttempts: number;
  private readonly contentionBackoff: { baseMs: number; capMs: number };
  private readonly idleTtlSeconds: number;
  private readonly leadMs: number;
  private readonly client: DynamoDBClient;
  private readonly clock: () => number;
  private readonly random: RandomSource;
  /** Last TATs (one per lane) this container saw per item: the expected values of the next conditional write. */
  private readonly known = new Map<string, LaneStates>();
  /** When (epoch ms) each item's known TAT was last confirmed, by a write of ours or a read. */
  private readonly knownAtMs = new Map<string, number>();
  /** Per item (lanes only), the pace the fleet's last block was planned at, as the item said: a cold container's default. */
  private readonly fleetPace = new Map<string, number>();
  /** Per item, the latest live stamp seen (ours or another container's), with when it was seen. */
  private readonly live = new Map<string, { liveAtMs: number | undefined; seenAtMs: number }>();
  /**
   * Items whose TAT the container remembers at most: per-key limits can reach a million keys, and a forgotten key only
   * costs a lost race (its next write reads). Oldest forgotten first.
   */
  private readonly maxKnownItems: number;

  /** @throws PacingConfigError on bad limits or shard count; SettingsError when no table name is given or set */
  constructor(options: DynamoDbRateLimiterOptions) {
    this.shards = options.shards ?? 1;
    const r = options.limits.startsPerInterval;
    if (!Number.isSafeInteger(this.shards) || this.shards < 1 || this.shards > r) {
      throw new PacingConfigError(
        `invalid rate limiter: shards must be an integer from 1 to startsPerInterval (${r}) (got ${this.shards})`,
      );
    }
    this.lanes = options.lanes ?? 1;
    // Shard i gets floor(R/N), the first R mod N one more: the shares sum to R, so the shards' windows sum to R too.
    // Each shard's share is split into lanes the same way.
    this.shardLimits = Array.from({ length: this.shards }, (_, i) => {
      const share = Math.floor(r / this.shards) + (i < r % this.shards ? 1 : 0);
      return laneLimits(
        { ...options.limits, startsPerInterval: share, burst: Math.min(options.limits.burst ?? 1, share) },
        Math.min(this.lanes, share),
      );
    });
    this.tableName = options.tableName ?? requireEnv(EnvVar.LIMITER_TABLE_NAME);
    this.maxAttempts = options.maxAttempts ?? 8;
    this.contentionBackoff = options.contentionBackoff ?? { baseMs: 5, capMs: 100 };
    this.idleTtlSeconds = options.idleTtlSeconds ?? 86_400;
    this.leadMs = options.leadMs ?? 0;
    this.maxKnownItems = options.maxKnownItems ?? 10_000;
    if (!Number.isSafeInteger(this.leadMs) || this.leadMs < 0) {
      throw new PacingConfigError(
        `invalid rate limiter: leadMs must be zero or a positive integer (got ${this.leadMs})`,
      );
    }
    this.client = options.client ?? dynamoClient();
    this.clock = options.clock ?? Date.now;
    this.random = options.random ?? Math.random;
  }

  async acquire(key: string, count: number, options: AcquireOptions = {}): Promise<Acquisition> {
    const shard = this.shards === 1 ? 0 : Math.floor(this.random() * this.shards);
    const itemKey = this.shards === 1 ? key : `${key}#${shard}`;
    const limits = this.shardLimits[shard];
    const seenAt = this.knownAtMs.get(itemKey);
    // One lane: a container's first call writes at once (most keys are idle when a container starts, and a lost race
    // reads anyway). With lanes it reads first: a blind choice of lanes on a busy key would likely lose to the fleet's
    // writers, and a read costs a fifth of the write a lost race bills. The item changes about once per key spacing
    // (a lane's spacing over the lanes), so a view older than that is read again.
    const stale =
      seenAt === undefined
        ? limits.length > 1
        : this.clock() - seenAt >= limits[0].emissionIntervalUs / limits.length / US_PER_MS;
    if (stale) {
      this.remember(itemKey, await this.read(itemKey));
    }
    const liveStamp = (options.priority ?? 'live') === 'live';

    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      if (attempt > 1) await sleep(backoffMs(attempt - 2, this.contentionBackoff, this.random));
      const known = this.known.get(itemKey) ?? limits.map(() => undefined);
      // The decision's "now" is the earliest moment the caller could start: the clock plus the expected write time.
      const nowMs = options.atMs ?? Math.floor(this.clock()) + this.leadMs;
      if (limits.length === 1 && !idleAt(known[0], nowMs)) {
        const request = { nowMs, count, maxWaitMs: options.maxWaitMs ?? 0 };
        const added = await this.acquireByAdding(itemKey, known[0], request, limits[0], liveStamp);
        if (!Array.isArray(added)) return added;
        // The condition failed: the key went idle, or the block no longer fits the wait. Decide again on the item.
        this.remember(itemKey, added);
        continue;
      }
      const paceMs = options.paceMs || (limits.length > 1 ? (this.fleetPace.get(itemKey) ?? 0) : 0);
      const decision = reserveLanes(
        known,
        { nowMs, count, maxWaitMs: options.maxWaitMs ?? 0, paceMs, random: this.random },
        limits,
      );
      // Nothing fits: no write. A stale known TAT is only ever lower than the stored one, so the refusal stands.
      if (decision.granted === 0 || decision.lanes.size === 0) {
        return { granted: 0, startAtMs: [], waitMs: decision.waitMs };
      }
      const fresh = await this.write(
        itemKey,
        known,
        nowMs,
        decision.lanes,
        liveStamp,
        limits.length > 1 ? Math.round(options.paceMs ?? 0) : 0,
      );
      if (fresh === 'written') {
        this.remember(
          itemKey,
          known.map((state, i) => decision.lanes.get(i) ?? state),
        );
        return { granted: decision.granted, startAtMs: decision.startAtMs, waitMs: decision.waitMs };
      }
      this.remember(itemKey, fresh);
    }
    throw new LimiterContentionError(itemKey, this.tableName, this.maxAttempts);
  }

  /**
   * One lane, on a key that is busy (its TAT at or after now) or absent: the block goes at the END of the frontier,
   * wherever that is when DynamoDB applies the write, with `SET tat = if_not_exists(tat, now) + n*T`. Such writes
   * commute, so any number of containers adding blocks at once all succeed: no lost race, whatever the fleet size,
   * where a compare-and-set on the exact TAT lets one of K concurrent writers through and bills the other K-1 a lost
   * race each (at 64 instances, 1.4 lost races per start). The old TAT comes back with the answer (ALL_OLD) and places
   * the block.
   *
   * Same rule as `reserve`: the stored TAT is at or after now, so max(TAT, now) is the TAT, and DynamoDB
   * applies the writes one after another, each the GCRA decision for its own now; the guarantee is gcra.ts's. Two
   * conditions keep the decision what the caller asked for: the TAT must still be at or after now (an idle key's block
   * starts at now, not at its old TAT: that is the compare-and-set path), and no later than `:limit`, the latest TAT at
   * which the whole block still starts within maxWaitMs. Only those fail, and the failure returns the item: the caller
   * decides again on it (a smaller block, a refusal, or the idle path).
   * @returns the acquisition, or the item's TAT as it was when the condition failed
   */
  private async acquireByAdding(
    itemKey: string,
    known: GcraState | undefined,
    request: Required<ReserveRequest>,
    limits: GcraLimits,
    liveStamp: boolean,
  ): Promise<Acquisition | LaneStates> {
    const decision = reserveBlock(known, { ...request, random: this.random }, limits);
    if (decision.granted === 0) return { granted: 0, startAtMs: [], waitMs: decision.waitMs };
    const { emissionIntervalUs: t, toleranceUs: d } = limits;
    const nowUs = request.nowMs * US_PER_MS;
    const n = decision.granted;
    const limitUs = nowUs + request.maxWaitMs * US_PER_MS + d - n * t;
    const values: Record<string, AttributeValue> = {
      ':now': { N: String(nowUs) },
      ':limit': { N: String(limitUs) },
      ':inc': { N: String(n * t) },
      // The new TAT is at most limit + n*T: the item expires a day after the latest it can hold.
      ':expires': { N: String(Math.ceil((limitUs + n * t) / 1_000_000) + this.idleTtlSeconds) },
    };
    if (liveStamp) values[':live'] = { N: String(Math.floor(this.clock())) };
    const stamp = liveStamp ? ', liveAt = :live' : '';
    const answer = await this.update(
      itemKey,
      {
        UpdateExpression: `SET tat = if_not_exists(tat, :now) + :inc, expiresAt = :expires${stamp}`,
        ConditionExpression: 'attribute_not_exists(tat) OR tat BETWEEN :now AND :limit',
        ExpressionAttributeValues: values,
      },
      1,
    );
    if ('lost' in answer) return answer.lost;
    this.seeLive(itemKey, liveStamp ? Number(values[':live'].N) : liveAtOf(answer.old));
    const base = lanesOf(answer.old, 1)[0] ?? { tatUs: nowUs };
    const placed = reserve(base, { ...request, count: n }, limits);
    this.remember(itemKey, [placed.state]);
    const next = reserve(placed.state, { ...request, count: 1, maxWaitMs: 0 }, limits);
    return { granted: n, startAtMs: placed.startAtMs, waitMs: n < request.count ? Math.max(next.waitMs, 0) : 0 };
  }

  async liveAt(key: string, maxAgeMs: number): Promise<number | undefined> {
    const itemKey = this.shards === 1 ? key : `${key}#0`;
    const seen = this.live.get(itemKey);
    if (seen && this.clock() - seen.seenAtMs <= maxAgeMs) return seen.liveAtMs;
    this.remember(itemKey, await this.read(itemKey));
    return this.live.get(itemKey)?.liveAtMs;
  }

  /** Keeps the pace an item carried (lanes only; bounded like the other per-item views). */
  private seePace(itemKey: string, item: Record<string, AttributeValue> | undefined): void {
    const n = item?.paceMs?.N;
    if (n === undefined || this.laneCountOf(itemKey) === 1) return;
    this.fleetPace.delete(itemKey);
    this.fleetPace.set(itemKey, Number(n));
    while (this.fleetPace.size > this.maxKnownItems)
      this.fleetPace.delete(this.fleetPace.keys().next().value as string);
  }

  /** The lanes of an item: its shard's. */
  private laneCountOf(itemKey: string): number {
    if (this.shards === 1) return this.shardLimits[0].length;
    const shard = Number(itemKey.slice(itemKey.lastIndexOf('#') + 1));
    return (this.shardLimits[shard] ?? this.shardLimits[0]).length;
  }

  /** Keeps the newest live stamp an answer carried (a stamp only moves forward). */
  private seeLive(itemKey: string, liveAtMs: number | undefined): void {
    const before = this.live.get(itemKey)?.liveAtMs;
    const latest = before === undefined ? liveAtMs : liveAtMs === undefined ? before : Math.max(before, liveAtMs);
    this.live.delete(itemKey);
    this.live.set(itemKey, { liveAtMs: latest, seenAtMs: this.clock() });
    while (this.live.size > this.maxKnownItems) this.live.delete(this.live.keys().next().value as string);
  }

  /** Keeps an item's TATs as last seen (most recent last, so the oldest is forgotten first past maxKnownItems). */
  private remember(itemKey: string, state: LaneStates): void {
    this.known.delete(itemKey);
    this.known.set(itemKey, state);
    this.knownAtMs.set(itemKey, this.clock());
    while (this.known.size > this.maxKnownItems) {
      const oldest = this.known.keys().next().value as string;
      this.known.delete(oldest);
      this.knownAtMs.delete(oldest);
    }
  }

  /** One compare-and-set of the lanes a decision moved. Returns 'written', or the lanes that beat us. */
  private async write(
    itemKey: string,
    known: LaneStates,
    nowMs: number,
    next: Map<number, GcraState>,
    liveStamp: boolean,
    /** The writer's own measured pace, kept on the item for containers that have none yet; 0 leaves the item's. */
    paceMs: number,
  ): Promise<'written' | LaneStates> {
    const nowUs = nowMs * US_PER_MS;
    const sets: string[] = [];
    const conditions: string[] = [];
    const values: Record<string, AttributeValue> = {};
    // One lane keeps the expressions' historic names (`:next`, `:expected`); lane i > 0 suffixes them with i.
    for (const [lane, state] of next) {
      const attr = laneAttribute(lane);
      const suffix = lane === 0 ? '' : String(lane);
      const before = known[lane];
      // A decision made on an idle lane (known TAT absent or not after now) is the same for ANY stored TAT up to now, so
      // the condition only asks for that; otherwise the stored TAT must still be exactly the one we decided on.
      const idle = before === undefined || before.tatUs <= nowUs;
      sets.push(`${attr} = :next${suffix}`);
      values[`:next${suffix}`] = { N: String(state.tatUs) };
      values[`:expected${suffix}`] = { N: String(idle ? nowUs : before.tatUs) };
      conditions.push(
        idle ? `attribute_not_exists(${attr}) OR ${attr} <= :expected${suffix}` : `${attr} = :expected${suffix}`,
      );
    }
    // The item expires a day after its latest lane (an expired item is an idle key).
    const latestUs = Math.max(...[...next.values()].map((s) => s.tatUs), ...known.map((s) => s?.tatUs ?? 0));
    values[':expires'] = { N: String(Math.ceil(latestUs / 1_000_000) + this.idleTtlSeconds) };
    if (liveStamp) values[':live'] = { N: String(Math.floor(this.clock())) };
    if (paceMs > 0) values[':pace'] = { N: String(paceMs) };
    const answer = await this.update(
      itemKey,
      {
        UpdateExpression: `SET ${sets.join(', ')}, expiresAt = :expires${liveStamp ? ', liveAt = :live' : ''}${paceMs > 0 ? ', paceMs = :pace' : ''}`,
        ConditionExpression: conditions.length === 1 ? conditions[0] : conditions.map((c) => `(${c})`).join(' AND '),
        ExpressionAttributeValues: values,
      },
      known.length,
    );
    if ('lost' in answer) return answer.lost;
    this.seeLive(itemKey, liveStamp ? Number(values[':live'].N) : liveAtOf(answer.old));
    if (paceMs > 0) this.fleetPace.set(itemKey, paceMs);
    else this.seePace(itemKey, answer.old);
    return 'written';
  }

  /**
   * One conditional UpdateItem on the item. Returns the item as it was before the write, or, when the condition
   * failed, its `lanes` TATs as they are (returned with the failure, else read).
   */
  private async update(
    itemKey: string,
    input: Pick<UpdateItemCommandInput, 'UpdateExpression' | 'ConditionExpression' | 'ExpressionAttributeValues'>,
    lanes: number,
  ): Promise<{ old: Record<string, AttributeValue> | undefined } | { lost: LaneStates }> {
    try {
      const { Attributes } = await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: itemKey } },
          ...input,
          // The old item comes back with the answer at no cost: a backfill start learns the live stamp from it.
          ReturnValues: 'ALL_OLD',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { old: Attributes };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) {
        throw new RateLimiterError(
          `rate limiter item "${itemKey}" in table "${this.tableName}": write failed: ${(error as Error).message}`,
          itemKey,
          this.tableName,
          { cause: error },
        );
      }
      if (!error.Item) return { lost: await this.read(itemKey) };
      this.seeLive(itemKey, liveAtOf(error.Item));
      this.seePace(itemKey, error.Item);
      return { lost: lanesOf(error.Item, lanes) };
    }
  }

  private async read(itemKey: string): Promise<LaneStates> {
    const lanes = this.laneCountOf(itemKey);
    try {
      const { Item } = await this.client.send(
        new GetItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: itemKey } },
          ConsistentRead: true,
          ProjectionExpression: [
            ...Array.from({ length: lanes }, (_, i) => laneAttribute(i)),
            'liveAt',
            ...(lanes > 1 ? ['paceMs'] : []),
          ].join(', '),
        }),
      );
      this.seeLive(itemKey, Item ? liveAtOf(Item) : undefined);
      this.seePace(itemKey, Item);
      return lanesOf(Item, lanes);
    } catch (error) {
      throw new RateLimiterError(
        `rate limiter item "${itemKey}" in table "${this.tableName}": read failed: ${(error as Error).message}`,
        itemKey,
        this.tableName,
        { cause: error },
      );
    }
  }
}

/** A lane last seen idle as of `nowMs`: its TAT before now (a block on it starts at now, whatever the TAT was). */
function idleAt(state: GcraState | undefined, nowMs: number): boolean {
  return state !== undefined && state.tatUs < nowMs * US_PER_MS;
}

function liveAtOf(item: Record<string, AttributeValue> | undefined): number | undefined {
  const n = item?.liveAt?.N;
  return n === undefined ? undefined : Number(n);
}

/** One TAT per lane, as stored or never yet written. */
type LaneStates = (GcraState | undefined)[];

/** Lane 0 is `tat` (the one-lane item's attribute), lane i > 0 is `tat<i>`. */
function laneAttribute(lane: number): string {
  return lane === 0 ? 'tat' : `tat${lane}`;
}

function lanesOf(item: Record<string, AttributeValue> | undefined, lanes: number): LaneStates {
  return Array.from({ length: lanes }, (_, i) => {
    const n = item?.[laneAttribute(i)]?.N;
    return n === undefined ? undefined : { tatUs: Number(n) };
  });
}
