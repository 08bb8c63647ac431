// The message contract between producer and consumer: one compact, versioned, validated SQS body per operation.
import { z } from 'zod';
import { MESSAGE_VERSION } from './constants';

/** Longest operation or batch ID we accept; DynamoDB keys allow more, but nothing legitimate needs it. */
export const MAX_ID_LENGTH = 256;
const ID = /^[A-Za-z0-9][A-Za-z0-9:_.@#/+=-]*$/;

export const idSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(MAX_ID_LENGTH, `must be at most ${MAX_ID_LENGTH} characters`)
  .regex(ID, 'may hold only letters, digits and : _ . @ # / + = - (no spaces or control characters)');

export const businessDateSchema = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date in the form YYYY-MM-DD')
  .refine((v) => {
    const d = new Date(`${v}T00:00:00Z`);
    return !Number.isNaN(d.getTime()) && d.toISOString().startsWith(v);
  }, 'must be a real calendar date');

const isoTimestamp = z.iso.datetime({ offset: true, message: 'must be an ISO-8601 timestamp' });

/** The envelope every job shares; `resource` is validated by the job's own schema. */
export const messageSchema = z.strictObject({
  version: z.literal(MESSAGE_VERSION, { message: `unsupported message version (this consumer reads version ${MESSAGE_VERSION})` }),
  jobType: z.string().regex(/^[a-z][a-z0-9-]{1,30}[a-z0-9]$/, 'must be a kebab-case job name'),
  operationId: idSchema,
  batchId: idSchema,
  businessDate: businessDateSchema,
  resource: z.record(z.string().max(64), z.union([z.string().max(1024), z.number(), z.boolean()])),
  enqueuedAt: isoTimestamp,
  /** When the operation was first published; unchanged by deferrals, so the true job age survives re-publishing. */
  firstEnqueuedAt: isoTimestamp.optional(),
  /** Deferrals so far (throttling), not SQS receives. @default 0 */
  attempt: z.number().int().min(0).max(10000).optional(),
  /**
   * Not to run before this time. SQS delays a message by at most 900 s, so a longer deferral is a chain of re-publishes
   * carrying this field; the consumer defers again, without claiming, until it has passed.
   */
  notBefore: isoTimestamp.optional(),
});

export type JobMessage = z.infer<typeof messageSchema>;

export type ParseResult =
  | { ok: true; message: JobMessage }
  | { ok: false; reasons: string[] };

const byteLength = (s: string): number => Buffer.byteLength(s, 'utf8');

/**
 * Parses one SQS body: size cap, JSON, envelope. Never throws; the reasons name every problem found.
 */
export function parseMessage(body: string, maxBytes: number): ParseResult {
  const size = byteLength(body);
  if (size > maxBytes) {
    return { ok: false, reasons: [`body is ${size} bytes, over the ${maxBytes}-byte cap`] };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (error) {
    return { ok: false, reasons: [`body is not valid JSON (${(error as Error).message})`] };
  }
  const result = messageSchema.safeParse(raw);
  if (!result.success) {
    return {
      ok: false,
      reasons: result.error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'body'}: ${i.message}`),
    };
  }
  return { ok: true, message: result.data };
}

/**
 * Serializes a message after validating it, so the producer can never publish what the consumer would reject.
 * @throws InvalidMessageError naming every problem.
 */
export function serializeMessage(message: JobMessage, maxBytes: number): string {
  const body = JSON.stringify(message);
  const parsed = parseMessage(body, maxBytes);
  if (!parsed.ok) {
    throw new InvalidMessageError(`refusing to publish an invalid message for ${message.operationId}: ${parsed.reasons.join('; ')}`, parsed.reasons);
  }
  return body;
}

export class InvalidMessageError extends Error {
  constructor(message: string, public readonly reasons: string[], options?: ErrorOptions) {
    super(message, options);
    this.name = 'InvalidMessageError';
  }
}
