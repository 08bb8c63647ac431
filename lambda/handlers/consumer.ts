// The consumer Lambda: one SQS batch in; every record validated, one block of rate-limit slots taken for the valid ones,
// each granted record claimed by operation ID, applied once at its slot and acknowledged; the rest deferred unclaimed.
// This file wires the units together (consumer/): the planner (the pre-pass and the first block), the invocation's slot
// pool, the record runner (slot, claim, apply), the deferrer (re-publish or DLQ) and the accounting (metrics, the
// tally, the one ledger flush).
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { BasePersistenceLayer } from '@aws-lambda-powertools/idempotency/persistence';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { BusinessDateRule } from '../core/businessDate';
import { DEFAULT_QUEUE_RETENTION_DAYS, EnvVar } from '../core/constants';
import { createDeferralPolicy, defaultDeferralPolicy, type DeferralPolicy } from '../core/deferral';
import type { AnyJob } from '../core/job';
import { ApplyTimeEstimator } from '../core/pacing/applyEstimator';
import { gcraLimits } from '../core/pacing/gcra';
import { backfillItemKey, backfillLimits, fairOrder } from '../core/backfill';
import { pacingSettings } from '../core/pacingSettings';
import { requireEnv } from '../core/settings';
import { dynamoClient } from '../adapters/clients';
import { BatchTally, DynamoLedger, type Ledger } from '../adapters/ledger';
import { DynamoCompletedLookup, type CompletedLookup } from '../adapters/completedOperations';
import { bindJob, count, flushMetrics, logger, MetricName, withLogKeys } from '../adapters/observability';
import { AdaptiveDynamoDbRateLimiter, type RateFeedback } from '../adapters/adaptiveRateLimiter';
import { KeyRateLimiter } from '../adapters/keyRateLimiter';
import { DynamoDbRateLimiter, type RateLimiter } from '../adapters/rateLimiter';
import { KeyConcurrencyLimiter } from '../adapters/keyConcurrency';
import { SqsPublisher, type Publisher } from '../adapters/sqsPublisher';
import { Accounting, withUnwrittenBatches, type RecordOutcome } from './consumer/accounting';
import { keepJobFrames } from './consumer/recordFailure';
import { Deferrer, logKeys } from './consumer/deferrer';
import { Planner, type Plan } from './consumer/planner';
import { RecordRunner, type InvocationRun, type KeyConcurrency, type KeyLimiter, type RateSignals } from './consumer/recordRunner';
import { SlotPool, type SlotPoolSettings } from './consumer/slotPool';
import type { JobModuleLoader } from './jobLoader';
import { loadJobRuntime, requirePositiveInt } from './runtime';

export type { RecordOutcome } from './consumer/accounting';
export { InvalidApplyResultError } from './consumer/recordRunner';
export { validateRecord } from './consumer/planner';

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
  /**
   * How a record waits for its slot, on `clock`'s time: a test gives a virtual clock's pair, so pacing runs on virtual
   * time (test/lambda/handlers/virtualClock.ts). @default the real timer (core/pacing/sleep.ts)
   */
  sleep?: (ms: number) => Promise<void>;
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
  /**
   * The per-key limit (rateLimit.perKey), enforced beside the job-wide limiter: a record starts only when its key has a
   * token at its slot, and a key's 429s cut that key's rate. @default none
   */
  keys?: KeyLimiter;
  /**
   * The per-key concurrency limit (concurrency.perKey): a record starts only while its key has fewer than the limit in
   * progress fleet-wide, each start holding a lease that expires with its invocation. @default none
   */
  keyConcurrency?: KeyConcurrency;
  /**
   * Backfill's cap while live work waits (rateLimit.backfillShare below 1): a limiter at the share of the allowance,
   * on its own item. Backfill then also takes only slots live work left. @default none: backfill paces as live work
   */
  backfill?: { limiter: RateLimiter; key?: string };
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
  /**
   * How long one record's claim and apply may run before the batch's records not yet started are sent back to the
   * queue, for other invocations to start (they would otherwise wait behind a call hanging to its timeout).
   * @default the larger of RELEASE_FLOOR_MS and RELEASE_PACE_MULTIPLE times the container's pace (recordRunner.ts)
   */
  releaseAfterMs?: number;
  /**
   * The job's business-date rule (its schedule's time zone and offset): a message of a date after the job's latest
   * now is rejected, never applied. @default UTC, offset 0 (a date after today in UTC is rejected)
   */
  businessDates?: BusinessDateRule;
  /**
   * The work queue's retention: a message whose notBefore is further than this after its enqueuedAt is rejected.
   * @default DEFAULT_QUEUE_RETENTION_DAYS, in seconds
   */
  queueRetentionSeconds?: number;
  /** @default () => new Date() */
  now?: () => Date;
}

/** A deferral as sent: SQS's error is thrown (SQS redelivers the message), else what comes of the deferral. */
function sentDeferral<T>(sent: T | Error): T {
  if (sent instanceof Error) {
    logger.error('deferral could not be sent; SQS will redeliver the message', sent);
    throw sent;
  }
  return sent;
}

const DEFAULT_RESERVE_MS = 5_000;
/** Keys throttled in one invocation that make a job-wide storm (per-key limits on): the job-wide rate is cut too. */
export const JOB_STORM_KEYS = 2;

/** The resource field records are keyed on: the per-key rate limit's, else the per-key concurrency's. */
function keyFieldOf(options: Pick<ConsumerOptions, 'keys' | 'keyConcurrency'>): string | undefined {
  return options.keys?.field ?? options.keyConcurrency?.field;
}

export function createConsumer(options: ConsumerOptions): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
  const { job, limiter } = options;
  bindJob(job.name);
  // A failed record's log line names the job's frame that threw it (consumer/recordFailure.ts): keep enough frames.
  keepJobFrames();
  const now = options.now ?? (() => new Date());
  const pacing = {
    key: options.pacing?.key ?? job.name,
    shortWaitMs: options.pacing?.shortWaitMs ?? 10_000,
    reserveMs: options.pacing?.reserveMs,
    lateToleranceMs: options.pacing?.lateToleranceMs ?? 0,
    spacingMs: options.pacing?.spacingMs ?? 0,
    clock: options.pacing?.clock ?? Date.now,
    sleep: options.pacing?.sleep,
  };
  const processor = new BatchProcessor(EventType.SQS);
  /** This container's last record cycles: how fast it reaches its slots. */
  const estimator = new ApplyTimeEstimator();
  const accounting = new Accounting({ jobName: job.name, ledger: options.ledger, maxReceiveCount: options.maxReceiveCount, now });
  const deferrer = new Deferrer({
    queueUrl: options.queueUrl,
    dlqUrl: options.dlqUrl,
    maxMessageBytes: options.maxMessageBytes,
    publisher: options.publisher ?? new SqsPublisher(),
    policy: options.deferralPolicy ?? defaultDeferralPolicy,
    accounting,
    now,
    ...(keyFieldOf(options) !== undefined ? { groupField: keyFieldOf(options) } : {}),
  });
  const planner = new Planner({
    job,
    maxMessageBytes: options.maxMessageBytes,
    completedLookup: options.completedLookup ?? new DynamoCompletedLookup({ tableName: options.idempotencyTableName }),
    spacingMs: pacing.spacingMs,
    ...(keyFieldOf(options) !== undefined ? { keyField: keyFieldOf(options) } : {}),
    businessDates: options.businessDates ?? { timeZone: 'UTC', businessDateOffsetDays: 0 },
    queueRetentionSeconds: options.queueRetentionSeconds ?? DEFAULT_QUEUE_RETENTION_DAYS * 86_400,
    now,
  });
  const runner = new RecordRunner({
    job,
    jobDeps: options.jobDeps,
    persistenceStore:
      options.persistenceStore ?? new DynamoDBPersistenceLayer({ tableName: options.idempotencyTableName, awsSdkV3Client: dynamoClient() }),
    idempotencyTtlSeconds: options.idempotencyTtlSeconds,
    accounting,
    deferrer,
    estimator,
    lateToleranceMs: pacing.lateToleranceMs,
    clock: pacing.clock,
    ...(pacing.sleep ? { sleep: pacing.sleep } : {}),
    ...(options.releaseAfterMs !== undefined ? { releaseAfterMs: options.releaseAfterMs } : {}),
    ...(options.keys ? { keys: options.keys } : {}),
    ...(options.keyConcurrency ? { keyConcurrency: options.keyConcurrency } : {}),
  });
  const slotSettings: SlotPoolSettings = {
    limiter,
    key: pacing.key,
    shortWaitMs: pacing.shortWaitMs,
    lateToleranceMs: pacing.lateToleranceMs,
    spacingMs: pacing.spacingMs,
    clock: pacing.clock,
    estimator,
    keyed: options.keys !== undefined,
    ...(options.backfill ? { backfill: { limiter: options.backfill.limiter, key: options.backfill.key ?? backfillItemKey(pacing.key) } } : {}),
  };

  /**
   * Tells the adaptive rates once per invocation whether the downstream throttled, or only succeeded. With per-key
   * limits, a key's 429s cut that key's rate; the job-wide rate is cut only by a storm, throttles on at least
   * JOB_STORM_KEYS keys in one invocation (one tenant's own limit is not the provider's).
   */
  const feedBack = async (signals: RateSignals) => {
    if (options.keys) await keyFeedBack(options.keys, signals);
    if (!options.rateFeedback || (signals.throttles === 0 && signals.successes === 0)) return;
    const jobThrottled = options.keys ? signals.throttledKeys.size >= JOB_STORM_KEYS : signals.throttles > 0;
    if (!jobThrottled && signals.successes === 0) return;
    try {
      // The job's own counts, for the rule's storm-or-line test; with per-key limits the job-wide rate has no such count.
      const counts = options.keys ? undefined : { starts: signals.successes + signals.throttles, throttles: signals.throttles };
      const change = jobThrottled ? await options.rateFeedback.throttled(pacing.key, counts) : await options.rateFeedback.succeeded(pacing.key, counts);
      // Once per change fleet-wide (the instance whose write made it): the rate's history, for the operator.
      if (change) logger.info(change.to < change.from ? 'adaptive rate lowered after a throttle' : 'adaptive rate raised after quiet starts', { key: pacing.key, ...change });
    } catch (error) {
      // Tuning, not the operation: the records are settled, and the next invocation reports again.
      logger.error('adaptive rate update failed; the rate stays as it was', { key: pacing.key, signals, error: error as Error });
    }
  };

  const keyFeedBack = async (keys: KeyLimiter, signals: RateSignals) => {
    const report = async (key: string, throttled: boolean) => {
      try {
        const change = throttled ? await keys.throttled(key) : await keys.succeeded(key);
        if (change) logger.info(change.to < change.from ? 'per-key adaptive rate lowered after a throttle' : 'per-key adaptive rate raised after quiet starts', { key, ...change });
      } catch (error) {
        logger.error('per-key adaptive rate update failed; the key\'s rate stays as it was', { key, error: error as Error });
      }
    };
    await Promise.all([
      ...[...signals.throttledKeys].map((key) => report(key, true)),
      ...[...signals.succeededKeys].filter((key) => !signals.throttledKeys.has(key)).map((key) => report(key, false)),
    ]);
  };

  return async (event, context) => {
    runner.registerContext(context);
    logger.addContext(context);
    const tally = new BatchTally();
    const reserveMs = pacing.reserveMs ?? Math.min(DEFAULT_RESERVE_MS, Math.floor(context.getRemainingTimeInMillis() / 4));
    const pool = new SlotPool(slotSettings, () => context.getRemainingTimeInMillis(), reserveMs);
    const signals: RateSignals = { throttles: 0, successes: 0, throttledKeys: new Set(), succeededKeys: new Set() };
    const flush = () => Promise.all([accounting.flush(tally, context.awsRequestId), feedBack(signals)]);
    let flushed = false;
    let plans = new Map<string, Plan>();
    try {
      plans = await planner.plan(event.Records, pool);
      pool.runLeft = [...plans.values()].filter((p) => p.kind === 'run').length;
      const early = event.Records.flatMap((record) => {
        const p = plans.get(record.messageId);
        return p?.kind === 'defer' ? [{ record, message: p.message, cause: p.cause }] : [];
      });
      const deferred = early.length > 0 ? await deferrer.deferBlock(early, tally) : new Map<string, RecordOutcome | Error>();
      const runs = event.Records.filter((r) => plans.get(r.messageId)?.kind === 'run');
      // The records a running record's overrun sent back to the queue, each settled on its own turn (its log keys are
      // set then; while the overrunning record runs, they are that record's). Records run one at a time, and a timer
      // only fires while one runs, so none of these has started.
      const started = new Set<string>();
      const released = new Map<string, Promise<(() => RecordOutcome) | Error>>();
      const releaseRest = () => {
        const rest = runs.filter((r) => !started.has(r.messageId) && !released.has(r.messageId));
        if (rest.length === 0) return;
        logger.warn('a record has run past its release time; the records behind it go back to the queue', { released: rest.length, afterMs: runner.releaseAfterMs() });
        count(MetricName.RecordsReleased, rest.length);
        pool.runLeft -= rest.length;
        const items = rest.map((record) => ({ record, message: (plans.get(record.messageId) as Extract<Plan, { kind: 'run' }>).message, cause: { kind: 'paced' as const, waitMs: 0 } }));
        const sending = deferrer.sendBlock(items, tally).catch((error: unknown) => new Map(rest.map((r) => [r.messageId, error as Error])));
        for (const record of rest) released.set(record.messageId, sending.then((sent) => sent.get(record.messageId) as (() => RecordOutcome) | Error));
      };
      const invocation: InvocationRun = { context, tally, pool, signals, onOverrun: releaseRest };
      const handleRecord = async (record: SQSRecord): Promise<RecordOutcome> => {
        // The planner decided every record of the event.
        const planned = plans.get(record.messageId) as Plan;
        if (planned.kind === 'reject') return withLogKeys({ messageId: record.messageId }, () => accounting.reject(record, planned.reasons, tally));
        tally.add(planned.message.batchId, { consumed: 1 });
        return withLogKeys(logKeys(record, planned.message), async () => {
          // Whatever throws below hands the record back to SQS: fail counts it (a retry, or dead-lettered on its last receive).
          try {
            switch (planned.kind) {
              case 'defer':
                // deferBlock settled every record it was given.
                return sentDeferral(deferred.get(record.messageId) as RecordOutcome | Error);
              case 'fail':
                throw planned.error;
              case 'done':
                return accounting.duplicate(planned.message, tally, planned.by);
              case 'run': {
                const release = released.get(record.messageId);
                if (release) return sentDeferral(await release)();
                started.add(record.messageId);
                // Awaited, so a rejected run is caught here.
                return await runner.run(record, planned, invocation);
              }
            }
          } catch (error) {
            return accounting.fail(record, planned.message, error, tally, runner.failedApplyStartedAt(record));
          }
        });
      };
      // Live records before backfill, and keys taking turns, in the order the planner gave them their slots.
      const ordered = [
        ...event.Records.filter((r) => plans.get(r.messageId)?.kind !== 'run'),
        ...fairOrder(runs, (r) => (plans.get(r.messageId) as Extract<Plan, { kind: 'run' }>).key, (r) => (plans.get(r.messageId) as Extract<Plan, { kind: 'run' }>).message.backfill === true),
      ];
      const response = await processPartialResponse({ ...event, Records: ordered }, handleRecord, processor, {
        context,
        // One record at a time, each at its slot: the concurrency cap (reserved concurrency) then bounds calls to the
        // downstream, and the shared logger's per-record keys cannot bleed between records.
        processInParallel: false,
        // A fully failed batch is reported item by item like any other, leaving Lambda's Errors metric to real crashes.
        throwOnFullBatchFailure: false,
      });
      flushed = true;
      const [unwritten] = await flush();
      const batchIdOf = (record: SQSRecord) => {
        const planned = plans.get(record.messageId);
        return planned && 'message' in planned ? planned.message.batchId : undefined;
      };
      return withUnwrittenBatches(response, event.Records, batchIdOf, unwritten);
    } finally {
      if (pool.unused() > 0) count(MetricName.SlotsUnused, pool.unused());
      // The records' handling threw (it should not): the whole event goes back to SQS; what it counted is still written.
      if (!flushed) await flush();
      flushMetrics();
    }
  };
}

/**
 * Set by the stack for each consumer's bundle (lib/paced-job.ts): whether its job uses per-key rate limits and per-key
 * concurrency. A bundle built for a job without them leaves their code out (esbuild drops the branch that is false);
 * anywhere else (tests, the local runtime from source) both are in.
 */
declare const PACED_PER_KEY_RATE: boolean | undefined;
declare const PACED_PER_KEY_CONCURRENCY: boolean | undefined;

/** Builds the consumer from the variables the stack sets. */
export function consumerOptionsFromEnv(env: NodeJS.ProcessEnv = process.env, loadModule?: JobModuleLoader): ConsumerOptions {
  const { job, jobDeps, settings } = loadJobRuntime(env, loadModule);
  const paced = pacingSettings(settings);
  const limiterTable = requireEnv(EnvVar.LIMITER_TABLE_NAME, env);
  const limiter = paced.enabled ? new AdaptiveDynamoDbRateLimiter({ tableName: limiterTable, limits: paced.limits, leadMs: paced.leadMs, lanes: paced.lanes }) : undefined;
  const { perKey, concurrencyPerKey } = paced;
  const keys =
    (typeof PACED_PER_KEY_RATE === 'undefined' || PACED_PER_KEY_RATE) && paced.enabled && perKey
      ? new KeyRateLimiter({ tableName: limiterTable, job: job.name, limiterKey: paced.limiterKey, perKey, adaptive: paced.adaptiveRate, safetyMarginMs: paced.limits.safetyMarginMs })
      : undefined;
  const keyConcurrency = (typeof PACED_PER_KEY_CONCURRENCY === 'undefined' || PACED_PER_KEY_CONCURRENCY) && concurrencyPerKey
    ? new KeyConcurrencyLimiter({ tableName: limiterTable, limiterKey: paced.limiterKey, field: concurrencyPerKey.field, maxConcurrent: concurrencyPerKey.maxConcurrent })
    : undefined;
  const backfillCap = paced.enabled ? backfillLimits(paced.limits, paced.backfillShare) : undefined;
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
    ...(keys ? { keys } : {}),
    ...(keyConcurrency ? { keyConcurrency } : {}),
    ...(backfillCap ? { backfill: { limiter: new DynamoDbRateLimiter({ tableName: limiterTable, limits: backfillCap, leadMs: paced.leadMs }) } } : {}),
    pacing: {
      key: paced.limiterKey,
      shortWaitMs: paced.shortWaitMs,
      lateToleranceMs: paced.lateToleranceMs,
      spacingMs: gcraLimits(paced.limits).emissionIntervalUs / 1000,
    },
    deferralPolicy: createDeferralPolicy({ maxDeferrals: paced.maxDeferrals, maxAgeSeconds: paced.maxDeferralAgeSeconds }),
    businessDates: { timeZone: settings.timeZone, businessDateOffsetDays: settings.businessDateOffsetDays },
    queueRetentionSeconds: paced.queueRetentionSeconds,
  };
}

let consumer: ReturnType<typeof createConsumer> | undefined;

/** The Lambda entry point; built on the first invocation so configuration errors surface with their message. */
export const handler = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> =>
  (consumer ??= createConsumer(consumerOptionsFromEnv()))(event, context);
