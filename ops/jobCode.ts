// Operator CLI: a job's own code, for the one command that runs part of it: preflight runs its discovery, read-only,
// to see that two discoveries of a date agree. The code is the module the stack's template names as the job's entry
// (its functions' `paced-jobs:job-entry` Metadata, relative to the CDK app's folder, where ops runs); a stack
// synthesized before that Metadata existed is this repository's, whose jobs are lambda/jobs/<name>/index.ts. The
// contract is checked as the handlers check it (lambda/core/jobModule.ts).
import { resolve } from 'node:path';
import type { AnyJob } from '../lambda/core/job';
import { loadJob } from '../lambda/core/jobModule';

/**
 * The job `name`, from `entry` (relative to `appDir`) when the template names one.
 * @throws JobLoadError when the module does not provide a valid `job`.
 */
export function jobCode(name: string, entry?: string, appDir: string = process.cwd()): AnyJob {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  if (entry !== undefined) return loadJob(name, () => require(resolve(appDir, entry)));
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return loadJob(name, (n) => require(`../lambda/jobs/${n}/index.ts`));
}
