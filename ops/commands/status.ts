// `ops status`: per job, the queue and DLQ depths, how old the oldest work is, and the latest batches from the run
// ledger with whether each reconciles. Reads only: it never receives a message.
import { GetQueueAttributesCommand, type QueueAttributeName } from '@aws-sdk/client-sqs';
import { type CommandContext, selectJobs } from '../context';
import { renderTable } from '../io';
import { type BatchView, latestBatches } from '../ledger';

export interface StatusOptions {
  job?: string;
  /** Batches shown per job. @default 5 */
  batches?: number;
}

export interface QueueDepth {
  url: string;
  /** ApproximateNumberOfMessages: waiting to be received. */
  visible: number;
  /** ApproximateNumberOfMessagesNotVisible: received and not yet deleted (being processed). */
  inFlight: number;
  /** ApproximateNumberOfMessagesDelayed: deferred with a delay, not yet visible. */
  delayed: number;
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

export interface JobStatus {
  job: string;
  queue: QueueDepth;
  dlq: QueueDepth;
  oldestWork: OldestWork;
  batches: BatchView[];
}

export interface StatusResult {
  ok: true;
  command: 'status';
  stackName: string;
  source: 'cloudformation' | 'local';
  at: string;
  jobs: JobStatus[];
  notes: string[];
}

export const OLDEST_WORK_NOTE =
  'oldestWork is an upper bound from the run ledger (the oldest unsettled batch among those shown); SQS publishes ' +
  'ApproximateAgeOfOldestMessage only to CloudWatch, and reading it from the queue would count as a receive';

const ATTRIBUTES: QueueAttributeName[] = ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'];

async function depth(ctx: CommandContext, url: string): Promise<QueueDepth> {
  const { Attributes: a = {} } = await ctx.clients.sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ATTRIBUTES }));
  return {
    url,
    visible: Number(a.ApproximateNumberOfMessages ?? 0),
    inFlight: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0),
    delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0),
  };
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

export async function status(ctx: CommandContext, options: StatusOptions = {}): Promise<StatusResult> {
  const jobs = selectJobs(ctx.resources, options.job);
  const limit = options.batches ?? 5;
  const now = ctx.io.now();
  const result = await Promise.all(
    jobs.map(async (j): Promise<JobStatus> => {
      const [queue, dlq, batches] = await Promise.all([
        depth(ctx, j.queueUrl),
        depth(ctx, j.dlqUrl),
        latestBatches(ctx.clients, ctx.resources.tables.ledger, j.job, limit),
      ]);
      return { job: j.job, queue, dlq, oldestWork: oldestWork(queue, batches, now), batches };
    }),
  );
  return {
    ok: true,
    command: 'status',
    stackName: ctx.resources.stackName,
    source: ctx.resources.source,
    at: now.toISOString(),
    jobs: result,
    notes: [OLDEST_WORK_NOTE],
  };
}

export function renderStatus(result: StatusResult): string {
  const queues = renderTable(
    ['job', 'queued', 'in flight', 'delayed', 'oldest work (s)', 'DLQ'],
    result.jobs.map((j) => [
      j.job,
      j.queue.visible,
      j.queue.inFlight,
      j.queue.delayed,
      j.oldestWork.ageSeconds === null ? 'unknown' : j.oldestWork.ageSeconds,
      j.dlq.visible + j.dlq.inFlight,
    ]),
  );
  const batches = renderTable(
    ['job', 'batch', 'discovered', 'completed', 'rejected', 'DLQ', 'dupes', 'deferred', '429s', 'oldest (s)', 'outstanding', 'reconciles'],
    result.jobs.flatMap((j) =>
      j.batches.map((b) => [
        j.job, b.batchId, b.discovered, b.completed, b.rejected, b.deadLettered, b.duplicates, b.deferred, b.throttled,
        b.oldestMessageAgeSeconds ?? '-', b.outstanding, b.reconciles ? 'yes' : 'NO',
      ]),
    ),
  );
  return `${result.stackName} (${result.source}) at ${result.at}\n${queues}\n\nLatest batches\n${batches}\n\nnote: ${result.notes.join('\nnote: ')}`;
}
