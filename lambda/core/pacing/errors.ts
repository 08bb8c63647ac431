// Pacing's one error type: a rate, window, burst or clock value that the math cannot honour (a programming or config error).
import { PacedJobsError } from '../errors';

/** Thrown before any decision is made, naming every bad parameter, so a wrong allowance can never pace silently. */
export class PacingConfigError extends PacedJobsError {
  constructor(
    message: string,
    public readonly problems: string[] = [],
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'PacingConfigError';
  }
}

/** Collects problems and throws them in one message, as config validation does elsewhere. */
export function assertNoProblems(what: string, problems: string[]): void {
  if (problems.length > 0) {
    throw new PacingConfigError(`invalid ${what}: ${problems.join('; ')}`, problems);
  }
}
