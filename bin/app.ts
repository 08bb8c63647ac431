// Entry point of `cdk synth|deploy -c env=<name>`: picks and validates the environment, builds its stack, runs cdk-nag.
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import { ConfigError, loadEnvironment } from '../lib/config/load';
import { stackName } from '../lib/outputs';
import { InvalidPropsError } from '../lib/props-error';
import { PacedJobsStack } from '../lib/stack';

/** Builds the app for one environment. @throws ConfigError when the environment is missing, unknown or invalid. */
export function buildApp(app: App = new App()): { app: App; stack: PacedJobsStack } {
  const environmentName = app.node.tryGetContext('env') as string | undefined;
  const config = loadEnvironment(environmentName);
  const name = environmentName as string;
  const stack = new PacedJobsStack(app, stackName(name), {
    environmentName: name,
    config,
    // Environment-agnostic unless the config pins an account: synthesis never needs credentials or lookups.
    env: config.account ? { account: config.account, region: config.region } : undefined,
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app), new ServerlessChecks(app));
  return { app, stack };
}

if (require.main === module) {
  try {
    buildApp().app.synth();
  } catch (error) {
    // Both are the operator's to fix in config: print the readable message, not a stack trace.
    if (error instanceof ConfigError || error instanceof InvalidPropsError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}
