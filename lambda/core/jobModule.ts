// A job plug-in's contract, checked when it is loaded: its entry (lambda/jobs/<name>/index.ts in this repository)
// must export a `job` named <name> with createDeps, discover, apply and a resourceSchema. The handlers load it
// (lambda/handlers/jobLoader.ts), and so does the operator CLI (its preflight runs a job's discovery).
import { PacedJobsError } from './errors';
import type { AnyJob } from './job';

export class JobLoadError extends PacedJobsError {
  constructor(
    message: string,
    public readonly jobName: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'JobLoadError';
  }
}

/** Returns the module of one job folder; injectable so tests can load fixtures instead. */
export type JobModuleLoader = (name: string) => unknown;

const JOB_NAME = /^[a-z][a-z0-9-]{1,30}[a-z0-9]$/;

/**
 * The job a module loader returns for `name`, checked against the contract; `entry` names the module's file in the
 * messages (a bundled job's entry, as its function's Metadata names it). @default `lambda/jobs/<name>/index.ts`
 * @throws JobLoadError naming the job and what its entry must provide.
 */
export function loadJob(name: string, loadModule: JobModuleLoader, entry = `lambda/jobs/${name}/index.ts`): AnyJob {
  const contract = `${entry} must export \`job\``;
  if (!JOB_NAME.test(name)) {
    throw new JobLoadError(`invalid job name "${name}": use kebab-case (a-z, 0-9, -), 3 to 32 characters`, name);
  }
  let mod: unknown;
  try {
    mod = loadModule(name);
  } catch (error) {
    throw new JobLoadError(`cannot load job "${name}": ${contract} (${(error as Error).message})`, name, {
      cause: error,
    });
  }
  const job = (mod as { job?: Partial<AnyJob> } | undefined)?.job;
  const missing = job ? (['createDeps', 'discover', 'apply'] as const).filter((k) => typeof job[k] !== 'function') : [];
  if (!job || missing.length > 0 || typeof job.resourceSchema?.safeParse !== 'function') {
    const what = !job
      ? 'no `job` export'
      : `\`job\` lacks ${[...missing, ...(typeof job.resourceSchema?.safeParse !== 'function' ? ['resourceSchema'] : [])].join(', ')}`;
    throw new JobLoadError(`cannot load job "${name}": ${contract} (found ${what})`, name);
  }
  if (job.name !== name) {
    throw new JobLoadError(`cannot load job "${name}": the \`job\` exported by ${entry} is named "${job.name}"`, name);
  }
  return job as AnyJob;
}
