// Picks the job plug-in by name (JOB_NAME) for both handlers: lambda/jobs/<name>/index.ts must export `job` (the
// contract is lambda/core/jobModule.ts).
import type { AnyJob } from '../core/job';
import { loadJob as loadJobWith, type JobModuleLoader } from '../core/jobModule';

export { JobLoadError, type JobModuleLoader } from '../core/jobModule';

/**
 * The function's own job, set by the stack's bundler (lib/paced-function.ts passes it as an esbuild define): the
 * template below then names one folder, and the bundle holds that job alone. Undefined outside a bundle (tests, tsx).
 */
declare const PACED_JOB_NAME: string | undefined;

// Without the define, esbuild bundles every file this template literal can match (the `.ts` extension is what makes
// the pattern resolvable), so a new job folder is picked up with no change here.
const requireJobModule: JobModuleLoader = (name) =>
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  require(`../jobs/${typeof PACED_JOB_NAME === 'string' ? PACED_JOB_NAME : name}/index.ts`);

/** @throws JobLoadError naming the job and what its folder must provide. */
export function loadJob(name: string, loadModule: JobModuleLoader = requireJobModule): AnyJob {
  return loadJobWith(name, loadModule);
}
