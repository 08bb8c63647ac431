// The outcome rules as types: how an apply failure is classified decides retry, defer, dead-letter or reject.

/**
 * The base of every error the engine throws (and of a job's own, through the job API), so a caller tells the engine's
 * failures from anything else with one `instanceof`. `name` is the subclass's; each subclass still sets it itself,
 * because a minified bundle renames classes. `options.cause` keeps the underlying error.
 */
export class PacedJobsError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A failure worth retrying soon (network blip, 5xx, DynamoDB throttling): reported as a batch item failure. */
export class RetryableError extends PacedJobsError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'RetryableError';
  }
}

/**
 * The downstream asked us to slow down (429/503). Not a failure: the message is deferred and does not spend the
 * SQS receive budget. `retryAfterMs` is the downstream's own hint when it gave one.
 */
export class ThrottledError extends PacedJobsError {
  constructor(
    message: string,
    public readonly retryAfterMs?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ThrottledError';
  }
}

/** Retrying can never succeed (a permanent 4xx, a record in an impossible state): sent to the DLQ with its reason. */
export class PermanentError extends PacedJobsError {
  constructor(
    message: string,
    public readonly detail: Record<string, unknown> = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'PermanentError';
  }
}
