// The consumer's answer to a throttled apply: how long to defer the message, or when to stop deferring it.
// A placeholder policy behind one function type; the pacing work (issue 4) swaps in the shared limiter's backoff.
import { SQS_MAX_DELAY_SECONDS } from '../core/constants';
import type { ThrottledError } from '../core/errors';

export type DeferralDecision = { action: 'defer'; delaySeconds: number } | { action: 'dead-letter'; reason: string };

export interface DeferralInput {
  error: ThrottledError;
  /** Deferrals this operation has already had (the message's `attempt`). */
  attempt: number;
}

export type DeferralPolicy = (input: DeferralInput) => DeferralDecision;

export interface DeferralPolicyOptions {
  /** Deferrals before a throttled operation is dead-lettered as a terminal failure. @default 100 */
  maxDeferrals?: number;
  /** Backoff ceiling for the first deferral without a Retry-After hint; doubles per deferral. @default 5 */
  baseDelaySeconds?: number;
  /** @default Math.random */
  random?: () => number;
}

/**
 * Honours the downstream's retry-after hint when it gave one; otherwise capped exponential backoff with full jitter.
 * SQS cannot delay longer than 900 s, so a longer hint is served by a chain of deferrals.
 */
export function createDeferralPolicy(options: DeferralPolicyOptions = {}): DeferralPolicy {
  const maxDeferrals = options.maxDeferrals ?? 100;
  const base = options.baseDelaySeconds ?? 5;
  const random = options.random ?? Math.random;
  return ({ error, attempt }) => {
    if (attempt >= maxDeferrals) {
      return { action: 'dead-letter', reason: `throttled after ${attempt} deferrals: ${error.message}` };
    }
    const seconds =
      error.retryAfterMs !== undefined
        ? Math.ceil(error.retryAfterMs / 1000)
        : Math.ceil(random() * Math.min(SQS_MAX_DELAY_SECONDS, base * 2 ** Math.min(attempt, 20)));
    return { action: 'defer', delaySeconds: Math.min(SQS_MAX_DELAY_SECONDS, Math.max(1, seconds)) };
  };
}

export const defaultDeferralPolicy: DeferralPolicy = createDeferralPolicy();
