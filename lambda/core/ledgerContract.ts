// The run ledger's contract, in one place: its key layout, a batch's counters and admission states, and the
// reconciliation rule over a batch's counters. Written by the producer and the consumer (lambda/adapters/ledger.ts,
// admissionState.ts), read by the operator CLI (ops/ledger.ts), the local session and report (local/session.ts,
// local/report.ts) and the chaos harness (chaos/run.ts, producerFaults.ts, invariants.ts): each of them uses these
// builders and equations, so the status command, the local report and the chaos invariants cannot disagree on what a
// batch's figures mean.
//
// Layout (one table, `pk` / `sk`):
//   BATCH#<job>    / <batchId>                 one item per run: the producer's counters, its facts, its admission state;
//                                              batch IDs begin `<job>:<businessDate>:` (lambda/core/businessDate.ts
//                                              makeBatchId), so one date's runs are one key range (batchDatePrefix)
//   INVOCATIONS#<job>#<batchId> / <invocationId>
//                                              one item per consumer invocation that handled records of the batch: its
//                                              counts, written once at its end (a Put, so a retried write is no
//                                              second count), and the few operation IDs the read side needs to resolve
//                                              a batch exactly (see resolveBatch)
//   PAGES#<job>#<batchId> / <page number, 6 digits>#<attempt>
//                                              one item per attempt at a page: the operation IDs it discovered,
//                                              gzipped, written before it publishes them (the business date's audit
//                                              lists every operation of the date from them; an attempt killed after
//                                              publishing part of its page leaves the orphans the next one counts)
//   REJECTED#<job> / <ISO time>#<messageId>    one item per rejected message, kept for review
//   INVALID_ROW#<job>#<batchId> / <sha-256 of the row's key>
//                                              one item per source row discovery could not turn into a valid message
//                                              (lambda/core/job.ts InvalidRow): its key and reasons, kept for review for
//                                              INVALID_ROW_RETENTION_DAYS; the batch item counts them in `invalidRows`,
//                                              apart from `discovered` (they are never published, so no equation below
//                                              counts them)

import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { LEDGER_DEAD_LETTER_REASON_CHARS } from './reasonCaps';

/** The kinds of ledger item; each is the prefix of its partition key (`<kind>#<job>`). */
export const LedgerItemKind = {
  batch: 'BATCH',
  invocations: 'INVOCATIONS',
  pages: 'PAGES',
  rejection: 'REJECTED',
  invalidRow: 'INVALID_ROW',
} as const;
export type LedgerItemKind = (typeof LedgerItemKind)[keyof typeof LedgerItemKind];

/** The partition holding every item of one kind of a job: `BATCH#<job>` (its batches), `REJECTED#<job>` (its rejections). */
export function ledgerPartition(kind: LedgerItemKind, job: string): string {
  return `${kind}#${job}`;
}

/** The ledger's keys. A batch's sort key is its batch ID; a rejection's is its time then the SQS message ID. */
export const ledgerKeys = {
  /** The partition to query for a job's batches (`BATCH#<job>`). */
  batchPartition: (job: string): string => ledgerPartition(LedgerItemKind.batch, job),
  /** The partition to query for a job's rejections (`REJECTED#<job>`). */
  rejectionPartition: (job: string): string => ledgerPartition(LedgerItemKind.rejection, job),
  /** `BATCH#<job>` / `<batchId>`. */
  batch: (job: string, batchId: string) => ({ pk: ledgerKeys.batchPartition(job), sk: batchId }),
  /**
   * `<job>:<businessDate>:`, the sort-key prefix of the date's runs in `BATCH#<job>` (every batch ID the producer, the
   * schedule, `ops catch-up` and chaos make; a run started with a batch ID of another form is not in the range).
   */
  batchDatePrefix: (job: string, businessDate: string): string => `${job}:${businessDate}:`,
  /** The partition holding the consumer invocations of one batch (`INVOCATIONS#<job>#<batchId>`). */
  invocationPartition: (job: string, batchId: string): string =>
    `${ledgerPartition(LedgerItemKind.invocations, job)}#${batchId}`,
  /** `INVOCATIONS#<job>#<batchId>` / `<invocationId>`: one consumer invocation's counts for one batch. */
  invocation: (job: string, batchId: string, invocationId: string) => ({
    pk: ledgerKeys.invocationPartition(job, batchId),
    sk: invocationId,
  }),
  /** The partition holding the admitted pages of one batch (`PAGES#<job>#<batchId>`). */
  pagePartition: (job: string, batchId: string): string => `${ledgerPartition(LedgerItemKind.pages, job)}#${batchId}`,
  /** `PAGES#<job>#<batchId>` / `<page>#<attempt>` (page 1-based, 6 digits, so pages sort in order; '' for a page's prefix). */
  page: (job: string, batchId: string, page: number, attempt: string) => ({
    pk: ledgerKeys.pagePartition(job, batchId),
    sk: `${String(page).padStart(6, '0')}#${attempt}`,
  }),
  /** `REJECTED#<job>` / `<ISO time>#<messageId>`: a job's rejections sort by time. */
  rejection: (job: string, at: Date, messageId: string) => ({
    pk: ledgerKeys.rejectionPartition(job),
    sk: `${at.toISOString()}#${messageId}`,
  }),
  /** The partition holding the invalid source rows of one batch (`INVALID_ROW#<job>#<batchId>`). */
  invalidRowPartition: (job: string, batchId: string): string =>
    `${ledgerPartition(LedgerItemKind.invalidRow, job)}#${batchId}`,
  /**
   * `INVALID_ROW#<job>#<batchId>` / the SHA-256 of the row's key: a page discovered again (a retried step) writes the
   * same items, and a key of any length or alphabet makes a valid sort key.
   */
  invalidRow: (job: string, batchId: string, key: string) => ({
    pk: ledgerKeys.invalidRowPartition(job, batchId),
    sk: createHash('sha256').update(key, 'utf8').digest('hex'),
  }),
};

/**
 * Days a record kept for review lives in the ledger at most, whatever the ledger's own retention: a rejection record
 * (the rejected body) or an invalid source row's record (its key and reasons). Either may hold personal data (an object
 * key, a name), and two weeks is time enough to review it, as long as the DLQ keeps a message.
 */
export const REJECTED_RETENTION_DAYS = 14;

/** How long an invalid source row's record is kept: the same review window as a rejection's. */
export const INVALID_ROW_RETENTION_DAYS = REJECTED_RETENTION_DAYS;

/** A batch item's count of invalid source rows (`invalidRows`; 0 when none was ever counted). */
export function invalidRowsOf(batchItem: Record<string, unknown>): number {
  return typeof batchItem.invalidRows === 'number' ? batchItem.invalidRows : 0;
}

/**
 * A page's operation IDs as stored: newline-joined and gzipped. Operation IDs of a page share most of their text (the
 * job's prefix, the date), so a page of 500 is a few KB, a few write units per page rather than one per operation.
 */
export function encodePageOperations(operationIds: readonly string[]): Uint8Array {
  return gzipSync(Buffer.from(operationIds.join('\n'), 'utf8'));
}

/** The operation IDs of a stored page (encodePageOperations). */
export function decodePageOperations(stored: Uint8Array): string[] {
  const text = gunzipSync(stored).toString('utf8');
  return text === '' ? [] : text.split('\n');
}

/** The batch ID of a batch item as DynamoDB returns it (its sort key). */
export function batchIdOf(item: { sk?: unknown }): string {
  return String(item.sk);
}

/** Counters a batch accumulates; each is added atomically, so any number of writers may count at once. */
export interface BatchCounters {
  discovered?: number;
  published?: number;
  /** Valid records the consumers received (a redelivery or a deferred message counts again). */
  consumed?: number;
  completed?: number;
  /**
   * Operations of this batch that another batch of the same business date (a re-run, a catch-up) completed first: each
   * once, however often its message came. Resolved from the invocation items (resolveBatch), never stored as a counter.
   */
  completedElsewhere?: number;
  duplicates?: number;
  /**
   * Records handed back to SQS for a retryable failure (batchItemFailures; redelivered after the visibility timeout).
   * Not part of any equation: a retried record is counted again when it ends (completed, rejected or dead-lettered).
   * A failure on the last allowed receive is dead-lettered, not retried.
   */
  retries?: number;
  rejected?: number;
  /** Re-publishes with a delay, whatever the cause (no rate-limit slot soon enough, or a throttled downstream). */
  deferred?: number;
  /** 429/503 answers from the downstream; each is also deferred (or dead-lettered once the deferral budget is spent). */
  throttled?: number;
  deadLettered?: number;
}

/** Every counter of a batch item, in the order the ledger writes them. */
export const BATCH_COUNTERS = [
  'discovered',
  'published',
  'consumed',
  'completed',
  'duplicates',
  'retries',
  'rejected',
  'deferred',
  'throttled',
  'deadLettered',
] as const satisfies readonly (keyof BatchCounters)[];
export type BatchCounterName = (typeof BATCH_COUNTERS)[number];

/** A batch item's counters as stored: a counter no writer has added to yet (absent, or not a number) is 0. */
export function batchCountersOf(item: Record<string, unknown>): Required<BatchCounters> {
  // completedElsewhere is never stored: resolveBatch works it out from the invocation items.
  const out = { completedElsewhere: 0 } as Required<BatchCounters>;
  for (const key of BATCH_COUNTERS) {
    const value = item[key];
    out[key] = typeof value === 'number' ? value : 0;
  }
  return out;
}

/** Where a run's admission is (the batch item's `admission` attribute). */
export const AdmissionStatus = {
  /** Steps are still admitting pages. */
  admitting: 'admitting',
  /** Discovery returned its last page: everything of the run is admitted. */
  complete: 'complete',
  /** The run stopped at maxPagesPerRun with work remaining. */
  pageLimit: 'page-limit',
} as const;
export type AdmissionStatus = (typeof AdmissionStatus)[keyof typeof AdmissionStatus];

const count = (v: number | undefined): number => v ?? 0;

/**
 * `completed + completedElsewhere + rejected + deadLettered`: the discovered operations whose end the batch recorded. A counter left out is 0.
 * Used by every equation below, and by the local report's nothing-lost check (over a run's totals: the DLQ's depth as
 * the dead-lettered figure, and, with data kept from earlier runs, the suppressed duplicates as completions).
 */
export function batchSettledCount(counters: BatchCounters): number {
  return (
    count(counters.completed) +
    count(counters.completedElsewhere) +
    count(counters.rejected) +
    count(counters.deadLettered)
  );
}

/** `discovered - (completed + completedElsewhere + rejected + deadLettered)`: still queued, in flight, or lost. `ops status`'s `outstanding`. */
export function batchOutstanding(counters: BatchCounters): number {
  return count(counters.discovered) - batchSettledCount(counters);
}

/**
 * `discovered = completed + completedElsewhere + rejected + deadLettered`, exactly. Suppressed duplicates never stand in for a completion,
 * and admission is not looked at. The chaos invariants' `exact` (batchesExact); the local report's nothing-lost check
 * is this equation over the run's totals (see batchSettledCount).
 */
export function batchExact(counters: BatchCounters): boolean {
  return count(counters.discovered) === batchSettledCount(counters);
}

/**
 * `discovered = completed + completedElsewhere + rejected + deadLettered` and the run's admission is no longer `admitting`: a batch still
 * admitting has work the ledger has not discovered yet, so it cannot reconcile before admission ends (a batch with no
 * admission state, written before admission existed, is judged on its counters). `ops status`'s and `ops op`'s
 * `reconciles`.
 */
export function batchReconciles(batch: BatchCounters & { admission?: string }): boolean {
  return batchExact(batch) && batch.admission !== AdmissionStatus.admitting;
}

/**
 * `discovered <= completed + duplicates + rejected + deadLettered`: every discovered operation is accounted for when
 * suppressed duplicates count as done. An invocation killed before its ledger flush loses its counts, and its records
 * come back as duplicates, so this tolerates what `batchExact` does not. Admission is not looked at (the chaos
 * invariants require every run's admission `complete` on their own). The chaos invariants' per-batch `reconciles`
 * (nothingLost).
 */
export function batchAccountedWithDuplicates(counters: BatchCounters): boolean {
  return count(counters.discovered) <= batchSettledCount(counters) + count(counters.duplicates);
}

/**
 * Who completed an operation, kept in its completion record's stored result (the consumer adds it to what the job's
 * apply returned): a later delivery of the operation, answered from that record, tells by it whether the completion
 * was its own batch's (and by which invocation) or another batch's.
 */
export interface CompletedBy {
  batchId: string;
  invocationId: string;
}

/** The field of a stored result that holds its CompletedBy. */
export const COMPLETED_BY_FIELD = 'completedBy';

/** The CompletedBy of a stored result (an object, or its JSON as Powertools stores it), when it has one. */
export function completedByOf(result: unknown): CompletedBy | undefined {
  let value = result;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return undefined;
    }
  }
  const by = (value as Record<string, unknown> | null | undefined)?.[COMPLETED_BY_FIELD] as
    | Record<string, unknown>
    | undefined;
  return typeof by?.batchId === 'string' && typeof by.invocationId === 'string'
    ? { batchId: by.batchId, invocationId: by.invocationId }
    : undefined;
}

/** Counters an invocation item adds up; the producer's (discovered, published) live on the batch item. */
export const INVOCATION_COUNTERS = [
  'consumed',
  'completed',
  'duplicates',
  'retries',
  'deferred',
  'throttled',
] as const satisfies readonly (keyof BatchCounters)[];
export type InvocationCounterName = (typeof INVOCATION_COUNTERS)[number];

/**
 * One consumer invocation's record of one batch (the invocation item's attributes besides its keys). Written once, at
 * the invocation's end. Operation IDs are kept only where the read side needs them to be exact, and those are the
 * exceptions (a redelivery, a dead-letter, a rejection), so a normal item holds counters alone and stays one write unit.
 */
export interface InvocationRecord extends Partial<Record<InvocationCounterName, number>> {
  /** The largest age since first enqueue of the batch's messages this invocation completed (ms). */
  oldestMessageAgeMs?: number;
  /** Deliveries answered by a completion of this same batch: `<completing invocation ID> <operation ID>` each. */
  replays?: string[];
  /** Deliveries answered by another batch's completion: `<completing batch ID> <operation ID>` each. */
  elsewhere?: string[];
  /**
   * Operations this invocation sent to the DLQ, or failed on their last receive (SQS moves them there):
   * `<operation ID> <reason>` each (deadLetterEntry), the reason cut to LEDGER_DEAD_LETTER_REASON_CHARS
   * (reasonCaps.ts).
   */
  deadLetteredOperations?: string[];
  /** SQS message IDs this invocation rejected (a message delivered twice is rejected twice, and counts once). */
  rejectedMessages?: string[];
}

/** The `<id> <operationId>` entries of replays and elsewhere: IDs hold no spaces (lambda/core/message.ts idSchema). */
export function ledgerEntry(id: string, operationId: string): string {
  return `${id} ${operationId}`;
}

/** A `deadLetteredOperations` entry: the operation ID, a space, and the reason, cut short. */
export function deadLetterEntry(operationId: string, reason: string): string {
  return `${operationId} ${reason.replace(/\s+/g, ' ').slice(0, LEDGER_DEAD_LETTER_REASON_CHARS)}`;
}

/** The operation ID and reason of each `deadLetteredOperations` entry of the items (an entry without a reason has ''). */
export function deadLetterEntriesOf(
  invocationItems: readonly Record<string, unknown>[],
): { operationId: string; reason: string }[] {
  return invocationItems.flatMap((i) =>
    strings(i.deadLetteredOperations).map((entry) => {
      const at = entry.indexOf(' ');
      return at < 0
        ? { operationId: entry, reason: '' }
        : { operationId: entry.slice(0, at), reason: entry.slice(at + 1) };
    }),
  );
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/** The `[id, operationId]` pairs of a list of entries; a malformed entry is skipped. */
function entriesOf(list: unknown): [string, string][] {
  return strings(list).flatMap((entry): [string, string][] => {
    const at = entry.indexOf(' ');
    return at > 0 ? [[entry.slice(0, at), entry.slice(at + 1)]] : [];
  });
}

/**
 * The run's orphans (the batch item's `orphans`): operations an attempt of a page discovered and may have published
 * before it was killed, which the attempt that committed the page did not discover again. They are in `discovered`.
 */
export function orphansOf(batchItem: Record<string, unknown>): string[] {
  const value = batchItem.orphans;
  return value instanceof Set ? strings([...value]) : strings(value);
}

/** The operations whose completion record resolveBatch must be given: those the batch's invocations dead-lettered. */
export function deadLetteredOperationsOf(invocationItems: readonly Record<string, unknown>[]): string[] {
  return [...new Set(deadLetterEntriesOf(invocationItems).map((e) => e.operationId))];
}

/** A batch's figures, resolved exactly from its batch item and its invocation items. */
export interface BatchFigures extends Required<BatchCounters> {
  /** Completions recovered from invocations that never wrote their counts (killed, or their write failed); in `completed`. */
  adopted: number;
  /** Consumer invocations that wrote counts for the batch. */
  invocations: number;
  /** The oldest message's age when consumed, since its first enqueue (ms); undefined before the first completion. */
  oldestMessageAgeMs?: number;
  /** The batch's operations in the DLQ: dead-lettered, and not completed since (by a redrive or another batch). */
  deadLetteredOperations: string[];
  /** Each operation another batch completed first, with that batch's ID. */
  completedElsewhereBy: Record<string, string>;
}

/**
 * The exact figures of one batch.
 *
 * Every consumer invocation writes its counts for the batch once, at its end, under its own invocation ID, and each
 * completion record names the batch and invocation that completed it (CompletedBy). A later delivery of an operation
 * is answered from that record, and its invocation writes what it saw, not a guess:
 * - completed by this batch (`replays`): when the completing invocation wrote its counts (its item exists), the
 *   delivery was a duplicate; when it never did (killed after its completion records, or its write failed), the
 *   completion is adopted here, once per operation however many deliveries saw it. Deciding at read time makes this
 *   exact whatever order things happened in, and needs no write per record: a completing invocation still running
 *   when its record is redelivered is resolved the moment its item is written.
 * - completed by another batch (`elsewhere`): the operation is `completedElsewhere`, once; further deliveries are
 *   duplicates.
 * - dead-lettered operations are looked up in `completions` (their completion records, deadLetteredOperationsOf): one
 *   completed since (a redrive that succeeded, or another batch) is no longer dead-lettered.
 * - the run's orphans (orphansOf) too: one another batch completed is completedElsewhere (it may never have been
 *   published under this batch, so no delivery says so); one this batch completed is in its counts already.
 * Counters on the batch item itself (consumers before invocation items) are added as they are.
 */
export function resolveBatch(
  batchId: string,
  batchItem: Record<string, unknown>,
  invocationItems: readonly Record<string, unknown>[],
  completions: ReadonlyMap<string, CompletedBy | undefined> = new Map(),
): BatchFigures {
  const own = batchCountersOf(batchItem);
  const flushed = new Set(invocationItems.map((i) => String(i.sk)));
  const sums = Object.fromEntries(INVOCATION_COUNTERS.map((k) => [k, 0])) as Record<InvocationCounterName, number>;
  const adopted = new Set<string>();
  const elsewhere = new Map<string, string>();
  const rejected = new Set<string>();
  let duplicates = 0;
  let oldest = typeof batchItem.oldestMessageAgeMs === 'number' ? batchItem.oldestMessageAgeMs : undefined;
  for (const item of invocationItems) {
    for (const key of INVOCATION_COUNTERS) sums[key] += typeof item[key] === 'number' ? (item[key] as number) : 0;
    if (typeof item.oldestMessageAgeMs === 'number') oldest = Math.max(oldest ?? 0, item.oldestMessageAgeMs);
    for (const m of strings(item.rejectedMessages)) rejected.add(m);
  }
  for (const item of invocationItems) {
    for (const [invocationId, operationId] of entriesOf(item.replays)) {
      if (flushed.has(invocationId) || adopted.has(operationId)) duplicates++;
      else adopted.add(operationId);
    }
    for (const [otherBatch, operationId] of entriesOf(item.elsewhere)) {
      if (elsewhere.has(operationId)) duplicates++;
      else elsewhere.set(operationId, otherBatch);
    }
  }
  for (const operationId of orphansOf(batchItem)) {
    const by = completions.get(operationId);
    if (by !== undefined && by.batchId !== batchId && !elsewhere.has(operationId))
      elsewhere.set(operationId, by.batchId);
  }
  const deadLettered: string[] = [];
  for (const operationId of deadLetteredOperationsOf(invocationItems)) {
    const by = completions.get(operationId);
    if (by === undefined) deadLettered.push(operationId);
    else if (by.batchId !== batchId && !elsewhere.has(operationId)) elsewhere.set(operationId, by.batchId);
  }
  return {
    discovered: own.discovered,
    published: own.published,
    consumed: own.consumed + sums.consumed,
    completed: own.completed + sums.completed + adopted.size,
    completedElsewhere: elsewhere.size,
    duplicates: own.duplicates + sums.duplicates + duplicates,
    retries: own.retries + sums.retries,
    rejected: own.rejected + rejected.size,
    deferred: own.deferred + sums.deferred,
    throttled: own.throttled + sums.throttled,
    deadLettered: own.deadLettered + deadLettered.length,
    adopted: adopted.size,
    invocations: invocationItems.length,
    oldestMessageAgeMs: oldest,
    deadLetteredOperations: deadLettered.sort(),
    completedElsewhereBy: Object.fromEntries([...elsewhere.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
  };
}

/**
 * Operations a batch's invocations settled (completed, completed elsewhere, dead-lettered or rejected) in invocations
 * that ended from `sinceMs` to `untilMs`: the rate a running batch is actually draining at, from its invocation items' `at`.
 */
export function settledSince(
  invocationItems: readonly Record<string, unknown>[],
  sinceMs: number,
  untilMs = Number.POSITIVE_INFINITY,
): number {
  let settled = 0;
  for (const item of invocationItems) {
    const at = typeof item.at === 'string' ? Date.parse(item.at) : Number.NaN;
    if (!(at >= sinceMs && at <= untilMs)) continue;
    settled +=
      (typeof item.completed === 'number' ? item.completed : 0) +
      strings(item.elsewhere).length +
      strings(item.deadLetteredOperations).length +
      strings(item.rejectedMessages).length;
  }
  return settled;
}

/** The window a batch's drain rate is measured over: long enough to smooth its invocations, short enough to be now. */
export const DRAIN_WINDOW_MINUTES = 10;

/** The least time a drain rate is measured over: a batch seconds old has not drained long enough to say. */
export const MIN_DRAIN_SPAN_MINUTES = 1;

/**
 * The rate a running batch is draining at, in operations per minute (to 0.1): what it settled over the last
 * DRAIN_WINDOW_MINUTES before `nowMs`, divided by the part of that window the batch has lived since `startedMs` (at
 * least MIN_DRAIN_SPAN_MINUTES). A batch one minute old is measured over its minute, not forecast at a tenth of its
 * pace; without a start, over the whole window. Every projection of a batch's end (ops status, the console) uses it.
 */
export function drainPerMinute(
  invocationItems: readonly Record<string, unknown>[],
  startedMs: number | undefined,
  nowMs: number,
): number {
  const windowStart = nowMs - DRAIN_WINDOW_MINUTES * 60_000;
  const from =
    startedMs !== undefined && Number.isFinite(startedMs)
      ? Math.min(nowMs, Math.max(windowStart, startedMs))
      : windowStart;
  const minutes = Math.max(MIN_DRAIN_SPAN_MINUTES, (nowMs - from) / 60_000);
  return Math.round((settledSince(invocationItems, windowStart, nowMs) / minutes) * 10) / 10;
}
