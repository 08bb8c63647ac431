// Chaos harness, the producer's faults: kills a producer invocation (a direct step 0 or an admission step) between the
// requests of a page it publishes, makes one admission step fail on every receive until SQS dead-letters it, and finds
// the gap such a lost step leaves in the chain (the harness then recovers it as an operator would). Pure but for the
// kill handles the local runtime passes in.
import type { InvocationHandle } from '../local/lambdaRuntime';
import { makeBatchId } from '../lambda/core/businessDate';
import { stalledSince } from '../lambda/core/admission';
import { admissionStep, admissionStepSchema } from '../lambda/core/admissionStep';
import { batchIdOf } from '../lambda/core/ledgerContract';
import type { Prng } from './prng';

/** A ledger item the harness cannot build a recovery step from. */
export class ChainRecoveryError extends Error {
  constructor(
    message: string,
    public readonly batchId: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ChainRecoveryError';
  }
}

/** What the harness counts of the producer's faults, for the reports. */
export interface ProducerFaultCounts {
  /** Producer invocations chosen, at their first page, to be killed after their first or second SendMessageBatch call. */
  killsArmed: number;
  /** Chosen invocations still running at that call, and killed there: mid-publish, their page not committed. */
  killsMidPublish: number;
  /** Of killsMidPublish, direct step-0 invocations (the schedule's), recovered by their async retry's takeover message. */
  killsMidPublishDirect: number;
  /** Admission steps chosen to fail on every receive. */
  stepsDoomed: number;
  /** Receives of those steps killed at once (maxReceiveCount each, when SQS dead-letters them). */
  doomedReceivesKilled: number;
  /** Step messages in the producer DLQ at the end (SQS's own count). */
  stepsDeadLettered: number;
  /** Step messages the harness sent, as the operator, to chains it found stopped. */
  recoveredChains: number;
  /** Schedule deliveries fired a second time for the same scheduled time (the same batch). */
  duplicateSchedules: number;
  /** Producer messages published again for a batch that had published them (pages re-published after kills). */
  republishedMessages: number;
  /** Admission steps delivered to the producer from its admission queue (context, not a fault). */
  admissionStepsDelivered: number;
}

export const emptyProducerFaultCounts = (): ProducerFaultCounts => ({
  killsArmed: 0,
  killsMidPublish: 0,
  killsMidPublishDirect: 0,
  stepsDoomed: 0,
  doomedReceivesKilled: 0,
  stepsDeadLettered: 0,
  recoveredChains: 0,
  duplicateSchedules: 0,
  republishedMessages: 0,
  admissionStepsDelivered: 0,
});

/** A producer invocation, as its event tells: a direct step 0 (schedule, manual, catch-up) or an admission step. */
export type ProducerInvocation =
  | { kind: 'direct'; batchId: string }
  | { kind: 'step'; batchId: string; step: number; messageId: string; receiveCount: number };

/** The batch and step of an admission-step message body; undefined for any other body. */
export function admissionStepOf(body: string): { batchId: string; step: number } | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    // Not JSON: the producer fails it as invalid; nothing for the harness to aim at.
    return undefined;
  }
  const parsed = admissionStepSchema.safeParse(raw);
  return parsed.success ? { batchId: parsed.data.batchId, step: parsed.data.step } : undefined;
}

/**
 * Reads a producer event the way the producer does: an SQS event of one admission step, or a direct event whose batch
 * the producer derives from its scheduled time. Undefined for what names no batch (a manual run without scheduled
 * time or batchId gets a random one), or for a body that is not a step.
 */
export function producerInvocationOf(event: unknown, jobName: string): ProducerInvocation | undefined {
  const e = event as {
    Records?: { messageId?: string; body?: string; attributes?: { ApproximateReceiveCount?: string } }[];
  } & Record<string, unknown>;
  if (Array.isArray(e?.Records)) {
    const record = e.Records[0];
    const step = admissionStepOf(record?.body ?? '');
    return (
      step && {
        kind: 'step',
        ...step,
        messageId: String(record.messageId),
        receiveCount: Number(record.attributes?.ApproximateReceiveCount ?? 1),
      }
    );
  }
  if (typeof e?.batchId === 'string') return { kind: 'direct', batchId: e.batchId };
  if (typeof e?.scheduledTime === 'string' && typeof e.businessDate === 'string') {
    return { kind: 'direct', batchId: makeBatchId(jobName, e.businessDate, new Date(e.scheduledTime)) };
  }
  return undefined;
}

/**
 * A run-ledger item's admission facts (a batch item, ledgerKeys.batch in lambda/core/ledgerContract.ts), as DynamoDB
 * returns them.
 */
export interface RunLedgerItem {
  /** The batch ID (the item's sort key): read it with batchIdOf. */
  sk: string;
  admission?: string;
  step?: number;
  nextStepAt?: string;
  startedAt?: string;
  leaseUntilMs?: number;
  businessDate?: string;
  scheduledTime?: string;
}

/**
 * Runs whose chain has stopped, as the ledger shows it: still admitting, the next step due (`nextStepAt`, or the start
 * for a step 0 that never ended) more than `graceMs` ago, and no live lease. The caller checks that the admission queue
 * holds nothing and no producer runs: then nothing will ever take that step.
 */
export function stoppedChains(items: RunLedgerItem[], nowMs: number, graceMs: number): RunLedgerItem[] {
  return items.filter((i) => typeof i.step === 'number' && stalledSince(i, nowMs, graceMs) !== undefined);
}

/** The recovery the contract names for a lost chain: a step message for the run's current step. */
export function recoveryStepBody(item: RunLedgerItem): string {
  if (typeof item.step !== 'number' || !item.businessDate) {
    throw new ChainRecoveryError(
      `ledger item ${batchIdOf(item)} has no admission step or business date to recover the chain from`,
      batchIdOf(item),
    );
  }
  return JSON.stringify(
    admissionStep({
      batchId: batchIdOf(item),
      businessDate: item.businessDate,
      step: item.step,
      scheduledTime: item.scheduledTime,
    }),
  );
}

export interface ProducerFaultOptions {
  jobName: string;
  /**
   * Per producer invocation that publishes (the first attempt of a direct event, the first receive of a step): kill it
   * right after its first or second SendMessageBatch call of a page.
   */
  killRate: number;
  /** Admission steps to make fail on every receive: the first continuations delivered while the faults are on. */
  deadLetters: number;
  dice: Pick<Prng, 'int' | 'chance'>;
  /** While false, nothing new is armed or doomed (a doomed step stays doomed: it must reach the DLQ). */
  isOn: () => boolean;
}

/** The invocation a run's next page comes from, as far as the harness can tell. */
interface Candidate {
  handle: InvocationHandle;
  direct: boolean;
  /** The kill was decided (at its first page), and it is to come after this many more calls; undefined: spared. */
  decided: boolean;
  callsLeft?: number;
}

/** Decides the producer's kills and doomed steps as invocations start and pages go out, and counts them. */
export class ProducerFaultInjector {
  public readonly counts = emptyProducerFaultCounts();
  private readonly candidates = new Map<string, Candidate>();
  private readonly doomed = new Set<string>();
  private readonly exempt = new Set<string>();
  private readonly directEvents = new WeakSet<object>();
  private readonly published = new Map<string, number>();
  private deadLettersLeft: number;

  constructor(private readonly options: ProducerFaultOptions) {
    this.deadLettersLeft = options.deadLetters;
    // This draw once chose the step to doom from (1 or 2); the doomed step is no longer chosen by number (onInvoke says
    // why), but the kills' draws follow it: still drawn, so a seed's kills draw the same numbers as before.
    options.dice.int(1, 2);
  }

  /** A step message the harness sent itself (a recovery): never doomed. */
  exemptMessage(messageId: string): void {
    this.exempt.add(messageId);
  }

  /** The runtime's onInvoke hook, for the producer's invocations. */
  onInvoke(event: unknown, handle: InvocationHandle): void {
    const inv = producerInvocationOf(event, this.options.jobName);
    if (!inv) return;
    if (inv.kind === 'step') {
      this.counts.admissionStepsDelivered++;
      if (this.doomed.has(inv.messageId)) {
        if (handle.kill()) this.counts.doomedReceivesKilled++;
        return;
      }
      // First receive only: a redelivered step is the recovery of an earlier kill, left to recover.
      if (inv.receiveCount !== 1) return;
      // The first continuation delivered (step 1 on, never step 0: a lost step 0 leaves no nextStepAt, and the
      // schedule's own retries cover it), of whichever run. Not a step chosen by number: how many steps a run takes is
      // timing, not the seed's. The schedule's run and its re-run discover the same date's records, and a step admits at
      // most a horizon's work, so a run whose step a kill holds up for a visibility timeout finds much of its work taken
      // by the other run meanwhile, and ends a step or two early. A later step chosen up front (step 2) then came in
      // neither run (each ended by step 1), and nothing was doomed. Some continuation comes whenever the date holds more
      // than the runs' step 0s admit, and a doom is decided at a step's first receive, so the first one is always there.
      if (this.options.isOn() && this.deadLettersLeft > 0 && inv.step >= 1 && !this.exempt.has(inv.messageId)) {
        this.deadLettersLeft--;
        this.doomed.add(inv.messageId);
        this.counts.stepsDoomed++;
        if (handle.kill()) this.counts.doomedReceivesKilled++;
        return;
      }
    } else {
      // Lambda retries a failed async event with the same event: only its first attempt is a candidate, so a killed
      // step 0 always has a retry left to leave its takeover message.
      if (typeof event !== 'object' || event === null || this.directEvents.has(event)) return;
      this.directEvents.add(event);
    }
    // One candidate per run at a time: two invocations of one run at once are a holder and a copy the lease turns
    // away, and the first to start is the one that publishes.
    const live = this.candidates.get(inv.batchId);
    if (live && !live.handle.ended) return;
    this.candidates.set(inv.batchId, { handle, direct: inv.kind === 'direct', decided: false });
  }

  /** One SendMessageBatch call of fresh producer messages of `batchId` reached the work queue. */
  onPublish(batchId: string, operationIds: string[]): void {
    for (const id of operationIds) {
      const key = `${batchId}|${id}`;
      const n = (this.published.get(key) ?? 0) + 1;
      this.published.set(key, n);
      if (n > 1) this.counts.republishedMessages++;
    }
    const c = this.candidates.get(batchId);
    if (!c || c.handle.ended) return;
    // Decided at the invocation's first page, so the rate counts invocations that publish, not the many that find
    // the queue full and admit nothing.
    if (!c.decided) {
      c.decided = true;
      if (!this.options.isOn() || !this.options.dice.chance(this.options.killRate)) return;
      c.callsLeft = this.options.dice.int(1, 2);
      this.counts.killsArmed++;
    }
    if (c.callsLeft === undefined || --c.callsLeft > 0) return;
    this.candidates.delete(batchId);
    // Now, in the SQS server's answer to that call: the page's commit goes through DynamoDB on this same thread, so it
    // cannot have happened yet. The page stays uncommitted, and the step that takes over publishes it again.
    if (!c.handle.kill()) return;
    this.counts.killsMidPublish++;
    if (c.direct) this.counts.killsMidPublishDirect++;
  }
}

/**
 * The producer's fresh messages in a SendMessageBatch request body: those without `attempt` (every consumer deferral
 * sets it), grouped by batch. Anything unreadable is skipped: the duplicate injector reports unreadable requests.
 */
export function producerMessagesByBatch(entries: { MessageBody?: string }[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const e of entries) {
    try {
      const m = JSON.parse(e.MessageBody ?? '') as { batchId?: unknown; operationId?: unknown; attempt?: unknown };
      if (typeof m.batchId !== 'string' || typeof m.operationId !== 'string' || m.attempt !== undefined) continue;
      out.set(m.batchId, [...(out.get(m.batchId) ?? []), m.operationId]);
    } catch {
      // A poison body or a non-message: not the producer's.
      continue;
    }
  }
  return out;
}
