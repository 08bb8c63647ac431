// `ops status`: per job, the work, DLQ and admission queue depths, how old the oldest work is, and the latest batches
// from the run ledger with whether each reconciles, how far its admission is, when it should finish, and whether its
// admission chain has stalled. Reads only: it never receives a message.
import { GetEventSourceMappingCommand } from '@aws-sdk/client-lambda';
import { GetScheduleCommand } from '@aws-sdk/client-scheduler';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { stalledSince } from '../../lambda/core/admission';
import { batchSettledCount, DRAIN_WINDOW_MINUTES } from '../../lambda/core/ledgerContract';
import { QUEUE_DEPTH_ATTRIBUTES, queueDepthOf, type QueueDepthFigures } from '../../lambda/core/queueDepth';
import { type CommandContext, selectJobs } from '../context';
import { renderTable } from '../io';
import { type BatchView, latestBatches } from '../ledger';
import { producerSettings } from '../jobSettings';
import type { JobResources } from '../resources';

export interface StatusOptions {
  job?: string;
  /** Batches shown per job. @default 5 */
  batches?: number;
  /** Minutes an admitting run's next step may be overdue before it is reported stalled. @default DEFAULT_STALL_MINUTES */
  stallMinutes?: number;
}

/**
 * No step runs longer than Lambda's 900 s ceiling, so a run still waiting 15 minutes after its step fell due, with no
 * lease held, has a step that failed or was lost. SQS may still retry it (five receives, one visibility timeout apart)
 * before it is dead-lettered; `ops continue` is harmless either way, since the producer takes each step once.
 * @default 15
 */
export const DEFAULT_STALL_MINUTES = 15;

/** A queue's depth by state (lambda/core/queueDepth.ts), and the queue it was read from. */
export interface QueueDepth extends Omit<QueueDepthFigures, 'total'> {
  url: string;
}

/**
 * SQS reports ApproximateAgeOfOldestMessage only as a CloudWatch metric, and reading a message's SentTimestamp means
 * receiving it (which raises its receive count and can push it to the DLQ). So the age comes from the ledger: the
 * oldest batch shown that still has outstanding work, measured from its start. That bounds the oldest message's age
 * from above; the exact value is the CloudWatch metric the age alarm watches.
 */
export interface OldestWork {
  ageSeconds: number | null;
  source: 'queue-empty' | 'ledger-oldest-unsettled-batch' | 'unavailable';
  batchId?: string;
}

/** A named gap: a batch whose admission stopped and will not go on by itself. */
export interface AdmissionStall {
  name: 'admission stalled';
  /** When its next step was due (nextStepAt; startedAt if its first step never ended). */
  since: string;
  overdueMinutes: number;
  /** The first step of the fix, as a command to run. */
  fix: string;
  message: string;
}

/** A batch as the ledger holds it, with what status derives from it at `at`. */
export interface BatchStatus extends BatchView {
  /** eligible - discovered, while admission may still go on; null when the job does not count eligible records. */
  notYetAdmitted: number | null;
  /**
   * Operations still to settle: (eligible ?? discovered) - completed - completedElsewhere - rejected - deadLettered while admitting, and
   * discovered - settled once admission ended (nothing more will be admitted). Never below 0.
   */
  workLeft: number;
  /** `discovered` while admitting means work left is a lower bound: the job does not count eligible records. */
  workLeftBasis: 'eligible' | 'discovered';
  /** now + workLeft / admissionRatePerMinute; null when no rate is known or the batch is finished. */
  projectedFinish: string | null;
  stalled: AdmissionStall | null;
  /** For a batch with work left: where it is going at the rate it actually drains at, and against the job's SLO. */
  forecast: Forecast | null;
}

/** A running batch's forecast, at the rate it actually drained at over the last DRAIN_WINDOW_MINUTES (or its life, if shorter). */
export interface Forecast {
  left: number;
  drainPerMinute: number;
  /** now + left / drainPerMinute; null while nothing drains. */
  projectedFinish: string | null;
  /** Against the job's completion SLO, when it has one. */
  slo?: {
    objective: number;
    completeWithinMinutes: number;
    /** The run's scheduled time (or its start) plus the window. */
    deadline: string;
    /** Operations still to settle before the objective's share of the run is. */
    objectiveLeft: number;
    /** When that share is projected to have settled; null while nothing drains. */
    objectiveMetAt: string | null;
    /** Whether it is projected by the deadline; null while nothing drains. */
    withinSlo: boolean | null;
    /** Minutes past the deadline (positive) or to spare (negative); null while nothing drains. */
    minutesPastSlo: number | null;
  };
  /** e.g. "12,000 left at 78/min: done 04:31; 99% by 04:25, 23 min past the SLO (04:02)". */
  text: string;
}

/** The job's completion SLO and the zone its times are shown in (the producer's JOB_SETTINGS). */
export interface JobSlo {
  slo?: { objective: number; completeWithinMinutes: number };
  timeZone: string;
}

/** Whether the job admits work: its schedule, its producer's admission mapping and its consumer's mapping (ops pause). */
export interface AdmissionState {
  /** ENABLED or DISABLED; `unknown: <why>` when it could not be read. */
  schedule: string;
  /** Enabled, Disabled, or a transition (Enabling, Disabling); `unknown: <why>` when it could not be read. */
  admissionMapping: string;
  consumerMapping: string;
  /** running: all three on; paused: all three off (as `ops pause` leaves them); partly paused: anything else. */
  summary: 'running' | 'paused' | 'partly paused';
}

export interface JobStatus {
  job: string;
  admission: AdmissionState;
  queue: QueueDepth;
  dlq: QueueDepth;
  /** The producer's admission queue: visible = steps due and waiting, delayed = steps not yet due. */
  admissionQueue: QueueDepth;
  oldestWork: OldestWork;
  batches: BatchStatus[];
}

export interface StatusResult {
  ok: true;
  command: 'status';
  stackName: string;
  source: 'cloudformation' | 'local';
  at: string;
  /** The stall grace period status used. */
  stallMinutes: number;
  jobs: JobStatus[];
  notes: string[];
}

export const OLDEST_WORK_NOTE =
  'oldestWork is an upper bound from the run ledger (the oldest unsettled batch among those shown); SQS publishes ' +
  'ApproximateAgeOfOldestMessage only to CloudWatch, and reading it from the queue would count as a receive';

export const PROJECTION_NOTE =
  'projected finish = now + work left / admission rate; work left and the finish marked + are lower bounds (the job ' +
  'does not count its eligible records, so only what admission has discovered so far is known)';

async function depth(ctx: CommandContext, url: string): Promise<QueueDepth> {
  const { Attributes } = await ctx.clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: [...QUEUE_DEPTH_ATTRIBUTES] }),
  );
  const { visible, inFlight, delayed } = queueDepthOf(Attributes);
  return { url, visible, inFlight, delayed };
}

export function oldestWork(queue: QueueDepth, batches: BatchView[], now: Date): OldestWork {
  if (queue.visible + queue.inFlight + queue.delayed === 0) return { ageSeconds: 0, source: 'queue-empty' };
  const unsettled = batches.filter((b) => b.outstanding > 0 && b.startedAt && !Number.isNaN(Date.parse(b.startedAt)));
  if (unsettled.length === 0) return { ageSeconds: null, source: 'unavailable' };
  const oldest = unsettled.reduce((a, b) => (Date.parse(a.startedAt!) <= Date.parse(b.startedAt!) ? a : b));
  return {
    ageSeconds: Math.max(0, Math.round((now.getTime() - Date.parse(oldest.startedAt!)) / 1000)),
    source: 'ledger-oldest-unsettled-batch',
    batchId: oldest.batchId,
  };
}

export interface ProgressOptions {
  job: string;
  now: Date;
  /** The job's SLO and time zone; absent: a forecast without an SLO, in UTC. */
  slo?: JobSlo;
  /** @default DEFAULT_STALL_MINUTES */
  stallMinutes?: number;
}

/** What a batch's ledger item says about its admission, measured at `now`. */
export function batchStatus(batch: BatchView, options: ProgressOptions): BatchStatus {
  const nowMs = options.now.getTime();
  const admitting = batch.admission === 'admitting';
  const settled = batchSettledCount(batch);
  const notYetAdmitted =
    batch.admission === 'complete'
      ? 0
      : batch.admission !== undefined && batch.eligible !== undefined
        ? Math.max(0, batch.eligible - batch.discovered)
        : null;
  // Records can appear after the count at the start, so admission may discover more than `eligible`.
  const total = admitting ? Math.max(batch.eligible ?? batch.discovered, batch.discovered) : batch.discovered;
  const workLeft = Math.max(0, total - settled);
  const rate = batch.admissionRatePerMinute;
  const finished = !admitting && workLeft === 0;
  const projectedFinish =
    rate !== undefined && rate > 0 && !finished
      ? new Date(Math.ceil((nowMs + (workLeft / rate) * 60_000) / 1000) * 1000).toISOString()
      : null;
  return {
    ...batch,
    notYetAdmitted,
    workLeft,
    workLeftBasis: admitting && batch.eligible !== undefined ? 'eligible' : 'discovered',
    projectedFinish,
    stalled: admitting ? stall(batch, options) : null,
    forecast: workLeft > 0 ? forecast(batch, total, settled, workLeft, options) : null,
  };
}

const n0 = (n: number) => n.toLocaleString('en-US');

function forecast(batch: BatchView, total: number, settled: number, left: number, options: ProgressOptions): Forecast {
  const nowMs = options.now.getTime();
  const rate = batch.drainPerMinute;
  const at = (count: number) =>
    rate > 0 ? new Date(Math.ceil((nowMs + (count / rate) * 60_000) / 60_000) * 60_000) : null;
  const timeZone = options.slo?.timeZone ?? 'UTC';
  const clock = (d: Date) =>
    new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(d);
  const finish = at(left);
  const head =
    rate > 0
      ? `${n0(left)} left at ${n0(rate)}/min: done ${clock(finish!)}`
      : `${n0(left)} left, nothing settled in the last ${DRAIN_WINDOW_MINUTES} min`;
  const slo = options.slo?.slo;
  const startMs = Date.parse(batch.scheduledTime ?? batch.startedAt ?? '');
  if (!slo || Number.isNaN(startMs))
    return { left, drainPerMinute: rate, projectedFinish: finish?.toISOString() ?? null, text: head };
  const deadline = new Date(startMs + slo.completeWithinMinutes * 60_000);
  const objectiveLeft = Math.max(0, Math.ceil(slo.objective * total) - settled);
  const met = objectiveLeft === 0 ? options.now : at(objectiveLeft);
  const past = met ? Math.ceil((met.getTime() - deadline.getTime()) / 60_000) : null;
  const share = `${Math.round(slo.objective * 1000) / 10}%`;
  const verdict =
    past === null
      ? `; the SLO (${share} by ${clock(deadline)}) cannot be projected`
      : past > 0
        ? `; ${share} by ${clock(met!)}, ${past} min past the SLO (${clock(deadline)})`
        : `; ${share} by ${clock(met!)}, inside the SLO (${clock(deadline)}, ${-past} min to spare)`;
  return {
    left,
    drainPerMinute: rate,
    projectedFinish: finish?.toISOString() ?? null,
    slo: {
      objective: slo.objective,
      completeWithinMinutes: slo.completeWithinMinutes,
      deadline: deadline.toISOString(),
      objectiveLeft,
      objectiveMetAt: met?.toISOString() ?? null,
      withinSlo: past === null ? null : past <= 0,
      minutesPastSlo: past,
    },
    text: head + verdict,
  };
}

/**
 * The job's SLO and time zone from its producer's JOB_SETTINGS. Unreadable (no permission to read the function's
 * configuration): undefined, and the forecast goes without an SLO rather than failing the status.
 */
async function jobSlo(ctx: CommandContext, producerFunctionName: string): Promise<JobSlo | undefined> {
  try {
    const settings = await producerSettings(ctx, producerFunctionName);
    return { slo: settings.slo, timeZone: settings.timeZone };
  } catch {
    return undefined;
  }
}

function stall(batch: BatchView, options: ProgressOptions): AdmissionStall | null {
  const nowMs = options.now.getTime();
  // A step holding its lease is being taken right now, however late it started.
  const since = stalledSince(
    { ...batch, leaseUntilMs: batch.leaseUntil ? Date.parse(batch.leaseUntil) : undefined },
    nowMs,
    (options.stallMinutes ?? DEFAULT_STALL_MINUTES) * 60_000,
  );
  if (since === undefined) return null;
  const overdueMs = nowMs - Date.parse(since);
  const overdueMinutes = Math.floor(overdueMs / 60_000);
  const fix = `ops continue --job ${options.job} --batch ${batch.batchId}`;
  return {
    name: 'admission stalled',
    since,
    overdueMinutes,
    fix,
    message:
      `admission stalled since ${since} (${overdueMinutes} min overdue): step ${batch.step ?? 0} is probably in the producer DLQ; ` +
      `first step of the fix: ${fix}`,
  };
}

export async function status(ctx: CommandContext, options: StatusOptions = {}): Promise<StatusResult> {
  const jobs = selectJobs(ctx.resources, options.job);
  const limit = options.batches ?? 5;
  const stallMinutes = options.stallMinutes ?? DEFAULT_STALL_MINUTES;
  const now = ctx.io.now();
  const result = await Promise.all(
    jobs.map(async (j): Promise<JobStatus> => {
      const [admission, queue, dlq, admissionQueue, batches, slo] = await Promise.all([
        admissionState(ctx, j),
        depth(ctx, j.queueUrl),
        depth(ctx, j.dlqUrl),
        depth(ctx, j.admissionQueueUrl),
        latestBatches(ctx.clients, ctx.resources.tables, j.job, limit, now),
        jobSlo(ctx, j.producerFunctionName),
      ]);
      return {
        job: j.job,
        admission,
        queue,
        dlq,
        admissionQueue,
        oldestWork: oldestWork(queue, batches, now),
        batches: batches.map((b) => batchStatus(b, { job: j.job, now, stallMinutes, slo })),
      };
    }),
  );
  return {
    ok: true,
    command: 'status',
    stackName: ctx.resources.stackName,
    source: ctx.resources.source,
    at: now.toISOString(),
    stallMinutes,
    jobs: result,
    notes: [OLDEST_WORK_NOTE, PROJECTION_NOTE],
  };
}

/** The three switches `ops pause` turns, read; a read that fails is shown as unknown with its reason, not thrown. */
async function admissionState(ctx: CommandContext, j: JobResources): Promise<AdmissionState> {
  // Status is read-only and often run by someone allowed to read queues but not schedules: say so per switch.
  const read = (fn: () => Promise<string | undefined>) =>
    fn().then(
      (state) => state ?? 'unknown: no state returned',
      (error: Error) => `unknown: ${error.name}: ${error.message}`,
    );
  const mapping = (uuid: string) =>
    read(async () => (await ctx.clients.lambda.send(new GetEventSourceMappingCommand({ UUID: uuid }))).State);
  const [schedule, admissionMapping, consumerMapping] = await Promise.all([
    read(
      async () =>
        (
          await ctx.clients.scheduler.send(
            new GetScheduleCommand({ Name: j.scheduleName, GroupName: j.scheduleGroupName }),
          )
        ).State,
    ),
    mapping(j.admissionMappingUuid),
    mapping(j.eventSourceMappingUuid),
  ]);
  const on = [schedule === 'ENABLED', admissionMapping === 'Enabled', consumerMapping === 'Enabled'];
  const off = [schedule === 'DISABLED', admissionMapping === 'Disabled', consumerMapping === 'Disabled'];
  return {
    schedule,
    admissionMapping,
    consumerMapping,
    summary: on.every(Boolean) ? 'running' : off.every(Boolean) ? 'paused' : 'partly paused',
  };
}

/** Each job's three switches, as `ops pause` turns them. */
function switchesTable(result: StatusResult): string {
  return renderTable(
    ['job', 'admission', 'schedule', 'admission mapping', 'consumer mapping'],
    result.jobs.map((j) => [
      j.job,
      j.admission.summary,
      j.admission.schedule,
      j.admission.admissionMapping,
      j.admission.consumerMapping,
    ]),
  );
}

/** Each job's queue, DLQ and admission queue depths, and the age of its oldest work. */
function queuesTable(result: StatusResult): string {
  return renderTable(
    ['job', 'queued', 'in flight', 'delayed', 'oldest work (s)', 'DLQ', 'steps queued', 'steps delayed'],
    result.jobs.map((j) => [
      j.job,
      j.queue.visible,
      j.queue.inFlight,
      j.queue.delayed,
      j.oldestWork.ageSeconds === null ? 'unknown' : j.oldestWork.ageSeconds,
      j.dlq.visible + j.dlq.inFlight,
      j.admissionQueue.visible,
      j.admissionQueue.delayed,
    ]),
  );
}

/** The latest batches' ledger counts, and whether they reconcile. */
function batchesTable(result: StatusResult): string {
  return renderTable(
    [
      'job',
      'batch',
      'discovered',
      'invalid rows',
      'consumed',
      'completed',
      'elsewhere',
      'rejected',
      'DLQ',
      'dupes',
      'retries',
      'deferred',
      '429s',
      'oldest (s)',
      'outstanding',
      'reconciles',
      'started',
      'finished',
    ],
    result.jobs.flatMap((j) =>
      j.batches.map((b) => [
        j.job,
        b.batchId,
        b.discovered,
        b.invalidRows,
        b.consumed,
        b.completed,
        b.completedElsewhere,
        b.rejected,
        b.deadLettered,
        b.duplicates,
        b.retries,
        b.deferred,
        b.throttled,
        b.oldestMessageAgeSeconds ?? '-',
        b.outstanding,
        b.reconciles ? 'yes' : 'NO',
        shortTime(b.startedAt),
        shortTime(b.finishedAt),
      ]),
    ),
  );
}

/** The latest batches' admission: step, pages, what is admitted and left, and when it should finish. */
function admissionTable(result: StatusResult): string {
  return renderTable(
    [
      'job',
      'batch',
      'admission',
      'step',
      'pages',
      'eligible',
      'discovered',
      'published',
      'not admitted',
      'rate/min',
      'next step at',
      'work left',
      'projected finish',
    ],
    result.jobs.flatMap((j) =>
      j.batches.map((b) => {
        const bound = b.admission === 'admitting' && b.workLeftBasis === 'discovered' ? '+' : '';
        return [
          j.job,
          b.batchId,
          b.admission ?? 'none',
          b.step,
          b.pages,
          b.eligible,
          b.discovered,
          b.published,
          b.notYetAdmitted ?? 'unknown',
          b.admissionRatePerMinute ?? 'unlimited',
          b.nextStepAt,
          `${b.workLeft}${bound}`,
          b.projectedFinish === null ? '-' : `${b.projectedFinish}${bound}`,
        ];
      }),
    ),
  );
}

/** The admitting batches past their next step, or that there are none. */
function gapsSection(result: StatusResult): string {
  const stalls = result.jobs.flatMap((j) =>
    j.batches.filter((b) => b.stalled).map((b) => `${j.job} ${b.batchId}: ${b.stalled!.message}`),
  );
  return stalls.length
    ? `Gaps\n${stalls.join('\n')}`
    : `Gaps: none (no admitting batch is more than ${result.stallMinutes} min past its next step)`;
}

/** When each batch with work left should finish, at the rate it drained at. */
function forecastSection(result: StatusResult): string {
  const forecasts = result.jobs.flatMap((j) =>
    j.batches.filter((b) => b.forecast).map((b) => `${j.job} ${b.batchId}: ${b.forecast!.text}`),
  );
  return forecasts.length
    ? `Forecast (at the rate each batch drained at over the last ${DRAIN_WINDOW_MINUTES} min, or its life if shorter)\n${forecasts.join('\n')}`
    : 'Forecast: nothing left to run';
}

export function renderStatus(result: StatusResult): string {
  const switches = switchesTable(result);
  const queues = queuesTable(result);
  const batches = batchesTable(result);
  const admission = admissionTable(result);
  const forecast = forecastSection(result);
  const gaps = gapsSection(result);
  return (
    `${result.stackName} (${result.source}) at ${result.at}\n${switches}\n\n${queues}\n\nLatest batches\n${batches}\n\nAdmission\n${admission}\n\n${forecast}\n\n${gaps}\n\n` +
    `note: ${result.notes.join('\nnote: ')}`
  );
}

/** A ledger time as the table shows it: to the second, or '-' when the batch has none yet. */
function shortTime(iso: string | undefined): string {
  return iso ? iso.replace(/\.\d{3}Z$/, 'Z') : '-';
}
