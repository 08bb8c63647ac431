// The adaptive rates as one part of the consumer's pacing (limiterPacer.ts): once per invocation, what the downstream
// said (throttles, successes, by key) goes to the job-wide adaptive rate and to each key's.
import type { RateFeedback } from '../../adapters/adaptiveRateLimiter';
import { logger } from '../../adapters/observability';
import type { PacedOutcome } from '../../core/pacing/pacer';
import type { KeyLimiter } from './keyRateGate';

/** Keys throttled in one invocation that make a job-wide storm (per-key limits on): the job-wide rate is cut too. */
export const JOB_STORM_KEYS = 2;

/** What the downstream told one invocation, for the adaptive rates (the job's, and each key's). */
export class RateSignals {
  throttles = 0;
  successes = 0;
  /** Keys whose requests the downstream throttled, and keys whose requests succeeded (per-key limits only). */
  readonly throttledKeys = new Set<string>();
  readonly succeededKeys = new Set<string>();

  add(key: string | undefined, outcome: PacedOutcome): void {
    if (outcome === 'failure') return;
    if (outcome === 'throttle') this.throttles++;
    else this.successes++;
    if (key !== undefined) (outcome === 'throttle' ? this.throttledKeys : this.succeededKeys).add(key);
  }
}

export interface RateFeedbackOptions {
  /** The limiter key the job-wide rate is on. */
  key: string;
  /** The job-wide adaptive rate. @default none: the rate stays as configured */
  rate?: RateFeedback;
  /** The per-key limits, whose rates follow their own keys' throttles. @default none */
  keys?: Pick<KeyLimiter, 'throttled' | 'succeeded'>;
}

/**
 * Tells the adaptive rates once per invocation whether the downstream throttled, or only succeeded. With per-key
 * limits, a key's 429s cut that key's rate; the job-wide rate is cut only by a storm, throttles on at least
 * JOB_STORM_KEYS keys in one invocation (one tenant's own limit is not the provider's). Tuning, not the operation:
 * a failed update is logged and the rate stays as it was.
 */
export class RateFeedbackReporter {
  constructor(private readonly options: RateFeedbackOptions) {}

  async report(signals: RateSignals): Promise<void> {
    await this.reportKeys(signals);
    await this.reportJob(signals);
  }

  private async reportJob(signals: RateSignals): Promise<void> {
    const { rate, keys, key } = this.options;
    if (!rate || (signals.throttles === 0 && signals.successes === 0)) return;
    const jobThrottled = keys ? signals.throttledKeys.size >= JOB_STORM_KEYS : signals.throttles > 0;
    if (!jobThrottled && signals.successes === 0) return;
    try {
      // The job's own counts, for the rule's storm-or-line test; with per-key limits the job-wide rate has none.
      const counts = keys ? undefined : { starts: signals.successes + signals.throttles, throttles: signals.throttles };
      const change = jobThrottled ? await rate.throttled(key, counts) : await rate.succeeded(key, counts);
      // Once per change fleet-wide (the instance whose write made it): the rate's history, for the operator.
      if (change) {
        const what = change.to < change.from ? 'lowered after a throttle' : 'raised after quiet starts';
        logger.info(`adaptive rate ${what}`, { key, ...change });
      }
    } catch (error) {
      logger.error('adaptive rate update failed; the rate stays as it was', { key, signals, error: error as Error });
    }
  }

  private async reportKeys(signals: RateSignals): Promise<void> {
    const { keys } = this.options;
    if (!keys) return;
    const report = async (key: string, throttled: boolean) => {
      try {
        const change = throttled ? await keys.throttled(key) : await keys.succeeded(key);
        if (change) {
          const what = change.to < change.from ? 'lowered after a throttle' : 'raised after quiet starts';
          logger.info(`per-key adaptive rate ${what}`, { key, ...change });
        }
      } catch (error) {
        const what = "per-key adaptive rate update failed; the key's rate stays as it was";
        logger.error(what, { key, error: error as Error });
      }
    };
    await Promise.all([
      ...[...signals.throttledKeys].map((key) => report(key, true)),
      ...[...signals.succeededKeys].filter((key) => !signals.throttledKeys.has(key)).map((key) => report(key, false)),
    ]);
  }
}
