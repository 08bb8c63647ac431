// The start of a run: which business date and batch an event names, the guard that refuses a date in the future
// (before anything is read or written), and the run's state with its start facts, written once.
import type { JobRuntimeSettings } from '../../core/constants';
import { admissionStep, type AdmissionStep } from '../../core/admissionStep';
import { assertNotFutureBusinessDate, businessDateFor, makeBatchId } from '../../core/businessDate';
import type { AnyJob } from '../../core/job';
import type { RunStateStore } from '../../adapters/admissionState';
import { logger } from '../../adapters/observability';
import type { ProducerEvent } from './events';

export interface RunStartOptions {
  job: AnyJob;
  jobDeps: unknown;
  settings: JobRuntimeSettings;
  runState: RunStateStore;
  /** Starts per second admission plans with, recorded on the run; undefined when admission is unlimited. */
  ratePerSecond: number | undefined;
  now: () => Date;
}

/** The run an event names. */
export interface RunIdentity {
  batchId: string;
  businessDate: string;
}

export class RunStart {
  constructor(private readonly options: RunStartOptions) {}

  /**
   * The event's business date (given, or the one its scheduled time, else now, falls in) and batch (given, or named by
   * the scheduled time, so a repeated schedule is the same batch; a manual run's is new).
   * @throws FutureBusinessDateError, before the batch is named, for a date after the job's latest
   */
  identify(event: ProducerEvent): RunIdentity {
    const { job, settings, now } = this.options;
    const scheduled = event.scheduledTime ? new Date(event.scheduledTime) : undefined;
    const businessDate =
      event.businessDate ?? businessDateFor(scheduled ?? now(), settings.timeZone, settings.businessDateOffsetDays);
    this.refuseFuture(businessDate);
    return { businessDate, batchId: event.batchId ?? makeBatchId(job.name, businessDate, scheduled) };
  }

  /**
   * Refuses a run or step of a business date after the job's latest now, before it reads or writes anything: its
   * discovery and its cutoffs would reach into the future. Thrown, not returned: the event is kept in the producer
   * DLQ for review (after Lambda's asynchronous retries, or the admission queue's receives, which repeat the refusal
   * and change nothing) and its alarm fires, where a returned refusal would leave a bad Scheduler input unseen every
   * night. A synchronous invoke (ops catch-up) gets the message back.
   * @throws FutureBusinessDateError naming the date and the latest allowed one
   */
  refuseFuture(businessDate: string): void {
    try {
      assertNotFutureBusinessDate(this.options.job.name, businessDate, this.options.settings, this.options.now());
    } catch (error) {
      logger.error('refused a business date in the future; nothing was admitted', {
        businessDate,
        error: error as Error,
      });
      throw error;
    }
  }

  /** Writes the run's state and start facts unless it has them (a repeated event changes nothing); its first step. */
  async begin(run: RunIdentity, event: ProducerEvent): Promise<AdmissionStep> {
    const { job, runState, ratePerSecond: rate, now } = this.options;
    const { batchId, businessDate } = run;
    const existing = await runState.read(job.name, batchId);
    const eligible = existing ? undefined : await this.countEligible(businessDate);
    await runState.ensure(job.name, batchId, {
      businessDate,
      scheduledTime: event.scheduledTime,
      startedAt: now().toISOString(),
      admissionRatePerMinute: rate === undefined ? undefined : Math.round(rate * 60 * 1000) / 1000,
      eligible,
      ...(event.backfill ? { backfill: true as const } : {}),
    });
    const { scheduledTime, backfill } = event;
    return admissionStep({ batchId, businessDate, step: 0, scheduledTime, backfill });
  }

  /** The job's count of the date's eligible records, when it can count them. */
  private async countEligible(businessDate: string): Promise<number | undefined> {
    const { job, jobDeps, now } = this.options;
    if (!job.countEligible) return undefined;
    try {
      return await job.countEligible(jobDeps, { businessDate, now: now() });
    } catch (error) {
      // A figure for the operator, not the run: admission goes on without it.
      logger.warn('could not count the eligible records; ops status will not project the finish', {
        error: error as Error,
      });
      return undefined;
    }
  }
}
