// Benchmark (`npm run bench`), the whole pipeline: deploys the synthesized stack on the embedded servers (local/), runs
// one cycle of the jobs (each paced at its configured rate, time-scaled where that would take too long; or pacing off)
// and counts every AWS request the pipeline makes per job; then measures the emulators' own ceiling (receive + delete,
// conditional writes) in the same process, to read the jobs/s against.
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
import { maxInAnyWindow, PaymentProvider } from '../local/provider';
import { planStack } from '../local/plan';
import { jobViews } from '../local/run';
import { seedDemoData, type SeedCounts } from '../local/seed';
import { LOCAL_CREDENTIALS, startDynamoDb, startSqs, type ObservedRequest } from '../local/servers';
import { LocalStack } from '../local/stack';
import { loadTemplate } from '../local/template';
import { mapBounded } from '../lambda/adapters/sqsPublisher';
import { admissionGroupSize } from '../lambda/core/admission';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import { pacingSettings, PacingSettingKey } from '../lambda/handlers/runtime';
import { actionOf, DYNAMO_READ_ACTIONS, DYNAMO_WRITE_ACTIONS, startCountingProxy, type CountedRequest } from './countingProxy';
import { slotWaitGbSeconds, type RunCounts, type TimedInvocation } from './perJob';
import type { Architecture } from './prices';

/** Consumer executions per job in the bench run (the template's MaximumConcurrency is 5 to 10). */
export const DEFAULT_BENCH_CONSUMER_CONCURRENCY = 2;

/** The bench's own SQS client says so in its user agent, so its depth polls are not counted as the pipeline's. */
const BENCH_USER_AGENT = 'paced-jobs-bench';

/** Which seeded count feeds which job (local/seed.ts seeds by job name; tenants: one operation per tenant). */
const SEEDED_COUNT_OF: Record<string, 'payments' | 'uploads' | 'tenants'> = {
  'payment-reconciliation': 'payments',
  'stale-upload-cleanup': 'uploads',
  'expired-session-cleanup': 'tenants',
};

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
   * `configured`: every job paced at its own configured rate (JOB_SETTINGS as synthesized), time-scaled per
   * `maxPacedSeconds` and `intervalSeconds`. `off`: every job's `pacing: false` (no shared limiter, no admission, only
   * the concurrency cap), so the counts are the pipeline's own and the jobs/s is bound by the emulators.
   * @default "configured"
   */
  pacing?: 'configured' | 'off';
  /** Pace every job at this many starts per minute (60 s interval, burst 1) instead of its configured rate; unscaled. */
  ratePerMinute?: number;
  /**
   * Configured pacing: a job whose seeded operations would take longer than this at its configured rate runs with its
   * time scaled (a shorter rate-limit interval, and the admission horizon and the short wait shortened alike) so that it
   * takes about this long. @default no limit (every job at its real rate)
   */
  maxPacedSeconds?: number;
  /** Configured pacing: run these jobs (by name) at this rate-limit interval, in seconds; wins over maxPacedSeconds. */
  intervalSeconds?: Record<string, number>;
  /** Treat these jobs (by name) as configured at this effective rate (burst 1) instead of the synthesized one, before any scaling. */
  rateLimits?: Record<string, { startsPerInterval: number; intervalSeconds: number }>;
  /** False removes `admission` from every job's JOB_SETTINGS: the producer publishes every page at once. @default true */
  admission?: boolean;
  /** Fire only these jobs' schedules (seed only theirs). @default every job */
  jobs?: string[];
  /** Event source MaximumConcurrency per job, overriding the template's (fewer workers contend less for 2 cores). @default 2 */
  consumerConcurrency?: number;
  /** Give up when the run has not settled by then. @default 300 */
  timeoutSeconds?: number;
  progress?: (line: string) => void;
  /** Function output and runtime notes. @default dropped */
  log?: (source: string, line: string) => void;
}

/** How one job was paced in the run. */
export interface JobPacing {
  /** Effective starts per configured interval (after headroom), as synthesized or as `ratePerMinute` set it. */
  startsPerInterval: number;
  configuredIntervalSeconds: number;
  /** The interval the run used: shorter than configured when time was scaled. */
  runIntervalSeconds: number;
  /** configured / run interval: 1 is the real rate. */
  timeScale: number;
  /** Admission horizon, configured and as run (absent: unlimited admission). */
  horizonSeconds?: { configured: number; run: number };
  /** The consumer's short wait for a slot, configured and as run. */
  shortWaitMs: { configured: number; run: number };
  /** The consumer's event source batching window, configured and as run (absent: none). */
  batchingWindowSeconds?: { configured: number; run: number };
}

export interface JobRunFigures {
  operations: number;
  acknowledged: number;
  failed: number;
  /** Receives of the job's messages by its consumer (acknowledged + failed): per operation, 1 means no deferral. */
  deliveries: number;
  invocations: { producer: number; consumer: number };
  /** Producer and consumer duration times memory, as measured in this run (at its time scale). */
  gbSeconds: number;
  /**
   * The GB-seconds at the configured rate: the measured ones plus the slot waits (estimated from the downstream's
   * arrival log) grown by the time scale. Equal to gbSeconds when unscaled; undefined when scaled but the job's starts
   * are not observed (only the payment provider logs them).
   */
  gbSecondsAtRealRate?: number;
  /** Undefined: pacing off. */
  pacing?: JobPacing;
  /** Messages in the job's DLQ once the run settled. */
  deadLettered: number;
  /** First operation published to the last acknowledgement. */
  seconds: number;
  /** The payment job: effects at the provider per seeded payment (exactly once is the goal). */
  effects?: { expected: number; exactlyOnce: number; missing: number; repeated: number; unexpected: number };
  /** The payment job: the provider's most starts in any window of the run interval, next to the allowance. */
  maxStartsInAnyInterval?: number;
}

export interface E2eResult {
  counts: RunCounts;
  pacing: 'configured' | 'off' | 'fixed';
  /** Set for `fixed`. */
  ratePerMinute: number | undefined;
  admission: boolean;
  consumerConcurrency: number;
  seconds: number;
  jobsPerSec: number;
  /** Messages the event sources left on the queue (failed): 0 in a clean run. */
  failedMessages: number;
  /** Messages in the jobs' DLQs once the run settled. */
  deadLettered: number;
  perJobName: Record<string, JobRunFigures>;
  /** DynamoDB requests by "role action status": how many, and the units they consumed (what dominates the overhead). */
  dynamoRequests: Record<string, { requests: number; units: number }>;
  /** SQS requests the functions and event sources made, by action (the bench's own depth polls left out). */
  sqsRequests: Record<string, number>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type TableRole = 'idempotency' | 'ledger' | 'limiter' | 'business';

/** Units one counted DynamoDB request consumed. A refused conditional write reports none locally; AWS bills it 1. */
function unitsOf(r: CountedRequest): number {
  return r.capacityUnits ?? (r.status >= 400 ? 1 : 0);
}

/**
 * The shortest rate-limit interval (whole seconds) a job can be time-scaled to and still behave as at its configured
 * rate. The producer makes each group of one event-source batch visible at the group's first slot, but SQS delays are
 * whole seconds: once a group's slots span less than a second, several groups become visible in the same second, the
 * event source hands them to several consumers at once, and the later ones defer what the earlier ones hold the slots
 * for. No such bunching happens at the real rate (a group spans 7.5 s at 80 starts/min), so a faster run would measure
 * the scaling, not the design. A group spans `group / rate` seconds; scaled by k it must stay at least 1 s.
 */
export function shortestFaithfulIntervalSeconds(settings: JobRuntimeSettings): number {
  const { startsPerInterval, intervalSeconds } = settings.rateLimit;
  // Without admission (the settings as synthesized always have it) every message is its own group.
  const group = admissionGroupSize(settings.admission?.batchSize ?? 1, startsPerInterval / intervalSeconds, pacingSettings(settings).shortWaitMs);
  return Math.min(intervalSeconds, Math.max(1, Math.ceil(startsPerInterval / group)));
}

/**
 * The rate-limit interval (whole seconds, as JOB_SETTINGS requires) that runs `operations` at the job's rate in about
 * `maxSeconds`: the configured one when that is already short enough, and never below `floorSeconds` (the shortest
 * faithful interval), where the run takes longer than asked rather than measure an artefact.
 */
export function scaledIntervalSeconds(rate: { startsPerInterval: number; intervalSeconds: number }, operations: number, maxSeconds: number, floorSeconds = 1): number {
  const seconds = (operations * rate.intervalSeconds) / rate.startsPerInterval;
  if (seconds <= maxSeconds) return rate.intervalSeconds;
  return Math.min(rate.intervalSeconds, Math.max(floorSeconds, 1, Math.floor((rate.intervalSeconds * maxSeconds) / seconds)));
}

/**
 * A job's settings with time scaled to `runIntervalSeconds`: the rate-limit interval, and by the same factor the
 * admission horizon, the consumer's short wait and its event source's batching window (whole seconds, at least 1), so
 * that what is measured in counts (deliveries, requests) is what the configured rate would give. Not scalable, and so
 * left as they are: SQS delays (whole seconds: at a large scale, groups the producer spaces apart become visible in
 * the same second), the deferral backoff, the limiter's safety margin (at least 20 ms).
 */
export function scaleJobSettings(settings: JobRuntimeSettings, runIntervalSeconds: number, batchingWindowSeconds = 0): { settings: JobRuntimeSettings; pacing: JobPacing } {
  const configured = settings.rateLimit.intervalSeconds;
  const timeScale = configured / runIntervalSeconds;
  const shortWait = pacingSettings(settings).shortWaitMs;
  const runShortWait = Math.max(1, Math.round(shortWait / timeScale));
  const next: JobRuntimeSettings = {
    ...settings,
    rateLimit: { ...settings.rateLimit, intervalSeconds: runIntervalSeconds },
    settings: timeScale === 1 ? settings.settings : { ...settings.settings, [PacingSettingKey.shortWaitMs]: runShortWait },
  };
  let horizonSeconds: JobPacing['horizonSeconds'];
  if (settings.admission) {
    const run = Math.max(1, Math.round(settings.admission.horizonSeconds / timeScale));
    next.admission = { ...settings.admission, horizonSeconds: run };
    horizonSeconds = { configured: settings.admission.horizonSeconds, run };
  }
  return {
    settings: next,
    pacing: {
      startsPerInterval: settings.rateLimit.startsPerInterval,
      configuredIntervalSeconds: configured,
      runIntervalSeconds,
      timeScale,
      horizonSeconds,
      shortWaitMs: { configured: shortWait, run: runShortWait },
      batchingWindowSeconds: batchingWindowSeconds > 0 ? { configured: batchingWindowSeconds, run: Math.max(1, Math.round(batchingWindowSeconds / timeScale)) } : undefined,
    },
  };
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
  const mode: E2eResult['pacing'] = ratePerMinute !== undefined ? 'fixed' : (options.pacing ?? 'configured');
  const admission = options.admission ?? true;
  const selected = (job: string) => options.jobs === undefined || options.jobs.includes(job);
  const operationsOf = (job: string) => (SEEDED_COUNT_OF[job] && selected(job) ? options.counts[SEEDED_COUNT_OF[job]] : 0);
  const counts: SeedCounts = {
    ...options.counts,
    payments: operationsOf('payment-reconciliation'),
    uploads: operationsOf('stale-upload-cleanup'),
    tenants: operationsOf('expired-session-cleanup'),
  };

  // Each job's settings for the run, decided once from a plan of the template before any server exists; the producer
  // and the consumer of a job get the same.
  const previewPlan = planStack(template, { stackName: artifact.stackName, region: 'us-east-1', accountId: '000000000000', sqsEndpoint: 'http://preview' });
  const preview = jobViews(previewPlan);
  const runSettings = new Map<string, JobRuntimeSettings>();
  const pacingByJob = new Map<string, JobPacing>();
  for (const job of preview.values()) {
    const next: JobRuntimeSettings = structuredClone(job.settings);
    if (!admission) delete next.admission;
    if (mode === 'off') {
      next.settings.pacing = false;
      runSettings.set(job.name, next);
      continue;
    }
    if (mode === 'fixed') next.rateLimit = { startsPerInterval: ratePerMinute!, intervalSeconds: 60, burst: 1 };
    const rate = options.rateLimits?.[job.name];
    if (rate) next.rateLimit = { ...rate, burst: 1 };
    const explicit = options.intervalSeconds?.[job.name];
    const runInterval =
      explicit ??
      (mode === 'configured' && options.maxPacedSeconds !== undefined
        ? scaledIntervalSeconds(next.rateLimit, operationsOf(job.name), options.maxPacedSeconds, shortestFaithfulIntervalSeconds({ ...job.settings, rateLimit: next.rateLimit }))
        : next.rateLimit.intervalSeconds);
    const mappingId = previewPlan.mappings.find((m) => m.functionName === job.consumer?.name)?.logicalId;
    const mapping = mappingId === undefined ? undefined : template.Resources[mappingId];
    const scaled = scaleJobSettings(next, runInterval, Number(mapping?.Properties?.MaximumBatchingWindowInSeconds ?? 0));
    runSettings.set(job.name, scaled.settings);
    pacingByJob.set(job.name, scaled.pacing);
    // The batching window is time too: scaled alike (whole seconds, at least 1 when the template has one).
    if (mapping?.Properties && scaled.pacing.batchingWindowSeconds) mapping.Properties.MaximumBatchingWindowInSeconds = scaled.pacing.batchingWindowSeconds.run;
  }

  // The downstream answers at once and never throttles: the run measures the pipeline, not the provider's quota.
  const provider = new PaymentProvider({ startsPerWindow: 1_000_000_000, windowSeconds: 60, maxConcurrent: 10_000, latencyMs: 1 });
  await provider.start();
  let stack: LocalStack | undefined;
  const dynamoProxy = await startCountingProxy('dynamodb', () => stack!.endpoints.dynamodb);
  const sqsRequests: { action: string; status: number }[] = [];
  let counting = false;
  // The event sources' receives, counted by SDK middleware on their client (below).
  const receives = { withMessages: 0, empty: 0 };
  /** Every function's invocations while counting: duration and memory, and (paced jobs with a provider) what they ran. */
  const timed = new Map<string, TimedInvocation[]>();
  try {
    stack = new LocalStack({
      template,
      stackName: artifact.stackName,
      assemblyDir: artifact.assemblyDir,
      log: (source, line) => options.log?.(source, line),
      // Every SQS request reaches the server, the functions' and the event sources' alike: count them there.
      onRequest: (service, r: ObservedRequest) => {
        if (service !== 'sqs' || !counting) return;
        if (String(r.headers['user-agent'] ?? '').includes(BENCH_USER_AGENT)) return;
        sqsRequests.push({ action: actionOf(r.headers, r.url, r.body), status: r.status });
      },
      environmentOverride: (_fn, vars) => {
        const next = { ...vars, AWS_ENDPOINT_URL_DYNAMODB: dynamoProxy.endpoint };
        if (!vars.JOB_SETTINGS) return next;
        const synthesized = JSON.parse(vars.JOB_SETTINGS) as JobRuntimeSettings;
        const settings = structuredClone(runSettings.get(synthesized.jobName) ?? synthesized);
        if (settings.settings.providerBaseUrl !== undefined) settings.settings.providerBaseUrl = provider.endpoint;
        return { ...next, JOB_SETTINGS: JSON.stringify(settings) };
      },
    });
    progress(`e2e: starting the local stack (${describePacing(mode, ratePerMinute)}${admission ? '' : ', admission off'})`);
    await stack.start();
    const started = stack;
    const jobs = jobViews(started.plan, started.mappings);
    for (const job of jobs.values()) {
      const pacing = pacingByJob.get(job.name);
      if (pacing && pacing.timeScale !== 1) progress(`e2e: ${job.name}: ${describeScale(pacing)}`);
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

    // Durations, for GB-seconds: the mappings and the scheduler's asynchronous invocations both go through fn.invoke,
    // so timing it there sees every invocation. A paced job with a provider also keeps which payments each consumer
    // invocation carried, to tell its slot waits (which grow with the time scale) from its work.
    const consumerNames = new Set([...jobs.values()].flatMap((j) => (j.consumer ? [j.consumer.name] : [])));
    const providerConsumers = new Set([...jobs.values()].filter((j) => j.settings.settings.providerBaseUrl !== undefined && j.consumer).map((j) => j.consumer!.name));
    for (const fn of started.runtime.list()) {
      const invoke = fn.invoke.bind(fn);
      const memoryMb = fn.spec.memoryMb ?? 128;
      fn.invoke = async (event: unknown) => {
        const startMs = Date.now();
        try {
          return await invoke(event);
        } finally {
          if (counting) {
            const keys = providerConsumers.has(fn.spec.name) ? paymentIdsOf(event) : [];
            const list = timed.get(fn.spec.name) ?? [];
            list.push({ startMs, endMs: Date.now(), memoryMb, keys });
            timed.set(fn.spec.name, list);
          }
        }
      };
    }

    const first = [...jobs.values()][0];
    const dateFor = (at: Date) => (first ? zonedDate(at, first.settings.timeZone, first.settings.businessDateOffsetDays) : zonedDate(at, 'UTC', -1));
    const { S3Client } = await import('@aws-sdk/client-s3');
    const depthClient = new SQSClient({ ...started.clientConfig('sqs'), customUserAgent: BENCH_USER_AGENT });
    const depthOf = async (url: string | undefined): Promise<number> => {
      if (!url) return 0;
      const a = await depthClient.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesDelayed'] }));
      // local-aws-sqs counts in-flight messages in ApproximateNumberOfMessages too: total + delayed is everything held.
      return Number(a.Attributes?.ApproximateNumberOfMessages ?? 0) + Number(a.Attributes?.ApproximateNumberOfMessagesDelayed ?? 0);
    };
    const acknowledged = () => started.mappings.reduce((s, m) => s + m.statistics.acknowledged, 0);
    const lastAckAt = new Map<string, number>();

    /** Seeds one business date, fires the selected schedules for it and waits until the pipeline is idle. */
    const cycle = async (at: Date, seedCounts: SeedCounts, beforeFire: () => void): Promise<{ operations: number; t0: number; lastAckAt: number; scheduledRuns: number; paymentIds: string[] }> => {
      const businessDate = dateFor(at);
      const dynamodb = new DynamoDBClient(started.clientConfig('dynamodb'));
      const s3 = new S3Client(started.clientConfig('s3'));
      let operations = 0;
      let paymentIds: string[] = [];
      try {
        const seeded = await seedDemoData({ dynamodb, s3, businessDate, jobs: new Map([...jobs.values()].map((j) => [j.name, j.settings])) }, seedCounts);
        operations = seeded.paymentIds.length + seeded.uploadKeys.length + seedCounts.tenants;
        paymentIds = seeded.paymentIds;
        progress(`e2e: seeded ${businessDate}: ${seeded.paymentIds.length} payments, ${seeded.uploadKeys.length} uploads, ${seedCounts.tenants} tenants`);
      } finally {
        dynamodb.destroy();
        s3.destroy();
      }
      beforeFire();
      const t0 = performance.now();
      let scheduledRuns = 0;
      for (const job of jobs.values()) {
        if (!job.scheduleName || !selected(job.name)) continue;
        const result = await started.scheduler.fire(job.scheduleName, { scheduledTime: at, businessDate });
        if (!result.delivered) throw new E2eBenchError(`schedule ${job.scheduleName} could not deliver to its producer: ${result.error}`);
        scheduledRuns++;
      }
      // Settled: nothing running, queued, delayed or in flight (the work queues, and the admission queues where a run's
      // next step waits), twice in a row. The clock stops at the last acknowledgement.
      const deadline = Date.now() + (options.timeoutSeconds ?? 300) * 1000;
      const ackedBefore = acknowledged();
      const jobAcks = new Map([...jobs.values()].map((j) => [j.name, j.mapping?.statistics.acknowledged ?? 0]));
      let lastAck = ackedBefore;
      let lastAt = t0;
      let quiet = 0;
      let lastProgress = Date.now();
      while (quiet < 2) {
        if (Date.now() > deadline) throw new E2eBenchError(`the run did not settle within ${options.timeoutSeconds ?? 300} s (${acknowledged() - ackedBefore} messages acknowledged)`);
        await sleep(200);
        const acks = acknowledged();
        if (acks !== lastAck) {
          lastAck = acks;
          lastAt = performance.now();
        }
        let busy = !started.runtime.isIdle() || started.scheduler.pending > 0 || acks === ackedBefore;
        for (const job of jobs.values()) {
          const jobAck = job.mapping?.statistics.acknowledged ?? 0;
          if (jobAck !== jobAcks.get(job.name)) {
            jobAcks.set(job.name, jobAck);
            lastAckAt.set(job.name, performance.now());
          }
          if ((await depthOf(job.queueUrl)) + (await depthOf(job.admissionQueueUrl)) > 0) busy = true;
        }
        quiet = busy ? 0 : quiet + 1;
        if (Date.now() - lastProgress > 5000) {
          lastProgress = Date.now();
          progress(`e2e: ${acks - ackedBefore} messages acknowledged`);
        }
      }
      return { operations, t0, lastAckAt: lastAt, scheduledRuns, paymentIds };
    };

    try {
      // A small warm-up cycle on the day before first: each execution environment's first invocation builds its
      // clients and fetches its secrets, which is cold-start cost (measured apart), not cost per job.
      const now = new Date();
      const warmUp: SeedCounts = { payments: counts.payments > 0 ? 10 : 0, uploads: counts.uploads > 0 ? 10 : 0, tenants: counts.tenants > 0 ? 3 : 0 };
      await cycle(new Date(now.getTime() - 86_400_000), warmUp, () => started.startConsumers());
      const invocationsBefore = new Map(started.runtime.list().map((fn) => [fn.spec.name, fn.invocationCount]));
      const statsBefore = new Map(started.mappings.map((m) => [m.config.functionName, m.statistics]));
      const arrivalsBefore = provider.arrivals.length;
      const effectsBefore = provider.effects.length;
      let baseline = 0;
      const run = await cycle(now, counts, () => {
        baseline = dynamoProxy.requests.length;
        sqsRequests.length = 0;
        receives.withMessages = 0;
        receives.empty = 0;
        timed.clear();
        lastAckAt.clear();
        counting = true;
      });
      counting = false;
      const seconds = (run.lastAckAt - run.t0) / 1000;

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
      const sqsByAction: Record<string, number> = {};
      for (const r of sqsRequests) sqsByAction[r.action] = (sqsByAction[r.action] ?? 0) + 1;
      const actionCount = (...actions: string[]) => actions.reduce((s, a) => s + (sqsByAction[a] ?? 0), 0);

      const arrivals = provider.arrivals.slice(arrivalsBefore);
      const startsByPayment = new Map<string, number[]>();
      for (const a of arrivals) startsByPayment.set(a.paymentId, [...(startsByPayment.get(a.paymentId) ?? []), a.at]);
      const gbSecondsOf = (list: TimedInvocation[] | undefined) => (list ?? []).reduce((s, i) => s + ((i.endMs - i.startMs) / 1000) * (i.memoryMb / 1024), 0);

      const perJobName: E2eResult['perJobName'] = {};
      let deliveries = 0;
      let failedMessages = 0;
      let deadLettered = 0;
      let producerInvocations = 0;
      let consumerInvocations = 0;
      let gbSeconds = 0;
      let gbSecondsAtRealRate: number | undefined = 0;
      const invocationsOf = (name: string | undefined) => (name ? started.runtime.get(name).invocationCount - (invocationsBefore.get(name) ?? 0) : 0);
      for (const job of jobs.values()) {
        if (!selected(job.name)) continue;
        const stats = job.mapping?.statistics;
        const before = statsBefore.get(job.consumer?.name ?? '');
        const acked = (stats?.acknowledged ?? 0) - (before?.acknowledged ?? 0);
        const failed = (stats?.failed ?? 0) - (before?.failed ?? 0);
        const producer = invocationsOf(job.producer?.name);
        const consumer = invocationsOf(job.consumer?.name);
        const jobGbSeconds = gbSecondsOf(timed.get(job.producer?.name ?? '')) + gbSecondsOf(timed.get(job.consumer?.name ?? ''));
        const pacing = pacingByJob.get(job.name);
        const observed = job.consumer !== undefined && providerConsumers.has(job.consumer.name);
        let atRealRate: number | undefined = jobGbSeconds;
        if (pacing && pacing.timeScale !== 1) {
          atRealRate = observed
            ? jobGbSeconds + (pacing.timeScale - 1) * slotWaitGbSeconds(timed.get(job.consumer!.name) ?? [], (id) => startsByPayment.get(id) ?? [])
            : undefined;
        }
        const jobDlq = await depthOf(job.dlqUrl);
        const figures: JobRunFigures = {
          operations: operationsOf(job.name),
          acknowledged: acked,
          failed,
          deliveries: acked + failed,
          invocations: { producer, consumer },
          gbSeconds: jobGbSeconds,
          gbSecondsAtRealRate: atRealRate,
          pacing,
          deadLettered: jobDlq,
          seconds: ((lastAckAt.get(job.name) ?? run.t0) - run.t0) / 1000,
        };
        if (observed) {
          const effects = new Map<string, number>();
          for (const e of provider.effects.slice(effectsBefore)) effects.set(e.paymentId, (effects.get(e.paymentId) ?? 0) + 1);
          const expected = new Set(run.paymentIds);
          const ofSeeded = run.paymentIds.map((id) => effects.get(id) ?? 0);
          figures.effects = {
            expected: expected.size,
            exactlyOnce: ofSeeded.filter((n) => n === 1).length,
            missing: ofSeeded.filter((n) => n === 0).length,
            repeated: ofSeeded.filter((n) => n > 1).length,
            unexpected: [...effects.keys()].filter((id) => !expected.has(id)).length,
          };
          if (pacing) figures.maxStartsInAnyInterval = maxInAnyWindow(arrivals.map((a) => a.at), pacing.runIntervalSeconds * 1000);
        }
        perJobName[job.name] = figures;
        deliveries += figures.deliveries;
        failedMessages += failed;
        deadLettered += jobDlq;
        producerInvocations += producer;
        consumerInvocations += consumer;
        gbSeconds += jobGbSeconds;
        gbSecondsAtRealRate = atRealRate === undefined || gbSecondsAtRealRate === undefined ? undefined : gbSecondsAtRealRate + atRealRate;
      }
      const consumerFn = started.plan.functions.find((f) => consumerNames.has(f.name));
      const architectures = (template.Resources[consumerFn?.logicalId ?? '']?.Properties?.Architectures ?? []) as string[];
      const runCounts: RunCounts = {
        jobs: run.operations,
        deliveries,
        sqs: {
          sendCalls: actionCount('SendMessage', 'SendMessageBatch'),
          receiveCalls: receives.withMessages,
          emptyReceiveCalls: receives.empty,
          deleteCalls: actionCount('DeleteMessage', 'DeleteMessageBatch'),
          // The producer reads its queue's depth once per admission step: a billed request like any other.
          attributeCalls: actionCount('GetQueueAttributes'),
        },
        dynamo,
        lambda: {
          producerInvocations,
          consumerInvocations,
          gbSeconds,
          gbSecondsAtRealRate,
          architecture: (architectures[0] === 'arm64' ? 'arm64' : 'x86_64') as Architecture,
        },
        scheduledRuns: run.scheduledRuns,
      };
      return {
        counts: runCounts,
        pacing: mode,
        ratePerMinute,
        admission,
        consumerConcurrency,
        seconds,
        jobsPerSec: run.operations / Math.max(seconds, 1e-3),
        failedMessages,
        deadLettered,
        perJobName,
        dynamoRequests,
        sqsRequests: sqsByAction,
      };
    } finally {
      depthClient.destroy();
    }
  } finally {
    await stack?.stop();
    await dynamoProxy.close();
    await provider.close();
  }
}

/** The payment IDs an SQS event carries (the payment job's resource), for matching its invocations to the provider's log. */
function paymentIdsOf(event: unknown): string[] {
  const records = (event as { Records?: { body?: string }[] } | undefined)?.Records ?? [];
  const ids: string[] = [];
  for (const r of records) {
    try {
      const id = (JSON.parse(r.body ?? '') as { resource?: { paymentId?: unknown } }).resource?.paymentId;
      if (typeof id === 'string') ids.push(id);
    } catch {
      // Not a job message (an admission step): nothing to match.
    }
  }
  return ids;
}

export function describePacing(mode: E2eResult['pacing'], ratePerMinute?: number): string {
  if (mode === 'off') return 'pacing off: the pipeline alone';
  if (mode === 'fixed') return `each job paced at ${ratePerMinute}/min, burst 1`;
  return 'pacing on, each job at its configured rate';
}

/** e.g. "interval scaled 60 s -> 24 s (x2.5), admission horizon 300 s -> 120 s, short wait 10000 ms -> 4000 ms". */
export function describeScale(p: JobPacing): string {
  const parts = [`interval scaled ${p.configuredIntervalSeconds} s -> ${p.runIntervalSeconds} s (x${+p.timeScale.toFixed(2)})`];
  if (p.horizonSeconds) parts.push(`admission horizon ${p.horizonSeconds.configured} s -> ${p.horizonSeconds.run} s`);
  parts.push(`short wait ${p.shortWaitMs.configured} ms -> ${p.shortWaitMs.run} ms`);
  if (p.batchingWindowSeconds) parts.push(`batching window ${p.batchingWindowSeconds.configured} s -> ${p.batchingWindowSeconds.run} s`);
  return parts.join(', ');
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
