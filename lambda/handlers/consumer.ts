// The consumer Lambda: one SQS batch in; every record validated, one block of rate-limit slots taken for the valid ones,
// each granted record claimed by operation ID, applied once at its slot and acknowledged; the rest deferred unclaimed.
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import type { BasePersistenceLayer } from '@aws-lambda-powertools/idempotency/persistence';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { EnvVar } from '../core/constants';
import { idempotencyKeyPrefix } from '../core/idempotencyKey';
import { COMPLETED_BY_FIELD, deadLetterEntry, ledgerEntry, type CompletedBy } from '../core/ledgerContract';
import { PermanentError, ThrottledError } from '../core/errors';
import type { AnyJob, ApplyResult } from '../core/job';
import { boundReasons, idSchema, parseMessage, serializeMessage, type JobMessage } from '../core/message';
import { gcraLimits } from '../core/pacing/gcra';
import { waitForSlot } from '../core/pacing/sleep';
import { requireEnv } from '../core/settings';
import { dynamoClient } from '../adapters/clients';
import { BatchTally, DynamoLedger, type Ledger } from '../adapters/ledger';
import { DynamoCompletedLookup, type CompletedLookup } from '../adapters/completedOperations';
import { bindJob, count, flushMetrics, logger, MetricName, milliseconds, withLogKeys } from '../adapters/observability';
import { AdaptiveDynamoDbRateLimiter, type RateFeedback } from '../adapters/adaptiveRateLimiter';
import type { RateLimiter } from '../adapters/rateLimiter';
import { PublishError, SqsPublisher, type OutgoingMessage, type Publisher } from '../adapters/sqsPublisher';
import { createDeferralPolicy, defaultDeferralPolicy, type DeferralCause, type DeferralPolicy } from './deferral';
import type { JobModuleLoader } from './jobLoader';
import { loadJobRuntime, pacingSettings, requirePositiveInt } from './runtime';

/** How the consumer spends its time on the shared limiter. */
export interface ConsumerPacingOptions {
  /** The limiter item starts are counted on (one per downstream). @default the job name */
  key?: string;
  /** Longest wait for a slot spent inside the function; records whose slot would be later are deferred. @default 10000 */
  shortWaitMs?: number;
  /**
   * Time kept back from the invocation's remaining time for the last record's apply and the acknowledgement: no slot is
   * taken later than remaining time minus this. @default 5000, or a quarter of the invocation's time when that is less
   * (a short timeout would otherwise spend half its time on the reserve and defer what it could have waited for)
   */
  reserveMs?: number;
  /**
   * How late a record may start after its slot before the slot is given up and the record deferred (waitForSlot).
   * Keep it below the limiter's safetyMarginMs. @default 0
   */
  lateToleranceMs?: number;
  /**
   * The expected spacing between starts on the key (the limiter's emission interval). Records beyond the grant are
   * deferred by the limiter's hint plus their position times this, so they do not all come back together. @default 0
   */
  spacingMs?: number;
  /** The clock the limiter's start times are on, epoch ms. @default Date.now */
  clock?: () => number;
}

export interface ConsumerOptions {
  job: AnyJob;
  jobDeps: unknown;
  /** This job's queue: deferred messages are re-published here. */
  queueUrl: string;
  /** Permanent failures are sent here with their reason. */
  dlqUrl: string;
  idempotencyTableName: string;
  /** How long a completed operation stays claimed; must outlive queue plus DLQ retention so a redrive is a no-op. */
  idempotencyTtlSeconds: number;
  /**
   * The queue's maxReceiveCount: a record that fails on its last allowed receive is counted as dead-lettered in the
   * ledger (SQS, not the consumer, moves it), so every batch still reconciles. Unset: such records are not counted.
   */
  maxReceiveCount?: number;
  maxMessageBytes: number;
  ledger: Ledger;
  /**
   * The fleet-wide limiter; one block of slots per invocation. Undefined: pacing is off (the job's `pacing: false`), no
   * limiter I/O, and only the concurrency cap bounds the downstream.
   */
  limiter: RateLimiter | undefined;
  /**
   * Told once per invocation whether the downstream throttled (any 429/503) or not (some success), so a shared
   * adaptive rate can follow the provider's real tolerance. @default none: the rate stays as configured
   */
  rateFeedback?: RateFeedback;
  pacing?: ConsumerPacingOptions;
  /** @default an SqsPublisher on the shared client */
  publisher?: Publisher;
  /** @default DynamoDBPersistenceLayer on `idempotencyTableName` */
  persistenceStore?: BasePersistenceLayer;
  /** @default defaultDeferralPolicy */
  deferralPolicy?: DeferralPolicy;
  /**
   * Asked for the due records before they take slots: an operation already COMPLETED is a duplicate that needs no slot.
   * @default a DynamoCompletedLookup on `idempotencyTableName`
   */
  completedLookup?: CompletedLookup;
  /** @default () => new Date() */
  now?: () => Date;
}

/** What one record came to; the batch response only sees whether the record handler threw. */
export type RecordOutcome = 'applied' | 'already-done' | 'duplicate' | 'rejected' | 'deferred' | 'dead-lettered';

/** Set on results replayed from the idempotency store (never stored): the operation had already completed. */
const REPLAYED = '__replayed';
/** What the idempotency store keeps: the job's result, and who completed it (lambda/core/ledgerContract.ts). */
type StoredResult = ApplyResult & { [COMPLETED_BY_FIELD]?: CompletedBy };
type IdempotentResult = StoredResult & { [REPLAYED]?: true };

/** Longest failure reason carried as a DLQ message attribute. */
const MAX_REASON_CHARS = 1000;

export class InvalidApplyResultError extends Error {
  constructor(message: string, public readonly operationId: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'InvalidApplyResultError';
  }
}

type Validated = { ok: true; message: JobMessage; resource: Record<string, unknown> } | { ok: false; reasons: string[] };

/** Size cap, envelope, this job's name and the job's own resource schema; every problem is named. */
export function validateRecord(body: string, job: AnyJob, maxBytes: number): Validated {
  const parsed = parseMessage(body, maxBytes);
  if (!parsed.ok) return parsed;
  const reasons: string[] = [];
  if (parsed.message.jobType !== job.name) reasons.push(`jobType: expected "${job.name}", got "${parsed.message.jobType}"`);
  const resource = job.resourceSchema.safeParse(parsed.message.resource);
  if (!resource.success) {
    reasons.push(...resource.error.issues.map((i) => `resource${i.path.length ? `.${i.path.join('.')}` : ''}: ${i.message}`));
  }
  return reasons.length > 0 ? { ok: false, reasons: boundReasons(reasons) } : { ok: true, message: parsed.message, resource: resource.data };
}

/** The IDs a rejected body still carries, for the review record; only values that are valid IDs. */
function salvageIds(body: string): { batchId?: string; operationId?: string } {
  try {
    const raw = JSON.parse(body) as Record<string, unknown>;
    const pick = (v: unknown) => (idSchema.safeParse(v).success ? (v as string) : undefined);
    return raw && typeof raw === 'object' ? { batchId: pick(raw.batchId), operationId: pick(raw.operationId) } : {};
  } catch {
    return {};
  }
}

/** What the pre-pass decided for one record, before any record is claimed. */
type Plan =
  | { kind: 'reject'; reasons: string[] }
  | { kind: 'defer'; message: JobMessage; cause: DeferralCause }
  /** The limiter could not be asked (DynamoDB failed): the record fails and SQS redelivers it, unclaimed. */
  | { kind: 'fail'; message: JobMessage; error: Error }
  /** Already COMPLETED (the pre-check): a duplicate, settled without a slot or a claim. */
  | { kind: 'done'; message: JobMessage; by: CompletedBy | undefined }
  /** The record takes the earliest usable slot of the invocation's pool when it is reached (see slotFor). */
  | { kind: 'run'; message: JobMessage; resource: Record<string, unknown> };

/** A deferral decided but not yet sent: where it goes, and the accounting to run once it is there. */
interface PreparedDeferral {
  queueUrl: string;
  outgoing: OutgoingMessage;
  settle: () => RecordOutcome;
}

/** One invocation's pacing state: its slots, and what it tells the adaptive rate. */
interface Signals {
  throttles: number;
  successes: number;
  /** Records planned to run and not yet started. */
  runLeft: number;
  /** The invocation's granted slots not yet used (a block's, a re-acquisition's, a duplicate's given back), ascending. */
  slots: number[];
  /** Slots granted to this invocation, and those a downstream call started on: the difference is lost allowance. */
  slotsGranted: number;
  slotsUsed: number;
  /** The invocation's reserve (ConsumerPacingOptions.reserveMs). */
  reserveMs: number;
}

/** Adds a slot to an ascending list. */
function insertSlot(slots: number[], ms: number): void {
  const at = slots.findIndex((s) => s > ms);
  if (at < 0) slots.push(ms);
  else slots.splice(at, 0, ms);
}

/** A slot whose record made no downstream call (answered at the claim): free again for the next record. */
function giveBack(signals: Signals, startAtMs: number): void {
  signals.slotsUsed--;
  insertSlot(signals.slots, startAtMs);
}

const DEFAULT_RESERVE_MS = 5_000;

/** Apply durations the container remembers for sizing its blocks. */
const APPLY_SAMPLES = 20;

const logKeys = (record: SQSRecord, message: JobMessage) => ({ operationId: message.operationId, batchId: message.batchId, messageId: record.messageId });

export function createConsumer(options: ConsumerOptions): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
  const { job, jobDeps, ledger, limiter } = options;
  bindJob(job.name);
  const publisher = options.publisher ?? new SqsPublisher();
  const completedLookup = options.completedLookup ?? new DynamoCompletedLookup({ tableName: options.idempotencyTableName });
  const deferralPolicy = options.deferralPolicy ?? defaultDeferralPolicy;
  const now = options.now ?? (() => new Date());
  const pacing = {
    key: options.pacing?.key ?? job.name,
    shortWaitMs: options.pacing?.shortWaitMs ?? 10_000,
    reserveMs: options.pacing?.reserveMs,
    lateToleranceMs: options.pacing?.lateToleranceMs ?? 0,
    spacingMs: options.pacing?.spacingMs ?? 0,
    clock: options.pacing?.clock ?? Date.now,
  };
  const processor = new BatchProcessor(EventType.SQS);
  /** This container's last apply durations: how fast it reaches its slots. */
  const applySamples: number[] = [];
  const measureApply = (ms: number) => {
    applySamples.push(ms);
    if (applySamples.length > APPLY_SAMPLES) applySamples.shift();
  };
  /**
   * The 90th percentile of the recent applies (0 before the first), not the mean: one slow apply in a block loses every
   * slot that passes during it, so blocks are sized for the slow tail (a provider's latency spikes, SDK retries).
   */
  const applyEstimateMs = (): number => {
    if (applySamples.length === 0) return 0;
    const sorted = [...applySamples].sort((a, b) => a - b);
    return sorted[Math.ceil(0.9 * sorted.length) - 1];
  };
  /** The longest wait for a slot now: the short wait, bounded by the invocation's time left less its reserve. */
  const maxWaitFor = (context: Context, signals: Signals): number =>
    Math.max(0, Math.min(pacing.shortWaitMs, context.getRemainingTimeInMillis() - signals.reserveMs));
  /**
   * Slots this container can start on time in one block. Records run one after another, so when an apply takes longer
   * than the slot spacing, each later slot of a block is reached that much later; a slot reached past the late
   * tolerance is lost to the whole fleet (the limiter counted it). Taking only what can be used keeps the fleet's
   * starts at the allowance instead of at the allowance minus the missed slots.
   */
  const usableBlock = (): number => {
    const lag = applyEstimateMs() - pacing.spacingMs;
    return lag <= 0 ? Number.POSITIVE_INFINITY : 1 + Math.floor(pacing.lateToleranceMs / lag);
  };

  const config = new IdempotencyConfig({
    // The operation ID in the body, never the SQS message ID: a DLQ redrive gives the message a new one.
    eventKeyJmesPath: 'operationId',
    throwOnNoIdempotencyKey: true,
    expiresAfterSeconds: options.idempotencyTtlSeconds,
    // Called only when a COMPLETED record is found, i.e. a duplicate; the marker never reaches the store.
    responseHook: (response) => ({ ...(response as object), [REPLAYED]: true }),
  });

  const applyOne = async (message: JobMessage, resource: Record<string, unknown>, context: Context): Promise<StoredResult> => {
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
  };

  const applyIdempotent = makeIdempotent(applyOne, {
    persistenceStore:
      options.persistenceStore ?? new DynamoDBPersistenceLayer({ tableName: options.idempotencyTableName, awsSdkV3Client: dynamoClient() }),
    config,
    // The job name, not Powertools' default (the function name): a replaced function must still see its records.
    keyPrefix: idempotencyKeyPrefix(job.name),
  }) as (message: JobMessage, resource: Record<string, unknown>, context: Context) => Promise<IdempotentResult>;

  /**
   * Counters are accounting, not the operation: gathered per invocation and written once per batch ID at its end, as
   * the invocation's own item (one write per batch of records, not per record). An invocation killed before it lands
   * loses nothing: its completions are adopted by their next delivery (resolveBatch in lambda/core/ledgerContract.ts).
   * @returns the batch IDs whose write failed: their records are handed back to SQS, so that delivery comes.
   */
  const flushCounters = async (tally: BatchTally, invocationId: string): Promise<Set<string>> => {
    const failed = new Set<string>();
    await Promise.all(
      tally.entries().map(async ([batchId, record]) => {
        try {
          await ledger.recordInvocation(job.name, batchId, invocationId, record);
        } catch (error) {
          failed.add(batchId);
          count(MetricName.LedgerWriteFailed);
          logger.error('ledger write failed; the batch\'s records go back to SQS, and their next delivery counts them', { batchId, record, error: error as Error });
        }
      }),
    );
    return failed;
  };

  /**
   * A delivery answered by a completion: which batch and invocation completed it decides how the ledger reads it. Its
   * own batch's: a duplicate, or the completion itself if that invocation never wrote its counts (resolveBatch decides,
   * at read time). Another batch's: completedElsewhere, once. A completion that names no batch (written before they
   * did) is a duplicate, as it always was.
   */
  const duplicate = (message: JobMessage, tally: BatchTally, by: CompletedBy | undefined, outcome?: ApplyResult['outcome']): RecordOutcome => {
    count(MetricName.DuplicatesSuppressed);
    logger.info('duplicate suppressed: operation already completed', { outcome, completedBy: by });
    if (by === undefined) tally.add(message.batchId, { duplicates: 1 });
    else if (by.batchId === message.batchId) tally.note(message.batchId, 'replays', ledgerEntry(by.invocationId, message.operationId));
    else tally.note(message.batchId, 'elsewhere', ledgerEntry(by.batchId, message.operationId));
    return 'duplicate';
  };

  const reject = async (record: SQSRecord, reasons: string[], tally: BatchTally): Promise<RecordOutcome> => {
    const ids = salvageIds(record.body);
    // Not caught: without the review record the message would vanish, so a failed write retries the message instead.
    await ledger.recordRejection({ job: job.name, messageId: record.messageId, reasons, body: record.body, ...ids });
    count(MetricName.Rejected);
    logger.warn('message rejected and kept for review', { reasons, ...ids });
    if (ids.batchId) tally.note(ids.batchId, 'rejectedMessages', record.messageId);
    return 'rejected';
  };

  const toDlq = (message: JobMessage, reason: string, body: string): OutgoingMessage => ({
    operationId: message.operationId,
    body,
    attributes: {
      failureReason: reason.slice(0, MAX_REASON_CHARS),
      operationId: message.operationId,
      jobType: message.jobType,
      batchId: message.batchId,
      failedAt: now().toISOString(),
    },
  });

  /** The accounting after a message reached the DLQ. */
  const deadLettered = (message: JobMessage, reason: string, detail: Record<string, unknown>, tally: BatchTally): RecordOutcome => {
    count(MetricName.DeadLettered);
    logger.error('permanent failure: message sent to the DLQ', { reason, detail });
    if (message.dueBy !== undefined) count(MetricName.SloFailed);
    tally.note(message.batchId, 'deadLetteredOperations', deadLetterEntry(message.operationId, reason));
    return 'dead-lettered';
  };

  const deadLetter = async (record: SQSRecord, message: JobMessage, reason: string, tally: BatchTally, detail: Record<string, unknown> = {}): Promise<RecordOutcome> => {
    await publisher.publish(options.dlqUrl, [toDlq(message, reason, record.body)]);
    return deadLettered(message, reason, detail, tally);
  };

  /**
   * Decides a deferral (or, past the budget, a dead-letter) without sending it: where the message goes, and the
   * accounting to run once it is there. Re-publishing instead of failing the record keeps ApproximateReceiveCount, and
   * so the DLQ, out of pacing and throttling; a duplicate from the re-publish (the original redelivered after all) is
   * absorbed by idempotency, as the operation ID is unchanged.
   * @throws InvalidMessageError when the re-published message would no longer fit maxMessageBytes
   */
  const prepareDeferral = (message: JobMessage, cause: DeferralCause, tally: BatchTally): PreparedDeferral => {
    const attempt = message.attempt ?? 0;
    // The first enqueue survives every deferral, so AgeSinceFirstEnqueue and the age budget see the operation's true age.
    const firstEnqueuedAt = message.firstEnqueuedAt ?? message.enqueuedAt;
    const pacedDeferrals = message.pacedDeferrals ?? 0;
    const decision = deferralPolicy({ cause, attempt, pacedDeferrals, firstEnqueuedAtMs: Date.parse(firstEnqueuedAt), nowMs: now().getTime() });
    const { notBefore: _previous, ...rest } = message;
    if (decision.action === 'dead-letter') {
      // The count starts again at 0 in the DLQ copy, so an operator's redrive gets a fresh deferral budget.
      const rearmed = serializeMessage({ ...rest, firstEnqueuedAt, attempt: 0, pacedDeferrals: 0 }, options.maxMessageBytes);
      return {
        queueUrl: options.dlqUrl,
        outgoing: toDlq(message, decision.reason, rearmed),
        settle: () => deadLettered(message, decision.reason, { cause: cause.kind, attempt }, tally),
      };
    }
    const next: JobMessage = {
      ...rest,
      enqueuedAt: now().toISOString(),
      firstEnqueuedAt,
      // Only a throttle spends the deferral budget; waiting for a slot is counted apart, and a chain's continuation is
      // the same deferral, not a new one.
      attempt: cause.kind === 'throttled' ? attempt + 1 : attempt,
      ...(cause.kind === 'paced' ? { pacedDeferrals: pacedDeferrals + 1 } : {}),
      ...(decision.notBeforeMs !== undefined ? { notBefore: new Date(decision.notBeforeMs).toISOString() } : {}),
    };
    return {
      queueUrl: options.queueUrl,
      outgoing: { operationId: message.operationId, body: serializeMessage(next, options.maxMessageBytes), delaySeconds: decision.delaySeconds },
      settle: () => {
        count(MetricName.Deferred);
        logger.info('message deferred', { cause: cause.kind, delaySeconds: decision.delaySeconds, attempt: next.attempt, pacedDeferrals: next.pacedDeferrals, notBefore: next.notBefore });
        tally.add(message.batchId, { deferred: 1 });
        return 'deferred';
      },
    };
  };

  /** One deferral decided while its record ran (a throttle, a missed slot). */
  const defer = async (message: JobMessage, cause: DeferralCause, tally: BatchTally): Promise<RecordOutcome> => {
    const prepared = prepareDeferral(message, cause, tally);
    await publisher.publish(prepared.queueUrl, [prepared.outgoing]);
    return prepared.settle();
  };

  /**
   * Every deferral decided before any record ran (no slot, notBefore ahead), sent together: one SendMessageBatch per
   * ten records rather than one each. A record whose message SQS did not take fails, and SQS redelivers it.
   * @returns each record's outcome, or the error its handler must throw
   */
  const deferBlock = async (items: { record: SQSRecord; message: JobMessage; cause: DeferralCause }[], tally: BatchTally) => {
    const results = new Map<string, RecordOutcome | Error>();
    const byQueue = new Map<string, { record: SQSRecord; message: JobMessage; prepared: PreparedDeferral }[]>();
    for (const { record, message, cause } of items) {
      try {
        const prepared = prepareDeferral(message, cause, tally);
        byQueue.set(prepared.queueUrl, [...(byQueue.get(prepared.queueUrl) ?? []), { record, message, prepared }]);
      } catch (error) {
        results.set(record.messageId, error as Error);
      }
    }
    for (const [queueUrl, group] of byQueue) {
      let failed: (operationId: string) => Error | undefined = () => undefined;
      try {
        await publisher.publish(queueUrl, group.map((g) => g.prepared.outgoing));
      } catch (error) {
        const ids = error instanceof PublishError ? new Set(error.failedOperationIds) : undefined;
        failed = (operationId) => (ids === undefined || ids.has(operationId) ? (error as Error) : undefined);
      }
      for (const { record, message, prepared } of group) {
        const error = failed(message.operationId);
        results.set(record.messageId, error ?? (await withLogKeys(logKeys(record, message), async () => prepared.settle())));
      }
    }
    return results;
  };

  const feedBack = async (signals: Signals) => {
    if (!options.rateFeedback || (signals.throttles === 0 && signals.successes === 0)) return;
    try {
      const change = signals.throttles > 0 ? await options.rateFeedback.throttled(pacing.key) : await options.rateFeedback.succeeded(pacing.key);
      // Once per change fleet-wide (the instance whose write made it): the rate's history, for the operator.
      if (change) logger.info(change.to < change.from ? 'adaptive rate lowered after a throttle' : 'adaptive rate raised after quiet starts', { key: pacing.key, ...change });
    } catch (error) {
      // Tuning, not the operation: the records are settled, and the next invocation reports again.
      logger.error('adaptive rate update failed; the rate stays as it was', { key: pacing.key, signals, error: error as Error });
    }
  };

  /**
   * Fails the record so SQS redelivers it: every valid record handed back (batchItemFailures) passes here once, and the
   * batch counts it as a retry, in the invocation's one flush. On its last allowed receive SQS moves it to the DLQ
   * instead; the ledger counts that here as dead-lettered (not a retry), since nothing else sees the move.
   */
  const fail = (record: SQSRecord, message: JobMessage, error: unknown, tally: BatchTally): never => {
    count(MetricName.Failed);
    const receives = Number(record.attributes?.ApproximateReceiveCount ?? 0);
    if (options.maxReceiveCount !== undefined && receives >= options.maxReceiveCount) {
      tally.note(message.batchId, 'deadLetteredOperations', deadLetterEntry(message.operationId, `failed on its last allowed receive (${receives}); SQS moves it to the DLQ: ${(error as Error)?.message ?? String(error)}`));
      count(MetricName.DeadLettered);
      if (message.dueBy !== undefined) count(MetricName.SloFailed);
      logger.error('failed on its last allowed receive: SQS moves the message to the DLQ', { receives, maxReceiveCount: options.maxReceiveCount });
    } else {
      tally.add(message.batchId, { retries: 1 });
    }
    throw error;
  };

  /**
   * The slot a record starts at: the earliest slot of the invocation's pool still usable. Slots are not tied to records:
   * when an apply runs long, only the slots that passed meanwhile are lost (starting late is not allowed, it would bunch
   * starts across the fleet), and the next record takes the next slot. An empty pool is refilled with a fresh block of
   * what this container can start on time. `waitMs`: no slot within the short wait, defer by the limiter's hint.
   */
  const slotFor = async (context: Context, signals: Signals): Promise<{ startAtMs: number } | { waitMs: number }> => {
    if (limiter === undefined) return { startAtMs: pacing.clock() };
    const usable = (ms: number) => pacing.clock() - ms <= pacing.lateToleranceMs;
    while (signals.slots.length > 0 && !usable(signals.slots[0])) signals.slots.shift();
    if (signals.slots.length > 0) return { startAtMs: signals.slots.shift() as number };
    const count = Math.max(1, Math.min(signals.runLeft + 1, usableBlock()));
    const maxWaitMs = maxWaitFor(context, signals);
    try {
      const acquired = await limiter.acquire(pacing.key, count, { maxWaitMs });
      if (acquired.granted === 0) return { waitMs: acquired.waitMs };
      signals.slotsGranted += acquired.granted;
      signals.slots.push(...acquired.startAtMs.slice(1, acquired.granted));
      return { startAtMs: acquired.startAtMs[0] };
    } catch (error) {
      logger.warn('rate limiter unavailable for a fresh slot; deferring', { key: pacing.key, error: error as Error });
      return { waitMs: pacing.spacingMs };
    }
  };

  const run = async (record: SQSRecord, plan: Extract<Plan, { kind: 'run' }>, context: Context, tally: BatchTally, signals: Signals): Promise<RecordOutcome> => {
    const { message, resource } = plan;
    signals.runLeft--;
    const slot = await slotFor(context, signals);
    if (!('startAtMs' in slot)) return defer(message, { kind: 'paced', waitMs: slot.waitMs }, tally);
    const { startAtMs } = slot;
    // Short waits only (the block was bounded by shortWaitMs and the remaining time); each wait is one timer, no loop.
    // Pacing off: "now" is not a slot to be late for.
    if (limiter !== undefined && !(await waitForSlot(startAtMs, pacing.lateToleranceMs, pacing.clock))) {
      // Starting now would bunch this start with the slots after it: give the slot up, unclaimed.
      logger.warn('woke too late for the rate-limit slot; deferring', { startAtMs, lateByMs: pacing.clock() - startAtMs });
      return defer(message, { kind: 'paced', waitMs: 0 }, tally);
    }
    let result: IdempotentResult;
    signals.slotsUsed++;
    const applyStartedMs = pacing.clock();
    try {
      result = await applyIdempotent(message, resource, context);
    } catch (error) {
      const inProgress = (error as Error).name === 'IdempotencyAlreadyInProgressError';
      // Refused at the claim: no downstream call was made, so the slot is still free for the next record.
      if (inProgress) giveBack(signals, startAtMs);
      else measureApply(pacing.clock() - applyStartedMs);
      if (error instanceof PermanentError) return deadLetter(record, message, error.message, tally, error.detail);
      if (error instanceof ThrottledError) {
        // Powertools released the claim when apply threw, so the re-published message runs apply again.
        tally.add(message.batchId, { throttled: 1 });
        count(MetricName.Throttled);
        signals.throttles++;
        return defer(message, { kind: 'throttled', error }, tally);
      }
      // Retryable, in progress elsewhere, or unknown: SQS redelivers it after the visibility timeout.
      logger[inProgress ? 'warn' : 'error'](
        inProgress ? 'operation is in progress in another invocation; will retry' : 'apply failed; will retry',
        { error: error as Error, ...(inProgress ? {} : { applyStartedAt: applyStartedMs }) },
      );
      // handleRecord hands it back to SQS (fail): counted there as a retry, or as dead-lettered on its last receive.
      throw error;
    }
    if (result[REPLAYED]) {
      // Answered from the idempotency store: no downstream call was made, so the slot is still free for the next record.
      giveBack(signals, startAtMs);
      return duplicate(message, tally, result[COMPLETED_BY_FIELD], result.outcome);
    }
    measureApply(pacing.clock() - applyStartedMs);
    signals.successes++;
    count(result.outcome === 'applied' ? MetricName.Applied : MetricName.AlreadyDone);
    const ageMs = Math.max(0, now().getTime() - Date.parse(message.firstEnqueuedAt ?? message.enqueuedAt));
    milliseconds(MetricName.AgeSinceFirstEnqueue, ageMs);
    tally.age(message.batchId, ageMs);
    // applyStartedAt: when the downstream call began, so a job's starts can be read from the logs alone.
    logger.info('operation completed', { outcome: result.outcome, applyStartedAt: applyStartedMs });
    if (message.dueBy !== undefined) count(now().getTime() <= Date.parse(message.dueBy) ? MetricName.SloMet : MetricName.SloMissed);
    tally.add(message.batchId, { completed: 1 });
    return result.outcome;
  };

  /**
   * Validates every record, then takes ONE block of slots for the valid ones that are due (as many as this container
   * can start on time, see usableBlock): one limiter write per invocation while applies are quicker than the slot
   * spacing, and no record is claimed before it holds a slot.
   */
  const plan = async (records: SQSRecord[], context: Context, signals: Signals): Promise<Map<string, Plan>> => {
    const plans = new Map<string, Plan>();
    let due: { record: SQSRecord; message: JobMessage; resource: Record<string, unknown> }[] = [];
    const nowMs = now().getTime();
    for (const record of records) {
      const validated = validateRecord(record.body, job, options.maxMessageBytes);
      if (!validated.ok) {
        plans.set(record.messageId, { kind: 'reject', reasons: validated.reasons });
        continue;
      }
      const { message, resource } = validated;
      const notBeforeMs = message.notBefore === undefined ? undefined : Date.parse(message.notBefore);
      if (notBeforeMs !== undefined && notBeforeMs > nowMs) {
        plans.set(record.messageId, { kind: 'defer', message, cause: { kind: 'not-before', notBeforeMs } });
        continue;
      }
      due.push({ record, message, resource });
    }
    if (due.length === 0) return plans;
    // Duplicates first, so they take no slot: one read per invocation, and a failed read only skips the shortcut.
    try {
      const done = await completedLookup.completed(job.name, due.map((d) => d.message.operationId));
      if (done.size > 0) {
        for (const { record, message } of due) if (done.has(message.operationId)) plans.set(record.messageId, { kind: 'done', message, by: done.get(message.operationId) });
        due = due.filter((d) => !done.has(d.message.operationId));
        if (due.length === 0) return plans;
      }
    } catch (error) {
      logger.warn('completed-operation pre-check failed; every due record takes a slot and the claim decides', { error: error as Error });
    }
    if (limiter === undefined) {
      for (const { record, message, resource } of due) plans.set(record.messageId, { kind: 'run', message, resource });
      return plans;
    }

    const maxWaitMs = maxWaitFor(context, signals);
    const block = Math.min(due.length, usableBlock());
    let acquired;
    try {
      acquired = await limiter.acquire(pacing.key, block, { maxWaitMs });
    } catch (error) {
      logger.error('rate limiter unavailable; the due records will be retried by SQS, unclaimed', { key: pacing.key, error: error as Error });
      for (const { record, message } of due) plans.set(record.messageId, { kind: 'fail', message, error: error as Error });
      return plans;
    }
    // The whole block granted: the key has room, and the records past it take their slots when they are reached. Less:
    // the key is busy, and the rest are deferred now, together, rather than each waiting for a refusal.
    const runAll = acquired.granted === block;
    signals.slotsGranted += acquired.granted;
    signals.slots.push(...acquired.startAtMs.slice(0, acquired.granted));
    due.forEach(({ record, message, resource }, i) => {
      if (i < acquired.granted || runAll) {
        plans.set(record.messageId, { kind: 'run', message, resource });
      } else {
        const waitMs = acquired.waitMs + (i - acquired.granted) * pacing.spacingMs;
        plans.set(record.messageId, { kind: 'defer', message, cause: { kind: 'paced', waitMs } });
      }
    });
    return plans;
  };

  return async (event, context) => {
    config.registerLambdaContext(context);
    logger.addContext(context);
    const tally = new BatchTally();
    const reserveMs = pacing.reserveMs ?? Math.min(DEFAULT_RESERVE_MS, Math.floor(context.getRemainingTimeInMillis() / 4));
    const signals: Signals = { throttles: 0, successes: 0, runLeft: 0, slots: [], slotsGranted: 0, slotsUsed: 0, reserveMs };
    let flushed = false;
    let plans = new Map<string, Plan>();
    try {
      plans = await plan(event.Records, context, signals);
      signals.runLeft = [...plans.values()].filter((p) => p.kind === 'run').length;
      const early = event.Records.flatMap((record) => {
        const p = plans.get(record.messageId);
        return p?.kind === 'defer' ? [{ record, message: p.message, cause: p.cause }] : [];
      });
      const deferred = early.length > 0 ? await deferBlock(early, tally) : new Map<string, RecordOutcome | Error>();
      const handleRecord = async (record: SQSRecord): Promise<RecordOutcome> => {
        // plan() decided every record of the event.
        const planned = plans.get(record.messageId) as Plan;
        if (planned.kind === 'reject') return withLogKeys({ messageId: record.messageId }, () => reject(record, planned.reasons, tally));
        tally.add(planned.message.batchId, { consumed: 1 });
        return withLogKeys(logKeys(record, planned.message), async () => {
          // Whatever throws below hands the record back to SQS: fail counts it (a retry, or dead-lettered on its last receive).
          try {
            switch (planned.kind) {
              case 'defer': {
                // deferBlock settled every record it was given.
                const outcome = deferred.get(record.messageId) as RecordOutcome | Error;
                if (outcome instanceof Error) {
                  logger.error('deferral could not be sent; SQS will redeliver the message', outcome);
                  throw outcome;
                }
                return outcome;
              }
              case 'fail':
                throw planned.error;
              case 'done':
                return duplicate(planned.message, tally, planned.by);
              case 'run':
                // Awaited, so a rejected run is caught here.
                return await run(record, planned, context, tally, signals);
            }
          } catch (error) {
            return fail(record, planned.message, error, tally);
          }
        });
      };
      const response = await processPartialResponse(event, handleRecord, processor, {
        context,
        // One record at a time, each at its slot: the concurrency cap (reserved concurrency) then bounds calls to the
        // downstream, and the shared logger's per-record keys cannot bleed between records.
        processInParallel: false,
        // A fully failed batch is reported item by item like any other, leaving Lambda's Errors metric to real crashes.
        throwOnFullBatchFailure: false,
      });
      flushed = true;
      const [unwritten] = await Promise.all([flushCounters(tally, context.awsRequestId), feedBack(signals)]);
      return withUnwrittenBatches(response, event.Records, plans, unwritten);
    } finally {
      if (signals.slotsGranted > signals.slotsUsed) count(MetricName.SlotsUnused, signals.slotsGranted - signals.slotsUsed);
      // The records' handling threw (it should not): the whole event goes back to SQS; what it counted is still written.
      if (!flushed) await Promise.all([flushCounters(tally, context.awsRequestId), feedBack(signals)]);
      flushMetrics();
    }
  };
}

/**
 * The batch response with every record of a batch whose ledger write failed handed back to SQS as well: its next
 * delivery is answered by its completion and counts it (an adoption), so no count is lost to the failed write. A
 * record that carried no batch ID (a rejection of unreadable input) is kept as it was.
 */
function withUnwrittenBatches(response: SQSBatchResponse, records: SQSRecord[], plans: ReadonlyMap<string, Plan>, unwritten: ReadonlySet<string>): SQSBatchResponse {
  if (unwritten.size === 0) return response;
  const failures = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  for (const record of records) {
    const planned = plans.get(record.messageId);
    const batchId = planned && 'message' in planned ? planned.message.batchId : salvageIds(record.body).batchId;
    if (batchId !== undefined && unwritten.has(batchId)) failures.add(record.messageId);
  }
  return { batchItemFailures: [...failures].map((itemIdentifier) => ({ itemIdentifier })) };
}

/** Builds the consumer from the variables the stack sets. */
export function consumerOptionsFromEnv(env: NodeJS.ProcessEnv = process.env, loadModule?: JobModuleLoader): ConsumerOptions {
  const { job, jobDeps, settings } = loadJobRuntime(env, loadModule);
  const paced = pacingSettings(settings);
  const limiterTable = requireEnv(EnvVar.LIMITER_TABLE_NAME, env);
  const limiter = paced.enabled ? new AdaptiveDynamoDbRateLimiter({ tableName: limiterTable, limits: paced.limits, leadMs: paced.leadMs }) : undefined;
  return {
    job,
    jobDeps,
    queueUrl: requireEnv(EnvVar.QUEUE_URL, env),
    dlqUrl: requireEnv(EnvVar.DLQ_URL, env),
    idempotencyTableName: requireEnv(EnvVar.IDEMPOTENCY_TABLE_NAME, env),
    idempotencyTtlSeconds: requirePositiveInt(EnvVar.IDEMPOTENCY_TTL_SECONDS, env),
    maxReceiveCount: settings.maxReceiveCount,
    maxMessageBytes: env[EnvVar.MAX_MESSAGE_BYTES] ? requirePositiveInt(EnvVar.MAX_MESSAGE_BYTES, env) : settings.maxMessageBytes,
    ledger: new DynamoLedger({ tableName: requireEnv(EnvVar.LEDGER_TABLE_NAME, env) }),
    limiter,
    rateFeedback: paced.adaptiveRate ? limiter : undefined,
    pacing: {
      key: paced.limiterKey,
      shortWaitMs: paced.shortWaitMs,
      lateToleranceMs: paced.lateToleranceMs,
      spacingMs: gcraLimits(paced.limits).emissionIntervalUs / 1000,
    },
    deferralPolicy: createDeferralPolicy({ maxDeferrals: paced.maxDeferrals, maxAgeSeconds: paced.maxDeferralAgeSeconds }),
  };
}

let consumer: ReturnType<typeof createConsumer> | undefined;

/** The Lambda entry point; built on the first invocation so configuration errors surface with their message. */
export const handler = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> =>
  (consumer ??= createConsumer(consumerOptionsFromEnv()))(event, context);
