// Who takes a step: the run's state decides whether the step is due (a step the run is past is stale, and may owe the
// continuation a crashed step never sent), and a lease makes it this invocation's alone while it admits.
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';
import type { AdmissionStep } from '../../core/admissionStep';
import { AdmissionStatus, type RunState, type RunStateStore } from '../../adapters/admissionState';
import { logger } from '../../adapters/observability';
import type { Continuation } from './continuation';
import type { ProducerSummary } from './summary';
import { PacedJobsError } from '../../core/errors';

/** A step that cannot go on: its run has no state (expired, deleted) or is behind the step. */
export class AdmissionStateError extends PacedJobsError {
  constructor(
    message: string,
    public readonly batchId: string,
    public readonly step: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'AdmissionStateError';
  }
}

export interface StepLeaseOptions {
  jobName: string;
  runState: RunStateStore;
  continuation: Continuation;
  now: () => Date;
}

/** A step this invocation holds. */
export interface HeldStep {
  held: true;
  /** The lease's owner: this invocation. */
  owner: string;
  /** The run's state when the lease was taken. */
  state: RunState;
  startedMs: number;
  /** The invocation's remaining time when it started. */
  budgetMs: number;
}

/** A step this invocation does not take, and what it did instead. */
export interface PassedStep {
  held: false;
  summary: ProducerSummary;
}

export class StepLease {
  constructor(private readonly options: StepLeaseOptions) {}

  /**
   * Takes the step's lease when the run is at the step; otherwise the step's summary: stale (after recovering a lost
   * continuation), or in progress elsewhere (a direct invocation leaves a takeover step for when the lease ends).
   * @throws AdmissionStateError when the run has no state, or has not reached the step
   */
  async take(
    step: AdmissionStep,
    context: Context,
    direct: boolean,
    summary: ProducerSummary,
  ): Promise<HeldStep | PassedStep> {
    const { jobName, runState, now } = this.options;
    const startedMs = now().getTime();
    const budgetMs = context.getRemainingTimeInMillis();
    const state = await runState.read(jobName, step.batchId);
    if (!state) {
      const message =
        `admission step ${step.step} of ${step.batchId} has no run state in the ledger (expired or deleted); ` +
        'catch up the date';
      throw new AdmissionStateError(message, step.batchId, step.step);
    }
    if (isPast(step, state)) return this.stale(step, state, summary);
    if (state.step < step.step) {
      const message = `admission step ${step.step} of ${step.batchId} arrived before step ${state.step} ended`;
      throw new AdmissionStateError(message, step.batchId, step.step);
    }
    // The lease is this invocation's alone, not its request ID's: Lambda delivers an asynchronous event at least
    // once, and a duplicated delivery (possibly concurrent with the first) keeps the request ID, as Lambda's retries
    // do. Owned by the request ID, both copies would hold the step, and both publish and count every page. The
    // request ID stays in the owner for the logs.
    const owner = `${context.awsRequestId}/${randomUUID()}`;
    // The lease lasts as long as this invocation can: a crashed holder's step is taken over once it has expired.
    if (await runState.lease(jobName, step.batchId, step.step, owner, startedMs, startedMs + budgetMs)) {
      return { held: true, owner, state, startedMs, budgetMs };
    }
    return this.heldElsewhere(step, direct, startedMs, summary);
  }

  /** Best effort: a lease that cannot be released expires at its holder's deadline. */
  async release(step: AdmissionStep, owner: string): Promise<void> {
    try {
      await this.options.runState.release(this.options.jobName, step.batchId, step.step, owner);
    } catch (error) {
      logger.warn('could not release the admission lease of a failed step; it expires at the deadline', {
        step: step.step,
        error: error as Error,
      });
    }
  }

  /** The lease was refused: the step moved on meanwhile, or another invocation holds it. */
  private async heldElsewhere(
    step: AdmissionStep,
    direct: boolean,
    startedMs: number,
    summary: ProducerSummary,
  ): Promise<PassedStep> {
    const state = (await this.options.runState.read(this.options.jobName, step.batchId)) as RunState;
    if (isPast(step, state)) return this.stale(step, state, summary);
    const passed = { ...summary, outcome: 'in-progress' as const };
    if (direct) {
      // A direct invocation has no queue message to come back: leave one that takes the step over if the holder died.
      const delay = Math.ceil(Math.max(0, (state.leaseUntilMs ?? startedMs) - startedMs) / 1000) + 1;
      await this.options.continuation.leaveTakeover(step, delay);
      passed.continued = true;
      passed.nextStepInSeconds = delay;
    }
    logger.info('admission step is held by another invocation', {
      step: step.step,
      leaseOwner: state.leaseOwner,
      leaseUntilMs: state.leaseUntilMs,
    });
    return { held: false, summary: passed };
  }

  /**
   * A step that the run is already past. If it is the step just before the run's current one and that step's
   * continuation was never marked sent, the step that ended crashed before sending it: send it now.
   */
  private async stale(step: AdmissionStep, state: RunState, summary: ProducerSummary): Promise<PassedStep> {
    const { now } = this.options;
    const owedContinuation = state.step === step.step + 1 && state.continuationSent < state.step;
    if (state.status === AdmissionStatus.admitting && owedContinuation) {
      const dueMs = state.nextStepAt ? Date.parse(state.nextStepAt) : now().getTime();
      const delay = Math.ceil(Math.max(0, dueMs - now().getTime()) / 1000);
      await this.options.continuation.send({ ...step, step: state.step }, delay);
      logger.warn('recovered a continuation that a crashed step never sent', { step: state.step, delaySeconds: delay });
      return { held: false, summary: { ...summary, continued: true, nextStepInSeconds: delay } };
    }
    logger.info('admission step already taken; nothing to do', {
      step: step.step,
      runStep: state.step,
      status: state.status,
    });
    return { held: false, summary };
  }
}

/** The run has moved past the step, or stopped admitting. */
const isPast = (step: AdmissionStep, state: RunState) =>
  state.step > step.step || state.status !== AdmissionStatus.admitting;
