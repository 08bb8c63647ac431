// Construct-level validation: every construct in lib/ checks its props before creating anything and fails once, naming every problem.

/** A construct was given props it cannot build from; `problems` lists each one, `construct` names the construct path. */
export class InvalidPropsError extends Error {
  constructor(
    public readonly construct: string,
    public readonly problems: string[],
    options?: ErrorOptions,
  ) {
    super(`Invalid props for ${construct}:\n${problems.map((p) => `  - ${p}`).join('\n')}`, options);
    this.name = 'InvalidPropsError';
  }
}

/** Throws InvalidPropsError when `problems` is not empty. */
export function assertNoProblems(construct: string, problems: string[]): void {
  if (problems.length > 0) throw new InvalidPropsError(construct, problems);
}
