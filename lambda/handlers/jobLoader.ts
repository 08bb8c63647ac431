// Picks the job plug-in for both handlers: the job entry the stack bundled into this function (lib/paced-function.ts
// `jobEntry`), or outside a bundle lambda/jobs/<JOB_NAME>/index.ts; it must export `job` (the contract is
// lambda/core/jobModule.ts).
import { join } from 'node:path';
import type { AnyJob } from '../core/job';
import { loadJob as loadJobWith, type JobModuleLoader } from '../core/jobModule';

export { JobLoadError, type JobModuleLoader } from '../core/jobModule';

/**
 * Set by the stack's bundler (lib/paced-function.ts passes both as esbuild defines, with an alias of
 * `paced-jobs-job-entry` to the job's entry file): the bundle then holds that job alone. Undefined outside a bundle
 * (tests, tsx).
 */
declare const PACED_JOB_ENTRY: boolean | undefined;
/** The bundled entry, relative to the CDK app's folder, as the function's Metadata names it: for the error messages. */
declare const PACED_JOB_ENTRY_FILE: string | undefined;

const bundled = typeof PACED_JOB_ENTRY === 'boolean' && PACED_JOB_ENTRY;

// esbuild resolves every static require it sees, even in a branch the define makes dead, so the unbundled fallback is
// `module.require` of a computed path (esbuild leaves it alone) and only the bundled branch names the aliased module.
const requireJobModule: JobModuleLoader = (name) =>
  bundled
    ? // eslint-disable-next-line @typescript-eslint/no-require-imports
      require('paced-jobs-job-entry')
    : module.require(join(__dirname, '..', 'jobs', name, 'index.ts'));

/** Where the job's module comes from, for the loader's messages. */
function entryOf(name: string): string {
  return bundled && typeof PACED_JOB_ENTRY_FILE === 'string' ? PACED_JOB_ENTRY_FILE : `lambda/jobs/${name}/index.ts`;
}

/** @throws JobLoadError naming the job and what its entry must provide. */
export function loadJob(name: string, loadModule: JobModuleLoader = requireJobModule): AnyJob {
  return loadJobWith(name, loadModule, loadModule === requireJobModule ? entryOf(name) : undefined);
}
