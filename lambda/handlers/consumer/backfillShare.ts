// The backfill share as one part of the consumer's pacing (limiterPacer.ts): while live work waits, backfill takes
// only the slots live work left, and only within its cap (rateLimit.backfillShare), counted on the cap's own item.
import { LIVE_VIEW_MAX_AGE_MS, liveWaiting } from '../../core/backfill';
import { logger } from '../../adapters/observability';
import type { RateLimiter } from '../../adapters/rateLimiter';

export interface BackfillShareOptions {
  /** The job-wide limiter, whose item carries the live stamp. */
  limiter: RateLimiter;
  /** The job-wide limiter key. */
  key: string;
  /** Backfill's cap: a limiter at the share of the allowance, on its own item (core/backfill.ts backfillItemKey). */
  cap: { limiter: RateLimiter; key: string };
  /** The clock the limiter's start times are on, epoch ms. */
  clock: () => number;
  /** The expected spacing between starts: the least a refused backfill record waits. */
  spacingMs: number;
}

/** A slot to start at, or how long to wait for one. */
export type ShareAnswer = { startAtMs: number } | { waitMs: number };

/** Where the share's job-wide slots are counted: granted to the invocation, or back in its pool for a live record. */
export interface ShareSlots {
  granted(): void;
  putBack(startAtMs: number): void;
}

export class BackfillShare {
  constructor(private readonly options: BackfillShareOptions) {}

  /**
   * Whether backfill must go behind live work now: a live start reserved slots within LIVE_WAITING_WINDOW_MS, by this
   * container's view of the limiter item (read again when older than LIVE_VIEW_MAX_AGE_MS). A limiter that cannot be
   * asked counts as live waiting: backfill is the one to wait.
   */
  async gated(): Promise<boolean> {
    const { limiter, key, clock } = this.options;
    try {
      return liveWaiting(await limiter.liveAt?.(key, LIVE_VIEW_MAX_AGE_MS), clock());
    } catch (error) {
      const what = 'rate limiter unavailable for the live stamp; backfill waits behind live work';
      logger.warn(what, { key, error: error as Error });
      return true;
    }
  }

  /**
   * A slot for a backfill record while live work waits: only a slot free now (live starts reserve theirs ahead, so
   * backfill takes what live work left), and only within backfill's cap, at the same moment. A slot the cap refuses
   * goes back to the pool for a live record of the batch.
   */
  async slot(slots: ShareSlots): Promise<ShareAnswer> {
    const { limiter, key, cap, spacingMs } = this.options;
    try {
      const acquired = await limiter.acquire(key, 1, { maxWaitMs: 0, priority: 'backfill' });
      if (acquired.granted === 0) return { waitMs: Math.max(acquired.waitMs, spacingMs) };
      slots.granted();
      const startAtMs = acquired.startAtMs[0];
      const capped = await cap.limiter.acquire(cap.key, 1, { maxWaitMs: 0, atMs: startAtMs, priority: 'backfill' });
      if (capped.granted === 0) {
        slots.putBack(startAtMs);
        return { waitMs: Math.max(capped.waitMs, spacingMs) };
      }
      return { startAtMs };
    } catch (error) {
      logger.warn('rate limiter unavailable for a backfill slot; deferring', { key, error: error as Error });
      return { waitMs: spacingMs };
    }
  }
}
