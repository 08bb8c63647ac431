// Benchmark (`npm run bench`), producer side: publishes N operations into the embedded SQS two ways in the same run,
// batched exactly as the producer does (SqsPublisher: SendMessageBatch of 10, 5 calls in flight) and one SendMessage
// per operation with the same parallelism, then projects both onto AWS call latency.
import { performance } from 'node:perf_hooks';
import { CreateQueueCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { MESSAGE_VERSION } from '../lambda/core/constants';
import { serializeMessage } from '../lambda/core/message';
import { mapBounded, SqsPublisher, type OutgoingMessage } from '../lambda/adapters/sqsPublisher';
import { LOCAL_CREDENTIALS, startSqs } from '../local/servers';

/**
 * Assumed latency of one SQS send call from a Lambda function in the queue's region, batched or single. AWS publishes
 * no figure; 20 ms is a typical in-region p50 for SendMessageBatch of ten small messages (single SendMessage is a little
 * faster, which only flatters the naive design). The projection scales linearly with it.
 */
export const AWS_SEND_CALL_LATENCY_MS = 20;
/** The producer's SendMessageBatch calls in flight at once (SqsPublisher's default), used for both designs. */
export const PRODUCER_PARALLEL_CALLS = 5;
/** Lambda's hard ceiling on one invocation. */
export const LAMBDA_MAX_SECONDS = 900;
/** The producer keeps this share of its budget in reserve and continues in a new invocation (producer.ts). */
export const PRODUCER_RESERVE_FRACTION = 0.3;

export interface ProducerBenchOptions {
  /** Operations published each way. @default 100000 */
  operations?: number;
  /** Operations per producer page (discover + publish); the stack's pageSize. @default 500 */
  pageSize?: number;
  /** The stack's maxPagesPerRun. @default 200 */
  maxPagesPerRun?: number;
  /** Projection target. @default 1000000 */
  projectOperations?: number;
  progress?: (line: string) => void;
}

export interface PublishProjection {
  callsPerOperation: number;
  /** Seconds to publish `projectOperations` on AWS at the stated latency and parallelism (publishing time only). */
  seconds: number;
  /** Fits in one invocation's usable budget (900 s less the producer's reserve). */
  fitsOneInvocation: boolean;
  /** Invocations (the first plus continuations) the publishing time needs at 900 s each, less the reserve. */
  invocations: number;
}

export interface ProducerBenchResult {
  operations: number;
  batchedPerSec: number;
  naivePerSec: number;
  ratio: number;
  batchedCalls: number;
  naiveCalls: number;
  projection: {
    operations: number;
    callLatencyMs: number;
    parallelCalls: number;
    batched: PublishProjection;
    naive: PublishProjection;
    /** Operations one scheduled run covers before maxPagesPerRun stops it (pageSize * maxPagesPerRun). */
    operationsPerRunAtPageLimit: number;
    /** Pages one invocation can publish (batched) before its reserve sends it to a continuation. */
    batchedPagesPerInvocation: number;
  };
}

/** The job type the producer part's messages name: no job of the stack (the part publishes to a queue of its own). */
const BENCH_JOB_TYPE = 'bench-job';

/**
 * A realistic message body: the envelope every job shares, as the producer serializes it, with a resource and an
 * operation ID of an example job's size (an ID, a provider name, the business date).
 */
function operation(i: number, businessDate: string): OutgoingMessage {
  const recordId = `rec-${String(i).padStart(8, '0')}`;
  const operationId = `operation:demo:${recordId}:${businessDate}`;
  const enqueuedAt = new Date().toISOString();
  const body = serializeMessage(
    {
      version: MESSAGE_VERSION,
      jobType: BENCH_JOB_TYPE,
      operationId,
      batchId: `${BENCH_JOB_TYPE}#${businessDate}#bench`,
      businessDate,
      resource: { recordId, provider: 'demo' },
      enqueuedAt,
      firstEnqueuedAt: enqueuedAt,
    },
    262_144,
  );
  return { operationId, body };
}

export function projectPublish(
  callsPerOperation: number,
  operations: number,
  latencyMs = AWS_SEND_CALL_LATENCY_MS,
  parallel = PRODUCER_PARALLEL_CALLS,
): PublishProjection {
  const seconds = (operations * callsPerOperation * latencyMs) / parallel / 1000;
  const usable = LAMBDA_MAX_SECONDS * (1 - PRODUCER_RESERVE_FRACTION);
  return {
    callsPerOperation,
    seconds,
    fitsOneInvocation: seconds <= usable,
    invocations: Math.max(1, Math.ceil(seconds / usable)),
  };
}

export async function runProducerBench(options: ProducerBenchOptions = {}): Promise<ProducerBenchResult> {
  const operations = options.operations ?? 100_000;
  const pageSize = options.pageSize ?? 500;
  const maxPagesPerRun = options.maxPagesPerRun ?? 200;
  const projectOperations = options.projectOperations ?? 1_000_000;
  const progress = options.progress ?? (() => undefined);
  const sqs = await startSqs();
  const client = new SQSClient({ endpoint: sqs.endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
  try {
    const batchedQueue = (await client.send(new CreateQueueCommand({ QueueName: 'bench-batched' }))).QueueUrl!;
    const naiveQueue = (await client.send(new CreateQueueCommand({ QueueName: 'bench-naive' }))).QueueUrl!;
    const businessDate = '2026-01-15';
    const messages = Array.from({ length: operations }, (_, i) => operation(i, businessDate));

    // Page by page, as the producer publishes: one page's messages at a time through the same publisher.
    const publisher = new SqsPublisher({ client, parallelCalls: PRODUCER_PARALLEL_CALLS });
    let batchedCalls = 0;
    progress(
      `producer: publishing ${operations} operations batched (SendMessageBatch, ${PRODUCER_PARALLEL_CALLS} in flight)`,
    );
    let started = performance.now();
    for (let i = 0; i < messages.length; i += pageSize) {
      batchedCalls += (await publisher.publish(batchedQueue, messages.slice(i, i + pageSize))).calls;
    }
    const batchedSeconds = (performance.now() - started) / 1000;

    progress(
      `producer: publishing ${operations} operations naively (one SendMessage each, ${PRODUCER_PARALLEL_CALLS} in flight)`,
    );
    started = performance.now();
    await mapBounded(messages, PRODUCER_PARALLEL_CALLS, (m) =>
      client.send(new SendMessageCommand({ QueueUrl: naiveQueue, MessageBody: m.body })),
    );
    const naiveSeconds = (performance.now() - started) / 1000;

    const batchedPerSec = operations / batchedSeconds;
    const naivePerSec = operations / naiveSeconds;
    const batched = projectPublish(batchedCalls / operations, projectOperations);
    const usableMs = LAMBDA_MAX_SECONDS * (1 - PRODUCER_RESERVE_FRACTION) * 1000;
    const pageMs = (pageSize * batched.callsPerOperation * AWS_SEND_CALL_LATENCY_MS) / PRODUCER_PARALLEL_CALLS;
    return {
      operations,
      batchedPerSec,
      naivePerSec,
      ratio: batchedPerSec / naivePerSec,
      batchedCalls,
      naiveCalls: operations,
      projection: {
        operations: projectOperations,
        callLatencyMs: AWS_SEND_CALL_LATENCY_MS,
        parallelCalls: PRODUCER_PARALLEL_CALLS,
        batched,
        naive: projectPublish(1, projectOperations),
        operationsPerRunAtPageLimit: pageSize * maxPagesPerRun,
        batchedPagesPerInvocation: Math.floor(usableMs / pageMs),
      },
    };
  } finally {
    client.destroy();
    await sqs.close();
  }
}
