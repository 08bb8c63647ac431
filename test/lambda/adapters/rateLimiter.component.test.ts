import { gcraLimits } from '../../../lambda/core/pacing/gcra';
import { ConditionalCheckFailedException, DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { resetClients } from '../../../lambda/adapters/clients';
import { DynamoDbRateLimiter, LimiterContentionError, RateLimiterError } from '../../../lambda/adapters/rateLimiter';
import { maxInAnyWindow } from '../../../lambda/core/pacing/slidingWindow';
import { type LocalAws, startLocalAws } from '../../support/aws';
import { countingLimiterClient } from '../../support/limiterRequests';
import { createLimiterTable } from '../handlers/harness';
import { VirtualClock } from '../handlers/virtualClock';

const TABLE = 'limiter-test';
const limits = { startsPerInterval: 20, intervalMs: 1000 };

/**
 * Callers that keep asking until served, as consumers would; returns every start time granted. They run on `clock`
 * (the limiters' clock too): their first requests go out together, so they race for real on the local table, and
 * each comes back exactly when its slot opens, however loaded the machine is.
 */
async function demand(
  clock: VirtualClock,
  limiters: DynamoDbRateLimiter[],
  key: string,
  wants: number[],
  maxWaitMs: number,
): Promise<{ starts: number[]; served: number[] }> {
  const starts: number[] = [];
  const served = wants.map(() => 0);
  await clock.concurrently(
    wants.map((want, i) => async () => {
      const limiter = limiters[i % limiters.length];
      while (served[i] < want) {
        const got = await limiter.acquire(key, want - served[i], { maxWaitMs });
        served[i] += got.granted;
        starts.push(...got.startAtMs);
        // Not served in full: come back when the next slot opens (never a tight loop: waitMs > maxWaitMs >= 0).
        if (served[i] < want)
          await clock.sleep(got.granted > 0 ? got.startAtMs[got.granted - 1] - clock.now() : got.waitMs);
      }
    }),
  );
  return { starts, served };
}

describe('Class: DynamoDbRateLimiter', () => {
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

  describe('Method: constructor', () => {
    const saved = process.env.LIMITER_TABLE_NAME;
    afterEach(() => {
      if (saved === undefined) delete process.env.LIMITER_TABLE_NAME;
      else process.env.LIMITER_TABLE_NAME = saved;
    });

    it('reads the table name from LIMITER_TABLE_NAME', () => {
      process.env.LIMITER_TABLE_NAME = 'from-env';
      expect(new DynamoDbRateLimiter({ limits }).tableName).toBe('from-env');
    });

    it('throws when no table name is given or set', () => {
      delete process.env.LIMITER_TABLE_NAME;
      expect(() => new DynamoDbRateLimiter({ limits })).toThrow('environment variable LIMITER_TABLE_NAME is not set');
    });

    it('throws when there are more shards than starts to share', () => {
      expect(
        () =>
          new DynamoDbRateLimiter({ limits: { startsPerInterval: 3, intervalMs: 1000 }, tableName: TABLE, shards: 4 }),
      ).toThrow('invalid rate limiter: shards must be an integer from 1 to startsPerInterval (3) (got 4)');
    });

    it('throws on a negative lead', () => {
      expect(() => new DynamoDbRateLimiter({ limits, tableName: TABLE, leadMs: -1 })).toThrow(
        'invalid rate limiter: leadMs must be zero or a positive integer (got -1)',
      );
    });

    it('throws on a bad allowance before touching DynamoDB', () => {
      expect(
        () => new DynamoDbRateLimiter({ limits: { startsPerInterval: 5, intervalMs: 0 }, tableName: TABLE }),
      ).toThrow('invalid rate limit: intervalMs must be a positive number (got 0)');
    });
  });

  describe('Method: acquire', () => {
    it('grants a fresh key at once and stores its TAT with a TTL', async () => {
      const limiter = new DynamoDbRateLimiter({ limits, tableName: TABLE });
      const before = Date.now();
      const got = await limiter.acquire('fresh', 1);
      expect(got.granted).toBe(1);
      expect(got.waitMs).toBe(0);
      expect(got.startAtMs[0]).toBeGreaterThanOrEqual(before);
      const { Item } = await ddb.send(
        new GetItemCommand({ TableName: TABLE, Key: { pk: { S: 'fresh' } }, ConsistentRead: true }),
      );
      const tatUs = Number(Item?.tat?.N);
      expect(tatUs).toBe(got.startAtMs[0] * 1000 + 50_000);
      expect(Number(Item?.expiresAt?.N)).toBe(Math.ceil(tatUs / 1e6) + 86_400);
    });

    it('spreads a block over consecutive slots and defers what does not fit the wait', async () => {
      const limiter = new DynamoDbRateLimiter({ limits, tableName: TABLE });
      const got = await limiter.acquire('block', 10, { maxWaitMs: 200 });
      expect(got.granted).toBe(5);
      const t0 = got.startAtMs[0];
      expect(got.startAtMs).toEqual([t0, t0 + 50, t0 + 100, t0 + 150, t0 + 200]);
      expect(got.waitMs).toBeGreaterThan(200);
    });

    it('lets a new container learn the stored TAT from a lost race and queue behind it', async () => {
      const warm = new DynamoDbRateLimiter({ limits, tableName: TABLE });
      const first = await warm.acquire('shared', 5, { maxWaitMs: 1000 });
      const cold = new DynamoDbRateLimiter({ limits, tableName: TABLE });
      const refused = await cold.acquire('shared', 1);
      expect(refused.granted).toBe(0);
      expect(refused.waitMs).toBeGreaterThan(0);
      const queued = await cold.acquire('shared', 1, { maxWaitMs: 1000 });
      expect(queued.startAtMs).toEqual([first.startAtMs[4] + 50]);
    });

    it('never lets more than R starts into any 1 s window across concurrent containers, and serves every caller', async () => {
      const clock = new VirtualClock();
      const containers = Array.from(
        { length: 6 },
        () => new DynamoDbRateLimiter({ limits, tableName: TABLE, maxAttempts: 50, clock: clock.now }),
      );
      const wants = Array.from({ length: 24 }, (_, i) => 1 + (i % 4)); // 60 tokens: about 3 s at 20 per second
      const began = clock.now();
      const { starts, served } = await demand(clock, containers, 'concurrent', wants, 400);
      expect(served).toEqual(wants);
      expect(starts).toHaveLength(60);
      expect(maxInAnyWindow(starts, 1000)).toBeLessThanOrEqual(20);
      // Nobody starved: all 60 started within the time the allowance needs for them, plus one window of slack.
      expect(Math.max(...starts) - began).toBeLessThan(60 * 50 + 1000);
    });

    it('lets containers adding blocks to a busy key at the same moment all win, with no lost race', async () => {
      const warm = new DynamoDbRateLimiter({ limits, tableName: TABLE });
      // A queue a second deep: still busy when the fleet's writes land, however slow the machine.
      const last = (await warm.acquire('busy', 20, { maxWaitMs: 2000 })).startAtMs[19];
      const { client, counts } = countingLimiterClient();
      try {
        // Eight cold containers: none knows the TAT, and none needs to.
        const fleet = Array.from(
          { length: 8 },
          () => new DynamoDbRateLimiter({ limits, tableName: TABLE, client, maxAttempts: 1 }),
        );
        const blocks = await Promise.all(fleet.map((l) => l.acquire('busy', 2, { maxWaitMs: 5000 })));
        expect(blocks.map((b) => b.granted)).toEqual(fleet.map(() => 2));
        // Whatever order DynamoDB applied them in, the blocks tile the queue behind its last start, one spacing apart.
        const starts = blocks.flatMap((b) => b.startAtMs).sort((a, b) => a - b);
        expect(starts).toEqual(Array.from({ length: 16 }, (_, i) => last + 50 * (i + 1)));
        expect(counts).toEqual({ written: 8, lost: 0, reads: 0 });
      } finally {
        client.destroy();
      }
    });

    it('splits the allowance across shards so their sum still holds the limit', async () => {
      const clock = new VirtualClock();
      const containers = Array.from(
        { length: 4 },
        () => new DynamoDbRateLimiter({ limits, tableName: TABLE, shards: 2, maxAttempts: 50, clock: clock.now }),
      );
      const { starts } = await demand(
        clock,
        containers,
        'sharded',
        Array.from({ length: 16 }, () => 2),
        300,
      );
      expect(starts).toHaveLength(32);
      expect(maxInAnyWindow(starts, 1000)).toBeLessThanOrEqual(20);
      for (const shard of ['sharded#0', 'sharded#1']) {
        const { Item } = await ddb.send(
          new GetItemCommand({ TableName: TABLE, Key: { pk: { S: shard } }, ConsistentRead: true }),
        );
        expect(Item?.tat?.N).toBeDefined();
      }
    });

    it('wraps a DynamoDB failure with the item and table', async () => {
      const limiter = new DynamoDbRateLimiter({ limits, tableName: 'no-such-table' });
      const error = await limiter.acquire('k', 1).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RateLimiterError);
      expect((error as RateLimiterError).message).toBe(
        'rate limiter item "k" in table "no-such-table": write failed: Requested resource not found',
      );
      expect((error as RateLimiterError).cause).toBeDefined();
    });
  });

  describe('Method: acquire (stubbed client)', () => {
    const conflict = (tatUs?: number) =>
      new ConditionalCheckFailedException({
        message: 'The conditional request failed',
        $metadata: {},
        Item: tatUs === undefined ? undefined : { tat: { N: String(tatUs) } },
      });

    const item = (tatUs: number) => ({ tat: { N: String(tatUs) } });

    it("adds a block at the end of a busy key's queue, wherever it is, and places it from the old TAT DynamoDB returns", async () => {
      const now = 1_700_000_000_000;
      // This container has never seen the key; the queue runs 300 ms ahead when the write lands.
      const send = jest.fn().mockResolvedValue({ Attributes: item((now + 300) * 1000) });
      const limiter = new DynamoDbRateLimiter({
        limits,
        tableName: TABLE,
        client: { send } as unknown as DynamoDBClient,
        clock: () => now,
      });
      expect(await limiter.acquire('k', 2, { maxWaitMs: 1000 })).toEqual({
        granted: 2,
        startAtMs: [now + 300, now + 350],
        waitMs: 0,
      });
      expect(send).toHaveBeenCalledTimes(1);
      const { input } = send.mock.calls[0][0];
      expect(input.UpdateExpression).toBe(
        'SET tat = if_not_exists(tat, :now) + :inc, expiresAt = :expires, liveAt = :live',
      );
      expect(input.ConditionExpression).toBe('attribute_not_exists(tat) OR tat BETWEEN :now AND :limit');
      // Two spacings of 50 ms; the block still fits the wait while the queue ends by now + 1000 + 50 - 100 ms.
      expect(input.ExpressionAttributeValues[':inc']).toEqual({ N: '100000' });
      expect(input.ExpressionAttributeValues[':now']).toEqual({ N: String(now * 1000) });
      expect(input.ExpressionAttributeValues[':limit']).toEqual({ N: String((now + 950) * 1000) });
      expect(input.ReturnValues).toBe('ALL_OLD');
      // Its next block goes behind its own, known from the answer: a refusal needs no write.
      expect(await limiter.acquire('k', 1, { maxWaitMs: 300 })).toEqual({ granted: 0, startAtMs: [], waitMs: 400 });
      expect(send).toHaveBeenCalledTimes(1);
    });

    it('uses the old item returned with a failed condition instead of reading it: an idle key takes the compare-and-set', async () => {
      const now = 1_700_000_000_000;
      const send = jest
        .fn()
        .mockRejectedValueOnce(conflict((now - 5000) * 1000))
        .mockResolvedValueOnce({});
      const limiter = new DynamoDbRateLimiter({
        limits,
        tableName: TABLE,
        client: { send } as unknown as DynamoDBClient,
        clock: () => now,
      });
      const got = await limiter.acquire('k', 1, { maxWaitMs: 1000 });
      expect(got.startAtMs).toEqual([now]);
      expect(send).toHaveBeenCalledTimes(2);
      // The key is idle: its block starts now, not at its old TAT, so the write may not add to that TAT.
      expect(send.mock.calls[1][0].input.ConditionExpression).toBe('attribute_not_exists(tat) OR tat <= :now');
      expect(send.mock.calls[1][0].input.ExpressionAttributeValues[':next']).toEqual({ N: String((now + 50) * 1000) });
    });

    it('decides again on the item when its block no longer fits the wait, and refuses a sliver without another write', async () => {
      const now = 1_700_000_000_000;
      // Others filled the queue to 900 ms ahead meanwhile: 3 of 10 tokens would fit the 1000 ms wait.
      const send = jest.fn().mockRejectedValueOnce(conflict((now + 900) * 1000));
      const limiter = new DynamoDbRateLimiter({
        limits,
        tableName: TABLE,
        client: { send } as unknown as DynamoDBClient,
        clock: () => now,
        random: () => 0,
      });
      const got = await limiter.acquire('k', 10, { maxWaitMs: 1000 });
      // The smallest part behind a queue is 6 (a quarter of the 21 the wait holds): it fits 150 ms from now.
      expect(got).toEqual({ granted: 0, startAtMs: [], waitMs: 150 });
      expect(send).toHaveBeenCalledTimes(1);
    });

    it('reserves an idle key no earlier than leadMs ahead', async () => {
      const now = 1_700_000_000_000;
      const send = jest.fn().mockResolvedValue({});
      const limiter = new DynamoDbRateLimiter({
        limits,
        tableName: TABLE,
        client: { send } as unknown as DynamoDBClient,
        clock: () => now,
        leadMs: 15,
      });
      expect(await limiter.acquire('k', 2, { maxWaitMs: 100 })).toEqual({
        granted: 2,
        startAtMs: [now + 15, now + 65],
        waitMs: 0,
      });
      expect(send.mock.calls[0][0].input.ExpressionAttributeValues[':now']).toEqual({ N: String((now + 15) * 1000) });
    });

    it('reads the item first when its view of it is older than one emission interval', async () => {
      let now = 1_700_000_000_000;
      const interval = gcraLimits(limits).emissionIntervalUs / 1000;
      // Another container took slots meanwhile: the stored TAT is ahead of what this one last wrote.
      const stored = () => item((now + 300) * 1000);
      const send = jest
        .fn()
        .mockImplementation(async (command: { constructor: { name: string } }) =>
          command.constructor.name === 'GetItemCommand' ? { Item: stored() } : { Attributes: stored() },
        );
      const limiter = new DynamoDbRateLimiter({
        limits,
        tableName: TABLE,
        client: { send } as unknown as DynamoDBClient,
        clock: () => now,
      });
      await limiter.acquire('k', 1, { maxWaitMs: 1000 });
      now += interval / 2;
      await limiter.acquire('k', 1, { maxWaitMs: 1000 });
      // Within one interval of its own write: the view is fresh, one write.
      expect(send.mock.calls.map((c) => c[0].constructor.name)).toEqual(['UpdateItemCommand', 'UpdateItemCommand']);
      now += 10 * interval;
      const got = await limiter.acquire('k', 1, { maxWaitMs: 1000 });
      expect(send.mock.calls.slice(2).map((c) => c[0].constructor.name)).toEqual([
        'GetItemCommand',
        'UpdateItemCommand',
      ]);
      expect(send.mock.calls[2][0].input.ConsistentRead).toBe(true);
      expect(got.startAtMs).toEqual([now + 300]);
    });

    it('gives up with a contention error after maxAttempts lost races', async () => {
      const send = jest.fn().mockImplementation(() => Promise.reject(conflict(1)));
      const limiter = new DynamoDbRateLimiter({
        limits,
        tableName: TABLE,
        client: { send } as unknown as DynamoDBClient,
        maxAttempts: 4,
        random: () => 0,
      });
      const error = await limiter.acquire('hot', 1).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LimiterContentionError);
      expect((error as Error).message).toBe(
        'rate limiter item "hot" in table "limiter-test": gave up after 4 conflicting writes; raise maxAttempts or shards',
      );
      expect(send).toHaveBeenCalledTimes(4);
    });
  });
});
