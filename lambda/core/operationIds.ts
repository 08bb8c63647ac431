// Operation IDs, the idempotency keys of the whole flow: built by discovery, re-checked by apply, stable across re-runs.
import * as z from 'zod/mini';
import { businessDateSchema, MAX_ID_LENGTH } from './message';

/**
 * One part of an operation ID: the message contract's ID alphabet minus ':', which separates the parts, so that an
 * ID always splits back into the parts it was built from.
 */
const PART = /^[A-Za-z0-9][A-Za-z0-9_.@#/+=-]*$/;
/** Longest single part (a payment, upload or tenant ID) we accept. */
export const MAX_ID_PART_LENGTH = 128;
const PROVIDER = /^[a-z][a-z0-9-]{0,31}$/;
/** The canonical timestamp form (Date#toISOString), so the same instant always gives the same ID. */
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** For resource schemas: an ID that can become part of an operation ID (payment, upload, tenant IDs). */
export const idPartSchema = z.string().check(
  z.minLength(1, 'must not be empty'),
  z.maxLength(MAX_ID_PART_LENGTH, `must be at most ${MAX_ID_PART_LENGTH} characters`),
  z.regex(PART, 'may hold only letters, digits and _ . @ # / + = - (no ":" or spaces), starting with a letter or digit'),
);

export class InvalidOperationIdError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'InvalidOperationIdError';
  }
}

const excerpt = (v: string, max = 40): string => JSON.stringify(v.length > max ? `${v.slice(0, max)}...` : v);

/**
 * Why `value` (the field `label` names) cannot be part of an operation ID, or undefined when it can. Discovery hands a
 * row with such an ID back for review (lambda/core/job.ts InvalidRow) rather than failing its page.
 */
export function idPartProblem(label: string, value: string): string | undefined {
  if (value.length === 0 || value.length > MAX_ID_PART_LENGTH || !PART.test(value)) {
    return `${label} ${excerpt(value)} cannot be part of an operation ID: it must be 1 to ${MAX_ID_PART_LENGTH} characters of letters, digits and _ . @ # / + = - starting with a letter or digit`;
  }
  return undefined;
}

function checkPart(label: string, value: string): void {
  const problem = idPartProblem(label, value);
  if (problem !== undefined) throw new InvalidOperationIdError(problem);
}

function checkBusinessDate(value: string): void {
  if (!businessDateSchema.safeParse(value).success) {
    throw new InvalidOperationIdError(`business date ${excerpt(value)} is not a real date in the form YYYY-MM-DD`);
  }
}

function finish(id: string): string {
  // Unreachable with the part limits above; kept so a future longer format cannot silently exceed the contract.
  if (id.length > MAX_ID_LENGTH) throw new InvalidOperationIdError(`operation ID is ${id.length} characters, over ${MAX_ID_LENGTH}`);
  return id;
}

/** `reconcile:<provider>:<paymentId>:<businessDate>` */
export function reconcileOperationId(parts: { provider: string; paymentId: string; businessDate: string }): string {
  if (!PROVIDER.test(parts.provider)) {
    throw new InvalidOperationIdError(`provider ${excerpt(parts.provider)} must be 1 to 32 lower-case letters, digits or - starting with a letter`);
  }
  checkPart('payment ID', parts.paymentId);
  checkBusinessDate(parts.businessDate);
  return finish(`reconcile:${parts.provider}:${parts.paymentId}:${parts.businessDate}`);
}

/**
 * `stale-upload:<uploadId>:<deleteAfter>`. The deadline is part of the ID on purpose: an upload whose retention is
 * extended is skipped, and idempotency remembers that skip for the record lifetime; with the new deadline the later
 * deletion is a new operation, instead of a duplicate that would be suppressed for weeks past its deadline.
 */
export function staleUploadOperationId(parts: { uploadId: string; deleteAfter: string }): string {
  checkPart('upload ID', parts.uploadId);
  if (!ISO_UTC.test(parts.deleteAfter) || Number.isNaN(Date.parse(parts.deleteAfter))) {
    throw new InvalidOperationIdError(`deleteAfter ${excerpt(parts.deleteAfter)} must be a UTC timestamp in the form YYYY-MM-DDTHH:mm:ss.sssZ`);
  }
  return finish(`stale-upload:${parts.uploadId}:${parts.deleteAfter}`);
}

/** `<tenantId>:expired-sessions:<businessDate>` */
export function expiredSessionsOperationId(parts: { tenantId: string; businessDate: string }): string {
  checkPart('tenant ID', parts.tenantId);
  checkBusinessDate(parts.businessDate);
  return finish(`${parts.tenantId}:expired-sessions:${parts.businessDate}`);
}

/**
 * Apply's guard: the message's operation ID must be the one its own resource and date would produce, so a
 * hand-edited or mis-built message cannot borrow another operation's idempotency record.
 * @throws InvalidOperationIdError naming both IDs.
 */
export function assertOperationId(actual: string, expected: () => string): void {
  const want = expected();
  if (actual !== want) {
    throw new InvalidOperationIdError(`operation ID ${excerpt(actual, MAX_ID_LENGTH)} does not match its resource (expected ${excerpt(want, MAX_ID_LENGTH)})`);
  }
}
