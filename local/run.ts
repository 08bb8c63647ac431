// What `npm start` does: deploys the synthesized stack locally, then either runs one demo cycle of every job (seed,
// fire, wait until settled, report) or serves the stack with its schedules live until Ctrl-C.
import { MetricsTap } from './metricsTap';
import { createWriteStream, mkdirSync, renameSync, WriteStream, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, QueueAttributeName, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { ensureStack } from './assembly';
import { loadTemplate } from './template';
import { planStack, PlannedFunction, StackPlan } from './plan';
import { LocalStack, Ports } from './stack';
import { PaymentProvider } from './provider';
import { seedDemoData, SeedCounts, SeedResult } from './seed';
import { zonedDate } from './cron';
import { buildRunReport, formatReport, formatTable, JobObservation, RunReport } from './report';
import type { ObservedRequest } from './servers';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import type { SqsEventSourceMapping } from './eventSourceMapping';

export interface RunOptions {
  env: string;
  /** Project root (where cdk.json lives). */
  cwd: string;
  /** @default "cdk.out" */
  assemblyDir?: string;
  /** Where endpoints.json and logs/ go. @default ".local" */
  localDir?: string;
  /** Re-synthesize even when the assembly has the stack. */
  synth?: boolean;
  serve: boolean;
  /** Fire every schedule once at start (always true for a demo run). */
  now: boolean;
  /** Business date for the fired cycle; default: what the schedule would compute now. */
  date?: string;
  json: boolean;
  counts: SeedCounts;
  dataDir?: string;
  ports: Ports & { provider?: number };
  /** Give up waiting for the run to settle after this long. @default 180 */
  timeoutSeconds?: number;
  /** Print function logs to stderr as well as to .local/logs. @default false */
  verbose?: boolean;
  /** The local provider's quota; defaults to the payment job's configured (effective) rate and concurrency. */
  provider?: { startsPerWindow?: number; windowSeconds?: number; maxConcurrent?: number };
}

export interface RunIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  /** Resolves when the user asks to stop (Ctrl-C) in serve mode. */
  stopSignal: Promise<void>;
}

/** One job as deployed: its functions, queue, DLQ, mapping and schedule. */
export interface JobView {
  name: string;
  settings: JobRuntimeSettings;
  producer?: PlannedFunction;
  consumer?: PlannedFunction;
  queueUrl?: string;
  queueArn?: string;
  dlqUrl?: string;
  dlqArn?: string;
  scheduleName?: string;
  mapping?: SqsEventSourceMapping;
  /** The producer's admission queue and its mapping (admission steps, delayed until due). */
  admissionQueueUrl?: string;
  admissionMapping?: SqsEventSourceMapping;
}

export class RunError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'RunError';
  }
}

function jobSettingsOf(fn: PlannedFunction): JobRuntimeSettings | undefined {
  const raw = fn.environment.JOB_SETTINGS;
  if (!raw) return undefined;
  try {
    return JSON.parse(raw) as JobRuntimeSettings;
  } catch (error) {
    throw new RunError(`function ${fn.logicalId}: JOB_SETTINGS is not JSON`, { cause: error });
  }
}

/**
 * Groups the planned resources by job (functions carry JOB_NAME). The producer is the schedule's target, and its
 * mapping reads the admission queue; the consumer is the other function with a mapping, on the work queue.
 */
export function jobViews(plan: StackPlan, mappings: SqsEventSourceMapping[] = []): Map<string, JobView> {
  const jobs = new Map<string, JobView>();
  for (const fn of plan.functions) {
    const name = fn.environment.JOB_NAME;
    const settings = jobSettingsOf(fn);
    if (!name || !settings) continue;
    const view = jobs.get(name) ?? { name, settings };
    jobs.set(name, view);
    const mapping = plan.mappings.find((m) => m.functionName === fn.name);
    const isProducer = plan.schedules.some((s) => s.targetArn === fn.arn);
    if (mapping && isProducer) {
      view.admissionQueueUrl = plan.queues.find((q) => q.arn === mapping.eventSourceArn)?.url;
      view.admissionMapping = mappings.find((m) => m.config.functionName === fn.name);
    } else if (mapping) {
      view.consumer = fn;
      const queue = plan.queues.find((q) => q.arn === mapping.eventSourceArn);
      view.queueUrl = queue?.url;
      view.queueArn = queue?.arn;
      const dlq = plan.queues.find((q) => q.arn === queue?.deadLetterTargetArn);
      view.dlqUrl = dlq?.url;
      view.dlqArn = dlq?.arn;
      view.mapping = mappings.find((m) => m.config.functionName === fn.name);
    }
    const schedule = plan.schedules.find((s) => s.targetArn === fn.arn);
    if (schedule) {
      view.producer = fn;
      view.scheduleName = schedule.name;
    }
  }
  return jobs;
}

/** Downstream effects seen on the AWS-protocol servers: S3 deletes and DynamoDB deletes, with their times. */
class EffectRecorder {
  readonly s3Deletes: { at: number; bucket: string; key: string }[] = [];
  readonly itemDeletes: { at: number; table: string; key: Record<string, string> }[] = [];

  observe(service: 'dynamodb' | 'sqs' | 's3', r: ObservedRequest): void {
    // Only answered successes changed anything: a refused conditional delete (400) or a failed call is not an effect.
    if (r.status >= 300) return;
    if (service === 's3' && r.method === 'DELETE') {
      const [bucket, ...key] = decodeURIComponent(new URL(r.url, 'http://local').pathname).slice(1).split('/');
      if (key.length > 0) this.s3Deletes.push({ at: r.at, bucket, key: key.join('/') });
    }
    if (service === 'dynamodb' && String(r.headers['x-amz-target'] ?? '').endsWith('.DeleteItem')) {
      try {
        const body = JSON.parse(r.body) as { TableName: string; Key: Record<string, { S?: string; N?: string }> };
        this.itemDeletes.push({ at: r.at, table: body.TableName, key: Object.fromEntries(Object.entries(body.Key).map(([k, v]) => [k, v.S ?? v.N ?? ''])) });
      } catch {
        // A body that is not JSON is dynalite's to reject; it made no effect to count.
      }
    }
  }
}

/** The run's batches summed from the ledger; `throttled` is the consumer's own count of 429/503 answers. */
interface LedgerTotals extends Pick<JobObservation, 'discovered' | 'published' | 'completed' | 'rejected' | 'duplicates' | 'deferred' | 'throttled'> {
  batches: number;
  finished: number;
}

async function ledgerTotals(documents: DynamoDBDocumentClient, table: string | undefined, job: string, since: string): Promise<LedgerTotals> {
  const totals: LedgerTotals = { discovered: 0, published: 0, completed: 0, rejected: 0, duplicates: 0, deferred: 0, throttled: 0, batches: 0, finished: 0 };
  if (!table) return totals;
  let start: Record<string, unknown> | undefined;
  do {
    const page = await documents.send(
      new QueryCommand({ TableName: table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': `BATCH#${job}` }, ExclusiveStartKey: start }),
    );
    for (const item of page.Items ?? []) {
      // Only this run's batches: a kept --data-dir holds earlier ones.
      if (typeof item.startedAt === 'string' && item.startedAt < since) continue;
      totals.batches++;
      if (item.finishedAt) totals.finished++;
      for (const key of ['discovered', 'published', 'completed', 'rejected', 'duplicates', 'deferred', 'throttled'] as const) totals[key] += Number(item[key] ?? 0);
    }
    start = page.LastEvaluatedKey;
  } while (start);
  return totals;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runLocal(options: RunOptions, io: RunIo): Promise<number> {
  const started = Date.now();
  const sinceIso = new Date(started - 1000).toISOString();
  const say = (line: string) => io.stderr.write(`${line}\n`);
  const cwd = resolve(options.cwd);
  const localDir = resolve(cwd, options.localDir ?? '.local');
  const logDir = join(localDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const logFiles = new Map<string, WriteStream>();
  const metricsTap = new MetricsTap();
  const log = (source: string, line: string) => {
    let file = logFiles.get(source);
    if (!file) {
      file = createWriteStream(join(logDir, `${source.replace(/[^A-Za-z0-9_.-]/g, '_')}.log`), { flags: 'a' });
      logFiles.set(source, file);
    }
    file.write(`${new Date().toISOString()} ${line}\n`);
    metricsTap.observe(line);
    if (options.verbose || source === 'provision') say(`[${source}] ${line}`);
  };

  const artifact = ensureStack({ env: options.env, assemblyDir: options.assemblyDir ?? 'cdk.out', cwd, log: say, synth: options.synth });
  const template = loadTemplate(artifact.templateFile);
  // A first plan, before any server exists, to learn the jobs' settings (the provider's quota comes from them).
  const preview = jobViews(planStack(template, { stackName: artifact.stackName, region: 'us-east-1', accountId: '000000000000', sqsEndpoint: 'http://preview' }));
  const paymentJob = [...preview.values()].find((j) => j.settings.settings.providerBaseUrl !== undefined);

  const provider = paymentJob
    ? new PaymentProvider({
        startsPerWindow: options.provider?.startsPerWindow ?? paymentJob.settings.rateLimit.startsPerInterval,
        windowSeconds: options.provider?.windowSeconds ?? paymentJob.settings.rateLimit.intervalSeconds,
        maxConcurrent: options.provider?.maxConcurrent ?? paymentJob.settings.concurrency,
        port: options.ports.provider,
      })
    : undefined;
  const recorder = new EffectRecorder();
  const stack = new LocalStack({
    template,
    stackName: artifact.stackName,
    assemblyDir: artifact.assemblyDir,
    dataDir: options.dataDir ? resolve(cwd, options.dataDir) : undefined,
    ports: options.ports,
    log,
    onRequest: (service, r) => recorder.observe(service, r),
    environmentOverride: (_fn, env) => {
      // The template holds the real provider URL; locally every job that names one talks to the local provider.
      if (!provider || !env.JOB_SETTINGS) return env;
      const settings = JSON.parse(env.JOB_SETTINGS) as JobRuntimeSettings;
      if (settings.settings.providerBaseUrl === undefined) return env;
      settings.settings.providerBaseUrl = provider.endpoint;
      return { ...env, JOB_SETTINGS: JSON.stringify(settings) };
    },
  });

  let exitCode = 0;
  try {
    if (provider) await provider.start();
    await stack.start();
    say(`local stack ${artifact.stackName} is up: ${stack.plan.queues.length} queues, ${stack.plan.tables.length} tables, ${stack.plan.functions.length} functions, ${stack.plan.schedules.length} schedules (ignored: ${stack.plan.ignored.length} IAM/logging/monitoring resources)`);
    const warmStarted = Date.now();
    await stack.prewarm();
    say(`loaded the functions' code (${((Date.now() - warmStarted) / 1000).toFixed(1)} s)`);
    const jobs = jobViews(stack.plan, stack.mappings);
    if (provider && paymentJob) {
      for (const alias of Object.values(paymentJob.settings.secrets)) {
        const secret = stack.secrets.find(alias);
        if (secret) provider.allowApiKey(secret.value);
      }
    }
    const endpointsFile = writeEndpoints(localDir, stack, jobs, provider);
    if (options.serve) {
      say(`serving; endpoints in ${endpointsFile}. Ctrl-C to stop.`);
      if (options.now) await seedAndFire(stack, jobs, options, say);
      stack.startConsumers();
      stack.scheduler.start();
      for (const s of stack.scheduler.list()) say(`schedule ${s.schedule.name}: ${s.state}${s.nextFire ? `, next ${s.nextFire.toISOString()}` : ''}`);
      await io.stopSignal;
      say('stopping');
      return 0;
    }

    const { businessDate, seeded } = await seedAndFire(stack, jobs, options, say, () => stack.startConsumers());
    const settled = await waitUntilSettled(stack, jobs, provider, options, io, sinceIso);
    const report = await collectReport(stack, jobs, provider, recorder, seeded, metricsTap, { env: options.env, businessDate, settled, started, sinceIso, keptData: options.dataDir !== undefined });
    if (options.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else io.stdout.write(`${formatReport(report)}\n`);
    exitCode = report.ok ? 0 : 1;
  } finally {
    await stack.stop();
    await provider?.close();
    await Promise.all([...logFiles.values()].map((f) => new Promise((r) => f.end(r))));
  }
  return exitCode;
}

/** Seeds demo data and fires one cycle of every job; returns the business date used and what was seeded. */
async function seedAndFire(
  stack: LocalStack,
  jobs: Map<string, JobView>,
  options: RunOptions,
  say: (line: string) => void,
  beforeFire?: () => void,
): Promise<{ businessDate: string; seeded: SeedResult }> {
  const now = new Date();
  const dates = new Set([...jobs.values()].map((j) => options.date ?? zonedDate(now, j.settings.timeZone, j.settings.businessDateOffsetDays)));
  if (dates.size > 1) say(`note: jobs compute different default business dates (${[...dates].join(', ')}); demo data uses the first`);
  const businessDate = [...dates][0] ?? zonedDate(now, 'UTC', -1);
  const dynamodb = new DynamoDBClient(stack.clientConfig('dynamodb'));
  const s3 = new S3Client(stack.clientConfig('s3'));
  let seeded: SeedResult;
  try {
    seeded = await seedDemoData(
      { dynamodb, s3, businessDate, jobs: new Map([...jobs.values()].map((j) => [j.name, j.settings])) },
      options.counts,
    );
    say(`seeded business date ${businessDate}: ${seeded.paymentIds.length} payments, ${seeded.uploadKeys.length} uploads, ${options.counts.tenants} tenants (${seeded.expiredSessions.length} expired sessions)`);
  } finally {
    dynamodb.destroy();
    s3.destroy();
  }
  beforeFire?.();
  for (const job of jobs.values()) {
    if (!job.scheduleName) continue;
    const result = await stack.scheduler.fire(job.scheduleName, { scheduledTime: now, businessDate: options.date ?? businessDate });
    if (!result.delivered) throw new RunError(`schedule ${job.scheduleName} could not deliver to its producer: ${result.error}`);
    say(`fired ${job.scheduleName} for ${job.name}`);
  }
  return { businessDate: options.date ?? businessDate, seeded };
}

async function queueDepth(stack: LocalStack, url: string | undefined): Promise<{ visible: number; inFlight: number; delayed: number }> {
  if (!url) return { visible: 0, inFlight: 0, delayed: 0 };
  const a = await stack.sqs().send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'] }),
  );
  const n = (k: QueueAttributeName) => Number(a.Attributes?.[k] ?? 0);
  // local-aws-sqs counts in-flight messages in ApproximateNumberOfMessages too; visible = total - in flight.
  return { visible: Math.max(0, n('ApproximateNumberOfMessages') - n('ApproximateNumberOfMessagesNotVisible')), inFlight: n('ApproximateNumberOfMessagesNotVisible'), delayed: n('ApproximateNumberOfMessagesDelayed') };
}

async function waitUntilSettled(
  stack: LocalStack,
  jobs: Map<string, JobView>,
  provider: PaymentProvider | undefined,
  options: RunOptions,
  io: RunIo,
  sinceIso: string,
): Promise<boolean> {
  const deadline = Date.now() + (options.timeoutSeconds ?? 180) * 1000;
  // Ctrl-C during a demo run stops waiting; the report then says the run did not settle.
  let interrupted = false;
  void io.stopSignal.then(() => (interrupted = true));
  const documents = DynamoDBDocumentClient.from(new DynamoDBClient(stack.clientConfig('dynamodb')));
  const tty = io.stderr.isTTY === true && !options.verbose;
  let printedLines = 0;
  let lastPlain = 0;
  let quietChecks = 0;
  try {
    while (Date.now() < deadline && !interrupted) {
      await sleep(500);
      const rows: (string | number)[][] = [];
      let busy = !stack.runtime.isIdle() || stack.scheduler.pending > 0;
      for (const job of jobs.values()) {
        const [depth, dlq, ledger, steps] = await Promise.all([
          queueDepth(stack, job.queueUrl),
          queueDepth(stack, job.dlqUrl),
          ledgerTotals(documents, job.consumer?.environment.LEDGER_TABLE_NAME ?? job.producer?.environment.LEDGER_TABLE_NAME, job.name, sinceIso),
          queueDepth(stack, job.admissionQueueUrl),
        ]);
        // A run still admitting has its next step waiting in the admission queue, or the work queue is not yet empty.
        if (depth.visible + depth.inFlight + depth.delayed > 0 || steps.visible + steps.inFlight + steps.delayed > 0) busy = true;
        if (ledger.batches > ledger.finished) busy = true;
        if (job.producer && ledger.batches === 0) busy = true;
        const stats = job.mapping?.statistics;
        const oldest = stats?.oldestSentTimestamp && depth.visible + depth.inFlight > 0 ? `${Math.round((Date.now() - stats.oldestSentTimestamp) / 1000)}s` : '-';
        rows.push([
          job.name,
          ledger.discovered,
          ledger.published,
          depth.inFlight,
          ledger.completed,
          ledger.duplicates,
          stats?.failed ?? 0,
          job.settings.settings.providerBaseUrl !== undefined ? (provider?.throttled ?? 0) : '-',
          ledger.deferred,
          ledger.rejected,
          dlq.visible + dlq.inFlight + dlq.delayed,
          oldest,
        ]);
      }
      const table = formatTable(['job', 'discovered', 'published', 'in flight', 'completed', 'duplicates', 'retries', '429s', 'deferred', 'rejected', 'dlq', 'oldest'], rows);
      if (tty) {
        if (printedLines > 0) io.stderr.write(`\x1b[${printedLines}A\x1b[J`);
        io.stderr.write(`${table}\n`);
        printedLines = table.split('\n').length;
      } else if (Date.now() - lastPlain >= 5000) {
        lastPlain = Date.now();
        for (const r of rows) io.stderr.write(`progress ${r[0]}: discovered ${r[1]} published ${r[2]} in-flight ${r[3]} completed ${r[4]} duplicates ${r[5]} retries ${r[6]} 429s ${r[7]} deferred ${r[8]} rejected ${r[9]} dlq ${r[10]} oldest ${r[11]}\n`);
      }
      // Settled: nothing queued, in flight, delayed or running, twice in a row (a producer continuation or a
      // deferral re-publish may land between two looks).
      quietChecks = busy ? 0 : quietChecks + 1;
      if (quietChecks >= 2) return true;
    }
    return false;
  } finally {
    documents.destroy();
  }
}

async function collectReport(
  stack: LocalStack,
  jobs: Map<string, JobView>,
  provider: PaymentProvider | undefined,
  recorder: EffectRecorder,
  seeded: SeedResult,
  metricsTap: MetricsTap,
  run: { env: string; businessDate: string; settled: boolean; started: number; sinceIso: string; keptData: boolean },
): Promise<RunReport> {
  const documents = DynamoDBDocumentClient.from(new DynamoDBClient(stack.clientConfig('dynamodb')));
  const observations = new Map<string, JobObservation>();
  try {
    for (const job of jobs.values()) {
      const ledger = await ledgerTotals(documents, job.consumer?.environment.LEDGER_TABLE_NAME ?? job.producer?.environment.LEDGER_TABLE_NAME, job.name, run.sinceIso);
      const dlq = await queueDepth(stack, job.dlqUrl);
      const dlqCount = dlq.visible + dlq.inFlight + dlq.delayed;
      const { effectsByOperation, effectsByItem, starts, throttled, unexpectedEffects } = downstreamOf(job, provider, recorder, seeded, ledger.throttled);
      observations.set(job.name, {
        ...ledger,
        dlq: dlqCount,
        dlqReasons: dlqCount > 0 ? await dlqReasons(stack, job.dlqUrl) : [],
        effectsByOperation,
        effectsByItem,
        unexpectedEffects,
        starts,
        throttled,
        rateLimit: job.settings.rateLimit,
        maxJobAgeMs: metricsTap.maxJobAgeMs(job.name),
        keptData: run.keptData,
      });
    }
  } finally {
    documents.destroy();
  }
  return buildRunReport({ env: run.env, businessDate: run.businessDate, settled: run.settled, durationMs: Date.now() - run.started, jobs: observations });
}

/** Why the dead-lettered messages failed (a look at up to 10; the run is over, so a receive changes nothing that matters). */
async function dlqReasons(stack: LocalStack, url: string | undefined): Promise<string[]> {
  if (!url) return [];
  const got = await stack.sqs().send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, MessageAttributeNames: ['failureReason'] }));
  return (got.Messages ?? []).map((m) => m.MessageAttributes?.failureReason?.StringValue ?? 'no failureReason: moved by SQS after maxReceiveCount receives');
}

const count = (keys: string[]): Map<string, number> => {
  const m = new Map<string, number>();
  for (const k of keys) m.set(k, (m.get(k) ?? 0) + 1);
  return m;
};

/**
 * Where each job's effects land and how they are counted: the provider's settlements (payments), S3 object deletes
 * in the job's buckets (uploads), and item deletes in the job's writable tables other than the ones it reads for
 * discovery (sessions; one operation per tenant, each session deleted once). A start is the downstream's first sight
 * of an operation attempt: every provider request, every object delete, a tenant's first session delete.
 */
function downstreamOf(
  job: JobView,
  provider: PaymentProvider | undefined,
  recorder: EffectRecorder,
  seeded: SeedResult,
  /** The consumer's count of throttles, for downstreams (AWS itself) whose answers the runtime does not see. */
  consumerThrottles: number,
): Pick<JobObservation, 'effectsByOperation' | 'effectsByItem' | 'starts' | 'throttled' | 'unexpectedEffects'> {
  if (job.settings.settings.providerBaseUrl !== undefined && provider) {
    const effects = provider.effectsByPayment();
    const expected = new Set(seeded.paymentIds);
    return {
      effectsByOperation: effects,
      starts: provider.arrivals.map((a) => a.at),
      throttled: provider.throttled,
      unexpectedEffects: [...effects.keys()].filter((id) => !expected.has(id)),
    };
  }
  const buckets = new Set(Object.values(job.settings.buckets));
  if (buckets.size > 0) {
    const deletes = recorder.s3Deletes.filter((d) => buckets.has(d.bucket));
    const expected = new Set(seeded.uploadKeys);
    return {
      effectsByOperation: count(deletes.map((d) => `${d.bucket}/${d.key}`)),
      starts: deletes.map((d) => d.at),
      throttled: consumerThrottles,
      unexpectedEffects: deletes.filter((d) => !expected.has(d.key)).map((d) => `${d.bucket}/${d.key}`),
    };
  }
  const tables = new Set(Object.values(job.settings.tables));
  const deletes = recorder.itemDeletes.filter((d) => tables.has(d.table));
  const expired = new Set(seeded.expiredSessions);
  const firstByOperation = new Map<string, number>();
  for (const d of deletes) {
    const operation = d.key.tenantId ?? Object.values(d.key)[0];
    if (!firstByOperation.has(operation)) firstByOperation.set(operation, d.at);
  }
  return {
    effectsByOperation: new Map([...firstByOperation.keys()].map((k) => [k, 1])),
    effectsByItem: count(deletes.map((d) => `${d.table}/${Object.values(d.key).join('/')}`)),
    starts: [...firstByOperation.values()],
    throttled: consumerThrottles,
    // Only sessions seeded as expired may go; an active one deleted is a wrong effect, however many times.
    unexpectedEffects: deletes.filter((d) => !expired.has(`${d.key.tenantId}/${d.key.sessionId}`)).map((d) => `${d.table}/${Object.values(d.key).join('/')}`),
  };
}

/** `.local/endpoints.json`: everything a client (the AWS CLI, the ops CLI, a script) needs to use the local stack. */
function writeEndpoints(localDir: string, stack: LocalStack, jobs: Map<string, JobView>, provider?: PaymentProvider): string {
  const file = join(localDir, 'endpoints.json');
  const doc = {
    stackName: stack.plan.stackName,
    region: stack.region,
    accountId: stack.plan.accountId,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    endpoints: {
      dynamodb: stack.endpoints.dynamodb,
      sqs: stack.endpoints.sqs,
      s3: stack.endpoints.s3,
      secretsmanager: stack.endpoints.secretsManager,
      lambda: stack.endpoints.lambda,
      scheduler: stack.endpoints.scheduler,
      ...(provider ? { provider: provider.endpoint } : {}),
    },
    queues: Object.fromEntries(stack.plan.queues.map((q) => [q.logicalId, { name: q.name, url: q.url, arn: q.arn, deadLetterTargetArn: q.deadLetterTargetArn, maxReceiveCount: q.maxReceiveCount }])),
    tables: Object.fromEntries(stack.plan.tables.map((t) => [t.logicalId, t.name])),
    buckets: Object.fromEntries(stack.plan.buckets.map((b) => [b.logicalId, b.name])),
    secrets: Object.fromEntries(stack.plan.secrets.map((s) => [s.logicalId, { name: s.name, arn: s.arn }])),
    functions: Object.fromEntries(stack.plan.functions.map((f) => [f.logicalId, { name: f.name, arn: f.arn }])),
    schedules: Object.fromEntries(stack.plan.schedules.map((s) => [s.logicalId, { name: s.name, arn: s.arn, expression: s.expression, timeZone: s.timeZone }])),
    eventSourceMappings: Object.fromEntries(stack.mappings.map((m) => [m.uuid, { functionName: m.config.functionName, queueArn: m.config.queueArn }])),
    jobs: Object.fromEntries(
      [...jobs.values()].map((j) => [
        j.name,
        {
          producer: j.producer?.name,
          consumer: j.consumer?.name,
          queueUrl: j.queueUrl,
          queueArn: j.queueArn,
          dlqUrl: j.dlqUrl,
          dlqArn: j.dlqArn,
          schedule: j.scheduleName,
          eventSourceMapping: j.mapping?.uuid,
          admissionQueueUrl: j.admissionQueueUrl,
          admissionMapping: j.admissionMapping?.uuid,
        },
      ]),
    ),
    outputs: stack.plan.outputs,
    environment: {
      AWS_REGION: stack.region,
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      AWS_ENDPOINT_URL_DYNAMODB: stack.endpoints.dynamodb,
      AWS_ENDPOINT_URL_SQS: stack.endpoints.sqs,
      AWS_ENDPOINT_URL_S3: stack.endpoints.s3,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: stack.endpoints.secretsManager,
      AWS_ENDPOINT_URL_LAMBDA: stack.endpoints.lambda,
      AWS_ENDPOINT_URL_SCHEDULER: stack.endpoints.scheduler,
    },
  };
  mkdirSync(localDir, { recursive: true });
  // Written whole then renamed, so a client polling for the file never reads half of it.
  writeFileSync(`${file}.tmp`, `${JSON.stringify(doc, null, 2)}\n`);
  renameSync(`${file}.tmp`, file);
  return file;
}
