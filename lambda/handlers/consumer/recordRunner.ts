// One planned record, run: it asks the invocation's pacing for its start (slot, key token, lease, the short wait), is
// claimed by operation ID and applied once through Powertools idempotency, and comes to an outcome: completed, a
// duplicate (the slot goes back to the pacer), deferred (a throttle, a missed slot), dead-lettered (a permanent
// error), or thrown for SQS to redeliver.
import type { BasePersistenceLayer } from '@aws-lambda-powertools/idempotency/persistence';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import type { Context, SQSRecord } from 'aws-lambda';
import { idempotencyKeyPrefix } from '../../core/idempotencyKey';
import { COMPLETED_BY_FIELD, type CompletedBy } from '../../core/ledgerContract';
import { PacedJobsError, PermanentError, ThrottledError } from '../../core/errors';
import type { AnyJob, ApplyResult } from '../../core/job';
import type { JobMessage } from '../../core/message';
import type { InvocationPacing, PacedStart, Pacer } from '../../core/pacing/pacer';
import type { BatchTally } from '../../adapters/ledger';
import { logger } from '../../adapters/observability';
import type { Accounting, RecordOutcome } from './accounting';
import type { Deferrer } from './deferrer';
import type { Plan } from './planner';

/** Set on results replayed from the idempotency store (never stored): the operation had already completed. */
const REPLAYED = '__replayed';
/** What the idempotency store keeps: the job's result, and who completed it (lambda/core/ledgerContract.ts). */
type StoredResult = ApplyResult & { [COMPLETED_BY_FIELD]?: CompletedBy };
type IdempotentResult = StoredResult & { [REPLAYED]?: true };

/** The claim took the record's start past its slot's margin: thrown with the claim held, so Powertools releases it. */
class SlotMissedError extends PacedJobsError {
  constructor(
    public readonly startAtMs: number,
    public readonly lateByMs: number,
  ) {
    super(`${lateByMs} ms past the slot`);
    this.name = 'SlotMissedError';
  }
}

export class InvalidApplyResultError extends PacedJobsError {
  constructor(
    message: string,
    public readonly operationId: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'InvalidApplyResultError';
  }
}

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
  /** The container's pacing: its clock, and its pace, which each record's cycle goes into. */
  pacer: Pick<Pacer, 'clock' | 'recordCycle' | 'recordClaim' | 'paceMs'>;
  /** A fixed time after which a record's claim and apply release the records behind it. @default see RELEASE_FLOOR_MS */
  releaseAfterMs?: number;
}

/** What one invocation gives each record it runs. */
export interface InvocationRun {
  context: Context;
  tally: BatchTally;
  /** The invocation's pacing: each record's start, and what the downstream made of it. */
  pacing: InvocationPacing;
  /**
   * Called once if a record's claim and apply run past releaseAfterMs, while they still run: the caller sends the
   * records behind it back to the queue, so other invocations can start them.
   */
  onOverrun?: () => void;
}

export class RecordRunner {
  private readonly config: IdempotencyConfig;
  private readonly applyIdempotent: (
    message: JobMessage,
    resource: Record<string, unknown>,
    context: Context,
    onTime: () => void,
  ) => Promise<IdempotentResult>;

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
    this.applyIdempotent = makeIdempotent(
      (message: JobMessage, resource: Record<string, unknown>, context: Context, onTime: () => void) =>
        this.applyOne(message, resource, context, onTime),
      {
        persistenceStore: options.persistenceStore,
        config: this.config,
        // The job name, not Powertools' default (the function name): a replaced function must still see its records.
        keyPrefix: idempotencyKeyPrefix(job.name),
      },
    ) as (
      message: JobMessage,
      resource: Record<string, unknown>,
      context: Context,
      onTime: () => void,
    ) => Promise<IdempotentResult>;
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
    const { pacer } = this.options;
    const endedMs = pacer.clock();
    const between = this.lastApplyEndedMs === undefined ? 0 : Math.max(0, readyAtMs - this.lastApplyEndedMs);
    pacer.recordCycle(between + (endedMs - applyStartedMs));
    this.lastApplyEndedMs = endedMs;
  }

  /** Runs once the claim is held: `onTime` throws SlotMissedError when the claim took the start past its slot. */
  private async applyOne(
    message: JobMessage,
    resource: Record<string, unknown>,
    context: Context,
    onTime: () => void,
  ): Promise<StoredResult> {
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

  /** How long a record's claim and apply may run before the records behind it are released (see RELEASE_FLOOR_MS). */
  releaseAfterMs(): number {
    const { releaseAfterMs, pacer } = this.options;
    return releaseAfterMs ?? Math.max(RELEASE_FLOOR_MS, RELEASE_PACE_MULTIPLE * pacer.paceMs());
  }

  async run(
    record: SQSRecord,
    plan: Extract<Plan, { kind: 'run' }>,
    invocation: InvocationRun,
  ): Promise<RecordOutcome> {
    const { tally, pacing } = invocation;
    const { message } = plan;
    pacing.runLeft--;
    const priority = message.backfill ? 'backfill' : 'live';
    const answer = await pacing.start({
      ...(plan.key !== undefined ? { key: plan.key } : {}),
      priority,
      ...(plan.behindLive ? { behindLive: true } : {}),
    });
    if (!('start' in answer)) {
      return this.options.deferrer.defer(message, { kind: 'paced', waitMs: answer.waitMs }, tally);
    }
    try {
      return await this.runStarted(record, plan, invocation, answer.start);
    } finally {
      await answer.start.end();
    }
  }

  /** The claim and apply of a record whose start has come, and its outcome. */
  private async runStarted(
    record: SQSRecord,
    plan: Extract<Plan, { kind: 'run' }>,
    invocation: InvocationRun,
    start: PacedStart,
  ): Promise<RecordOutcome> {
    const { context, tally, pacing, onOverrun } = invocation;
    const { accounting, deferrer, pacer } = this.options;
    const { message, resource } = plan;
    const { startAtMs, readyAtMs } = start;
    let result: IdempotentResult;
    start.use();
    const applyStartedMs = pacer.clock();
    // The claim's write comes between the slot and the downstream call: a slow one (a loaded table) would make the
    // start later than the window's margin absorbs. Checked with the claim held, so a start pushed past it is given up
    // and the claim released.
    const onTime = () => {
      pacer.recordClaim(pacer.clock() - applyStartedMs);
      if (start.missed()) throw new SlotMissedError(startAtMs, pacer.clock() - startAtMs);
    };
    // Cleared as soon as the claim and apply end: a timer that fires is one whose record still runs.
    const watchdog = onOverrun && setTimeout(onOverrun, this.releaseAfterMs());
    try {
      result = await this.applyIdempotent(message, resource, context, onTime);
    } catch (error) {
      if (error instanceof SlotMissedError) {
        // No downstream call was made: the slot counts as unused (it has passed; the pool drops it).
        start.giveBack();
        logger.warn('claim pushed the start past its slot; deferring', { startAtMs, lateByMs: error.lateByMs });
        return deferrer.defer(message, { kind: 'paced', waitMs: 0 }, tally);
      }
      const inProgress = (error as Error).name === 'IdempotencyAlreadyInProgressError';
      // Refused at the claim: no downstream call was made, so the slot is still free for the next record.
      if (inProgress) start.giveBack();
      else this.recordCycle(readyAtMs, applyStartedMs);
      if (error instanceof PermanentError) {
        pacing.report(plan.key, 'failure');
        return deferrer.deadLetter(record, message, error.message, tally, error.detail);
      }
      if (error instanceof ThrottledError) {
        // Powertools released the claim when apply threw, so the re-published message runs apply again.
        accounting.throttled(message, tally);
        pacing.report(plan.key, 'throttle');
        return deferrer.defer(message, { kind: 'throttled', error }, tally);
      }
      // Retryable, in progress elsewhere, or unknown: SQS redelivers it after the visibility timeout.
      if (inProgress)
        logger.warn('operation is in progress in another invocation; will retry', { error: error as Error });
      else {
        this.applyStarts.set(record, applyStartedMs);
        pacing.report(plan.key, 'failure');
      }
      // The consumer hands it back to SQS (Accounting.fail): counted there as a retry, or as dead-lettered on its last
      // receive, and logged there, once, with the apply's start.
      throw error;
    } finally {
      clearTimeout(watchdog);
    }
    if (result[REPLAYED]) {
      // Answered from the idempotency store: no downstream call was made, so the slot is still free for the next record.
      start.giveBack();
      return accounting.duplicate(message, tally, result[COMPLETED_BY_FIELD], result.outcome);
    }
    this.recordCycle(readyAtMs, applyStartedMs);
    pacing.report(plan.key, 'success');
    return accounting.completed(message, result.outcome, applyStartedMs, tally);
  }
}
