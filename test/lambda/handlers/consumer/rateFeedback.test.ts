import { logger } from '../../../../lambda/adapters/observability';
import { JOB_STORM_KEYS, RateFeedbackReporter, RateSignals } from '../../../../lambda/handlers/consumer/rateFeedback';

const rate = () => ({ throttled: jest.fn(async () => undefined), succeeded: jest.fn(async () => undefined) });

function signals(...outcomes: [string | undefined, 'success' | 'throttle' | 'failure'][]): RateSignals {
  const s = new RateSignals();
  for (const [key, outcome] of outcomes) s.add(key, outcome);
  return s;
}

describe('Class: RateSignals', () => {
  it('counts throttles and successes, by key, and leaves failures out', () => {
    const s = signals(['a', 'throttle'], ['b', 'success'], [undefined, 'success'], ['c', 'failure']);
    expect(s.throttles).toBe(1);
    expect(s.successes).toBe(2);
    expect([...s.throttledKeys]).toEqual(['a']);
    expect([...s.succeededKeys]).toEqual(['b']);
  });
});

describe('Class: RateFeedbackReporter', () => {
  afterEach(() => jest.restoreAllMocks());

  describe('Method: report', () => {
    it("tells the job-wide rate of a throttle, with the invocation's counts", async () => {
      const job = rate();
      const reporter = new RateFeedbackReporter({ key: 'k', rate: job });
      await reporter.report(signals([undefined, 'success'], [undefined, 'throttle']));
      expect(job.throttled).toHaveBeenCalledWith('k', { starts: 2, throttles: 1 });
      expect(job.succeeded).not.toHaveBeenCalled();
    });

    it('tells the job-wide rate of quiet successes, and nothing when nothing started', async () => {
      const job = rate();
      const reporter = new RateFeedbackReporter({ key: 'k', rate: job });
      await reporter.report(signals([undefined, 'success']));
      await reporter.report(signals([undefined, 'failure']));
      expect(job.succeeded).toHaveBeenCalledTimes(1);
      expect(job.succeeded).toHaveBeenCalledWith('k', { starts: 1, throttles: 0 });
    });

    it("with per-key limits, cuts each throttled key's rate, the job's in a storm of JOB_STORM_KEYS keys", async () => {
      const job = rate();
      const keys = rate();
      const reporter = new RateFeedbackReporter({ key: 'k', rate: job, keys });
      await reporter.report(signals(['a', 'throttle'], ['a', 'success'], ['b', 'success']));
      expect(keys.throttled.mock.calls).toEqual([['a']]);
      // A key that throttled is not also told it succeeded.
      expect(keys.succeeded.mock.calls).toEqual([['b']]);
      expect(job.throttled).not.toHaveBeenCalled();
      expect(job.succeeded).toHaveBeenCalledWith('k', undefined);

      const stormKeys = Array.from({ length: JOB_STORM_KEYS }, (_, i): [string, 'throttle'] => [`t${i}`, 'throttle']);
      const storm = signals(...stormKeys);
      await reporter.report(storm);
      expect(job.throttled).toHaveBeenCalledWith('k', undefined);
    });

    it('logs a failed update and leaves the rate as it was, without throwing', async () => {
      const error = jest.spyOn(logger, 'error').mockImplementation(() => undefined);
      const job = { throttled: jest.fn(), succeeded: jest.fn(async () => Promise.reject(new Error('table gone'))) };
      const reporter = new RateFeedbackReporter({ key: 'k', rate: job });
      await expect(reporter.report(signals([undefined, 'success']))).resolves.toBeUndefined();
      const why = 'adaptive rate update failed; the rate stays as it was';
      expect(error).toHaveBeenCalledWith(why, expect.objectContaining({ key: 'k' }));
    });

    it('logs a change of the rate once, for the operator', async () => {
      const info = jest.spyOn(logger, 'info').mockImplementation(() => undefined);
      const job = { throttled: jest.fn(async () => ({ from: 10, to: 5 })), succeeded: jest.fn() };
      await new RateFeedbackReporter({ key: 'k', rate: job }).report(signals([undefined, 'throttle']));
      expect(info).toHaveBeenCalledWith('adaptive rate lowered after a throttle', { key: 'k', from: 10, to: 5 });
    });
  });
});
