import { APPLY_SAMPLES, ApplyTimeEstimator } from '../../../../lambda/core/pacing/applyEstimator';

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
});
