// Operator CLI: what every command receives: the discovered stack, its clients and the terminal.
import type { OpsClients } from './clients';
import { UsageError } from './errors';
import { type ChangeTarget, confirm, type OpsIo } from './io';
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
  /** The environment's name, which a protected environment needs as well as --yes. */
  confirm?: string;
}

/** Where a change of this context lands; an account the config does not pin is asked of STS now. */
export async function changeTarget(resources: StackResources): Promise<ChangeTarget> {
  const account = resources.accountId ?? (await resources.callerAccount?.());
  return {
    stackName: resources.stackName,
    ...(resources.environment !== undefined ? { environment: resources.environment } : {}),
    local: resources.source === 'local',
    ...(account ? { account } : {}),
    ...(resources.region ? { region: resources.region } : {}),
    // The local stack is never protected, whatever environment it was synthesized from.
    protected: resources.source !== 'local' && resources.protected === true,
  };
}

/** Asks before a change (io.ts confirm), naming the stack, account and region it lands on. */
export async function confirmChange(ctx: CommandContext, action: string, options: ChangeOptions): Promise<void> {
  await confirm(ctx.io, {
    action,
    yes: Boolean(options.yes),
    confirm: options.confirm,
    target: await changeTarget(ctx.resources),
  });
}

/**
 * The job `--job` names, or every job when absent.
 * @throws UsageError for a job the stack does not hold.
 */
export function selectJobs(resources: StackResources, job?: string): JobResources[] {
  if (job === undefined) return resources.jobs;
  const found = resources.jobs.find((j) => j.job === job);
  if (!found)
    throw new UsageError(
      `unknown job "${job}"; ${resources.stackName} has: ${resources.jobs.map((j) => j.job).join(', ')}`,
    );
  return [found];
}
