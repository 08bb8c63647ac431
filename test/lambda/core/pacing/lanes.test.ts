import { gcraLimits, type GcraState } from '../../../../lambda/core/pacing/gcra';
import { laneCount, laneLimits, MAX_LANES, reserveLanes } from '../../../../lambda/core/pacing/lanes';
import { maxInAnyWindow } from '../../../../lambda/core/pacing/slidingWindow';
import { seeded } from '../../../support/seeded';

describe('Module: lanes', () => {
  describe('Function: laneCount', () => {
    it('splits a burst-1 key into up to MAX_LANES lanes, never more than its allowance', () => {
      expect(laneCount({ startsPerInterval: 3000, intervalMs: 60_000 })).toBe(MAX_LANES);
      expect(laneCount({ startsPerInterval: 5, intervalMs: 60_000 })).toBe(5);
    });

    it('keeps one lane for a key with a burst above 1 (the burst is a one-lane feature)', () => {
      expect(laneCount({ startsPerInterval: 3000, intervalMs: 60_000, burst: 3 })).toBe(1);
    });
  });

  describe('Function: laneLimits', () => {
    it('gives the lanes shares that sum to the allowance, each at burst 1', () => {
      const lanes = laneLimits({ startsPerInterval: 50, intervalMs: 1000 }, 16);
      expect(lanes).toHaveLength(16);
      const shares = lanes.map((l) => Math.round(1_000_000 / l.emissionIntervalUs));
      expect(shares.reduce((a, b) => a + b, 0)).toBe(50);
      expect(new Set(shares)).toEqual(new Set([3, 4]));
      expect(lanes.every((l) => l.burst === 1)).toBe(true);
    });

    it("is the key's own limits on one lane, burst included", () => {
      expect(laneLimits({ startsPerInterval: 10, intervalMs: 1000, burst: 2 }, 1)).toEqual([
        gcraLimits({ startsPerInterval: 10, intervalMs: 1000, burst: 2 }),
      ]);
    });

    it('refuses lanes out of range and lanes with a burst, naming the problem', () => {
      expect(() => laneLimits({ startsPerInterval: 4, intervalMs: 1000 }, 5)).toThrow(
        'invalid rate limit: lanes must be an integer from 1 to startsPerInterval (4) (got 5)',
      );
      expect(() => laneLimits({ startsPerInterval: 4, intervalMs: 1000 }, 0)).toThrow(
        'lanes must be an integer from 1 to startsPerInterval (4) (got 0)',
      );
      expect(() => laneLimits({ startsPerInterval: 40, intervalMs: 1000, burst: 2 }, 4)).toThrow(
        'invalid rate limit: a burst above 1 needs one lane (got 4)',
      );
    });
  });

  describe('Function: reserveLanes', () => {
    // 40 per second over 4 lanes: each lane 10 per second (100 ms apart), the key 25 ms apart.
    const limits = laneLimits({ startsPerInterval: 40, intervalMs: 1000 }, 4);
    const idle = (): (GcraState | undefined)[] => limits.map(() => undefined);

    it('plans a caller as fast as the key on every lane, 25 ms apart', () => {
      const got = reserveLanes(idle(), { nowMs: 1_000, count: 8, maxWaitMs: 1_000, paceMs: 0 }, limits);
      expect(got.granted).toBe(8);
      expect(got.startAtMs).toEqual([1000, 1025, 1050, 1075, 1100, 1125, 1150, 1175]);
      expect(got.lanes.size).toBe(4);
    });

    it('plans a slower caller at its own pace on the whole lanes it can keep up with when the lanes are busy, and leaves the others', () => {
      const busy = limits.map(() => ({ tatUs: 1_010_000 }));
      const got = reserveLanes(busy, { nowMs: 1_000, count: 5, maxWaitMs: 1_000, paceMs: 45 }, limits);
      expect(got.granted).toBe(5);
      // floor(100 / 45) = 2 lanes: every start at least 45 ms after the last, and two lanes left to the fleet.
      expect(got.lanes.size).toBe(2);
      for (let i = 1; i < got.startAtMs.length; i++)
        expect(got.startAtMs[i] - got.startAtMs[i - 1]).toBeGreaterThanOrEqual(45);
    });

    it('takes one idle lane more, so a caller between whole lanes runs at its own pace', () => {
      const got = reserveLanes(idle(), { nowMs: 1_000, count: 5, maxWaitMs: 1_000, paceMs: 45 }, limits);
      expect(got.lanes.size).toBe(3);
      expect(got.startAtMs).toEqual([1000, 1045, 1090, 1135, 1180]);
    });

    it('gives a caller slower than one lane that one lane, the earliest', () => {
      const states: (GcraState | undefined)[] = [
        { tatUs: 2_000_000 },
        { tatUs: 1_500_000 },
        { tatUs: 3_000_000 },
        { tatUs: 2_500_000 },
      ];
      const got = reserveLanes(states, { nowMs: 1_000, count: 3, maxWaitMs: 1_000, paceMs: 150 }, limits);
      expect([...got.lanes.keys()]).toEqual([1]);
      expect(got.startAtMs).toEqual([1500, 1650, 1800]);
      expect(got.lanes.get(1)).toEqual({ tatUs: 1_900_000 });
    });

    it('grants only what fits the wait and hints when the next would start', () => {
      const states = limits.map(() => ({ tatUs: 1_200_000 }));
      const got = reserveLanes(states, { nowMs: 1_000, count: 10, maxWaitMs: 250, paceMs: 0 }, limits);
      // Lanes free from 1200: 1200, 1225 (pace 25), 1250, then 1300 is past 1250.
      expect(got.startAtMs).toEqual([1200, 1225, 1250]);
      expect(got.waitMs).toBe(275);
      const none = reserveLanes(states, { nowMs: 1_000, count: 1, maxWaitMs: 100 }, limits);
      expect(none).toEqual({ granted: 0, startAtMs: [], lanes: new Map(), waitMs: 200 });
    });

    it("never lets more than R starts into any window, whatever the callers' paces and timing", () => {
      for (const seed of [1, 2, 3, 4, 5]) {
        const random = seeded(seed);
        const spec = { startsPerInterval: 30, intervalMs: 1000 };
        const laned = laneLimits(spec, 8);
        let states: (GcraState | undefined)[] = laned.map(() => undefined);
        const starts: number[] = [];
        let nowMs = 0;
        for (let call = 0; call < 400; call++) {
          nowMs += Math.floor(random() * 60);
          const got = reserveLanes(
            states,
            {
              nowMs,
              count: 1 + Math.floor(random() * 12),
              maxWaitMs: Math.floor(random() * 2_000),
              paceMs: Math.floor(random() * 400),
              random,
            },
            laned,
          );
          states = states.map((s, i) => got.lanes.get(i) ?? s);
          starts.push(...got.startAtMs);
        }
        expect(starts.length).toBeGreaterThan(200);
        expect(
          maxInAnyWindow(
            starts.sort((a, b) => a - b),
            1000,
          ),
        ).toBeLessThanOrEqual(30);
      }
    });

    it('is the one-lane rule on one lane (pace ignored)', () => {
      const one = laneLimits({ startsPerInterval: 20, intervalMs: 1000 }, 1);
      const got = reserveLanes([undefined], { nowMs: 0, count: 3, maxWaitMs: 500, paceMs: 400 }, one);
      expect(got.startAtMs).toEqual([0, 50, 100]);
    });

    it('names a bad request', () => {
      expect(() => reserveLanes(idle(), { nowMs: 0, count: 1, paceMs: -1 }, limits)).toThrow(
        'invalid reservation: paceMs must be zero or more (got -1)',
      );
      expect(() => reserveLanes(idle(), { nowMs: 0, count: 0 }, limits)).toThrow(
        'count must be a positive integer (got 0)',
      );
    });
  });
});
