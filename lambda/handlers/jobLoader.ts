// Picks the job plug-in by name (JOB_NAME) for both handlers: lambda/jobs/<name>/index.ts must export `job` (the
// contract is lambda/core/jobModule.ts).
import type { AnyJob } from '../core/job';
import { loadJob as loadJobWith, type JobModuleLoader } from '../core/jobModule';

export { JobLoadError, type JobModuleLoader } from '../core/jobModule';

// esbuild bundles every file this template literal can match (the `.ts` extension is what makes the pattern
// resolvable), so a new job folder is picked up with no change here.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const requireJobModule: JobModuleLoader = (name) => require(`../jobs/${name}/index.ts`);

/** @throws JobLoadError naming the job and what its folder must provide. */
export function loadJob(name: string, loadModule: JobModuleLoader = requireJobModule): AnyJob {
  return loadJobWith(name, loadModule);
}
