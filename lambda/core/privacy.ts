// What the pipeline keeps after an operation (idempotency results, log lines, DLQ reasons, the ledger) names personal
// data by a hash and secrets not at all: the message carries a value to the one apply that needs it, nothing longer.
import { createHash } from 'node:crypto';

/** Hex digits of SHA-256 a personal-data hash keeps: 64 bits, enough to tell one value's records from another's. */
export const PERSONAL_HASH_HEX_CHARS = 16;

/**
 * `sha256:<first 16 hex digits>` of a value that may identify a person (an object key often holds a user's name or
 * file name). An operator who holds the value finds its records by hashing it the same way
 * (`printf %s "$KEY" | sha256sum | cut -c1-16`); the records alone do not give the value back.
 */
export function personalDataHash(value: string): string {
  return `sha256:${createHash('sha256').update(value, 'utf8').digest('hex').slice(0, PERSONAL_HASH_HEX_CHARS)}`;
}

/**
 * `text` with every copy of `value` replaced, in each form a message may quote it: as is, JSON-escaped (a value holding
 * a quote or a control character) and URL-encoded (a request's path or query).
 */
export function redactValue(text: string, value: string, replacement: string): string {
  if (value.length === 0) return text;
  // encodeURI throws on a lone surrogate, which a JSON string may hold: such a value has no URL-encoded form to find.
  const encoded = (encode: (v: string) => string) => {
    try {
      return encode(value);
    } catch {
      return value;
    }
  };
  const forms = new Set([value, JSON.stringify(value).slice(1, -1), encoded(encodeURIComponent), encoded(encodeURI)]);
  return [...forms].reduce((out, form) => out.split(form).join(replacement), text);
}

/** A JavaScript error name, kept as is; anything else (a hostile or malformed `name`) is kept as 'Error'. */
const ERROR_NAME = /^[A-Za-z_$][\w$]{0,63}$/;

/**
 * A stand-in for `error` as a `cause`: its type and the given message, nothing else. Powertools' logger prints a
 * cause's message, stack, own cause and every enumerable field in full, and an SDK's or HTTP client's error may quote
 * what it was sent or answered (a header holding a key, a response body holding a secret, an object key), so such an
 * error is never kept as a cause itself: its safe part is.
 */
export function sanitizedCause(error: unknown, message: string): Error {
  const cause = new Error(message);
  const name = (error as { name?: unknown } | null)?.name;
  cause.name = typeof name === 'string' && ERROR_NAME.test(name) ? name : 'Error';
  return cause;
}
