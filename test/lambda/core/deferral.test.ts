import { ThrottledError } from '../../../lambda/core/errors';
import { createDeferralPolicy, DeferralPolicyError, type DeferralInput } from '../../../lambda/core/deferral';

const NOW = Date.parse('2026-11-29T02:00:00.000Z');

/** A fresh operation (first enqueued a minute ago) at the given attempt. */
function input(cause: DeferralInput['cause'], attempt = 0, ageMs = 60_000, pacedDeferrals = 0): DeferralInput {
  return { cause, attempt, pacedDeferrals, firstEnqueuedAtMs: NOW - ageMs, nowMs: NOW };
}

describe('Function: createDeferralPolicy', () => {
  const backoff = { baseMs: 2000, capMs: 900_000 };

  describe('Method: policy (throttled)', () => {
    const policy = createDeferralPolicy({ random: () => 0.999, backoff });

    it('honours the downstream retry-after hint, rounded up to whole seconds', () => {
      expect(policy(input({ kind: 'throttled', error: new ThrottledError('429', 7_000) }))).toEqual({
        action: 'defer',
        delaySeconds: 7,
      });
      expect(policy(input({ kind: 'throttled', error: new ThrottledError('429', 12_001) }))).toEqual({
        action: 'defer',
        delaySeconds: 13,
      });
    });

    it('chains a hint longer than the 900 s SQS allows through notBefore', () => {
      expect(policy(input({ kind: 'throttled', error: new ThrottledError('429', 3_600_000) }))).toEqual({
        action: 'defer',
        delaySeconds: 900,
        notBeforeMs: NOW + 3_600_000,
      });
    });

    it('backs off exponentially with full jitter without a hint, within [0, min(cap, base * 2^attempt))', () => {
      // random 0.999: just under each ceiling (2 s, 4 s, 8 s, 16 s), rounded up to whole seconds.
      expect(
        [0, 1, 2, 3].map((attempt) => policy(input({ kind: 'throttled', error: new ThrottledError('503') }, attempt))),
      ).toEqual([
        { action: 'defer', delaySeconds: 2 },
        { action: 'defer', delaySeconds: 4 },
        { action: 'defer', delaySeconds: 8 },
        { action: 'defer', delaySeconds: 16 },
      ]);
      // The cap holds however many attempts: 900 s is the most one deferral waits.
      expect(policy(input({ kind: 'throttled', error: new ThrottledError('503') }, 40))).toEqual({
        action: 'defer',
        delaySeconds: 900,
      });
      // random 0: no wait at all, floored at the one-second minimum so a zero cannot loop hot through SQS.
      expect(
        createDeferralPolicy({ random: () => 0, backoff })(
          input({ kind: 'throttled', error: new ThrottledError('503') }, 4),
        ),
      ).toEqual({ action: 'defer', delaySeconds: 1 });
    });
  });

  describe('Method: policy (paced)', () => {
    it('waits for the limiter hint plus jittered backoff on its paced deferrals', () => {
      const policy = createDeferralPolicy({ random: () => 0.5, backoff });
      // 3200 ms hint + 0.5 * 2000 ms = 4200 ms -> 5 s; after 2 paced deferrals: 3200 + 0.5 * 8000 = 7200 ms -> 8 s.
      expect(policy(input({ kind: 'paced', waitMs: 3200 }))).toEqual({ action: 'defer', delaySeconds: 5 });
      expect(policy(input({ kind: 'paced', waitMs: 3200 }, 0, 60_000, 2))).toEqual({
        action: 'defer',
        delaySeconds: 8,
      });
      // Failure-driven attempts do not spread a paced wait.
      expect(policy(input({ kind: 'paced', waitMs: 3200 }, 2))).toEqual({ action: 'defer', delaySeconds: 5 });
    });

    it('follows the limiter hint however many deferrals came before: the spread stops growing at its cap', () => {
      const policy = createDeferralPolicy({ random: () => 0.999, backoff });
      // A throttle at attempt 12 may wait up to 900 s; a paced deferral waits its hint plus under 60 s.
      expect(policy(input({ kind: 'throttled', error: new ThrottledError('503') }, 12))).toEqual({
        action: 'defer',
        delaySeconds: 900,
      });
      expect(policy(input({ kind: 'paced', waitMs: 4000 }, 0, 60_000, 12))).toEqual({
        action: 'defer',
        delaySeconds: 64,
      });
      const tight = createDeferralPolicy({ random: () => 0.999, backoff, pacedSpreadCapMs: 5000 });
      expect(tight(input({ kind: 'paced', waitMs: 4000 }, 0, 60_000, 12))).toEqual({
        action: 'defer',
        delaySeconds: 9,
      });
    });
  });

  describe('Method: policy (not-before)', () => {
    const policy = createDeferralPolicy({ random: () => 0.5, backoff, maxDeferrals: 3 });

    it('waits out the rest of a chain, keeping the original target while more than 900 s remain', () => {
      expect(policy(input({ kind: 'not-before', notBeforeMs: NOW + 2_000_500 }))).toEqual({
        action: 'defer',
        delaySeconds: 900,
        notBeforeMs: NOW + 2_000_500,
      });
      expect(policy(input({ kind: 'not-before', notBeforeMs: NOW + 12_500 }))).toEqual({
        action: 'defer',
        delaySeconds: 13,
      });
    });

    it('does not count a continuation against the deferral count', () => {
      expect(policy(input({ kind: 'not-before', notBeforeMs: NOW + 5_000 }, 3))).toEqual({
        action: 'defer',
        delaySeconds: 5,
      });
    });
  });

  describe('Method: policy (budget)', () => {
    const policy = createDeferralPolicy({ random: () => 0.5, backoff, maxDeferrals: 3, maxAgeSeconds: 3600 });

    it('dead-letters once the deferral count is spent, naming the limit and the last cause', () => {
      expect(policy(input({ kind: 'throttled', error: new ThrottledError('downstream throttled') }, 3))).toEqual({
        action: 'dead-letter',
        reason: 'deferral budget exhausted: 3 deferrals, the limit is 3 (throttled: downstream throttled)',
      });
    });

    it("never spends the budget on a slot deferral: waiting for the fleet's turn is not a failure", () => {
      // 3 failure-driven deferrals already spent the budget of 3, yet a slot deferral still defers, however many came before.
      expect(policy(input({ kind: 'paced', waitMs: 1500 }, 3))).toEqual({ action: 'defer', delaySeconds: 3 });
      expect(policy(input({ kind: 'paced', waitMs: 1500 }, 0, 60_000, 5000)).action).toBe('defer');
      // ... while the next throttle is dead-lettered.
      expect(policy(input({ kind: 'throttled', error: new ThrottledError('429') }, 3)).action).toBe('dead-letter');
    });

    it('dead-letters an operation older than the age limit, chained or not', () => {
      expect(policy(input({ kind: 'not-before', notBeforeMs: NOW + 1000 }, 0, 3_601_000))).toEqual({
        action: 'dead-letter',
        reason:
          'deferral budget exhausted: first enqueued 3601 s ago, over the 3600 s limit (chained deferral until 2026-11-29T02:00:01.000Z)',
      });
      expect(policy(input({ kind: 'paced', waitMs: 0 }, 0, 3_600_000))).toEqual({ action: 'defer', delaySeconds: 1 });
    });
  });

  describe('Method: policy (default budget)', () => {
    it('limits by the failure-driven deferral count only, not by age', () => {
      const policy = createDeferralPolicy({ random: () => 0.5, backoff: { baseMs: 1000, capMs: 900_000 } });
      const throttle = { kind: 'throttled' as const, error: new ThrottledError('429') };
      expect(policy(input(throttle, 99, 30 * 86_400_000)).action).toBe('defer');
      expect(policy(input(throttle, 100))).toEqual({
        action: 'dead-letter',
        reason: 'deferral budget exhausted: 100 deferrals, the limit is 100 (throttled: 429)',
      });
    });
  });

  describe('Method: createDeferralPolicy', () => {
    it('names every bad option', () => {
      expect(() =>
        createDeferralPolicy({ maxDeferrals: 10_001, maxAgeSeconds: 0, minDelaySeconds: 901, pacedSpreadCapMs: 10 }),
      ).toThrow(
        new DeferralPolicyError(
          "invalid deferral policy: maxDeferrals must be an integer from 0 to 10000 (got 10001); maxAgeSeconds must be positive (got 0); minDelaySeconds must be an integer from 0 to 900 (got 901); pacedSpreadCapMs must be at least the backoff's baseMs, 2000 (got 10)",
          [],
        ),
      );
    });

    it('rejects a backoff whose cap is below its base', () => {
      expect(() => createDeferralPolicy({ backoff: { baseMs: 1000, capMs: 10 } })).toThrow(
        'invalid backoff: capMs must be at least baseMs (got 10)',
      );
    });
  });
});
