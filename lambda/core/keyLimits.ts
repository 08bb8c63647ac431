// Per-key rate limits: the contract between the consumer (which enforces them) and the operator CLI (which overrides
// them without a deploy). Pure: key layout of the limiter table's per-key items, and the override document's shape.
import * as z from 'zod/mini';
import { allowanceAfterHeadroom } from './pacingSettings';

/**
 * The limiter item one key's starts are counted on: `<limiter key>#key#<value>` (the limiter key is the job's downstream
 * key, so jobs calling one provider share each key's allowance). An idle key's item expires by TTL: it costs nothing.
 */
export function perKeyItemKey(limiterKey: string, value: string): string {
  return `${limiterKey}#key#${value}`;
}

/** The limiter table item holding a job's per-key overrides: `LIMITS#<job>`, with a map attribute `overrides`. */
export function keyLimitsItemKey(job: string): string {
  return `LIMITS#${job}`;
}

/** The attribute of the LIMITS item holding the overrides, by key value. */
export const OVERRIDES_ATTRIBUTE = 'overrides';

/** How old a consumer's copy of the overrides may be: an override takes effect within this. */
export const OVERRIDE_REFRESH_MS = 30_000;

/** Most overrides one job keeps (they share one item, at most 400 KB). */
export const MAX_OVERRIDES = 2_000;

/**
 * One key's limit set apart from the job's `rateLimit.perKey` default (a large tenant's contract tier): its documented
 * quota per interval; the job's per-key headroom still applies. Unset fields take the default's.
 */
export const keyLimitOverrideSchema = z.strictObject({
  starts: z.number().check(z.int(), z.positive()),
  intervalSeconds: z.optional(z.number().check(z.int(), z.gte(1), z.lte(3600))),
  burst: z.optional(z.number().check(z.int(), z.positive())),
  /** When it was set (ISO 8601) and by whom (the caller's ARN, or "local"). */
  setAt: z.string().check(z.minLength(1)),
  setBy: z.optional(z.string()),
});
export type KeyLimitOverride = z.infer<typeof keyLimitOverrideSchema>;

/** The pacing a key gets: the job's per-key default, with the key's override where it has one. */
export interface KeyLimit {
  /** Starts allowed in any sliding window of intervalSeconds, after headroom. */
  startsPerInterval: number;
  intervalSeconds: number;
  burst: number;
}

/** A key's documented limit (override or default) less the job's per-key headroom, as the consumer enforces it. */
export function effectiveKeyLimit(
  perKey: { startsPerInterval: number; intervalSeconds: number; burst: number; headroom: number },
  override: KeyLimitOverride | undefined,
): KeyLimit {
  if (!override)
    return {
      startsPerInterval: perKey.startsPerInterval,
      intervalSeconds: perKey.intervalSeconds,
      burst: perKey.burst,
    };
  const startsPerInterval = Math.max(1, allowanceAfterHeadroom(override.starts, perKey.headroom));
  return {
    startsPerInterval,
    intervalSeconds: override.intervalSeconds ?? perKey.intervalSeconds,
    burst: Math.min(override.burst ?? perKey.burst, startsPerInterval),
  };
}
