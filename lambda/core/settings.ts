// Reads and validates the job's runtime settings (JOB_SETTINGS) once, so a bad deployment fails loudly at init.
import * as z from 'zod';
import { EnvVar, JobRuntimeSettings } from './constants';

const names = z.record(z.string(), z.string().min(1));

export const jobRuntimeSettingsSchema = z.object({
  jobName: z.string().min(1),
  pageSize: z.number().int().positive(),
  maxPagesPerRun: z.number().int().positive(),
  maxMessageBytes: z.number().int().positive(),
  maxReceiveCount: z.number().int().positive().optional(),
  businessDateOffsetDays: z.number().int(),
  timeZone: z.string().min(1),
  rateLimit: z.object({
    startsPerInterval: z.number().int().positive(),
    intervalSeconds: z.number().int().positive(),
    burst: z.number().int().positive(),
    perKey: z
      .object({
        field: z.string().min(1),
        startsPerInterval: z.number().int().positive(),
        intervalSeconds: z.number().int().positive(),
        burst: z.number().int().positive(),
        headroom: z.number().gt(0).max(1),
      })
      .optional(),
  }),
  quota: z.object({ starts: z.number().int().positive(), headroom: z.number().gt(0).max(1), maxConcurrent: z.number().int().positive().optional() }).optional(),
  concurrency: z.number().int().positive(),
  admission: z
    .object({ horizonSeconds: z.number().int().positive(), batchSize: z.number().int().positive(), batchingWindowSeconds: z.number().int().min(0).optional() })
    .optional(),
  slo: z.object({ objective: z.number().gt(0).lt(1), completeWithinMinutes: z.number().int().positive() }).optional(),
  tables: names,
  buckets: names,
  secrets: names,
  settings: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
}) satisfies z.ZodType<JobRuntimeSettings>;

export class SettingsError extends Error {
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
    throw new SettingsError(
      `${EnvVar.JOB_SETTINGS} is invalid: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  return result.data;
}

/** @throws SettingsError when a required variable is missing. */
export function requireEnv(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name];
  if (!value) throw new SettingsError(`environment variable ${name} is not set`);
  return value;
}
