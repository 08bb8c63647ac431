// Operator CLI: a job's runtime settings as its deployed functions hold them (JOB_SETTINGS, validated as the function
// validates it), for the commands that need what config decided (the SLO, the schedule's business-date offset, the
// pacing preflight checks).
import { GetFunctionConfigurationCommand, type FunctionConfiguration } from '@aws-sdk/client-lambda';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import { EnvVar } from '../lambda/core/constants';
import { readSettings } from '../lambda/core/settings';
import type { CommandContext } from './context';

/**
 * Reads a function's configuration (GetFunctionConfiguration) and parses its JOB_SETTINGS.
 * @throws SettingsError when the variable is missing or invalid; the SDK's error when the function cannot be read.
 */
export async function functionSettings(
  ctx: CommandContext,
  functionName: string,
): Promise<{ configuration: FunctionConfiguration; settings: JobRuntimeSettings }> {
  const configuration = await ctx.clients.lambda.send(
    new GetFunctionConfigurationCommand({ FunctionName: functionName }),
  );
  return {
    configuration,
    settings: readSettings({ [EnvVar.JOB_SETTINGS]: configuration.Environment?.Variables?.[EnvVar.JOB_SETTINGS] }),
  };
}

/** The producer's JOB_SETTINGS (functionSettings). */
export async function producerSettings(ctx: CommandContext, producerFunctionName: string): Promise<JobRuntimeSettings> {
  return (await functionSettings(ctx, producerFunctionName)).settings;
}
