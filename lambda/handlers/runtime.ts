// What both handlers need from the environment the stack sets: the validated settings and the loaded job.
import { EnvVar, type JobRuntimeSettings } from '../core/constants';
import type { AnyJob } from '../core/job';
import { readSettings, requireEnv, SettingsError } from '../core/settings';
import { loadJob, type JobModuleLoader } from './jobLoader';

export interface JobRuntime {
  settings: JobRuntimeSettings;
  job: AnyJob;
  /** Built once per container by the job's createDeps. */
  jobDeps: unknown;
}

/** @throws SettingsError or JobLoadError, so a bad deployment fails at its first invocation with a clear reason. */
export function loadJobRuntime(env: NodeJS.ProcessEnv = process.env, loadModule?: JobModuleLoader): JobRuntime {
  const jobName = requireEnv(EnvVar.JOB_NAME, env);
  const settings = readSettings(env);
  if (settings.jobName !== jobName) {
    throw new SettingsError(`${EnvVar.JOB_SETTINGS} is for job "${settings.jobName}" but ${EnvVar.JOB_NAME} is "${jobName}"`);
  }
  const job = loadJob(jobName, loadModule);
  return { settings, job, jobDeps: job.createDeps(settings) };
}

/** @throws SettingsError unless the variable holds a positive integer. */
export function requirePositiveInt(name: string, env: NodeJS.ProcessEnv = process.env): number {
  const raw = requireEnv(name, env);
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new SettingsError(`environment variable ${name} must be a positive integer, got "${raw}"`);
  return value;
}

/**
 * Keys in a job's plain `settings` that the consumer reads for pacing, none required:
 * - `downstreamKey` (string): the limiter item; jobs calling one provider share it, and so share its allowance.
 *   @default the job name
 * - `maxDeferrals` (integer): deferrals before the operation is dead-lettered. @default 100
 * - `maxDeferralAgeSeconds` (integer): age since first enqueue past which it is dead-lettered. @default none
 * - `shortWaitMs` (integer): the longest wait for a rate-limit slot spent inside the function. @default 10000
 * - `adaptiveRate` (boolean): lower the shared rate on 429s and recover it up to the allowance. @default true
 * - `pacing` (boolean): false runs the consumer without the shared limiter (no limiter reads or writes): only the
 *   concurrency cap bounds the downstream. For downstreams with no start quota worth pacing (the job's own bucket or
 *   table), and for measuring the pipeline's own cost. @default true
 */
export const PacingSettingKey = {
  downstreamKey: 'downstreamKey',
  maxDeferrals: 'maxDeferrals',
  maxDeferralAgeSeconds: 'maxDeferralAgeSeconds',
  shortWaitMs: 'shortWaitMs',
  adaptiveRate: 'adaptiveRate',
  pacing: 'pacing',
} as const;

export interface PacingSettings {
  /** The limiter item this job's starts count against. */
  limiterKey: string;
  /** What the shared limiter enforces: the allowance after headroom, the configured burst, and the jitter margin. */
  limits: { startsPerInterval: number; intervalMs: number; burst: number; safetyMarginMs: number };
  /** The limiter's lead: roughly a DynamoDB round trip, so a slot on an idle key is not late on arrival. */
  leadMs: number;
  /** How late a start may be before its slot is given up; below safetyMarginMs, the jitter the window absorbs. */
  lateToleranceMs: number;
  shortWaitMs: number;
  maxDeferrals?: number;
  maxDeferralAgeSeconds?: number;
  adaptiveRate: boolean;
  /** False: no shared limiter, only the concurrency cap (the `pacing` setting). */
  enabled: boolean;
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

/** @throws SettingsError naming the pacing setting that has the wrong type */
export function pacingSettings(settings: JobRuntimeSettings): PacingSettings {
  const plain = settings.settings;
  const problems: string[] = [];
  const positiveInt = (key: string): number | undefined => {
    const value = plain[key];
    if (value === undefined) return undefined;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
      problems.push(`settings.${key} must be a positive integer, got ${JSON.stringify(value)}`);
      return undefined;
    }
    return value;
  };
  const downstreamKey = plain[PacingSettingKey.downstreamKey];
  if (downstreamKey !== undefined && (typeof downstreamKey !== 'string' || downstreamKey === '')) {
    problems.push(`settings.${PacingSettingKey.downstreamKey} must be a non-empty string, got ${JSON.stringify(downstreamKey)}`);
  }
  const maxDeferrals = positiveInt(PacingSettingKey.maxDeferrals);
  const maxDeferralAgeSeconds = positiveInt(PacingSettingKey.maxDeferralAgeSeconds);
  const shortWaitMs = positiveInt(PacingSettingKey.shortWaitMs);
  const adaptiveRate = plain[PacingSettingKey.adaptiveRate];
  if (adaptiveRate !== undefined && typeof adaptiveRate !== 'boolean') {
    problems.push(`settings.${PacingSettingKey.adaptiveRate} must be true or false, got ${JSON.stringify(adaptiveRate)}`);
  }
  const enabled = plain[PacingSettingKey.pacing];
  if (enabled !== undefined && typeof enabled !== 'boolean') {
    problems.push(`settings.${PacingSettingKey.pacing} must be true or false, got ${JSON.stringify(enabled)}`);
  }
  if (problems.length > 0) throw new SettingsError(`${EnvVar.JOB_SETTINGS} is invalid for pacing: ${problems.join('; ')}`);
  const intervalMs = settings.rateLimit.intervalSeconds * 1000;
  const margin = safetyMarginMs(intervalMs);
  return {
    limiterKey: typeof downstreamKey === 'string' ? downstreamKey : settings.jobName,
    limits: { startsPerInterval: settings.rateLimit.startsPerInterval, intervalMs, burst: settings.rateLimit.burst, safetyMarginMs: margin },
    leadMs: LIMITER_LEAD_MS,
    lateToleranceMs: Math.floor(margin / 2),
    shortWaitMs: shortWaitMs ?? 10_000,
    maxDeferrals,
    maxDeferralAgeSeconds,
    adaptiveRate: adaptiveRate !== false,
    enabled: enabled !== false,
  };
}
