// Discovery paging: the opaque cursor a producer carries between pages is a DynamoDB key, base64url-encoded JSON.
import { PacedJobsError } from './errors';

/** Longest cursor we accept; a real key of a few short strings is far below it. */
export const MAX_CURSOR_LENGTH = 2048;

/** A cursor that is not one encodeCursor wrote for this query (decodeCursor), or a key it cannot encode. */
export class InvalidCursorError extends PacedJobsError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'InvalidCursorError';
  }
}

/** Encodes a LastEvaluatedKey (string attributes only, as our tables' keys are); undefined when paging is over. */
export function encodeCursor(key: Record<string, unknown> | undefined): string | undefined {
  if (key === undefined || Object.keys(key).length === 0) return undefined;
  for (const [name, value] of Object.entries(key)) {
    if (typeof value !== 'string')
      throw new InvalidCursorError(`cannot encode key attribute "${name}": only string keys are supported`);
  }
  return Buffer.from(JSON.stringify(key), 'utf8').toString('base64url');
}

/**
 * Decodes and checks a cursor against the key it must be: exactly `keyNames`, each a non-empty string, and each
 * fixed value in `expect` (the partition the query is bound to) unchanged, so a cursor from another query or
 * business date is refused rather than silently skipping work.
 * @throws InvalidCursorError saying what is wrong (never echoing more than a short excerpt of the input).
 */
export function decodeCursor(
  cursor: string,
  keyNames: readonly string[],
  expect: Record<string, string> = {},
): Record<string, string> {
  const fail = (reason: string): never => {
    throw new InvalidCursorError(`invalid cursor: ${reason}`);
  };
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH) fail(`must be 1 to ${MAX_CURSOR_LENGTH} characters`);
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) fail('not base64url');
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    fail('not an encoded key');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) fail('not an encoded key');
  const key = parsed as Record<string, unknown>;
  const names = Object.keys(key).sort();
  const wanted = [...keyNames].sort();
  if (names.length !== wanted.length || names.some((n, i) => n !== wanted[i])) {
    fail(`expected key attributes ${wanted.join(', ')}`);
  }
  for (const name of wanted) {
    const value = key[name];
    if (typeof value !== 'string' || value.length === 0) fail(`key attribute ${name} must be a non-empty string`);
  }
  for (const [name, value] of Object.entries(expect)) {
    if (key[name] !== value) fail(`it belongs to another query (${name} is not ${JSON.stringify(value)})`);
  }
  return key as Record<string, string>;
}
