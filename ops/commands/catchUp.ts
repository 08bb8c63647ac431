// `ops catch-up`: EventBridge Scheduler does not backfill runs that were missed or paused, so this invokes a job's
// producer once per missed business date, oldest first, each run with a new batch ID (as a manual run gets one).
import { InvokeCommand } from '@aws-sdk/client-lambda';
import { makeBatchId } from '../../lambda/core/businessDate';
import { businessDateSchema } from '../../lambda/core/message';
import { type ChangeOptions, type CommandContext, selectJobs } from '../context';
import { ProducerInvocationError, UsageError } from '../errors';
import { confirm, renderTable } from '../io';

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
  /** Each producer is invoked synchronously (RequestResponse): a date starts only after the previous one published. */
  invocation: 'synchronous';
  runs: CatchUpRun[];
}

/**
 * Every business date from `from` to `to`, inclusive, in order.
 * @throws UsageError for a malformed or unreal date, a reversed range, or a range over MAX_CATCH_UP_DATES.
 */
export function businessDates(from: string, to: string): string[] {
  for (const [flag, value] of [['--from', from], ['--to', to]] as const) {
    if (!businessDateSchema.safeParse(value).success) throw new UsageError(`${flag} "${value}" is not a real date in the form YYYY-MM-DD`);
  }
  if (from > to) throw new UsageError(`--from ${from} is after --to ${to}; give the earlier date first`);
  const start = Date.parse(`${from}T00:00:00Z`);
  const count = Math.round((Date.parse(`${to}T00:00:00Z`) - start) / 86_400_000) + 1;
  if (count > MAX_CATCH_UP_DATES) {
    throw new UsageError(`${from}..${to} is ${count} dates; one catch-up covers at most ${MAX_CATCH_UP_DATES}, so run it in parts`);
  }
  // Day arithmetic on UTC midnights is exact: no zone or DST can skip or repeat a date.
  return Array.from({ length: count }, (_, i) => new Date(start + i * 86_400_000).toISOString().slice(0, 10));
}

export async function catchUp(ctx: CommandContext, options: CatchUpOptions): Promise<CatchUpResult> {
  const dates = businessDates(options.from, options.to);
  const [job] = selectJobs(ctx.resources, options.job);
  const runs: CatchUpRun[] = dates.map((businessDate) => ({ businessDate, batchId: makeBatchId(job.job, businessDate), status: 'planned' }));
  const result: CatchUpResult = { ok: true, command: 'catch-up', dryRun: Boolean(options.dryRun), job: job.job, invocation: 'synchronous', runs };
  if (options.dryRun) return result;

  await confirm(ctx.io, { action: `run the ${job.job} producer for ${dates.length} business date(s), ${options.from} to ${options.to}`, yes: Boolean(options.yes) });
  for (const run of runs) {
    const response = await ctx.clients.lambda.send(
      new InvokeCommand({
        FunctionName: job.producerFunctionName,
        InvocationType: 'RequestResponse',
        Payload: Buffer.from(JSON.stringify({ businessDate: run.businessDate, batchId: run.batchId })),
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
  return `${head}\n${renderTable(
    ['business date', 'batch', 'status', 'discovered', 'published'],
    result.runs.map((r) => {
      const s = (r.summary ?? {}) as { discovered?: number; published?: number };
      return [r.businessDate, r.batchId, r.status, s.discovered, s.published];
    }),
  )}\nconsumers drain the batches at their own pace; follow them with \`ops status --job ${result.job}\``;
}
