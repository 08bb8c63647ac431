// Operator CLI: a job's runtime settings as its deployed producer holds them (JOB_SETTINGS, validated as the function
// validates it), for the commands that need what config decided (the SLO, the schedule's business-date offset).
import { GetFunctionConfigurationCommand } from '@aws-sdk/client-lambda';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import { EnvVar } from '../lambda/core/constants';
import { readSettings } from '../lambda/core/settings';
import type { CommandContext } from './context';

/**
 * Reads the producer's configuration (GetFunctionConfiguration) and parses its JOB_SETTINGS.
 * @throws SettingsError when the variable is missing or invalid; the SDK's error when the function cannot be read.
 */
export async function producerSettings(ctx: CommandContext, producerFunctionName: string): Promise<JobRuntimeSettings> {
  const config = await ctx.clients.lambda.send(new GetFunctionConfigurationCommand({ FunctionName: producerFunctionName }));
  return readSettings({ [EnvVar.JOB_SETTINGS]: config.Environment?.Variables?.[EnvVar.JOB_SETTINGS] });
}
