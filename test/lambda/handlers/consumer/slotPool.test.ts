import { ApplyTimeEstimator } from '../../../../lambda/core/pacing/applyEstimator';
import { logger } from '../../../../lambda/adapters/observability';
import { RateLimiterError } from '../../../../lambda/adapters/rateLimiter';
import { SlotPool, type SlotPoolSettings } from '../../../../lambda/handlers/consumer/slotPool';
import { FakeLimiter, grant } from './fakes';

const KEY = 'fake-provider';
const T0 = 1_800_000_000_000;

let nowMs: number;
let remainingMs: number;

/** A pool on `limiter` (undefined: pacing off): 10 s short wait, 50 ms late tolerance, 100 ms spacing, 2 s reserve. */
function pool(limiter: FakeLimiter | undefined, overrides: Partial<SlotPoolSettings> = {}): SlotPool {
  const settings: SlotPoolSettings = {
    limiter,
    key: KEY,
    shortWaitMs: 10_000,
    lateToleranceMs: 50,
    spacingMs: 100,
    clock: () => nowMs,
    estimator: new ApplyTimeEstimator(),
    ...overrides,
  };
  return new SlotPool(settings, () => remainingMs, 2_000);
}

/** An estimator whose applies take `ms` each. */
function applying(ms: number): ApplyTimeEstimator {
  const estimator = new ApplyTimeEstimator();
  estimator.record(ms);
  return estimator;
}

describe('Class: SlotPool', () => {
  beforeAll(() => logger.setLogLevel('SILENT'));

  beforeEach(() => {
    jest.restoreAllMocks();
    nowMs = T0;
    remainingMs = 60_000;
  });

  describe('Property: paced, key', () => {
    it('is paced with a limiter and not without, and names its key', () => {
      expect(pool(new FakeLimiter()).paced).toBe(true);
      expect(pool(undefined).paced).toBe(false);
      expect(pool(undefined).key).toBe(KEY);
    });
  });

  describe('Method: maxWaitMs', () => {
    it('is the short wait while the invocation has time', () => {
      expect(pool(new FakeLimiter()).maxWaitMs()).toBe(10_000);
    });

    it('is bounded by the remaining time less the reserve', () => {
      const slots = pool(new FakeLimiter());
      remainingMs = 5_000;
      expect(slots.maxWaitMs()).toBe(3_000);
    });

    it('is never negative, when the reserve is more than the time left', () => {
      const slots = pool(new FakeLimiter());
      remainingMs = 1_500;
      expect(slots.maxWaitMs()).toBe(0);
    });
  });

  describe('Method: usableBlock', () => {
    it("is the estimator's block for the pool's spacing and late tolerance", () => {
      expect(pool(new FakeLimiter()).usableBlock()).toBe(Number.POSITIVE_INFINITY);
      // 120 ms applies on 100 ms spacing: 20 ms later per slot, 50 ms tolerance: slots 0, 20 and 40 ms late.
      expect(pool(new FakeLimiter(), { estimator: applying(120) }).usableBlock()).toBe(3);
    });

    it("is small when the container's records often overrun, so the slots a hang would pass stay with the fleet", async () => {
      // 1 in 20 records held for 10 s: too few to move the 90th percentile (usableBlock is unbounded), but a block of b
      // expects to lose (b - 1) / 2 of its slots to it in 20, within a tenth up to b = 5.
      const estimator = new ApplyTimeEstimator();
      for (const ms of [...Array<number>(19).fill(30), 10_000]) estimator.record(ms);
      expect(estimator.usableBlock(100, 50)).toBe(Number.POSITIVE_INFINITY);
      const limiter = new FakeLimiter([grant([T0])]);
      const slots = pool(limiter, { estimator });
      expect(slots.usableBlock()).toBe(5);
      slots.runLeft = 9;
      await slots.next();
      expect(limiter.calls.map((c) => c.count)).toEqual([5]);
    });

    it('bounds a refill to that block, whatever is left of the batch', async () => {
      const limiter = new FakeLimiter([grant([T0])]);
      const slots = pool(limiter, { estimator: applying(120) });
      slots.runLeft = 9;
      await slots.next();
      expect(limiter.calls.map((c) => c.count)).toEqual([3]);
    });
  });

  describe('Method: acquireBlock', () => {
    it('asks the limiter once for the block within the longest wait, and keeps the granted slots in order', async () => {
      const limiter = new FakeLimiter([grant([T0, T0 + 100, T0 + 200])]);
      const slots = pool(limiter);
      remainingMs = 7_000;

      expect(await slots.acquireBlock(3)).toEqual(grant([T0, T0 + 100, T0 + 200]));
      expect(limiter.calls).toEqual([{ key: KEY, count: 3, options: { maxWaitMs: 5_000, priority: 'live' } }]);
      expect(slots.unused()).toBe(3);
      expect([await slots.next(), await slots.next(), await slots.next()]).toEqual([
        { startAtMs: T0 },
        { startAtMs: T0 + 100 },
        { startAtMs: T0 + 200 },
      ]);
      // The block answered all three: no second limiter call.
      expect(limiter.calls).toHaveLength(1);
    });

    it('keeps only the granted slots of a partial grant', async () => {
      const limiter = new FakeLimiter([{ granted: 2, startAtMs: [T0, T0 + 100, T0 + 200], waitMs: 900 }]);
      const slots = pool(limiter);
      const acquired = await slots.acquireBlock(5);
      expect(acquired.granted).toBe(2);
      expect(slots.unused()).toBe(2);
      expect([await slots.next(), await slots.next()]).toEqual([{ startAtMs: T0 }, { startAtMs: T0 + 100 }]);
    });

    it("throws the limiter's error and holds nothing", async () => {
      const slots = pool(new FakeLimiter([new RateLimiterError('DynamoDB unavailable', KEY, 'limiter')]));
      await expect(slots.acquireBlock(4)).rejects.toThrow('DynamoDB unavailable');
      expect(slots.unused()).toBe(0);
    });
  });

  describe('Method: next', () => {
    it("answers the clock's now without asking anything when pacing is off", async () => {
      const slots = pool(undefined);
      nowMs = T0 + 1234;
      expect(await slots.next()).toEqual({ startAtMs: T0 + 1234 });
    });

    it('answers the earliest slot, even one still ahead', async () => {
      const limiter = new FakeLimiter([grant([T0 + 500, T0 + 600])]);
      const slots = pool(limiter);
      await slots.acquireBlock(2);
      expect(await slots.next()).toEqual({ startAtMs: T0 + 500 });
    });

    it('drops the slots more than the late tolerance behind the clock, and keeps one exactly at it', async () => {
      const limiter = new FakeLimiter([grant([T0, T0 + 100, T0 + 200, T0 + 300])]);
      const slots = pool(limiter);
      await slots.acquireBlock(4);
      // A long apply: at T0 + 250, T0 (250 ms late) and T0 + 100 (150 ms) have passed; T0 + 200 is exactly 50 ms late.
      nowMs = T0 + 250;
      expect(await slots.next()).toEqual({ startAtMs: T0 + 200 });
      nowMs = T0 + 351;
      // T0 + 300 is 51 ms late: dropped, and the empty pool asks for a fresh slot.
      limiter.script(grant([T0 + 400]));
      expect(await slots.next()).toEqual({ startAtMs: T0 + 400 });
      expect(limiter.calls).toHaveLength(2);
    });

    it('refills an empty pool with one slot for each record left and this one, and keeps the rest of the grant', async () => {
      const limiter = new FakeLimiter([grant([T0 + 10, T0 + 110, T0 + 210])]);
      const slots = pool(limiter);
      slots.runLeft = 2;
      remainingMs = 4_000;

      expect(await slots.next()).toEqual({ startAtMs: T0 + 10 });
      expect(limiter.calls).toEqual([{ key: KEY, count: 3, options: { maxWaitMs: 2_000, priority: 'live' } }]);
      expect([await slots.next(), await slots.next()]).toEqual([{ startAtMs: T0 + 110 }, { startAtMs: T0 + 210 }]);
      expect(limiter.calls).toHaveLength(1);
      expect(slots.unused()).toBe(3);
    });

    it('refills with no more than the container can start on time', async () => {
      // 120 ms applies on 100 ms spacing with 50 ms tolerance: 3 usable, though 9 records are left.
      const limiter = new FakeLimiter([grant([T0, T0 + 100, T0 + 200])]);
      const slots = pool(limiter, { estimator: applying(120) });
      slots.runLeft = 9;
      await slots.next();
      expect(limiter.calls.map((c) => c.count)).toEqual([3]);
    });

    it('asks for one slot for the last record', async () => {
      const limiter = new FakeLimiter([grant([T0])]);
      const slots = pool(limiter);
      slots.runLeft = 0;
      expect(await slots.next()).toEqual({ startAtMs: T0 });
      expect(limiter.calls.map((c) => c.count)).toEqual([1]);
    });

    it("answers the limiter's hint when it grants nothing within the wait", async () => {
      const limiter = new FakeLimiter([{ granted: 0, startAtMs: [], waitMs: 12_345 }]);
      const slots = pool(limiter);
      expect(await slots.next()).toEqual({ waitMs: 12_345 });
      expect(slots.unused()).toBe(0);
    });

    it('answers the spacing as the wait, and warns, when the limiter cannot be asked', async () => {
      const warn = jest.spyOn(logger, 'warn');
      const error = new RateLimiterError('DynamoDB unavailable', KEY, 'limiter');
      const slots = pool(new FakeLimiter([error]));
      expect(await slots.next()).toEqual({ waitMs: 100 });
      expect(warn).toHaveBeenCalledWith('rate limiter unavailable for a fresh slot; deferring', { key: KEY, error });
      expect(slots.unused()).toBe(0);
    });
  });

  describe('Methods: markUsed, giveBack, unused', () => {
    it('counts the granted slots never started on, the dropped ones among them', async () => {
      const limiter = new FakeLimiter([grant([T0, T0 + 100, T0 + 200, T0 + 300])]);
      const slots = pool(limiter);
      await slots.acquireBlock(4);
      await slots.next();
      slots.markUsed();
      // T0 + 100 and T0 + 200 pass during a long apply and are dropped.
      nowMs = T0 + 300;
      expect(await slots.next()).toEqual({ startAtMs: T0 + 300 });
      slots.markUsed();
      expect(slots.unused()).toBe(2);
    });

    it('puts a slot given back first again, so the next record starts on it', async () => {
      const limiter = new FakeLimiter([grant([T0, T0 + 100, T0 + 200])]);
      const slots = pool(limiter);
      await slots.acquireBlock(3);
      const first = (await slots.next()) as { startAtMs: number };
      slots.markUsed();
      // Answered at the claim (a duplicate): no downstream call was made on it.
      slots.giveBack(first.startAtMs);
      expect(slots.unused()).toBe(3);
      expect([await slots.next(), await slots.next(), await slots.next()]).toEqual([
        { startAtMs: T0 },
        { startAtMs: T0 + 100 },
        { startAtMs: T0 + 200 },
      ]);
    });

    it('re-inserts a given-back slot in start order among the pool', async () => {
      const limiter = new FakeLimiter([grant([T0, T0 + 200, T0 + 300])]);
      const slots = pool(limiter);
      await slots.acquireBlock(3);
      for (const at of [T0 + 250, T0 + 400, T0 + 100]) {
        slots.markUsed();
        slots.giveBack(at);
      }
      const order = [];
      for (let i = 0; i < 6; i++) order.push(((await slots.next()) as { startAtMs: number }).startAtMs - T0);
      expect(order).toEqual([0, 100, 200, 250, 300, 400]);
      expect(limiter.calls).toHaveLength(1);
    });
  });
});
