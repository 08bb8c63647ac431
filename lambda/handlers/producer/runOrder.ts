// Runs of one job and business date admit one at a time: a step of a later run admits nothing while an earlier run is
// still admitting or its last slots are still ahead (lambda/core/admission.ts earlierRunAdmitting has the rule and
// why), and comes back when that run may be done.
import { activeChainGraceMs, earlierRunAdmitting, waitDelaySeconds, type RunAhead } from '../../core/admission';
import type { AdmissionStep } from '../../core/admissionStep';
import { AdmissionStatus, type RunState, type RunStateStore } from '../../adapters/admissionState';
import { logger } from '../../adapters/observability';
import type { Continuation } from './continuation';
import type { ProducerSummary } from './summary';

export interface RunOrderOptions {
  jobName: string;
  runState: RunStateStore;
  continuation: Continuation;
  /** Starts per second admission plans with; undefined when unlimited. */
  ratePerSecond: number | undefined;
  /** Messages made visible together (ProducerAdmissionOptions.groupSize). */
  groupSize: number;
  now: () => Date;
}

export class RunOrder {
  constructor(private readonly options: RunOrderOptions) {}

  /**
   * The earlier run of the same date this run must not admit beside, from one Query of the date's runs. A failed read
   * waits for none: the step admits as it did before runs of a date were ordered (a duplicate costs a place in the
   * plan, never an operation).
   * @param budgetMs the invocation's time: it stands for the producer's timeout, how long an earlier run's killed step
   * may hold its lease
   */
  async earlierRun(
    step: AdmissionStep,
    state: RunState,
    startedMs: number,
    budgetMs: number,
  ): Promise<RunAhead | undefined> {
    const { jobName, runState, ratePerSecond: rate, groupSize } = this.options;
    if (!runState.dateRuns) return undefined;
    let runs;
    try {
      runs = await runState.dateRuns(jobName, step.businessDate);
    } catch (error) {
      logger.warn('could not read the runs of the business date; this step admits without waiting for an earlier one', {
        error: error as Error,
      });
      return undefined;
    }
    const self = { batchId: step.batchId, startedAt: state.startedAt, backfill: state.backfill ?? step.backfill };
    // The last group of an ended run starts over one group's slots after its plan's end.
    const lingerMs = rate === undefined ? 0 : (groupSize * 1000) / rate;
    return earlierRunAdmitting(self, runs, { nowMs: startedMs, graceMs: activeChainGraceMs(budgetMs), lingerMs });
  }

  /**
   * A step of a run that waits for an earlier run of its date: admits nothing and chains its next step, as a step that
   * found the queue full does, for when the earlier run may have finished; that step discovers what is still not
   * completed. Its `nextStepAt` is ahead, so the run is admitting and not stalled (stalledSince).
   */
  async wait(step: AdmissionStep, ahead: RunAhead, owner: string, summary: ProducerSummary): Promise<ProducerSummary> {
    const delay = waitDelaySeconds(ahead.resumeAtMs, this.options.now().getTime());
    const end = { status: AdmissionStatus.admitting, waitingFor: ahead.run.batchId };
    const chained = await this.options.continuation.chainNext(step, owner, delay, end);
    if (!chained) return { ...summary, outcome: 'lease-lost' };
    logger.info('admission waits for an earlier run of the business date', {
      step: step.step,
      earlierBatchId: ahead.run.batchId,
      earlierRun: ahead.reason === 'admitting' ? 'admitting' : 'admission ended, its last slots still ahead',
      delaySeconds: delay,
    });
    return { ...summary, outcome: 'waiting', continued: true, nextStepInSeconds: delay };
  }
}
