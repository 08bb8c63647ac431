// How much a step may admit, and from when: the work queue's depth (less the backfill live work goes ahead of) and the
// run's own last planned slot, fed to lambda/core/admission.ts planAdmission.
import { planAdmission, type AdmissionPlan } from '../../core/admission';
import type { AdmissionStep } from '../../core/admissionStep';
import type { RunState, RunStateStore } from '../../adapters/admissionState';
import { logger } from '../../adapters/observability';
import type { QueueDepth } from '../../adapters/queueDepth';

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

export interface StepPlanOptions {
  jobName: string;
  /** The job's work queue. */
  queueUrl: string;
  queueDepth: QueueDepth;
  runState: RunStateStore;
  admission: ProducerAdmissionOptions;
}

/** Backfill messages in the queue; a failed read counts none (the live run queues behind all, as before). */
async function backfillAhead(runState: RunStateStore, job: string): Promise<number> {
  try {
    return (await runState.backfillOutstanding?.(job)) ?? 0;
  } catch (error) {
    logger.warn("could not read the backfill runs' figures; admission counts the whole queue", {
      error: error as Error,
    });
    return 0;
  }
}

/** The step's plan; unlimited admission reads nothing and admits everything now. */
export async function planStep(
  options: StepPlanOptions,
  step: AdmissionStep,
  state: RunState,
  startedMs: number,
): Promise<AdmissionPlan> {
  const { runState, admission } = options;
  const rate = admission.ratePerSecond;
  // Live work goes first at the consumers, so a live run queues only behind the messages that are not backfill.
  const queued = rate === undefined ? 0 : await options.queueDepth(options.queueUrl);
  const behindAll = rate === undefined || step.backfill || !runState.backfillOutstanding;
  const depth = behindAll ? queued : Math.max(0, queued - (await backfillAhead(runState, options.jobName)));
  const plan = planAdmission({
    nowMs: startedMs,
    queueDepth: depth,
    ratePerSecond: rate,
    horizonMs: admission.horizonMs,
    plannedUntilMs: state.plannedUntilMs,
  });
  logger.info('admission step', {
    step: step.step,
    queueDepth: depth,
    admit: Number.isFinite(plan.admit) ? plan.admit : 'all',
    firstVisibleAt: new Date(plan.firstVisibleMs).toISOString(),
  });
  return plan;
}
