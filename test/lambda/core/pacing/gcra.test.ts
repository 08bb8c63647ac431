import {
  gcraLimits,
  type GcraLimits,
  type GcraState,
  reserve,
  reserveBlock,
} from '../../../../lambda/core/pacing/gcra';
import { maxInAnyWindow } from '../../../../lambda/core/pacing/slidingWindow';
import { PacingConfigError } from '../../../../lambda/core/pacing/errors';
import { seeded } from '../../../support/seeded';

const int = (rnd: () => number, lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));

const T0 = 1_700_000_000_000;

describe('Function: gcraLimits', () => {
  it('spaces tokens W / R apart for strict pacing', () => {
    expect(gcraLimits({ startsPerInterval: 20, intervalMs: 1000 })).toEqual({
      emissionIntervalUs: 50_000,
      toleranceUs: 50_000,
      burst: 1,
    });
  });

  it('pays for a burst out of the rate: T = W / (R - B + 1)', () => {
    expect(gcraLimits({ startsPerInterval: 20, intervalMs: 1000, burst: 5 })).toEqual({
      emissionIntervalUs: 62_500,
      toleranceUs: 312_500,
      burst: 5,
    });
  });

  it('spreads the rate over the window plus the safety margin, rounding T up to whole microseconds', () => {
    expect(gcraLimits({ startsPerInterval: 3, intervalMs: 1000, safetyMarginMs: 1 }).emissionIntervalUs).toBe(333_667);
  });

  it('throws naming every bad value', () => {
    expect(() => gcraLimits({ startsPerInterval: 0, intervalMs: -1, burst: 1.5, safetyMarginMs: -2 })).toThrow(
      new PacingConfigError(
        'invalid rate limit: startsPerInterval must be a positive integer (got 0); intervalMs must be a positive number (got -1); burst must be a positive integer (got 1.5); safetyMarginMs must be zero or more (got -2)',
      ),
    );
  });

  it('throws when the burst exceeds the allowance', () => {
    expect(() => gcraLimits({ startsPerInterval: 3, intervalMs: 1000, burst: 4 })).toThrow(
      'invalid rate limit: burst must be at most startsPerInterval (3) (got 4)',
    );
  });
});

describe('Function: reserve', () => {
  const strict = gcraLimits({ startsPerInterval: 20, intervalMs: 1000 });

  it('grants a first token at once on a fresh key', () => {
    expect(reserve(undefined, { nowMs: T0, count: 1 }, strict)).toEqual({
      granted: 1,
      startAtMs: [T0],
      state: { tatUs: T0 * 1000 + 50_000 },
      waitMs: 0,
    });
  });

  it('refuses a token that cannot start now, leaves the state alone and says how long to wait', () => {
    const state = { tatUs: T0 * 1000 + 50_000 };
    expect(reserve(state, { nowMs: T0 + 10, count: 1 }, strict)).toEqual({
      granted: 0,
      startAtMs: [],
      state,
      waitMs: 40,
    });
  });

  it('treats a TAT in the past as idle', () => {
    const r = reserve({ tatUs: (T0 - 60_000) * 1000 }, { nowMs: T0, count: 1 }, strict);
    expect(r.startAtMs).toEqual([T0]);
    expect(r.state).toEqual({ tatUs: T0 * 1000 + 50_000 });
  });

  it('spreads a block over consecutive slots in one decision', () => {
    const r = reserve(undefined, { nowMs: T0, count: 4, maxWaitMs: 1000 }, strict);
    expect(r).toEqual({
      granted: 4,
      startAtMs: [T0, T0 + 50, T0 + 100, T0 + 150],
      state: { tatUs: (T0 + 200) * 1000 },
      waitMs: 0,
    });
  });

  it('grants the prefix that starts within maxWaitMs and hints at the next slot', () => {
    const r = reserve(undefined, { nowMs: T0, count: 10, maxWaitMs: 120 }, strict);
    expect(r.granted).toBe(3);
    expect(r.startAtMs).toEqual([T0, T0 + 50, T0 + 100]);
    expect(r.waitMs).toBe(150);
    expect(r.state).toEqual({ tatUs: (T0 + 150) * 1000 });
  });

  it('lets a burst start back to back after an idle spell, then paces', () => {
    const limits = gcraLimits({ startsPerInterval: 10, intervalMs: 1000, burst: 3 }); // T = 125 ms
    const r = reserve(undefined, { nowMs: T0, count: 5, maxWaitMs: 1000 }, limits);
    expect(r.startAtMs).toEqual([T0, T0, T0, T0 + 125, T0 + 250]);
  });

  it('rounds start times up to whole milliseconds', () => {
    const limits = gcraLimits({ startsPerInterval: 3, intervalMs: 1000 }); // T = 333.334 ms
    const r = reserve(undefined, { nowMs: T0, count: 3, maxWaitMs: 1000 }, limits);
    expect(r.startAtMs).toEqual([T0, T0 + 334, T0 + 667]);
  });

  it('throws naming every bad request value', () => {
    expect(() => reserve(undefined, { nowMs: 1.5, count: 0, maxWaitMs: -1 }, strict)).toThrow(
      'invalid reservation: nowMs must be integer milliseconds (got 1.5); count must be a positive integer (got 0); maxWaitMs must be zero or more (got -1)',
    );
  });

  /**
   * Replays random request streams against one state, as the DynamoDB item would apply them, and checks every
   * granted start against the sliding-window oracle. Callers' clocks are skewed so `now` is not monotonic.
   */
  it('never grants more than R starts in any sliding window, over many random request streams', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const rnd = seeded(seed);
      const r = int(rnd, 1, 30);
      const intervalMs = int(rnd, 50, 5000);
      const burst = int(rnd, 1, r);
      const limits = gcraLimits({
        startsPerInterval: r,
        intervalMs,
        burst,
        safetyMarginMs: int(rnd, 0, 1) ? 0 : int(rnd, 0, 20),
      });
      let state: GcraState | undefined;
      let clock = T0;
      const starts: number[] = [];
      for (let i = 0; i < 400; i++) {
        clock += int(rnd, 0, 3) === 0 ? int(rnd, 0, intervalMs * 2) : int(rnd, 0, Math.ceil(intervalMs / r));
        const skew = int(rnd, 0, 30);
        const res = reserve(
          state,
          { nowMs: clock - skew, count: int(rnd, 1, 12), maxWaitMs: int(rnd, 0, 2) * int(rnd, 0, intervalMs * 2) },
          limits,
        );
        state = res.state;
        starts.push(...res.startAtMs);
      }
      const seen = maxInAnyWindow(starts, intervalMs);
      if (seen > r) throw new Error(`seed ${seed}: ${seen} starts in one window of ${intervalMs} ms, allowed ${r}`);
      expect(seen).toBeLessThanOrEqual(r);
    }
  });

  /**
   * Simulated time: callers that retry after the hinted wait are all served, within the time the allowance needs for
   * the total demand, and a steady demand leaves no window under-used.
   */
  it('serves every caller that keeps asking, without starvation and without idle capacity', () => {
    for (let seed = 1; seed <= 50; seed++) {
      const rnd = seeded(1000 + seed);
      const r = int(rnd, 2, 25);
      const intervalMs = int(rnd, 100, 2000);
      const limits: GcraLimits = gcraLimits({ startsPerInterval: r, intervalMs });
      const callers = Array.from({ length: int(rnd, 2, 12) }, () => ({
        left: int(rnd, 1, 15),
        wakeAt: T0,
        maxWaitMs: int(rnd, 0, intervalMs),
      }));
      const total = callers.reduce((n, c) => n + c.left, 0);
      let state: GcraState | undefined;
      const starts: number[] = [];
      let now = T0;
      let calls = 0;
      while (callers.some((c) => c.left > 0)) {
        calls++;
        const next = callers.filter((c) => c.left > 0).sort((a, b) => a.wakeAt - b.wakeAt)[0];
        now = Math.max(now, next.wakeAt);
        const res = reserve(state, { nowMs: now, count: next.left, maxWaitMs: next.maxWaitMs }, limits);
        state = res.state;
        starts.push(...res.startAtMs);
        next.left -= res.granted;
        next.wakeAt = res.granted > 0 ? Math.max(now, res.startAtMs[res.granted - 1]) : now + res.waitMs;
      }
      const last = Math.max(...starts);
      // total starts at spacing T, the first at T0: the last starts no later than (total - 1) * T after it, plus under
      // one millisecond per call (a caller's integer-millisecond clock can skip the fraction of a slot).
      expect(last - T0).toBeLessThanOrEqual(Math.ceil(((total - 1) * limits.emissionIntervalUs) / 1000) + calls);
      expect(starts).toHaveLength(total);
      expect(maxInAnyWindow(starts, intervalMs)).toBeLessThanOrEqual(r);
    }
  });
});

describe('Function: reserveBlock', () => {
  // 20 per second: T = 50 ms; a 950 ms wait holds 20 tokens on an idle key (0 to 950 ms), so the smallest part behind a
  // queue is 5.
  const limits = gcraLimits({ startsPerInterval: 20, intervalMs: 1000 });
  const queued = (aheadMs: number): GcraState => ({ tatUs: (T0 + aheadMs) * 1000 });

  it('grants a partial block on an idle key, as reserve does', () => {
    const request = { nowMs: T0, count: 10, maxWaitMs: 200 };
    expect(reserveBlock(undefined, request, limits)).toEqual(reserve(undefined, request, limits));
    expect(reserveBlock(queued(-500), request, limits).granted).toBe(5);
  });

  it('refuses a sliver behind a queue, and says when the smallest part fits, plus a jitter while the queue lasts', () => {
    // The queue runs 900 ms ahead: 2 of 10 tokens fit the 950 ms wait (starts at 900 and 950).
    const request = { nowMs: T0, count: 10, maxWaitMs: 950 };
    expect(reserve(queued(900), request, limits).granted).toBe(2);
    const early = reserveBlock(queued(900), { ...request, random: () => 0 }, limits);
    // 5 fit once the wait reaches the 5th slot: 900 + 4 * 50 - 950 = 150 ms from now.
    expect(early).toEqual({ granted: 0, startAtMs: [], state: queued(900), waitMs: 150 });
    const late = reserveBlock(queued(900), { ...request, random: () => 0.5 }, limits);
    // Spread over the wait less two parts (950 + 50 - 500 ms): the queue ahead stays reserved that long.
    expect(late.waitMs).toBe(150 + 250);
  });

  it('grants a part behind a queue once it holds the smallest share of the wait', () => {
    const got = reserveBlock(queued(750), { nowMs: T0, count: 10, maxWaitMs: 950, random: () => 0 }, limits);
    expect(got.granted).toBe(5);
    expect(got.startAtMs).toEqual([750, 800, 850, 900, 950].map((ms) => T0 + ms));
  });

  it('asks no more than the whole request: a request smaller than the smallest share is all or nothing', () => {
    expect(reserveBlock(queued(850), { nowMs: T0, count: 3, maxWaitMs: 950 }, limits).granted).toBe(3);
    expect(reserveBlock(queued(900), { nowMs: T0, count: 3, maxWaitMs: 950, random: () => 0 }, limits)).toMatchObject({
      granted: 0,
      waitMs: 50,
    });
  });

  it("refuses with reserve's hint when not even one token fits", () => {
    const request = { nowMs: T0, count: 10, maxWaitMs: 100 };
    expect(reserveBlock(queued(900), request, limits)).toEqual(reserve(queued(900), request, limits));
  });
});
