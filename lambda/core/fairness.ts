// Which tenant a message belongs to, for SQS fair queues (MessageGroupId on a standard queue) and for the consumer's
// per-key limits: the value of the resource field the job keys its limits on. Pure; the producer and the deferrer set
// it on every message they send, the planner reads the same value as the record's key.
import { createHash } from 'node:crypto';
import type { JobRuntimeSettings } from './constants';

/** SQS's rule for a MessageGroupId: 1 to 128 characters, letters, digits and ASCII punctuation. */
const GROUP_ID_PATTERN = /^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]{1,128}$/;

/**
 * The resource field whose value is a record's key: the per-key rate limit's, else the per-key concurrency's
 * (lib/config/schema.ts requires them to be the same field when both are set). Undefined: the job has no key.
 */
export function keyField(settings: Pick<JobRuntimeSettings, 'rateLimit' | 'concurrencyPerKey'>): string | undefined {
  return settings.rateLimit.perKey?.field ?? settings.concurrencyPerKey?.field;
}

/** A record's key: the field's value as text; null when it has none (a string or a finite number is a key). */
export function keyOf(resource: Record<string, unknown>, field: string): string | null {
  const value = resource[field];
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return typeof value === 'string' && value.length > 0 ? value : null;
}

/**
 * The one tenant all backfill (catch-up and redrive traffic) is, for SQS fair queues: with its backlog in flight, it is
 * the noisy neighbour, so the queue delivers live work's messages first (the consumer's per-key limits still hold for
 * its records' keys). A tenant whose key is literally this would share its group, which costs it only its turns.
 */
export const BACKFILL_GROUP = 'backfill#';

/**
 * The MessageGroupId for a message: BACKFILL_GROUP for backfill, else its resource's key, or undefined when the job has
 * no key or the record none. A key SQS would refuse as a group ID (too long, other characters) is replaced by its
 * SHA-256: still one group per key.
 */
export function fairnessGroup(
  resource: Record<string, unknown>,
  field: string | undefined,
  backfill = false,
): string | undefined {
  if (backfill) return BACKFILL_GROUP;
  if (field === undefined) return undefined;
  const key = keyOf(resource, field);
  if (key === null) return undefined;
  return GROUP_ID_PATTERN.test(key) ? key : `sha256:${createHash('sha256').update(key, 'utf8').digest('hex')}`;
}
