// Benchmark (`npm run bench`), the whole pipeline: deploys the synthesized stack on the embedded servers (local/),
// pacing off, runs one cycle of every job and counts every AWS request the pipeline makes per job; then measures the
// emulators' own ceiling (receive + delete, conditional writes) in the same process, to read the jobs/s against.
import { performance } from 'node:perf_hooks';
import { resolve } from 'node:path';
import { CreateTableCommand, DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { findStack } from '../local/assembly';
import { zonedDate } from '../local/cron';
import { PaymentProvider } from '../local/provider';
import { jobViews } from '../local/run';
import { seedDemoData, type SeedCounts } from '../local/seed';
import { LOCAL_CREDENTIALS, startDynamoDb, startSqs, type ObservedRequest } from '../local/servers';
import { LocalStack } from '../local/stack';
import { loadTemplate } from '../local/template';
import { mapBounded } from '../lambda/adapters/sqsPublisher';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import { actionOf, DYNAMO_READ_ACTIONS, DYNAMO_WRITE_ACTIONS, startCountingProxy, type CountedRequest } from './countingProxy';
import type { RunCounts } from './perJob';
import type { Architecture } from './prices';

/** Consumer executions per job in the bench run (the template's MaximumConcurrency is 5 to 10). */
export const DEFAULT_BENCH_CONSUMER_CONCURRENCY = 2;

export class E2eBenchError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'E2eBenchError';
  }
}

export interface E2eOptions {
  cwd: string;
  /** @default "cdk.out" */
  assemblyDir?: string;
  /** @default "dev" */
  env?: string;
  /** Demo data per job. */
  counts: SeedCounts;
  /**
   * Starts per minute per job key for the run, to see what the limiter adds. Undefined (the default): every job runs
   * with `pacing: false` (no shared limiter, only the concurrency cap), so the counts are the pipeline's own and the
   * local jobs/s is bound by the emulators, not by a quota.
   */
  ratePerMinute?: number;
  /** Event source MaximumConcurrency per job, overriding the template's (fewer workers contend less for 2 cores). @default 2 */
  consumerConcurrency?: number;
  /** Give up when the run has not settled by then. @default 300 */
  timeoutSeconds?: number;
  progress?: (line: string) => void;
  /** Function output and runtime notes. @default dropped */
  log?: (source: string, line: string) => void;
}

export interface E2eResult {
  counts: RunCounts;
  /** Undefined: pacing was off. */
  ratePerMinute: number | undefined;
  consumerConcurrency: number;
  seconds: number;
  jobsPerSec: number;
  /** Messages the event sources left on the queue (failed) and dead-lettered: 0 in a clean run. */
  failedMessages: number;
  perJobName: Record<string, { acknowledged: number; invocations: number }>;
  /** DynamoDB requests by "role action status": how many, and the units they consumed (what dominates the overhead). */
  dynamoRequests: Record<string, { requests: number; units: number }>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type TableRole = 'idempotency' | 'ledger' | 'limiter' | 'business';

/** Units one counted DynamoDB request consumed. A refused conditional write reports none locally; AWS bills it 1. */
function unitsOf(r: CountedRequest): number {
  return r.capacityUnits ?? (r.status >= 400 ? 1 : 0);
}

export async function runE2eBench(options: E2eOptions): Promise<E2eResult> {
  const progress = options.progress ?? (() => undefined);
  const assemblyDir = resolve(options.cwd, options.assemblyDir ?? 'cdk.out');
  const env = options.env ?? 'dev';
  const artifact = findStack(assemblyDir, env);
  if (!artifact) throw new E2eBenchError(`no stack for env ${env} in ${assemblyDir}; run \`npx cdk synth\``);
  const template = loadTemplate(artifact.templateFile);
  const consumerConcurrency = options.consumerConcurrency ?? DEFAULT_BENCH_CONSUMER_CONCURRENCY;
  {
    for (const resource of Object.values(template.Resources)) {
      if (resource.Type !== 'AWS::Lambda::EventSourceMapping' || !resource.Properties) continue;
      resource.Properties.ScalingConfig = { MaximumConcurrency: consumerConcurrency };
    }
  }
  const { ratePerMinute } = options;

  // The downstream answers at once and never throttles: the run measures the pipeline, not the provider's quota.
  const provider = new PaymentProvider({ startsPerWindow: 1_000_000_000, windowSeconds: 60, maxConcurrent: 10_000, latencyMs: 1 });
  await provider.start();
  let stack: LocalStack | undefined;
  const dynamoProxy = await startCountingProxy('dynamodb', () => stack!.endpoints.dynamodb);
  const sqsRequests: { action: string; status: number }[] = [];
  let counting = false;
  // The event sources' receives, counted by SDK middleware on their client (below).
  const receives = { withMessages: 0, empty: 0 };
  let consumerDurationMs = 0;
  try {
    stack = new LocalStack({
      template,
      stackName: artifact.stackName,
      assemblyDir: artifact.assemblyDir,
      log: (source, line) => options.log?.(source, line),
      // Every SQS request reaches the server, the functions' and the event sources' alike: count them there.
      onRequest: (service, r: ObservedRequest) => {
        if (service === 'sqs' && counting) sqsRequests.push({ action: actionOf(r.headers, r.url, r.body), status: r.status });
      },
      environmentOverride: (_fn, vars) => {
        const next = { ...vars, AWS_ENDPOINT_URL_DYNAMODB: dynamoProxy.endpoint };
        if (!vars.JOB_SETTINGS) return next;
        const settings = JSON.parse(vars.JOB_SETTINGS) as JobRuntimeSettings;
        if (ratePerMinute === undefined) settings.settings.pacing = false;
        else settings.rateLimit = { startsPerInterval: ratePerMinute, intervalSeconds: 60, burst: 1 };
        if (settings.settings.providerBaseUrl !== undefined) settings.settings.providerBaseUrl = provider.endpoint;
        return { ...next, JOB_SETTINGS: JSON.stringify(settings) };
      },
    });
    progress(`e2e: starting the local stack (${ratePerMinute === undefined ? 'pacing off' : `each job paced at ${ratePerMinute}/min, burst 1`})`);
    await stack.start();
    const started = stack;
    const jobs = jobViews(started.plan, started.mappings);
    for (const job of jobs.values()) {
      for (const alias of Object.values(job.settings.secrets)) {
        const secret = started.secrets.find(alias);
        if (secret) provider.allowApiKey(secret.value);
      }
    }
    await started.prewarm();

    // The event sources' receives: SDK middleware on their client sees how many messages each one returned.
    started.sqs().middlewareStack.add(
      (next, context) => async (args) => {
        const out = await next(args);
        if (counting && context.commandName === 'ReceiveMessageCommand') {
          if (((out.output as { Messages?: unknown[] }).Messages ?? []).length > 0) receives.withMessages++;
          else receives.empty++;
        }
        return out;
      },
      { step: 'initialize', name: 'benchReceiveCounter' },
    );

    // Consumer durations, for GB-seconds: the mapping calls fn.invoke on the function object, so timing it there
    // sees exactly the invocations the event source makes.
    const consumerNames = new Set(started.mappings.map((m) => m.config.functionName));
    for (const fn of started.runtime.list()) {
      if (!consumerNames.has(fn.spec.name)) continue;
      const invoke = fn.invoke.bind(fn);
      fn.invoke = async (event: unknown) => {
        const t = performance.now();
        try {
          return await invoke(event);
        } finally {
          consumerDurationMs += performance.now() - t;
        }
      };
    }

    const first = [...jobs.values()][0];
    const dateFor = (at: Date) => (first ? zonedDate(at, first.settings.timeZone, first.settings.businessDateOffsetDays) : zonedDate(at, 'UTC', -1));
    const { S3Client } = await import('@aws-sdk/client-s3');
    const acknowledged = () => started.mappings.reduce((s, m) => s + m.statistics.acknowledged, 0);

    /** Seeds one business date, fires every schedule for it and waits until the pipeline is idle; returns the time of the last acknowledgement. */
    const cycle = async (at: Date, counts: SeedCounts, beforeFire: () => void): Promise<{ operations: number; t0: number; lastAckAt: number; scheduledRuns: number }> => {
      const businessDate = dateFor(at);
      const dynamodb = new DynamoDBClient(started.clientConfig('dynamodb'));
      const s3 = new S3Client(started.clientConfig('s3'));
      let operations = 0;
      try {
        const seeded = await seedDemoData({ dynamodb, s3, businessDate, jobs: new Map([...jobs.values()].map((j) => [j.name, j.settings])) }, counts);
        operations = seeded.paymentIds.length + seeded.uploadKeys.length + counts.tenants;
        progress(`e2e: seeded ${businessDate}: ${seeded.paymentIds.length} payments, ${seeded.uploadKeys.length} uploads, ${counts.tenants} tenants`);
      } finally {
        dynamodb.destroy();
        s3.destroy();
      }
      beforeFire();
      const t0 = performance.now();
      let scheduledRuns = 0;
      for (const job of jobs.values()) {
        if (!job.scheduleName) continue;
        const result = await started.scheduler.fire(job.scheduleName, { scheduledTime: at, businessDate });
        if (!result.delivered) throw new E2eBenchError(`schedule ${job.scheduleName} could not deliver to its producer: ${result.error}`);
        scheduledRuns++;
      }
      // Settled: nothing running, queued or in flight, twice in a row. The clock stops at the last acknowledgement.
      const depthClient = new SQSClient(started.clientConfig('sqs'));
      const deadline = Date.now() + (options.timeoutSeconds ?? 300) * 1000;
      const ackedBefore = acknowledged();
      let lastAck = ackedBefore;
      let lastAckAt = t0;
      let quiet = 0;
      let lastProgress = Date.now();
      try {
        while (quiet < 2) {
          if (Date.now() > deadline) throw new E2eBenchError(`the run did not settle within ${options.timeoutSeconds ?? 300} s (${acknowledged() - ackedBefore} messages acknowledged)`);
          await sleep(200);
          const acks = acknowledged();
          if (acks !== lastAck) {
            lastAck = acks;
            lastAckAt = performance.now();
          }
          let busy = !started.runtime.isIdle() || started.scheduler.pending > 0 || acks === ackedBefore;
          for (const job of jobs.values()) {
            if (!job.queueUrl) continue;
            const a = await depthClient.send(
              new GetQueueAttributesCommand({ QueueUrl: job.queueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesDelayed'] }),
            );
            if (Number(a.Attributes?.ApproximateNumberOfMessages ?? 0) + Number(a.Attributes?.ApproximateNumberOfMessagesDelayed ?? 0) > 0) busy = true;
          }
          quiet = busy ? 0 : quiet + 1;
          if (Date.now() - lastProgress > 5000) {
            lastProgress = Date.now();
            progress(`e2e: ${acks - ackedBefore} messages acknowledged`);
          }
        }
      } finally {
        depthClient.destroy();
      }
      return { operations, t0, lastAckAt, scheduledRuns };
    };

    // A small warm-up cycle on the day before first: each execution environment's first invocation builds its clients
    // and fetches its secrets, which is cold-start cost (measured apart), not cost per job.
    const now = new Date();
    await cycle(new Date(now.getTime() - 86_400_000), { payments: 10, uploads: 10, tenants: 3 }, () => started.startConsumers());
    const invocationsBefore = new Map(started.runtime.list().map((fn) => [fn.spec.name, fn.invocationCount]));
    const statsBefore = new Map(started.mappings.map((m) => [m.config.functionName, m.statistics]));
    let baseline = 0;
    const { operations, t0, lastAckAt, scheduledRuns } = await cycle(now, options.counts, () => {
      baseline = dynamoProxy.requests.length;
      sqsRequests.length = 0;
      receives.withMessages = 0;
      receives.empty = 0;
      consumerDurationMs = 0;
      counting = true;
    });
    counting = false;
    const seconds = (lastAckAt - t0) / 1000;

    const roles = new Map<string, TableRole>();
    for (const fn of started.plan.functions) {
      if (fn.environment.IDEMPOTENCY_TABLE_NAME) roles.set(fn.environment.IDEMPOTENCY_TABLE_NAME, 'idempotency');
      if (fn.environment.LEDGER_TABLE_NAME) roles.set(fn.environment.LEDGER_TABLE_NAME, 'ledger');
      if (fn.environment.LIMITER_TABLE_NAME) roles.set(fn.environment.LIMITER_TABLE_NAME, 'limiter');
    }
    const dynamo: RunCounts['dynamo'] = {
      idempotency: { write: 0, read: 0 },
      ledger: { write: 0, read: 0 },
      limiter: { write: 0, read: 0 },
      business: { write: 0, read: 0 },
    };
    const dynamoRequests: E2eResult['dynamoRequests'] = {};
    for (const r of dynamoProxy.requests.slice(baseline)) {
      const role = roles.get(r.table ?? '') ?? 'business';
      const key = `${role} ${r.action} ${r.status}`;
      dynamoRequests[key] = { requests: (dynamoRequests[key]?.requests ?? 0) + 1, units: (dynamoRequests[key]?.units ?? 0) + unitsOf(r) };
      if (DYNAMO_WRITE_ACTIONS.has(r.action)) dynamo[role].write += unitsOf(r);
      else if (DYNAMO_READ_ACTIONS.has(r.action)) dynamo[role].read += unitsOf(r);
    }
    const actionCount = (...actions: string[]) => sqsRequests.filter((r) => actions.includes(r.action)).length;

    const perJobName: E2eResult['perJobName'] = {};
    let jobsDone = 0;
    let failedMessages = 0;
    let producerInvocations = 0;
    let consumerInvocations = 0;
    const invocationsOf = (name: string | undefined) => (name ? started.runtime.get(name).invocationCount - (invocationsBefore.get(name) ?? 0) : 0);
    for (const job of jobs.values()) {
      const stats = job.mapping?.statistics;
      const before = statsBefore.get(job.consumer?.name ?? '');
      const acked = (stats?.acknowledged ?? 0) - (before?.acknowledged ?? 0);
      jobsDone += acked;
      failedMessages += (stats?.failed ?? 0) - (before?.failed ?? 0);
      const producer = invocationsOf(job.producer?.name);
      const consumer = invocationsOf(job.consumer?.name);
      producerInvocations += producer;
      consumerInvocations += consumer;
      perJobName[job.name] = { acknowledged: acked, invocations: producer + consumer };
    }
    const consumerFn = started.plan.functions.find((f) => consumerNames.has(f.name));
    const architectures = (template.Resources[consumerFn?.logicalId ?? '']?.Properties?.Architectures ?? []) as string[];
    const counts: RunCounts = {
      jobs: operations,
      deliveries: jobsDone,
      sqs: {
        sendCalls: actionCount('SendMessage', 'SendMessageBatch'),
        receiveCalls: receives.withMessages,
        emptyReceiveCalls: receives.empty,
        deleteCalls: actionCount('DeleteMessage', 'DeleteMessageBatch'),
      },
      dynamo,
      lambda: {
        producerInvocations,
        consumerInvocations,
        consumerDurationMs,
        memoryMb: consumerFn?.memoryMb ?? 128,
        architecture: (architectures[0] === 'arm64' ? 'arm64' : 'x86_64') as Architecture,
      },
      scheduledRuns,
    };
    return { counts, ratePerMinute, consumerConcurrency, seconds, jobsPerSec: operations / Math.max(seconds, 1e-3), failedMessages, perJobName, dynamoRequests };
  } finally {
    await stack?.stop();
    await dynamoProxy.close();
    await provider.close();
  }
}

export interface EmulatorCeiling {
  /** Messages received and deleted per second (ReceiveMessage of 10 + DeleteMessageBatch, 5 loops in flight). */
  sqsReceiveDeletePerSec: number;
  /** Conditional PutItem (attribute_not_exists) per second, 10 in flight. */
  dynamoConditionalWritesPerSec: number;
}

/** The embedded servers' own ceiling, measured directly (no Lambda runtime, no pipeline logic). */
export async function measureEmulatorCeiling(messages: number, writes: number, progress: (line: string) => void = () => undefined): Promise<EmulatorCeiling> {
  const [sqsServer, dynamoServer] = await Promise.all([startSqs(), startDynamoDb()]);
  const sqs = new SQSClient({ endpoint: sqsServer.endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
  const ddb = new DynamoDBClient({ endpoint: dynamoServer.endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
  try {
    progress(`emulator ceiling: ${messages} messages received + deleted, ${writes} conditional writes`);
    const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'bench-ceiling' }))).QueueUrl!;
    const chunks = Array.from({ length: Math.ceil(messages / 10) }, (_, i) => i);
    await mapBounded(chunks, 5, (i) =>
      sqs.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: Array.from({ length: Math.min(10, messages - i * 10) }, (_, j) => ({ Id: String(j), MessageBody: `{"n":${i * 10 + j}}` })) })),
    );
    let drained = 0;
    let t = performance.now();
    const loop = async () => {
      while (drained < messages) {
        const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }));
        const batch = got.Messages ?? [];
        if (batch.length === 0) {
          // Another loop holds the last messages in flight; stop rather than spin until they time out.
          if (drained + 10 * 5 >= messages) return;
          continue;
        }
        await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: batch.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle! })) }));
        drained += batch.length;
      }
    };
    await Promise.all(Array.from({ length: 5 }, loop));
    const sqsReceiveDeletePerSec = drained / ((performance.now() - t) / 1000);

    await ddb.send(
      new CreateTableCommand({ TableName: 'bench-ceiling', KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }], AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }], BillingMode: 'PAY_PER_REQUEST' }),
    );
    t = performance.now();
    await mapBounded(
      Array.from({ length: writes }, (_, i) => i),
      10,
      (i) => ddb.send(new PutItemCommand({ TableName: 'bench-ceiling', Item: { id: { S: `op-${i}` }, status: { S: 'INPROGRESS' } }, ConditionExpression: 'attribute_not_exists(id)' })),
    );
    const dynamoConditionalWritesPerSec = writes / ((performance.now() - t) / 1000);
    return { sqsReceiveDeletePerSec, dynamoConditionalWritesPerSec };
  } finally {
    sqs.destroy();
    ddb.destroy();
    await Promise.all([sqsServer.close(), dynamoServer.close()]);
  }
}
