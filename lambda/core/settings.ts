// Reads and validates the job's runtime settings (JOB_SETTINGS) once, so a bad deployment fails loudly at init.
import { en } from 'zod/locales';
import * as z from 'zod/mini';
import { EnvVar, type JobRuntimeSettings } from './constants';
import { PacedJobsError } from './errors';
import { describeIssues } from './issues';

// zod/mini leaves the messages to its caller; a bad JOB_SETTINGS is reported in zod's English, as classic zod words it
// (lambda/core/message.ts does the same).
if (!z.config().localeError) z.config(en());

// zod/mini's functional checks, spelt as the classic chain they replace (`.int()` is `z.int()` as a check there too).
const positiveInt = () => z.number().check(z.int(), z.positive());
const share = () => z.number().check(z.gt(0), z.lte(1));
const names = z.record(z.string(), z.string().check(z.minLength(1)));

export const jobRuntimeSettingsSchema = z.object({
  jobName: z.string().check(z.minLength(1)),
  pageSize: positiveInt(),
  maxPagesPerRun: positiveInt(),
  maxMessageBytes: positiveInt(),
  maxReceiveCount: z.optional(positiveInt()),
  businessDateOffsetDays: z.number().check(z.int()),
  timeZone: z.string().check(z.minLength(1)),
  queueRetentionSeconds: z.optional(positiveInt()),
  rateLimit: z.object({
    startsPerInterval: positiveInt(),
    intervalSeconds: positiveInt(),
    burst: positiveInt(),
    perKey: z.optional(
      z.object({
        field: z.string().check(z.minLength(1)),
        startsPerInterval: positiveInt(),
        intervalSeconds: positiveInt(),
        burst: positiveInt(),
        headroom: share(),
      }),
    ),
    // Read since backfill had a share; without it here zod dropped the deployed share and the default always applied.
    backfillShare: z.optional(share()),
  }),
  quota: z.optional(z.object({ starts: positiveInt(), headroom: share(), maxConcurrent: z.optional(positiveInt()) })),
  concurrency: positiveInt(),
  concurrencyPerKey: z.optional(z.object({ field: z.string().check(z.minLength(1)), maxConcurrent: positiveInt() })),
  admission: z.optional(
    z.object({
      horizonSeconds: positiveInt(),
      batchSize: positiveInt(),
      batchingWindowSeconds: z.optional(z.number().check(z.int(), z.gte(0))),
    }),
  ),
  slo: z.optional(z.object({ objective: z.number().check(z.gt(0), z.lt(1)), completeWithinMinutes: positiveInt() })),
  tables: names,
  buckets: names,
  secrets: names,
  pacing: z.optional(
    z.object({
      downstreamKey: z.optional(z.string().check(z.minLength(1))),
      maxDeferrals: z.optional(positiveInt()),
      maxDeferralAgeSeconds: z.optional(positiveInt()),
      shortWaitMs: z.optional(positiveInt()),
      safetyMarginMs: z.optional(positiveInt()),
      adaptiveRate: z.optional(z.boolean()),
      enabled: z.optional(z.boolean()),
    }),
  ),
  settings: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
}) satisfies z.ZodMiniType<JobRuntimeSettings>;

// zod drops a key its schema lacks, so an optional field of JobRuntimeSettings missing above would reach no function
// (backfillShare and concurrencyPerKey once did): every field must be named, at the top level and in rateLimit.
type Unread<T, S> = Exclude<keyof T, keyof S>;
const everyFieldRead: [
  Unread<JobRuntimeSettings, z.output<typeof jobRuntimeSettingsSchema>>,
  Unread<JobRuntimeSettings['rateLimit'], z.output<typeof jobRuntimeSettingsSchema>['rateLimit']>,
] extends [never, never]
  ? true
  : false = true;
void everyFieldRead;

/** A setting the job needs is missing or malformed (JobSettingsReader, JOB_SETTINGS): a deployment fault, not a record's. */
export class SettingsError extends PacedJobsError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SettingsError';
  }
}

/** @throws SettingsError naming the missing or bad variable. */
export function readSettings(env: NodeJS.ProcessEnv = process.env): JobRuntimeSettings {
  const raw = env[EnvVar.JOB_SETTINGS];
  if (!raw) throw new SettingsError(`${EnvVar.JOB_SETTINGS} is not set`);
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (error) {
    throw new SettingsError(`${EnvVar.JOB_SETTINGS} is not valid JSON`, { cause: error });
  }
  const result = jobRuntimeSettingsSchema.safeParse(json);
  if (!result.success) {
    throw new SettingsError(`${EnvVar.JOB_SETTINGS} is invalid: ${describeIssues(result.error).join('; ')}`);
  }
  return result.data;
}

/** @throws SettingsError when a required variable is missing. */
export function requireEnv(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name];
  if (!value) throw new SettingsError(`environment variable ${name} is not set`);
  return value;
}
