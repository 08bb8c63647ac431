// Benchmark (`npm run bench:fairness`): per-key flow control, as a team runs it, against a downstream that enforces a
// quota per key. The pipeline's own pieces on the local servers: the consumer and producer handlers built from their
// settings as the stack sets them (consumerOptionsFromEnv, producerOptionsFromEnv, the product's defaults), Lambda's
// SQS event source mapping (local/eventSourceMapping.ts) with the reserved concurrency as its maximum, local SQS with
// fair queues (local/fairQueue.ts), and dynalite in its own process.
//
// Two runs of one workload, side by side: one noisy tenant with 2,000 operations enqueued first, then 20 quiet tenants
// with 10 each. "first-come" is the pipeline before per-key flow control: the job-wide limiter only, and a queue that
// delivers in arrival order. "per-key" is this one: rateLimit.perKey at the provider's per-key quota (after headroom),
// the key as MessageGroupId, fair queues. Then a live night beside a three-date catch-up (`ops catch-up` marks it
// backfill): the live run's completion time against the same run alone.
import { randomUUID } from 'node:crypto';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { CreateQueueCommand, GetQueueAttributesCommand, SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSEvent } from 'aws-lambda';
import { Command, InvalidArgumentError } from 'commander';
import * as z from 'zod';
import { effectiveRateLimit, pacingSchema } from '../lib/config/schema';
import { resetClients } from '../lambda/adapters/clients';
import { logger, metrics } from '../lambda/adapters/observability';
import { EnvVar, MESSAGE_VERSION, type JobRuntimeSettings } from '../lambda/core/constants';
import { RetryableError, ThrottledError } from '../lambda/core/errors';
import { fairnessGroup } from '../lambda/core/fairness';
import { defineJob } from '../lambda/core/job';
import { serializeMessage } from '../lambda/core/message';
import { maxInAnyWindow } from '../lambda/core/pacing/slidingWindow';
import { consumerOptionsFromEnv, createConsumer } from '../lambda/handlers/consumer';
import { createProducer, producerOptionsFromEnv } from '../lambda/handlers/producer';
import { SqsEventSourceMapping } from '../local/eventSourceMapping';
import { LOCAL_CREDENTIALS, startSqs } from '../local/servers';
import { startDynaliteProcess } from './dynaliteProcess';
import { startKeyQuotaProvider, type KeyArrival, type KeyQuotaProvider } from './keyQuotaProvider';
import { percentile } from './pacing';

const JOB = 'fair-bench';
const REGION = 'us-east-1';
const KEY_FIELD = 'tenant';

export interface FairnessBenchOptions {
  /** The noisy tenant's operations, enqueued first. @default 2000 */
  noisyOps?: number;
  /** @default 20 */
  quietTenants?: number;
  /** Operations per quiet tenant. @default 10 */
  quietOps?: number;
  /** The window both quotas are counted over, in seconds. @default 10 */
  intervalSeconds?: number;
  /** The provider's documented quota for the job, all keys together, per interval. @default 400 */
  jobQuota?: number;
  /** The provider's documented quota per key, per interval. @default 150 */
  perKeyQuota?: number;
  /** The consumer's reserved concurrency. @default 5 (the product's default) */
  concurrency?: number;
  /** Operations of the live night; the catch-up runs this many for each of its dates. @default 600 */
  liveOps?: number;
  /** Tenants the live night's and the catch-up's operations are spread over. @default 30 */
  liveTenants?: number;
  /** @default 3 */
  catchUpDates?: number;
  /** Longest any one run may take before the bench gives up on it. @default 900000 */
  runTimeoutMs?: number;
  progress?: (line: string) => void;
}

/** One workload run: completion times (enqueue to the provider's acceptance) and what the provider saw. */
export interface FairnessRun {
  mode: 'first-come' | 'per-key';
  quietP50Ms: number;
  quietP99Ms: number;
  noisyP50Ms: number;
  noisyP99Ms: number;
  /** Operations the provider never accepted before the run's timeout. */
  incomplete: number;
  /**
   * Accepted starts over what the limits allowed while work waited: at each moment the job-wide allowance, or the sum
   * of the per-key allowances of the keys with work waiting when that is less (one key alone cannot use the job's).
   */
  utilization: number;
  /** The most requests one key made in any window of the interval (accepted or not). */
  maxKeyStartsInAnyWindow: number;
  /** The most requests of all keys in any window. */
  maxStartsInAnyWindow: number;
  /** Requests the provider answered 429. */
  throttled: number;
  durationMs: number;
}

export interface FairnessBenchResult {
  params: Required<Omit<FairnessBenchOptions, 'progress'>> & { headroom: number; backfillShare: number };
  /** The per-key allowance the job enforces (the quota after headroom) and the job-wide one, per interval. */
  perKeyLimit: number;
  jobLimit: number;
  baseline: FairnessRun;
  perKey: FairnessRun;
  quietP99Ms: number;
  baselineQuietP99Ms: number;
  utilization: number;
  maxKeyStartsInAnyWindow: number;
  throttled: number;
  liveAloneMs: number;
  liveWithCatchUpMs: number;
  liveSlowdown: number;
  goals: { name: string; target: string; value: number; met: boolean }[];
}

// ---------------------------------------------------------------------------------------------------------------------
// The job: its operations come from the datasets the bench registers by business date; apply calls the provider.

type Operation = { operationId: string; resource: { id: string; tenant: string } };
const datasets = new Map<string, Operation[]>();

const benchJob = defineJob<{ id: string; tenant: string }, { url: string }>({
  name: JOB,
  resourceSchema: z.strictObject({ id: z.string(), tenant: z.string() }),
  createDeps: (settings) => ({ url: String(settings.settings.providerUrl) }),
  async discover(_deps, { businessDate, cursor, pageSize }) {
    const all = datasets.get(businessDate) ?? [];
    const start = cursor ? Number(cursor) : 0;
    const end = Math.min(all.length, start + pageSize);
    return { operations: all.slice(start, end), nextCursor: end < all.length ? String(end) : undefined };
  },
  async countEligible(_deps, { businessDate }) {
    return datasets.get(businessDate)?.length ?? 0;
  },
  async apply(deps, request) {
    const url = `${deps.url}?key=${encodeURIComponent(request.resource.tenant)}&op=${encodeURIComponent(request.operationId)}`;
    const response = await fetch(url, { method: 'POST' });
    await response.arrayBuffer();
    if (response.status === 429)
      throw new ThrottledError(
        `provider throttled ${request.resource.tenant}`,
        Number(response.headers.get('retry-after') ?? 1) * 1000,
      );
    if (!response.ok) throw new RetryableError(`provider answered ${response.status}`);
    return { outcome: 'applied' };
  },
});

const loadBenchJob = () => ({ job: benchJob });

// ---------------------------------------------------------------------------------------------------------------------
// One pipeline on fresh servers.

interface Pipeline {
  sqs: SQSClient;
  queueUrl: string;
  provider: KeyQuotaProvider;
  producer: (event: unknown) => Promise<unknown>;
  stop(): Promise<void>;
}

interface PipelineOptions {
  perKey: boolean;
  params: Required<Omit<FairnessBenchOptions, 'progress'>>;
}

const CONSUMER_TIMEOUT_MS = 60_000;

function context(timeoutMs: number): Context {
  const deadline = Date.now() + timeoutMs;
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: `${JOB}-fn`,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${REGION}:000000000000:function:${JOB}-fn`,
    memoryLimitInMB: '512',
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${JOB}`,
    logStreamName: 'bench',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** The settings the stack would hand this job's functions, from the same config schema and defaults. */
function jobSettings(params: PipelineOptions['params'], perKey: boolean, providerUrl: string): JobRuntimeSettings {
  const rateLimit = pacingSchema.parse({
    starts: params.jobQuota,
    intervalSeconds: params.intervalSeconds,
    ...(perKey
      ? { perKey: { key: KEY_FIELD, starts: params.perKeyQuota, intervalSeconds: params.intervalSeconds } }
      : {}),
  });
  return {
    jobName: JOB,
    pageSize: 500,
    maxPagesPerRun: 200,
    maxMessageBytes: 4096,
    maxReceiveCount: 5,
    businessDateOffsetDays: -1,
    timeZone: 'UTC',
    rateLimit: effectiveRateLimit(rateLimit),
    quota: { starts: params.jobQuota, headroom: rateLimit.headroom },
    concurrency: params.concurrency,
    admission: { horizonSeconds: 300, batchSize: 10, batchingWindowSeconds: 5 },
    tables: {},
    buckets: {},
    secrets: {},
    settings: { providerUrl },
  };
}

async function createTables(endpoint: string): Promise<void> {
  const ddb = new DynamoDBClient({ endpoint, region: REGION, credentials: LOCAL_CREDENTIALS });
  const table = (name: string, keys: string[]) =>
    ddb.send(
      new CreateTableCommand({
        TableName: name,
        AttributeDefinitions: keys.map((k) => ({ AttributeName: k, AttributeType: 'S' })),
        KeySchema: keys.map((k, i) => ({ AttributeName: k, KeyType: i === 0 ? 'HASH' : 'RANGE' })),
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
  await Promise.all([table('idempotency', ['id']), table('ledger', ['pk', 'sk']), table('limiter', ['pk'])]);
  ddb.destroy();
}

/** The pipeline's servers: SQS in this process, dynalite in its own, and the per-key quota provider. */
function startServers(options: PipelineOptions) {
  const { params, perKey } = options;
  return Promise.all([
    // The first-come pipeline's queue delivers in arrival order, as a queue without message groups does.
    startSqs({ region: REGION, fairQueues: perKey ? {} : false }),
    startDynaliteProcess(),
    startKeyQuotaProvider({
      perKeyPerWindow: params.perKeyQuota,
      totalPerWindow: params.jobQuota,
      windowMs: params.intervalSeconds * 1000,
    }),
  ]);
}

/** Points the handlers' SDK clients (in this process) at the local servers, and drops the clients built before. */
function pointClientsAt(sqsEndpoint: string, dynamoEndpoint: string): void {
  process.env.AWS_ENDPOINT_URL_DYNAMODB = dynamoEndpoint;
  process.env.AWS_ENDPOINT_URL_SQS = sqsEndpoint;
  process.env.AWS_REGION = REGION;
  process.env.AWS_ACCESS_KEY_ID = LOCAL_CREDENTIALS.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = LOCAL_CREDENTIALS.secretAccessKey;
  resetClients();
}

/** A queue's ARN: what a redrive policy and an event source mapping name it by. */
async function queueArnOf(sqs: SQSClient, url: string): Promise<string> {
  return (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))).Attributes
    ?.QueueArn as string;
}

/** The job's queues as the stack makes them: the queue with its DLQ, and the admission queue. */
async function createQueues(sqs: SQSClient): Promise<{ queueUrl: string; dlqUrl: string; admissionQueueUrl: string }> {
  const queue = async (name: string, attributes: Record<string, string> = {}) =>
    (await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }))).QueueUrl as string;
  const dlqUrl = await queue(`${JOB}-dlq`);
  const queueUrl = await queue(JOB, {
    VisibilityTimeout: '360',
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: await queueArnOf(sqs, dlqUrl), maxReceiveCount: 5 }),
  });
  const admissionQueueUrl = await queue(`${JOB}-admission`, { VisibilityTimeout: '360' });
  return { queueUrl, dlqUrl, admissionQueueUrl };
}

/** The environment the stack gives the job's functions. */
function functionEnv(
  options: PipelineOptions,
  providerUrl: string,
  queues: { queueUrl: string; dlqUrl: string; admissionQueueUrl: string },
): NodeJS.ProcessEnv {
  return {
    ...process.env,
    [EnvVar.JOB_NAME]: JOB,
    [EnvVar.JOB_SETTINGS]: JSON.stringify(jobSettings(options.params, options.perKey, providerUrl)),
    [EnvVar.QUEUE_URL]: queues.queueUrl,
    [EnvVar.DLQ_URL]: queues.dlqUrl,
    [EnvVar.ADMISSION_QUEUE_URL]: queues.admissionQueueUrl,
    [EnvVar.IDEMPOTENCY_TABLE_NAME]: 'idempotency',
    [EnvVar.IDEMPOTENCY_TTL_SECONDS]: String(30 * 86_400),
    [EnvVar.LEDGER_TABLE_NAME]: 'ledger',
    [EnvVar.LIMITER_TABLE_NAME]: 'limiter',
  };
}

/** Invokes the consumer in one of `concurrency` containers, each with its own handler. */
function consumerContainers(env: NodeJS.ProcessEnv, concurrency: number): (event: SQSEvent) => Promise<unknown> {
  // Each container has its own handler (its own limiter views and caches), as each Lambda container does.
  const idle = Array.from({ length: concurrency }, () => createConsumer(consumerOptionsFromEnv(env, loadBenchJob)));
  return async (event: SQSEvent) => {
    const handler = idle.pop();
    if (!handler) throw new Error('the event source mapping ran more batches than the reserved concurrency');
    try {
      return await handler(event, context(CONSUMER_TIMEOUT_MS));
    } finally {
      idle.push(handler);
    }
  };
}

/** The two event source mappings as the stack sets them: the consumer's on the queue, the producer's on admission. */
async function startMappings(
  sqs: SQSClient,
  queues: { queueUrl: string; admissionQueueUrl: string },
  handlers: { consumer: (event: SQSEvent) => Promise<unknown>; producer: (event: unknown) => Promise<unknown> },
  concurrency: number,
): Promise<SqsEventSourceMapping[]> {
  const consumerMapping = new SqsEventSourceMapping(
    {
      functionName: `${JOB}-consumer`,
      queueUrl: queues.queueUrl,
      queueArn: await queueArnOf(sqs, queues.queueUrl),
      batchSize: 10,
      maximumBatchingWindowSeconds: 5,
      maximumConcurrency: concurrency,
      reportBatchItemFailures: true,
      region: REGION,
    },
    { sqs, invoke: handlers.consumer, functionConcurrency: concurrency },
  );
  const producerMapping = new SqsEventSourceMapping(
    {
      functionName: `${JOB}-producer`,
      queueUrl: queues.admissionQueueUrl,
      queueArn: await queueArnOf(sqs, queues.admissionQueueUrl),
      batchSize: 1,
      maximumConcurrency: 2,
      reportBatchItemFailures: true,
      region: REGION,
    },
    { sqs, invoke: (event) => handlers.producer(event), functionConcurrency: 2 },
  );
  consumerMapping.start();
  producerMapping.start();
  return [consumerMapping, producerMapping];
}

async function startPipeline(options: PipelineOptions): Promise<Pipeline> {
  const [running, dynalite, provider] = await startServers(options);
  pointClientsAt(running.endpoint, dynalite.endpoint);
  await createTables(dynalite.endpoint);
  const sqs = new SQSClient({ endpoint: running.endpoint, region: REGION, credentials: LOCAL_CREDENTIALS });
  const queues = await createQueues(sqs);
  const env = functionEnv(options, provider.url, queues);
  const consumer = consumerContainers(env, options.params.concurrency);
  const producerHandler = createProducer(producerOptionsFromEnv(env, loadBenchJob));
  const producer = (event: unknown) => producerHandler(event, context(300_000));
  const mappings = await startMappings(sqs, queues, { consumer, producer }, options.params.concurrency);
  return {
    sqs,
    queueUrl: queues.queueUrl,
    provider,
    producer,
    async stop() {
      await Promise.all(mappings.map((m) => m.stop()));
      sqs.destroy();
      resetClients();
      await Promise.all([running.close(), dynalite.close(), provider.close()]);
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Figures.

/** When each operation was first accepted by the provider. */
function acceptedAt(arrivals: readonly KeyArrival[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const a of arrivals) if (a.accepted && !out.has(a.operationId)) out.set(a.operationId, a.at);
  return out;
}

/**
 * Accepted starts over the allowance the limits left while work waited: at each moment, the job-wide allowance, or
 * the per-key allowances of the keys with work waiting when their sum is less. A key waits from its first enqueue to
 * its last acceptance.
 */
function utilizationOf(
  enqueued: Map<string, { key: string; at: number }>,
  accepted: Map<string, number>,
  jobRatePerMs: number,
  keyRatePerMs: number,
): number {
  const span = new Map<string, { from: number; to: number }>();
  for (const [op, { key, at }] of enqueued) {
    const done = accepted.get(op) ?? at;
    const s = span.get(key);
    span.set(key, { from: Math.min(s?.from ?? at, at), to: Math.max(s?.to ?? done, done) });
  }
  const edges = [...span.values()]
    .flatMap((s) => [
      { at: s.from, d: 1 },
      { at: s.to, d: -1 },
    ])
    .sort((a, b) => a.at - b.at || b.d - a.d);
  let waiting = 0;
  let allowance = 0;
  for (let i = 0; i < edges.length; i++) {
    waiting += edges[i].d;
    const next = edges[i + 1]?.at ?? edges[i].at;
    allowance += Math.min(jobRatePerMs, waiting * keyRatePerMs) * (next - edges[i].at);
  }
  const starts = [...accepted.keys()].filter((op) => enqueued.has(op)).length;
  return allowance > 0 ? starts / allowance : 0;
}

function keyWindowFigures(arrivals: readonly KeyArrival[], windowMs: number): { perKey: number; all: number } {
  const byKey = new Map<string, number[]>();
  for (const a of arrivals) byKey.set(a.key, [...(byKey.get(a.key) ?? []), a.at]);
  let perKey = 0;
  for (const times of byKey.values()) perKey = Math.max(perKey, maxInAnyWindow(times, windowMs));
  return {
    perKey,
    all: maxInAnyWindow(
      arrivals.map((a) => a.at),
      windowMs,
    ),
  };
}

async function waitUntil(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > until) return false;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------------
// The runs.

function operation(tenant: string, date: string, n: number): Operation {
  const id = `${tenant}-${n}`;
  return { operationId: `fair:${id}:${date}`, resource: { id, tenant } };
}

/** The noisy tenant's operations enqueued first, then the quiet tenants'; returns what was enqueued when. */
async function enqueueWorkload(
  pipeline: Pipeline,
  params: PipelineOptions['params'],
  perKey: boolean,
): Promise<Map<string, { key: string; at: number }>> {
  const date = '2026-11-30';
  const ops = [
    ...Array.from({ length: params.noisyOps }, (_, i) => operation('noisy', date, i)),
    ...Array.from({ length: params.quietTenants * params.quietOps }, (_, i) =>
      operation(`quiet-${i % params.quietTenants}`, date, Math.floor(i / params.quietTenants)),
    ),
  ];
  const enqueued = new Map<string, { key: string; at: number }>();
  const batchId = `${JOB}:${date}:bench`;
  for (let i = 0; i < ops.length; i += 10) {
    const chunk = ops.slice(i, i + 10);
    const now = new Date();
    await pipeline.sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: pipeline.queueUrl,
        Entries: chunk.map((op, j) => {
          const groupId = perKey ? fairnessGroup(op.resource, KEY_FIELD) : undefined;
          return {
            Id: String(j),
            MessageBody: serializeMessage(
              {
                version: MESSAGE_VERSION,
                jobType: JOB,
                operationId: op.operationId,
                batchId,
                businessDate: date,
                resource: op.resource,
                enqueuedAt: now.toISOString(),
                firstEnqueuedAt: now.toISOString(),
              },
              4096,
            ),
            ...(groupId ? { MessageGroupId: groupId } : {}),
          };
        }),
      }),
    );
    for (const op of chunk) enqueued.set(op.operationId, { key: op.resource.tenant, at: now.getTime() });
  }
  return enqueued;
}

async function workloadRun(
  params: PipelineOptions['params'],
  perKey: boolean,
  progress: (line: string) => void,
): Promise<FairnessRun> {
  const mode = perKey ? 'per-key' : 'first-come';
  const pipeline = await startPipeline({ params, perKey });
  try {
    const started = Date.now();
    const enqueued = await enqueueWorkload(pipeline, params, perKey);
    const { arrivals } = pipeline.provider;
    let lastReport = Date.now();
    const finished = await waitUntil(() => {
      const accepted = acceptedAt(arrivals);
      if (Date.now() - lastReport > 15_000) {
        lastReport = Date.now();
        progress(
          `  ${mode}: ${accepted.size} of ${enqueued.size} accepted after ${Math.round((Date.now() - started) / 1000)} s`,
        );
      }
      return accepted.size >= enqueued.size;
    }, params.runTimeoutMs);
    const accepted = acceptedAt(arrivals);
    const times = (quiet: boolean) =>
      [...enqueued]
        .filter(([, e]) => e.key.startsWith('quiet') === quiet)
        .flatMap(([op, e]) => (accepted.has(op) ? [(accepted.get(op) as number) - e.at] : []));
    const windowMs = params.intervalSeconds * 1000;
    const jobLimit = effectiveRateLimit(
      pacingSchema.parse({ starts: params.jobQuota, intervalSeconds: params.intervalSeconds }),
    ).startsPerInterval;
    const keyLimit = effectiveRateLimit(
      pacingSchema.parse({ starts: params.perKeyQuota, intervalSeconds: params.intervalSeconds }),
    ).startsPerInterval;
    const windows = keyWindowFigures(arrivals, windowMs);
    return {
      mode,
      quietP50Ms: Math.round(percentile(times(true), 50, Number.NaN)),
      quietP99Ms: Math.round(percentile(times(true), 99, Number.NaN)),
      noisyP50Ms: Math.round(percentile(times(false), 50, Number.NaN)),
      noisyP99Ms: Math.round(percentile(times(false), 99, Number.NaN)),
      incomplete: finished ? 0 : enqueued.size - accepted.size,
      utilization:
        Math.round(utilizationOf(enqueued, accepted, jobLimit / windowMs, keyLimit / windowMs) * 1000) / 1000,
      maxKeyStartsInAnyWindow: windows.perKey,
      maxStartsInAnyWindow: windows.all,
      throttled: arrivals.filter((a) => !a.accepted).length,
      durationMs: Date.now() - started,
    };
  } finally {
    await pipeline.stop();
  }
}

/** The live night's completion time, alone or with a catch-up of `catchUpDates` dates started just before it. */
async function liveRun(
  params: PipelineOptions['params'],
  withCatchUp: boolean,
  progress: (line: string) => void,
): Promise<number> {
  const pipeline = await startPipeline({ params, perKey: true });
  try {
    const liveDate = '2026-11-30';
    const spread = (date: string) =>
      Array.from({ length: params.liveOps }, (_, i) =>
        operation(`t${i % params.liveTenants}`, date, Math.floor(i / params.liveTenants)),
      );
    datasets.set(liveDate, spread(liveDate));
    const catchUp = Array.from(
      { length: withCatchUp ? params.catchUpDates : 0 },
      (_, i) => `2026-11-${String(27 - i).padStart(2, '0')}`,
    );
    for (const date of catchUp) datasets.set(date, spread(date));
    // `ops catch-up` invokes the producer once per date, oldest first, each marked backfill; tonight's schedule fires beside it.
    for (const date of [...catchUp].reverse())
      await pipeline.producer({ businessDate: date, batchId: `${JOB}:${date}:catch-up`, backfill: true });
    const firedAt = Date.now();
    await pipeline.producer({
      scheduledTime: new Date(firedAt).toISOString(),
      businessDate: liveDate,
      batchId: `${JOB}:${liveDate}:live`,
    });
    const liveOps = new Set(datasets.get(liveDate)!.map((o) => o.operationId));
    const done = await waitUntil(
      () => [...acceptedAt(pipeline.provider.arrivals).keys()].filter((op) => liveOps.has(op)).length >= liveOps.size,
      params.runTimeoutMs,
    );
    if (!done) throw new Error(`the live run did not complete within ${params.runTimeoutMs} ms`);
    const accepted = acceptedAt(pipeline.provider.arrivals);
    const last = Math.max(...[...liveOps].map((op) => accepted.get(op) as number));
    progress(
      `  live ${withCatchUp ? `beside a ${params.catchUpDates}-date catch-up` : 'alone'}: ${Math.round((last - firedAt) / 100) / 10} s`,
    );
    return Math.round(last - firedAt);
  } finally {
    datasets.clear();
    await pipeline.stop();
  }
}

export const FAIRNESS_DEFAULTS: Required<Omit<FairnessBenchOptions, 'progress'>> = {
  noisyOps: 2000,
  quietTenants: 20,
  quietOps: 10,
  intervalSeconds: 10,
  jobQuota: 400,
  perKeyQuota: 150,
  concurrency: 5,
  liveOps: 600,
  liveTenants: 30,
  catchUpDates: 3,
  runTimeoutMs: 900_000,
};

export async function runFairnessBench(options: FairnessBenchOptions = {}): Promise<FairnessBenchResult> {
  const progress = options.progress ?? (() => undefined);
  const { progress: _progress, ...given } = options;
  const params = {
    ...FAIRNESS_DEFAULTS,
    ...Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)),
  } as Required<Omit<FairnessBenchOptions, 'progress'>>;
  // The handlers' own output is the product's; the bench reports figures, not EMF lines and logs.
  logger.setLogLevel('SILENT');
  const publish = metrics.publishStoredMetrics.bind(metrics);
  metrics.publishStoredMetrics = () => {
    metrics.clearMetrics();
    return metrics;
  };
  try {
    progress(`first-come: ${params.noisyOps} noisy operations, then ${params.quietTenants} x ${params.quietOps} quiet`);
    const baseline = await workloadRun(params, false, progress);
    progress(`per-key: the same workload`);
    const perKey = await workloadRun(params, true, progress);
    progress('live night alone, then beside a catch-up');
    const liveAloneMs = await liveRun(params, false, progress);
    const liveWithCatchUpMs = await liveRun(params, true, progress);
    const rateLimit = pacingSchema.parse({
      starts: params.jobQuota,
      intervalSeconds: params.intervalSeconds,
      perKey: { key: KEY_FIELD, starts: params.perKeyQuota, intervalSeconds: params.intervalSeconds },
    });
    const effective = effectiveRateLimit(rateLimit);
    const perKeyLimit = effective.perKey!.startsPerInterval;
    const liveSlowdown = Math.round((liveWithCatchUpMs / liveAloneMs) * 100) / 100;
    const goals = [
      {
        name: 'quiet p99 vs first-come',
        target: '<= 0.1',
        value: Math.round((perKey.quietP99Ms / baseline.quietP99Ms) * 1000) / 1000,
        met: perKey.quietP99Ms <= baseline.quietP99Ms / 10,
      },
      { name: 'utilization', target: '>= 0.9', value: perKey.utilization, met: perKey.utilization >= 0.9 },
      {
        name: 'max key starts in any window',
        target: `<= ${perKeyLimit}`,
        value: perKey.maxKeyStartsInAnyWindow,
        met: perKey.maxKeyStartsInAnyWindow <= perKeyLimit,
      },
      { name: 'live slowdown beside a catch-up', target: '<= 1.2', value: liveSlowdown, met: liveSlowdown <= 1.2 },
    ];
    return {
      params: { ...params, headroom: rateLimit.headroom, backfillShare: rateLimit.backfillShare },
      perKeyLimit,
      jobLimit: effective.startsPerInterval,
      baseline,
      perKey,
      quietP99Ms: perKey.quietP99Ms,
      baselineQuietP99Ms: baseline.quietP99Ms,
      utilization: perKey.utilization,
      maxKeyStartsInAnyWindow: perKey.maxKeyStartsInAnyWindow,
      throttled: perKey.throttled,
      liveAloneMs,
      liveWithCatchUpMs,
      liveSlowdown,
      goals,
    };
  } finally {
    metrics.publishStoredMetrics = publish;
  }
}

function describe(result: FairnessBenchResult): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const row = (r: FairnessRun) =>
    `| ${r.mode} | ${s(r.quietP50Ms)} | ${s(r.quietP99Ms)} | ${s(r.noisyP50Ms)} | ${s(r.noisyP99Ms)} | ${r.utilization} | ${r.maxKeyStartsInAnyWindow} | ${r.throttled} |`;
  return [
    `per-key limit ${result.perKeyLimit} and job-wide ${result.jobLimit} starts per ${result.params.intervalSeconds} s (quotas ${result.params.perKeyQuota} and ${result.params.jobQuota}, headroom ${result.params.headroom})`,
    '| pipeline | quiet p50 | quiet p99 | noisy p50 | noisy p99 | utilization | most starts of a key in a window | 429s |',
    '|---|---|---|---|---|---|---|---|',
    row(result.baseline),
    row(result.perKey),
    `live night of ${result.params.liveOps}: ${s(result.liveAloneMs)} alone, ${s(result.liveWithCatchUpMs)} beside a ${result.params.catchUpDates}-date catch-up (x${result.liveSlowdown})`,
    ...result.goals.map((g) => `${g.met ? 'met' : 'NOT MET'}: ${g.name} ${g.value} (goal ${g.target})`),
  ].join('\n');
}

/** A positive whole number of a flag. */
const positiveWhole = (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError('must be a positive integer');
  return n;
};

/** bench:fairness's command line (its action is main's). */
export function fairnessProgram(): Command {
  return new Command('bench:fairness')
    .description(
      'per-key flow control against a provider with per-key quotas: a noisy tenant and quiet ones, first-come vs per-key; a live night beside a catch-up',
    )
    .option('--noisy-ops <n>', "the noisy tenant's operations", positiveWhole)
    .option('--quiet-tenants <n>', 'quiet tenants', positiveWhole)
    .option('--quiet-ops <n>', 'operations per quiet tenant', positiveWhole)
    .option('--live-ops <n>', 'operations of the live night (and of each catch-up date)', positiveWhole)
    .option('--json', 'print the result as JSON');
}

if (require.main === module) {
  const program = fairnessProgram().action(
    async (opts: { noisyOps?: number; quietTenants?: number; quietOps?: number; liveOps?: number; json?: boolean }) => {
      const result = await runFairnessBench({
        noisyOps: opts.noisyOps,
        quietTenants: opts.quietTenants,
        quietOps: opts.quietOps,
        liveOps: opts.liveOps,
        progress: (line) => process.stderr.write(`${line}\n`),
      });
      process.stdout.write(opts.json ? `${JSON.stringify(result, null, 2)}\n` : `${describe(result)}\n`);
      process.exit(0);
    },
  );
  program.parseAsync().catch((error: unknown) => {
    process.stderr.write(`bench:fairness failed: ${(error as Error).message}\n`);
    process.exit(1);
  });
}
