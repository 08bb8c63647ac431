// Chaos harness, the verdict: the four invariants checked at the end of a run, each with the figures behind it.
// Pure: the run hands in what it observed (provider logs, ledger items, DLQ contents).
import { maxInAnyWindow, type ProviderArrival, type ProviderEffect } from '../local/provider';

export interface LedgerBatch {
  batchId: string;
  discovered: number;
  published: number;
  completed: number;
  duplicates: number;
  rejected: number;
  deadLettered: number;
  /** The run's admission state (`complete` once discovery finished); undefined when the item has none. */
  admission?: string;
}

export interface DlqMessage {
  body: string;
  /** The consumer's message attributes (failureReason, operationId, ...); none when SQS moved it after maxReceiveCount. */
  attributes: Record<string, string>;
}

export interface Observations {
  /** Operations the run created (seeded payments): each must end with exactly one effect or a terminal DLQ entry. */
  expectedOperations: string[];
  effects: ProviderEffect[];
  arrivals: ProviderArrival[];
  /** Requests the provider answered from its Idempotency-Key store. */
  replays: number;
  rateLimit: { startsPerInterval: number; intervalSeconds: number };
  batches: LedgerBatch[];
  /** Distinct SQS message IDs the consumer rejected and kept for review (REJECTED# items). */
  rejectedMessageIds: string[];
  poisonInjected: number;
  /** Messages in the job queue at the end (visible, in flight or delayed): must be none. */
  queueLeft: number;
  /** The DLQ's contents at the end, after the redrive. */
  dlq: DlqMessage[];
  /** Payment IDs named by DLQ messages at the end. */
  dlqOperations: string[];
}

export interface Invariant {
  ok: boolean;
  [figure: string]: unknown;
}

export interface Verdict {
  ok: boolean;
  invariants: Record<'effectsEqualUniqueOperations' | 'nothingLost' | 'rateRespected' | 'onlyTerminalFailuresInDlq', Invariant>;
}

/** Arrivals that started work at the provider: passed the quota, and were not answered from the Idempotency-Key store. */
export function isNonReplayedStart(a: ProviderArrival): boolean {
  return !a.replayed && a.status !== 429 && a.status !== 409 && a.status !== 401 && a.status !== 400;
}

export function checkInvariants(o: Observations): Verdict {
  const expected = new Set(o.expectedOperations);
  const effectsPer = new Map<string, number>();
  for (const e of o.effects) effectsPer.set(e.paymentId, (effectsPer.get(e.paymentId) ?? 0) + 1);
  const repeated = [...effectsPer.entries()].filter(([, n]) => n > 1);
  const unexpected = [...effectsPer.keys()].filter((id) => !expected.has(id));
  // Replays for keys whose effect was already made: each was a second effect that only the provider's dedup prevented.
  const effectKeys = new Set(o.effects.map((e) => e.idempotencyKey));
  const replaysOfAppliedKeys = o.arrivals.filter((a) => a.replayed && a.idempotencyKey !== undefined && effectKeys.has(a.idempotencyKey)).length;
  const effectsEqualUniqueOperations: Invariant = {
    ok: repeated.length === 0 && unexpected.length === 0 && o.effects.length === effectsPer.size,
    effects: o.effects.length,
    uniqueOperations: effectsPer.size,
    repeatedOperations: repeated.slice(0, 5).map(([id, n]) => `${id} x${n}`),
    unexpectedOperations: unexpected.slice(0, 5),
    providerReplays: o.replays,
    dedupOnlyGuard: replaysOfAppliedKeys,
  };

  const inDlq = new Set(o.dlqOperations);
  const missing = o.expectedOperations.filter((id) => !effectsPer.has(id) && !inDlq.has(id));
  // The ledger's exact equation can lose the counts of an invocation killed before its flush (those records come back
  // as duplicates), so the batch check counts suppressed duplicates as done; the exact figures are reported too.
  const batches = o.batches.map((b) => ({
    batchId: b.batchId,
    discovered: b.discovered,
    completed: b.completed,
    duplicates: b.duplicates,
    rejected: b.rejected,
    deadLettered: b.deadLettered,
    admission: b.admission,
    exact: b.discovered === b.completed + b.rejected + b.deadLettered,
    reconciles: b.discovered <= b.completed + b.duplicates + b.rejected + b.deadLettered,
  }));
  // A run whose chain stopped leaves its tail in the tables, unpublished: lost work even when another run of the same
  // date (a re-run) happened to publish those operations, so every run must have finished its admission.
  const unadmitted = o.batches.filter((b) => b.admission !== 'complete').map((b) => `${b.batchId} (${b.admission ?? 'no admission state'})`);
  const nothingLost: Invariant = {
    ok: missing.length === 0 && o.queueLeft === 0 && batches.length > 0 && batches.every((b) => b.reconciles) && unadmitted.length === 0,
    operations: o.expectedOperations.length,
    withEffect: o.expectedOperations.filter((id) => effectsPer.has(id)).length,
    terminalInDlq: o.expectedOperations.filter((id) => !effectsPer.has(id) && inDlq.has(id)).length,
    missing: missing.length,
    missingExamples: missing.slice(0, 5),
    queueLeft: o.queueLeft,
    runsNotFullyAdmitted: unadmitted.slice(0, 5),
    batchesExact: batches.filter((b) => b.exact).length,
    // A re-run's batch and the original share operations (each completes in whichever batch's message came first), so
    // the job-wide sum is the exact figure to compare with the operations; kills before a flush can only lower it.
    ledgerCompletedAllBatches: o.batches.reduce((n, b) => n + b.completed, 0),
    batches,
  };

  const windowMs = o.rateLimit.intervalSeconds * 1000;
  const starts = o.arrivals.filter(isNonReplayedStart).map((a) => a.at);
  const maxStarts = maxInAnyWindow(starts, windowMs);
  const rateRespected: Invariant = {
    ok: maxStarts <= o.rateLimit.startsPerInterval,
    maxStartsInAnyWindow: maxStarts,
    limit: o.rateLimit.startsPerInterval,
    windowSeconds: o.rateLimit.intervalSeconds,
    nonReplayedStarts: starts.length,
  };

  // Terminal = the consumer dead-lettered it on purpose, with a failureReason (a permanent provider answer, or the
  // deferral budget spent). Poison is rejected into the ledger, never dead-lettered; a message SQS moved after
  // maxReceiveCount (no failureReason: retryable failures exhausted) must be gone after the redrive.
  const withoutReason = o.dlq.filter((m) => !m.attributes.failureReason);
  const poisonRejected = new Set(o.rejectedMessageIds).size;
  const onlyTerminalFailuresInDlq: Invariant = {
    ok: withoutReason.length === 0 && poisonRejected === o.poisonInjected,
    dlqMessages: o.dlq.length,
    withFailureReason: o.dlq.length - withoutReason.length,
    withoutFailureReason: withoutReason.length,
    reasons: [...new Set(o.dlq.map((m) => m.attributes.failureReason).filter(Boolean))].slice(0, 5),
    poisonInjected: o.poisonInjected,
    poisonRejected,
  };

  const invariants = { effectsEqualUniqueOperations, nothingLost, rateRespected, onlyTerminalFailuresInDlq };
  return { ok: Object.values(invariants).every((i) => i.ok), invariants };
}
