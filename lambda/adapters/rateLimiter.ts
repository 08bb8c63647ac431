// Fleet-wide pacing edge: each downstream key's GCRA state is one DynamoDB item (its TAT, `tat`), advanced by
// conditional writes.
//
// Hand-written on purpose: Powertools has no rate limiter, and the pacing rule itself is the pure core's
// (lambda/core/pacing/gcra.ts). This file only moves that state in and out of DynamoDB without locks:
//   - busy key (the usual case under load): the block is ADDED to the end of the queue,
//     `SET tat = if_not_exists(tat, now) + n*T`, on the condition only that the key is still busy and the block
//     still fits the wait (acquireByAdding). Such writes commute: K containers adding blocks at once all win, where a
//     compare-and-set on the exact TAT lets one through and bills K-1 lost races (64 instances: 1.4 per start).
//     Behind a queue, a sliver of a block is refused rather than written (gcra.ts reserveBlock): one write, one block;
//   - an idle key: the block starts at now, whatever the old TAT, so the write is conditioned only on the key still
//     being idle (`tat <= now`);
//   - when the container's view of the item is older than one emission interval (another container has likely taken
//     slots since, as when admitted batches go to whichever container is free), a consistent read comes first: a read
//     unit costs a fifth of the write a lost race bills;
//   - a lost race (ConditionalCheckFailed) reads the winner's value back and decides again. DynamoDB can return the
//     old item with the failure (ReturnValuesOnConditionCheckFailure); dynalite does not, so a consistent read
//     follows when the failure carries no item;
//   - a key idle past its TAT is the same as a key never used, so a write that finds it idle needs no exact match.
//
// One frontier per key, on purpose: an earlier design split the allowance into lanes so that a container slower than
// the spacing could take a whole batch in one block at its own pace; its writes were compare-and-set on every lane a
// block used, and at 64 instances with quick applies (every container then takes every lane) it cost 11 writes and
// 10 lost races per start. A slow container now takes the slots it can reach on time (ApplyTimeEstimator.usableBlock):
// at worst one write per start, and no lost race, whatever the fleet's size.
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
  gcraLimits,
  type GcraLimits,
  type GcraState,
  type RateLimitSpec,
  reserve,
  reserveBlock,
  type ReserveRequest,
} from '../core/pacing/gcra';
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
}

export interface DynamoDbRateLimiterOptions {
  /** The allowance for every key this limiter paces (after headroom), and the burst and jitter margin. */
  limits: RateLimitSpec;
  /** Table with partition key `pk` (S) and TTL attribute `expiresAt`. @default process.env.LIMITER_TABLE_NAME */
  tableName?: string;
  /** Items the allowance is split across, for keys busier than one item can take. @default 1 */
  shards?: number;
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
  /** Per shard: each holds its share of the allowance. */
  private readonly shardLimits: GcraLimits[];
  private readonly maxAttempts: number;
  private readonly contentionBackoff: { baseMs: number; capMs: number };
  private readonly idleTtlSeconds: number;
  private readonly leadMs: number;
  private readonly client: DynamoDBClient;
  private readonly clock: () => number;
  private readonly random: RandomSource;
  /** The TAT this container last saw per item (undefined: the item was absent): what its next write decides on. */
  private readonly known = new Map<string, GcraState | undefined>();
  /** When (epoch ms) each item's known TAT was last confirmed, by a write of ours or a read. */
  private readonly knownAtMs = new Map<string, number>();
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
    // Shard i gets floor(R/N), the first R mod N one more: the shares sum to R, so the shards' windows sum to R too.
    this.shardLimits = Array.from({ length: this.shards }, (_, i) => {
      const share = Math.floor(r / this.shards) + (i < r % this.shards ? 1 : 0);
      return gcraLimits({
        ...options.limits,
        startsPerInterval: share,
        burst: Math.min(options.limits.burst ?? 1, share),
      });
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
    // A container's first call writes at once (most keys are idle when a container starts, and a failed condition
    // reads anyway). The item changes about once per spacing, so a view older than that is read again.
    if (seenAt !== undefined && this.clock() - seenAt >= limits.emissionIntervalUs / US_PER_MS) {
      this.remember(itemKey, await this.read(itemKey));
    }
    const liveStamp = (options.priority ?? 'live') === 'live';

    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      if (attempt > 1) await sleep(backoffMs(attempt - 2, this.contentionBackoff, this.random));
      const known = this.known.get(itemKey);
      // The decision's "now" is the earliest moment the caller could start: the clock plus the expected write time.
      const nowMs = options.atMs ?? Math.floor(this.clock()) + this.leadMs;
      const request = { nowMs, count, maxWaitMs: options.maxWaitMs ?? 0 };
      const answer = idleAt(known, nowMs)
        ? await this.acquireIdle(itemKey, known, request, limits, liveStamp)
        : await this.acquireByAdding(itemKey, known, request, limits, liveStamp);
      if ('granted' in answer) return answer;
      // The condition failed: the key went busy or idle, or the block no longer fits the wait. Decide again on the item.
      this.remember(itemKey, answer.lost);
    }
    throw new LimiterContentionError(itemKey, this.tableName, this.maxAttempts);
  }

  /**
   * A key that is busy (its TAT at or after now) or absent: the block goes at the END of the frontier,
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
   * @returns the acquisition, or the item's TAT as it was when the condition failed (`lost`)
   */
  private async acquireByAdding(
    itemKey: string,
    known: GcraState | undefined,
    request: Required<ReserveRequest>,
    limits: GcraLimits,
    liveStamp: boolean,
  ): Promise<Acquisition | Lost> {
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
    const answer = await this.update(itemKey, {
      UpdateExpression: `SET tat = if_not_exists(tat, :now) + :inc, expiresAt = :expires${stamp}`,
      ConditionExpression: 'attribute_not_exists(tat) OR tat BETWEEN :now AND :limit',
      ExpressionAttributeValues: values,
    });
    if ('lost' in answer) return answer;
    this.seeLive(itemKey, liveStamp ? Number(values[':live'].N) : liveAtOf(answer.old));
    const base = tatOf(answer.old) ?? { tatUs: nowUs };
    const placed = reserve(base, { ...request, count: n }, limits);
    this.remember(itemKey, placed.state);
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

  /** Keeps the newest live stamp an answer carried (a stamp only moves forward). */
  private seeLive(itemKey: string, liveAtMs: number | undefined): void {
    const before = this.live.get(itemKey)?.liveAtMs;
    const latest = before === undefined ? liveAtMs : liveAtMs === undefined ? before : Math.max(before, liveAtMs);
    this.live.delete(itemKey);
    this.live.set(itemKey, { liveAtMs: latest, seenAtMs: this.clock() });
    while (this.live.size > this.maxKnownItems) this.live.delete(this.live.keys().next().value as string);
  }

  /** Keeps an item's TATs as last seen (most recent last, so the oldest is forgotten first past maxKnownItems). */
  private remember(itemKey: string, state: GcraState | undefined): void {
    this.known.delete(itemKey);
    this.known.set(itemKey, state);
    this.knownAtMs.set(itemKey, this.clock());
    while (this.known.size > this.maxKnownItems) {
      const oldest = this.known.keys().next().value as string;
      this.known.delete(oldest);
      this.knownAtMs.delete(oldest);
    }
  }

  /**
   * A key last seen idle (its TAT before now): the block starts at now whatever the TAT was (gcra.ts `reserve`), so
   * the write is conditioned only on the key still being idle, not on the exact TAT seen.
   * @returns the acquisition (a refusal needs no write), or the item's TAT when it went busy meanwhile (`lost`)
   */
  private async acquireIdle(
    itemKey: string,
    known: GcraState | undefined,
    request: Required<ReserveRequest>,
    limits: GcraLimits,
    liveStamp: boolean,
  ): Promise<Acquisition | Lost> {
    const decision = reserve(known, request, limits);
    // Nothing fits: no write. A stale known TAT is only ever lower than the stored one, so the refusal stands.
    if (decision.granted === 0 || decision.state === undefined) {
      return { granted: 0, startAtMs: [], waitMs: decision.waitMs };
    }
    const values: Record<string, AttributeValue> = {
      ':next': { N: String(decision.state.tatUs) },
      ':now': { N: String(request.nowMs * US_PER_MS) },
      // The item expires a day after its TAT (an expired item is an idle key).
      ':expires': { N: String(Math.ceil(decision.state.tatUs / 1_000_000) + this.idleTtlSeconds) },
    };
    if (liveStamp) values[':live'] = { N: String(Math.floor(this.clock())) };
    const answer = await this.update(itemKey, {
      UpdateExpression: `SET tat = :next, expiresAt = :expires${liveStamp ? ', liveAt = :live' : ''}`,
      ConditionExpression: 'attribute_not_exists(tat) OR tat <= :now',
      ExpressionAttributeValues: values,
    });
    if ('lost' in answer) return answer;
    this.seeLive(itemKey, liveStamp ? Number(values[':live'].N) : liveAtOf(answer.old));
    this.remember(itemKey, decision.state);
    return { granted: decision.granted, startAtMs: decision.startAtMs, waitMs: decision.waitMs };
  }

  /**
   * One conditional UpdateItem on the item. Returns the item as it was before the write, or, when the condition
   * failed, its TAT as it is (returned with the failure, else read).
   */
  private async update(
    itemKey: string,
    input: Pick<UpdateItemCommandInput, 'UpdateExpression' | 'ConditionExpression' | 'ExpressionAttributeValues'>,
  ): Promise<{ old: Record<string, AttributeValue> | undefined } | Lost> {
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
      return { lost: tatOf(error.Item) };
    }
  }

  private async read(itemKey: string): Promise<GcraState | undefined> {
    try {
      const { Item } = await this.client.send(
        new GetItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: itemKey } },
          ConsistentRead: true,
          ProjectionExpression: 'tat, liveAt',
        }),
      );
      this.seeLive(itemKey, Item ? liveAtOf(Item) : undefined);
      return tatOf(Item);
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

/** A key last seen idle as of `nowMs`: its TAT before now (a block on it starts at now, whatever the TAT was). */
function idleAt(state: GcraState | undefined, nowMs: number): boolean {
  return state !== undefined && state.tatUs < nowMs * US_PER_MS;
}

function liveAtOf(item: Record<string, AttributeValue> | undefined): number | undefined {
  const n = item?.liveAt?.N;
  return n === undefined ? undefined : Number(n);
}

/** A conditional write that failed: the item's TAT as it then was (undefined: absent). */
interface Lost {
  lost: GcraState | undefined;
}

function tatOf(item: Record<string, AttributeValue> | undefined): GcraState | undefined {
  const n = item?.tat?.N;
  return n === undefined ? undefined : { tatUs: Number(n) };
}
