// The pacing keys of a job's free-form `settings`, as one schema: config checks it at synth, the handlers at run time.
import * as z from 'zod/mini';
import { DEFAULT_QUEUE_RETENTION_DAYS, EnvVar, type JobRuntimeSettings } from './constants';
import { DEFAULT_BACKFILL_SHARE } from './backfill';
import { MAX_DEFERRALS } from './deferral';
import { laneCount } from './pacing/lanes';
import { SettingsError } from './settings';

/** The keys in a job's plain `settings` that the runtime reads for pacing; every other key is the job's own. */
export const PacingSettingKey = {
  downstreamKey: 'downstreamKey',
  maxDeferrals: 'maxDeferrals',
  maxDeferralAgeSeconds: 'maxDeferralAgeSeconds',
  shortWaitMs: 'shortWaitMs',
  adaptiveRate: 'adaptiveRate',
  pacing: 'pacing',
} as const;

// Each message is a predicate of its key: config reports `<path>: <message>`, the runtime `settings.<key> <message>`.
const got = (issue: { input?: unknown }): string => `got ${JSON.stringify(issue.input)}`;
const positiveInt = () => {
  const error = (issue: { input?: unknown }) => `must be a positive integer, ${got(issue)}`;
  // abort: 2.5 and -1.5 are one problem each, not "not an integer" and "not positive".
  return z.number({ error }).check(z.int({ error, abort: true }), z.positive({ error }));
};
const flag = () => z.boolean({ error: (issue) => `must be true or false, ${got(issue)}` });
const nonEmptyString = () => {
  const error = (issue: { input?: unknown }) => `must be a non-empty string, ${got(issue)}`;
  return z.string({ error }).check(z.minLength(1, { error }));
};

/** Marks the issue of a key that looks like a misspelt pacing key, so the runtime words it as config does. */
const MISSPELT = 'misspeltPacingSetting';

/** The pacing keys, none required. */
const shape = {
  /** The limiter item; jobs calling one provider share it, and so share its allowance. @default the job name */
  downstreamKey: z.optional(nonEmptyString()),
  /**
   * Throttles (429/503) before the operation is dead-lettered; paced deferrals never count.
   * @default 100 (DEFAULT_MAX_DEFERRALS in ./deferral.ts, applied by the deferral policy)
   */
  maxDeferrals: z.optional(positiveInt().check(z.lte(MAX_DEFERRALS, { error: (issue) => `must be at most ${MAX_DEFERRALS}, ${got(issue)}` }))),
  /**
   * Age since first enqueue past which the operation is dead-lettered rather than deferred again, so nothing is
   * re-published for ever. @default the queue's retention (pacingSettings applies it: only the runtime knows it)
   */
  maxDeferralAgeSeconds: z.optional(positiveInt()),
  /** The longest wait for a rate-limit slot spent inside the function. @default 10000 */
  shortWaitMs: z._default(positiveInt(), 10_000),
  /** Lower the shared rate on 429s and recover it up to the allowance. @default true */
  adaptiveRate: z._default(flag(), true),
  /**
   * False runs the consumer without the shared limiter (no limiter reads or writes): only the concurrency cap bounds
   * the downstream. For downstreams with no start quota worth pacing (the job's own bucket or table), and for measuring
   * the pipeline's own cost. @default true
   */
  pacing: z._default(flag(), true),
} satisfies Record<keyof typeof PacingSettingKey, z.ZodMiniType>;

const pacingKeys = Object.values(PacingSettingKey);

/**
 * Edit distance between two strings (insert, delete, substitute, or swap two neighbours: one edit each), or
 * `limit + 1` as soon as it is known to exceed `limit`.
 */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) current[j] = Math.min(current[j], before[j - 2] + 1);
    }
    if (Math.min(...current) > limit) return limit + 1;
    [before, previous] = [previous, current];
  }
  return previous[b.length];
}

/**
 * The pacing key `key` is most likely a misspelling of, if any: the same key but for case, or, for a pacing key of 8
 * characters or more, one edit away from it ignoring case. A short key is matched on case alone, since one edit of a
 * short word is often another word a job may mean (`paging`, `spacing`).
 */
function misspeltPacingKey(key: string): keyof typeof PacingSettingKey | undefined {
  if ((pacingKeys as readonly string[]).includes(key)) return undefined;
  const lower = key.toLowerCase();
  let best: { key: keyof typeof PacingSettingKey; distance: number } | undefined;
  for (const known of pacingKeys) {
    const limit = known.length >= 8 ? 1 : 0;
    const distance = editDistance(lower, known.toLowerCase(), limit);
    if (distance <= limit && (best === undefined || distance < best.distance)) best = { key: known, distance };
  }
  return best?.key;
}

/**
 * The pacing keys of a job's `settings`, with their defaults. A key that differs from a pacing key only in case or by a
 * small typo (`shortWaitMS`) is refused rather than left as the job's own: it would be silently ignored. Every other
 * key passes through.
 */
export const pacingSettingsSchema = z.looseObject(shape).check(
  z.superRefine(
    (settings, ctx) => {
      if (typeof settings !== 'object' || settings === null) return;
      for (const key of Object.keys(settings)) {
        const meant = misspeltPacingKey(key);
        if (meant !== undefined) {
          ctx.addIssue({ code: 'custom', path: [key], message: `unknown pacing setting; did you mean ${meant}?`, params: { [MISSPELT]: meant } });
        }
      }
    },
    // Also when a pacing value is bad, so one round names every problem.
    { when: () => true },
  ),
);

export interface PacingSettings {
  /** The limiter item this job's starts count against. */
  limiterKey: string;
  /** What the shared limiter enforces: the allowance after headroom, the configured burst, and the jitter margin. */
  limits: { startsPerInterval: number; intervalMs: number; burst: number; safetyMarginMs: number };
  /** The limiter's lead: roughly a DynamoDB round trip, so a slot on an idle key is not late on arrival. */
  leadMs: number;
  /** Lanes the job-wide allowance is split into, so a block follows the container's pace (lambda/core/pacing/lanes.ts). */
  lanes: number;
  /** How late a start may be before its slot is given up; below safetyMarginMs, the jitter the window absorbs. */
  lateToleranceMs: number;
  shortWaitMs: number;
  maxDeferrals?: number;
  /** Finite: the setting, else the queue's retention. */
  maxDeferralAgeSeconds: number;
  /** The work queue's retention (JobRuntimeSettings.queueRetentionSeconds). @default DEFAULT_QUEUE_RETENTION_DAYS */
  queueRetentionSeconds: number;
  adaptiveRate: boolean;
  /** False: no shared limiter, only the concurrency cap (the `pacing` setting). */
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
 * The margin the rate is spread over: 0.5% of the window, between 20 and 250 ms. It must exceed the start jitter
 * (timer lateness, the write's round trip beyond leadMs); it costs margin / (window + margin) of the throughput.
 */
export function safetyMarginMs(intervalMs: number): number {
  return Math.min(250, Math.max(20, Math.round(intervalMs * 0.005)));
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const key = `settings.${issue.path.map(String).join('.')}`;
  const misspelt = issue.code === 'custom' && issue.params?.[MISSPELT] !== undefined;
  return misspelt ? `${key}: ${issue.message}` : `${key} ${issue.message}`;
}

/** @throws SettingsError naming every pacing setting with a bad value, and every key that misspells one */
export function pacingSettings(settings: JobRuntimeSettings): PacingSettings {
  const result = pacingSettingsSchema.safeParse(settings.settings);
  if (!result.success) {
    throw new SettingsError(`${EnvVar.JOB_SETTINGS} is invalid for pacing: ${result.error.issues.map(describeIssue).join('; ')}`);
  }
  const { downstreamKey, maxDeferrals, maxDeferralAgeSeconds, shortWaitMs, adaptiveRate, pacing } = result.data;
  const intervalMs = settings.rateLimit.intervalSeconds * 1000;
  const margin = safetyMarginMs(intervalMs);
  const limits = { startsPerInterval: settings.rateLimit.startsPerInterval, intervalMs, burst: settings.rateLimit.burst, safetyMarginMs: margin };
  const queueRetentionSeconds = settings.queueRetentionSeconds ?? DEFAULT_QUEUE_RETENTION_DAYS * 86_400;
  return {
    limiterKey: downstreamKey ?? settings.jobName,
    limits,
    leadMs: LIMITER_LEAD_MS,
    lanes: laneCount(limits),
    lateToleranceMs: Math.floor(margin / 2),
    shortWaitMs,
    maxDeferrals,
    // An operation that has waited longer than its queue would have kept it is not waited for any longer.
    maxDeferralAgeSeconds: maxDeferralAgeSeconds ?? queueRetentionSeconds,
    queueRetentionSeconds,
    adaptiveRate,
    enabled: pacing,
    backfillShare: settings.rateLimit.backfillShare ?? DEFAULT_BACKFILL_SHARE,
    ...(settings.rateLimit.perKey ? { perKey: settings.rateLimit.perKey } : {}),
    ...(settings.concurrencyPerKey ? { concurrencyPerKey: settings.concurrencyPerKey } : {}),
  };
}
