// Operator CLI: a job's own code (lambda/jobs/<name>/index.ts), for the one command that runs part of it: preflight
// runs its discovery, read-only, to see that two discoveries of a date agree. The contract is checked as the handlers
// check it (lambda/core/jobModule.ts).
import type { AnyJob } from '../lambda/core/job';
import { loadJob } from '../lambda/core/jobModule';

/** @throws JobLoadError when the job's folder does not provide a valid `job`. */
export function jobCode(name: string): AnyJob {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return loadJob(name, (n) => require(`../lambda/jobs/${n}/index.ts`));
}
