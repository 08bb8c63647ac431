// The producer Lambda: admits a run's work into the job queue step by step, at the pace the consumers can start it.
// A scheduled (or manual, or catch-up) invocation starts a run and takes its first step; each step publishes what the
// queue has room for (at most `admission.horizonSeconds` of work at the job's rate), each message delayed to about its
// rate-limit slot, and sends the next step to the producer's admission queue, delayed until the queue has drained to
// half the horizon. The backlog waits in the application's tables, where discovery finds it. It never waits for
// consumers and never runs near the 900 s ceiling. Runs of one job and business date admit one at a time: a step of a
// later run admits nothing while an earlier one is still admitting (lambda/core/admission.ts earlierRunAdmitting).
// This file wires the units together (producer/): the events, the run's start (its business date guarded), the step's
// lease, the order of a date's runs, the step's plan, the admitter (pages discovered, turned into messages, published
// and committed), the continuation (the next step sent) and the step's summary.
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { EnvVar, type JobRuntimeSettings } from '../core/constants';
import { admissionGroupSize } from '../core/admission';
import type { AnyJob } from '../core/job';
import { pacingSettings } from '../core/pacingSettings';
import { requireEnv } from '../core/settings';
import { keyField } from '../core/fairness';
import { DynamoRunStateStore, type RunStateStore } from '../adapters/admissionState';
import { bindJob, flushMetrics, logger, withLogKeys } from '../adapters/observability';
import { sqsQueueDepth, type QueueDepth } from '../adapters/queueDepth';
import { SqsPublisher, type Publisher } from '../adapters/sqsPublisher';
import { Admitter } from './producer/admitter';
import { Continuation } from './producer/continuation';
import { isSqsEvent, parseProducerEvent, parseStepRecord, type ProducerEvent } from './producer/events';
import { PagePublisher } from './producer/pagePublisher';
import { RunOrder } from './producer/runOrder';
import { RunStart } from './producer/runStart';
import { StepLease } from './producer/stepLease';
import type { ProducerAdmissionOptions } from './producer/stepPlan';
import { StepRunner } from './producer/stepRunner';
import type { ProducerSummary } from './producer/summary';
import type { JobModuleLoader } from './jobLoader';
import { loadJobRuntime, requirePositiveInt } from './runtime';

export { producerEventSchema, ProducerEventError, type ProducerEvent } from './producer/events';
export { AdmissionStateError } from './producer/stepLease';
export type { ProducerAdmissionOptions } from './producer/stepPlan';
export type { ProducerSummary } from './producer/summary';

export interface ProducerOptions {
  job: AnyJob;
  jobDeps: unknown;
  settings: JobRuntimeSettings;
  queueUrl: string;
  /** Where the next admission steps go. */
  admissionQueueUrl: string;
  maxMessageBytes: number;
  runState: RunStateStore;
  admission: ProducerAdmissionOptions;
  /** @default GetQueueAttributes on the shared SQS client */
  queueDepth?: QueueDepth;
  /** @default an SqsPublisher on the shared client */
  publisher?: Publisher;
  /** Stop starting pages when less than this share of the invocation's budget is left. @default 0.3 */
  reserveFraction?: number;
  /**
   * ... or less than this many milliseconds, but never more than half the budget (a short timeout would otherwise
   * reserve all of it). A step always publishes its first page, so a chain makes progress at any timeout. @default 20000
   */
  reserveMs?: number;
  /** @default () => new Date() */
  now?: () => Date;
}

type ProducerHandler = (event: unknown, context: Context) => Promise<ProducerSummary | SQSBatchResponse>;

/** The units of one producer, built once per container from its options (their defaults applied here). */
function producerUnits(options: ProducerOptions): { start: RunStart; steps: StepRunner } {
  const { job, jobDeps, settings, runState, admission } = options;
  const publisher = options.publisher ?? new SqsPublisher();
  const now = options.now ?? (() => new Date());
  const jobName = job.name;
  const { ratePerSecond } = admission;
  const { admissionQueueUrl } = options;
  const continuation = new Continuation({ jobName, admissionQueueUrl, runState, publisher, now });
  const admitter = new Admitter({
    job,
    jobDeps,
    settings,
    jobName,
    queueUrl: options.queueUrl,
    queueDepth: options.queueDepth ?? sqsQueueDepth(),
    runState,
    admission,
    maxMessageBytes: options.maxMessageBytes,
    // Each message's tenant for SQS fair queues: the key its per-key limits are on.
    fairnessField: keyField(settings),
    pages: new PagePublisher({ jobName, queueUrl: options.queueUrl, runState, publisher, now }),
    continuation,
    reserveFraction: options.reserveFraction ?? 0.3,
    reserveMs: options.reserveMs ?? 20_000,
    now,
  });
  const steps = new StepRunner({
    lease: new StepLease({ jobName, runState, continuation, now }),
    order: new RunOrder({ jobName, runState, continuation, ratePerSecond, groupSize: admission.groupSize, now }),
    admitter,
  });
  return { start: new RunStart({ job, jobDeps, settings, runState, ratePerSecond, now }), steps };
}

export function createProducer(options: ProducerOptions): ProducerHandler {
  bindJob(options.job.name);
  const { start, steps } = producerUnits(options);

  /** Starts the run (its state and start facts, once) and takes its first step. */
  const startRun = async (event: ProducerEvent, context: Context): Promise<ProducerSummary> => {
    const run = start.identify(event);
    return withLogKeys({ batchId: run.batchId, businessDate: run.businessDate }, async () => {
      const summary = await steps.run(await start.begin(run, event), context, true);
      logger.info('producer step finished', { ...summary });
      return summary;
    });
  };

  const runRecord = async (record: SQSRecord, context: Context) => {
    const step = parseStepRecord(record);
    await withLogKeys({ batchId: step.batchId, businessDate: step.businessDate }, async () => {
      start.refuseFuture(step.businessDate);
      const summary = await steps.run(step, context, false);
      logger.info('producer step finished', { ...summary });
    });
  };

  /** Steps from the admission queue, one record at a time; a failed step is retried by SQS, then dead-lettered. */
  const fromQueue = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
    const failures: SQSBatchResponse['batchItemFailures'] = [];
    for (const record of event.Records) {
      try {
        await runRecord(record, context);
      } catch (error) {
        logger.error('admission step failed; SQS retries it, then moves it to the producer DLQ', {
          messageId: record.messageId,
          error: error as Error,
        });
        failures.push({ itemIdentifier: record.messageId });
      }
    }
    return { batchItemFailures: failures };
  };

  return async (rawEvent, context) => {
    logger.addContext(context);
    try {
      if (isSqsEvent(rawEvent)) return await fromQueue(rawEvent, context);
      return await startRun(parseProducerEvent(rawEvent), context);
    } finally {
      flushMetrics();
    }
  };
}

/** The admission the job's settings ask for: its rate when pacing and admission are on, unlimited otherwise. */
export function admissionOptions(settings: JobRuntimeSettings): ProducerAdmissionOptions {
  const paced = pacingSettings(settings);
  if (!paced.enabled || settings.admission === undefined)
    return { ratePerSecond: undefined, horizonMs: 0, groupSize: settings.admission?.batchSize ?? 1 };
  const ratePerSecond = settings.rateLimit.startsPerInterval / settings.rateLimit.intervalSeconds;
  const groupSize = admissionGroupSize(settings.admission.batchSize, ratePerSecond, paced.shortWaitMs);
  return {
    ratePerSecond,
    horizonMs: settings.admission.horizonSeconds * 1000,
    groupSize,
    // No earlier than the consumer's short wait allows: a group's last slot must stay within it from delivery.
    leadMs: Math.min(
      (settings.admission.batchingWindowSeconds ?? 0) * 1000,
      Math.max(0, paced.shortWaitMs - ((groupSize - 1) * 1000) / ratePerSecond),
    ),
  };
}

/** Builds the producer from the variables the stack sets. */
export function producerOptionsFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  loadModule?: JobModuleLoader,
): ProducerOptions {
  const { job, jobDeps, settings } = loadJobRuntime(env, loadModule);
  return {
    job,
    jobDeps,
    settings,
    queueUrl: requireEnv(EnvVar.QUEUE_URL, env),
    admissionQueueUrl: requireEnv(EnvVar.ADMISSION_QUEUE_URL, env),
    maxMessageBytes: env[EnvVar.MAX_MESSAGE_BYTES]
      ? requirePositiveInt(EnvVar.MAX_MESSAGE_BYTES, env)
      : settings.maxMessageBytes,
    runState: new DynamoRunStateStore({ tableName: requireEnv(EnvVar.LEDGER_TABLE_NAME, env) }),
    admission: admissionOptions(settings),
  };
}

let producer: ReturnType<typeof createProducer> | undefined;

/** The Lambda entry point; built on the first invocation so configuration errors surface with their message. */
export const handler = async (event: unknown, context: Context): Promise<ProducerSummary | SQSBatchResponse> =>
  (producer ??= createProducer(producerOptionsFromEnv()))(event, context);
