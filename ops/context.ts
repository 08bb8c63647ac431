// Operator CLI: what every command receives: the discovered stack, its clients and the terminal.
import type { OpsClients } from './clients';
import { UsageError } from './errors';
import type { OpsIo } from './io';
import type { JobResources, StackResources } from './resources';

export interface CommandContext {
  resources: StackResources;
  clients: OpsClients;
  io: OpsIo;
}

/** Options of every command that changes something. */
export interface ChangeOptions {
  /** Change without asking. @default false */
  yes?: boolean;
  /** Print what would change and change nothing. @default false */
  dryRun?: boolean;
}

/**
 * The job `--job` names, or every job when absent.
 * @throws UsageError for a job the stack does not hold.
 */
export function selectJobs(resources: StackResources, job?: string): JobResources[] {
  if (job === undefined) return resources.jobs;
  const found = resources.jobs.find((j) => j.job === job);
  if (!found) throw new UsageError(`unknown job "${job}"; ${resources.stackName} has: ${resources.jobs.map((j) => j.job).join(', ')}`);
  return [found];
}
