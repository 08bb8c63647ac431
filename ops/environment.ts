// Operator CLI: what it knows about a deployed environment of this repository (`--env`) before any AWS call: its config
// (lib/config), so the region and account come from there, a bad --env or --job is refused at once, and credentials
// for the wrong account are refused before anything is read or changed. A team's stack (`--stack`) has no such config.
import { GetCallerIdentityCommand, STSClient } from '@aws-sdk/client-sts';
import type { EnvironmentConfig } from '../lib/config/schema';
import { OpsError, UsageError } from './errors';

/** The caller's identity, as STS GetCallerIdentity answers it. */
export interface CallerIdentity {
  account: string;
  /** The caller's ARN: an IAM user, or an assumed role's session (`arn:aws:sts::<account>:assumed-role/<role>/<session>`). */
  arn: string;
}

/** The credentials belong to another account than the environment's config pins. */
export class WrongAccountError extends OpsError {
  constructor(
    message: string,
    public readonly expectedAccount: string,
    public readonly callerAccount: string,
  ) {
    super(message);
    this.name = 'WrongAccountError';
  }
}

/**
 * The environment's validated config.
 * @throws UsageError for an environment the config does not have (listing those it has), or a config that is invalid.
 */
export function environmentConfig(name: string): EnvironmentConfig {
  // Loaded only for --env: it imports the repository's own environments (lib/config/environments.ts), which the
  // package does not ship.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { ConfigError, loadEnvironment } = require('../lib/config/load') as typeof import('../lib/config/load');
  try {
    return loadEnvironment(name);
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(`--env ${name}: ${error.message}`, { cause: error });
    throw error;
  }
}

/**
 * The region the environment's stack is in. A config that pins the account pins the region with it (bin/app.ts
 * deploys there), so that wins; otherwise the SDK's own region (AWS_REGION, the profile) when it has one, else the
 * config's region, so an operator without AWS_REGION still reaches the stack.
 */
export async function environmentRegion(
  config: EnvironmentConfig,
  sdkRegion: () => Promise<string | undefined> = defaultSdkRegion,
): Promise<string> {
  if (config.account) return config.region;
  return (await sdkRegion()) ?? config.region;
}

/** The SDK's default region chain (environment, shared config file); undefined when none is set. */
async function defaultSdkRegion(): Promise<string | undefined> {
  const client = new STSClient({});
  try {
    return await client.config.region();
  } catch {
    return undefined; // "Region is missing": the config's region applies
  } finally {
    client.destroy();
  }
}

/**
 * Who the credentials are; when the config pins the environment's account, refuses any other.
 * @throws WrongAccountError when the caller's account is not the environment's.
 */
export async function checkCallerAccount(
  environment: string,
  config: EnvironmentConfig,
  identity: () => Promise<CallerIdentity>,
): Promise<CallerIdentity> {
  const caller = await identity();
  if (config.account && caller.account !== config.account) {
    throw new WrongAccountError(
      `environment ${environment} is account ${config.account} (lib/config/environments.ts), but these credentials are account ` +
        `${caller.account} (${caller.arn}); use credentials for ${config.account} (for example AWS_PROFILE=<its profile>)`,
      config.account,
      caller.account,
    );
  }
  return caller;
}

/** STS GetCallerIdentity in `region`. */
export async function stsIdentity(
  region: string,
  credentials?: { accessKeyId: string; secretAccessKey: string },
  endpoint?: string,
): Promise<CallerIdentity> {
  const client = new STSClient({ region, ...(credentials ? { credentials } : {}), ...(endpoint ? { endpoint } : {}) });
  try {
    const answer = await client.send(new GetCallerIdentityCommand({}));
    return { account: answer.Account ?? '', arn: answer.Arn ?? '' };
  } finally {
    client.destroy();
  }
}

/**
 * The IAM principal an identity's calls are authorized as: an assumed role's session is its role, a user is itself.
 * A session's ARN drops the role's path; `role` says so, and the caller reads the role's full ARN (iam:GetRole).
 */
export function principalOf(callerArn: string): { arn: string; role?: string } {
  const assumed = /^arn:(aws[\w-]*):sts::(\d{12}):assumed-role\/([^/]+)\/.+$/.exec(callerArn);
  if (assumed) return { arn: `arn:${assumed[1]}:iam::${assumed[2]}:role/${assumed[3]}`, role: assumed[3] };
  return { arn: callerArn };
}
