import { assertBackoffOptions, backoffMs } from '../../../../lambda/core/pacing/backoff';
import { sleep } from '../../../../lambda/core/pacing/sleep';
import { PacingConfigError } from '../../../../lambda/core/pacing/errors';

const options = { baseMs: 100, capMs: 5000 };
const almostOne = 1 - Number.EPSILON;

describe('Function: backoffMs', () => {
  it('waits nothing when the random source gives 0', () => {
    expect(backoffMs(3, options, () => 0)).toBe(0);
  });

  it('stays below base * 2^attempt at the top of the random range', () => {
    expect([0, 1, 2, 3, 4].map((a) => backoffMs(a, options, () => almostOne))).toEqual([99, 199, 399, 799, 1599]);
  });

  it('is capped however many attempts', () => {
    expect(backoffMs(6, options, () => almostOne)).toBe(4999);
    expect(backoffMs(5000, options, () => almostOne)).toBe(4999);
  });

  it('scales the random draw over the whole range (full jitter)', () => {
    expect(backoffMs(2, options, () => 0.5)).toBe(200);
    expect(backoffMs(2, options, () => 0.25)).toBe(100);
  });

  it('stays within [0, min(cap, base * 2^attempt)) for Math.random', () => {
    for (let attempt = 0; attempt < 12; attempt++) {
      const ceiling = Math.min(5000, 100 * 2 ** attempt);
      for (let i = 0; i < 200; i++) {
        const ms = backoffMs(attempt, options);
        expect(ms).toBeGreaterThanOrEqual(0);
        expect(ms).toBeLessThan(ceiling);
        expect(Number.isInteger(ms)).toBe(true);
      }
    }
  });

  it('throws naming every bad argument', () => {
    expect(() => backoffMs(-1, { baseMs: 0, capMs: -5 })).toThrow(
      new PacingConfigError(
        'invalid backoff: attempt must be a non-negative integer (got -1); baseMs must be a positive number (got 0); capMs must be at least baseMs (got -5)',
      ),
    );
  });

  it('throws when the random source leaves [0, 1)', () => {
    expect(() => backoffMs(0, options, () => 1)).toThrow('random source must return a number in [0, 1) (got 1)');
  });
});

describe('Function: assertBackoffOptions', () => {
  it('accepts options backoffMs can use, a cap equal to the base included', () => {
    expect(() => assertBackoffOptions(options)).not.toThrow();
    expect(() => assertBackoffOptions({ baseMs: 100, capMs: 100 })).not.toThrow();
  });

  it('throws naming every bad option, as backoffMs would on its first call', () => {
    const problems = ['baseMs must be a positive number (got 0)', 'capMs must be at least baseMs (got -5)'];
    expect(() => assertBackoffOptions({ baseMs: 0, capMs: -5 })).toThrow(
      new PacingConfigError(`invalid backoff: ${problems.join('; ')}`, problems),
    );
    const belowBase = () => assertBackoffOptions({ baseMs: 100, capMs: 50 });
    expect(belowBase).toThrow('invalid backoff: capMs must be at least baseMs (got 50)');
  });
});

describe('Function: sleep', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('resolves exactly when the jittered backoff has elapsed, not before', async () => {
    const waitMs = backoffMs(3, options, () => 0.5); // 400 ms
    let done = false;
    const pending = sleep(waitMs).then(() => {
      done = true;
    });
    await jest.advanceTimersByTimeAsync(waitMs - 1);
    expect(done).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    await pending;
    expect(done).toBe(true);
  });

  it('never schedules a timer longer than the cap', async () => {
    const spy = jest.spyOn(global, 'setTimeout');
    for (let attempt = 0; attempt < 20; attempt++) {
      void sleep(backoffMs(attempt, options, () => almostOne));
    }
    const delays = spy.mock.calls.map((call) => call[1] as number);
    expect(Math.max(...delays)).toBe(4999);
    await jest.runAllTimersAsync();
    spy.mockRestore();
  });
});
