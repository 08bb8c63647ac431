// `ops redrive`: moves a job's DLQ messages back to its work queue at a capped rate with SQS's own message move task
// (StartMessageMoveTask); `redrive status` and `redrive cancel` manage it. Idempotency on the operation ID makes an
// operation that was already applied a no-op when it comes round again.
import {
  CancelMessageMoveTaskCommand,
  GetQueueAttributesCommand,
  ListMessageMoveTasksCommand,
  type ListMessageMoveTasksResultEntry,
  StartMessageMoveTaskCommand,
} from '@aws-sdk/client-sqs';
import { QUEUE_DEPTH_ATTRIBUTES, queueDepthOf } from '../../lambda/core/queueDepth';
import { type ChangeOptions, type CommandContext, confirmChange, selectJobs } from '../context';
import { UsageError } from '../errors';
import { renderTable } from '../io';
import type { JobResources } from '../resources';

/** SQS's bounds for MaxNumberOfMessagesPerSecond. */
export const MAX_REDRIVE_RATE = 500;
/**
 * A gentle default: redriven messages compete with the scheduled work for the same paced consumer, and a burst of
 * old failures should not crowd it out.
 * @default 10
 */
export const DEFAULT_REDRIVE_RATE = 10;

export interface RedriveOptions extends ChangeOptions {
  job?: string;
  /** Messages per second (a flag's text is checked too). @default DEFAULT_REDRIVE_RATE */
  rate?: number | string;
}

export interface MoveTask {
  taskHandle?: string;
  status?: string;
  sourceArn?: string;
  destinationArn?: string;
  maxNumberOfMessagesPerSecond?: number;
  moved?: number;
  toMove?: number;
  failureReason?: string;
  startedAt?: string;
}

export interface RedriveJobResult {
  job: string;
  dlqArn: string;
  destinationArn: string;
  /** Messages in the DLQ when the command ran. */
  dlqMessages: number;
  action: 'started' | 'would-start' | 'skipped';
  reason?: string;
  task?: MoveTask;
}

export interface RedriveResult {
  ok: true;
  command: 'redrive';
  dryRun: boolean;
  rate: number;
  jobs: RedriveJobResult[];
}

export interface RedriveStatusResult {
  ok: true;
  command: 'redrive status';
  jobs: { job: string; dlqArn: string; tasks: MoveTask[] }[];
}

export interface RedriveCancelResult {
  ok: true;
  command: 'redrive cancel';
  dryRun: boolean;
  jobs: { job: string; action: 'cancelled' | 'would-cancel' | 'none-running'; taskHandle?: string; moved?: number }[];
}

/** @throws UsageError for a rate SQS would refuse. */
export function parseRate(value: string | number | undefined): number {
  if (value === undefined) return DEFAULT_REDRIVE_RATE;
  const rate = Number(value);
  if (!Number.isInteger(rate) || rate < 1 || rate > MAX_REDRIVE_RATE) {
    throw new UsageError(
      `--rate must be a whole number of messages per second from 1 to ${MAX_REDRIVE_RATE}, got "${value}"`,
    );
  }
  return rate;
}

function toTask(t: ListMessageMoveTasksResultEntry): MoveTask {
  return {
    taskHandle: t.TaskHandle,
    status: t.Status,
    sourceArn: t.SourceArn,
    destinationArn: t.DestinationArn,
    maxNumberOfMessagesPerSecond: t.MaxNumberOfMessagesPerSecond,
    moved: t.ApproximateNumberOfMessagesMoved,
    toMove: t.ApproximateNumberOfMessagesToMove,
    failureReason: t.FailureReason,
    startedAt: t.StartedTimestamp === undefined ? undefined : new Date(t.StartedTimestamp).toISOString(),
  };
}

async function tasksOf(ctx: CommandContext, job: JobResources): Promise<MoveTask[]> {
  const response = await ctx.clients.sqs.send(
    new ListMessageMoveTasksCommand({ SourceArn: job.dlqArn, MaxResults: 10 }),
  );
  return (response.Results ?? []).map(toTask);
}

async function dlqDepth(ctx: CommandContext, job: JobResources): Promise<number> {
  const { Attributes } = await ctx.clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: job.dlqUrl, AttributeNames: [...QUEUE_DEPTH_ATTRIBUTES] }),
  );
  return queueDepthOf(Attributes).total;
}

export async function redrive(ctx: CommandContext, options: RedriveOptions = {}): Promise<RedriveResult> {
  const rate = parseRate(options.rate);
  const jobs = selectJobs(ctx.resources, options.job);
  const results: RedriveJobResult[] = [];
  for (const job of jobs) {
    // The destination is always named: messages the consumer dead-letters itself (permanent failures) were sent to the
    // DLQ directly, and SQS cannot infer a source queue for them.
    const base = { job: job.job, dlqArn: job.dlqArn, destinationArn: job.queueArn };
    const [depth, tasks] = await Promise.all([dlqDepth(ctx, job), tasksOf(ctx, job)]);
    const running = tasks.find((t) => t.status === 'RUNNING');
    if (running)
      results.push({
        ...base,
        dlqMessages: depth,
        action: 'skipped',
        reason: 'a move task is already running',
        task: running,
      });
    else if (depth === 0) results.push({ ...base, dlqMessages: depth, action: 'skipped', reason: 'the DLQ is empty' });
    else results.push({ ...base, dlqMessages: depth, action: 'would-start' });
  }
  const result: RedriveResult = { ok: true, command: 'redrive', dryRun: Boolean(options.dryRun), rate, jobs: results };
  const todo = results.filter((r) => r.action === 'would-start');
  if (options.dryRun || todo.length === 0) return result;

  const total = todo.reduce((sum, r) => sum + r.dlqMessages, 0);
  await confirmChange(
    ctx,
    `redrive about ${total} DLQ message(s) of ${todo.map((r) => r.job).join(', ')} at ${rate}/s`,
    options,
  );
  for (const r of todo) {
    const started = await ctx.clients.sqs.send(
      new StartMessageMoveTaskCommand({
        SourceArn: r.dlqArn,
        DestinationArn: r.destinationArn,
        MaxNumberOfMessagesPerSecond: rate,
      }),
    );
    r.action = 'started';
    r.task = {
      taskHandle: started.TaskHandle,
      status: 'RUNNING',
      sourceArn: r.dlqArn,
      destinationArn: r.destinationArn,
      maxNumberOfMessagesPerSecond: rate,
    };
    ctx.io.stderr(`redrive: ${r.job}: move task started (${started.TaskHandle})`);
  }
  return result;
}

export async function redriveStatus(ctx: CommandContext, options: { job?: string } = {}): Promise<RedriveStatusResult> {
  const jobs = selectJobs(ctx.resources, options.job);
  return {
    ok: true,
    command: 'redrive status',
    jobs: await Promise.all(jobs.map(async (j) => ({ job: j.job, dlqArn: j.dlqArn, tasks: await tasksOf(ctx, j) }))),
  };
}

export async function redriveCancel(
  ctx: CommandContext,
  options: ChangeOptions & { job?: string } = {},
): Promise<RedriveCancelResult> {
  const jobs = selectJobs(ctx.resources, options.job);
  const found = await Promise.all(
    jobs.map(async (j) => ({ job: j.job, running: (await tasksOf(ctx, j)).find((t) => t.status === 'RUNNING') })),
  );
  const result: RedriveCancelResult = {
    ok: true,
    command: 'redrive cancel',
    dryRun: Boolean(options.dryRun),
    jobs: found.map((f) =>
      f.running
        ? { job: f.job, action: 'would-cancel', taskHandle: f.running.taskHandle }
        : { job: f.job, action: 'none-running' },
    ),
  };
  const todo = result.jobs.filter((j) => j.action === 'would-cancel');
  if (options.dryRun || todo.length === 0) return result;
  await confirmChange(ctx, `cancel the redrive of ${todo.map((j) => j.job).join(', ')}`, options);
  for (const j of todo) {
    const cancelled = await ctx.clients.sqs.send(new CancelMessageMoveTaskCommand({ TaskHandle: j.taskHandle }));
    j.action = 'cancelled';
    j.moved = cancelled.ApproximateNumberOfMessagesMoved;
  }
  return result;
}

export function renderRedrive(result: RedriveResult): string {
  const head = `redrive at ${result.rate} msg/s${result.dryRun ? ' (dry run: nothing changed)' : ''}`;
  return `${head}\n${renderTable(
    ['job', 'DLQ messages', 'action', 'task', 'note'],
    result.jobs.map((j) => [j.job, j.dlqMessages, j.action, j.task?.taskHandle, j.reason]),
  )}\nfollow it with \`ops redrive status\`; operations already applied are skipped by idempotency`;
}

export function renderRedriveStatus(result: RedriveStatusResult): string {
  return renderTable(
    ['job', 'task', 'status', 'moved', 'to move', 'rate', 'started', 'failure'],
    result.jobs.flatMap((j) =>
      j.tasks.length === 0
        ? [[j.job, 'none', '', '', '', '', '', '']]
        : j.tasks.map((t) => [
            j.job,
            t.taskHandle,
            t.status,
            t.moved,
            t.toMove,
            t.maxNumberOfMessagesPerSecond,
            t.startedAt,
            t.failureReason,
          ]),
    ),
  );
}

export function renderRedriveCancel(result: RedriveCancelResult): string {
  return `redrive cancel${result.dryRun ? ' (dry run: nothing changed)' : ''}\n${renderTable(
    ['job', 'action', 'task', 'moved'],
    result.jobs.map((j) => [j.job, j.action, j.taskHandle, j.moved]),
  )}`;
}
