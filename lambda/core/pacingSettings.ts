// A job's pacing as its functions run it: the defaults of the pacing block's switches, the one derivation of batch
// size, batching window and short wait from the rate, and the consumer's PacingSettings read from JOB_SETTINGS.
import { DEFAULT_QUEUE_RETENTION_DAYS, type JobRuntimeSettings } from './constants';
import { DEFAULT_BACKFILL_SHARE } from './backfill';

/**
 * The defaults of the pacing block's switches, written once: config's schema (lib/config/schema.ts `pacingSchema`)
 * applies them at synthesis, and pacingSettings below for settings built without them (tests, older deployments).
 */
export const PACING_DEFAULTS = {
  /** Lower the shared rate on 429s and recover it up to the allowance. */
  adaptiveRate: true,
  /** Pace against the shared limiter (false: only the concurrency cap bounds the downstream). */
  enabled: true,
  /** The share of the allowance backfill may take while live work waits. */
  backfillShare: DEFAULT_BACKFILL_SHARE,
} as const;

/** The shortest wait for a slot a consumer spends inside the function, whatever the batch: 10 s. */
export const MIN_SHORT_WAIT_MS = 10_000;
/** A derived batch holds about this much of the job's rate: one limiter block, one ledger flush per 15 s of starts. */
export const BATCH_SPAN_SECONDS = 15;
/**
 * The largest derived batch: its completed-operations lookup stays one BatchGetItem (100 keys) with room, and a
 * failed invocation sends at most this many records back to the queue.
 */
export const MAX_DERIVED_BATCH_SIZE = 50;
/** The slack a derived short wait keeps beyond its batch's span of slots: the limiter's lead and the applies' jitter. */
const SHORT_WAIT_SLACK_MS = 1_000;

/** What the batching of a job's consumer is derived from: its paced rate, and whatever the job set itself. */
export interface BatchingInput {
  /** Starts per interval the limiter allows (after headroom). */
  readonly startsPerInterval: number;
  readonly intervalSeconds: number;
  /** Set by the job: kept as set. @default derived */
  readonly batchSize?: number;
  /** Set by the job: kept as set. @default derived */
  readonly batchingWindowSeconds?: number;
  /** Set by the job: kept as set. @default derived */
  readonly shortWaitMs?: number;
  /** The consumer's timeout: a derived short wait stays within half of it. @default 60 */
  readonly consumerTimeoutSeconds?: number;
}

/** A consumer's batching, each value the job's own or derived, and which. */
export interface Batching {
  /** Messages per consumer invocation (the event source's batch size). */
  readonly batchSize: number;
  /** The event source's batching window. */
  readonly batchingWindowSeconds: number;
  /** The longest wait for a slot the consumer spends inside the function; a later slot is deferred. */
  readonly shortWaitMs: number;
  /** The values the job did not set, derived here. */
  readonly derived: readonly ('batchSize' | 'batchingWindowSeconds' | 'shortWaitMs')[];
}

/**
 * The consumer's batch size, batching window and short wait, worked out together from the job's rate (the one place
 * they are: `ops limits` shows the result). The rules:
 * - **Batch size**: the starts of BATCH_SPAN_SECONDS at the rate, at most MAX_DERIVED_BATCH_SIZE, rounded down to a
 *   multiple of 10 from 10 up (each SQS receive returns at most 10: a multiple fills every receive); at least 1.
 *   Larger batches mean fewer invocations, receives and limiter and ledger writes per operation.
 * - **Short wait**: long enough that one invocation waits for its whole batch's slots (the block it takes spans
 *   batchSize - 1 emission intervals) rather than deferring its tail, plus SHORT_WAIT_SLACK_MS; at least
 *   MIN_SHORT_WAIT_MS, and at most half the consumer's timeout, so waiting never crowds out the applies.
 * - **Batching window**: 1 s for a batch over 10 (SQS requires a window then; admission publishes a batch's group at
 *   once, so a second collects it), else 0 (the poller invokes with what one receive returns).
 * A per-key limit changes none of them: a batch mixes keys, and a record whose key has no token is deferred by the key's
 * wait without holding up the others.
 */
export function deriveBatching(input: BatchingInput): Batching {
  const perSecond = input.startsPerInterval / input.intervalSeconds;
  const derived: Batching['derived'][number][] = [];
  let batchSize = input.batchSize;
  if (batchSize === undefined) {
    const span = Math.min(MAX_DERIVED_BATCH_SIZE, Math.floor(perSecond * BATCH_SPAN_SECONDS + 1e-9));
    batchSize = span >= 10 ? span - (span % 10) : Math.max(1, span);
    derived.push('batchSize');
  }
  let shortWaitMs = input.shortWaitMs;
  if (shortWaitMs === undefined) {
    const spanMs = perSecond > 0 ? ((batchSize - 1) / perSecond) * 1000 : 0;
    const ceiling = Math.max(MIN_SHORT_WAIT_MS, ((input.consumerTimeoutSeconds ?? 60) * 1000) / 2);
    shortWaitMs = Math.min(
      ceiling,
      Math.max(MIN_SHORT_WAIT_MS, Math.ceil((spanMs + SHORT_WAIT_SLACK_MS) / 1000) * 1000),
    );
    derived.push('shortWaitMs');
  }
  let batchingWindowSeconds = input.batchingWindowSeconds;
  if (batchingWindowSeconds === undefined) {
    batchingWindowSeconds = batchSize > 10 ? 1 : 0;
    derived.push('batchingWindowSeconds');
  }
  return { batchSize, batchingWindowSeconds, shortWaitMs, derived };
}

export interface PacingSettings {
  /** The limiter item this job's starts count against. */
  limiterKey: string;
  /** What the shared limiter enforces: the allowance after headroom, the configured burst, and the jitter margin. */
  limits: { startsPerInterval: number; intervalMs: number; burst: number; safetyMarginMs: number };
  /** The limiter's lead: roughly a DynamoDB round trip, so a slot on an idle key is not late on arrival. */
  leadMs: number;
  /**
   * How late a start may be, its wake and its claim together, before its slot is given up: half of safetyMarginMs,
   * the window's whole budget from a slot to the provider; the other half is the request's way there.
   */
  lateToleranceMs: number;
  shortWaitMs: number;
  maxDeferrals?: number;
  /** Finite: the setting, else the queue's retention. */
  maxDeferralAgeSeconds: number;
  /** The work queue's retention (JobRuntimeSettings.queueRetentionSeconds). @default DEFAULT_QUEUE_RETENTION_DAYS */
  queueRetentionSeconds: number;
  adaptiveRate: boolean;
  /** False: no shared limiter, only the concurrency cap (the pacing block's `enabled`). */
  enabled: boolean;
  /** The share of the allowance backfill may take while live work waits (1: no cap). @default DEFAULT_BACKFILL_SHARE */
  backfillShare: number;
  /** The per-key rate limit, when the job has one (JobRuntimeSettings.rateLimit.perKey). */
  perKey?: NonNullable<JobRuntimeSettings['rateLimit']['perKey']>;
  /** The per-key concurrency limit, when the job has one (JobRuntimeSettings.concurrencyPerKey). */
  concurrencyPerKey?: NonNullable<JobRuntimeSettings['concurrencyPerKey']>;
}

/**
 * The starts per interval a documented quota leaves after headroom (the job-wide limit's and each key's). The epsilon
 * undoes binary floating point (100 x 0.29 is 28.999999999999996), so a whole product is not rounded down.
 */
export function allowanceAfterHeadroom(starts: number, headroom: number): number {
  return Math.floor(starts * headroom + 1e-9);
}

/** The leadMs every consumer uses: a DynamoDB write's round trip in-region, with room. */
export const LIMITER_LEAD_MS = 20;

/**
 * The margin the rate is spread over, unless the job sets pacing.safetyMarginMs: 0.5% of the window, between 20 and
 * 250 ms. It must exceed the start jitter (timer lateness, the claim's write, the request's way to the downstream):
 * half of it is a start's lateness before it takes a new slot, half the request's way. It costs
 * margin / (window + margin) of the throughput.
 */
export function safetyMarginMs(intervalMs: number): number {
  return Math.min(250, Math.max(20, Math.round(intervalMs * 0.005)));
}

/**
 * The consumer's pacing from its job's settings: the limiter's limits, the waits, the deferral budget and the
 * switches, each default applied here once (PACING_DEFAULTS).
 */
export function pacingSettings(settings: JobRuntimeSettings): PacingSettings {
  const { downstreamKey, maxDeferrals, maxDeferralAgeSeconds, adaptiveRate, enabled } = settings.pacing ?? {};
  // Synthesis always writes the short wait (set, or derived with the batch it serves); settings without it (a test's, an
  // older deployment's) wait the floor every derivation keeps.
  const shortWaitMs = settings.pacing?.shortWaitMs ?? MIN_SHORT_WAIT_MS;
  const intervalMs = settings.rateLimit.intervalSeconds * 1000;
  const margin = settings.pacing?.safetyMarginMs ?? safetyMarginMs(intervalMs);
  const limits = {
    startsPerInterval: settings.rateLimit.startsPerInterval,
    intervalMs,
    burst: settings.rateLimit.burst,
    safetyMarginMs: margin,
  };
  const queueRetentionSeconds = settings.queueRetentionSeconds ?? DEFAULT_QUEUE_RETENTION_DAYS * 86_400;
  return {
    limiterKey: downstreamKey ?? settings.jobName,
    limits,
    leadMs: LIMITER_LEAD_MS,
    lateToleranceMs: Math.floor(margin / 2),
    shortWaitMs,
    maxDeferrals,
    // An operation that has waited longer than its queue would have kept it is not waited for any longer.
    maxDeferralAgeSeconds: maxDeferralAgeSeconds ?? queueRetentionSeconds,
    queueRetentionSeconds,
    adaptiveRate: adaptiveRate ?? PACING_DEFAULTS.adaptiveRate,
    enabled: enabled ?? PACING_DEFAULTS.enabled,
    backfillShare: settings.rateLimit.backfillShare ?? PACING_DEFAULTS.backfillShare,
    ...(settings.rateLimit.perKey ? { perKey: settings.rateLimit.perKey } : {}),
    ...(settings.concurrencyPerKey ? { concurrencyPerKey: settings.concurrencyPerKey } : {}),
  };
}
