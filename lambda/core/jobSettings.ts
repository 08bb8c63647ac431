// A job's createDeps reads the names and values it needs from its runtime settings here, failing once with every gap.
import type { JobRuntimeSettings } from './constants';
import { SettingsError } from './settings';

type Kind = 'tables' | 'buckets' | 'secrets';

/**
 * Collects what a job needs from its settings; `done()` throws one SettingsError naming every missing or bad entry,
 * so a deployment with two gaps is fixed in one round, not two. Until then the getters return placeholders.
 */
export class JobSettingsReader {
  private readonly problems: string[] = [];

  constructor(private readonly settings: JobRuntimeSettings) {}

  /** The table, bucket or secret name under `alias`. */
  name(kind: Kind, alias: string): string {
    const value = this.settings[kind][alias];
    if (typeof value !== 'string' || value.length === 0) {
      const known = Object.keys(this.settings[kind]).join(', ') || 'none';
      this.problems.push(`${kind}.${alias} is missing (it has: ${known})`);
      return '';
    }
    return value;
  }

  string(key: string): string {
    const value = this.settings.settings[key];
    if (typeof value !== 'string' || value.length === 0) {
      this.problems.push(`settings.${key} must be a non-empty string (got ${describe(value)})`);
      return '';
    }
    return value;
  }

  /** An integer setting within bounds; `fallback` applies only when the key is absent. */
  integer(key: string, bounds: { min: number; max: number; fallback?: number }): number {
    const value = this.settings.settings[key] ?? bounds.fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < bounds.min || value > bounds.max) {
      this.problems.push(
        `settings.${key} must be an integer from ${bounds.min} to ${bounds.max} (got ${describe(value)})`,
      );
      return bounds.min;
    }
    return value;
  }

  /** @throws SettingsError listing every problem found by the getters above. */
  done(): void {
    if (this.problems.length > 0) {
      throw new SettingsError(`${this.settings.jobName}: job settings are incomplete: ${this.problems.join('; ')}`);
    }
  }
}

const describe = (value: unknown): string => (value === undefined ? 'nothing' : JSON.stringify(value));
