// The outcome rules as types: how an apply failure is classified decides retry, defer, dead-letter or reject.

/** A failure worth retrying soon (network blip, 5xx, DynamoDB throttling): reported as a batch item failure. */
export class RetryableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'RetryableError';
  }
}

/**
 * The downstream asked us to slow down (429/503). Not a failure: the message is deferred and does not spend the
 * SQS receive budget. `retryAfterMs` is the downstream's own hint when it gave one.
 */
export class ThrottledError extends Error {
  constructor(message: string, public readonly retryAfterMs?: number, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ThrottledError';
  }
}

/** Retrying can never succeed (a permanent 4xx, a record in an impossible state): sent to the DLQ with its reason. */
export class PermanentError extends Error {
  constructor(message: string, public readonly detail: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(message, options);
    this.name = 'PermanentError';
  }
}
