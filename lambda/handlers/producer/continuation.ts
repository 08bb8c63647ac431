// How a run's chain goes on: the next admission step sent to the producer's admission queue, delayed until it is due,
// and marked sent on the run, so a step retried after a crash between its end and the send knows to send it again.
import { SQS_MAX_DELAY_SECONDS } from '../../core/constants';
import type { AdmissionStep } from '../../core/admissionStep';
import type { RunStateStore, StepEnd } from '../../adapters/admissionState';
import { logger } from '../../adapters/observability';
import type { OutgoingMessage, Publisher } from '../../adapters/sqsPublisher';

export interface ContinuationOptions {
  jobName: string;
  /** Where the next admission steps go. */
  admissionQueueUrl: string;
  runState: RunStateStore;
  publisher: Publisher;
  now: () => Date;
}

/** A step as its admission queue message, its delay brought within what SQS accepts. */
export function stepMessage(step: AdmissionStep, delaySeconds: number): OutgoingMessage {
  return {
    operationId: `admission:${step.batchId}:${step.step}`,
    body: JSON.stringify(step),
    delaySeconds: Math.min(SQS_MAX_DELAY_SECONDS, Math.max(0, delaySeconds)),
  };
}

export class Continuation {
  constructor(private readonly options: ContinuationOptions) {}

  /** Sends `step` (the run's next) to come back in `delaySeconds`, and marks its continuation sent. */
  async send(step: AdmissionStep, delaySeconds: number): Promise<void> {
    await this.options.publisher.publish(this.options.admissionQueueUrl, [stepMessage(step, delaySeconds)]);
    await this.options.runState.markContinuation(this.options.jobName, step.batchId, step.step);
  }

  /**
   * Ends a step that leaves its run admitting, its next step due in `delaySeconds`, and sends that step. False, and
   * nothing sent, when the lease was lost meanwhile: the invocation that took the step over goes on.
   */
  async chainNext(
    step: AdmissionStep,
    owner: string,
    delaySeconds: number,
    end: Omit<StepEnd, 'nextStepAt'>,
  ): Promise<boolean> {
    const { jobName, runState, now } = this.options;
    const nextStepAt = new Date(now().getTime() + delaySeconds * 1000).toISOString();
    if (!(await runState.endStep(jobName, step.batchId, step.step, owner, { ...end, nextStepAt }))) {
      logger.warn('lost the admission lease at the end of the step; the invocation that took it goes on', {
        step: step.step,
      });
      return false;
    }
    await this.send({ ...step, step: step.step + 1 }, delaySeconds);
    return true;
  }

  /**
   * Sends the same step again, to take it over in `delaySeconds` if its holder died: a direct invocation that found the
   * step held has no queue message to come back. Not a continuation: the run's step does not move.
   */
  async leaveTakeover(step: AdmissionStep, delaySeconds: number): Promise<void> {
    await this.options.publisher.publish(this.options.admissionQueueUrl, [stepMessage(step, delaySeconds)]);
  }
}
