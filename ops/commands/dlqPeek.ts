// `ops dlq peek`: shows a job's dead-lettered messages and why they failed (the failureReason attribute the consumer
// sets). SQS has no read-only peek: each message is received, which raises its ApproximateReceiveCount, then released.
import { ChangeMessageVisibilityBatchCommand, type Message, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { type CommandContext, selectJobs } from '../context';
import { UsageError } from '../errors';
import { renderTable } from '../io';

/** @default 10 */
export const DEFAULT_PEEK_MAX = 10;
/** Keeps one peek bounded; page through a bigger DLQ with redrive or the console. */
export const MAX_PEEK = 100;
/**
 * How long a peeked message stays hidden if the CLI dies before releasing it: short, so the DLQ looks whole again soon.
 * @default 10
 */
export const PEEK_VISIBILITY_SECONDS = 10;

export const PEEK_WARNING =
  'peeking receives each message: its ApproximateReceiveCount goes up, and it is hidden until released (at once here, or after ' +
  `${PEEK_VISIBILITY_SECONDS} s)`;

export interface DlqPeekOptions {
  job?: string;
  /** Messages shown per job. @default DEFAULT_PEEK_MAX */
  max?: number | string;
}

export interface PeekedMessage {
  messageId: string;
  receiveCount: number;
  sentAt?: string;
  failureReason?: string;
  failedAt?: string;
  operationId?: string;
  batchId?: string;
  body: string;
}

export interface DlqPeekResult {
  ok: true;
  command: 'dlq peek';
  warning: string;
  jobs: { job: string; dlqUrl: string; messages: PeekedMessage[] }[];
}

/** @throws UsageError for a count outside 1..MAX_PEEK. */
export function parseMax(value: number | string | undefined): number {
  if (value === undefined) return DEFAULT_PEEK_MAX;
  const max = Number(value);
  if (!Number.isInteger(max) || max < 1 || max > MAX_PEEK)
    throw new UsageError(`--max must be a whole number from 1 to ${MAX_PEEK}, got "${value}"`);
  return max;
}

function bodyField(body: string, field: string): string | undefined {
  try {
    const value = (JSON.parse(body) as Record<string, unknown>)[field];
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

function toPeeked(m: Message): PeekedMessage {
  const attr = (name: string) => m.MessageAttributes?.[name]?.StringValue;
  const body = m.Body ?? '';
  const sent = m.Attributes?.SentTimestamp;
  return {
    messageId: m.MessageId ?? '',
    receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 0),
    sentAt: sent ? new Date(Number(sent)).toISOString() : undefined,
    failureReason: attr('failureReason'),
    failedAt: attr('failedAt'),
    operationId: attr('operationId') ?? bodyField(body, 'operationId'),
    batchId: attr('batchId') ?? bodyField(body, 'batchId'),
    body,
  };
}

async function peekQueue(ctx: CommandContext, queueUrl: string, max: number): Promise<PeekedMessage[]> {
  const seen = new Map<string, Message>();
  let fruitless = 0;
  // Short polls (WaitTimeSeconds 0) sample a subset of SQS's servers, so one empty answer does not prove the queue
  // empty: stop after two answers in a row that bring nothing new.
  while (seen.size < max && fruitless < 2) {
    const { Messages = [] } = await ctx.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: Math.min(10, max - seen.size),
        WaitTimeSeconds: 0,
        VisibilityTimeout: PEEK_VISIBILITY_SECONDS,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['ApproximateReceiveCount', 'SentTimestamp'],
        // The deprecated spelling too: older SQS-compatible servers (local-aws-sqs among them) read only this one.
        AttributeNames: ['All'],
      }),
    );
    // One response can hold the same message twice (local-aws-sqs does); the later copy has the current receipt
    // handle and receive count, so it wins.
    const fresh = new Map(Messages.filter((m) => m.MessageId && !seen.has(m.MessageId)).map((m) => [m.MessageId!, m]));
    for (const [id, m] of fresh) seen.set(id, m);
    fruitless = fresh.size === 0 ? fruitless + 1 : 0;
  }
  const messages = [...seen.values()].slice(0, max);
  // Release at once so the DLQ looks whole to the next reader and to a redrive.
  for (let i = 0; i < messages.length; i += 10) {
    const chunk = messages.slice(i, i + 10);
    const released = await ctx.clients.sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: queueUrl,
        Entries: chunk.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0 })),
      }),
    );
    if (released.Failed?.length) {
      ctx.io.stderr(
        `dlq peek: ${released.Failed.length} message(s) could not be released and reappear within ${PEEK_VISIBILITY_SECONDS} s`,
      );
    }
  }
  return messages.map(toPeeked);
}

export async function dlqPeek(ctx: CommandContext, options: DlqPeekOptions = {}): Promise<DlqPeekResult> {
  const max = parseMax(options.max);
  const jobs = selectJobs(ctx.resources, options.job);
  ctx.io.stderr(`warning: ${PEEK_WARNING}`);
  const result: DlqPeekResult = { ok: true, command: 'dlq peek', warning: PEEK_WARNING, jobs: [] };
  for (const j of jobs)
    result.jobs.push({ job: j.job, dlqUrl: j.dlqUrl, messages: await peekQueue(ctx, j.dlqUrl, max) });
  return result;
}

export function renderDlqPeek(result: DlqPeekResult): string {
  const table = renderTable(
    ['job', 'operation', 'batch', 'receives', 'failed at', 'failure reason'],
    result.jobs.flatMap((j) =>
      j.messages.length === 0
        ? [[j.job, '(DLQ empty)', '', '', '', '']]
        : j.messages.map((m) => [
            j.job,
            m.operationId,
            m.batchId,
            m.receiveCount,
            m.failedAt ?? m.sentAt,
            m.failureReason ?? '(none: exhausted maxReceiveCount)',
          ]),
    ),
  );
  return `${table}\nwarning: ${result.warning}\n(use --json for the message bodies)`;
}
