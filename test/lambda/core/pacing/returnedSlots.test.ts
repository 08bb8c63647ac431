import { takeReturned } from '../../../../lambda/core/pacing/returnedSlots';

describe('Function: takeReturned', () => {
  it('takes the earliest reachable slots at the caller\'s pace, up to the count', () => {
    const got = takeReturned([1_300, 1_000, 1_040, 1_100, 1_200], { nowMs: 1_000, maxWaitMs: 5_000, count: 3, paceMs: 50 });
    // 1 040 is closer than 50 ms to 1 000: the caller could not reach both, so it is left for another.
    expect(got.taken).toEqual([1_000, 1_100, 1_200]);
    expect(got.expired).toEqual([]);
  });

  it('leaves slots past the longest wait and drops the ones that have passed', () => {
    const got = takeReturned([900, 950, 1_010, 1_500, 9_000], { nowMs: 1_000, maxWaitMs: 1_000, count: 10, paceMs: 0 });
    expect(got.taken).toEqual([1_010, 1_500]);
    expect(got.expired).toEqual([900, 950]);
  });

  it('counts a slot handed back twice (two lanes\' tokens at one millisecond) once', () => {
    expect(takeReturned([1_000, 1_000, 1_000], { nowMs: 1_000, maxWaitMs: 100, count: 5, paceMs: 0 }).taken).toEqual([1_000]);
  });

  it('takes nothing for a count of 0, but still names the passed slots', () => {
    expect(takeReturned([10, 2_000], { nowMs: 1_000, maxWaitMs: 5_000, count: 0, paceMs: 0 })).toEqual({ taken: [], expired: [10] });
  });
});
