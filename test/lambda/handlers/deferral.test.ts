import { ThrottledError } from '../../../lambda/core/errors';
import { createDeferralPolicy } from '../../../lambda/handlers/deferral';

describe('Function: createDeferralPolicy', () => {
  const policy = createDeferralPolicy({ random: () => 0.999, baseDelaySeconds: 5, maxDeferrals: 3 });

  it('honours the downstream retry-after hint, rounded up to whole seconds', () => {
    expect(policy({ error: new ThrottledError('429', 12_001), attempt: 0 })).toEqual({ action: 'defer', delaySeconds: 13 });
  });

  it('caps a long hint at the 900 s SQS allows', () => {
    expect(policy({ error: new ThrottledError('429', 3_600_000), attempt: 0 })).toEqual({ action: 'defer', delaySeconds: 900 });
  });

  it('backs off exponentially with jitter without a hint', () => {
    expect([0, 1, 2].map((attempt) => policy({ error: new ThrottledError('503'), attempt }))).toEqual([
      { action: 'defer', delaySeconds: 5 },
      { action: 'defer', delaySeconds: 10 },
      { action: 'defer', delaySeconds: 20 },
    ]);
    expect(createDeferralPolicy({ random: () => 0 })({ error: new ThrottledError('503'), attempt: 4 })).toEqual({ action: 'defer', delaySeconds: 1 });
  });

  it('dead-letters once the deferral budget is spent', () => {
    expect(policy({ error: new ThrottledError('downstream throttled'), attempt: 3 })).toEqual({
      action: 'dead-letter',
      reason: 'throttled after 3 deferrals: downstream throttled',
    });
  });
});
