// The consumer Lambda: one SQS batch in; every record validated, one block of rate-limit slots taken for the valid ones,
// each granted record claimed by operation ID, applied once at its slot and acknowledged; the rest deferred unclaimed.
// This file wires the units together (consumer/): the planner (the pre-pass and the first block), the Pacer (slots, key
// tokens, leases, the adaptive rates: core/pacing/pacer.ts), the record runner (start, claim, apply), the deferrer
// (re-publish or DLQ) and the accounting (metrics, the tally, the one ledger flush).
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { BasePersistenceLayer } from '@aws-lambda-powertools/idempotency/persistence';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { BusinessDateRule } from '../core/businessDate';
import { DEFAULT_QUEUE_RETENTION_DAYS, EnvVar } from '../core/constants';
import { createDeferralPolicy, defaultDeferralPolicy, type DeferralPolicy } from '../core/deferral';
import type { AnyJob } from '../core/job';
import type { InvocationPacing, Pacer } from '../core/pacing/pacer';
import { fairOrder } from '../core/backfill';
import { pacingSettings } from '../core/pacingSettings';
import { requireEnv } from '../core/settings';
import { dynamoClient } from '../adapters/clients';
import { BatchTally, DynamoLedger, type Ledger } from '../adapters/ledger';
import { DynamoCompletedLookup, type CompletedLookup } from '../adapters/completedOperations';
import { bindJob, count, flushMetrics, logger, MetricName, withLogKeys } from '../adapters/observability';
import { SqsPublisher, type Publisher } from '../adapters/sqsPublisher';
import { Accounting, withUnwrittenBatches, type RecordOutcome } from './consumer/accounting';
import { keepJobFrames } from './consumer/recordFailure';
import { Deferrer, logKeys } from './consumer/deferrer';
import { Planner, type Plan } from './consumer/planner';
import { pacerFromSettings } from './consumer/limiterPacer';
import { RecordRunner, type InvocationRun } from './consumer/recordRunner';
import type { JobModuleLoader } from './jobLoader';
import { loadJobRuntime, requirePositiveInt } from './runtime';

export type { RecordOutcome } from './consumer/accounting';
export { InvalidApplyResultError } from './consumer/recordRunner';
export { validateRecord } from './consumer/planner';

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
   * How the consumer paces its records (core/pacing/pacer.ts): the block, each record's start, the outcomes. The
   * stack's is pacerFromSettings' (consumer/limiterPacer.ts); a test may give a LimiterPacer on its own limiters, or a
   * fake.
   */
  pacer: Pacer;
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

/** The consumer's units, built once per container. */
interface ConsumerUnits {
  accounting: Accounting;
  deferrer: Deferrer;
  planner: Planner;
  runner: RecordRunner;
  pacer: Pacer;
}

function consumerUnits(options: ConsumerOptions): ConsumerUnits {
  const { job, pacer } = options;
  const now = options.now ?? (() => new Date());
  const keyField = pacer.keyField !== undefined ? { keyField: pacer.keyField } : {};
  const accounting = new Accounting({
    jobName: job.name,
    ledger: options.ledger,
    maxReceiveCount: options.maxReceiveCount,
    now,
  });
  const deferrer = new Deferrer({
    queueUrl: options.queueUrl,
    dlqUrl: options.dlqUrl,
    maxMessageBytes: options.maxMessageBytes,
    publisher: options.publisher ?? new SqsPublisher(),
    policy: options.deferralPolicy ?? defaultDeferralPolicy,
    accounting,
    now,
    ...(pacer.keyField !== undefined ? { groupField: pacer.keyField } : {}),
  });
  const planner = new Planner({
    job,
    maxMessageBytes: options.maxMessageBytes,
    completedLookup: options.completedLookup ?? new DynamoCompletedLookup({ tableName: options.idempotencyTableName }),
    spacingMs: pacer.spacingMs,
    ...keyField,
    businessDates: options.businessDates ?? { timeZone: 'UTC', businessDateOffsetDays: 0 },
    queueRetentionSeconds: options.queueRetentionSeconds ?? DEFAULT_QUEUE_RETENTION_DAYS * 86_400,
    now,
  });
  const persistenceStore =
    options.persistenceStore ??
    new DynamoDBPersistenceLayer({ tableName: options.idempotencyTableName, awsSdkV3Client: dynamoClient() });
  const runner = new RecordRunner({
    job,
    jobDeps: options.jobDeps,
    persistenceStore,
    idempotencyTtlSeconds: options.idempotencyTtlSeconds,
    accounting,
    deferrer,
    pacer,
    ...(options.releaseAfterMs !== undefined ? { releaseAfterMs: options.releaseAfterMs } : {}),
  });
  return { accounting, deferrer, planner, runner, pacer };
}

type RunPlan = Extract<Plan, { kind: 'run' }>;

/**
 * One SQS event's handling once planned: each record settled on its turn, and the records a running record's overrun
 * sent back to the queue, each settled on its own turn (its log keys are set then; while the overrunning record runs,
 * they are that record's). Records run one at a time, and a timer only fires while one runs, so none of those has
 * started.
 */
class EventRun {
  private readonly started = new Set<string>();
  private readonly released = new Map<string, Promise<(() => RecordOutcome) | Error>>();
  private readonly runs: SQSRecord[];
  private readonly invocation: InvocationRun;

  constructor(
    private readonly units: ConsumerUnits,
    private readonly records: SQSRecord[],
    private readonly plans: Map<string, Plan>,
    /** What deferBlock made of the plan's deferrals, by message ID. */
    private readonly deferred: Map<string, RecordOutcome | Error>,
    context: Context,
    private readonly tally: BatchTally,
    private readonly pacing: InvocationPacing,
  ) {
    this.runs = records.filter((r) => plans.get(r.messageId)?.kind === 'run');
    this.invocation = { context, tally, pacing, onOverrun: () => this.releaseRest() };
  }

  private runPlan(record: SQSRecord): RunPlan {
    return this.plans.get(record.messageId) as RunPlan;
  }

  /** Live records before backfill, and keys taking turns, in the order the planner gave them their slots. */
  ordered(): SQSRecord[] {
    return [
      ...this.records.filter((r) => this.plans.get(r.messageId)?.kind !== 'run'),
      ...fairOrder(
        this.runs,
        (r) => this.runPlan(r).key,
        (r) => this.runPlan(r).message.backfill === true,
      ),
    ];
  }

  /** Sends the records not yet started back to the queue in one batch, unclaimed, as paced deferrals. */
  private releaseRest(): void {
    const { deferrer, runner } = this.units;
    const rest = this.runs.filter((r) => !this.started.has(r.messageId) && !this.released.has(r.messageId));
    if (rest.length === 0) return;
    logger.warn('a record has run past its release time; the records behind it go back to the queue', {
      released: rest.length,
      afterMs: runner.releaseAfterMs(),
    });
    count(MetricName.RecordsReleased, rest.length);
    this.pacing.runLeft -= rest.length;
    const cause = { kind: 'paced' as const, waitMs: 0 };
    const items = rest.map((record) => ({ record, message: this.runPlan(record).message, cause }));
    const sending = deferrer
      .sendBlock(items, this.tally)
      .catch((error: unknown) => new Map(rest.map((r) => [r.messageId, error as Error])));
    for (const record of rest) {
      const settle = sending.then((sent) => sent.get(record.messageId) as (() => RecordOutcome) | Error);
      this.released.set(record.messageId, settle);
    }
  }

  /** One record's turn: its plan carried out, under its log keys. */
  async handle(record: SQSRecord): Promise<RecordOutcome> {
    const { accounting, runner } = this.units;
    const { tally } = this;
    // The planner decided every record of the event.
    const planned = this.plans.get(record.messageId) as Plan;
    if (planned.kind === 'reject') {
      return withLogKeys({ messageId: record.messageId }, () => accounting.reject(record, planned.reasons, tally));
    }
    tally.add(planned.message.batchId, { consumed: 1 });
    return withLogKeys(logKeys(record, planned.message), async () => {
      // Whatever throws below hands the record back to SQS: fail counts it (a retry, or dead-lettered on its last
      // receive).
      try {
        switch (planned.kind) {
          case 'defer':
            // deferBlock settled every record it was given.
            return sentDeferral(this.deferred.get(record.messageId) as RecordOutcome | Error);
          case 'fail':
            throw planned.error;
          case 'done':
            return accounting.duplicate(planned.message, tally, planned.by);
          case 'run': {
            const release = this.released.get(record.messageId);
            if (release) return sentDeferral(await release)();
            this.started.add(record.messageId);
            // Awaited, so a rejected run is caught here.
            return await runner.run(record, planned, this.invocation);
          }
        }
      } catch (error) {
        return accounting.fail(record, planned.message, error, tally, runner.failedApplyStartedAt(record));
      }
    });
  }
}

/** The plan's deferrals (not yet due, the key busy, the limiter contended), sent in one batch. */
async function deferEarly(units: ConsumerUnits, records: SQSRecord[], plans: Map<string, Plan>, tally: BatchTally) {
  const early = records.flatMap((record) => {
    const p = plans.get(record.messageId);
    return p?.kind === 'defer' ? [{ record, message: p.message, cause: p.cause }] : [];
  });
  return early.length > 0 ? units.deferrer.deferBlock(early, tally) : new Map<string, RecordOutcome | Error>();
}

export function createConsumer(
  options: ConsumerOptions,
): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
  bindJob(options.job.name);
  // A failed record's log line names the job's frame that threw it (consumer/recordFailure.ts): keep enough frames.
  keepJobFrames();
  const units = consumerUnits(options);
  const processor = new BatchProcessor(EventType.SQS);
  return async (event, context) => {
    const { accounting, planner, runner, pacer } = units;
    runner.registerContext(context);
    logger.addContext(context);
    const tally = new BatchTally();
    const pacing = pacer.begin(() => context.getRemainingTimeInMillis());
    const flush = () => Promise.all([accounting.flush(tally, context.awsRequestId), pacing.finish()]);
    let flushed = false;
    let plans = new Map<string, Plan>();
    try {
      plans = await planner.plan(event.Records, pacing);
      pacing.runLeft = [...plans.values()].filter((p) => p.kind === 'run').length;
      const deferred = await deferEarly(units, event.Records, plans, tally);
      const run = new EventRun(units, event.Records, plans, deferred, context, tally, pacing);
      const handle = (record: SQSRecord) => run.handle(record);
      const response = await processPartialResponse({ ...event, Records: run.ordered() }, handle, processor, {
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
      if (pacing.unused() > 0) count(MetricName.SlotsUnused, pacing.unused());
      // The records' handling threw (it should not): the whole event goes back to SQS; what it counted is still written.
      if (!flushed) await flush();
      flushMetrics();
    }
  };
}

/** Builds the consumer from the variables the stack sets. */
export function consumerOptionsFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  loadModule?: JobModuleLoader,
): ConsumerOptions {
  const { job, jobDeps, settings } = loadJobRuntime(env, loadModule);
  const paced = pacingSettings(settings);
  return {
    job,
    jobDeps,
    queueUrl: requireEnv(EnvVar.QUEUE_URL, env),
    dlqUrl: requireEnv(EnvVar.DLQ_URL, env),
    idempotencyTableName: requireEnv(EnvVar.IDEMPOTENCY_TABLE_NAME, env),
    idempotencyTtlSeconds: requirePositiveInt(EnvVar.IDEMPOTENCY_TTL_SECONDS, env),
    maxReceiveCount: settings.maxReceiveCount,
    maxMessageBytes: env[EnvVar.MAX_MESSAGE_BYTES]
      ? requirePositiveInt(EnvVar.MAX_MESSAGE_BYTES, env)
      : settings.maxMessageBytes,
    ledger: new DynamoLedger({ tableName: requireEnv(EnvVar.LEDGER_TABLE_NAME, env) }),
    pacer: pacerFromSettings(paced, requireEnv(EnvVar.LIMITER_TABLE_NAME, env), job.name),
    deferralPolicy: createDeferralPolicy({
      maxDeferrals: paced.maxDeferrals,
      maxAgeSeconds: paced.maxDeferralAgeSeconds,
    }),
    businessDates: { timeZone: settings.timeZone, businessDateOffsetDays: settings.businessDateOffsetDays },
    queueRetentionSeconds: paced.queueRetentionSeconds,
  };
}

let consumer: ReturnType<typeof createConsumer> | undefined;

/** The Lambda entry point; built on the first invocation so configuration errors surface with their message. */
export const handler = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> =>
  (consumer ??= createConsumer(consumerOptionsFromEnv()))(event, context);
