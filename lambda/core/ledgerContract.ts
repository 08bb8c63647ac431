// The run ledger's contract, in one place: its key layout, a batch's counters and admission states, and the
// reconciliation rule over a batch's counters. Written by the producer and the consumer (lambda/adapters/ledger.ts,
// admissionState.ts), read by the operator CLI (ops/ledger.ts), the local session and report (local/session.ts,
// local/report.ts) and the chaos harness (chaos/run.ts, producerFaults.ts, invariants.ts): each of them uses these
// builders and equations, so the status command, the local report and the chaos invariants cannot disagree on what a
// batch's figures mean.
//
// Layout (one table, `pk` / `sk`):
//   BATCH#<job>    / <batchId>                 one item per run: its counters, its facts, its admission state
//   REJECTED#<job> / <ISO time>#<messageId>    one item per rejected message, kept for review

/** The kinds of ledger item; each is the prefix of its partition key (`<kind>#<job>`). */
export const LedgerItemKind = {
  batch: 'BATCH',
  rejection: 'REJECTED',
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
  /** `REJECTED#<job>` / `<ISO time>#<messageId>`: a job's rejections sort by time. */
  rejection: (job: string, at: Date, messageId: string) => ({ pk: ledgerKeys.rejectionPartition(job), sk: `${at.toISOString()}#${messageId}` }),
};

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
  const out = {} as Required<BatchCounters>;
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
 * `completed + rejected + deadLettered`: the discovered operations whose end the batch recorded. A counter left out is 0.
 * Used by every equation below, and by the local report's nothing-lost check (over a run's totals: the DLQ's depth as
 * the dead-lettered figure, and, with data kept from earlier runs, the suppressed duplicates as completions).
 */
export function batchSettledCount(counters: BatchCounters): number {
  return count(counters.completed) + count(counters.rejected) + count(counters.deadLettered);
}

/** `discovered - (completed + rejected + deadLettered)`: still queued, in flight, or lost. `ops status`'s `outstanding`. */
export function batchOutstanding(counters: BatchCounters): number {
  return count(counters.discovered) - batchSettledCount(counters);
}

/**
 * `discovered = completed + rejected + deadLettered`, exactly. Suppressed duplicates never stand in for a completion,
 * and admission is not looked at. The chaos invariants' `exact` (batchesExact); the local report's nothing-lost check
 * is this equation over the run's totals (see batchSettledCount).
 */
export function batchExact(counters: BatchCounters): boolean {
  return count(counters.discovered) === batchSettledCount(counters);
}

/**
 * `discovered = completed + rejected + deadLettered` and the run's admission is no longer `admitting`: a batch still
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
