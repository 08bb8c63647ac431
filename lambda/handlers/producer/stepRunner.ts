// One admission step, start to end: take it (or report why not), wait behind an earlier run of the date, or admit;
// a step that fails gives its lease up, so its retry takes the step at once.
import type { Context } from 'aws-lambda';
import type { AdmissionStep } from '../../core/admissionStep';
import type { Admitter } from './admitter';
import type { RunOrder } from './runOrder';
import type { StepLease } from './stepLease';
import { emptySummary, type ProducerSummary } from './summary';

export interface StepRunnerOptions {
  lease: StepLease;
  order: RunOrder;
  admitter: Admitter;
}

export class StepRunner {
  constructor(private readonly options: StepRunnerOptions) {}

  /**
   * @param direct the step came from a direct invocation (the run's start), not from the admission queue
   * @throws AdmissionStateError when the run has no state or is behind the step, or what the step's work threw
   */
  async run(step: AdmissionStep, context: Context, direct: boolean): Promise<ProducerSummary> {
    const { lease, order, admitter } = this.options;
    const taken = await lease.take(step, context, direct, emptySummary(step));
    if (!taken.held) return taken.summary;
    const summary: ProducerSummary = { ...emptySummary(step), outcome: 'admitted' };
    try {
      const ahead = await order.earlierRun(step, taken.state, taken.startedMs, taken.budgetMs);
      if (ahead) return await order.wait(step, ahead, taken.owner, summary);
      return await admitter.admit(step, context, taken, summary);
    } catch (error) {
      // A step that fails (a publish, a ledger write) gives its lease up, so its retry (Lambda's, with the same request
      // ID, or SQS's) takes the step at once, from the last committed cursor. A crashed or timed-out invocation cannot:
      // its lease expires at its deadline, and the retry or the takeover step takes the step over then.
      await lease.release(step, taken.owner);
      throw error;
    }
  }
}
