// The per-key concurrency limit as one part of the consumer's pacing (limiterPacer.ts): a record starts only while its
// key has a free lease fleet-wide, and holds it until its record ends or its invocation must have.
import type { KeyConcurrencyLimiter, KeyLease } from '../../adapters/keyConcurrency';
import { logger } from '../../adapters/observability';
import { KEY_LIMITER_DOWN_WAIT_MS } from './keyRateGate';

/** The per-key concurrency limit as the pacer uses it (lambda/adapters/keyConcurrency.ts). */
export type KeyConcurrency = Pick<KeyConcurrencyLimiter, 'field' | 'acquire' | 'release'>;

/**
 * A lease outlives its invocation by this much: the invocation's end is when a dead worker's lease frees its key, and
 * the margin covers clocks that disagree between containers.
 */
export const LEASE_MARGIN_MS = 5_000;

export class KeyLeases {
  constructor(private readonly limiter: KeyConcurrency) {}

  /** A lease on the key's concurrency until `invocationEndMs` (plus the margin), or how long to wait for one. */
  async take(key: string, invocationEndMs: number): Promise<{ lease: KeyLease } | { waitMs: number }> {
    try {
      const answer = await this.limiter.acquire(key, invocationEndMs + LEASE_MARGIN_MS);
      return answer.granted ? { lease: answer.lease } : { waitMs: answer.waitMs };
    } catch (error) {
      logger.warn('per-key concurrency limiter unavailable; deferring', { key, error: error as Error });
      return { waitMs: KEY_LIMITER_DOWN_WAIT_MS };
    }
  }

  /** Gives the lease back; one that cannot be is only held longer (it expires), never over the key's limit. */
  async give(lease: KeyLease): Promise<void> {
    try {
      await this.limiter.release(lease);
    } catch (error) {
      const what = 'per-key concurrency lease could not be released; it expires with the invocation';
      logger.warn(what, { key: lease.key, error: error as Error });
    }
  }
}
