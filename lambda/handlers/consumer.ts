// The consumer Lambda: one SQS batch in, each record validated, claimed by operation ID, applied once, acknowledged.
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import type { BasePersistenceLayer } from '@aws-lambda-powertools/idempotency/persistence';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { EnvVar } from '../core/constants';
import { idempotencyKeyPrefix } from '../core/idempotencyKey';
import { PermanentError, ThrottledError } from '../core/errors';
import type { AnyJob, ApplyResult } from '../core/job';
import { idSchema, parseMessage, serializeMessage, type JobMessage } from '../core/message';
import { requireEnv } from '../core/settings';
import { dynamoClient } from '../adapters/clients';
import { DynamoLedger, type BatchCounters, type Ledger } from '../adapters/ledger';
import { bindJob, count, flushMetrics, logger, MetricName, milliseconds, withLogKeys } from '../adapters/observability';
import { SqsPublisher, type Publisher } from '../adapters/sqsPublisher';
import { defaultDeferralPolicy, type DeferralPolicy } from './deferral';
import type { JobModuleLoader } from './jobLoader';
import { loadJobRuntime, requirePositiveInt } from './runtime';

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
  maxMessageBytes: number;
  ledger: Ledger;
  /** @default an SqsPublisher on the shared client */
  publisher?: Publisher;
  /** @default DynamoDBPersistenceLayer on `idempotencyTableName` */
  persistenceStore?: BasePersistenceLayer;
  /** @default defaultDeferralPolicy */
  deferralPolicy?: DeferralPolicy;
  /** @default () => new Date() */
  now?: () => Date;
}

/** What one record came to; the batch response only sees whether the record handler threw. */
export type RecordOutcome = 'applied' | 'already-done' | 'duplicate' | 'rejected' | 'deferred' | 'dead-lettered';

/** Set on results replayed from the idempotency store (never stored): the operation had already completed. */
const REPLAYED = '__replayed';
type IdempotentResult = ApplyResult & { [REPLAYED]?: true };

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
  return reasons.length > 0 ? { ok: false, reasons } : { ok: true, message: parsed.message, resource: resource.data };
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

export function createConsumer(options: ConsumerOptions): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
  const { job, jobDeps, ledger } = options;
  bindJob(job.name);
  const publisher = options.publisher ?? new SqsPublisher();
  const deferralPolicy = options.deferralPolicy ?? defaultDeferralPolicy;
  const now = options.now ?? (() => new Date());
  const processor = new BatchProcessor(EventType.SQS);

  const config = new IdempotencyConfig({
    // The operation ID in the body, never the SQS message ID: a DLQ redrive gives the message a new one.
    eventKeyJmesPath: 'operationId',
    throwOnNoIdempotencyKey: true,
    expiresAfterSeconds: options.idempotencyTtlSeconds,
    // Called only when a COMPLETED record is found, i.e. a duplicate; the marker never reaches the store.
    responseHook: (response) => ({ ...(response as object), [REPLAYED]: true }),
  });

  const applyOne = async (message: JobMessage, resource: Record<string, unknown>, context: Context): Promise<ApplyResult> => {
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
    return result;
  };

  const applyIdempotent = makeIdempotent(applyOne, {
    persistenceStore:
      options.persistenceStore ?? new DynamoDBPersistenceLayer({ tableName: options.idempotencyTableName, awsSdkV3Client: dynamoClient() }),
    config,
    // The job name, not Powertools' default (the function name): a replaced function must still see its records.
    keyPrefix: idempotencyKeyPrefix(job.name),
  }) as (message: JobMessage, resource: Record<string, unknown>, context: Context) => Promise<IdempotentResult>;

  /** Counters are accounting, not the operation: a failed write is logged and metered, and the record stays settled. */
  const countBatch = async (batchId: string, counters: BatchCounters) => {
    try {
      await ledger.addToBatch(job.name, batchId, counters);
    } catch (error) {
      count(MetricName.LedgerWriteFailed);
      logger.error('ledger counter write failed; the record itself is settled', { counters, error: error as Error });
    }
  };

  const reject = async (record: SQSRecord, reasons: string[]): Promise<RecordOutcome> => {
    const ids = salvageIds(record.body);
    // Not caught: without the review record the message would vanish, so a failed write retries the message instead.
    await ledger.recordRejection({ job: job.name, messageId: record.messageId, reasons, body: record.body, ...ids });
    count(MetricName.Rejected);
    logger.warn('message rejected and kept for review', { reasons, ...ids });
    if (ids.batchId) await countBatch(ids.batchId, { rejected: 1 });
    return 'rejected';
  };

  const deadLetter = async (record: SQSRecord, message: JobMessage, reason: string, detail: Record<string, unknown> = {}): Promise<RecordOutcome> => {
    await publisher.publish(options.dlqUrl, [
      {
        operationId: message.operationId,
        body: record.body,
        attributes: {
          failureReason: reason.slice(0, MAX_REASON_CHARS),
          operationId: message.operationId,
          jobType: message.jobType,
          batchId: message.batchId,
          failedAt: now().toISOString(),
        },
      },
    ]);
    count(MetricName.DeadLettered);
    logger.error('permanent failure: message sent to the DLQ', { reason, detail });
    await countBatch(message.batchId, { deadLettered: 1 });
    return 'dead-lettered';
  };

  const defer = async (record: SQSRecord, message: JobMessage, error: ThrottledError): Promise<RecordOutcome> => {
    const attempt = message.attempt ?? 0;
    const decision = deferralPolicy({ error, attempt });
    if (decision.action === 'dead-letter') return deadLetter(record, message, decision.reason);
    const body = serializeMessage(
      {
        ...message,
        enqueuedAt: now().toISOString(),
        // The first enqueue survives every deferral, so AgeSinceFirstEnqueue measures the operation's true age.
        firstEnqueuedAt: message.firstEnqueuedAt ?? message.enqueuedAt,
        attempt: attempt + 1,
      },
      options.maxMessageBytes,
    );
    // Re-publishing instead of failing the record keeps ApproximateReceiveCount, and so the DLQ, out of throttling.
    await publisher.publish(options.queueUrl, [{ operationId: message.operationId, body, delaySeconds: decision.delaySeconds }]);
    count(MetricName.Deferred);
    logger.info('throttled: message deferred', { delaySeconds: decision.delaySeconds, attempt: attempt + 1, retryAfterMs: error.retryAfterMs });
    await countBatch(message.batchId, { deferred: 1 });
    return 'deferred';
  };

  const handleRecord = async (record: SQSRecord, context: Context): Promise<RecordOutcome> => {
    const validated = validateRecord(record.body, job, options.maxMessageBytes);
    if (!validated.ok) return withLogKeys({ messageId: record.messageId }, () => reject(record, validated.reasons));
    const { message, resource } = validated;
    return withLogKeys({ operationId: message.operationId, batchId: message.batchId, messageId: record.messageId }, async () => {
      let result: IdempotentResult;
      try {
        result = await applyIdempotent(message, resource, context);
      } catch (error) {
        if (error instanceof PermanentError) return deadLetter(record, message, error.message, error.detail);
        if (error instanceof ThrottledError) return defer(record, message, error);
        // Retryable, in progress elsewhere, or unknown: SQS redelivers it after the visibility timeout.
        count(MetricName.Failed);
        const inProgress = (error as Error).name === 'IdempotencyAlreadyInProgressError';
        logger[inProgress ? 'warn' : 'error'](
          inProgress ? 'operation is in progress in another invocation; will retry' : 'apply failed; will retry',
          error as Error,
        );
        throw error;
      }
      if (result[REPLAYED]) {
        count(MetricName.DuplicatesSuppressed);
        logger.info('duplicate suppressed: operation already completed', { outcome: result.outcome });
        await countBatch(message.batchId, { duplicates: 1 });
        return 'duplicate';
      }
      count(result.outcome === 'applied' ? MetricName.Applied : MetricName.AlreadyDone);
      milliseconds(MetricName.AgeSinceFirstEnqueue, Math.max(0, now().getTime() - Date.parse(message.firstEnqueuedAt ?? message.enqueuedAt)));
      logger.info('operation completed', { outcome: result.outcome });
      await countBatch(message.batchId, { completed: 1 });
      return result.outcome;
    });
  };

  return async (event, context) => {
    config.registerLambdaContext(context);
    logger.addContext(context);
    try {
      return await processPartialResponse(event, handleRecord, processor, {
        context,
        // One record at a time: the concurrency cap (reserved concurrency) then bounds calls to the downstream, and
        // the shared logger's per-record keys cannot bleed between records.
        processInParallel: false,
        // A fully failed batch is reported item by item like any other, leaving Lambda's Errors metric to real crashes.
        throwOnFullBatchFailure: false,
      });
    } finally {
      flushMetrics();
    }
  };
}

/** Builds the consumer from the variables the stack sets. */
export function consumerOptionsFromEnv(env: NodeJS.ProcessEnv = process.env, loadModule?: JobModuleLoader): ConsumerOptions {
  const { job, jobDeps, settings } = loadJobRuntime(env, loadModule);
  return {
    job,
    jobDeps,
    queueUrl: requireEnv(EnvVar.QUEUE_URL, env),
    dlqUrl: requireEnv(EnvVar.DLQ_URL, env),
    idempotencyTableName: requireEnv(EnvVar.IDEMPOTENCY_TABLE_NAME, env),
    idempotencyTtlSeconds: requirePositiveInt(EnvVar.IDEMPOTENCY_TTL_SECONDS, env),
    maxMessageBytes: env[EnvVar.MAX_MESSAGE_BYTES] ? requirePositiveInt(EnvVar.MAX_MESSAGE_BYTES, env) : settings.maxMessageBytes,
    ledger: new DynamoLedger({ tableName: requireEnv(EnvVar.LEDGER_TABLE_NAME, env) }),
  };
}

let consumer: ReturnType<typeof createConsumer> | undefined;

/** The Lambda entry point; built on the first invocation so configuration errors surface with their message. */
export const handler = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> =>
  (consumer ??= createConsumer(consumerOptionsFromEnv()))(event, context);
