import { ConditionBrokenError, holdsFor, waitFor, WaitTimeoutError, waitUntil } from '../../local/waitFor';

/** A probe that answers from a list, one answer a call (the last one from then on), counting its calls. */
function answers<T>(...values: T[]) {
  const probe = Object.assign(() => values[Math.min(probe.calls++, values.length - 1)], { calls: 0 });
  return probe;
}

describe('Function: waitFor', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('returns the first value that is neither undefined nor false, without waiting when the first probe has one', async () => {
    const probe = answers({ id: 'a' });

    await expect(waitFor('the item', probe)).resolves.toEqual({ id: 'a' });
    expect(probe.calls).toBe(1);
  });

  it('keeps probing every intervalMs until the probe has a value, and counts 0, null and "" as values', async () => {
    const probe = answers<number | undefined | false>(undefined, false, undefined, 0);
    const waiting = waitFor('a count', probe, { intervalMs: 100 });

    await jest.advanceTimersByTimeAsync(199);
    expect(probe.calls).toBe(2);
    await jest.advanceTimersByTimeAsync(101);
    await expect(waiting).resolves.toBe(0);
    expect(probe.calls).toBe(4);
    await expect(waitFor('null', () => null)).resolves.toBeNull();
    await expect(waitFor('an empty string', () => '')).resolves.toBe('');
  });

  it('awaits an async probe', async () => {
    let ready = false;
    setTimeout(() => (ready = true), 120);
    const waiting = waitFor('ready', async () => ready, { intervalMs: 50 });

    await jest.advanceTimersByTimeAsync(150);
    await expect(waiting).resolves.toBe(true);
  });

  it('gives up after timeoutMs, probing once more at the deadline, and names what it waited for', async () => {
    const probe = answers(false);
    const waiting = waitFor('an empty queue', probe, { timeoutMs: 1000, intervalMs: 300 });
    const settled = expect(waiting).rejects.toThrow(
      new WaitTimeoutError('timed out after 1000 ms waiting for an empty queue', false),
    );

    await jest.advanceTimersByTimeAsync(1000);
    await settled;
    // At 0, 300, 600 and 900 ms, then at the deadline (1000 ms), not at 1200.
    expect(probe.calls).toBe(5);
  });

  it('sees a condition that came true just before the deadline', async () => {
    let value: string | undefined;
    setTimeout(() => (value = 'late'), 950);
    const waiting = waitFor('the late value', () => value, { timeoutMs: 1000, intervalMs: 400 });

    await jest.advanceTimersByTimeAsync(1000);
    await expect(waiting).resolves.toBe('late');
  });

  it('ends with the error of a probe that throws, without waiting out the timeout', async () => {
    const probe = jest.fn().mockReturnValueOnce(undefined).mockRejectedValueOnce(new Error('table not found'));
    const waiting = waitFor('the item', probe, { timeoutMs: 10_000, intervalMs: 10 });
    const settled = expect(waiting).rejects.toThrow('table not found');

    await jest.advanceTimersByTimeAsync(10);
    await settled;
    expect(probe).toHaveBeenCalledTimes(2);
  });

  it('refuses a negative or non-finite time', async () => {
    await expect(waitFor('x', () => 1, { timeoutMs: -1 })).rejects.toThrow(
      new RangeError('timeoutMs must be a finite number of milliseconds, 0 or more; got -1'),
    );
    await expect(waitFor('x', () => 1, { intervalMs: Number.NaN })).rejects.toThrow(RangeError);
  });
});

describe('Function: waitUntil', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('returns the done value, even one that is undefined or false', async () => {
    await expect(waitUntil('a flag', () => ({ done: false }))).resolves.toBe(false);
    const probe = answers<{ done: undefined } | { last: unknown }>({ last: 1 }, { done: undefined });
    const waiting = waitUntil('nothing', probe, { intervalMs: 10 });

    await jest.advanceTimersByTimeAsync(10);
    await expect(waiting).resolves.toBeUndefined();
  });

  it('names the last thing the probe saw in the timeout, and keeps it on the error', async () => {
    const probe = answers<{ done: number } | { last: unknown }>(
      { last: { step: 1 } },
      { last: { step: 2, admission: 'admitting' } },
    );
    const waiting = waitUntil('the run to complete', async () => probe(), { timeoutMs: 200, intervalMs: 100 });
    const settled = waiting.catch((e: unknown) => e);

    await jest.advanceTimersByTimeAsync(200);
    const error = await settled;
    expect(error).toBeInstanceOf(WaitTimeoutError);
    expect((error as WaitTimeoutError).message).toBe(
      'timed out after 200 ms waiting for the run to complete (last saw {"step":2,"admission":"admitting"})',
    );
    expect((error as WaitTimeoutError).last).toEqual({ step: 2, admission: 'admitting' });
  });

  it('shortens a long last value in the message', async () => {
    const waiting = waitUntil('a short list', () => ({ last: 'x'.repeat(600) }), { timeoutMs: 0 });

    const error = (await waiting.catch((e: unknown) => e)) as WaitTimeoutError;
    expect(error.message).toBe(`timed out after 0 ms waiting for a short list (last saw "${'x'.repeat(499)}...)`);
    expect(error.last).toHaveLength(600);
  });
});

describe('Function: holdsFor', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('resolves after forMs when the condition held at every probe, the last one at the end', async () => {
    const probe = answers(true);
    let done = false;
    const holding = holdsFor('the queue to keep its message', probe, { forMs: 700, intervalMs: 200 }).then(
      () => (done = true),
    );

    await jest.advanceTimersByTimeAsync(699);
    expect(done).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    await holding;
    // At 0, 200, 400, 600 and 700 ms.
    expect(probe.calls).toBe(5);
  });

  it('throws the first time the condition does not hold, saying when', async () => {
    const probe = answers(true, true, false);
    const holding = holdsFor('the paused mapping to take nothing', probe, { forMs: 5000, intervalMs: 100 });
    const settled = holding.catch((e: unknown) => e);

    await jest.advanceTimersByTimeAsync(200);
    const error = await settled;
    expect(error).toEqual(
      new ConditionBrokenError('the paused mapping to take nothing stopped holding after 200 ms of 5000', 200),
    );
    expect((error as ConditionBrokenError).afterMs).toBe(200);
    expect(probe.calls).toBe(3);
  });

  it('checks once when forMs is 0, and fails a condition that does not hold to begin with', async () => {
    await expect(holdsFor('true', () => true, { forMs: 0 })).resolves.toBeUndefined();
    await expect(holdsFor('a stalled request', async () => false, { forMs: 300 })).rejects.toThrow(
      new ConditionBrokenError('a stalled request stopped holding after 0 ms of 300', 0),
    );
  });
});
