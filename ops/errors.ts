// Operator CLI: the one error hierarchy every command throws, so the entry point can print a clear message and exit code.

/** Base of every error the operator CLI raises on purpose; anything else is a bug and is printed with its stack. */
export class OpsError extends Error {
  /** The process exit code for this error. @default 1 */
  public readonly exitCode: number;

  constructor(message: string, options?: ErrorOptions & { exitCode?: number }) {
    super(message, options);
    this.name = 'OpsError';
    this.exitCode = options?.exitCode ?? 1;
  }
}

/** A flag or argument is invalid (a bad date, a range too long, an unknown job). Exit code 2, like commander's. */
export class UsageError extends OpsError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, { ...options, exitCode: 2 });
    this.name = 'UsageError';
  }
}

/** The stack's resources could not be found (no stack, no endpoints file, an output missing). */
export class ResourceDiscoveryError extends OpsError {
  constructor(
    message: string,
    public readonly source: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ResourceDiscoveryError';
  }
}

/** A change needs confirmation and none was given (declined, or no TTY to ask on and no --yes). */
export class ConfirmationError extends OpsError {
  constructor(
    message: string,
    public readonly action: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ConfirmationError';
  }
}

/** An event source mapping did not reach the requested state in time. */
export class MappingStateError extends OpsError {
  constructor(
    message: string,
    public readonly uuid: string,
    public readonly lastState: string | undefined,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'MappingStateError';
  }
}

/** A producer invocation of a catch-up failed; the dates after it were not started. */
export class ProducerInvocationError extends OpsError {
  constructor(
    message: string,
    public readonly job: string,
    public readonly businessDate: string,
    public readonly batchId: string,
    /** The runs that did publish before this one failed: an operator resumes the catch-up after the last of them. */
    public readonly completed: unknown[],
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ProducerInvocationError';
  }
}

/** A batch is not in a state the command can act on (absent from the ledger, or its admission is not running). */
export class BatchStateError extends OpsError {
  constructor(
    message: string,
    public readonly job: string,
    public readonly batchId: string,
    /** The batch's admission as the ledger holds it; undefined when the batch or its admission state is absent. */
    public readonly admission: string | undefined,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'BatchStateError';
  }
}

/** A per-key override cannot be set: the job already keeps as many overrides as its one item may hold. */
export class KeyLimitsError extends OpsError {
  constructor(
    message: string,
    public readonly job: string,
    public readonly key: string,
    /** How many overrides the job keeps. */
    public readonly overrides: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'KeyLimitsError';
  }
}
