import { pacingFigures } from '../../chaos/pacing';

describe('Function: pacingFigures', () => {
  it('sets the starts outside storms, while work waited, against the allowance over that time', () => {
    // Busy 0-10 s, a storm 2-4 s: 8 s countable at 10 per second = 80 allowed.
    const starts = [
      ...Array.from({ length: 20 }, (_, i) => i * 100), // 0-2 s: 20 starts
      ...Array.from({ length: 5 }, (_, i) => 2_000 + i * 100), // in the storm: not counted
      ...Array.from({ length: 40 }, (_, i) => 4_000 + i * 150), // 4-10 s: 40 starts
      12_000, // after the work ran out: not counted
    ];
    const f = pacingFigures({
      starts,
      storms: [[2_000, 4_000]],
      busy: [[0, 10_000]],
      allowancePerSecond: 10,
      windowSeconds: 5,
    });
    expect(f.outsideStorms).toEqual({ seconds: 8, starts: 60, allowed: 80, utilization: 0.75 });
    expect(f.windows.map((w) => [w.fromSeconds, w.starts, w.countedStarts, w.allowed, w.stormMs])).toEqual([
      [0, 32, 27, 30, 2_000],
      [5, 33, 33, 50, 0],
      [10, 1, 0, 0, 0],
    ]);
  });

  it('merges overlapping storms and busy spans, and is 0 with nothing countable', () => {
    const f = pacingFigures({
      starts: [500, 1_500],
      storms: [
        [0, 1_000],
        [500, 2_000],
      ],
      busy: [
        [0, 1_000],
        [800, 3_000],
      ],
      allowancePerSecond: 4,
      windowSeconds: 60,
    });
    expect(f.outsideStorms).toEqual({ seconds: 1, starts: 0, allowed: 4, utilization: 0 });
    expect(
      pacingFigures({ starts: [], storms: [], busy: [], allowancePerSecond: 4, windowSeconds: 60 }).outsideStorms
        .utilization,
    ).toBe(0);
  });
});
