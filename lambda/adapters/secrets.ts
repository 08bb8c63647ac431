// The secrets edge: reads a secret's value through Powertools Parameters (cached), for apply-time use only.
import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import { PacedJobsError } from '../core/errors';
import { sanitizedCause } from '../core/privacy';

/** How long a fetched secret stays cached in the container before it is read again. @default 300 */
export const DEFAULT_SECRET_MAX_AGE_SECONDS = 300;

/** Shortest API key accepted: anything shorter is a placeholder or a cut-off value, not a credential. */
export const MIN_API_KEY_CHARS = 8;
/** Longest API key accepted: well above any provider's key or token, below what HTTP servers take in one header. */
export const MAX_API_KEY_CHARS = 4096;

/** Reads the current value of one secret; the value must never be logged or put into an error message. */
export type SecretGetter = () => Promise<string>;

/** A secret could not be read, or its value is not usable (never quoted in the message); `secretId` names it. */
export class SecretError extends PacedJobsError {
  constructor(
    message: string,
    public readonly secretId: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'SecretError';
  }
}

/** How a secret getter caches the value it read. */
export interface SecretGetterOptions {
  /** @default DEFAULT_SECRET_MAX_AGE_SECONDS */
  maxAgeSeconds?: number;
}

/**
 * A getter for a string secret by name or ARN. Nothing is fetched until it is first called, so a container can start
 * (and discovery can run) without Secrets Manager access; Powertools caches the value for `maxAgeSeconds`, so a rotated
 * key is picked up without a redeploy.
 */
export function secretStringGetter(secretId: string, options: SecretGetterOptions = {}): SecretGetter {
  const maxAge = options.maxAgeSeconds ?? DEFAULT_SECRET_MAX_AGE_SECONDS;
  return async () => {
    let value: unknown;
    try {
      value = await getSecret(secretId, { maxAge });
    } catch (error) {
      throw new SecretError(`could not read secret "${secretId}"`, secretId, { cause: readFailure(error) });
    }
    if (typeof value !== 'string' || value.length === 0) {
      throw new SecretError(`secret "${secretId}" holds no string value`, secretId);
    }
    return value;
  };
}

/**
 * A getter for an API key sent as a header value: the secret string, refused unless it is 8 to 4096 printable ASCII
 * characters without whitespace. Checked on every read, so a rotated value is checked too, because a key
 * holding a newline makes the HTTP client throw an error that quotes the header, key and all; the refusal names the
 * secret and the problem, never the value.
 */
export function apiKeyGetter(secretId: string, options: SecretGetterOptions = {}): SecretGetter {
  const read = secretStringGetter(secretId, options);
  return async () => {
    const value = await read();
    const problem = apiKeyProblem(value);
    if (problem !== undefined)
      throw new SecretError(`secret "${secretId}" is not a usable API key: ${problem}`, secretId);
    return value;
  };
}

/** What makes a value unusable as an API key, in words that do not repeat it; undefined when it is usable. */
function apiKeyProblem(value: string): string | undefined {
  if (/\s/.test(value)) return 'it holds whitespace (a line break or a space, often a trailing newline)';
  if (/[^\x21-\x7e]/.test(value)) return 'it holds a character that is not printable ASCII';
  if (value.length < MIN_API_KEY_CHARS) return `it is shorter than ${MIN_API_KEY_CHARS} characters`;
  if (value.length > MAX_API_KEY_CHARS) return `it is longer than ${MAX_API_KEY_CHARS} characters`;
  return undefined;
}

/**
 * The cause kept for a failed read. Secrets Manager's own refusal (an error with the SDK's `$fault`: not found, access
 * denied) is about the request and keeps its message. Anything else may quote the response, whose body is the value:
 * a body the SDK cannot parse comes back as a SyntaxError that quotes it, which Powertools copies into its own error's
 * message; of those only the type is kept.
 */
function readFailure(error: unknown): Error {
  let innermost = error as { cause?: unknown; $fault?: unknown; message?: unknown } | null;
  // Powertools wraps the SDK's error once; a few levels covers any wrapping without trusting a cycle to end.
  for (let depth = 0; depth < 4 && innermost?.cause !== undefined && innermost.cause !== null; depth++) {
    innermost = innermost.cause as typeof innermost;
  }
  const fromService = typeof innermost?.$fault === 'string' && typeof innermost.message === 'string';
  return sanitizedCause(
    innermost,
    fromService ? String(innermost?.message) : 'message withheld: it may quote the response, which holds the value',
  );
}
