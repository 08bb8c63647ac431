import { decideWait, WaitInput } from '../../../../lambda/core/pacing/deferPolicy';

const NOW = 1_700_000_000_000;
const base: WaitInput = { waitMs: 0, remainingTimeMs: 60_000, shortWaitMs: 5_000, reserveMs: 10_000, nowMs: NOW };

describe('Function: decideWait', () => {
  it.each([
    ['no wait', { waitMs: 0 }, { action: 'wait-in-function', waitMs: 0 }],
    ['a Retry-After date already past', { waitMs: -3_000 }, { action: 'wait-in-function', waitMs: 0 }],
    ['a short wait with time to spare', { waitMs: 1_200 }, { action: 'wait-in-function', waitMs: 1_200 }],
    ['exactly the short-wait threshold', { waitMs: 5_000 }, { action: 'wait-in-function', waitMs: 5_000 }],
    ['a fractional wait, rounded up', { waitMs: 10.2 }, { action: 'wait-in-function', waitMs: 11 }],
    ['a wait that exactly fits the remaining time', { waitMs: 5_000, remainingTimeMs: 15_000 }, { action: 'wait-in-function', waitMs: 5_000 }],
    ['a short wait the remaining time cannot hold', { waitMs: 3_000, remainingTimeMs: 12_000 }, { action: 'defer', delaySeconds: 3, notBeforeMs: NOW + 3_000, chained: false }],
    ['no wait but no time left for the work', { waitMs: 0, remainingTimeMs: 9_000 }, { action: 'defer', delaySeconds: 0, notBeforeMs: NOW, chained: false }],
    ['just over the threshold, rounded up to whole seconds', { waitMs: 5_001 }, { action: 'defer', delaySeconds: 6, notBeforeMs: NOW + 5_001, chained: false }],
    ['exactly the SQS maximum', { waitMs: 900_000 }, { action: 'defer', delaySeconds: 900, notBeforeMs: NOW + 900_000, chained: false }],
    ['past the SQS maximum: chained', { waitMs: 900_001 }, { action: 'defer', delaySeconds: 900, notBeforeMs: NOW + 900_001, chained: true }],
    ['an hour: chained', { waitMs: 3_600_000 }, { action: 'defer', delaySeconds: 900, notBeforeMs: NOW + 3_600_000, chained: true }],
  ])('decides %s', (_name, overrides, expected) => {
    expect(decideWait({ ...base, ...overrides })).toEqual(expected);
  });

  it('resumes a chained deferral from the carried notBeforeMs until the remainder is short', () => {
    let now = NOW;
    const first = decideWait({ ...base, nowMs: now, waitMs: 2_000_000 });
    if (first.action !== 'defer') throw new Error('expected a deferral');
    const notBefore = first.notBeforeMs;
    const delays: number[] = [first.delaySeconds];
    let decision = first as ReturnType<typeof decideWait>;
    while (decision.action === 'defer') {
      now += decision.delaySeconds * 1000;
      decision = decideWait({ ...base, nowMs: now, waitMs: notBefore - now });
      if (decision.action === 'defer') delays.push(decision.delaySeconds);
    }
    expect(delays).toEqual([900, 900, 200]);
    expect(decision).toEqual({ action: 'wait-in-function', waitMs: 0 });
  });

  it('throws naming every bad input', () => {
    expect(() => decideWait({ waitMs: NaN, remainingTimeMs: Infinity, shortWaitMs: -1, reserveMs: -2, nowMs: NaN })).toThrow(
      'invalid wait decision: waitMs must be a finite number (got NaN); remainingTimeMs must be a finite number (got Infinity); shortWaitMs must be zero or more (got -1); reserveMs must be zero or more (got -2); nowMs must be a finite number (got NaN)',
    );
  });
});
