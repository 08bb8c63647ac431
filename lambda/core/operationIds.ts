// Operation IDs, the idempotency keys of the whole flow: built by discovery, re-checked by apply, stable across re-runs.
import * as z from 'zod/mini';
import { PacedJobsError } from './errors';
import { businessDateSchema, idSchema, MAX_ID_LENGTH } from './message';

/**
 * One part of an operation ID: the message contract's ID alphabet minus ':', which separates the parts, so that an
 * ID always splits back into the parts it was built from.
 */
const PART = /^[A-Za-z0-9][A-Za-z0-9_.@#/+=-]*$/;
/** Longest single part (a payment, upload or tenant ID) we accept. */
export const MAX_ID_PART_LENGTH = 128;

/** For resource schemas: an ID that can become part of an operation ID (payment, upload, tenant IDs). */
export const idPartSchema = z
  .string()
  .check(
    z.minLength(1, 'must not be empty'),
    z.maxLength(MAX_ID_PART_LENGTH, `must be at most ${MAX_ID_PART_LENGTH} characters`),
    z.regex(
      PART,
      'may hold only letters, digits and _ . @ # / + = - (no ":" or spaces), starting with a letter or digit',
    ),
  );

/** A value that cannot be (part of) an operation ID, or a message whose operation ID is not its resource's. */
export class InvalidOperationIdError extends PacedJobsError {
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

/**
 * One part of an operation ID, in the order the ID is written:
 * - a string is used as it is: the job's own fixed words (`'reconcile'`) and values the job has checked itself (only
 *   the whole ID's check applies to it);
 * - `{ label, id }` is an ID from the job's data (a payment, upload or tenant ID), checked as {@link idPartProblem}
 *   says, the error naming `label`;
 * - `{ businessDate }` is checked as a real calendar date in the form YYYY-MM-DD.
 */
export type OperationIdPart =
  | string
  | { readonly label: string; readonly id: string }
  | { readonly businessDate: string };

/**
 * The operation ID of `parts`, joined by ':' (e.g. `reconcile:<provider>:<paymentId>:<businessDate>`). Discovery
 * builds it and apply builds it again from the message's resource ({@link assertOperationId}), so both must call it
 * with the same parts; keep it stable across re-runs of a date, since it is the idempotency key.
 * @throws InvalidOperationIdError naming the first part that cannot be used, or when the whole ID does not fit the
 * message contract (at most 256 characters of letters, digits and : _ . @ # / + = -).
 */
export function buildOperationId(parts: readonly OperationIdPart[]): string {
  const id = parts
    .map((part) => {
      if (typeof part === 'string') return part;
      if ('businessDate' in part) {
        checkBusinessDate(part.businessDate);
        return part.businessDate;
      }
      checkPart(part.label, part.id);
      return part.id;
    })
    .join(':');
  const whole = idSchema.safeParse(id);
  if (!whole.success) throw new InvalidOperationIdError(`operation ID ${excerpt(id)} ${whole.error.issues[0].message}`);
  return id;
}

/**
 * Apply's guard: the message's operation ID must be the one its own resource and date would produce, so a
 * hand-edited or mis-built message cannot borrow another operation's idempotency record.
 * @throws InvalidOperationIdError naming both IDs.
 */
export function assertOperationId(actual: string, expected: () => string): void {
  const want = expected();
  if (actual !== want) {
    throw new InvalidOperationIdError(
      `operation ID ${excerpt(actual, MAX_ID_LENGTH)} does not match its resource (expected ${excerpt(want, MAX_ID_LENGTH)})`,
    );
  }
}
