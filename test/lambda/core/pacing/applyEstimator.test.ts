import { APPLY_SAMPLES, ApplyTimeEstimator, MAX_BLOCK_LOSS_SHARE } from '../../../../lambda/core/pacing/applyEstimator';

/** An estimator that has seen these apply durations, oldest first. */
function seen(samples: number[], capacity?: number): ApplyTimeEstimator {
  const estimator = new ApplyTimeEstimator(capacity);
  for (const ms of samples) estimator.record(ms);
  return estimator;
}

describe('Class: ApplyTimeEstimator', () => {
  describe('Method: constructor', () => {
    it('remembers 20 samples by default', () => {
      expect(APPLY_SAMPLES).toBe(20);
      // One slow apply, then 1..20: a window of 20 holds exactly 1..20 (p90: 18); 19 would hold 2..20 and 21 the
      // slow one too (both give 19).
      const estimator = seen([1_000_000, ...Array.from({ length: 20 }, (_, i) => i + 1)]);
      expect(estimator.estimateMs()).toBe(18);
    });

    it.each([0, -1, 1.5, Number.NaN])('throws when the capacity is %p', (capacity) => {
      expect(() => new ApplyTimeEstimator(capacity)).toThrow(
        new RangeError(`capacity must be a positive integer, got ${capacity}`),
      );
    });
  });

  describe('Method: estimateMs', () => {
    it('is 0 before the first apply', () => {
      expect(new ApplyTimeEstimator().estimateMs()).toBe(0);
    });

    it('is the one sample when there is one', () => {
      expect(seen([42]).estimateMs()).toBe(42);
    });

    it('is the 90th percentile by nearest rank, not the mean or the maximum', () => {
      // 10 samples: the 9th smallest. The mean (145.5) and the maximum (1000) are not it.
      expect(seen([50, 10, 90, 30, 70, 20, 80, 40, 60, 1000].map((ms) => ms + 0.5)).estimateMs()).toBe(90.5);
      // 11 samples: ceil(9.9) = the 10th smallest.
      expect(seen([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]).estimateMs()).toBe(10);
      // 5 samples: ceil(4.5) = the 5th, the slowest.
      expect(seen([5, 1, 4, 2, 3]).estimateMs()).toBe(5);
    });

    it('sorts numerically, not as strings', () => {
      // As strings, 9 would sort after 100 and be taken as the p90 of two.
      expect(seen([9, 100]).estimateMs()).toBe(100);
    });

    it('forgets the oldest sample past the capacity', () => {
      const estimator = seen([1000, 10, 10], 3);
      expect(estimator.estimateMs()).toBe(1000);
      estimator.record(20);
      // The 1000 was the oldest and is gone; [10, 10, 20] remain.
      expect(estimator.estimateMs()).toBe(20);
      estimator.record(5);
      estimator.record(5);
      // [20, 5, 5]: the p90 of three is the largest.
      expect(estimator.estimateMs()).toBe(20);
      estimator.record(5);
      expect(estimator.estimateMs()).toBe(5);
    });
  });

  describe('Method: paceMs', () => {
    it('is the 75th percentile of the recent applies, below the slow tail the block sizes use', () => {
      const estimator = new ApplyTimeEstimator();
      expect(estimator.paceMs()).toBe(0);
      for (const ms of [10, 20, 30, 40, 50, 60, 70, 80, 90, 400]) estimator.record(ms);
      expect(estimator.paceMs()).toBe(80);
      expect(estimator.estimateMs()).toBe(90);
    });
  });

  describe('Method: usableBlock', () => {
    it('is unbounded before the first apply', () => {
      expect(new ApplyTimeEstimator().usableBlock(100, 50)).toBe(Number.POSITIVE_INFINITY);
    });

    it('is unbounded while applies are no slower than the spacing', () => {
      expect(seen([80, 99]).usableBlock(100, 0)).toBe(Number.POSITIVE_INFINITY);
      expect(seen([100]).usableBlock(100, 0)).toBe(Number.POSITIVE_INFINITY);
    });

    it('is one slot when applies are slower than the spacing and nothing may start late', () => {
      expect(seen([101]).usableBlock(100, 0)).toBe(1);
    });

    it('takes one slot plus every later slot reached within the late tolerance', () => {
      // Each apply runs 30 ms past its slot's spacing: slot k is reached 30k ms late; 0, 30, 60, 90 are within 100.
      expect(seen([130]).usableBlock(100, 100)).toBe(4);
      // Exactly at the tolerance still counts (30 x 4 = 120).
      expect(seen([130]).usableBlock(100, 120)).toBe(5);
      expect(seen([130]).usableBlock(100, 119)).toBe(4);
    });

    it("leaves the claim's time to spare at the block's last slot, the start being checked after its claim", () => {
      // The uploads' case: 25 ms slots, 45 ms cycles, 125 ms tolerance. By the tolerance alone a block of 7, whose last
      // slot is reached 120 ms late and lost behind a 10 ms claim; with the claim (its p90) reserved, a block of 6.
      const estimator = seen([45]);
      expect(estimator.usableBlock(25, 125)).toBe(7);
      for (const ms of [2, 4, 10, 3]) estimator.recordClaim(ms);
      expect(estimator.claimMs()).toBe(10);
      expect(estimator.usableBlock(25, 125)).toBe(6);
      // Claims as long as the tolerance still leave half of it to wake in: a block of 1 + 62.5 / 20.
      estimator.recordClaim(200);
      estimator.recordClaim(200);
      expect(estimator.wakeToleranceMs(125)).toBe(62.5);
      expect(estimator.usableBlock(25, 125)).toBe(4);
      // Applies quicker than the spacing are never late, whatever the claim.
      expect(seen([20]).usableBlock(25, 125)).toBe(Number.POSITIVE_INFINITY);
    });

    it('is sized from the p90, so one slow apply among fast ones does not shrink the block', () => {
      const estimator = seen([...Array<number>(9).fill(50), 10_000]);
      expect(estimator.estimateMs()).toBe(50);
      expect(estimator.usableBlock(100, 0)).toBe(Number.POSITIVE_INFINITY);
      // Two slow ones in ten reach the p90.
      estimator.record(10_000);
      expect(estimator.estimateMs()).toBe(10_000);
      expect(estimator.usableBlock(100, 9_900)).toBe(2);
    });
  });

  describe('Method: overrunBlock', () => {
    it('is unbounded before the first record, and while records keep the pace', () => {
      expect(new ApplyTimeEstimator().overrunBlock(50, 125)).toBe(Number.POSITIVE_INFINITY);
      // A record of 175 ms on a 50 ms gap with 125 ms tolerance ends exactly at the next slot's tolerance: nothing lost.
      expect(seen([30, 40, 175]).overrunBlock(50, 125)).toBe(Number.POSITIVE_INFINITY);
    });

    it('is unbounded while the mean loss per record is within the share, at any block size', () => {
      expect(MAX_BLOCK_LOSS_SHARE).toBe(0.1);
      // One record in twenty loses 2 slots (226 ms: past slots 1 and 2, and slot 3 is reached within its tolerance):
      // 0.1 per record, the share.
      expect(seen([...Array<number>(19).fill(30), 226]).overrunBlock(50, 125)).toBe(Number.POSITIVE_INFINITY);
    });

    it('is the largest block whose expected loss is within the share when records overrun often', () => {
      // 2 in 20 hang (a 10 s timeout loses every later slot): places k = 1..b lose min(l, b - k), so a block of b
      // expects 0.1 x (0 + 1 + ... + (b - 1)) / b = 0.05 (b - 1): 0.1 at b = 3, 0.15 at b = 4.
      const faulty = seen([...Array<number>(18).fill(30), 10_000, 10_000]);
      expect(faulty.overrunBlock(50, 125)).toBe(3);
      // A larger share allows a larger block; a smaller one, a block of one.
      expect(faulty.overrunBlock(50, 125, 0.2)).toBe(5);
      expect(faulty.overrunBlock(50, 125, 0.01)).toBe(1);
    });

    it.each([0, -0.1, Number.NaN])(
      'throws when the share is %p, which no block of one slot or more could meet',
      (share) => {
        expect(() => seen([10_000]).overrunBlock(50, 125, share)).toThrow(
          new RangeError(`maxLossShare must be above 0, got ${share}`),
        );
      },
    );

    it('counts only the slots a record passes: a short overrun costs less than a hang', () => {
      // Every fifth record takes 375 ms on a 50 ms gap: slots 1..4 pass (slot 5, at 250 ms, is reached within its
      // 125 ms tolerance). At a share of 0.15: b = 2 expects 0.2 x 1 / 2 = 0.1, b = 3 0.2 x 3 / 3 = 0.2.
      const slow = seen([...Array<number>(4).fill(30), 375]);
      expect(slow.overrunBlock(50, 125, 0.15)).toBe(2);
      // The same records at a 200 ms gap pass one slot each: 0.2 x (b - 1) / b, 0.15 at b = 4 and 0.16 at b = 5.
      expect(slow.overrunBlock(200, 125, 0.15)).toBe(4);
    });
  });

  describe('Method: blockSize', () => {
    it('is the smaller of the block its lag reaches and the block its slow tail allows', () => {
      const estimator = new ApplyTimeEstimator();
      for (const ms of [...Array<number>(19).fill(30), 10_000]) estimator.record(ms);
      // One hang in 20 leaves the 90th percentile at 30 ms (usableBlock unbounded); the tail caps the block at 5.
      expect(estimator.blockSize(100, 50)).toBe(5);
      const steady = new ApplyTimeEstimator();
      for (let i = 0; i < 10; i++) steady.record(120);
      // 20 ms late per slot against a 50 ms tolerance: 3 slots, no tail to cap it.
      expect(steady.blockSize(100, 50)).toBe(3);
    });
  });
});
