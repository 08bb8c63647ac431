import { ConditionalCheckFailedException, DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { resetClients } from '../../../lambda/adapters/clients';
import {
  concurrencyItemKey,
  KeyConcurrencyContentionError,
  KeyConcurrencyError,
  KeyConcurrencyLimiter,
  type KeyConcurrencyOptions,
} from '../../../lambda/adapters/keyConcurrency';
import { sleep } from '../../../lambda/core/pacing/sleep';
import { type LocalAws, startLocalAws } from '../../support/aws';
import { createLimiterTable } from '../handlers/harness';

const TABLE = 'key-concurrency-test';
let limiterKeys = 0;
/** Each test its own limiter key, so no test sees another's items. */
const freshLimiterKey = (): string => `conc-test-${++limiterKeys}`;
const inAMinute = (): number => Date.now() + 60_000;

function limiter(limiterKey: string, options: Partial<KeyConcurrencyOptions> = {}): KeyConcurrencyLimiter {
  return new KeyConcurrencyLimiter({
    tableName: TABLE,
    limiterKey,
    field: 'merchant',
    maxConcurrent: 2,
    busyRetryMs: 50,
    ...options,
  });
}

/** Most intervals that overlap at any moment; an interval ending when another starts does not overlap it. */
function peakOverlap(intervals: [number, number][]): number {
  const events = intervals
    .flatMap(([start, end]): [number, number][] => [
      [start, 1],
      [end, -1],
    ])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let peak = 0;
  for (const [, change] of events) peak = Math.max(peak, (now += change));
  return peak;
}

describe('Class: KeyConcurrencyLimiter', () => {
  let aws: LocalAws;
  let ddb: DynamoDBClient;

  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    await createLimiterTable(TABLE);
    ddb = new DynamoDBClient({});
  });

  afterAll(async () => {
    ddb.destroy();
    resetClients();
    await aws.stop();
  });

  /** The key's item as stored: its leases (id -> expiry ms) and TTL (epoch s), or undefined when there is none. */
  async function stored(
    limiterKey: string,
    key: string,
  ): Promise<{ leases: Record<string, number>; expiresAt: number } | undefined> {
    const { Item } = await ddb.send(
      new GetItemCommand({
        TableName: TABLE,
        Key: { pk: { S: concurrencyItemKey(limiterKey, key) } },
        ConsistentRead: true,
      }),
    );
    if (!Item) return undefined;
    const leases = Object.fromEntries(Object.entries(Item.leases?.M ?? {}).map(([id, v]) => [id, Number(v.N)]));
    return { leases, expiresAt: Number(Item.expiresAt?.N) };
  }

  describe('Method: constructor', () => {
    it('throws naming every bad option in one message', () => {
      expect(() => limiter('', { maxConcurrent: 0, busyRetryMs: 0, maxAttempts: 1.5, maxLeaseMs: -1 })).toThrow(
        'invalid key concurrency limiter: limiterKey must be a non-empty string (got ""); maxConcurrent must be an integer from 1 to 1000 (got 0); ' +
          'busyRetryMs must be a positive integer (got 0); maxAttempts must be a positive integer (got 1.5); maxLeaseMs must be a positive integer (got -1)',
      );
    });

    it('throws when maxConcurrent is above what one item holds', () => {
      expect(() => limiter('k', { maxConcurrent: 1001 })).toThrow(
        'invalid key concurrency limiter: maxConcurrent must be an integer from 1 to 1000 (got 1001)',
      );
    });

    it('keeps the field and the limit for the caller', () => {
      const l = limiter('k', { maxConcurrent: 7 });
      expect([l.field, l.maxConcurrent]).toEqual(['merchant', 7]);
    });
  });

  describe('Method: acquire', () => {
    it('grants up to maxConcurrent, refuses the next with a wait, and grants again after a release', async () => {
      const l = limiter(freshLimiterKey());
      const first = await l.acquire('m1', inAMinute());
      const second = await l.acquire('m1', inAMinute());
      expect([first.granted, second.granted]).toEqual([true, true]);
      const third = await l.acquire('m1', inAMinute());
      expect(third.granted).toBe(false);
      expect(third.granted === false && third.waitMs).toBeGreaterThan(0);
      if (!first.granted) throw new Error('unreachable');
      await l.release(first.lease);
      const fourth = await l.acquire('m1', inAMinute());
      expect(fourth.granted).toBe(true);
    });

    it('writes once when the key has room, and reads before writing a key it last found full', async () => {
      const client = new DynamoDBClient({});
      const send = jest.spyOn(client, 'send');
      const l = limiter(freshLimiterKey(), { client });
      /** The commands sent since the last call. */
      const sent = (): string[] => {
        const names = send.mock.calls.map((c) => c[0].constructor.name);
        send.mockClear();
        return names;
      };
      // A key with no item: the blind write fails, the read finds nothing, the map is created with our lease.
      const first = await l.acquire('m', inAMinute());
      expect(sent()).toEqual(['UpdateItemCommand', 'GetItemCommand', 'UpdateItemCommand']);
      expect((await l.acquire('m', inAMinute())).granted).toBe(true);
      expect(sent()).toEqual(['UpdateItemCommand']);
      expect((await l.acquire('m', inAMinute())).granted).toBe(false);
      expect(sent()).toEqual(['UpdateItemCommand', 'GetItemCommand']);
      expect((await l.acquire('m', inAMinute())).granted).toBe(false);
      expect(sent()).toEqual(['GetItemCommand']);
      if (!first.granted) throw new Error('unreachable');
      await l.release(first.lease);
      expect(sent()).toEqual(['UpdateItemCommand']);
      expect((await l.acquire('m', inAMinute())).granted).toBe(true);
      expect(sent()).toEqual(['UpdateItemCommand']);
      client.destroy();
    });

    it("never lets more than max leases be held across concurrent containers, reclaims dead workers' slots, and serves every caller", async () => {
      const limiterKey = freshLimiterKey();
      const containers = Array.from({ length: 8 }, () =>
        limiter(limiterKey, { maxConcurrent: 3, busyRetryMs: 10, maxAttempts: 50 }),
      );
      const held: [number, number][] = [];
      const deadLeases = new Set<string>();
      let refusals = 0;
      // The first living workers granted a lease hold it until three are held at once, so that reaching the maximum is
      // counted, not raced: on a loaded machine, leases of 5 to 25 ms need not overlap three at a time on their own.
      let liveHolding = 0;
      let openGate = () => {};
      const gate = new Promise<void>((resolve) => (openGate = resolve));
      await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const l = containers[i % containers.length];
          // Every fifth worker dies holding its lease: its slot comes back only when the lease expires.
          const dies = i % 5 === 0;
          for (let tries = 0; tries < 1000; tries++) {
            const expiresAtMs = dies ? Date.now() + 150 : inAMinute();
            const got = await l.acquire('m', expiresAtMs);
            if (!got.granted) {
              refusals++;
              await sleep(got.waitMs);
              continue;
            }
            // Recorded from after the grant to before the release: inside the lease's real lifetime, never longer.
            const start = Date.now();
            if (dies) {
              deadLeases.add(got.lease.leaseId);
              return void held.push([start, expiresAtMs]);
            }
            if (++liveHolding >= 3) openGate();
            await gate;
            await sleep(5 + Math.floor(Math.random() * 20));
            held.push([start, Date.now()]);
            liveHolding--;
            return l.release(got.lease);
          }
          throw new Error(`worker ${i} was never served`);
        }),
      );
      expect(held).toHaveLength(40);
      expect(peakOverlap(held)).toBe(3);
      expect(refusals).toBeGreaterThan(0);
      const item = await stored(limiterKey, 'm');
      // Released leases are gone; only dead workers' may remain, not yet reclaimed, never more than max.
      const left = Object.keys(item?.leases ?? {});
      expect(left.length).toBeLessThanOrEqual(3);
      expect(left.filter((id) => !deadLeases.has(id))).toEqual([]);
    }, 30_000);

    it('reclaims leases that expired (workers that died) and removes exactly those from the item', async () => {
      const limiterKey = freshLimiterKey();
      let offsetMs = 0;
      const l = limiter(limiterKey, { clock: () => Date.now() + offsetMs });
      const t0 = Date.now();
      const dead = await l.acquire('m', t0 + 1_000);
      const alive = await l.acquire('m', t0 + 60_000);
      expect((await l.acquire('m', t0 + 60_000)).granted).toBe(false);
      offsetMs = 2_000;
      const next = await l.acquire('m', t0 + 60_000);
      expect(next.granted).toBe(true);
      if (!dead.granted || !alive.granted || !next.granted) throw new Error('unreachable');
      expect((await stored(limiterKey, 'm'))?.leases).toEqual({
        [alive.lease.leaseId]: t0 + 60_000,
        [next.lease.leaseId]: t0 + 60_000,
      });
    });

    it('counts a lease acquired already expired as free', async () => {
      const l = limiter(freshLimiterKey(), { maxConcurrent: 1 });
      expect((await l.acquire('m', Date.now() - 1)).granted).toBe(true);
      expect((await l.acquire('m', inAMinute())).granted).toBe(true);
      expect((await l.acquire('m', inAMinute())).granted).toBe(false);
    });

    it("suggests about busyRetryMs, but never a wait past the earliest live lease's expiry", async () => {
      const l = limiter(freshLimiterKey(), { maxConcurrent: 1, busyRetryMs: 10_000 });
      await l.acquire('late', inAMinute());
      const refused = await l.acquire('late', inAMinute());
      expect(refused.granted === false && refused.waitMs).toBeGreaterThanOrEqual(8_000);
      expect(refused.granted === false && refused.waitMs).toBeLessThanOrEqual(12_000);
      await l.acquire('soon', Date.now() + 300);
      const capped = await l.acquire('soon', inAMinute());
      expect(capped.granted === false && capped.waitMs).toBeGreaterThan(0);
      expect(capped.granted === false && capped.waitMs).toBeLessThanOrEqual(300);
    });

    it('keeps distinct keys independent', async () => {
      const l = limiter(freshLimiterKey(), { maxConcurrent: 1 });
      expect((await l.acquire('a', inAMinute())).granted).toBe(true);
      expect((await l.acquire('b', inAMinute())).granted).toBe(true);
      expect((await l.acquire('a', inAMinute())).granted).toBe(false);
      expect((await l.acquire('b', inAMinute())).granted).toBe(false);
    });

    it("sets the item's TTL after every lease, even when a later lease expires sooner, and no further than maxLeaseMs and a minute", async () => {
      const limiterKey = freshLimiterKey();
      const l = limiter(limiterKey, { maxLeaseMs: 900_000 });
      expect(await stored(limiterKey, 'm')).toBeUndefined();
      const long = Date.now() + 600_000;
      const a = await l.acquire('m', long);
      const b = await l.acquire('m', Date.now() + 1_000);
      const item = await stored(limiterKey, 'm');
      expect(Math.max(...Object.values(item?.leases ?? {}))).toBe(long);
      expect((item?.expiresAt ?? 0) * 1000).toBeGreaterThanOrEqual(long);
      expect((item?.expiresAt ?? 0) * 1000).toBeLessThanOrEqual(Date.now() + 900_000 + 61_000);
      if (!a.granted || !b.granted) throw new Error('unreachable');
      await l.release(a.lease);
      await l.release(b.lease);
      expect((await stored(limiterKey, 'm'))?.leases).toEqual({});
    });

    it('throws when the lease would expire more than maxLeaseMs ahead', async () => {
      const now = 1_700_000_000_000;
      const l = limiter(freshLimiterKey(), { maxLeaseMs: 1_000, clock: () => now });
      await expect(l.acquire('m', now + 1_001)).rejects.toThrow(
        'invalid key concurrency lease: expiresAtMs must be at most maxLeaseMs (1000) ahead (got 1001 ahead)',
      );
      await expect(l.acquire('m', Number.NaN)).rejects.toThrow(
        'invalid key concurrency lease: expiresAtMs must be at most maxLeaseMs (1000) ahead (got NaN)',
      );
    });

    it('throws KeyConcurrencyError with the item, the table and the cause when DynamoDB fails', async () => {
      const l = new KeyConcurrencyLimiter({
        tableName: 'no-such-table',
        limiterKey: 'lk',
        field: 'merchant',
        maxConcurrent: 2,
      });
      const error = await l.acquire('m', inAMinute()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KeyConcurrencyError);
      expect(error).toMatchObject({ name: 'KeyConcurrencyError', itemKey: 'lk#conc#m', tableName: 'no-such-table' });
      expect((error as Error).message).toBe(
        'key concurrency item "lk#conc#m" in table "no-such-table": write failed: Requested resource not found',
      );
      expect((error as Error).cause).toBeDefined();
    });

    it('gives up with KeyConcurrencyContentionError after maxAttempts lost races', async () => {
      const conflict = new ConditionalCheckFailedException({
        message: 'The conditional request failed',
        $metadata: {},
      });
      // Every read shows room, every write loses: a key changing faster than the attempts.
      const send = jest.fn(async (command: object) => {
        if (command instanceof GetItemCommand) return { Item: { pk: { S: 'lk#conc#hot' }, leases: { M: {} } } };
        throw conflict;
      });
      const l = limiter('lk', {
        tableName: TABLE,
        maxAttempts: 3,
        client: { send } as unknown as DynamoDBClient,
        random: () => 0,
      });
      const error = await l.acquire('hot', inAMinute()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(KeyConcurrencyContentionError);
      expect(error).toMatchObject({ name: 'KeyConcurrencyContentionError', attempts: 3, itemKey: 'lk#conc#hot' });
      expect((error as Error).message).toBe(
        'key concurrency item "lk#conc#hot" in table "key-concurrency-test": gave up after 3 conflicting writes; raise maxAttempts',
      );
      expect(send).toHaveBeenCalledTimes(6);
    });
  });

  describe('Method: release', () => {
    it('is idempotent, works from another container, and accepts a lease whose item is gone', async () => {
      const limiterKey = freshLimiterKey();
      const l = limiter(limiterKey, { maxConcurrent: 1 });
      const got = await l.acquire('m', inAMinute());
      if (!got.granted) throw new Error('unreachable');
      const other = limiter(limiterKey, { maxConcurrent: 1 });
      await other.release(got.lease);
      await other.release(got.lease);
      await l.release(got.lease);
      expect((await stored(limiterKey, 'm'))?.leases).toEqual({});
      await expect(l.release({ key: 'never-used', leaseId: 'abc', expiresAtMs: inAMinute() })).resolves.toBeUndefined();
      expect(await stored(limiterKey, 'never-used')).toBeUndefined();
      expect((await l.acquire('m', inAMinute())).granted).toBe(true);
    });
  });
});
