// The per-key rate limit as one part of the consumer's pacing (limiterPacer.ts): a record's key must have a token at
// the very moment of its job-wide slot, so both limits hold for the start.
import type { KeyRateLimiter } from '../../adapters/keyRateLimiter';
import { logger } from '../../adapters/observability';
import type { SlotPriority } from '../../core/pacing/pacer';
import type { SlotPool } from './slotPool';

/** The per-key limiter as the pacer uses it (lambda/adapters/keyRateLimiter.ts). */
export type KeyLimiter = Pick<KeyRateLimiter, 'field' | 'acquireAt' | 'queueBehind' | 'throttled' | 'succeeded'>;

/**
 * Longest wait inside the function for a busy key's next token: a key whose token is this close is waited for (its
 * record takes a job-wide slot at the key's moment) rather than sent round the queue, which would lose the key's
 * tokens to the trip. Short, so a noisy key's records do not hold the consumers that quiet keys' records need.
 */
export const KEY_SHORT_WAIT_MS = 2_000;

/** The wait a record is deferred by when its key's limiter cannot be asked. */
export const KEY_LIMITER_DOWN_WAIT_MS = 1_000;

export type KeyAnswer = { granted: true; startAtMs: number } | { granted: false; waitMs: number };

/** The slots of the invocation the gate takes from and gives back to. */
export type GatePool = Pick<SlotPool, 'putBack' | 'slotFrom' | 'maxWaitMs'>;

export class KeyRateGate {
  constructor(private readonly keys: KeyLimiter) {}

  /**
   * The key's answer for a start at `atMs`, the record's job-wide slot. A key whose next token is within
   * KEY_SHORT_WAIT_MS is waited for, on a job-wide slot from the token's moment; a busy key's record otherwise takes
   * its place in the key's queue (queueBehind), so a key's backlog comes back spread at the key's rate instead of all
   * at its next token. A limiter that cannot be asked defers the record briefly. Refused, the slot at `atMs` is back in
   * the pool for the next record.
   */
  async answer(key: string, atMs: number, pool: GatePool, priority: SlotPriority): Promise<KeyAnswer> {
    const { keys } = this;
    let slotReturned = false;
    try {
      const answer = await keys.acquireAt(key, atMs);
      if (answer.granted) return { granted: true, startAtMs: atMs };
      // Refused at this slot: it goes back to the pool for the next record.
      pool.putBack(atMs);
      slotReturned = true;
      // The key's token is close: a job-wide slot from its moment, then the key's token at that slot (the job-wide slot
      // is the one given back if another container took the key's token meanwhile: the key's are the scarcer).
      if (answer.waitMs <= Math.min(KEY_SHORT_WAIT_MS, pool.maxWaitMs(priority))) {
        const slot = await pool.slotFrom(atMs + answer.waitMs, priority);
        if (slot !== undefined) {
          if ((await keys.acquireAt(key, slot)).granted) return { granted: true, startAtMs: slot };
          pool.putBack(slot);
        }
      }
      return { granted: false, waitMs: Math.max(answer.waitMs, await keys.queueBehind(key)) };
    } catch (error) {
      logger.warn('per-key rate limiter unavailable; deferring', { key, error: error as Error });
      if (!slotReturned) pool.putBack(atMs);
      return { granted: false, waitMs: KEY_LIMITER_DOWN_WAIT_MS };
    }
  }
}
