// Chaos harness, the verdict: the five invariants checked at the end of a run, each with the figures behind it.
// Pure: the run hands in what it observed (the job's effects as its fixture read them, its fake downstream's record if
// it has one, ledger items, DLQ contents). It names no job: operations and items are the fixture's keys.
import { AdmissionStatus, batchAccountedWithDuplicates, batchExact } from '../lambda/core/ledgerContract';
import { maxInAnyWindow, type DownstreamArrival, type DownstreamEffect, type EffectReading } from '../local/fixture';

export interface LedgerBatch {
  batchId: string;
  discovered: number;
  published: number;
  completed: number;
  /** Operations of the batch another batch completed first (resolveBatch); 0 when not given. */
  completedElsewhere?: number;
  /** Completions recovered from invocations killed before their ledger write; included in `completed`. */
  adopted?: number;
  duplicates: number;
  retries?: number;
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

/** A fake downstream's own record (local/fixture.ts FakeDownstream): every request, every effect, the replays. */
export interface DownstreamRecord {
  arrivals: readonly DownstreamArrival[];
  effects: readonly DownstreamEffect[];
  /** Requests answered from its idempotency store. */
  replays: number;
}

export interface Observations {
  /** Operations the run created (the fixture's seeded keys): each must end with exactly one effect or a terminal DLQ entry. */
  expectedOperations: string[];
  /** The job's effects as its fixture read them (session.effects). */
  effects: Pick<
    EffectReading,
    'effectsByOperation' | 'effectsByItem' | 'expectedItems' | 'starts' | 'unexpectedEffects'
  >;
  /**
   * The job's fake downstream, when its fixture offers one: its arrivals are the rate's starts (those not replayed),
   * and its replays of applied keys show where its idempotency store was the only guard. Absent: the fixture's `starts`.
   */
  downstream?: DownstreamRecord;
  rateLimit: { startsPerInterval: number; intervalSeconds: number };
  batches: LedgerBatch[];
  /** Distinct SQS message IDs the consumer rejected and kept for review (REJECTED# items). */
  rejectedMessageIds: string[];
  poisonInjected: number;
  /** Messages in the job queue at the end (visible, in flight or delayed): must be none. */
  queueLeft: number;
  /** The DLQ's contents at the end, after the redrive. */
  dlq: DlqMessage[];
  /** Operation keys named by DLQ messages at the end (the fixture's operationKeyOf of each message's resource). */
  dlqOperations: string[];
  /** The business date's audit at the end (`ops audit`), when the run took one. */
  audit?: {
    exact: boolean;
    missing: string[];
    discovered: number;
    completed: number;
    rejected: number;
    deadLettered: number;
  };
}

export interface Invariant {
  ok: boolean;
  [figure: string]: unknown;
}

export interface Verdict {
  ok: boolean;
  invariants: Record<
    'effectsEqualUniqueOperations' | 'nothingLost' | 'rateRespected' | 'onlyTerminalFailuresInDlq' | 'ledgerExact',
    Invariant
  >;
}

/** Arrivals that started work at the downstream: passed the quota, and were not answered from its idempotency store. */
export function isNonReplayedStart(a: DownstreamArrival): boolean {
  return !a.replayed && a.status !== 429 && a.status !== 409 && a.status !== 401 && a.status !== 400;
}

const sum = (m: ReadonlyMap<string, number>): number => [...m.values()].reduce((n, v) => n + v, 0);
const over = (m: ReadonlyMap<string, number> | undefined, limit: number): string[] =>
  [...(m ?? new Map<string, number>()).entries()].filter(([, n]) => n > limit).map(([id, n]) => `${id} x${n}`);

const hasEffectIn = (o: Observations) => (id: string) => (o.effects.effectsByOperation.get(id) ?? 0) > 0;

function effectsEqualUniqueOperations(o: Observations): Invariant {
  const expected = new Set(o.expectedOperations);
  const effectsPer = o.effects.effectsByOperation;
  const repeated = over(effectsPer, 1);
  // Where one operation touches several items, each item must be touched once: a second delete of one item is a
  // second effect even though the operation's own count says 1.
  const repeatedItems = over(o.effects.effectsByItem, 1);
  const unexpected = [
    ...new Set([...[...effectsPer.keys()].filter((id) => !expected.has(id)), ...o.effects.unexpectedEffects]),
  ];
  return {
    ok: repeated.length === 0 && repeatedItems.length === 0 && unexpected.length === 0,
    effects: sum(effectsPer),
    uniqueOperations: [...effectsPer.values()].filter((n) => n > 0).length,
    repeatedOperations: repeated.slice(0, 5),
    unexpectedEffects: unexpected.slice(0, 5),
    ...(o.effects.effectsByItem
      ? {
          itemEffects: sum(o.effects.effectsByItem),
          uniqueItems: o.effects.effectsByItem.size,
          repeatedItems: repeatedItems.slice(0, 5),
        }
      : {}),
    ...(o.downstream ? dedupFigures(o.downstream) : {}),
  };
}

/** One batch's ledger figures, and whether they add up. */
type BatchFigures = ReturnType<typeof batchFigures>[number];

// The ledger's exact equation can lose the counts of an invocation killed before its flush (those records come back
// as duplicates), so the batch check counts suppressed duplicates as done (batchAccountedWithDuplicates); the exact
// figures are reported too (batchExact). Both are lambda/core/ledgerContract.ts's, as ops status's are.
function batchFigures(batches: Observations['batches']) {
  return batches.map((b) => ({
    batchId: b.batchId,
    discovered: b.discovered,
    completed: b.completed,
    completedElsewhere: b.completedElsewhere ?? 0,
    adopted: b.adopted ?? 0,
    duplicates: b.duplicates,
    retries: b.retries ?? 0,
    rejected: b.rejected,
    deadLettered: b.deadLettered,
    admission: b.admission,
    exact: batchExact(b),
    reconciles: batchAccountedWithDuplicates(b),
  }));
}

function nothingLost(o: Observations, batches: BatchFigures[]): Invariant {
  const hasEffect = hasEffectIn(o);
  const inDlq = new Set(o.dlqOperations);
  const missing = o.expectedOperations.filter((id) => !hasEffect(id) && !inDlq.has(id));
  // An operation that touches several items is whole only when each of its items was touched (or it is in the DLQ).
  const missingItems = [...(o.effects.expectedItems ?? new Map<string, string>()).entries()]
    .filter(([item, operation]) => (o.effects.effectsByItem?.get(item) ?? 0) === 0 && !inDlq.has(operation))
    .map(([item]) => item);
  // A run whose chain stopped leaves its tail in the tables, unpublished: lost work even when another run of the same
  // date (a re-run) happened to publish those operations, so every run must have finished its admission.
  const unadmitted = o.batches
    .filter((b) => b.admission !== AdmissionStatus.complete)
    .map((b) => `${b.batchId} (${b.admission ?? 'no admission state'})`);
  return {
    ok:
      missing.length === 0 &&
      missingItems.length === 0 &&
      o.queueLeft === 0 &&
      batches.length > 0 &&
      batches.every((b) => b.reconciles) &&
      unadmitted.length === 0,
    operations: o.expectedOperations.length,
    withEffect: o.expectedOperations.filter(hasEffect).length,
    terminalInDlq: o.expectedOperations.filter((id) => !hasEffect(id) && inDlq.has(id)).length,
    missing: missing.length,
    missingExamples: missing.slice(0, 5),
    ...(o.effects.expectedItems
      ? {
          items: o.effects.expectedItems.size,
          missingItems: missingItems.length,
          missingItemExamples: missingItems.slice(0, 5),
        }
      : {}),
    queueLeft: o.queueLeft,
    runsNotFullyAdmitted: unadmitted.slice(0, 5),
    batchesExact: batches.filter((b) => b.exact).length,
    // A re-run's batch and the original share operations (each completes in whichever batch's message came first), so
    // the job-wide sum is the exact figure to compare with the operations; kills before a flush can only lower it.
    ledgerCompletedAllBatches: o.batches.reduce((n, b) => n + b.completed, 0),
    batches,
  };
}

function rateRespected(o: Observations): Invariant {
  const windowMs = o.rateLimit.intervalSeconds * 1000;
  // A fake downstream sees every attempt, failed ones too; without one, the fixture's starts are what the servers saw.
  const starts = o.downstream ? o.downstream.arrivals.filter(isNonReplayedStart).map((a) => a.at) : o.effects.starts;
  const maxStarts = maxInAnyWindow(starts, windowMs);
  return {
    ok: maxStarts <= o.rateLimit.startsPerInterval,
    maxStartsInAnyWindow: maxStarts,
    limit: o.rateLimit.startsPerInterval,
    windowSeconds: o.rateLimit.intervalSeconds,
    [o.downstream ? 'nonReplayedStarts' : 'starts']: starts.length,
  };
}

// Terminal = the consumer dead-lettered it on purpose, with a failureReason (a permanent downstream answer, or the
// deferral budget spent). Poison is rejected into the ledger, never dead-lettered; a message SQS moved after
// maxReceiveCount (no failureReason: retryable failures exhausted) must be gone after the redrive.
function onlyTerminalFailuresInDlq(o: Observations): Invariant {
  const withoutReason = o.dlq.filter((m) => !m.attributes.failureReason);
  const poisonRejected = new Set(o.rejectedMessageIds).size;
  return {
    ok: withoutReason.length === 0 && poisonRejected === o.poisonInjected,
    dlqMessages: o.dlq.length,
    withFailureReason: o.dlq.length - withoutReason.length,
    withoutFailureReason: withoutReason.length,
    reasons: [...new Set(o.dlq.map((m) => m.attributes.failureReason).filter(Boolean))].slice(0, 5),
    poisonInjected: o.poisonInjected,
    poisonRejected,
  };
}

// The audit trail is exact: every batch's discovered = completed + completedElsewhere + rejected + deadLettered, and
// the completions of all batches together are the operations that completed, each once (an invocation killed before
// its ledger write had its completions adopted; none was counted twice).
function ledgerExact(o: Observations, batches: BatchFigures[]): Invariant {
  const completedOperations = o.expectedOperations.filter(hasEffectIn(o)).length;
  const ledgerCompleted = o.batches.reduce((n, b) => n + b.completed, 0);
  const inexact = batches.filter((b) => !b.exact);
  return {
    ok:
      batches.length > 0 &&
      inexact.length === 0 &&
      ledgerCompleted === completedOperations &&
      (o.audit === undefined || o.audit.exact),
    batches: batches.length,
    batchesExact: batches.length - inexact.length,
    inexactBatches: inexact
      .slice(0, 5)
      .map(
        (b) =>
          `${b.batchId}: discovered ${b.discovered} != completed ${b.completed} + elsewhere ${b.completedElsewhere} + rejected ${b.rejected} + DLQ ${b.deadLettered}`,
      ),
    ledgerCompleted,
    completedOperations,
    adopted: o.batches.reduce((n, b) => n + (b.adopted ?? 0), 0),
    completedElsewhere: o.batches.reduce((n, b) => n + (b.completedElsewhere ?? 0), 0),
    retries: o.batches.reduce((n, b) => n + (b.retries ?? 0), 0),
    // The date as `ops audit` answers it, from the ledger and the idempotency records, operation by operation.
    ...(o.audit
      ? {
          auditExact: o.audit.exact,
          auditMissing: o.audit.missing.slice(0, 5),
          auditDiscovered: o.audit.discovered,
          auditCompleted: o.audit.completed,
          auditDeadLettered: o.audit.deadLettered,
        }
      : {}),
  };
}

/** The run's five invariants, each with the figures that show why it holds or not. */
export function checkInvariants(o: Observations): Verdict {
  const batches = batchFigures(o.batches);
  const invariants = {
    effectsEqualUniqueOperations: effectsEqualUniqueOperations(o),
    nothingLost: nothingLost(o, batches),
    rateRespected: rateRespected(o),
    onlyTerminalFailuresInDlq: onlyTerminalFailuresInDlq(o),
    ledgerExact: ledgerExact(o, batches),
  };
  return { ok: Object.values(invariants).every((i) => i.ok), invariants };
}

/**
 * The downstream's replays, and those for keys whose effect was already made: each of the latter was a second effect
 * that only the downstream's idempotency store prevented (the window between effect and completion record).
 */
function dedupFigures(d: DownstreamRecord): Record<string, number> {
  const effectKeys = new Set(d.effects.map((e) => e.idempotencyKey));
  const dedupOnlyGuard = d.arrivals.filter(
    (a) => a.replayed && a.idempotencyKey !== undefined && effectKeys.has(a.idempotencyKey),
  ).length;
  return { downstreamReplays: d.replays, dedupOnlyGuard };
}
