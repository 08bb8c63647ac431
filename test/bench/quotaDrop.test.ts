// The quota-drop bench's summaries of one mode's windows: per phase, and outside the 429 storms.
import { outsideStormsFigures, phaseSummaries, type QuotaWindow } from '../../bench/quotaDrop';

const window = (atMs: number, allowed: number, starts: number, throttled: number): QuotaWindow => ({
  atMs,
  allowed,
  starts,
  throttled,
  rate: allowed,
});

describe('Function: phaseSummaries', () => {
  it("sums each phase's windows in order, with its utilization and its share of 429s", () => {
    const windows = [
      window(0, 10, 10, 0),
      window(1000, 10, 8, 2),
      window(2000, 4, 3, 9),
      window(3000, 4, 4, 3),
      window(4000, 4, 0, 0),
    ];

    const phases = phaseSummaries(windows, [{ windows: 2 }, { windows: 2 }, { windows: 1 }]);

    expect(phases).toEqual([
      {
        fromWindow: 0,
        windows: 2,
        allowedPerWindow: 10,
        starts: 18,
        throttled: 2,
        utilization: 0.9,
        throttledShare: 0.1,
      },
      {
        fromWindow: 2,
        windows: 2,
        allowedPerWindow: 4,
        starts: 7,
        throttled: 12,
        utilization: 0.875,
        throttledShare: 0.6316,
      },
      { fromWindow: 4, windows: 1, allowedPerWindow: 4, starts: 0, throttled: 0, utilization: 0, throttledShare: 0 },
    ]);
  });
});

describe('Function: outsideStormsFigures', () => {
  it('counts only the starts outside the storms, against the allowance of the time outside them', () => {
    // Two windows of 1000 ms allowing 10 and 20; a storm over the second half of the first and the first quarter of
    // the second: outside it, 10 * 0.5 + 20 * 0.75 = 20 allowed.
    const accepted = [0, 100, 499, 500, 999, 1000, 1249, 1250, 1500, 1999];

    const figures = outsideStormsFigures([10, 20], accepted, 1000, [{ fromMs: 500, toMs: 1250 }]);

    expect(figures).toEqual({ utilization: 0.3, stormMs: 750, accepted: 6, allowed: 20 });
  });
});
