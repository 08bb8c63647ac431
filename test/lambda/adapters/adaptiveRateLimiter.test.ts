import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { dynamoClient, resetClients } from '../../../lambda/adapters/clients';
import { AdaptiveDynamoDbRateLimiter, rateItemKey } from '../../../lambda/adapters/adaptiveRateLimiter';
import { RateLimiterError } from '../../../lambda/adapters/rateLimiter';
import { maxInAnyWindow } from '../../../lambda/core/pacing/slidingWindow';
import { LocalAws, startLocalAws } from '../../support/aws';
import { countDynamoCalls, createLimiterTable } from '../handlers/harness';

const TABLE = 'adaptive-limiter-test';
const T0 = 1_800_000_000_000;

describe('Class: AdaptiveDynamoDbRateLimiter', () => {
  let aws: LocalAws;
  let now: number;
  const clock = () => now;
  /** An instance as one container would hold it; refreshMs 0 so every call sees the fleet's latest rate. */
  const instance = (overrides: Partial<ConstructorParameters<typeof AdaptiveDynamoDbRateLimiter>[0]> = {}) =>
    new AdaptiveDynamoDbRateLimiter({ tableName: TABLE, limits: { startsPerInterval: 10, intervalMs: 1000 }, refreshMs: 0, clock, ...overrides });

  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    await createLimiterTable(TABLE);
  });

  afterAll(async () => {
    resetClients();
    await aws.stop();
  });

  beforeEach(() => {
    now = T0;
  });

  describe('Method: throttled', () => {
    it('halves the rate for the whole fleet with one write, and stores it next to the limiter item', async () => {
      const [a, b] = [instance(), instance()];
      expect(await b.currentRate('cut')).toBe(10);
      const counter = countDynamoCalls();
      let change;
      try {
        change = await a.throttled('cut');
      } finally {
        counter.stop();
      }
      expect(change).toEqual({ from: 10, to: 5 });
      expect(counter.calls.filter((c) => c.command === 'UpdateItemCommand')).toHaveLength(1);
      expect(await b.currentRate('cut')).toBe(5);
      // Inside the cooldown: no change, and nothing to report.
      expect(await b.throttled('cut')).toBeUndefined();
      const { Item } = await dynamoClient().send(new GetItemCommand({ TableName: TABLE, Key: { pk: { S: rateItemKey('cut') } }, ConsistentRead: true }));
      expect(Item).toMatchObject({ rate: { N: '5' }, changedAtMs: { N: String(T0) }, decreasedAtMs: { N: String(T0) }, version: { N: '1' } });
    });

    it('cuts once for a storm of throttles from many instances inside the cooldown', async () => {
      const fleet = Array.from({ length: 6 }, () => instance());
      await Promise.all(fleet.map((i) => i.throttled('storm')));
      now += 500;
      await Promise.all(fleet.map((i) => i.throttled('storm')));
      expect(await fleet[0].currentRate('storm')).toBe(5);
      // After the cooldown (the window length), a throttle cuts again.
      now += 600;
      await fleet[3].throttled('storm');
      expect(await fleet[0].currentRate('storm')).toBe(2);
    });
  });

  describe('Method: succeeded', () => {
    it('costs nothing at the ceiling', async () => {
      const limiter = instance({ refreshMs: 60_000 });
      await limiter.currentRate('quiet');
      const counter = countDynamoCalls();
      try {
        await limiter.succeeded('quiet');
      } finally {
        counter.stop();
      }
      expect(counter.calls).toEqual([]);
    });

    it('recovers one step per sixth of a window after a cut, never past the ceiling', async () => {
      const limiter = instance({ adaptive: { increaseStep: 2 } });
      await limiter.throttled('recover');
      const rates: number[] = [];
      for (let i = 0; i < 8; i++) {
        now += 100;
        await limiter.succeeded('recover');
        rates.push(await limiter.currentRate('recover'));
      }
      // A step at most every 167 ms (a sixth of the 1000 ms window): 5 -> 7 at 200 ms, 9 at 400 ms, 10 at 600 ms.
      expect(rates).toEqual([5, 7, 7, 9, 9, 10, 10, 10]);
      now += 1200;
      await limiter.succeeded('recover');
      now += 1200;
      await limiter.succeeded('recover');
      expect(await limiter.currentRate('recover')).toBe(10);
    });
  });

  describe('Method: acquire', () => {
    it('spaces starts at the cut rate', async () => {
      const limiter = instance();
      const before = await limiter.acquire('spacing', 3, { maxWaitMs: 5000 });
      expect(before.startAtMs.map((t) => t - T0)).toEqual([0, 100, 200]);
      now += 10_000;
      await limiter.throttled('spacing');
      const after = await limiter.acquire('spacing', 3, { maxWaitMs: 5000 });
      expect(after.startAtMs.map((t) => t - now)).toEqual([0, 200, 400]);
    });

    it('keeps every window within the ceiling while instances pace one key at different rates', async () => {
      // Burst 3 at the ceiling, the case where mixing rates could otherwise let a start slip into a full window.
      const limits = { startsPerInterval: 10, intervalMs: 1000, burst: 3 };
      const fast = instance({ limits, refreshMs: 3_600_000 });
      const slow = instance({ limits, refreshMs: 3_600_000 });
      // `fast` read the rate before the cut and trusts it for an hour: a container that has not heard of the cut yet.
      await fast.currentRate('mixed');
      await slow.throttled('mixed');
      expect([await fast.currentRate('mixed'), await slow.currentRate('mixed')]).toEqual([10, 5]);
      // A fixed pseudo-random schedule; this seed is one where the cut instance keeping burst 3 lets 12 starts into a
      // window (checked against the pure GCRA), so the test fails if cut rates stop using burst 1.
      let seed = 24;
      const random = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
      const starts: number[] = [];
      for (let i = 0; i < 150; i++) {
        now += Math.floor(random() * 150);
        const count = 1 + Math.floor(random() * 3);
        const got = await (random() < 0.5 ? fast : slow).acquire('mixed', count, { maxWaitMs: 400 });
        starts.push(...got.startAtMs);
      }
      expect(starts.length).toBeGreaterThan(40);
      expect(maxInAnyWindow(starts, 1000)).toBeLessThanOrEqual(10);
    });
  });

  describe('Method: constructor', () => {
    it('names bad adaptive options', () => {
      expect(() => instance({ adaptive: { decreaseFactor: 2 } })).toThrow('invalid adaptive rate: decreaseFactor must be between 0 and 1 exclusive (got 2)');
    });

    it('wraps a DynamoDB failure with the item and table', async () => {
      const broken = new AdaptiveDynamoDbRateLimiter({ tableName: 'no-such-table', limits: { startsPerInterval: 10, intervalMs: 1000 } });
      const error = await broken.throttled('k').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RateLimiterError);
      expect((error as Error).message).toMatch(/^adaptive rate item "k#rate" in table "no-such-table": read failed: /);
    });
  });
});
