// Run identity for the producer: which business date a scheduled run covers, and the batch ID that names the run.
import { randomBytes } from 'node:crypto';
import { PacedJobsError } from './errors';
import { businessDateSchema } from './message';

export class BusinessDateError extends PacedJobsError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'BusinessDateError';
  }
}

/**
 * The calendar date of `instant` as seen in `timeZone`, shifted by `offsetDays` (e.g. -1: a 02:00 run covers
 * yesterday). The zone matters: 23:30 UTC is already tomorrow in Europe/Berlin.
 * @throws BusinessDateError for an unknown time zone or an invalid instant.
 */
export function businessDateFor(instant: Date, timeZone: string, offsetDays = 0): string {
  if (Number.isNaN(instant.getTime()))
    throw new BusinessDateError('cannot derive a business date from an invalid time');
  let parts: Intl.DateTimeFormatPart[];
  try {
    parts = new Intl.DateTimeFormat('en-US', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    }).formatToParts(instant);
  } catch (error) {
    throw new BusinessDateError(`unknown time zone "${timeZone}"`, { cause: error });
  }
  const part = (type: string): number => Number(parts.find((p) => p.type === type)?.value);
  // Day arithmetic on a UTC midnight is exact: no zone or DST can move it.
  const local = new Date(Date.UTC(part('year'), part('month') - 1, part('day') + offsetDays));
  return local.toISOString().slice(0, 10);
}

/** A business date after the latest its job may cover now: work for a day that has not happened yet. */
export class FutureBusinessDateError extends BusinessDateError {
  constructor(
    public readonly jobName: string,
    public readonly businessDate: string,
    public readonly latest: string,
    rule: BusinessDateRule,
    options?: ErrorOptions,
  ) {
    const days = rule.businessDateOffsetDays;
    const offset = days > 0 ? `+${days}` : `${days}`;
    super(
      `business date ${businessDate} is in the future: the latest for ${jobName} now is ${latest} (${rule.timeZone}, offset ${offset})`,
      options,
    );
    this.name = 'FutureBusinessDateError';
  }
}

/** The part of a job's runtime settings (JobRuntimeSettings) that says which date a run covers. */
export interface BusinessDateRule {
  timeZone: string;
  businessDateOffsetDays: number;
}

/**
 * The latest business date a job may cover at `instant`: the date its schedule would run for now (its date in its time
 * zone plus its offset). A later date is a day that has not happened yet, and its cutoffs would reach into the future.
 * @throws BusinessDateError for an unknown time zone or an invalid instant.
 */
export function latestBusinessDate(rule: BusinessDateRule, instant: Date): string {
  return businessDateFor(instant, rule.timeZone, rule.businessDateOffsetDays);
}

/**
 * The error for a business date after the job's latest at `instant`, or undefined when it is not (dates are
 * YYYY-MM-DD, already validated, so they compare as strings). For callers that record the refusal rather than throw.
 */
export function futureBusinessDate(
  jobName: string,
  businessDate: string,
  rule: BusinessDateRule,
  instant: Date,
): FutureBusinessDateError | undefined {
  const latest = latestBusinessDate(rule, instant);
  return businessDate > latest ? new FutureBusinessDateError(jobName, businessDate, latest, rule) : undefined;
}

/** @throws FutureBusinessDateError naming the date, the latest allowed and the rule (futureBusinessDate). */
export function assertNotFutureBusinessDate(
  jobName: string,
  businessDate: string,
  rule: BusinessDateRule,
  instant: Date,
) {
  const error = futureBusinessDate(jobName, businessDate, rule, instant);
  if (error) throw error;
}

/** `2026-11-29T02:00:00.000Z` -> `20261129T020000Z`: stable, sortable, and valid in an ID. */
export function compactTimestamp(instant: Date): string {
  return instant
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z')
    .replace(/[-:]/g, '');
}

/**
 * `<job>:<businessDate>:<compact scheduled time>` for a scheduled run, so a Scheduler retry of the same run keeps its
 * batch; `<job>:<businessDate>:manual-<random>` when there is no scheduled time (a manual or catch-up run is a new batch).
 */
export function makeBatchId(
  jobName: string,
  businessDate: string,
  scheduledTime?: Date,
  random: () => string = () => randomBytes(4).toString('hex'),
): string {
  if (!businessDateSchema.safeParse(businessDate).success) {
    throw new BusinessDateError(`business date "${businessDate}" is not a real YYYY-MM-DD date`);
  }
  const suffix = scheduledTime ? compactTimestamp(scheduledTime) : `manual-${random()}`;
  return `${jobName}:${businessDate}:${suffix}`;
}
