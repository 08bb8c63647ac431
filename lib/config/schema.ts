// Configuration contract for one environment: every default is written once here (and pinned by test/lib/config).
import { z } from 'zod';
import {
  DEFAULT_QUEUE_RETENTION_DAYS,
  MAX_DEFERRALS,
  LAMBDA_MAX_TIMEOUT_SECONDS,
  SQS_MAX_MESSAGE_BYTES,
  type JobRuntimeSettings,
} from '../../lambda/core/constants';
import { misspeltKey, unknownKeysMessage } from '../../lambda/core/issues';
import {
  allowanceAfterHeadroom,
  type Batching,
  deriveBatching,
  PACING_DEFAULTS,
} from '../../lambda/core/pacingSettings';
import { BUCKET_MODES, type BucketMode, modesByFunction, TABLE_MODES, type TableMode } from './access';

/** DLQ retention is fixed at the SQS maximum so a failed message outlives its source queue's retention. */
export const DLQ_RETENTION_DAYS = 14;
/** The queue's visibility timeout is this multiple of the consumer timeout (AWS guidance for SQS event sources). */
export const VISIBILITY_TIMEOUT_FACTOR = 6;

/** A job's name: kebab-case, 3 to 32 characters (it names the job's functions, queues and alarms). */
export const JOB_NAME_PATTERN = /^[a-z][a-z0-9-]{1,30}[a-z0-9]$/;
/** What a bad job name is told. */
export const JOB_NAME_RULE = 'job names are kebab-case, 3 to 32 characters';

/** EventBridge Scheduler's six-field cron body: minutes hours day-of-month month day-of-week year. */
export const cronSchema = z.string().refine(
  (v) => {
    const f = v.trim().split(/\s+/);
    return f.length === 6 && (f[2] === '?') !== (f[4] === '?');
  },
  {
    message:
      'must be an EventBridge Scheduler cron body with 6 fields and "?" in exactly one of day-of-month and day-of-week, e.g. "0 2 * * ? *"',
  },
);

export const timeZoneSchema = z.string().refine(
  (v) => {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: v });
      return v.includes('/') || v === 'UTC';
    } catch {
      return false;
    }
  },
  { message: 'must be an IANA time zone such as "Europe/London" or "UTC"' },
);

const keySchema = z.object({
  name: z.string().min(1),
  type: z.enum(['S', 'N']).default('S'),
});

/** A table the jobs read or write. It belongs to the team's application; an environment may create it itself. */
export const appTableSchema = z.object({
  tableName: z.string().regex(/^[A-Za-z0-9_.-]{3,255}$/, 'must be a valid DynamoDB table name'),
  partitionKey: keySchema,
  sortKey: keySchema.optional(),
  globalSecondaryIndexes: z
    .array(z.object({ indexName: z.string().min(3), partitionKey: keySchema, sortKey: keySchema.optional() }))
    .default([]),
});

/**
 * A bucket the jobs read or write. S3 bucket names are global across every AWS account, so a bucket the stack creates
 * is best left unnamed: CloudFormation then gives it a unique name and the stack hands that name to its consumers.
 */
export const appBucketSchema = z.object({
  /**
   * Required for an imported bucket (`appResources.create` false): the existing bucket's name. For a created bucket, an
   * explicit opt-in that must be free in every account of the partition. @default none (CloudFormation names it)
   */
  bucketName: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be a valid S3 bucket name')
    .optional(),
});

/** A secret the jobs read (Secrets Manager); its value is read at run time, never put in an environment variable. */
export const appSecretSchema = z.object({
  secretName: z.string().regex(/^[A-Za-z0-9/_+=.@-]{1,512}$/, 'must be a valid Secrets Manager secret name'),
});

/** The application's own resources, by logical key. */
export const appResourcesSchema = z
  .object({
    /** Create the tables, buckets and secrets below in this stack (a self-contained environment). @default false */
    create: z.boolean().default(false),
    tables: z.record(z.string(), appTableSchema).default({}),
    buckets: z.record(z.string(), appBucketSchema).default({}),
    secrets: z.record(z.string(), appSecretSchema).default({}),
  })
  .superRefine((resources, ctx) => {
    // Only an imported bucket needs its name: the stack references it by name and nothing else identifies it.
    if (resources.create) return;
    for (const [key, bucket] of Object.entries(resources.buckets)) {
      if (bucket.bucketName === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['buckets', key, 'bucketName'],
          message: 'is required when appResources.create is false: the stack imports the existing bucket by its name',
        });
      }
    }
  });

/**
 * One mode or a list of them (lib/config/access.ts: each mode's actions); read as a list. Hand-picked branch rather than
 * a z.union, as for `concurrency`: a bad single mode is then reported on the key itself, a bad listed one at its index.
 */
const modesSchema = <M extends string>(modes: readonly [M, ...M[]]) =>
  z
    .custom<M | M[]>()
    .optional()
    .transform((value, ctx): M[] | undefined => {
      if (value === undefined) return undefined;
      const parsed = (
        typeof value === 'string' ? z.enum(modes) : z.array(z.enum(modes)).min(1, 'must name at least one mode')
      ).safeParse(value);
      if (!parsed.success) {
        for (const issue of parsed.error.issues)
          ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
        return z.NEVER;
      }
      return typeof parsed.data === 'string' ? [parsed.data] : parsed.data;
    });

/**
 * One use of a table or bucket: what it names (`target`: a config ref here, a construct in lib/paced-jobs.ts), and
 * `discover` (the producer's modes) and `apply` (the consumer's), or `access`, shorthand for both (the producer gets its
 * reading modes). Read as `{ ...target, discover, apply }`. One definition, so the construct's props and the reference
 * app's config accept the same modes and fail with the same messages.
 */
export const useSchema = <M extends string, T extends z.ZodRawShape>(modes: readonly [M, ...M[]], target: T) => {
  type Modes = { access?: M[]; discover?: M[]; apply?: M[] };
  return z
    .object({ ...target, access: modesSchema(modes), discover: modesSchema(modes), apply: modesSchema(modes) })
    .superRefine((use, ctx) => {
      const { access, discover, apply } = use as unknown as Modes;
      if (access !== undefined && (discover !== undefined || apply !== undefined)) {
        ctx.addIssue({
          code: 'custom',
          path: ['access'],
          message: 'is shorthand for discover and apply together: give either access, or discover and/or apply',
        });
      } else if (access === undefined && discover === undefined && apply === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['access'],
          message: `is required unless discover or apply is given: one or more of ${modes.join(', ')}`,
        });
      }
    })
    .transform((use) => {
      const { access, discover, apply, ...rest } = use as unknown as Modes & Record<string, unknown>;
      return { ...(rest as z.output<z.ZodObject<T>>), ...modesByFunction<M>({ access, discover, apply }) };
    });
};

/** The table modes, as zod's enum wants them. */
export const TABLE_MODE_NAMES = Object.keys(TABLE_MODES) as [TableMode, ...TableMode[]];
/** The bucket modes, as zod's enum wants them. */
export const BUCKET_MODE_NAMES = Object.keys(BUCKET_MODES) as [BucketMode, ...BucketMode[]];

/** What one job may touch: references to app resources by logical key, under the alias the job's code uses. */
export const jobUsesSchema = z.object({
  /** `{ ref, discover?, apply? }` or `{ ref, access }`: an appResources.tables key the job may touch, and how. @default none */
  tables: z.record(z.string(), useSchema(TABLE_MODE_NAMES, { ref: z.string() })).default({}),
  /** `{ ref, discover?, apply? }` or `{ ref, access }`: an appResources.buckets key. @default none */
  buckets: z.record(z.string(), useSchema(BUCKET_MODE_NAMES, { ref: z.string() })).default({}),
  /** `{ ref }`: an appResources.secrets key the consumer may read (its value is fetched at run time). @default none */
  secrets: z.record(z.string(), z.object({ ref: z.string() })).default({}),
});

/** What a strict block says of a key it does not know (lambda/core/issues.ts): named, with the key it misspells. */
const strictBlock = <T extends z.ZodRawShape>(shape: T, moved: Record<string, string> = {}) =>
  z.strictObject(shape, {
    error: (issue) =>
      issue.code === 'unrecognized_keys' ? unknownKeysMessage(issue.keys, Object.keys(shape), moved) : undefined,
  });

const downstreamKeySchema = z
  .string()
  .min(1, 'must be a non-empty string')
  // The key becomes a dynamodb:LeadingKeys pattern, where these would be wildcards or a policy variable.
  .refine((key) => !/[*?$]/.test(key), {
    message: 'may not hold "*", "?" or "$": it names the job\'s limiter items in its IAM policy',
  });

/** A limit per key (pacing.perKey): a rate per key, a cap on operations in progress per key, or both. */
export const perKeySchema = strictBlock({
  /** The resource field whose value is the key (a tenant, a merchant account, a customer token). */
  key: z.string().min(1, 'must name the resource field whose value is the key'),
  /**
   * The downstream's documented quota per key: starts allowed per interval. Each key gets its own fleet-wide allowance
   * (after headroom) with the job-wide one's sliding-window guarantee; a record whose key has no slot is deferred by its
   * key's wait and never holds up the other keys; an idle key costs nothing. `ops limits set` overrides one key's
   * limit without a deploy. @default none (no rate per key)
   */
  starts: z.number().int().positive().optional(),
  /** The per-key quota's window. @default 60 */
  intervalSeconds: z.number().int().min(1).max(3600).default(60),
  /** Fraction of the per-key quota we allow ourselves. @default 0.8 */
  headroom: z.number().gt(0).max(1).default(0.8),
  /** Starts a key may make back to back after an idle period; at most its allowance after headroom. @default 1 */
  burst: z.number().int().positive().default(1),
  /**
   * At most this many operations in progress at once per key, fleet-wide, for a downstream that limits concurrent
   * requests per key. Each start holds a lease that expires with its invocation, so a worker that dies frees its key.
   * @default none (no cap per key)
   */
  concurrency: z.number().int().positive().max(1000).optional(),
}).superRefine((perKey, ctx) => {
  if (perKey.starts === undefined) {
    if (perKey.concurrency === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['starts'],
        message:
          'is required unless concurrency is given: a per-key limit is a rate (starts), a cap on operations in progress (concurrency), or both',
      });
    }
    return;
  }
  const allowed = allowanceAfterHeadroom(perKey.starts, perKey.headroom);
  if (allowed < 1)
    ctx.addIssue({
      code: 'custom',
      path: ['starts'],
      message: `${perKey.starts} x headroom ${perKey.headroom} leaves no start per interval; raise starts or headroom`,
    });
  else if (perKey.burst > allowed)
    ctx.addIssue({
      code: 'custom',
      path: ['burst'],
      message: `must be at most the ${allowed} starts per interval the key is allowed after headroom`,
    });
});

/**
 * Admission: how much work the producer lets into the queue at once. The rest of a night's backlog waits in the
 * application's tables and is admitted step by step as the queue drains, so a backlog of hours is received about once
 * per operation instead of being deferred all night.
 */
export const admissionSchema = strictBlock({
  /** Admit at the job's rate (false: publish every page at once, as a job without pacing does). @default true */
  enabled: z.boolean().default(true),
  /**
   * Work the queue may hold, in seconds at the job's rate; also the longest any admitted message is delayed, so at most
   * 840 (SQS delays a message by at most 900 s). @default 300
   */
  horizonSeconds: z.number().int().min(30).max(840).default(300),
});

/** The old homes of the pacing block's keys, for a config written before it: each names where its key went. */
const MOVED_TO_PACING: Record<string, string> = {
  rateLimit:
    'its keys are in pacing (pacing.starts, pacing.intervalSeconds, pacing.headroom, pacing.burst, pacing.maxConcurrent, pacing.perKey, pacing.backfillShare)',
  concurrency: 'use pacing.concurrency (the cap) and pacing.perKey.concurrency (per key)',
  batchSize: 'use pacing.batchSize (derived from the rate unless set)',
  batchingWindowSeconds: 'use pacing.batchingWindowSeconds (derived from the rate unless set)',
  admission: 'use pacing.admission',
};

/**
 * A job's pacing, in one block: the downstream's documented limits (a quota of starts per interval, and a limit on
 * requests in flight where it has one), the share of them we take, per-key limits, the deferral budget, admission, and
 * the consumer's batching. Batch size, batching window and short wait are derived from the rate unless set
 * (lambda/core/pacingSettings.ts deriveBatching: `ops limits` shows the result).
 */
export const pacingSchema = strictBlock({
  /** The downstream's documented quota: starts allowed per interval. */
  starts: z.number().int().positive(),
  /** The quota's window. @default 60 */
  intervalSeconds: z.number().int().min(1).max(3600).default(60),
  /** Fraction of the documented quota we allow ourselves: the fleet-wide limiter enforces floor(starts x headroom). @default 0.8 */
  headroom: z.number().gt(0).max(1).default(0.8),
  /**
   * Starts allowed back to back after an idle period. The limiter guarantees at most the allowance in ANY sliding
   * window, so each unit of burst above 1 costs one start per window of sustained rate. @default 1
   */
  burst: z.number().int().positive().default(1),
  /**
   * The downstream's documented limit on requests in flight at once, where it has one: `ops preflight` checks that the
   * concurrency cap stays within it. @default none
   */
  maxConcurrent: z.number().int().positive().optional(),
  /** The consumer's reserved concurrency and its event source's maximum concurrency. @default 5 */
  concurrency: z.number().int().min(2).max(1000).default(5),
  /** A limit per key alongside the job-wide one (both hold): a rate, a cap on operations in progress, or both. @default none */
  perKey: perKeySchema.optional(),
  /**
   * The share of the allowance catch-up and redrive traffic (marked backfill by the ops commands) may take while live
   * scheduled work is waiting; all of it otherwise. Live work also goes first: backfill takes only slots live work has
   * not booked. @default 0.5
   */
  backfillShare: z
    .number()
    .gt(0, 'must be above 0 (a share of the allowance, e.g. 0.5)')
    .max(1)
    .default(PACING_DEFAULTS.backfillShare),
  /** The limiter item; jobs calling one provider name the same key and so share its allowance. @default the job name */
  downstreamKey: downstreamKeySchema.optional(),
  /** Lower the shared rate on 429s and recover it up to the allowance. @default true */
  adaptiveRate: z.boolean().default(PACING_DEFAULTS.adaptiveRate),
  /**
   * False runs the consumer without the shared limiter (no limiter reads or writes): only the concurrency cap bounds
   * the downstream. For downstreams with no start quota worth pacing (the job's own bucket or table). @default true
   */
  enabled: z.boolean().default(PACING_DEFAULTS.enabled),
  /** Throttles (429/503) before the operation is dead-lettered; paced deferrals never count. @default 100 */
  maxDeferrals: z.number().int().positive().max(MAX_DEFERRALS).optional(),
  /**
   * Age since first enqueue past which the operation is dead-lettered rather than deferred again, so nothing is
   * re-published for ever. @default the queue's retention (queueRetentionDays)
   */
  maxDeferralAgeSeconds: z.number().int().positive().optional(),
  /**
   * How much of a night's work the producer lets into the queue at once; the rest waits in the application's tables
   * and is admitted step by step as the queue drains.
   */
  admission: admissionSchema.prefault({}),
  /** Messages per consumer invocation. @default derived from the rate (deriveBatching) */
  batchSize: z.number().int().min(1).max(10000).optional(),
  /** The event source's batching window. @default derived: 1 for a batch over 10, else 0 */
  batchingWindowSeconds: z.number().int().min(0).max(300).optional(),
  /** The longest wait for a rate-limit slot spent inside the function. @default derived: a batch's slots, at least 10000 */
  shortWaitMs: z.number().int().positive().optional(),
  /**
   * How far the limiter stretches the quota's window to absorb a start's jitter: its wake, its claim and its request's
   * way to the downstream. A start later than half of it takes a new slot, so the downstream never counts more than its
   * allowance in a window. Raise it for a far or jittery downstream that counts strictly; it costs
   * margin / (window + margin) of the throughput. At most a tenth of the interval.
   * @default derived: 0.5% of the interval, between 20 and 250 (lambda/core/pacingSettings.ts safetyMarginMs)
   */
  safetyMarginMs: z.number().int().positive().optional(),
}).superRefine(({ safetyMarginMs, intervalSeconds }, ctx) => {
  if (safetyMarginMs !== undefined && safetyMarginMs > intervalSeconds * 100)
    ctx.addIssue({
      code: 'custom',
      path: ['safetyMarginMs'],
      message: `must be at most a tenth of the ${intervalSeconds} s interval (${intervalSeconds * 100} ms)`,
    });
});

export type PacingConfig = z.output<typeof pacingSchema>;

export const scheduleSchema = z.object({
  /** EventBridge Scheduler cron body (6 fields). */
  cron: cronSchema,
  /** IANA time zone the cron is evaluated in. */
  timeZone: timeZoneSchema,
  /** Business date = the scheduled date in the time zone plus this many days. @default -1 (yesterday) */
  businessDateOffsetDays: z.number().int().min(-31).max(0).default(-1),
  /** Scheduler retry attempts for a failed producer invocation. @default 3 */
  retryAttempts: z.number().int().min(0).max(185).default(3),
  /** Scheduler gives up on an invocation older than this. @default 3600 */
  maxEventAgeSeconds: z.number().int().min(60).max(86400).default(3600),
  /** Whether the schedule starts enabled. @default true */
  enabled: z.boolean().default(true),
});

/**
 * A completion SLO: `objective` of a night's eligible operations complete within `completeWithinMinutes` of the run's
 * scheduled time (e.g. 0.99 within 120). `ops status` forecasts a running batch against it.
 */
export const sloSchema = z.strictObject({
  /** The share of a night's operations that must complete in the window, in (0, 1). */
  objective: z
    .number()
    .gt(0, "must be above 0 (a share of the night's operations, e.g. 0.99)")
    .lt(1, 'must be below 1 (an objective of 100% leaves no error budget; e.g. 0.99)'),
  /** Minutes after the run's scheduled time by which the objective's share must be settled. */
  completeWithinMinutes: z.number().int().positive(),
});

/** Per-job alarm thresholds beyond the age SLO (lib/monitoring.ts turns them into CloudWatch alarms). */
export const jobAlarmsSchema = z.object({
  /** The provider's throttling responses (429/503) per minute that count as being throttled. @default 10 */
  throttledPerMinute: z.number().int().min(0).default(10),
  /** Consecutive minutes above throttledPerMinute before the throttling alarm fires. @default 5 */
  throttledMinutes: z.number().int().min(1).max(60).default(5),
  /** Alarm when the producer's longest run in 5 minutes exceeds this fraction of its timeout. @default 0.8 */
  producerDurationFraction: z.number().gt(0).max(1).default(0.8),
  /**
   * The stalled alarm: work waits in the queue (visible or delayed) and nothing settles for this many consecutive
   * minutes. Keep it above the longest planned gap between two starts (the admission horizon holds work ahead of its
   * slot; a job at one start an hour needs more than 60). @default 15
   */
  stalledMinutes: z.number().int().min(2).max(1440).default(15),
});

/** The names pacing settings had in a job's free-form `settings` before the pacing block: refused there now. */
const PACING_SETTING_NAMES = [
  'downstreamKey',
  'maxDeferrals',
  'maxDeferralAgeSeconds',
  'shortWaitMs',
  'adaptiveRate',
  'pacing',
] as const;

export const jobSchema = strictBlock(
  {
    /** When the producer runs: an EventBridge Scheduler schedule in the environment's schedule group. */
    schedule: scheduleSchema,
    /** Records discovered per producer page. @default 500 */
    pageSize: z.number().int().min(1).max(10000).default(500),
    /** Pages one scheduled run may chain through continuations before it stops and reports. @default 200 */
    maxPagesPerRun: z.number().int().min(1).max(10000).default(200),
    /** The job's pacing, in one block: the downstream's limits, the share we take, per-key limits, batching. */
    pacing: pacingSchema,
    /** The consumer's timeout; the queue's visibility timeout is 6 times this. @default 60 */
    consumerTimeoutSeconds: z.number().int().min(1).max(LAMBDA_MAX_TIMEOUT_SECONDS).default(60),
    /** The consumer's memory. @default 512 */
    consumerMemoryMb: z.number().int().min(128).max(10240).default(512),
    /**
     * The producer's timeout; a step continues through the admission queue well before it (the admission queue's
     * visibility timeout is this plus 60 s). @default 300
     */
    producerTimeoutSeconds: z.number().int().min(10).max(LAMBDA_MAX_TIMEOUT_SECONDS).default(300),
    /** The producer's memory. @default 512 */
    producerMemoryMb: z.number().int().min(128).max(10240).default(512),
    /** Receives before SQS moves a message to the DLQ; a throttle never counts (it is deferred). @default 5 */
    maxReceiveCount: z.number().int().min(1).max(1000).default(5),
    /**
     * The night's completion SLO, e.g. `{ objective: 0.99, completeWithinMinutes: 120 }`: 99% of the run's operations
     * settled within 2 hours of its scheduled time. Synthesis refuses a window a full run (pageSize x maxPagesPerRun
     * operations) cannot meet at the paced rate, saying which window or quota would; `ops status` forecasts each running
     * batch against it. @default none
     */
    slo: sloSchema.optional(),
    /** Alarm when the oldest queued message is older than this. @default 3600 */
    oldestMessageAgeSloSeconds: z.number().int().min(60).default(3600),
    /** Source queue retention. @default 4 */
    queueRetentionDays: z.number().int().min(1).max(14).default(DEFAULT_QUEUE_RETENTION_DAYS),
    /** Idempotency record lifetime; must cover queue plus DLQ retention so a late redrive stays a no-op. @default 30 */
    idempotencyRecordDays: z.number().int().min(1).max(365).default(30),
    /** Cap on one message body (typical messages are under 1 KiB). @default 262144 (256 KiB, the SQS maximum) */
    maxMessageBytes: z.number().int().min(1024).max(SQS_MAX_MESSAGE_BYTES).default(SQS_MAX_MESSAGE_BYTES),
    /**
     * What the job may touch, by the alias its code uses: each function is granted exactly its modes' actions (the
     * modes are below), and both get the names in JOB_SETTINGS.
     */
    uses: jobUsesSchema.default({ tables: {}, buckets: {}, secrets: {} }),
    /** The thresholds of the job's alarms beyond the age SLO. */
    alarms: jobAlarmsSchema.prefault({}),
    /**
     * Plain settings handed to the job's code (e.g. the provider's base URL), free-form; nothing pacing-related (the
     * pacing block's keys are refused here, naming where they belong).
     */
    settings: z
      .record(
        z.string(),
        z.union([z.string(), z.number(), z.boolean()], { message: 'must be a string, a number or a boolean' }),
      )
      .default({})
      .superRefine(
        (settings, ctx) => {
          if (typeof settings !== 'object' || settings === null) return;
          for (const key of Object.keys(settings)) {
            const meant =
              misspeltKey(key, PACING_SETTING_NAMES) ?? (PACING_SETTING_NAMES.includes(key as never) ? key : undefined);
            if (meant !== undefined)
              ctx.addIssue({
                code: 'custom',
                path: [key],
                message: `is a pacing setting: set pacing.${meant === 'pacing' ? 'enabled' : meant} instead`,
              });
          }
        },
        // Also when another setting is bad, so one round names every problem.
        { when: () => true },
      ),
  },
  MOVED_TO_PACING,
);
/** The rate part of the pacing block: what effectiveRateLimit reads (bench and tests build it without the rest). */
export type RateInput = Pick<PacingConfig, 'starts' | 'intervalSeconds' | 'headroom' | 'burst'> &
  Partial<Pick<PacingConfig, 'perKey' | 'backfillShare'>>;

/** The pacing the consumer enforces: the documented quota less headroom, and the configured burst (and per key). */
export function effectiveRateLimit(pacing: RateInput): JobRuntimeSettings['rateLimit'] {
  const startsPerInterval = allowanceAfterHeadroom(pacing.starts, pacing.headroom);
  const { perKey } = pacing;
  return {
    startsPerInterval,
    intervalSeconds: pacing.intervalSeconds,
    burst: pacing.burst,
    ...(pacing.backfillShare !== undefined ? { backfillShare: pacing.backfillShare } : {}),
    ...(perKey?.starts !== undefined
      ? {
          perKey: {
            field: perKey.key,
            startsPerInterval: allowanceAfterHeadroom(perKey.starts, perKey.headroom),
            intervalSeconds: perKey.intervalSeconds,
            burst: perKey.burst,
            headroom: perKey.headroom,
          },
        }
      : {}),
  };
}

/** A job's batching as its consumer runs it: each of batch size, batching window and short wait set, or derived. */
export function jobBatching(job: Pick<JobConfig, 'pacing' | 'consumerTimeoutSeconds'>): Batching {
  const { pacing } = job;
  return deriveBatching({
    ...effectiveRateLimit(pacing),
    batchSize: pacing.batchSize,
    batchingWindowSeconds: pacing.batchingWindowSeconds,
    shortWaitMs: pacing.shortWaitMs,
    consumerTimeoutSeconds: job.consumerTimeoutSeconds,
  });
}

/**
 * Why a job's SLO cannot be met by a full run (pageSize x maxPagesPerRun operations) at its paced rate (the quota less
 * headroom), or undefined when it can: the objective's share of that run must fit the window at that rate.
 */
export function sloUnreachable(
  job: Pick<JobConfig, 'pageSize' | 'maxPagesPerRun'> & { pacing: RateInput; slo?: z.output<typeof sloSchema> },
): string | undefined {
  // Only an SLO that is itself valid (its own keys report what is not).
  const { objective, completeWithinMinutes } = job.slo ?? {};
  if (
    !(
      job.slo &&
      objective! > 0 &&
      objective! < 1 &&
      Number.isInteger(completeWithinMinutes) &&
      completeWithinMinutes! > 0
    )
  )
    return undefined;
  const operations = job.pageSize * job.maxPagesPerRun;
  const starts = effectiveRateLimit(job.pacing).startsPerInterval;
  const perMinute = (starts * 60) / job.pacing.intervalSeconds;
  if (perMinute <= 0) return undefined; // pacing reports its own problem
  const needed = Math.ceil(job.slo.objective * operations);
  const minutes = needed / perMinute;
  if (minutes <= job.slo.completeWithinMinutes) return undefined;
  // The starts per interval the window needs, and the documented quota that leaves them after headroom.
  const startsNeeded = Math.ceil((needed * job.pacing.intervalSeconds) / (job.slo.completeWithinMinutes * 60));
  const quota = Math.ceil(startsNeeded / job.pacing.headroom - 1e-9);
  const fmt = (n: number) => n.toLocaleString('en-US');
  return (
    `is not reachable: a full run (pageSize ${fmt(job.pageSize)} x maxPagesPerRun ${fmt(job.maxPagesPerRun)} = ${fmt(operations)} operations) at ` +
    `${fmt(starts)} starts per ${job.pacing.intervalSeconds} s completes ${Math.round(job.slo.objective * 1000) / 10}% of them in ` +
    `${fmt(Math.ceil(minutes))} minutes; allow at least ${fmt(Math.ceil(minutes))} minutes, raise pacing.starts to at least ${fmt(quota)}, ` +
    `or lower pageSize x maxPagesPerRun to what one night holds`
  );
}

/**
 * The rules between one job's keys, which no single key's schema can judge, as issues under `path` (the job's own):
 * the environment's config and the PacedJobs construct's props both apply them, so a job is judged the same in both.
 */
export function addJobRuleIssues(job: Omit<JobConfig, 'uses'>, ctx: z.RefinementCtx, path: (string | number)[]): void {
  const at = (...rest: (string | number)[]) => [...path, ...rest];
  const minDays = job.queueRetentionDays + DLQ_RETENTION_DAYS;
  if (job.idempotencyRecordDays < minDays) {
    ctx.addIssue({
      code: 'custom',
      path: at('idempotencyRecordDays'),
      message: `must be at least queueRetentionDays + ${DLQ_RETENTION_DAYS} (DLQ retention) = ${minDays}, so a redrive never repeats an effect`,
    });
  }
  // An admitted message may be planned up to a horizon ahead; the age alarm must watch late work, not planned work.
  // (Only for an SLO that is itself valid: an SLO under a minute is already reported on its own key.)
  const { admission } = job.pacing;
  if (
    admission.enabled &&
    job.oldestMessageAgeSloSeconds >= 60 &&
    admission.horizonSeconds >= job.oldestMessageAgeSloSeconds
  ) {
    ctx.addIssue({
      code: 'custom',
      path: at('pacing', 'admission', 'horizonSeconds'),
      message: `must be less than oldestMessageAgeSloSeconds (${job.oldestMessageAgeSloSeconds}): admitted work waits up to the horizon by plan, and the age alarm would fire on it`,
    });
  }
  // Judged only on valid inputs: a bad pageSize or rate is reported on its own key, once.
  const inputsValid = [
    jobSchema.shape.pageSize.safeParse(job.pageSize),
    jobSchema.shape.maxPagesPerRun.safeParse(job.maxPagesPerRun),
    pacingSchema.safeParse(job.pacing),
  ].every((r) => r.success);
  if (job.slo && inputsValid) {
    const problem = sloUnreachable(job);
    if (problem) ctx.addIssue({ code: 'custom', path: at('slo', 'completeWithinMinutes'), message: problem });
  }
  // A derived pair always holds it; a window set beside a batch size (set or derived) must too.
  if (job.pacing.batchingWindowSeconds !== undefined && inputsValid) {
    const { batchSize, batchingWindowSeconds } = jobBatching(job);
    if (batchSize > 10 && batchingWindowSeconds < 1) {
      ctx.addIssue({
        code: 'custom',
        path: at('pacing', 'batchingWindowSeconds'),
        message: `must be at least 1 when the batch size (${batchSize}) is over 10 (an SQS event source rule)`,
      });
    }
  }
}

const REGION_RULE = 'must be an AWS region such as "eu-west-1"';

export const environmentSchema = z
  .object({
    /** AWS account; omit for an environment-agnostic synth. */
    account: z
      .string()
      .regex(/^\d{12}$/, 'must be a 12-digit AWS account ID')
      .optional(),
    /**
     * The AWS region the stack and its data live in. Required, with no default: where personal data is stored is a
     * decision each environment states, never one a default makes for it.
     */
    region: z
      .string({
        error: (issue) =>
          issue.input === undefined
            ? 'is required: the AWS region this environment deploys to, such as "eu-west-1"'
            : REGION_RULE,
      })
      .regex(/^[a-z]{2}(-[a-z]+)+-\d$/, REGION_RULE),
    /**
     * A changing ops command against this environment needs `--confirm <env>` as well as `--yes` (or the name typed at
     * the prompt), so a command meant for another environment cannot change this one. @default false
     */
    protected: z.boolean().default(false),
    /** Keep stateful resources (RETAIN) and turn on point-in-time recovery. @default false */
    retainData: z.boolean().default(false),
    /** CloudWatch Logs retention for every function. @default 30 */
    logRetentionDays: z.number().int().min(1).default(30),
    /** Optional email subscribed to the alarm topic. */
    alarmEmail: z.email().optional(),
    appResources: appResourcesSchema.default({ create: false, tables: {}, buckets: {}, secrets: {} }),
    /**
     * The operators' IAM roles in the stack's account, by name (with its path, if any; `*` matches any characters, e.g.
     * `aws-reserved/sso.amazonaws.com/*AWSReservedSSO_PacedJobsOperator_*`): besides each job's own functions, the only
     * principals that may send to its queues (`ops redrive`, `ops continue`); every other sender is denied by the queue
     * policy. @default none (no one else may send)
     */
    operatorRoles: z
      .array(
        z
          .string()
          .regex(
            /^[\w+=,.@*/-]{1,512}$/,
            'must be an IAM role name, with its path if it has one ("*" matches any characters)',
          ),
      )
      .default([]),
    /** One entry per job, by its name: the job's folder under lambda/jobs/ (its keys: the per-job table). */
    jobs: z.record(z.string().regex(JOB_NAME_PATTERN, JOB_NAME_RULE), jobSchema),
  })
  .superRefine((env, ctx) => {
    if (Object.keys(env.jobs).length === 0) {
      ctx.addIssue({ code: 'custom', path: ['jobs'], message: 'at least one job is required' });
    }
    for (const [name, job] of Object.entries(env.jobs)) {
      const at = (...rest: (string | number)[]) => ['jobs', name, ...rest];
      addJobRuleIssues(job, ctx, at());
      const kinds = ['tables', 'buckets', 'secrets'] as const;
      for (const kind of kinds) {
        for (const [alias, use] of Object.entries(job.uses[kind])) {
          if (!(use.ref in env.appResources[kind])) {
            const known = Object.keys(env.appResources[kind]).join(', ') || 'none';
            ctx.addIssue({
              code: 'custom',
              path: at('uses', kind, alias, 'ref'),
              message: `"${use.ref}" is not in appResources.${kind} (known: ${known})`,
            });
          }
        }
      }
    }
  });

export type EnvironmentInput = z.input<typeof environmentSchema>;
export type EnvironmentConfig = z.output<typeof environmentSchema>;
export type JobConfig = z.output<typeof jobSchema>;
export type JobAlarmsConfig = z.output<typeof jobAlarmsSchema>;
export type AppTableConfig = z.output<typeof appTableSchema>;
