// The producer Lambda: a scheduled run discovers bounded pages of work and publishes one message per operation,
// continuing itself through an async re-invocation when its time budget runs low. It never waits for consumers.
import type { Context } from 'aws-lambda';
import * as z from 'zod';
import { EnvVar, MESSAGE_VERSION, type JobRuntimeSettings } from '../core/constants';
import { businessDateFor, makeBatchId } from '../core/businessDate';
import type { AnyJob } from '../core/job';
import { businessDateSchema, idSchema, serializeMessage } from '../core/message';
import { requireEnv } from '../core/settings';
import { lambdaClient } from '../adapters/clients';
import { DynamoLedger, type Ledger } from '../adapters/ledger';
import { bindJob, count, flushMetrics, logger, MetricName, withLogKeys } from '../adapters/observability';
import { PublishError, SqsPublisher, type Publisher } from '../adapters/sqsPublisher';
import type { JobModuleLoader } from './jobLoader';
import { loadJobRuntime, requirePositiveInt } from './runtime';

/** The Scheduler's input (`scheduledTime` from `<aws.scheduler.scheduled-time>`), a manual run, or a continuation. */
export const producerEventSchema = z.object({
  scheduledTime: z.iso.datetime({ offset: true, message: 'must be an ISO-8601 timestamp' }).optional(),
  businessDate: businessDateSchema.optional(),
  batchId: idSchema.optional(),
  cursor: z.string().min(1).max(4096).optional(),
  /** Pages already published by earlier invocations of this run. @default 0 */
  page: z.number().int().min(0).optional(),
});
export type ProducerEvent = z.infer<typeof producerEventSchema>;

export interface ProducerSummary {
  batchId: string;
  businessDate: string;
  /** Pages published by this invocation. */
  pages: number;
  discovered: number;
  published: number;
  /** A continuation was started to publish the rest. */
  continued: boolean;
  /** Work remained but the run hit maxPagesPerRun. */
  stoppedAtPageLimit: boolean;
}

/** The continuation's event: everything the next invocation needs to pick up where this one stopped. */
export type ContinuationEvent = Required<Pick<ProducerEvent, 'businessDate' | 'batchId' | 'cursor' | 'page'>> & Pick<ProducerEvent, 'scheduledTime'>;

export interface ProducerOptions {
  job: AnyJob;
  jobDeps: unknown;
  settings: JobRuntimeSettings;
  queueUrl: string;
  maxMessageBytes: number;
  ledger: Ledger;
  /** @default an SqsPublisher on the shared client */
  publisher?: Publisher;
  /** @default an async self-invoke of AWS_LAMBDA_FUNCTION_NAME */
  continueRun?: (event: ContinuationEvent) => Promise<void>;
  /** Stop starting pages when less than this share of the invocation's budget is left. @default 0.3 */
  reserveFraction?: number;
  /** ... or less than this many milliseconds. @default 20000 */
  reserveMs?: number;
  /** @default () => new Date() */
  now?: () => Date;
}

export class ProducerEventError extends Error {
  constructor(message: string, public readonly reasons: string[], options?: ErrorOptions) {
    super(message, options);
    this.name = 'ProducerEventError';
  }
}

export class ContinuationError extends Error {
  constructor(message: string, public readonly continuation: ContinuationEvent, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ContinuationError';
  }
}

/** An async (Event) invocation of this same function: returns at once, and Lambda retries it on failure. */
export function selfInvoke(functionName = process.env.AWS_LAMBDA_FUNCTION_NAME): (event: ContinuationEvent) => Promise<void> {
  return async (event) => {
    if (!functionName) throw new ContinuationError('cannot continue the run: AWS_LAMBDA_FUNCTION_NAME is not set', event);
    // Loaded on first continuation, not at init (see lambdaClient): most runs never continue.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { InvokeCommand } = require('@aws-sdk/client-lambda') as typeof import('@aws-sdk/client-lambda');
    const response = await lambdaClient().send(
      new InvokeCommand({ FunctionName: functionName, InvocationType: 'Event', Payload: Buffer.from(JSON.stringify(event)) }),
    );
    if (response.StatusCode !== 202) {
      throw new ContinuationError(`continuation of ${event.batchId} was not accepted (status ${response.StatusCode})`, event);
    }
  };
}

export function createProducer(options: ProducerOptions): (event: unknown, context: Context) => Promise<ProducerSummary> {
  const { job, jobDeps, settings, ledger } = options;
  bindJob(job.name);
  const publisher = options.publisher ?? new SqsPublisher();
  const continueRun = options.continueRun ?? selfInvoke();
  const now = options.now ?? (() => new Date());
  const reserveFraction = options.reserveFraction ?? 0.3;
  const reserveMs = options.reserveMs ?? 20_000;

  const run = async (event: ProducerEvent, context: Context, businessDate: string, batchId: string): Promise<ProducerSummary> => {
    const summary: ProducerSummary = { batchId, businessDate, pages: 0, discovered: 0, published: 0, continued: false, stoppedAtPageLimit: false };
    // The budget is what this invocation had when it started, so the reserve scales with the configured timeout.
    const reserve = Math.max(reserveMs, reserveFraction * context.getRemainingTimeInMillis());
    let cursor = event.cursor;
    let page = event.page ?? 0;
    if (page === 0 && cursor === undefined) {
      await ledger.addToBatch(job.name, batchId, {}, { businessDate, scheduledTime: event.scheduledTime, startedAt: now().toISOString() });
    }
    for (;;) {
      const result = await job.discover(jobDeps, { businessDate, cursor, pageSize: settings.pageSize, now: now() });
      const enqueuedAt = now().toISOString();
      const messages = result.operations.map(({ operationId, resource }) => ({
        operationId,
        body: serializeMessage(
          { version: MESSAGE_VERSION, jobType: job.name, operationId, batchId, businessDate, resource, enqueuedAt, firstEnqueuedAt: enqueuedAt },
          options.maxMessageBytes,
        ),
      }));
      let published: number;
      try {
        published = (await publisher.publish(options.queueUrl, messages)).published;
      } catch (error) {
        // Count what did go out, then fail the invocation: the Scheduler (or Lambda's async retry, for a continuation)
        // re-runs it, and idempotency absorbs the messages published twice.
        const partial = error instanceof PublishError ? error.published : 0;
        await ledger.addToBatch(job.name, batchId, { discovered: messages.length, published: partial });
        count(MetricName.Published, partial);
        throw error;
      }
      page++;
      summary.pages++;
      summary.discovered += messages.length;
      summary.published += published;
      count(MetricName.Published, published);
      cursor = result.nextCursor;
      const finished = cursor === undefined;
      await ledger.addToBatch(job.name, batchId, { discovered: messages.length, published }, finished ? { finishedAt: now().toISOString() } : {});
      logger.info('page published', { page, published, more: !finished });
      if (finished) break;
      if (page >= settings.maxPagesPerRun) {
        summary.stoppedAtPageLimit = true;
        logger.warn('stopped at maxPagesPerRun with work remaining; raise it or the page size, or catch up', {
          maxPagesPerRun: settings.maxPagesPerRun,
          cursor,
        });
        break;
      }
      if (context.getRemainingTimeInMillis() < reserve) {
        await continueRun({ businessDate, batchId, cursor: cursor as string, page, scheduledTime: event.scheduledTime });
        summary.continued = true;
        logger.info('time budget low: run continues in a new invocation', { page, cursor });
        break;
      }
    }
    return summary;
  };

  return async (rawEvent, context) => {
    logger.addContext(context);
    const parsed = producerEventSchema.safeParse(rawEvent ?? {});
    if (!parsed.success) {
      const reasons = parsed.error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'event'}: ${i.message}`);
      throw new ProducerEventError(`invalid producer event: ${reasons.join('; ')}`, reasons);
    }
    const event = parsed.data;
    const scheduled = event.scheduledTime ? new Date(event.scheduledTime) : undefined;
    const businessDate = event.businessDate ?? businessDateFor(scheduled ?? now(), settings.timeZone, settings.businessDateOffsetDays);
    const batchId = event.batchId ?? makeBatchId(job.name, businessDate, scheduled);
    try {
      return await withLogKeys({ batchId, businessDate }, async () => {
        const summary = await run(event, context, businessDate, batchId);
        logger.info('producer run finished', { ...summary });
        return summary;
      });
    } finally {
      flushMetrics();
    }
  };
}

/** Builds the producer from the variables the stack sets. */
export function producerOptionsFromEnv(env: NodeJS.ProcessEnv = process.env, loadModule?: JobModuleLoader): ProducerOptions {
  const { job, jobDeps, settings } = loadJobRuntime(env, loadModule);
  return {
    job,
    jobDeps,
    settings,
    queueUrl: requireEnv(EnvVar.QUEUE_URL, env),
    maxMessageBytes: env[EnvVar.MAX_MESSAGE_BYTES] ? requirePositiveInt(EnvVar.MAX_MESSAGE_BYTES, env) : settings.maxMessageBytes,
    ledger: new DynamoLedger({ tableName: requireEnv(EnvVar.LEDGER_TABLE_NAME, env) }),
  };
}

let producer: ReturnType<typeof createProducer> | undefined;

/** The Lambda entry point; built on the first invocation so configuration errors surface with their message. */
export const handler = async (event: unknown, context: Context): Promise<ProducerSummary> =>
  (producer ??= createProducer(producerOptionsFromEnv()))(event, context);
