// The message contract between producer and consumer: one compact, versioned, validated SQS body per operation.
// zod/mini, as a namespace import: esbuild keeps only what is used. Classic zod (`zod`) would add its methods and the
// JSON Schema code every classic schema carries (~60 KB of a bundle), and its named `z` export every locale (~360 KB).
import { en } from 'zod/locales';
import * as z from 'zod/mini';
import { MESSAGE_VERSION } from './constants';
import { PacedJobsError } from './errors';
import { describeIssues } from './issues';
import { REJECTION_REASON_CHARS } from './reasonCaps';

// zod/mini leaves the messages to its caller ("Invalid input" for every issue); classic zod sets English on its first
// schema. The reasons a rejection records are zod's English ones, so set them, unless a locale is already chosen.
if (!z.config().localeError) z.config(en());

/** Longest operation or batch ID we accept; DynamoDB keys allow more, but nothing legitimate needs it. */
export const MAX_ID_LENGTH = 256;
const ID = /^[A-Za-z0-9][A-Za-z0-9:_.@#/+=-]*$/;

export const idSchema = z
  .string()
  .check(
    z.minLength(1, 'must not be empty'),
    z.maxLength(MAX_ID_LENGTH, `must be at most ${MAX_ID_LENGTH} characters`),
    z.regex(ID, 'may hold only letters, digits and : _ . @ # / + = - (no spaces or control characters)'),
  );

/** A business date: a real calendar date in the form YYYY-MM-DD (zod/mini). */
export const businessDateSchema = z.string().check(
  z.regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date in the form YYYY-MM-DD'),
  z.refine((v) => {
    const d = new Date(`${v}T00:00:00Z`);
    return !Number.isNaN(d.getTime()) && d.toISOString().startsWith(v);
  }, 'must be a real calendar date'),
);

const isoTimestamp = z.iso.datetime({ offset: true, message: 'must be an ISO-8601 timestamp' });
/** An integer from min to max; `z.int()` as a check, as classic zod's `.int()` adds it. */
const intBetween = (min: number, max: number) => z.number().check(z.int(), z.gte(min), z.lte(max));

/** The envelope every job shares; `resource` is validated by the job's own schema. */
export const messageSchema = z.strictObject({
  version: z.literal(MESSAGE_VERSION, {
    message: `unsupported message version (this consumer reads version ${MESSAGE_VERSION})`,
  }),
  jobType: z.string().check(z.regex(/^[a-z][a-z0-9-]{1,30}[a-z0-9]$/, 'must be a kebab-case job name')),
  operationId: idSchema,
  batchId: idSchema,
  businessDate: businessDateSchema,
  resource: z.record(
    z.string().check(z.maxLength(64)),
    z.union([z.string().check(z.maxLength(1024)), z.number(), z.boolean()], {
      message: 'must be a string, a number or a boolean',
    }),
  ),
  enqueuedAt: isoTimestamp,
  /** When the operation was first published; unchanged by deferrals, so the true job age survives re-publishing. */
  firstEnqueuedAt: z.optional(isoTimestamp),
  /** Failure-driven deferrals so far (the downstream throttled), not SQS receives: what the deferral budget counts. @default 0 */
  attempt: z.optional(intBetween(0, 10000)),
  /** Deferrals while waiting for a rate-limit slot: the fleet waiting its turn, never counted against the budget. @default 0 */
  pacedDeferrals: z.optional(intBetween(0, 1_000_000)),
  /**
   * Not to run before this time. SQS delays a message by at most 900 s, so a longer deferral is a chain of re-publishes
   * carrying this field; the consumer defers again, without claiming, until it has passed.
   */
  notBefore: z.optional(isoTimestamp),
  /**
   * When the job's completion SLO wants the operation settled: its run's scheduled time (or start) plus the SLO's
   * window. Absent when the job has no SLO. The consumer meters each outcome against it (SloMet, SloMissed, SloFailed).
   */
  dueBy: z.optional(isoTimestamp),
  /**
   * Catch-up or redrive traffic, not tonight's scheduled run: it takes only slots live work has not booked, and at most
   * the job's backfillShare of the allowance while live work waits. Absent: live.
   */
  backfill: z.optional(z.literal(true)),
});

export type JobMessage = z.infer<typeof messageSchema>;

export type ParseResult = { ok: true; message: JobMessage } | { ok: false; reasons: string[] };

const byteLength = (s: string): number => Buffer.byteLength(s, 'utf8');

/**
 * Most problems one rejection lists. A body under the size cap can still hold thousands of bad keys, one problem each,
 * and the review record that carries the reasons must stay well inside DynamoDB's 400 KB item limit, or the rejection
 * itself fails and the message is retried instead of being set aside.
 */
export const MAX_REASONS = 20;

/**
 * Characters data must not carry raw into text a person reads (a dead-letter reason, a log line, an ops table, the
 * console): C0 and C1 controls, line and paragraph separators, bidirectional marks, overrides and isolates, and
 * zero-width and invisible formatting characters. zod quotes offending key names from a body, and JSON log lines escape
 * C0 controls but none of the others, which can make a line or a record read differently from what it holds (a bidi
 * override reverses what follows it; a line separator starts a forged line).
 */
const UNPRINTABLE =
  /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/g;

/**
 * `text` with every unprintable character (UNPRINTABLE) written as \uXXXX, so a reader sees what it holds. `keep`
 * lists characters left as they are: a terminal's own line breaks between the lines of a table. Inside a JSON
 * document's strings the escape is JSON's own, so escaping a serialized document changes nothing a parser reads.
 */
export function escapeUnprintable(text: string, keep = ''): string {
  return text.replace(UNPRINTABLE, (c) =>
    keep.includes(c) ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * Each reason with unprintable characters written as \uXXXX; the first MAX_REASONS, each cut to REJECTION_REASON_CHARS
 * (reasonCaps.ts), and a count of the rest.
 */
export function boundReasons(reasons: string[]): string[] {
  const cap = REJECTION_REASON_CHARS;
  const cut = (r: string) => (r.length > cap ? `${r.slice(0, cap)}... (${r.length} characters in all)` : r);
  const kept = reasons.slice(0, MAX_REASONS).map((r) => cut(escapeUnprintable(r)));
  if (reasons.length > MAX_REASONS) kept.push(`... and ${reasons.length - MAX_REASONS} more problems`);
  return kept;
}

/**
 * Parses one SQS body: size cap, JSON, envelope. Never throws; the reasons name the problems found (bounded by
 * boundReasons).
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
    // V8's message may quote the body's first characters, which may be personal data (a name, a file name) and the
    // reason is kept in logs and the ledger: the quote is left out, the rest of the message kept and escaped. V8 adds
    // the line and column to a position for some strings and not others (the same body, parsed from code transformed
    // one way or another, read both ways): it is left out too, so one body always gives one reason.
    const what = (error as Error).message
      .replace(/, ".*"(?:\.\.\.)? is not valid JSON$/s, '')
      .replace(/ \(line \d+ column \d+\)$/, '');
    return { ok: false, reasons: boundReasons([`body is not valid JSON (${what})`]) };
  }
  const result = messageSchema.safeParse(raw);
  if (!result.success) {
    return {
      ok: false,
      reasons: boundReasons(describeIssues(result.error, { root: 'body' })),
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
    throw new InvalidMessageError(
      `refusing to publish an invalid message for ${message.operationId}: ${parsed.reasons.join('; ')}`,
      parsed.reasons,
    );
  }
  return body;
}

export class InvalidMessageError extends PacedJobsError {
  constructor(
    message: string,
    public readonly reasons: string[],
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'InvalidMessageError';
  }
}
