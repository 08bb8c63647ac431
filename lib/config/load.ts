// Picks and validates one environment's configuration before anything is built; every problem in one message.
import { describeIssues } from '../../lambda/core/issues';
import { type EnvironmentConfig, type EnvironmentInput, environmentSchema } from './schema';
import { environments } from './environments';

export class ConfigError extends Error {
  public readonly problems: string[];
  constructor(message: string, problems: string[] = [], options?: ErrorOptions) {
    super(message, options);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/**
 * Validates a raw environment configuration.
 * @throws ConfigError naming every bad key.
 */
export function parseEnvironment(name: string, input: unknown): EnvironmentConfig {
  const result = environmentSchema.safeParse(input);
  if (!result.success) {
    const problems = describeIssues(result.error);
    throw new ConfigError(
      `Invalid configuration for environment "${name}":\n${problems.map((p) => `  - ${p}`).join('\n')}`,
      problems,
    );
  }
  return result.data;
}

/**
 * Chooses an environment by name and validates it.
 * @throws ConfigError when the name is missing or unknown, or the configuration is invalid.
 */
export function loadEnvironment(
  name: string | undefined,
  available: Record<string, EnvironmentInput> = environments,
): EnvironmentConfig {
  const valid = Object.keys(available).join(', ');
  if (name === undefined || name === '') {
    throw new ConfigError(`No environment chosen. Pass -c env=<name>; valid environments: ${valid}.`);
  }
  if (!Object.hasOwn(available, name)) {
    throw new ConfigError(`Unknown environment "${name}". Valid environments: ${valid}.`);
  }
  return parseEnvironment(name, available[name]);
}
