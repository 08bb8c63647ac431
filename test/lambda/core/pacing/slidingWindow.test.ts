import { maxInAnyWindow, windowViolations } from '../../../../lambda/core/pacing/slidingWindow';

/** The definition, checked the slow way: every integer window start between the first and last event. */
function bruteForce(times: number[], windowMs: number): number {
  if (times.length === 0) return 0;
  let best = 0;
  for (let s = Math.min(...times) - windowMs; s <= Math.max(...times); s++) {
    best = Math.max(best, times.filter((t) => t >= s && t < s + windowMs).length);
  }
  return best;
}

describe('Function: maxInAnyWindow', () => {
  it('is 0 for no events', () => {
    expect(maxInAnyWindow([], 1000)).toBe(0);
  });

  it('treats the window as half-open: an event exactly one window later is not in it', () => {
    expect(maxInAnyWindow([0, 500, 1000], 1000)).toBe(2);
    expect(maxInAnyWindow([0, 500, 999], 1000)).toBe(3);
  });

  it('counts events at the same instant', () => {
    expect(maxInAnyWindow([5, 5, 5, 2000], 10)).toBe(3);
  });

  it('finds a dense window that straddles fixed-window boundaries', () => {
    // Two per fixed second ([0, 1000) and [1000, 2000)), but four in the window opening at 600.
    expect(maxInAnyWindow([600, 900, 1100, 1400], 1000)).toBe(4);
    expect(maxInAnyWindow([600, 900, 1100, 1400], 300)).toBe(2);
  });

  it('agrees with the definition on random event sets, in any order', () => {
    let x = 7;
    const rnd = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let round = 0; round < 200; round++) {
      const times = Array.from({ length: Math.floor(rnd() * 30) }, () => Math.floor(rnd() * 500));
      const windowMs = 1 + Math.floor(rnd() * 100);
      expect(maxInAnyWindow(times, windowMs)).toBe(bruteForce(times, windowMs));
    }
  });
});

describe('Function: windowViolations', () => {
  it('lists each over-full window by the event that opens it', () => {
    expect(windowViolations([0, 10, 20, 30, 500], 100, 2)).toEqual([
      { openedAt: 0, count: 4 },
      { openedAt: 10, count: 3 },
    ]);
  });

  it('is empty when the limit held', () => {
    expect(windowViolations([0, 100, 200], 100, 1)).toEqual([]);
  });
});
