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
    throw new SettingsError(
      `${EnvVar.JOB_SETTINGS} is for job "${settings.jobName}" but ${EnvVar.JOB_NAME} is "${jobName}"`,
    );
  }
  const job = loadJob(jobName, loadModule);
  return { settings, job, jobDeps: job.createDeps(settings) };
}

/** @throws SettingsError unless the variable holds a positive integer. */
export function requirePositiveInt(name: string, env: NodeJS.ProcessEnv = process.env): number {
  const raw = requireEnv(name, env);
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0)
    throw new SettingsError(`environment variable ${name} must be a positive integer, got "${raw}"`);
  return value;
}
