// One planned record, run: it takes its slot from the invocation's pool, waits for it (short waits only), is claimed by
// operation ID and applied once through Powertools idempotency, and comes to an outcome: completed, a duplicate (the
// slot goes back to the pool), deferred (a throttle, a missed slot), dead-lettered (a permanent error), or thrown for
// SQS to redeliver.
import type { BasePersistenceLayer } from '@aws-lambda-powertools/idempotency/persistence';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import type { Context, SQSRecord } from 'aws-lambda';
import { idempotencyKeyPrefix } from '../../core/idempotencyKey';
import { COMPLETED_BY_FIELD, type CompletedBy } from '../../core/ledgerContract';
import { PacedJobsError, PermanentError, ThrottledError } from '../../core/errors';
import type { AnyJob, ApplyResult } from '../../core/job';
import type { JobMessage } from '../../core/message';
import type { ApplyTimeEstimator } from '../../core/pacing/applyEstimator';
import { waitForSlot } from '../../core/pacing/sleep';
import type { KeyConcurrencyLimiter, KeyLease } from '../../adapters/keyConcurrency';
import type { KeyRateLimiter } from '../../adapters/keyRateLimiter';
import type { BatchTally } from '../../adapters/ledger';
import { logger } from '../../adapters/observability';
import type { Accounting, RecordOutcome } from './accounting';
import type { Deferrer } from './deferrer';
import type { Plan } from './planner';
import type { SlotPool, SlotPriority } from './slotPool';

/** Set on results replayed from the idempotency store (never stored): the operation had already completed. */
const REPLAYED = '__replayed';
/** What the idempotency store keeps: the job's result, and who completed it (lambda/core/ledgerContract.ts). */
type StoredResult = ApplyResult & { [COMPLETED_BY_FIELD]?: CompletedBy };
type IdempotentResult = StoredResult & { [REPLAYED]?: true };

/** The claim took the record's start past its slot's margin: thrown with the claim held, so Powertools releases it. */
class SlotMissedError extends PacedJobsError {
  constructor(public readonly startAtMs: number, public readonly lateByMs: number) {
    super(`${lateByMs} ms past the slot`);
    this.name = 'SlotMissedError';
  }
}

export class InvalidApplyResultError extends PacedJobsError {
  constructor(message: string, public readonly operationId: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'InvalidApplyResultError';
  }
}

/** What the downstream told one invocation, for the adaptive rates (the job's, and each key's). */
export interface RateSignals {
  throttles: number;
  successes: number;
  /** Keys whose requests the downstream throttled, and keys whose requests succeeded (per-key limits only). */
  throttledKeys: Set<string>;
  succeededKeys: Set<string>;
}

/** The per-key limiter as the runner uses it (lambda/adapters/keyRateLimiter.ts). */
export type KeyLimiter = Pick<KeyRateLimiter, 'field' | 'acquireAt' | 'queueBehind' | 'throttled' | 'succeeded'>;

/**
 * Longest wait inside the function for a busy key's next token: a key whose token is this close is waited for (its
 * record takes a job-wide slot at the key's moment) rather than sent round the queue, which would lose the key's
 * tokens to the trip. Short, so a noisy key's records do not hold the consumers that quiet keys' records need.
 */
export const KEY_SHORT_WAIT_MS = 2_000;

/** The per-key concurrency limit as the runner uses it (lambda/adapters/keyConcurrency.ts). */
export type KeyConcurrency = Pick<KeyConcurrencyLimiter, 'field' | 'acquire' | 'release'>;

/**
 * A lease outlives its invocation by this much: the invocation's end is when a dead worker's lease frees its key, and
 * the margin covers clocks that disagree between containers.
 */
export const LEASE_MARGIN_MS = 5_000;

/** The wait a record is deferred by when its key's limiter cannot be asked. */
const KEY_LIMITER_DOWN_WAIT_MS = 1_000;

/**
 * A record's claim and apply running this long hold the records behind it for no good reason: they are released to
 * the queue (RecordRunner.run's onOverrun). At least RELEASE_FLOOR_MS, so a call that is merely slow (a provider's
 * latency spike, an SDK retry) never sends its batch round the queue; else RELEASE_PACE_MULTIPLE times the container's
 * pace (ApplyTimeEstimator.paceMs: its 75th percentile, which the hangs it measures do not move), so a job whose calls
 * take seconds keeps its batches. Past that, the call is most likely hanging to its timeout, and every record behind it
 * would wait as long, then maybe find too little of the invocation left and wait out the visibility timeout as well.
 */
export const RELEASE_FLOOR_MS = 2_000;
export const RELEASE_PACE_MULTIPLE = 8;

export interface RecordRunnerOptions {
  job: AnyJob;
  jobDeps: unknown;
  persistenceStore: BasePersistenceLayer;
  /** How long a completed operation stays claimed. */
  idempotencyTtlSeconds: number;
  accounting: Accounting;
  deferrer: Deferrer;
  estimator: ApplyTimeEstimator;
  /** How late a record may start after its slot. */
  lateToleranceMs: number;
  /** The per-key limit, when the job has one: a record starts only when its key has a token at its slot. */
  keys?: KeyLimiter;
  /** The per-key concurrency limit, when the job has one: a record starts only when its key has a free lease. */
  keyConcurrency?: KeyConcurrency;
  /** The clock the limiter's start times are on, epoch ms. */
  clock: () => number;
  /** Waits on `clock`'s time until a record's slot. @default the real timer (core/pacing/sleep.ts) */
  sleep?: (ms: number) => Promise<void>;
  /** A fixed time after which a record's claim and apply release the records behind it. @default see RELEASE_FLOOR_MS */
  releaseAfterMs?: number;
}

/** What one invocation gives each record it runs. */
export interface InvocationRun {
  context: Context;
  tally: BatchTally;
  pool: SlotPool;
  signals: RateSignals;
  /**
   * Called once if a record's claim and apply run past releaseAfterMs, while they still run: the caller sends the
   * records behind it back to the queue, so other invocations can start them.
   */
  onOverrun?: () => void;
}

export class RecordRunner {
  private readonly config: IdempotencyConfig;
  private readonly applyIdempotent: (message: JobMessage, resource: Record<string, unknown>, context: Context, onTime: () => void) => Promise<IdempotentResult>;

  constructor(private readonly options: RecordRunnerOptions) {
    const { job } = options;
    this.config = new IdempotencyConfig({
      // The operation ID in the body, never the SQS message ID: a DLQ redrive gives the message a new one.
      eventKeyJmesPath: 'operationId',
      throwOnNoIdempotencyKey: true,
      expiresAfterSeconds: options.idempotencyTtlSeconds,
      // Called only when a COMPLETED record is found, i.e. a duplicate; the marker never reaches the store.
      responseHook: (response) => ({ ...(response as object), [REPLAYED]: true }),
    });
    this.applyIdempotent = makeIdempotent((message: JobMessage, resource: Record<string, unknown>, context: Context, onTime: () => void) => this.applyOne(message, resource, context, onTime), {
      persistenceStore: options.persistenceStore,
      config: this.config,
      // The job name, not Powertools' default (the function name): a replaced function must still see its records.
      keyPrefix: idempotencyKeyPrefix(job.name),
    }) as (message: JobMessage, resource: Record<string, unknown>, context: Context, onTime: () => void) => Promise<IdempotentResult>;
  }

  /**
   * When this container's last apply ended, in this invocation: the time from there to the next record's start (its
   * slot, key and claim handling, the accounting, a deferral sent between) is part of the container's pace, so it goes
   * into the next apply's sample. Undefined at an invocation's start: the wait for the event is not work.
   */
  private lastApplyEndedMs: number | undefined;

  /** When each record whose apply threw began it (epoch ms), for its failure's log line (Accounting.fail). */
  private readonly applyStarts = new WeakMap<SQSRecord, number>();

  /** When `record`'s apply began, if it ran and threw (the claim was taken: a downstream call may have been made). */
  failedApplyStartedAt(record: SQSRecord): number | undefined {
    return this.applyStarts.get(record);
  }

  /** Gives Powertools the invocation's context (its remaining time bounds an in-progress claim). */
  registerContext(context: Context): void {
    this.config.registerLambdaContext(context);
    this.lastApplyEndedMs = undefined;
  }

  /** One record's time from the previous apply's end (less the slot wait) to its own apply's end. */
  private recordCycle(readyAtMs: number, applyStartedMs: number): void {
    const { estimator, clock } = this.options;
    const endedMs = clock();
    const between = this.lastApplyEndedMs === undefined ? 0 : Math.max(0, readyAtMs - this.lastApplyEndedMs);
    estimator.record(between + (endedMs - applyStartedMs));
    this.lastApplyEndedMs = endedMs;
  }

  /** Runs once the claim is held: `onTime` throws SlotMissedError when the claim took the start past its slot. */
  private async applyOne(message: JobMessage, resource: Record<string, unknown>, context: Context, onTime: () => void): Promise<StoredResult> {
    onTime();
    const { job, jobDeps } = this.options;
    const result = (await job.apply(jobDeps, {
      operationId: message.operationId,
      batchId: message.batchId,
      businessDate: message.businessDate,
      resource,
      remainingTimeMs: () => context.getRemainingTimeInMillis(),
    })) as ApplyResult | undefined;
    if (result?.outcome !== 'applied' && result?.outcome !== 'already-done') {
      throw new InvalidApplyResultError(
        `job "${job.name}" returned ${JSON.stringify(result)} for ${message.operationId}; apply must return { outcome: 'applied' | 'already-done' }`,
        message.operationId,
      );
    }
    // Kept with the completion, so a later delivery knows which batch and invocation completed it (the ledger's
    // exactness rests on it: lambda/core/ledgerContract.ts resolveBatch).
    return { ...result, [COMPLETED_BY_FIELD]: { batchId: message.batchId, invocationId: context.awsRequestId } };
  }

  /**
   * The key's answer for a start at `atMs`, the record's job-wide slot. A key whose next token is within
   * KEY_SHORT_WAIT_MS is waited for, on a job-wide slot from the token's moment; a busy key's record otherwise takes its
   * place in the key's queue (queueBehind), so a key's backlog comes back spread at the key's rate instead of all at
   * its next token. A limiter that cannot be asked defers the record briefly. Refused, the slot at `atMs` is back in
   * the pool for the next record.
   */
  private async keyAnswer(key: string, atMs: number, pool: SlotPool, priority: SlotPriority): Promise<{ granted: true; startAtMs: number } | { granted: false; waitMs: number }> {
    const keys = this.options.keys as KeyLimiter;
    let slotReturned = false;
    try {
      const answer = await keys.acquireAt(key, atMs);
      if (answer.granted) return { granted: true, startAtMs: atMs };
      // Refused at this slot: it goes back to the pool for the next record.
      pool.putBack(atMs);
      slotReturned = true;
      // The key's token is close: a job-wide slot from its moment, then the key's token at that slot (the job-wide slot
      // is the one given back if another container took the key's token meanwhile: the key's are the scarcer).
      if (answer.waitMs <= Math.min(KEY_SHORT_WAIT_MS, pool.maxWaitMs(priority))) {
        const slot = await pool.slotFrom(atMs + answer.waitMs, priority);
        if (slot !== undefined) {
          if ((await keys.acquireAt(key, slot)).granted) return { granted: true, startAtMs: slot };
          pool.putBack(slot);
        }
      }
      return { granted: false, waitMs: Math.max(answer.waitMs, await keys.queueBehind(key)) };
    } catch (error) {
      logger.warn('per-key rate limiter unavailable; deferring', { key, error: error as Error });
      if (!slotReturned) pool.putBack(atMs);
      return { granted: false, waitMs: KEY_LIMITER_DOWN_WAIT_MS };
    }
  }

  /** A lease on the key's concurrency until the invocation must have ended, or how long to wait for one. */
  private async keyLease(key: string, context: Context): Promise<{ lease: KeyLease } | { waitMs: number }> {
    const { clock } = this.options;
    try {
      const answer = await (this.options.keyConcurrency as KeyConcurrency).acquire(key, clock() + context.getRemainingTimeInMillis() + LEASE_MARGIN_MS);
      return answer.granted ? { lease: answer.lease } : { waitMs: answer.waitMs };
    } catch (error) {
      logger.warn('per-key concurrency limiter unavailable; deferring', { key, error: error as Error });
      return { waitMs: KEY_LIMITER_DOWN_WAIT_MS };
    }
  }

  private async releaseLease(lease: KeyLease): Promise<void> {
    try {
      await (this.options.keyConcurrency as KeyConcurrency).release(lease);
    } catch (error) {
      // The lease expires with the invocation: the key is only held longer, never over its limit.
      logger.warn('per-key concurrency lease could not be released; it expires with the invocation', { key: lease.key, error: error as Error });
    }
  }

  /** How long a record's claim and apply may run before the records behind it are released (see RELEASE_FLOOR_MS). */
  releaseAfterMs(): number {
    return this.options.releaseAfterMs ?? Math.max(RELEASE_FLOOR_MS, RELEASE_PACE_MULTIPLE * this.options.estimator.paceMs());
  }

  async run(record: SQSRecord, plan: Extract<Plan, { kind: 'run' }>, invocation: InvocationRun): Promise<RecordOutcome> {
    const { context, tally, pool } = invocation;
    const { deferrer } = this.options;
    const { message } = plan;
    pool.runLeft--;
    const slot = plan.behindLive ? await pool.nextBackfill() : await pool.next(message.backfill ? 'backfill' : 'live');
    if (!('startAtMs' in slot)) return deferrer.defer(message, { kind: 'paced', waitMs: slot.waitMs }, tally);
    const { startAtMs } = slot;
    let lease: KeyLease | undefined;
    if (this.options.keyConcurrency && plan.key !== undefined) {
      // The lease first: it is the one given back when the key's rate then refuses the start.
      const leased = await this.keyLease(plan.key, context);
      if (!('lease' in leased)) {
        pool.putBack(startAtMs);
        return deferrer.defer(message, { kind: 'paced', waitMs: leased.waitMs }, tally);
      }
      lease = leased.lease;
    }
    try {
      return await this.runHeld(record, plan, invocation, startAtMs);
    } finally {
      if (lease) await this.releaseLease(lease);
    }
  }

  private async runHeld(record: SQSRecord, plan: Extract<Plan, { kind: 'run' }>, invocation: InvocationRun, slotAtMs: number): Promise<RecordOutcome> {
    const { context, tally, pool, signals, onOverrun } = invocation;
    const { accounting, deferrer, lateToleranceMs, clock, sleep } = this.options;
    const { message, resource } = plan;
    let startAtMs = slotAtMs;
    if (this.options.keys && plan.key !== undefined) {
      // The key's token is for the job-wide slot's very moment, so both limits hold for the start. A busy key defers
      // its record by its place in the key's queue, and the slot goes back to the pool for the next record of another key.
      const answer = await this.keyAnswer(plan.key, slotAtMs, pool, message.backfill ? 'backfill' : 'live');
      // A refused key has given the slot back to the pool (keyAnswer).
      if (!answer.granted) {
        return deferrer.defer(message, { kind: 'paced', waitMs: answer.waitMs }, tally);
      }
      startAtMs = answer.startAtMs;
    }
    // Short waits only (the block was bounded by shortWaitMs and the remaining time); each wait is one timer, no loop.
    // Pacing off: "now" is not a slot to be late for.
    const readyAtMs = clock();
    if (pool.paced && !(await waitForSlot(startAtMs, lateToleranceMs, clock, sleep))) {
      // Starting now would bunch this start with the slots after it: give the slot up, unclaimed.
      logger.warn('woke too late for the rate-limit slot; deferring', { startAtMs, lateByMs: clock() - startAtMs });
      return deferrer.defer(message, { kind: 'paced', waitMs: 0 }, tally);
    }
    let result: IdempotentResult;
    pool.markUsed();
    const applyStartedMs = clock();
    // The claim's write comes between the slot and the downstream call: a slow one (a loaded table) would make the
    // start later than the window's margin absorbs (half of it is the late tolerance, the other half is for the claim
    // and the request's way). Checked with the claim held, so a start pushed past it is given up and the claim released.
    const onTime = () => {
      const lateByMs = clock() - startAtMs;
      if (pool.paced && lateByMs > 2 * lateToleranceMs) throw new SlotMissedError(startAtMs, lateByMs);
    };
    // Cleared as soon as the claim and apply end: a timer that fires is one whose record still runs.
    const watchdog = onOverrun && setTimeout(onOverrun, this.releaseAfterMs());
    try {
      result = await this.applyIdempotent(message, resource, context, onTime);
    } catch (error) {
      if (error instanceof SlotMissedError) {
        // No downstream call was made: the slot counts as unused (it has passed; the pool drops it).
        pool.giveBack(startAtMs);
        logger.warn('claim pushed the start past its slot; deferring', { startAtMs, lateByMs: error.lateByMs });
        return deferrer.defer(message, { kind: 'paced', waitMs: 0 }, tally);
      }
      const inProgress = (error as Error).name === 'IdempotencyAlreadyInProgressError';
      // Refused at the claim: no downstream call was made, so the slot is still free for the next record.
      if (inProgress) pool.giveBack(startAtMs);
      else this.recordCycle(readyAtMs, applyStartedMs);
      if (error instanceof PermanentError) return deferrer.deadLetter(record, message, error.message, tally, error.detail);
      if (error instanceof ThrottledError) {
        // Powertools released the claim when apply threw, so the re-published message runs apply again.
        accounting.throttled(message, tally);
        signals.throttles++;
        if (plan.key !== undefined) signals.throttledKeys.add(plan.key);
        return deferrer.defer(message, { kind: 'throttled', error }, tally);
      }
      // Retryable, in progress elsewhere, or unknown: SQS redelivers it after the visibility timeout.
      if (inProgress) logger.warn('operation is in progress in another invocation; will retry', { error: error as Error });
      else this.applyStarts.set(record, applyStartedMs);
      // The consumer hands it back to SQS (Accounting.fail): counted there as a retry, or as dead-lettered on its last
      // receive, and logged there, once, with the apply's start.
      throw error;
    } finally {
      clearTimeout(watchdog);
    }
    if (result[REPLAYED]) {
      // Answered from the idempotency store: no downstream call was made, so the slot is still free for the next record.
      pool.giveBack(startAtMs);
      return accounting.duplicate(message, tally, result[COMPLETED_BY_FIELD], result.outcome);
    }
    this.recordCycle(readyAtMs, applyStartedMs);
    signals.successes++;
    if (plan.key !== undefined) signals.succeededKeys.add(plan.key);
    return accounting.completed(message, result.outcome, applyStartedMs, tally);
  }
}
