import { AdaptiveRateOptions, AdaptiveRateState, initialRate, onSucceeded, onThrottled, rateAt } from '../../../../lambda/core/pacing/adaptiveRate';

// A 1000 ms window: hold 500 ms (1250 ms after a cut), probe 250 ms, verdict 250 ms, tail 250 ms, cooldown 1000 ms,
// ramp steps every 100 ms. The probe is 4 per window for a quarter window: one start.
const options: AdaptiveRateOptions = { ceiling: 100, floor: 5, increaseStep: 4, recoverEveryMs: 100, windowMs: 1000 };
const T = 1_700_000_000_000;
/** The state right after a cut from the ceiling at T. */
const cutAtT: AdaptiveRateState = { rate: 50, decreasedAtMs: T, heldBy: 'cut' };
/** The rates paced at the given times (ms after T). */
const ratesAt = (state: AdaptiveRateState, times: number[]) => times.map((t) => rateAt(state, T + t, options));
/** The state as a container holds it after reporting quiet starts at each of `times` (ms after T). */
const quietAt = (state: AdaptiveRateState, times: number[]) => times.reduce((s, t) => onSucceeded(s, T + t, options), state);

describe('Function: initialRate', () => {
  it('starts steady at the configured ceiling', () => {
    expect(initialRate(options)).toEqual({ rate: 100 });
  });

  it('throws naming every bad option', () => {
    expect(() =>
      initialRate({ ceiling: 0, floor: 2, decreaseFactor: 1, increaseStep: 0, recoverEveryMs: 0, windowMs: 0, probeMs: 0, decreaseCooldownMs: -1, holdMs: -1, cutHoldMs: -1, verdictMs: -1, tailMs: -1 }),
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

  it('holds a cut rate until the provider\'s window has refilled, probes one step above it, then waits for the verdict', () => {
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
    expect(ratesAt({ rate: 60, decreasedAtMs: T, heldBy: 'back', throttledAtMs: T + 300, throttles: 1 }, [500, 799, 800])).toEqual([60, 60, 64]);
  });
});

describe('Function: onThrottled', () => {
  it('halves a steady rate: the provider\'s line fell under a rate it used to take', () => {
    expect(onThrottled(initialRate(options), T, options)).toEqual(cutAtT);
  });

  it('ignores the throttles of the decrease\'s own tail', () => {
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
    const back: AdaptiveRateState = { rate: 60, decreasedAtMs: T, heldBy: 'back', throttledAtMs: T + 700, throttles: 1 };
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

  it('treats a throttle a window past a verdict that saw no quiet starts as the held rate\'s', () => {
    expect(onThrottled(cutAtT, T + 2750, options)).toEqual({ rate: 25, decreasedAtMs: T + 2750, heldBy: 'cut' });
  });

  it('goes back to the held rate when the ramp is throttled just past it (a gap in the provider\'s window, not a moved line)', () => {
    const seen = quietAt(cutAtT, [1760, 1860, 1960, 2060]);
    // The window before the report's delay held 51.4 on average: within a tenth of 50.
    expect(onThrottled(seen, T + 2100, options)).toEqual({ rate: 50, decreasedAtMs: T + 2100, heldBy: 'back' });
  });

  it('goes back to the rate the provider\'s window held two reports\' delays before when the ramp got well past the held rate', () => {
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
  it('changes nothing while steady, or before the probe\'s verdict is in', () => {
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
