// Live work ahead of backfill: which records are backfill (catch-up and redrive traffic, marked by the ops commands),
// when live work counts as waiting, and the cap backfill is held to then. Pure; the consumer's planner and slot pool
// apply it, the limiter only carries the live stamp (lambda/adapters/rateLimiter.ts).
import type { RateLimitSpec } from './pacing/gcra';

/**
 * A live start this recent means live work is waiting: live consumers with records take slots every batch, so a gap
 * this long means the live queue has run dry. Long enough to span the slowest batch cycle (a 10 s short wait plus a
 * batching window), short enough that a finished night frees the allowance for backfill within half a minute.
 */
export const LIVE_WAITING_WINDOW_MS = 30_000;

/** How old this container's view of the live stamp may be before a backfill batch reads it again (one read). */
export const LIVE_VIEW_MAX_AGE_MS = 2_000;

/** The default rateLimit.backfillShare. */
export const DEFAULT_BACKFILL_SHARE = 0.5;

/** The message attribute every DLQ copy the consumer writes carries: a redriven message is backfill. */
export const REDRIVEN_MARK_ATTRIBUTE = 'failureReason';

/** The limiter item backfill's cap is counted on, beside the job-wide one. */
export const backfillItemKey = (limiterKey: string): string => `${limiterKey}#backfill`;

/** Whether live work is waiting, from the limiter's live stamp. */
export function liveWaiting(liveAtMs: number | undefined, nowMs: number, windowMs = LIVE_WAITING_WINDOW_MS): boolean {
  return liveAtMs !== undefined && nowMs - liveAtMs <= windowMs;
}

/** A record is backfill when its message says so (a catch-up's run) or it came back from the DLQ (a redrive). */
export function isBackfill(
  message: { backfill?: true },
  messageAttributes: Record<string, unknown> | undefined,
): boolean {
  return message.backfill === true || (messageAttributes !== undefined && REDRIVEN_MARK_ATTRIBUTE in messageAttributes);
}

/**
 * Backfill's cap while live work waits: `share` of the job-wide allowance, at least one start per interval, with no
 * burst (the cap must hold in every window, like the allowance). Undefined when the share is the whole allowance.
 */
export function backfillLimits(limits: RateLimitSpec, share: number): RateLimitSpec | undefined {
  if (!(share > 0) || share > 1) throw new RangeError(`backfillShare must be above 0 and at most 1 (got ${share})`);
  if (share >= 1) return undefined;
  return { ...limits, startsPerInterval: Math.max(1, Math.floor(limits.startsPerInterval * share + 1e-9)), burst: 1 };
}

/**
 * The order records run in: live before backfill, and within each, round robin over keys (each key's first record,
 * then each key's second, ...) so one key's records at the head of a batch do not take its slots ahead of the others.
 * Stable: records of one key keep their order, and keys go in the order they first appear.
 */
export function fairOrder<T>(
  items: readonly T[],
  keyOf: (item: T) => string | undefined,
  backfillOf: (item: T) => boolean,
): T[] {
  const roundRobin = (group: readonly T[]): T[] => {
    const byKey = new Map<unknown, T[]>();
    for (const item of group) {
      // Records without a key are each their own key (as SQS fair queues treat messages without a group).
      const key: unknown = keyOf(item) ?? Symbol('no key');
      byKey.set(key, [...(byKey.get(key) ?? []), item]);
    }
    const lists = [...byKey.values()];
    const out: T[] = [];
    for (let round = 0; out.length < group.length; round++)
      for (const list of lists) if (round < list.length) out.push(list[round]);
    return out;
  };
  return [...roundRobin(items.filter((i) => !backfillOf(i))), ...roundRobin(items.filter(backfillOf))];
}
