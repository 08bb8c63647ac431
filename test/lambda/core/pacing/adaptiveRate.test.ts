import { AdaptiveRateOptions, initialRate, onSucceeded, onThrottled } from '../../../../lambda/core/pacing/adaptiveRate';

const options: AdaptiveRateOptions = { ceiling: 100, floor: 5, recoverEveryMs: 60_000 };
const T = 1_700_000_000_000;

describe('Function: initialRate', () => {
  it('starts at the configured ceiling', () => {
    expect(initialRate(options)).toEqual({ rate: 100 });
  });

  it('throws naming every bad option', () => {
    expect(() => initialRate({ ceiling: 0, floor: 2, decreaseFactor: 1, increaseStep: 0, recoverEveryMs: 0, decreaseCooldownMs: -1 })).toThrow(
      'invalid adaptive rate: ceiling must be a positive integer (got 0); floor must be an integer from 1 to ceiling (got 2); decreaseFactor must be between 0 and 1 exclusive (got 1); increaseStep must be a positive integer (got 0); recoverEveryMs must be positive (got 0); decreaseCooldownMs must be zero or more (got -1)',
    );
  });
});

describe('Function: onThrottled', () => {
  it('halves the rate on a throttle', () => {
    expect(onThrottled({ rate: 100 }, T, options)).toEqual({ rate: 50, changedAtMs: T, decreasedAtMs: T });
  });

  it('cuts once for a storm of throttles inside the cooldown', () => {
    let state = onThrottled({ rate: 100 }, T, options);
    for (let i = 1; i <= 20; i++) state = onThrottled(state, T + i * 100, options);
    expect(state.rate).toBe(50);
  });

  it('cuts again after the cooldown, but never below the floor', () => {
    let state = { rate: 100 } as ReturnType<typeof initialRate>;
    for (let i = 0; i < 10; i++) state = onThrottled(state, T + i * 60_000, options);
    expect(state.rate).toBe(5);
  });
});

describe('Function: onSucceeded', () => {
  it('waits a full recovery period after a cut before stepping up', () => {
    const cut = onThrottled({ rate: 100 }, T, options);
    expect(onSucceeded(cut, T + 59_999, options).rate).toBe(50);
    expect(onSucceeded(cut, T + 60_000, options)).toEqual({ rate: 51, changedAtMs: T + 60_000, decreasedAtMs: T });
  });

  it('recovers one step per period, up to the ceiling and no further', () => {
    let state = onThrottled({ rate: 100 }, T, options);
    let now = T;
    let periods = 0;
    while (state.rate < 100) {
      now += 60_000;
      periods++;
      state = onSucceeded(onSucceeded(state, now, options), now + 1, options);
    }
    expect(periods).toBe(50);
    expect(onSucceeded(state, now + 600_000, options).rate).toBe(100);
  });

  it('clamps a rate above a lowered ceiling back to it', () => {
    expect(onSucceeded({ rate: 120 }, T, options)).toEqual({ rate: 100 });
  });
});
