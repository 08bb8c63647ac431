// A held step's work: admits pages while the plan, the run's page limit and the invocation's time allow, each page
// discovered, turned into messages, published and committed, then ends the step: the run complete, at its page
// limit, or admitting with its next step chained for when the queue has drained to half the horizon (at once when out
// of time).
import type { Context } from 'aws-lambda';
import type { JobRuntimeSettings } from '../../core/constants';
import { nextStepDelaySeconds, type AdmissionPlan } from '../../core/admission';
import type { AdmissionStep } from '../../core/admissionStep';
import type { AnyJob } from '../../core/job';
import { AdmissionStatus, type RunStateStore } from '../../adapters/admissionState';
import { logger } from '../../adapters/observability';
import type { Continuation } from './continuation';
import { pageMessages, runDeadline } from './pageMessages';
import type { PagePublisher } from './pagePublisher';
import { planStep, type StepPlanOptions } from './stepPlan';
import type { HeldStep } from './stepLease';
import { reportPage, type ProducerSummary } from './summary';

export interface AdmitterOptions extends StepPlanOptions {
  job: AnyJob;
  jobDeps: unknown;
  settings: JobRuntimeSettings;
  maxMessageBytes: number;
  /** The resource field whose value is a message's tenant (fairness group), when the job has keys. */
  fairnessField: string | undefined;
  runState: RunStateStore;
  pages: PagePublisher;
  continuation: Continuation;
  /** Stop starting pages when less than this share of the invocation's budget is left. */
  reserveFraction: number;
  /** ... or less than this many milliseconds, but never more than half the budget. */
  reserveMs: number;
  now: () => Date;
}

/**
 * The time a step keeps back from its budget: no page starts with less left. The budget is what the invocation had
 * when it started, so the reserve scales with the configured timeout; a short timeout would be all reserve without the
 * cap at half of it.
 */
export function timeReserveMs(budgetMs: number, reserveFraction: number, reserveMs: number): number {
  return Math.max(reserveFraction * budgetMs, Math.min(reserveMs, budgetMs / 2));
}

/** Where a step's admission stands, page after page. */
interface Progress {
  cursor: string | undefined;
  /** The run's pages, this step's included. */
  pages: number;
  orphans: string[];
  plannedUntilMs: number | undefined;
  /** Messages this step admitted. */
  admitted: number;
  finished: boolean;
  /** The step stopped for time: its next step comes at once. */
  timeLow: boolean;
}

export class Admitter {
  constructor(private readonly options: AdmitterOptions) {}

  /** Admits the step's pages and ends it; `lease-lost` when another invocation took the step over meanwhile. */
  async admit(
    step: AdmissionStep,
    context: Context,
    held: HeldStep,
    summary: ProducerSummary,
  ): Promise<ProducerSummary> {
    const { settings, reserveFraction, reserveMs } = this.options;
    const { state, startedMs } = held;
    const reserve = timeReserveMs(held.budgetMs, reserveFraction, reserveMs);
    const plan = await planStep(this.options, step, state, startedMs);
    const progress: Progress = {
      cursor: state.cursor,
      pages: state.pages,
      orphans: state.orphans,
      plannedUntilMs: state.plannedUntilMs,
      admitted: 0,
      finished: false,
      timeLow: false,
    };
    while (progress.admitted < plan.admit) {
      if (progress.pages >= settings.maxPagesPerRun) {
        summary.stoppedAtPageLimit = true;
        logger.warn('stopped at maxPagesPerRun with work remaining; raise it or the page size, or catch up', {
          maxPagesPerRun: settings.maxPagesPerRun,
          cursor: progress.cursor,
        });
        break;
      }
      // Only after a first page: a step that yielded before publishing anything would chain for ever without progress.
      if (summary.pages > 0 && context.getRemainingTimeInMillis() < reserve) {
        progress.timeLow = true;
        break;
      }
      if (!(await this.nextPage(step, held, plan, progress, summary))) {
        logger.warn('lost the admission lease while publishing; the step continues in the invocation that took it', {
          step: step.step,
        });
        return { ...summary, outcome: 'lease-lost' };
      }
      if (progress.finished) break;
    }
    return this.end(step, held, plan, progress, summary);
  }

  /** Discovers, publishes and commits the next page, moving `progress` on; false when the lease was lost. */
  private async nextPage(
    step: AdmissionStep,
    held: HeldStep,
    plan: AdmissionPlan,
    progress: Progress,
    summary: ProducerSummary,
  ): Promise<boolean> {
    const { job, jobDeps, settings, admission, now } = this.options;
    const rate = admission.ratePerSecond;
    const pageSize = Math.min(settings.pageSize, plan.admit - progress.admitted);
    const dueBy = runDeadline(step, held.state.startedAt, settings.slo);
    const startedMs = now().getTime();
    const request = { businessDate: step.businessDate, cursor: progress.cursor, pageSize, now: now() };
    const result = await job.discover(jobDeps, request);
    const { messages, invalid, lastVisibleMs } = pageMessages(result, {
      job,
      step,
      dueBy,
      maxMessageBytes: this.options.maxMessageBytes,
      fairnessField: this.options.fairnessField,
      slots: {
        plan,
        admitted: progress.admitted,
        ratePerSecond: rate,
        groupSize: admission.groupSize,
        leadMs: admission.leadMs ?? 0,
        plannedUntilMs: progress.plannedUntilMs,
      },
      sentAtMs: now().getTime(),
    });
    const page = progress.pages + 1;
    const plannedUntilMs = rate === undefined ? undefined : lastVisibleMs;
    const outgoing = { page, messages, invalid, startedMs, cursor: result.nextCursor, plannedUntilMs };
    const committed = await this.options.pages.publish(step, held.owner, progress.orphans, outgoing);
    if (!committed.committed) return false;
    progress.cursor = result.nextCursor;
    progress.finished = result.nextCursor === undefined;
    progress.pages = page;
    if (committed.orphans !== undefined) progress.orphans = committed.orphans;
    progress.admitted += messages.length;
    progress.plannedUntilMs = plannedUntilMs;
    const { published } = committed;
    reportPage(summary, { page, discovered: messages.length, published, invalid, more: !progress.finished });
    return true;
  }

  /** Ends the step: the run complete or at its page limit, or admitting with its next step chained. */
  private async end(
    step: AdmissionStep,
    held: HeldStep,
    plan: AdmissionPlan,
    progress: Progress,
    summary: ProducerSummary,
  ): Promise<ProducerSummary> {
    const { admission, runState, job, now } = this.options;
    const { finished, plannedUntilMs, timeLow } = progress;
    const status = finished
      ? AdmissionStatus.complete
      : summary.stoppedAtPageLimit
        ? AdmissionStatus.pageLimit
        : AdmissionStatus.admitting;
    summary.finished = finished;
    if (status !== AdmissionStatus.admitting) {
      await runState.endStep(job.name, step.batchId, step.step, held.owner, { status, plannedUntilMs });
      return summary;
    }
    // Out of time: go on at once. Otherwise when the queue has drained to half the horizon: after this step's last
    // message, or after what the queue already holds when this step could admit nothing.
    const rate = admission.ratePerSecond;
    const spacingMs = rate === undefined ? 0 : 1000 / rate;
    const drainedUntilMs = Math.max(plannedUntilMs ?? held.startedMs, plan.firstVisibleMs - spacingMs);
    const delay = timeLow
      ? 0
      : nextStepDelaySeconds({
          nowMs: now().getTime(),
          plannedUntilMs: drainedUntilMs,
          horizonMs: admission.horizonMs,
          ratePerSecond: rate,
          minSeconds: 5,
        });
    const chained = await this.options.continuation.chainNext(step, held.owner, delay, { status, plannedUntilMs });
    if (!chained) return { ...summary, outcome: 'lease-lost' };
    summary.continued = true;
    summary.nextStepInSeconds = delay;
    logger.info('next admission step sent', { step: step.step + 1, delaySeconds: delay, timeLow });
    return summary;
  }
}
