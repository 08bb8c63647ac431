import {
  backfillItemKey,
  backfillLimits,
  fairOrder,
  isBackfill,
  LIVE_WAITING_WINDOW_MS,
  liveWaiting,
} from '../../../lambda/core/backfill';

describe('Module: backfill', () => {
  describe('Function: liveWaiting', () => {
    it('counts live work as waiting while its last start is within the window, and not once it is older or never was', () => {
      expect(liveWaiting(1_000, 1_000 + LIVE_WAITING_WINDOW_MS)).toBe(true);
      expect(liveWaiting(1_000, 1_001 + LIVE_WAITING_WINDOW_MS)).toBe(false);
      expect(liveWaiting(undefined, 5_000)).toBe(false);
    });
  });

  describe('Function: isBackfill', () => {
    it('marks a catch-up message and a redriven copy (it carries the failure reason), and nothing else', () => {
      expect(isBackfill({ backfill: true }, {})).toBe(true);
      expect(isBackfill({}, { failureReason: { stringValue: 'refused', dataType: 'String' } })).toBe(true);
      expect(isBackfill({}, { jobType: { stringValue: 'x', dataType: 'String' } })).toBe(false);
      expect(isBackfill({}, undefined)).toBe(false);
    });
  });

  describe('Function: backfillLimits', () => {
    it('caps backfill at its share of the allowance with no burst, at least one start per interval', () => {
      expect(backfillLimits({ startsPerInterval: 20, intervalMs: 1000, burst: 4, safetyMarginMs: 50 }, 0.5)).toEqual({
        startsPerInterval: 10,
        intervalMs: 1000,
        burst: 1,
        safetyMarginMs: 50,
      });
      expect(backfillLimits({ startsPerInterval: 3, intervalMs: 60_000 }, 0.1)?.startsPerInterval).toBe(1);
      // A share of 0.3 of 10 is 3, not 2 (0.3 x 10 is 2.9999... in floating point).
      expect(backfillLimits({ startsPerInterval: 10, intervalMs: 1000 }, 0.3)?.startsPerInterval).toBe(3);
    });

    it('is no cap at a share of the whole allowance, and refuses a share outside (0, 1]', () => {
      expect(backfillLimits({ startsPerInterval: 20, intervalMs: 1000 }, 1)).toBeUndefined();
      expect(() => backfillLimits({ startsPerInterval: 20, intervalMs: 1000 }, 0)).toThrow(
        'backfillShare must be above 0 and at most 1 (got 0)',
      );
      expect(() => backfillLimits({ startsPerInterval: 20, intervalMs: 1000 }, 1.5)).toThrow(
        'backfillShare must be above 0 and at most 1 (got 1.5)',
      );
    });

    it('counts the cap on its own item beside the job-wide one', () => {
      expect(backfillItemKey('provider-x')).toBe('provider-x#backfill');
    });
  });

  describe('Function: fairOrder', () => {
    const item = (key: string | undefined, backfill = false, n = 0) => ({ key, backfill, n });
    const order = (items: ReturnType<typeof item>[]) =>
      fairOrder(
        items,
        (i) => i.key,
        (i) => i.backfill,
      ).map((i) => `${i.backfill ? 'B' : ''}${i.key ?? '-'}${i.n}`);

    it('lets keys take turns, each keeping its own order, in the order they first appear', () => {
      expect(
        order([
          item('a', false, 1),
          item('a', false, 2),
          item('a', false, 3),
          item('b', false, 1),
          item('c', false, 1),
          item('b', false, 2),
        ]),
      ).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
    });

    it('puts live records before backfill, and treats records without a key each as its own', () => {
      expect(
        order([
          item('a', true, 1),
          item(undefined, false, 1),
          item('a', false, 1),
          item(undefined, false, 2),
          item('a', false, 2),
        ]),
      ).toEqual(['-1', 'a1', '-2', 'a2', 'Ba1']);
    });
  });
});
