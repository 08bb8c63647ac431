// The producer Lambda: admits a run's work into the job queue step by step, at the pace the consumers can start it.
// A scheduled (or manual, or catch-up) invocation starts a run and takes its first step; each step publishes what the
// queue has room for (at most `admission.horizonSeconds` of work at the job's rate), each message delayed to about its
// rate-limit slot, and sends the next step to the producer's admission queue, delayed until the queue has drained to
// half the horizon. The backlog waits in the application's tables, where discovery finds it. It never waits for
// consumers and never runs near the 900 s ceiling. Runs of one job and business date admit one at a time: a step of a
// later run admits nothing while an earlier one is still admitting (lambda/core/admission.ts earlierRunAdmitting).
import { randomUUID } from 'node:crypto';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import * as z from 'zod/mini';
import { EnvVar, MESSAGE_VERSION, SQS_MAX_DELAY_SECONDS, type JobRuntimeSettings } from '../core/constants';
import { admissionStep, admissionStepSchema, type AdmissionStep } from '../core/admissionStep';
import {
  activeChainGraceMs,
  admissionGroupSize,
  delaySecondsUntil,
  earlierRunAdmitting,
  nextStepDelaySeconds,
  planAdmission,
  visibleAtMs,
  waitDelaySeconds,
  type RunAhead,
} from '../core/admission';
import { assertNotFutureBusinessDate, businessDateFor, makeBatchId } from '../core/businessDate';
import { PacedJobsError } from '../core/errors';
import type { AnyJob, DiscoverPage } from '../core/job';
import { boundReasons, businessDateSchema, idSchema, InvalidMessageError, serializeMessage, type JobMessage } from '../core/message';
import { describeIssues } from '../core/issues';
import { pacingSettings } from '../core/pacingSettings';
import { requireEnv } from '../core/settings';
import { fairnessGroup, keyField } from '../core/fairness';
import {
  AdmissionStatus,
  DynamoRunStateStore,
  type InvalidRowRecord,
  type RunState,
  type RunStateStore,
  type StepEnd,
} from '../adapters/admissionState';
import { bindJob, count, flushMetrics, logger, MetricName, withLogKeys } from '../adapters/observability';
import { sqsQueueDepth, type QueueDepth } from '../adapters/queueDepth';
import { SqsPublisher, type Publisher } from '../adapters/sqsPublisher';
import type { JobModuleLoader } from './jobLoader';
import { loadJobRuntime, requirePositiveInt } from './runtime';

/** The Scheduler's input (`scheduledTime` from `<aws.scheduler.scheduled-time>`), a manual run, or a catch-up. */
export const producerEventSchema = z.object({
  scheduledTime: z.optional(z.iso.datetime({ offset: true, message: 'must be an ISO-8601 timestamp' })),
  businessDate: z.optional(businessDateSchema),
  batchId: z.optional(idSchema),
  /** A catch-up (`ops catch-up`): the run's work is backfill, paced behind live work. @default false */
  backfill: z.optional(z.boolean()),
});
export type ProducerEvent = z.infer<typeof producerEventSchema>;

export interface ProducerSummary {
  batchId: string;
  businessDate: string;
  step: number;
  /**
   * What this step did: admitted pages, nothing (the step was already taken, or is being taken, or an earlier run of
   * the date is still admitting: `waiting`), or finished.
   */
  outcome: 'admitted' | 'stale' | 'in-progress' | 'lease-lost' | 'waiting';
  /** Pages published by this step. */
  pages: number;
  discovered: number;
  published: number;
  /**
   * Source rows this step could not turn into valid messages: recorded in the run ledger for review and skipped (not in
   * `discovered`). Absent when there were none.
   */
  invalidRows?: number;
  /** A next step was sent to the admission queue. */
  continued: boolean;
  /** Seconds until the next step, when one was sent. */
  nextStepInSeconds?: number;
  /** Discovery is finished: the whole run is admitted. */
  finished: boolean;
  /** Work remained but the run hit maxPagesPerRun. */
  stoppedAtPageLimit: boolean;
}

export interface ProducerAdmissionOptions {
  /** Starts per second the consumers may make; undefined admits everything at once (pacing or admission off). */
  ratePerSecond: number | undefined;
  /** Work (in time at the rate) the queue may hold. */
  horizonMs: number;
  /** Messages made visible together: one event-source batch, within the consumer's short wait. */
  groupSize: number;
  /**
   * How much earlier than its first slot a group becomes visible: the event source's batching window. A batch the
   * event source cannot fill waits out the window before it is delivered, and so does a group that several pollers
   * split between them; shown that much earlier, it still starts at its slot (a whole group delivered at once waits
   * that long in the function instead). @default 0
   */
  leadMs?: number;
}

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

export class ProducerEventError extends PacedJobsError {
  constructor(message: string, public readonly reasons: string[], options?: ErrorOptions) {
    super(message, options);
    this.name = 'ProducerEventError';
  }
}

/** A step that cannot go on: its run has no state (expired, deleted) or is behind the step. */
export class AdmissionStateError extends PacedJobsError {
  constructor(message: string, public readonly batchId: string, public readonly step: number, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AdmissionStateError';
  }
}

const reasonsOf = (error: z.core.$ZodError) => describeIssues(error, { root: 'event' });

const isSqsEvent = (event: unknown): event is SQSEvent =>
  typeof event === 'object' && event !== null && Array.isArray((event as SQSEvent).Records) && (event as SQSEvent).Records.every((r) => r?.eventSource === 'aws:sqs');

export function createProducer(options: ProducerOptions): (event: unknown, context: Context) => Promise<ProducerSummary | SQSBatchResponse> {
  const { job, jobDeps, settings, runState, admission } = options;
  // Each message's tenant for SQS fair queues: the key its per-key limits are on.
  const fairnessField = keyField(settings);
  bindJob(job.name);
  const publisher = options.publisher ?? new SqsPublisher();
  const queueDepth = options.queueDepth ?? sqsQueueDepth();
  const now = options.now ?? (() => new Date());
  const reserveFraction = options.reserveFraction ?? 0.3;
  const reserveMs = options.reserveMs ?? 20_000;
  const rate = admission.ratePerSecond;

  const sendStep = async (step: AdmissionStep, delaySeconds: number) => {
    await publisher.publish(options.admissionQueueUrl, [
      { operationId: `admission:${step.batchId}:${step.step}`, body: JSON.stringify(step), delaySeconds: Math.min(SQS_MAX_DELAY_SECONDS, Math.max(0, delaySeconds)) },
    ]);
    await runState.markContinuation(job.name, step.batchId, step.step);
  };

  /**
   * A step that the run is already past. If it is the step just before the run's current one and that step's
   * continuation was never marked sent, the step that ended crashed before sending it: send it now.
   */
  const stale = async (step: AdmissionStep, state: RunState, summary: ProducerSummary): Promise<ProducerSummary> => {
    if (state.status === AdmissionStatus.admitting && state.step === step.step + 1 && state.continuationSent < state.step) {
      const dueMs = state.nextStepAt ? Date.parse(state.nextStepAt) : now().getTime();
      const delay = Math.ceil(Math.max(0, dueMs - now().getTime()) / 1000);
      await sendStep({ ...step, step: state.step }, delay);
      logger.warn('recovered a continuation that a crashed step never sent', { step: state.step, delaySeconds: delay });
      return { ...summary, continued: true, nextStepInSeconds: delay };
    }
    logger.info('admission step already taken; nothing to do', { step: step.step, runStep: state.step, status: state.status });
    return summary;
  };

  const runStep = async (step: AdmissionStep, context: Context, direct: boolean): Promise<ProducerSummary> => {
    const summary: ProducerSummary = {
      batchId: step.batchId, businessDate: step.businessDate, step: step.step, outcome: 'stale',
      pages: 0, discovered: 0, published: 0, continued: false, finished: false, stoppedAtPageLimit: false,
    };
    // The budget is what this invocation had when it started, so the reserve scales with the configured timeout.
    const startedMs = now().getTime();
    const budgetMs = context.getRemainingTimeInMillis();
    const reserve = Math.max(reserveFraction * budgetMs, Math.min(reserveMs, budgetMs / 2));
    let state = await runState.read(job.name, step.batchId);
    if (!state) throw new AdmissionStateError(`admission step ${step.step} of ${step.batchId} has no run state in the ledger (expired or deleted); catch up the date`, step.batchId, step.step);
    if (state.step > step.step || state.status !== AdmissionStatus.admitting) return stale(step, state, summary);
    if (state.step < step.step) throw new AdmissionStateError(`admission step ${step.step} of ${step.batchId} arrived before step ${state.step} ended`, step.batchId, step.step);

    // The lease is this invocation's alone, not its request ID's: Lambda delivers an asynchronous event at least once,
    // and a duplicated delivery (possibly concurrent with the first) keeps the request ID, as Lambda's retries do. Owned
    // by the request ID, both copies would hold the step, and both publish and count every page. The request ID stays
    // in the owner for the logs.
    const owner = `${context.awsRequestId}/${randomUUID()}`;
    // The lease lasts as long as this invocation can: a crashed holder's step is taken over once it has expired.
    if (!(await runState.lease(job.name, step.batchId, step.step, owner, startedMs, startedMs + budgetMs))) {
      state = (await runState.read(job.name, step.batchId)) as RunState;
      if (state.step > step.step || state.status !== AdmissionStatus.admitting) return stale(step, state, summary);
      summary.outcome = 'in-progress';
      if (direct) {
        // A direct invocation has no queue message to come back: leave one that takes the step over if the holder died.
        const delay = Math.ceil(Math.max(0, (state.leaseUntilMs ?? startedMs) - startedMs) / 1000) + 1;
        await publisher.publish(options.admissionQueueUrl, [{ operationId: `admission:${step.batchId}:${step.step}`, body: JSON.stringify(step), delaySeconds: Math.min(SQS_MAX_DELAY_SECONDS, delay) }]);
        summary.continued = true;
        summary.nextStepInSeconds = delay;
      }
      logger.info('admission step is held by another invocation', { step: step.step, leaseOwner: state.leaseOwner, leaseUntilMs: state.leaseUntilMs });
      return summary;
    }
    summary.outcome = 'admitted';
    try {
      const ahead = await earlierRun(step, state, startedMs, budgetMs);
      if (ahead) return await wait(step, ahead, owner, summary);
      return await admit(step, context, state, owner, summary, startedMs, reserve);
    } catch (error) {
      // A step that fails (a publish, a ledger write) gives its lease up, so its retry (Lambda's, with the same request
      // ID, or SQS's) takes the step at once, from the last committed cursor. A crashed or timed-out invocation cannot:
      // its lease expires at its deadline, and the retry or the takeover step takes the step over then.
      await release(step, owner);
      throw error;
    }
  };

  /** Best effort: a lease that cannot be released expires at its holder's deadline. */
  const release = async (step: AdmissionStep, owner: string) => {
    try {
      await runState.release(job.name, step.batchId, step.step, owner);
    } catch (error) {
      logger.warn('could not release the admission lease of a failed step; it expires at the deadline', { step: step.step, error: error as Error });
    }
  };

  /**
   * The earlier run of the same date this run must not admit beside (lambda/core/admission.ts earlierRunAdmitting has
   * the rule and why), from one Query of the date's runs. A failed read waits for none: the step admits as it did
   * before runs of a date were ordered (a duplicate costs a place in the plan, never an operation).
   */
  const earlierRun = async (step: AdmissionStep, state: RunState, startedMs: number, budgetMs: number): Promise<RunAhead | undefined> => {
    if (!runState.dateRuns) return undefined;
    let runs;
    try {
      runs = await runState.dateRuns(job.name, step.businessDate);
    } catch (error) {
      logger.warn('could not read the runs of the business date; this step admits without waiting for an earlier one', { error: error as Error });
      return undefined;
    }
    const self = { batchId: step.batchId, startedAt: state.startedAt, backfill: state.backfill ?? step.backfill };
    // The last group of an ended run starts over one group's slots after its plan's end.
    const lingerMs = rate === undefined ? 0 : (admission.groupSize * 1000) / rate;
    // The budget stands for the producer's timeout: how long an earlier run's killed step may hold its lease.
    return earlierRunAdmitting(self, runs, { nowMs: startedMs, graceMs: activeChainGraceMs(budgetMs), lingerMs });
  };

  /**
   * A step of a run that waits for an earlier run of its date: admits nothing and chains its next step, as a step that
   * found the queue full does, for when the earlier run may have finished; that step discovers what is still not
   * completed. Its `nextStepAt` is ahead, so the run is admitting and not stalled (stalledSince).
   */
  const wait = async (step: AdmissionStep, ahead: RunAhead, owner: string, summary: ProducerSummary): Promise<ProducerSummary> => {
    const delay = waitDelaySeconds(ahead.resumeAtMs, now().getTime());
    const chained = await chainNext(step, owner, delay, { status: AdmissionStatus.admitting, waitingFor: ahead.run.batchId });
    if (!chained) return { ...summary, outcome: 'lease-lost' };
    logger.info('admission waits for an earlier run of the business date', {
      step: step.step,
      earlierBatchId: ahead.run.batchId,
      earlierRun: ahead.reason === 'admitting' ? 'admitting' : 'admission ended, its last slots still ahead',
      delaySeconds: delay,
    });
    return { ...summary, outcome: 'waiting', continued: true, nextStepInSeconds: delay };
  };

  /**
   * Ends a step that leaves its run admitting, its next step due in `delaySeconds`, and sends that step. False, and
   * nothing sent, when the lease was lost meanwhile: the invocation that took the step over goes on.
   */
  const chainNext = async (step: AdmissionStep, owner: string, delaySeconds: number, end: Omit<StepEnd, 'nextStepAt'>): Promise<boolean> => {
    const nextStepAt = new Date(now().getTime() + delaySeconds * 1000).toISOString();
    if (!(await runState.endStep(job.name, step.batchId, step.step, owner, { ...end, nextStepAt }))) {
      logger.warn('lost the admission lease at the end of the step; the invocation that took it goes on', { step: step.step });
      return false;
    }
    await sendStep({ ...step, step: step.step + 1 }, delaySeconds);
    return true;
  };

  /** The step's work, under its lease: admits pages while the plan and time allow, then ends the step. */
  const admit = async (step: AdmissionStep, context: Context, state: RunState, owner: string, summary: ProducerSummary, startedMs: number, reserve: number): Promise<ProducerSummary> => {
    // Live work goes first at the consumers, so a live run queues only behind the messages that are not backfill.
    const queued = rate === undefined ? 0 : await queueDepth(options.queueUrl);
    const depth = rate === undefined || step.backfill || !runState.backfillOutstanding ? queued : Math.max(0, queued - (await backfillAhead(runState, job.name)));
    const plan = planAdmission({ nowMs: startedMs, queueDepth: depth, ratePerSecond: rate, horizonMs: admission.horizonMs, plannedUntilMs: state.plannedUntilMs });
    let cursor = state.cursor;
    let pages = state.pages;
    let orphans = state.orphans;
    let plannedUntilMs = state.plannedUntilMs;
    let admitted = 0;
    let finished = false;
    let timeLow = false;
    logger.info('admission step', { step: step.step, queueDepth: depth, admit: Number.isFinite(plan.admit) ? plan.admit : 'all', firstVisibleAt: new Date(plan.firstVisibleMs).toISOString() });
    while (admitted < plan.admit) {
      if (pages >= settings.maxPagesPerRun) {
        summary.stoppedAtPageLimit = true;
        logger.warn('stopped at maxPagesPerRun with work remaining; raise it or the page size, or catch up', { maxPagesPerRun: settings.maxPagesPerRun, cursor });
        break;
      }
      // Only after a first page: a step that yielded before publishing anything would chain for ever without progress.
      if (summary.pages > 0 && context.getRemainingTimeInMillis() < reserve) {
        timeLow = true;
        break;
      }
      const pageSize = Math.min(settings.pageSize, plan.admit - admitted);
      // The SLO's deadline for every operation of the run: its scheduled time (or its start) plus the window.
      const runStart = Date.parse(step.scheduledTime ?? state.startedAt ?? '');
      const dueBy = settings.slo && !Number.isNaN(runStart) ? new Date(runStart + settings.slo.completeWithinMinutes * 60_000).toISOString() : undefined;
      const pageStartedMs = now().getTime();
      const result = await job.discover(jobDeps, { businessDate: step.businessDate, cursor, pageSize, now: now() });
      const sentAtMs = now().getTime();
      const enqueuedAt = new Date(sentAtMs).toISOString();
      const envelope = (operationId: string, resource: JobMessage['resource']): JobMessage => ({
        version: MESSAGE_VERSION, jobType: job.name, operationId, batchId: step.batchId, businessDate: step.businessDate, resource, enqueuedAt, firstEnqueuedAt: enqueuedAt,
        ...(dueBy ? { dueBy } : {}),
        ...(step.backfill ? { backfill: true as const } : {}),
      });
      const { ready, invalid } = checkPage(job, result, envelope, options.maxMessageBytes);
      let lastVisibleMs = plannedUntilMs;
      const messages = ready.map(({ operationId, resource, body }, i) => {
        // The plan is in slots; only the delay is shown the lead earlier, so the next step plans from the slots.
        const slotMs = visibleAtMs(admitted + i, plan, rate, admission.groupSize);
        lastVisibleMs = slotMs;
        const groupId = fairnessGroup(resource, fairnessField, step.backfill === true);
        return {
          operationId,
          delaySeconds: delaySecondsUntil(slotMs - (admission.leadMs ?? 0), sentAtMs),
          body,
          ...(groupId !== undefined ? { groupId } : {}),
        };
      });
      // What this attempt discovered, kept before it publishes: the business date's audit lists the date's operations
      // from it, and an attempt that takes the page over after a kill finds it. Operations a killed attempt of this
      // page discovered that this one did not (it may have published them, and they were applied since) are the run's
      // orphans: counted as discovered once, and resolved by their completion records (lambda/core/ledgerContract.ts).
      const operationIds = messages.map((m) => m.operationId);
      const fresh = new Set(operationIds);
      const earlier = await runState.pageAttempts(job.name, step.batchId, pages + 1);
      const orphanSet = new Set(orphans);
      const rediscovered = operationIds.filter((op) => orphanSet.has(op));
      const leftOver = [...new Set(earlier.flat())].filter((op) => !fresh.has(op) && !orphanSet.has(op));
      const nextOrphans = leftOver.length > 0 || rediscovered.length > 0 ? [...orphans.filter((op) => !fresh.has(op)), ...leftOver] : undefined;
      await runState.recordPage(job.name, step.batchId, pages + 1, owner, operationIds, pageStartedMs);
      // Kept for review before the page goes out, so a page never publishes around rows the ledger has not recorded.
      if (invalid.length > 0) await runState.recordInvalidRows(job.name, step.batchId, pages + 1, invalid);
      // A failure here fails the step before its commit: the step runs again from the same cursor, and idempotency
      // absorbs the messages that went out twice. Nothing is counted until the commit.
      const { published } = await publisher.publish(options.queueUrl, messages);
      cursor = result.nextCursor;
      finished = cursor === undefined;
      const committed = await runState.commitPage(job.name, step.batchId, step.step, owner, {
        cursor,
        // An orphan found again is counted once: it was counted when it became one.
        discovered: messages.length - rediscovered.length + leftOver.length,
        published,
        orphans: nextOrphans,
        invalidRows: invalid.length,
        plannedUntilMs: rate === undefined ? undefined : lastVisibleMs,
        finishedAt: finished ? now().toISOString() : undefined,
      });
      if (!committed) {
        // Only an expired lease is taken over: this invocation ran past its own deadline's estimate. The new holder
        // re-publishes this page from the last committed cursor.
        logger.warn('lost the admission lease while publishing; the step continues in the invocation that took it', { step: step.step });
        return { ...summary, outcome: 'lease-lost' };
      }
      pages++;
      if (nextOrphans !== undefined) orphans = nextOrphans;
      admitted += messages.length;
      plannedUntilMs = rate === undefined ? undefined : lastVisibleMs;
      summary.pages++;
      summary.discovered += messages.length;
      summary.published += published;
      count(MetricName.Published, published);
      if (invalid.length > 0) {
        summary.invalidRows = (summary.invalidRows ?? 0) + invalid.length;
        count(MetricName.DiscoveryRowsRejected, invalid.length);
        logger.warn('source rows that cannot become messages were recorded in the run ledger and skipped; `ops audit` lists them', {
          page: pages,
          invalidRows: invalid.length,
          firstRows: invalid.slice(0, LOGGED_INVALID_ROWS),
        });
      }
      logger.info('page published', { page: pages, published, more: !finished });
      if (finished) break;
    }

    const status = finished ? AdmissionStatus.complete : summary.stoppedAtPageLimit ? AdmissionStatus.pageLimit : AdmissionStatus.admitting;
    summary.finished = finished;
    if (status !== AdmissionStatus.admitting) {
      await runState.endStep(job.name, step.batchId, step.step, owner, { status, plannedUntilMs });
      return summary;
    }
    // Out of time: go on at once. Otherwise when the queue has drained to half the horizon: after this step's last
    // message, or after what the queue already holds when this step could admit nothing.
    const spacingMs = rate === undefined ? 0 : 1000 / rate;
    const drainedUntilMs = Math.max(plannedUntilMs ?? startedMs, plan.firstVisibleMs - spacingMs);
    const delay = timeLow ? 0 : nextStepDelaySeconds({ nowMs: now().getTime(), plannedUntilMs: drainedUntilMs, horizonMs: admission.horizonMs, ratePerSecond: rate, minSeconds: 5 });
    if (!(await chainNext(step, owner, delay, { status, plannedUntilMs }))) return { ...summary, outcome: 'lease-lost' };
    summary.continued = true;
    summary.nextStepInSeconds = delay;
    logger.info('next admission step sent', { step: step.step + 1, delaySeconds: delay, timeLow });
    return summary;
  };

  /**
   * Refuses a run or step of a business date after the job's latest now, before it reads or writes anything: its
   * discovery and its cutoffs would reach into the future. Thrown, not returned: the event is kept in the producer
   * DLQ for review (after Lambda's asynchronous retries, or the admission queue's receives, which repeat the refusal
   * and change nothing) and its alarm fires, where a returned refusal would leave a bad Scheduler input unseen every
   * night. A synchronous invoke (ops catch-up) gets the message back.
   * @throws FutureBusinessDateError naming the date and the latest allowed one
   */
  const refuseFuture = (businessDate: string) => {
    try {
      assertNotFutureBusinessDate(job.name, businessDate, settings, now());
    } catch (error) {
      logger.error('refused a business date in the future; nothing was admitted', { businessDate, error: error as Error });
      throw error;
    }
  };

  /** Starts the run (its state and start facts, once) and takes its first step. */
  const start = async (event: ProducerEvent, context: Context): Promise<ProducerSummary> => {
    const scheduled = event.scheduledTime ? new Date(event.scheduledTime) : undefined;
    const businessDate = event.businessDate ?? businessDateFor(scheduled ?? now(), settings.timeZone, settings.businessDateOffsetDays);
    refuseFuture(businessDate);
    const batchId = event.batchId ?? makeBatchId(job.name, businessDate, scheduled);
    return withLogKeys({ batchId, businessDate }, async () => {
      const existing = await runState.read(job.name, batchId);
      let eligible: number | undefined;
      if (!existing && job.countEligible) {
        try {
          eligible = await job.countEligible(jobDeps, { businessDate, now: now() });
        } catch (error) {
          // A figure for the operator, not the run: admission goes on without it.
          logger.warn('could not count the eligible records; ops status will not project the finish', { error: error as Error });
        }
      }
      await runState.ensure(job.name, batchId, {
        businessDate,
        scheduledTime: event.scheduledTime,
        startedAt: now().toISOString(),
        admissionRatePerMinute: rate === undefined ? undefined : Math.round(rate * 60 * 1000) / 1000,
        eligible,
        ...(event.backfill ? { backfill: true as const } : {}),
      });
      const summary = await runStep(admissionStep({ batchId, businessDate, step: 0, scheduledTime: event.scheduledTime, backfill: event.backfill }), context, true);
      logger.info('producer step finished', { ...summary });
      return summary;
    });
  };

  /** Steps from the admission queue, one record at a time; a failed step is retried by SQS, then dead-lettered. */
  const fromQueue = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
    const failures: SQSBatchResponse['batchItemFailures'] = [];
    for (const record of event.Records) {
      try {
        await runRecord(record, context);
      } catch (error) {
        logger.error('admission step failed; SQS retries it, then moves it to the producer DLQ', { messageId: record.messageId, error: error as Error });
        failures.push({ itemIdentifier: record.messageId });
      }
    }
    return { batchItemFailures: failures };
  };

  const runRecord = async (record: SQSRecord, context: Context) => {
    let raw: unknown;
    try {
      raw = JSON.parse(record.body);
    } catch (error) {
      throw new ProducerEventError(`admission step ${record.messageId} is not JSON`, ['body: not JSON'], { cause: error });
    }
    const parsed = admissionStepSchema.safeParse(raw);
    if (!parsed.success) {
      const reasons = reasonsOf(parsed.error);
      throw new ProducerEventError(`invalid admission step: ${reasons.join('; ')}`, reasons);
    }
    const step = parsed.data;
    await withLogKeys({ batchId: step.batchId, businessDate: step.businessDate }, async () => {
      refuseFuture(step.businessDate);
      const summary = await runStep(step, context, false);
      logger.info('producer step finished', { ...summary });
    });
  };

  return async (rawEvent, context) => {
    logger.addContext(context);
    try {
      if (isSqsEvent(rawEvent)) return await fromQueue(rawEvent, context);
      const parsed = producerEventSchema.safeParse(rawEvent ?? {});
      if (!parsed.success) {
        const reasons = reasonsOf(parsed.error);
        throw new ProducerEventError(`invalid producer event: ${reasons.join('; ')}`, reasons);
      }
      return await start(parsed.data, context);
    } finally {
      flushMetrics();
    }
  };
}

/** Invalid rows a page's warning names; the ledger holds them all. */
const LOGGED_INVALID_ROWS = 10;

/** A page's operations ready to publish, and the rows that cannot be (InvalidRow, bounded for the ledger). */
interface CheckedPage {
  ready: { operationId: string; resource: JobMessage['resource']; body: string }[];
  invalid: InvalidRowRecord[];
}

/** A row's key and reasons escaped and bounded as a rejection's reasons are (the key can be anything a table holds). */
const invalidRow = (key: string, reasons: string[]): InvalidRowRecord => ({ key: boundReasons([key])[0], reasons: boundReasons(reasons) });

/**
 * Each operation of a page as its message body, or as an invalid row when it cannot be one: a row the job handed
 * back, or an operation whose resource fails the job's schema, or whose message breaks the contract (its operation ID,
 * its size). The producer checks what a job returns itself, so a job that returns a bad operation instead of handing
 * its row back still cannot halt the run. An operation's row is known to the producer by its operation ID only.
 */
function checkPage(
  job: AnyJob,
  page: DiscoverPage<JobMessage['resource']>,
  envelope: (operationId: string, resource: JobMessage['resource']) => JobMessage,
  maxBytes: number,
): CheckedPage {
  const invalid = (page.invalid ?? []).map((row) => invalidRow(String(row.key), [String(row.reason)]));
  const ready: CheckedPage['ready'] = [];
  for (const { operationId, resource } of page.operations) {
    const parsed = job.resourceSchema.safeParse(resource);
    if (!parsed.success) {
      const reasons = describeIssues(parsed.error, { root: 'resource', rootInPaths: true });
      invalid.push(invalidRow(String(operationId), reasons));
      continue;
    }
    try {
      ready.push({ operationId, resource, body: serializeMessage(envelope(operationId, resource), maxBytes) });
    } catch (error) {
      if (!(error instanceof InvalidMessageError)) throw error;
      // parseMessage has bounded these reasons already.
      invalid.push({ key: invalidRow(String(operationId), []).key, reasons: error.reasons });
    }
  }
  return { ready, invalid };
}

/** Backfill messages in the queue; a failed read counts none (the live run queues behind all, as before). */
async function backfillAhead(runState: RunStateStore, job: string): Promise<number> {
  try {
    return (await runState.backfillOutstanding?.(job)) ?? 0;
  } catch (error) {
    logger.warn('could not read the backfill runs\' figures; admission counts the whole queue', { error: error as Error });
    return 0;
  }
}

/** The admission the job's settings ask for: its rate when pacing and admission are on, unlimited otherwise. */
export function admissionOptions(settings: JobRuntimeSettings): ProducerAdmissionOptions {
  const paced = pacingSettings(settings);
  if (!paced.enabled || settings.admission === undefined) return { ratePerSecond: undefined, horizonMs: 0, groupSize: settings.admission?.batchSize ?? 1 };
  const ratePerSecond = settings.rateLimit.startsPerInterval / settings.rateLimit.intervalSeconds;
  const groupSize = admissionGroupSize(settings.admission.batchSize, ratePerSecond, paced.shortWaitMs);
  return {
    ratePerSecond,
    horizonMs: settings.admission.horizonSeconds * 1000,
    groupSize,
    // No earlier than the consumer's short wait allows: a group's last slot must stay within it from delivery.
    leadMs: Math.min((settings.admission.batchingWindowSeconds ?? 0) * 1000, Math.max(0, paced.shortWaitMs - ((groupSize - 1) * 1000) / ratePerSecond)),
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
    admissionQueueUrl: requireEnv(EnvVar.ADMISSION_QUEUE_URL, env),
    maxMessageBytes: env[EnvVar.MAX_MESSAGE_BYTES] ? requirePositiveInt(EnvVar.MAX_MESSAGE_BYTES, env) : settings.maxMessageBytes,
    runState: new DynamoRunStateStore({ tableName: requireEnv(EnvVar.LEDGER_TABLE_NAME, env) }),
    admission: admissionOptions(settings),
  };
}

let producer: ReturnType<typeof createProducer> | undefined;

/** The Lambda entry point; built on the first invocation so configuration errors surface with their message. */
export const handler = async (event: unknown, context: Context): Promise<ProducerSummary | SQSBatchResponse> =>
  (producer ??= createProducer(producerOptionsFromEnv()))(event, context);
