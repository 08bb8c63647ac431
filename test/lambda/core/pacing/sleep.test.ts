import { sleep, sleepUntil, waitForSlot } from '../../../../lambda/core/pacing/sleep';

describe('Function: sleep', () => {
  it('resolves at once for zero or a negative wait', async () => {
    const spy = jest.spyOn(global, 'setTimeout');
    await sleep(0);
    await sleep(-5);
    expect(spy).not.toHaveBeenCalled();
    spy.mockRestore();
  });
});

describe('Function: sleepUntil', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('resolves once the clock reaches the start time, not before', async () => {
    let done = false;
    const pending = sleepUntil(1_000_250).then(() => {
      done = true;
    });
    await jest.advanceTimersByTimeAsync(249);
    expect(done).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    await pending;
    expect(done).toBe(true);
    expect(Date.now()).toBe(1_000_250);
  });

  it('sleeps again when the timer fires before the clock has reached the start time', async () => {
    // A clock that lags the timers by 5 ms on its first reading after the wait.
    const readings = [1_000_000, 1_000_095, 1_000_100];
    const clock = () => readings.shift() ?? 1_000_100;
    let done = false;
    const pending = sleepUntil(1_000_100, clock).then(() => {
      done = true;
    });
    await jest.advanceTimersByTimeAsync(100);
    expect(done).toBe(false);
    await jest.advanceTimersByTimeAsync(5);
    await pending;
    expect(done).toBe(true);
  });
});

describe('Function: waitForSlot', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 2_000_000 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('waits for the slot and keeps it when woken on time', async () => {
    const pending = waitForSlot(2_000_100, 5);
    await jest.advanceTimersByTimeAsync(100);
    await expect(pending).resolves.toBe(true);
  });

  it('keeps a slot woken exactly at the tolerance', async () => {
    let t = 2_000_000;
    const clock = () => t;
    const pending = waitForSlot(2_000_000, 5, clock);
    t = 2_000_005;
    await expect(pending).resolves.toBe(true);
  });

  it('gives the slot up when woken later than the tolerance', async () => {
    const readings = [2_000_000, 2_000_100, 2_000_106];
    const clock = () => readings.shift() ?? 2_000_106;
    const pending = waitForSlot(2_000_100, 5, clock);
    await jest.advanceTimersByTimeAsync(100);
    await expect(pending).resolves.toBe(false);
  });
});
