// Picks the job plug-in by name (JOB_NAME) for both handlers: lambda/jobs/<name>/index.ts must export `job`.
import type { AnyJob } from '../core/job';

export class JobLoadError extends Error {
  constructor(message: string, public readonly jobName: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'JobLoadError';
  }
}

/** Returns the module of one job folder; injectable so tests can load fixtures instead. */
export type JobModuleLoader = (name: string) => unknown;

// esbuild bundles every file this template literal can match (the `.ts` extension is what makes the pattern
// resolvable), so a new job folder is picked up with no change here.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const requireJobModule: JobModuleLoader = (name) => require(`../jobs/${name}/index.ts`);

const JOB_NAME = /^[a-z][a-z0-9-]{1,30}[a-z0-9]$/;

/** @throws JobLoadError naming the job and what its folder must provide. */
export function loadJob(name: string, loadModule: JobModuleLoader = requireJobModule): AnyJob {
  const contract = `lambda/jobs/${name}/index.ts must export \`job\``;
  if (!JOB_NAME.test(name)) {
    throw new JobLoadError(`invalid job name "${name}": use kebab-case (a-z, 0-9, -), 3 to 32 characters`, name);
  }
  let mod: unknown;
  try {
    mod = loadModule(name);
  } catch (error) {
    throw new JobLoadError(`cannot load job "${name}": ${contract} (${(error as Error).message})`, name, { cause: error });
  }
  const job = (mod as { job?: Partial<AnyJob> } | undefined)?.job;
  const missing = job ? (['createDeps', 'discover', 'apply'] as const).filter((k) => typeof job[k] !== 'function') : [];
  if (!job || missing.length > 0 || typeof job.resourceSchema?.safeParse !== 'function') {
    const what = !job ? 'no `job` export' : `\`job\` lacks ${[...missing, ...(typeof job.resourceSchema?.safeParse !== 'function' ? ['resourceSchema'] : [])].join(', ')}`;
    throw new JobLoadError(`cannot load job "${name}": ${contract} (found ${what})`, name);
  }
  if (job.name !== name) {
    throw new JobLoadError(`cannot load job "${name}": the \`job\` exported by lambda/jobs/${name}/index.ts is named "${job.name}"`, name);
  }
  return job as AnyJob;
}
