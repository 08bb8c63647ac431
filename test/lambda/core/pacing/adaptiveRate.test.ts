import {
  type AdaptiveRateOptions,
  type AdaptiveRateState,
  initialRate,
  onSucceeded,
  onThrottled,
  rateAt,
} from '../../../../lambda/core/pacing/adaptiveRate';

// A 1000 ms window: hold 500 ms (1250 ms after a cut), probe 250 ms, verdict 250 ms, tail 250 ms, cooldown 1000 ms,
// ramp steps every 100 ms. The probe is 4 per window for a quarter window: one start.
const options: AdaptiveRateOptions = { ceiling: 100, floor: 5, increaseStep: 4, recoverEveryMs: 100, windowMs: 1000 };
const T = 1_700_000_000_000;
/** The state right after a cut from the ceiling at T. */
const cutAtT: AdaptiveRateState = { rate: 50, decreasedAtMs: T, heldBy: 'cut' };
/** The rates paced at the given times (ms after T). */
const ratesAt = (state: AdaptiveRateState, times: number[]) => times.map((t) => rateAt(state, T + t, options));
/** The state as a container holds it after reporting quiet starts at each of `times` (ms after T). */
const quietAt = (state: AdaptiveRateState, times: number[]) =>
  times.reduce((s, t) => onSucceeded(s, T + t, options), state);

describe('Function: initialRate', () => {
  it('starts steady at the configured ceiling', () => {
    expect(initialRate(options)).toEqual({ rate: 100 });
  });

  it('throws naming every bad option', () => {
    expect(() =>
      initialRate({
        ceiling: 0,
        floor: 2,
        decreaseFactor: 1,
        increaseStep: 0,
        recoverEveryMs: 0,
        windowMs: 0,
        probeMs: 0,
        decreaseCooldownMs: -1,
        holdMs: -1,
        cutHoldMs: -1,
        verdictMs: -1,
        tailMs: -1,
      }),
    ).toThrow(
      'invalid adaptive rate: ceiling must be a positive integer (got 0); floor must be an integer from 1 to ceiling (got 2); decreaseFactor must be between 0 and 1 exclusive (got 1); ' +
        'increaseStep must be a positive integer (got 0); recoverEveryMs must be positive (got 0); windowMs must be positive (got 0); probeMs must be positive (got 0); ' +
        'decreaseCooldownMs must be zero or more (got -1); holdMs must be zero or more (got -1); cutHoldMs must be zero or more (got -1); verdictMs must be zero or more (got -1); ' +
        'tailMs must be zero or more (got -1)',
    );
  });
});

describe('Function: rateAt', () => {
  it('is the ceiling while steady', () => {
    expect(rateAt(initialRate(options), T, options)).toBe(100);
  });

  it("holds a cut rate until the provider's window has refilled, probes one step above it, then waits for the verdict", () => {
    expect(ratesAt(cutAtT, [0, 1249, 1250, 1499, 1500, 1749, 5000])).toEqual([50, 50, 54, 54, 50, 50, 50]);
  });

  it('ramps only on quiet starts seen after the verdict, the step doubling every recoverEveryMs up to the ceiling', () => {
    const seen = quietAt(cutAtT, [1760, 1860, 1960, 2060, 2160]);
    expect(ratesAt(seen, [1759, 1760, 1860, 1960, 2060, 2160, 5000])).toEqual([50, 54, 58, 66, 82, 100, 100]);
  });

  it('climbs no more than one step past the step it last saw quiet starts at', () => {
    // Quiet starts at the ramp's first step only (then the fleet stalled, or ran out of work).
    const seen = quietAt(cutAtT, [1760, 1800]);
    expect(ratesAt(seen, [1760, 1860, 1960, 5000])).toEqual([54, 58, 58, 58]);
  });

  it('holds a rate that went back to the line for half a window only', () => {
    expect(ratesAt({ rate: 60, decreasedAtMs: T, heldBy: 'back' }, [499, 500, 750])).toEqual([60, 64, 60]);
  });

  it('holds the probe back for a hold after a throttle noted while holding', () => {
    expect(
      ratesAt({ rate: 60, decreasedAtMs: T, heldBy: 'back', throttledAtMs: T + 300, throttles: 1 }, [500, 799, 800]),
    ).toEqual([60, 60, 64]);
  });
});

describe('Function: onThrottled', () => {
  it("halves a steady rate: the provider's line fell under a rate it used to take", () => {
    expect(onThrottled(initialRate(options), T, options)).toEqual(cutAtT);
  });

  it("ignores the throttles of the decrease's own tail", () => {
    expect(onThrottled(cutAtT, T + 249, options)).toBe(cutAtT);
  });

  it('notes a throttle after the tail, at most once per tail, and does not cut again within the cooldown', () => {
    const noted = onThrottled(cutAtT, T + 300, options);
    expect(noted).toEqual({ ...cutAtT, throttledAtMs: T + 300, throttles: 1 });
    expect(onThrottled(noted, T + 549, options)).toBe(noted);
    expect(onThrottled(noted, T + 600, options)).toEqual({ ...cutAtT, throttledAtMs: T + 600, throttles: 2 });
  });

  it('cuts again when the held rate still draws 429s after the cooldown', () => {
    const noted = onThrottled(cutAtT, T + 300, options);
    expect(onThrottled(noted, T + 1000, options)).toEqual({ rate: 25, decreasedAtMs: T + 1000, heldBy: 'cut' });
  });

  it('steps a rate that went back to the line down by one start when it draws a 429 after the cooldown', () => {
    // Noted at T+700, the probe waits until T+1200: the throttle at T+1000 comes while the rate still holds.
    const back: AdaptiveRateState = {
      rate: 60,
      decreasedAtMs: T,
      heldBy: 'back',
      throttledAtMs: T + 700,
      throttles: 1,
    };
    expect(onThrottled(back, T + 1000, options)).toEqual({ rate: 59, decreasedAtMs: T + 1000, heldBy: 'cut' });
  });

  it('goes back to the held rate when the probe is throttled, without a cut', () => {
    expect(onThrottled(cutAtT, T + 1300, options)).toEqual({ rate: 50, decreasedAtMs: T + 1300, heldBy: 'back' });
    expect(onThrottled(cutAtT, T + 1600, options)).toEqual({ rate: 50, decreasedAtMs: T + 1600, heldBy: 'back' });
  });

  it('takes a start off the held rate when its hold drew a 429 too, and cuts when it drew them more than once', () => {
    const once = { ...cutAtT, throttledAtMs: T + 300, throttles: 1 };
    expect(onThrottled(once, T + 1600, options)).toEqual({ rate: 49, decreasedAtMs: T + 1600, heldBy: 'back' });
    const twice = { ...cutAtT, throttledAtMs: T + 600, throttles: 2 };
    expect(onThrottled(twice, T + 1900, options)).toEqual({ rate: 25, decreasedAtMs: T + 1900, heldBy: 'cut' });
  });

  it("treats a throttle a window past a verdict that saw no quiet starts as the held rate's", () => {
    expect(onThrottled(cutAtT, T + 2750, options)).toEqual({ rate: 25, decreasedAtMs: T + 2750, heldBy: 'cut' });
  });

  it("goes back to the held rate when the ramp is throttled just past it (a gap in the provider's window, not a moved line)", () => {
    const seen = quietAt(cutAtT, [1760, 1860, 1960, 2060]);
    // The window before the report's delay held 51.4 on average: within a tenth of 50.
    expect(onThrottled(seen, T + 2100, options)).toEqual({ rate: 50, decreasedAtMs: T + 2100, heldBy: 'back' });
  });

  it("goes back to the rate the provider's window held two reports' delays before when the ramp got well past the held rate", () => {
    const seen = quietAt(cutAtT, [1750, 1850, 1950, 2050, 2150, 2250, 2450, 2650, 2850]);
    // [T+1400, T+2400): probe 54 x 100, verdict 50 x 250, ramp 54, 58, 66, 82 x 100 each, 100 x 250: 68.9 on average,
    // less the probe's one start.
    expect(onThrottled(seen, T + 2900, options)).toEqual({ rate: 67, decreasedAtMs: T + 2900, heldBy: 'back' });
  });

  it('cuts from the ceiling once the ramp has been there for a window', () => {
    const seen = quietAt(cutAtT, [1750, 1850, 1950, 2050, 2150, 3000]);
    expect(onThrottled(seen, T + 3150, options)).toEqual({ rate: 50, decreasedAtMs: T + 3150, heldBy: 'cut' });
  });

  it('never goes below the floor', () => {
    let state = initialRate(options);
    for (let i = 0; i < 10; i++) state = onThrottled(state, T + i * 60_000, options);
    expect(state.rate).toBe(5);
  });
});

describe('Function: onSucceeded', () => {
  it("changes nothing while steady, or before the probe's verdict is in", () => {
    const steady = initialRate(options);
    expect(onSucceeded(steady, T, options)).toBe(steady);
    expect(onSucceeded(cutAtT, T + 1749, options)).toBe(cutAtT);
  });

  it('records the first and the latest quiet starts after the verdict', () => {
    expect(quietAt(cutAtT, [1800, 1900])).toEqual({ ...cutAtT, quietFromMs: T + 1800, quietAtMs: T + 1900 });
  });

  it('brings a rate above a lowered ceiling down to it', () => {
    expect(onSucceeded({ rate: 120 }, T, options)).toEqual({ rate: 100 });
  });
});

describe("Function: onThrottled, with the reporter's evidence (a line or storms)", () => {
  // Reports of 5 starts every 50 ms from `from` to `to` (ms after T), `refused` of each 5 answered 429.
  const reports = (from: number, to: number, refused: number) =>
    Array.from({ length: Math.floor((to - from) / 50) + 1 }, (_, i) => ({
      atMs: T + from + i * 50,
      starts: 5,
      throttles: refused,
    }));
  const evidence = (...parts: ReturnType<typeof reports>[]) => ({ history: parts.flat() });
  const cut = onThrottled(initialRate(options), T, options, evidence(reports(-500, 0, 1)));

  it('cuts a steady rate as without evidence, remembering the rate it came from', () => {
    expect(cut).toEqual({ rate: 50, decreasedAtMs: T, heldBy: 'cut', from: 100 });
  });

  it('holds a testable cut until a measurement after the refill is in (cooldown plus a window)', () => {
    expect(ratesAt(cut, [1999, 2000])).toEqual([50, 54]);
  });

  it('waits for half a window of the held rate after the refill before it judges the cut', () => {
    expect(onThrottled(cut, T + 1400, options, evidence(reports(1000, 1400, 1)))).toBe(cut);
  });

  it('cuts again when the held rate is still refused half its starts or more: a line far under it', () => {
    expect(onThrottled(cut, T + 1600, options, evidence(reports(1000, 1600, 3)))).toMatchObject({
      rate: 25,
      heldBy: 'cut',
      from: 50,
    });
  });

  describe('the early look, from a sixth to all of stormCheckMs (half the window) after the cut', () => {
    // The reports since the cut, then the one that brings the throttle (a new storm's: all 5 refused).
    const since = (refused: number, to: number) =>
      evidence(reports(-500, 0, 1), reports(50, to - 50, refused), [{ atMs: T + to, starts: 5, throttles: 5 }]);

    it('tests the rate before the cut at once when few of the starts since it were refused: storms end in moments', () => {
      expect(onThrottled(cut, T + 200, options, since(1, 200))).toEqual({
        rate: 100,
        testFromMs: T + 200,
        testShare: 0.2,
      });
    });

    it('keeps the cut while most starts since it are refused, as a fallen line refuses them while its window is full', () => {
      expect(onThrottled(cut, T + 200, options, since(3, 200))).toBe(cut);
    });

    it('leaves the report that brought the throttle out, and needs half of minStarts of the others', () => {
      // One report since the cut (5 starts, of the 8 needed) is too few, whatever it says; two (10) are enough.
      const trigger = [{ atMs: T + 200, starts: 5, throttles: 5 }];
      expect(onThrottled(cut, T + 200, options, evidence(reports(150, 150, 0), trigger))).toBe(cut);
      expect(onThrottled(cut, T + 200, options, evidence(reports(100, 150, 0), trigger))).toEqual({
        rate: 100,
        testFromMs: T + 200,
        testShare: 0,
      });
    });

    it('looks only in its span: not before a sixth of it, not after it', () => {
      // Plenty of quiet starts, 10 ms apart, but only 80 ms after the cut.
      const early = evidence(
        Array.from({ length: 7 }, (_, i) => ({ atMs: T + 10 + i * 10, starts: 5, throttles: 0 })),
        [{ atMs: T + 80, starts: 5, throttles: 5 }],
      );
      expect(onThrottled(cut, T + 80, options, early)).toBe(cut);
      expect(onThrottled(cut, T + 500, options, since(0, 500))).not.toHaveProperty('testFromMs');
      expect(onThrottled(cut, T + 200, { ...options, stormCheckMs: 0 }, since(0, 200))).toBe(cut);
    });
  });

  it('tests a held rate still refused a smaller share at the rate before the cut', () => {
    expect(onThrottled(cut, T + 1600, options, evidence(reports(1000, 1600, 1)))).toEqual({
      rate: 100,
      testFromMs: T + 1600,
      testShare: 0.2,
    });
  });

  describe("the test's verdict, after the refill at the higher rate", () => {
    const testing: AdaptiveRateState = { rate: 100, testFromMs: T, testShare: 0.2 };

    it('waits a window and a half at the higher rate', () => {
      expect(onThrottled(testing, T + 1400, options, evidence(reports(1000, 1400, 1)))).toBe(testing);
    });

    it('finds storms when the higher rate is refused about the same share: steady there, that share tolerated', () => {
      const calm = onThrottled(testing, T + 1600, options, evidence(reports(1000, 1600, 1)));
      expect(calm).toEqual({ rate: 100, calmShare: 0.2, calmUntilMs: T + 1600 + 10_000 });
      // Storms at that level cut nothing, and renew the tolerance once half its time has gone ...
      expect(onThrottled(calm, T + 3000, options, evidence(reports(2000, 3000, 1)))).toBe(calm);
      expect(onThrottled(calm, T + 7000, options, evidence(reports(6000, 7000, 1)))).toEqual({
        ...calm,
        calmUntilMs: T + 7000 + 10_000,
      });
      // ... but a line well over them still cuts.
      expect(onThrottled(calm, T + 3000, options, evidence(reports(2000, 3000, 3)))).toMatchObject({
        rate: 50,
        heldBy: 'cut',
        from: 100,
        calmShare: 0.2,
      });
      // The report that brought the throttle is not part of the share: a storm that refused a whole batch of 20 would
      // make 26 of 50 starts refused, over the tolerance; without it, 6 of 30.
      expect(
        onThrottled(
          calm,
          T + 3000,
          options,
          evidence(reports(2700, 2950, 1), [{ atMs: T + 3000, starts: 20, throttles: 20 }]),
        ),
      ).toBe(calm);
    });

    it("finds a line when the higher rate is refused a much larger share: back at what it accepted, less the storms' share", () => {
      // 0.6 refused at 100, 0.2 at the lower rate: the line is about 100 * (1 - 0.4).
      expect(onThrottled(testing, T + 1600, options, evidence(reports(1000, 1600, 3)))).toEqual({
        rate: 60,
        decreasedAtMs: T + 1600,
        heldBy: 'back',
      });
    });

    it('gives a test up after three windows without a verdict: the state is steady again and a throttle cuts', () => {
      expect(onThrottled(testing, T + 3000, options, evidence(reports(2500, 3000, 1)))).toMatchObject({
        rate: 50,
        heldBy: 'cut',
        from: 100,
      });
    });
  });
});
