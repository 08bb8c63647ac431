// `ops catch-up`: EventBridge Scheduler does not backfill runs that were missed or paused, so this invokes a job's
// producer once per missed business date, oldest first, each run with a new batch ID (as a manual run gets one).
import { InvokeCommand } from '@aws-sdk/client-lambda';
import { GetScheduleCommand } from '@aws-sdk/client-scheduler';
import { assertNotFutureBusinessDate, FutureBusinessDateError, makeBatchId } from '../../lambda/core/businessDate';
import { parseCron, scheduledRuns } from '../../lambda/core/cron';
import { ledgerKeys } from '../../lambda/core/ledgerContract';
import { businessDateSchema } from '../../lambda/core/message';
import { type ChangeOptions, type CommandContext, confirmChange, selectJobs } from '../context';
import type { JobResources } from '../resources';
import { ProducerInvocationError, UsageError } from '../errors';
import { renderTable } from '../io';
import { producerSettings } from '../jobSettings';
import { queryAll } from '../../local/ledgerFigures';

/**
 * Most dates one catch-up may cover. A month of missed nights is already an incident to plan, not a flag to type;
 * longer gaps are caught up in parts.
 */
export const MAX_CATCH_UP_DATES = 31;

export interface CatchUpOptions extends ChangeOptions {
  job: string;
  from: string;
  to: string;
}

export interface CatchUpRun {
  businessDate: string;
  batchId: string;
  status: 'published' | 'planned';
  /** What the producer returned (its ProducerSummary). */
  summary?: unknown;
}

export interface CatchUpResult {
  ok: true;
  command: 'catch-up';
  dryRun: boolean;
  job: string;
  /** With --missed: how the dates were found. */
  missed?: MissedDates;
  /** Each producer is invoked synchronously (RequestResponse): a date starts only after the previous one published. */
  invocation: 'synchronous';
  runs: CatchUpRun[];
}

/**
 * Every business date from `from` to `to`, inclusive, in order.
 * @throws UsageError for a malformed or unreal date, a reversed range, or a range over MAX_CATCH_UP_DATES.
 */
export function businessDates(from: string, to: string): string[] {
  for (const [flag, value] of [
    ['--from', from],
    ['--to', to],
  ] as const) {
    if (!businessDateSchema.safeParse(value).success)
      throw new UsageError(`${flag} "${value}" is not a real date in the form YYYY-MM-DD`);
  }
  if (from > to) throw new UsageError(`--from ${from} is after --to ${to}; give the earlier date first`);
  const start = Date.parse(`${from}T00:00:00Z`);
  const count = Math.round((Date.parse(`${to}T00:00:00Z`) - start) / 86_400_000) + 1;
  if (count > MAX_CATCH_UP_DATES) {
    throw new UsageError(
      `${from}..${to} is ${count} dates; one catch-up covers at most ${MAX_CATCH_UP_DATES}, so run it in parts`,
    );
  }
  // Day arithmetic on UTC midnights is exact: no zone or DST can skip or repeat a date.
  return Array.from({ length: count }, (_, i) => new Date(start + i * 86_400_000).toISOString().slice(0, 10));
}

export async function catchUp(ctx: CommandContext, options: CatchUpOptions): Promise<CatchUpResult> {
  const dates = businessDates(options.from, options.to);
  const [job] = selectJobs(ctx.resources, options.job);
  return runDates(ctx, job, dates, options, `${dates.length} business date(s), ${options.from} to ${options.to}`);
}

/** Default look-back of `--missed` without `--since`: a week of nights. */
export const MISSED_LOOKBACK_DAYS = 7;

/** How `--missed` found its dates. */
export interface MissedDates {
  /** The first business date looked at. */
  since: string;
  /** Why it starts there: `--since`, the default week, or the job's oldest batch (a later start than a week ago). */
  sinceSource: 'option' | 'default' | 'oldest-batch';
  schedule: { expression: string; timeZone: string; businessDateOffsetDays: number };
  /** Business dates the schedule should have produced since then, oldest first. */
  expected: string[];
  /** Those of them with no batch in the run ledger: what this catch-up runs. */
  missing: string[];
  /** Dates whose fire the schedule skips (its local time does not exist that night): never run unless caught up. */
  skippedByDst: string[];
}

export interface MissedOptions extends ChangeOptions {
  job: string;
  /** First business date to look at, YYYY-MM-DD. @default a week ago, or the job's oldest batch if later */
  since?: string;
}

/**
 * `catch-up --missed`: the business dates the job's schedule should have produced since `since` (from its cron, time
 * zone and businessDateOffsetDays, as the deployed schedule and producer hold them), less those with a batch in the
 * run ledger, run oldest first, each with a new batch ID. No gap: nothing to run, and it says so.
 */
export async function catchUpMissed(ctx: CommandContext, options: MissedOptions): Promise<CatchUpResult> {
  if (options.since !== undefined && !businessDateSchema.safeParse(options.since).success) {
    throw new UsageError(`--since "${options.since}" is not a real date in the form YYYY-MM-DD`);
  }
  const [job] = selectJobs(ctx.resources, options.job);
  const missed = await missedDates(ctx, job, options.since);
  if (missed.missing.length > MAX_CATCH_UP_DATES) {
    throw new UsageError(
      `${missed.missing.length} dates are missing since ${missed.since}; one catch-up covers at most ${MAX_CATCH_UP_DATES}, so give a later --since, or use --from/--to in parts`,
    );
  }
  const result = await runDates(
    ctx,
    job,
    missed.missing,
    options,
    `${missed.missing.length} missed business date(s): ${missed.missing.join(', ')}`,
  );
  return { ...result, missed };
}

async function missedDates(ctx: CommandContext, job: JobResources, since: string | undefined): Promise<MissedDates> {
  const [schedule, settings, batches] = await Promise.all([
    ctx.clients.scheduler.send(new GetScheduleCommand({ Name: job.scheduleName, GroupName: job.scheduleGroupName })),
    producerSettings(ctx, job.producerFunctionName),
    queryAll(ctx.clients.dynamo, {
      TableName: ctx.resources.tables.ledger,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': ledgerKeys.batchPartition(job.job) },
      ProjectionExpression: 'sk',
    }),
  ]);
  const expression = schedule.ScheduleExpression ?? '';
  const timeZone = schedule.ScheduleExpressionTimezone ?? settings.timeZone;
  const offset = settings.businessDateOffsetDays;
  // Batch IDs are `<job>:<businessDate>:...` (lambda/core/businessDate.ts makeBatchId).
  const batchDates = new Set(
    batches.map((b) => String(b.sk).split(':')[1]).filter((d) => businessDateSchema.safeParse(d).success),
  );
  const now = ctx.io.now();
  const weekAgo = new Date(now.getTime() - MISSED_LOOKBACK_DAYS * 86_400_000).toISOString().slice(0, 10);
  const oldest = [...batchDates].sort()[0];
  const start = since ?? (oldest !== undefined && oldest > weekAgo ? oldest : weekAgo);
  const sinceSource = since !== undefined ? 'option' : start === weekAgo ? 'default' : 'oldest-batch';
  // Fires that cover `start` or later: a fire's business date is its local date + offset, so look from the day
  // before (start - offset - 1) and keep the dates from `start` on.
  const fromMs = Date.parse(`${start}T00:00:00Z`) - (offset + 2) * 86_400_000;
  const runs = scheduledRuns(parseCron(expression), timeZone, offset, new Date(fromMs), now).filter(
    (r) => r.businessDate >= start,
  );
  const expected = [...new Set(runs.map((r) => r.businessDate))];
  return {
    since: start,
    sinceSource,
    schedule: { expression, timeZone, businessDateOffsetDays: offset },
    expected,
    missing: expected.filter((d) => !batchDates.has(d)),
    skippedByDst: runs.filter((r) => r.at === undefined).map((r) => r.businessDate),
  };
}

/** Invokes the producer once per date, oldest first, each run with a new batch ID; a dry run only plans them. */
async function runDates(
  ctx: CommandContext,
  job: JobResources,
  dates: string[],
  options: ChangeOptions,
  what: string,
): Promise<CatchUpResult> {
  await refuseFutureDates(ctx, job, dates);
  const runs: CatchUpRun[] = dates.map((businessDate) => ({
    businessDate,
    batchId: makeBatchId(job.job, businessDate),
    status: 'planned',
  }));
  const result: CatchUpResult = {
    ok: true,
    command: 'catch-up',
    dryRun: Boolean(options.dryRun),
    job: job.job,
    invocation: 'synchronous',
    runs,
  };
  if (options.dryRun || runs.length === 0) return result;

  await confirmChange(ctx, `run the ${job.job} producer for ${what}`, options);
  for (const run of runs) {
    const response = await ctx.clients.lambda.send(
      new InvokeCommand({
        FunctionName: job.producerFunctionName,
        InvocationType: 'RequestResponse',
        // Marked backfill: the consumers give tonight's live work the slots first (pacing.backfillShare).
        Payload: Buffer.from(JSON.stringify({ businessDate: run.businessDate, batchId: run.batchId, backfill: true })),
      }),
    );
    const text = response.Payload ? Buffer.from(response.Payload).toString('utf8') : '';
    if (response.FunctionError) {
      const completed = runs.filter((r) => r.status === 'published');
      throw new ProducerInvocationError(
        `the ${job.job} producer failed for ${run.businessDate} (batch ${run.batchId}): ${describeFailure(text)}; ` +
          `${completed.length ? `dates up to ${completed[completed.length - 1].businessDate} were published, ` : ''}later dates were not started`,
        job.job,
        run.businessDate,
        run.batchId,
        completed,
      );
    }
    run.status = 'published';
    run.summary = text ? JSON.parse(text) : undefined;
    ctx.io.stderr(`catch-up: ${job.job} ${run.businessDate} published as ${run.batchId}`);
  }
  return result;
}

/**
 * Refuses the catch-up, dry run or not, before anything changes when a date is after the job's latest business date
 * now (lambda/core/businessDate.ts): its cutoffs would reach into the future, and a session job would delete every
 * session. The rule (time zone, offset) is the deployed producer's, read with one GetFunctionConfiguration.
 * @throws UsageError naming the date and the latest allowed one
 */
async function refuseFutureDates(ctx: CommandContext, job: JobResources, dates: string[]): Promise<void> {
  if (dates.length === 0) return;
  const settings = await producerSettings(ctx, job.producerFunctionName);
  const last = dates.reduce((a, b) => (b > a ? b : a));
  try {
    assertNotFutureBusinessDate(job.job, last, settings, ctx.io.now());
  } catch (error) {
    if (error instanceof FutureBusinessDateError) throw new UsageError(error.message, { cause: error });
    throw error;
  }
}

function describeFailure(payload: string): string {
  try {
    const error = JSON.parse(payload) as { errorType?: string; errorMessage?: string };
    return `${error.errorType ?? 'Error'}: ${error.errorMessage ?? payload}`;
  } catch {
    return payload || 'no error detail';
  }
}

export function renderCatchUp(result: CatchUpResult): string {
  const head = `catch-up ${result.job}${result.dryRun ? ' (dry run: nothing invoked)' : ''}`;
  const m = result.missed;
  if (m && m.missing.length === 0) {
    return `${head}: no missed business dates since ${m.since} (${m.expected.length} expected from ${m.schedule.expression} in ${m.schedule.timeZone}, each has a batch)`;
  }
  const found = m
    ? `\nmissed since ${m.since} (${m.sinceSource}): ${m.missing.join(', ')} of ${m.expected.length} expected from ${m.schedule.expression} in ${m.schedule.timeZone}` +
      (m.skippedByDst.length
        ? `; the schedule skips ${m.skippedByDst.join(', ')} (its local time does not exist that night)`
        : '')
    : '';
  return `${head}${found}\n${renderTable(
    ['business date', 'batch', 'status', 'discovered', 'published'],
    result.runs.map((r) => {
      const s = (r.summary ?? {}) as { discovered?: number; published?: number };
      return [r.businessDate, r.batchId, r.status, s.discovered, s.published];
    }),
  )}\nconsumers drain the batches at their own pace; follow them with \`ops status --job ${result.job}\``;
}
