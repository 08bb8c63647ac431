// One consumer invocation's rate-limit slots: the block it took at the start and what it took since, used in order.
// Slots are not tied to records: when an apply runs long, only the slots that passed meanwhile are lost (starting late
// is not allowed, it would bunch starts across the fleet), and the next record takes the next slot.
import type { ApplyTimeEstimator } from '../../core/pacing/applyEstimator';
import type { SlotPriority } from '../../core/pacing/pacer';
import type { Acquisition, RateLimiter } from '../../adapters/rateLimiter';
import { logger } from '../../adapters/observability';
import type { BackfillShare } from './backfillShare';

/** How the pool spends the invocation's time on the shared limiter (the container's, shared by its invocations). */
export interface SlotPoolSettings {
  /** Undefined: pacing is off, and every record may start now. */
  limiter: RateLimiter | undefined;
  /** The limiter item starts are counted on (one per downstream). */
  key: string;
  /** Longest wait for a slot spent inside the function. */
  shortWaitMs: number;
  /** How late a record may start after its slot before the slot is given up. */
  lateToleranceMs: number;
  /** The expected spacing between starts on the key (the limiter's emission interval). */
  spacingMs: number;
  /** The clock the limiter's start times are on, epoch ms. */
  clock: () => number;
  /** The container's apply times, which bound how many slots one block may take. */
  estimator: ApplyTimeEstimator;
  /**
   * Records also wait for their key (per-key limits): a refill takes one slot, since the next record's key decides
   * when it can start, and slots booked ahead for records whose key then refuses would only be lost. @default false
   */
  keyed?: boolean;
  /**
   * Backfill's cap while live work waits (rateLimit.backfillShare below 1): its own limiter item at the share of the
   * allowance (backfillShare.ts). Undefined: backfill paces as live work does.
   */
  backfill?: Pick<BackfillShare, 'gated' | 'slot'>;
}

/**
 * How far ahead backfill books slots: live work that arrives finds at most this much of the allowance already taken
 * in front of it (a backfill block taking the whole short wait would hold live work back by as much).
 */
export const BACKFILL_MAX_AHEAD_MS = 1_000;

/** A slot to start at, or how long to wait for one (the record is deferred by it). */
export type SlotAnswer = { startAtMs: number } | { waitMs: number };

export class SlotPool {
  /** Records planned to run and not yet started: a refill takes no more than they can use. */
  runLeft = 0;
  /** Slots granted to this invocation, and those a downstream call started on: the difference is lost allowance. */
  private granted = 0;
  private used = 0;
  /** Granted slots not yet used (a block's, a refill's, a duplicate's given back), ascending. */
  private readonly slots: number[] = [];

  constructor(
    private readonly settings: SlotPoolSettings,
    /** The invocation's remaining time (Context.getRemainingTimeInMillis). */
    private readonly remainingMs: () => number,
    /** Time kept back from the remaining time for the last record's apply and the acknowledgement. */
    private readonly reserveMs: number,
  ) {}

  get paced(): boolean {
    return this.settings.limiter !== undefined;
  }

  /** The limiter key the pool's slots are on. */
  get key(): string {
    return this.settings.key;
  }

  /**
   * The longest wait for a slot now: the short wait, bounded by the invocation's time left less its reserve; for
   * backfill, at most BACKFILL_MAX_AHEAD_MS, so the slots it books ahead do not stand in front of live work that
   * arrives meanwhile.
   */
  maxWaitMs(priority: SlotPriority = 'live'): number {
    const wait = Math.max(0, Math.min(this.settings.shortWaitMs, this.remainingMs() - this.reserveMs));
    return priority === 'backfill' ? Math.min(wait, BACKFILL_MAX_AHEAD_MS) : wait;
  }

  /**
   * Slots this container can start on time in one block. Slots come at the key's spacing: when records take longer,
   * only ApplyTimeEstimator.usableBlock of them can be reached; and a container whose records often overrun (a faulty
   * provider's slow calls and hangs) takes the smaller ApplyTimeEstimator.overrunBlock, so the slots a hang would pass
   * stay with the fleet. Either way the rest of the block would pass while it works, lost to everyone.
   */
  usableBlock(): number {
    const { estimator, spacingMs, lateToleranceMs } = this.settings;
    return estimator.blockSize(spacingMs, lateToleranceMs);
  }

  /**
   * The invocation's first block: up to `count` slots within the longest wait, all kept in the pool.
   * @throws the limiter's error; nothing is granted then
   */
  async acquireBlock(count: number, priority: SlotPriority = 'live'): Promise<Acquisition> {
    const acquired = await (this.settings.limiter as RateLimiter).acquire(this.settings.key, count, {
      maxWaitMs: this.maxWaitMs(priority),
      priority,
    });
    this.granted += acquired.granted;
    this.slots.push(...acquired.startAtMs.slice(0, acquired.granted));
    return acquired;
  }

  /**
   * The slot the next record starts at: the earliest of the pool still usable. An empty pool is refilled with a fresh
   * block of what this container can start on time; `waitMs`: no slot within the short wait (or the limiter could not
   * be asked), defer by the limiter's hint.
   */
  async next(priority: SlotPriority = 'live'): Promise<SlotAnswer> {
    const { limiter, clock, lateToleranceMs, key, spacingMs, estimator } = this.settings;
    if (limiter === undefined) return { startAtMs: clock() };
    const wakeToleranceMs = estimator.wakeToleranceMs(lateToleranceMs);
    while (this.slots.length > 0 && clock() - this.slots[0] > wakeToleranceMs) this.slots.shift();
    if (this.slots.length > 0) return { startAtMs: this.slots.shift() as number };
    const count = this.settings.keyed ? 1 : Math.max(1, Math.min(this.runLeft + 1, this.usableBlock()));
    try {
      const acquired = await limiter.acquire(key, count, {
        maxWaitMs: this.maxWaitMs(priority),
        priority,
      });
      if (acquired.granted === 0) return { waitMs: acquired.waitMs };
      this.granted += acquired.granted;
      this.slots.push(...acquired.startAtMs.slice(1, acquired.granted));
      return { startAtMs: acquired.startAtMs[0] };
    } catch (error) {
      logger.warn('rate limiter unavailable for a fresh slot; deferring', { key, error: error as Error });
      return { waitMs: spacingMs };
    }
  }

  /** Whether backfill must go behind live work now (BackfillShare.gated); never without a cap. */
  async backfillGated(): Promise<boolean> {
    const { limiter, backfill } = this.settings;
    return limiter !== undefined && (backfill?.gated() ?? false);
  }

  /** A slot for a backfill record while live work waits (BackfillShare.slot); without a cap, as live work's. */
  async nextBackfill(): Promise<SlotAnswer> {
    const { limiter, backfill } = this.settings;
    if (!limiter || !backfill) return this.next('backfill');
    return backfill.slot({ granted: () => this.granted++, putBack: (startAtMs) => this.putBack(startAtMs) });
  }

  /**
   * A job-wide slot no earlier than `fromMs` (the moment another limit can start the record, e.g. its key's next token)
   * and within the invocation's longest wait, or undefined.
   */
  async slotFrom(fromMs: number, priority: SlotPriority): Promise<number | undefined> {
    const { limiter, key, clock } = this.settings;
    if (!limiter) return Math.max(fromMs, clock());
    const maxWaitMs = this.maxWaitMs(priority) - (fromMs - clock());
    if (maxWaitMs < 0) return undefined;
    try {
      const acquired = await limiter.acquire(key, 1, { maxWaitMs, atMs: fromMs, priority });
      if (acquired.granted === 0) return undefined;
      this.granted++;
      return acquired.startAtMs[0];
    } catch (error) {
      logger.warn("rate limiter unavailable for a slot at the key's moment; deferring", { key, error: error as Error });
      return undefined;
    }
  }

  /** A downstream call started on a slot. */
  markUsed(): void {
    this.used++;
  }

  /** A slot whose record made no downstream call (answered at the claim): free again for the next record. */
  giveBack(startAtMs: number): void {
    this.used--;
    this.putBack(startAtMs);
  }

  /** A slot taken from the pool and not started on (its record's key had no room): the next record may use it. */
  putBack(startAtMs: number): void {
    const at = this.slots.findIndex((s) => s > startAtMs);
    if (at < 0) this.slots.push(startAtMs);
    else this.slots.splice(at, 0, startAtMs);
  }

  /** Slots granted and never started on: allowance the fleet lost. */
  unused(): number {
    return this.granted - this.used;
  }
}
