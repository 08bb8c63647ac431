// One local session: the synthesized stack deployed on the local AWS-protocol servers, every job with its fixture and
// fake downstream, and the questions the local tools ask of it (seed, fire, how deep is a queue, what does the ledger
// say, has the run settled, what did the job do), and the metrics CloudWatch would hold of it, served on a local
// CloudWatch API. `npm start` (local/run.ts), `npm run chaos` (chaos/run.ts) and `npm run bench` (bench/e2e.ts) all
// run on it, so a behaviour of the local stack lives here once. It names no job.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { relative, resolve } from 'node:path';
import { appEnv, ensureAppStack, type StackArtifact } from './assembly';
import { zonedDate } from '../lambda/core/cron';
import {
  fixturePath,
  loadFixture,
  type DownstreamArrival,
  type DownstreamEffect,
  type DownstreamOptions,
  type EffectReading,
  type FakeDownstream,
  type JobFixture,
  type ObservedWrite,
  type SeededDemo,
} from './fixture';
import { PipelineLog } from './pipelineEffects';
import type { PlannedFunction } from './plan';
import { LocalStack, type LocalStackOptions, type Ports } from './stack';
import { loadTemplate, type CloudFormationTemplate } from './template';
import { jobViews, previewPlan, type JobView } from './jobs';
import { objectRequestOf, type ObservedRequest, type RunningServer } from './servers';
import { MetricRecorder } from './metricSamples';
import type { MetricSample } from './metricsTap';
import { startCloudWatchApi } from './cloudWatchApi';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import { batchIdOf, LedgerItemKind, ledgerPartition, type BatchFigures } from '../lambda/core/ledgerContract';
import { QUEUE_DEPTH_ATTRIBUTES, queueDepthOf, type QueueDepthFigures } from '../lambda/core/queueDepth';
import { batchFigures, type LedgerTables } from './ledgerFigures';
import type { DenialSummary, FunctionErrorSummary } from './report';

export class SessionError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SessionError';
  }
}

export interface SessionOptions {
  /** The CDK app's folder (cdk.json; each job's entry and its local.ts are relative to it). */
  cwd: string;
  /**
   * The environment synthesized (`-c env=<env>`) and its stack `PacedJobs-<env>`.
   * @default "dev" in this repository, none in a team's app
   */
  env?: string;
  /** The stack holding the jobs, where several do. @default the one stack with jobs */
  stack?: string;
  /** @default "cdk.out" */
  assemblyDir?: string;
  /** Re-synthesize even when the assembly has the stack. */
  synth?: boolean;
  /** Changes the template before anything is planned (the chaos harness retimes it, the bench caps concurrency). */
  template?: (template: CloudFormationTemplate) => CloudFormationTemplate;
  /** Changes a job's JOB_SETTINGS for the run (the bench scales rates); the producer and consumer get the same. */
  jobSettings?: (settings: JobRuntimeSettings) => JobRuntimeSettings;
  /** Options of each job's fake downstream (quota, latency, port); undefined: the fixture's defaults. */
  downstream?: (job: string, settings: JobRuntimeSettings) => DownstreamOptions | undefined;
  /** A function's environment after the session's own changes (e.g. a DynamoDB fault or counting proxy). */
  environment?: (fn: PlannedFunction, env: Record<string, string>) => Record<string, string>;
  dataDir?: string;
  ports?: Ports;
  /** Function output and runtime notes, by source. */
  log: (source: string, line: string) => void;
  /** Sees every request the local DynamoDB, SQS and S3 servers receive, after the session has. */
  onRequest?: LocalStackOptions['onRequest'];
  /** DynamoDB answers every read and write with its ConsumedCapacity (see LocalStackOptions). @default false */
  returnConsumedCapacity?: boolean;
  onInvoke?: LocalStackOptions['onInvoke'];
  killAfterMs?: LocalStackOptions['killAfterMs'];
  asyncRetryDelaysMs?: number[];
  /** Enforce IAM from the template (false: `--no-iam`). @default true */
  iam?: boolean;
  /** The share of asynchronous events delivered twice. @default LocalStack's */
  asyncDuplicateRate?: number;
  /**
   * Warm execution environments before the run: true, each function's concurrency; a number, at most that many per
   * function (a test firing a few records needs no more, and each is a Node process); false, none. @default true
   */
  prewarm?: boolean | number;
  /** The metrics the session records and serves on its local CloudWatch (`session.metrics`). */
  metrics?: SessionMetricsOptions;
}

/**
 * How the session records its metrics. A `--serve` session runs for hours: what it keeps is bounded by the retention
 * (CloudWatch keeps data under a minute's resolution for 3 hours too) and, for a burst, by a ceiling on the count.
 */
export interface SessionMetricsOptions {
  /** Samples older than this are dropped. @default 10_800_000 (3 hours) */
  retentionMs?: number;
  /** At most this many samples are kept (about 100 bytes each), the oldest dropped first. @default 1_000_000 */
  maxSamples?: number;
  /** Between two depth samples of every queue. @default 1000 */
  pollIntervalMs?: number;
  /** The local CloudWatch API's port. @default 0 (a free port) */
  port?: number;
}

/** The defaults of SessionMetricsOptions, in one place. */
export const SESSION_METRICS_DEFAULTS = {
  retentionMs: 3 * 60 * 60_000,
  maxSamples: 1_000_000,
  pollIntervalMs: 1000,
} as const;

/**
 * What CloudWatch would hold of the session: every function's EMF metrics (off its log lines) and the AWS/SQS depth of
 * every queue of the stack (sampled), served by GetMetricData and ListMetrics on `endpoint` (local/cloudWatchApi.ts), and
 * readable in process with `samples()`.
 */
export interface SessionMetrics {
  /** The local CloudWatch API, e.g. http://127.0.0.1:43123 (endpoints.json `endpoints.cloudwatch`). */
  readonly endpoint: string;
  /** Every sample kept, in arrival order (the live list: copy it to keep it). @throws MetricRecorderError after a failed depth poll */
  samples(): readonly MetricSample[];
  /** Samples every queue's depth now (between two polls: e.g. a run's last moment). */
  pollQueues(): Promise<void>;
  /** How many samples the retention and the ceiling have dropped. */
  readonly dropped: number;
}

/** A job as deployed locally, with its fixture (if it has one) and the fake downstream the fixture offers. */
export interface SessionJob extends JobView {
  fixture?: JobFixture;
  /** Where the job's fixture is, or would be, relative to the app: beside its entry, or lambda/jobs/<name>/local.ts. */
  fixtureFile: string;
  downstream?: FakeDownstream;
}

/** A queue's depth (lambda/core/queueDepth.ts). */
export type QueueDepth = QueueDepthFigures;

/** One run's batches summed from the ledger. */
export interface LedgerTotals {
  discovered: number;
  published: number;
  completed: number;
  completedElsewhere: number;
  rejected: number;
  duplicates: number;
  deferred: number;
  throttled: number;
  deadLettered: number;
  batches: number;
  finished: number;
  /** Batches whose admission has not completed. */
  admitting: number;
}

export interface DlqMessage {
  messageId: string;
  body: string;
  /** The consumer's message attributes (failureReason, operationId, ...); none when SQS moved it after maxReceiveCount. */
  attributes: Record<string, string>;
}

/** The job's effects, and whose counts they are. */
export interface JobEffects extends EffectReading {
  /**
   * `fixture`: the downstream's own effects, as the job's fixture sees them. `pipeline`: the pipeline's own record
   * (completed idempotency records and the consumer's logs), for a job without a fixture.
   */
  source: 'fixture' | 'pipeline';
}

export interface SettleOptions {
  /** Epoch ms to give up at. */
  deadline: number;
  /** Only these jobs. @default every job */
  jobs?: string[];
  /** Only ledger batches started since (ISO). @default the session's start */
  since?: string;
  /** Called on every poll with each job's state (progress displays). */
  onPoll?: (state: Map<string, JobState>) => void | Promise<void>;
  /** Something else still pending (e.g. injected sends); the run has not settled while it returns true. */
  pending?: () => boolean;
  /** Stops waiting early (Ctrl-C). */
  interrupted?: () => boolean;
  /** Between polls. @default 500 */
  intervalMs?: number;
}

export interface JobState {
  queue: QueueDepth;
  dlq: QueueDepth;
  admissionQueue: QueueDepth;
  ledger: LedgerTotals;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const EMPTY_DEPTH: QueueDepth = { visible: 0, inFlight: 0, delayed: 0, total: 0 };
/** Set on the session's own SQS client, so a caller counting requests on the wire can leave the session's out. */
export const SESSION_USER_AGENT = 'paced-jobs-local-session';

export class LocalSession {
  readonly writes: ObservedWrite[] = [];
  /** The consumers' own record of their applies, kept for the consumers in `logWatched`. */
  readonly pipelineLog = new PipelineLog();
  /** Consumers whose log lines feed `pipelineLog`: those of jobs without a fixture, and any `watchApplies` names. */
  private readonly logWatched = new Set<string>();
  readonly startedAt = new Date();
  readonly jobs = new Map<string, SessionJob>();
  private readonly clients: {
    dynamodb: DynamoDBClient;
    documents: DynamoDBDocumentClient;
    s3: S3Client;
    sqs: SQSClient;
  };
  /** Fed every function's log lines from the start; its queue polls start with the CloudWatch API (serveMetrics). */
  private readonly recorder: MetricRecorder;
  private cloudWatch: RunningServer | undefined;

  private constructor(
    readonly stack: LocalStack,
    readonly artifact: StackArtifact,
    readonly template: CloudFormationTemplate,
    private readonly downstreams: FakeDownstream[],
    private readonly log: SessionOptions['log'],
    metrics: SessionMetricsOptions,
  ) {
    const dynamodb = new DynamoDBClient(stack.clientConfig('dynamodb'));
    this.clients = {
      dynamodb,
      documents: DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } }),
      s3: new S3Client(stack.clientConfig('s3')),
      sqs: new SQSClient({ ...stack.clientConfig('sqs'), customUserAgent: SESSION_USER_AGENT }),
    };
    // Every queue of the stack, as CloudWatch has AWS/SQS metrics for every queue: the jobs' work queues and DLQs, the
    // producers' admission queues and their DLQs, the schedules' DLQs. The polls carry the session's user agent, so a
    // caller counting requests on the wire leaves them out as it does the session's other reads.
    this.recorder = new MetricRecorder({
      sqs: this.clients.sqs,
      queues: stack.plan.queues.map((q) => ({ url: q.url, queueName: q.name })),
      pollIntervalMs: metrics.pollIntervalMs ?? SESSION_METRICS_DEFAULTS.pollIntervalMs,
      retentionMs: metrics.retentionMs ?? SESSION_METRICS_DEFAULTS.retentionMs,
      maxSamples: metrics.maxSamples ?? SESSION_METRICS_DEFAULTS.maxSamples,
    });
  }

  /** The session's metrics and its local CloudWatch endpoint. */
  get metrics(): SessionMetrics {
    const server = this.cloudWatch;
    if (!server)
      throw new SessionError(
        "the session's local CloudWatch is not serving (the session is closed, or did not finish opening)",
      );
    const recorder = this.recorder;
    return {
      endpoint: server.endpoint,
      samples: () => recorder.samples(),
      pollQueues: () => recorder.pollOnce(),
      get dropped() {
        return recorder.dropped;
      },
    };
  }

  /**
   * Synthesizes (if needed) and deploys the stack locally: plans it, loads each job's fixture, starts the fake
   * downstreams and the local servers, points the jobs at their downstreams, and warms the functions.
   */
  static async open(options: SessionOptions): Promise<LocalSession> {
    const cwd = resolve(options.cwd);
    const { artifact, template } = appTemplate(cwd, options);
    // A first plan before any server exists: each job's settings decide its fixture's downstream (quota, secrets).
    const { runSettings, fixtures, downstreams } = loadJobFixtures(
      cwd,
      jobViews(previewPlan(template, artifact.stackName)),
      options,
    );
    let session: LocalSession | undefined;
    const stack = new LocalStack({
      ...stackDeployment(cwd, artifact, template, options),
      ...LocalSession.stackObservers(options, () => session),
      environmentOverride: (fn, vars) => {
        const next = vars.JOB_SETTINGS
          ? { ...vars, JOB_SETTINGS: runJobSettings(vars.JOB_SETTINGS, runSettings, downstreams) }
          : vars;
        return options.environment ? options.environment(fn, next) : next;
      },
    });
    await startAll(stack, downstreams.values());
    session = new LocalSession(
      stack,
      artifact,
      template,
      [...downstreams.values()],
      options.log,
      options.metrics ?? {},
    );
    try {
      await session.serveMetrics(options.metrics?.port ?? 0);
    } catch (error) {
      await session.close().catch(() => undefined);
      throw error;
    }
    for (const view of jobViews(stack.plan, stack.mappings).values()) {
      session.addJob(
        cwd,
        view,
        runSettings.get(view.name) ?? view.settings,
        fixtures.get(view.name),
        downstreams.get(view.name),
      );
    }
    if (options.prewarm !== false)
      await stack.prewarm(options.prewarm === true || options.prewarm === undefined ? undefined : options.prewarm);
    return session;
  }

  /**
   * What the stack tells the session once it is open (`session` is undefined until then): every log line, the metrics
   * the emulated services publish, and the writes the servers see; the lines and requests go on to the caller's too.
   */
  private static stackObservers(
    options: SessionOptions,
    sessionOf: () => LocalSession | undefined,
  ): Pick<LocalStackOptions, 'log' | 'onMetric' | 'onRequest'> {
    return {
      log: (source, line) => {
        const session = sessionOf();
        // Parsed only for the consumers that need it: the main thread also runs the servers and the event sources.
        if (session?.logWatched.has(source)) session.pipelineLog.observe(source, line);
        // Every line, as CloudWatch reads every log line for EMF (a line without "_aws" costs one substring search).
        session?.recorder.observe(line);
        options.log(source, line);
      },
      onMetric: (sample) => sessionOf()?.recorder.record(sample),
      onRequest: (service, r) => {
        const write = observedWrite(service, r);
        if (write) sessionOf()?.writes.push(write);
        options.onRequest?.(service, r);
      },
    };
  }

  /**
   * A planned job joins the session with its settings as its functions see them (scaled, pointed at the downstream):
   * what a fixture seeds against. The downstream may see the job's secrets, as the real API would.
   */
  private addJob(
    cwd: string,
    view: JobView,
    runSettings: JobRuntimeSettings,
    fixture: JobFixture | undefined,
    downstream?: FakeDownstream,
  ): void {
    let settings = runSettings;
    if (downstream) {
      settings = downstream.configure(settings);
      for (const alias of Object.values(view.settings.secrets)) {
        const secret = this.stack.secrets.find(alias);
        if (secret) downstream.allowSecret(secret.value);
      }
    }
    const fixtureFile = relative(cwd, fixturePath(cwd, view.name, view.entry));
    this.jobs.set(view.name, { ...view, settings, fixture, fixtureFile, downstream });
    if (!fixture) this.watchApplies(view.name);
  }

  /**
   * The requests of a job that IAM denied (or, with --no-iam, would have): its functions' own, and those AWS makes for
   * it with its roles (the event sources with the functions' roles, Scheduler with the schedule's), by action,
   * resource and role.
   */
  denials(name: string): DenialSummary[] {
    const job = this.job(name);
    const callers = new Set(
      [job.producer?.name, job.consumer?.name, job.scheduleName].filter((c): c is string => c !== undefined),
    );
    const scheduleRole = this.stack.plan.schedules.find((s) => s.name === job.scheduleName)?.roleArn;
    const roles = new Set(
      [job.producer?.roleArn, job.consumer?.roleArn, scheduleRole].filter((r): r is string => r !== undefined),
    );
    const byKind = new Map<string, DenialSummary>();
    for (const d of this.stack.denials()) {
      // A role session's request, or a service refused the job's role (Scheduler assuming the schedule's role).
      const mine = callers.has(d.sessionName ?? '') || (d.action === 'sts:AssumeRole' && roles.has(d.resource));
      if (!mine) continue;
      const key = `${d.action} ${d.resource} ${d.roleArn} ${d.sessionName}`;
      const known = byKind.get(key);
      if (known) known.count++;
      else
        byKind.set(key, {
          action: d.action,
          resource: d.resource,
          role: d.roleArn ?? d.resource,
          caller: d.sessionName ?? d.principalArn,
          count: 1,
          message: d.message,
        });
    }
    return [...byKind.values()];
  }

  /** The errors a job's functions raised (init failures, handler errors, timeouts, crashes), by kind. */
  functionErrors(name: string): FunctionErrorSummary[] {
    const job = this.job(name);
    return [job.producer, job.consumer]
      .filter((f): f is PlannedFunction => f !== undefined)
      .flatMap((f) =>
        this.stack.runtime
          .get(f.name)
          .errorSummary()
          .map((e) => ({ functionName: f.name, ...e })),
      );
  }

  /**
   * What makes this session differ from AWS, and what Lambda did that AWS rarely does, for every report: IAM off, AWS
   * managed policies, a function on another Node major, asynchronous events delivered twice.
   */
  warnings(): string[] {
    const warnings: string[] = [];
    if (!this.stack.iam.enforced)
      warnings.push(
        'IAM is not enforced (--no-iam): a request the template does not allow passes here and fails on AWS; denials listed are what AWS would refuse',
      );
    for (const role of this.stack.plan.iam.roles.filter((r) => r.externalManagedPolicyArns.length > 0)) {
      warnings.push(
        `${role.name} attaches ${role.externalManagedPolicyArns.join(', ')}: AWS managed policies are not known locally, so they grant nothing here`,
      );
    }
    for (const n of this.stack.runtime.nodeReport()) {
      if (!n.exact)
        warnings.push(
          `${n.functionName}: the template asks for ${n.wanted}, which is not available here; it runs on Node ${n.running}${n.note ? ` (${n.note})` : ''}`,
        );
    }
    const duplicates = this.stack.runtime.duplicateAsyncDeliveries;
    if (duplicates > 0)
      warnings.push(
        `Lambda delivered ${duplicates} asynchronous event(s) twice, as its at-least-once queue may on AWS`,
      );
    return warnings;
  }

  /** Also keeps the job's apply starts from its consumer's logs (`pipelineLog.startsByOperation`). */
  watchApplies(name: string): void {
    const consumer = this.job(name).consumer?.name;
    if (consumer) this.logWatched.add(consumer);
  }

  /** The job by name; an unknown name is an error listing the stack's jobs. */
  job(name: string): SessionJob {
    const job = this.jobs.get(name);
    if (!job)
      throw new SessionError(`the stack has no job "${name}" (jobs: ${[...this.jobs.keys()].join(', ') || 'none'})`);
    return job;
  }

  /** The business date a job's schedule would compute at `now`. */
  businessDateFor(name: string, now = new Date()): string {
    const { settings } = this.job(name);
    return zonedDate(now, settings.timeZone, settings.businessDateOffsetDays);
  }

  /** SQS client for the local server (the session's own user agent). */
  sqs(): SQSClient {
    return this.clients.sqs;
  }

  documents(): DynamoDBDocumentClient {
    return this.clients.documents;
  }

  /**
   * Seeds `count` demo records of the job through its fixture. A job without a fixture seeds nothing (it discovers
   * whatever its own resources hold) and says so.
   */
  async seed(name: string, count: number, businessDate: string): Promise<SeededDemo> {
    const job = this.job(name);
    if (!job.fixture) return { expectedOperations: [], summary: `no fixture (${job.fixtureFile}): nothing seeded` };
    if (count <= 0) return { expectedOperations: [], summary: `0 ${job.fixture.unit}` };
    return job.fixture.seed(
      {
        jobName: name,
        settings: job.settings,
        businessDate,
        dynamodb: this.clients.dynamodb,
        documents: this.clients.documents,
        s3: this.clients.s3,
      },
      count,
    );
  }

  /** Fires the job's schedule once, as EventBridge Scheduler would at `scheduledTime`. */
  async fire(name: string, input: { scheduledTime: Date; businessDate?: string }): Promise<void> {
    const job = this.job(name);
    if (!job.scheduleName) throw new SessionError(`job ${name} has no schedule to fire`);
    const result = await this.stack.scheduler.fire(job.scheduleName, input);
    if (!result.delivered)
      throw new SessionError(`schedule ${job.scheduleName} could not deliver to its producer: ${result.error}`);
  }

  /** Starts every event source mapping (work queues and admission queues). */
  startConsumers(): void {
    this.stack.startConsumers();
  }

  /** A queue's depth, as AWS reports it (local/servers.ts makes local-aws-sqs count a message in flight once). */
  async depth(url: string | undefined): Promise<QueueDepth> {
    if (!url) return EMPTY_DEPTH;
    const { Attributes } = await this.clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: [...QUEUE_DEPTH_ATTRIBUTES] }),
    );
    return queueDepthOf(Attributes);
  }

  /** The job's run-ledger items of one kind (`BATCH`, `REJECTED`: lambda/core/ledgerContract.ts). */
  async ledgerItems(name: string, kind: LedgerItemKind = LedgerItemKind.batch): Promise<Record<string, unknown>[]> {
    const table = this.ledgerTable(name);
    if (!table) return [];
    const items: Record<string, unknown>[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.clients.documents.send(
        new QueryCommand({
          TableName: table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': ledgerPartition(kind, name) },
          ExclusiveStartKey: start,
          ConsistentRead: true,
        }),
      );
      items.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start);
    return items;
  }

  /**
   * The job's batches started since `since` (ISO; a kept data directory holds earlier ones; undefined: every batch),
   * each item with its exact figures, read as the operator CLI reads them (ops/ledger.ts batchFigures).
   */
  async ledgerBatches(
    name: string,
    since: string | undefined = this.sinceIso(),
  ): Promise<{ batchId: string; item: Record<string, unknown>; figures: BatchFigures }[]> {
    const tables = this.stateTables(name);
    const items = (await this.ledgerItems(name)).filter(
      (item) => since === undefined || typeof item.startedAt !== 'string' || item.startedAt >= since,
    );
    return Promise.all(
      items.map(async (item) => ({
        batchId: batchIdOf(item),
        item,
        figures: await batchFigures(this.clients.documents, tables, name, item),
      })),
    );
  }

  /** The job's batches started since `since` (ISO; a kept data directory holds earlier ones), summed. */
  async ledgerTotals(name: string, since = this.sinceIso()): Promise<LedgerTotals> {
    const totals: LedgerTotals = {
      discovered: 0,
      published: 0,
      completed: 0,
      completedElsewhere: 0,
      rejected: 0,
      duplicates: 0,
      deferred: 0,
      throttled: 0,
      deadLettered: 0,
      batches: 0,
      finished: 0,
      admitting: 0,
    };
    for (const { item, figures } of await this.ledgerBatches(name, since)) {
      totals.batches++;
      if (item.finishedAt) totals.finished++;
      if (item.admission === 'admitting') totals.admitting++;
      for (const key of [
        'discovered',
        'published',
        'completed',
        'completedElsewhere',
        'rejected',
        'duplicates',
        'deferred',
        'throttled',
        'deadLettered',
      ] as const)
        totals[key] += figures[key];
    }
    return totals;
  }

  /**
   * Reads every message of a queue (a DLQ, after the run), each hidden for `hideSeconds` so a page never repeats one,
   * deduplicated by ID. A receive raises the receive count: only for queues the run is done with.
   */
  async readQueue(url: string | undefined, hideSeconds = 60, max = Number.POSITIVE_INFINITY): Promise<DlqMessage[]> {
    if (!url) return [];
    const seen = new Map<string, DlqMessage>();
    for (let empty = 0; empty < 2 && seen.size < max; ) {
      const page = await this.clients.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
          VisibilityTimeout: hideSeconds,
          MessageAttributeNames: ['All'],
        }),
      );
      const fresh = (page.Messages ?? []).filter((m) => !seen.has(m.MessageId!));
      for (const m of fresh) {
        seen.set(m.MessageId!, {
          messageId: m.MessageId!,
          body: m.Body ?? '',
          attributes: Object.fromEntries(
            Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue ?? '']),
          ),
        });
      }
      empty = fresh.length === 0 ? empty + 1 : 0;
    }
    return [...seen.values()].slice(0, max === Number.POSITIVE_INFINITY ? undefined : max);
  }

  /** One look at a job: its queues and its ledger. */
  async state(name: string, since = this.sinceIso()): Promise<JobState> {
    const job = this.job(name);
    const [queue, dlq, admissionQueue, ledger] = await Promise.all([
      this.depth(job.queueUrl),
      this.depth(job.dlqUrl),
      this.depth(job.admissionQueueUrl),
      this.ledgerTotals(name, since),
    ]);
    return { queue, dlq, admissionQueue, ledger };
  }

  /**
   * Waits until the run has settled: for every job, nothing queued, in flight or delayed in its work queue or its
   * admission queue (where a run's next step waits), every batch finished and admitted, a scheduled job has a batch
   * at all; nothing running or pending in the runtime or the scheduler; twice in a row (a continuation or a deferral's
   * re-publish may land between two looks). Returns false at the deadline or when interrupted.
   */
  async settle(options: SettleOptions): Promise<boolean> {
    const names = options.jobs ?? [...this.jobs.keys()];
    const since = options.since ?? this.sinceIso();
    let quiet = 0;
    while (Date.now() < options.deadline && !options.interrupted?.()) {
      await pause(options.intervalMs ?? 500);
      let busy = !this.stack.runtime.isIdle() || this.stack.scheduler.pending > 0 || options.pending?.() === true;
      const states = new Map<string, JobState>();
      for (const name of names) {
        const s = await this.state(name, since);
        states.set(name, s);
        if (s.queue.total > 0) busy = true;
        // The admission queue matters while a batch is still admitting (the ledger says so). Once every batch is done, a
        // message left there is a takeover step for a step already past (a duplicated delivery that found the lease
        // held leaves one, delayed until the lease ends): stale when it comes, as on AWS.
        if (s.ledger.batches > s.ledger.finished || s.ledger.admitting > 0) busy = true;
        if (this.job(name).producer && s.ledger.batches === 0) busy = true;
      }
      await options.onPoll?.(states);
      quiet = busy ? 0 : quiet + 1;
      if (quiet >= 2) return true;
    }
    return false;
  }

  /**
   * What the job did: its fixture's reading of the downstream, or, for a job without a fixture, the pipeline's own
   * record (operations completed in the idempotency store and the consumer's logs of each apply).
   */
  async effects(name: string, seeded: SeededDemo, options: { since?: number } = {}): Promise<JobEffects> {
    const job = this.job(name);
    const since = options.since ?? 0;
    if (job.fixture) {
      // Only what happened from `since` on (the bench's measured cycle after a warm-up on the same session).
      const writes = since > 0 ? this.writes.filter((w) => w.at >= since) : this.writes;
      const downstream = job.downstream && since > 0 ? downstreamSince(job.downstream, since) : job.downstream;
      return { ...job.fixture.effects({ settings: job.settings, seeded, writes, downstream }), source: 'fixture' };
    }
    const reading = await this.pipelineLog.effects(
      job.consumer?.name,
      {
        documents: this.clients.documents,
        jobName: name,
        idempotencyTable: job.consumer?.environment.IDEMPOTENCY_TABLE_NAME,
      },
      since,
    );
    return { ...reading, source: 'pipeline' };
  }

  /** Starts the local CloudWatch API over the recorder's samples, and the recorder's queue polls. */
  private async serveMetrics(port: number): Promise<void> {
    this.cloudWatch = await startCloudWatchApi({ samples: () => this.recorder.samples() }, port);
    this.recorder.start();
  }

  /** Stops the servers, the functions and the fake downstreams. */
  async close(): Promise<void> {
    // The recorder polls through the session's SQS client: it stops before the client goes. A poll that failed is
    // logged, not thrown: closing must go on (and whoever read the samples since the failure was refused with it).
    await this.recorder
      .stop()
      .catch((error: Error) => this.log('metrics', `the queue depth sampling had failed: ${error.message}`));
    const cloudWatch = this.cloudWatch;
    this.cloudWatch = undefined;
    this.clients.sqs.destroy();
    this.clients.s3.destroy();
    this.clients.dynamodb.destroy();
    try {
      await this.stack.stop();
    } finally {
      await cloudWatch
        ?.close()
        .catch((error: Error) => this.log('metrics', `the local CloudWatch API did not close: ${error.message}`));
      for (const d of this.downstreams) await d.close().catch(() => undefined);
    }
  }

  /** The run ledger and idempotency table a job's functions use, as the operator CLI reads them (`ops audit`). */
  stateTables(name: string): LedgerTables {
    return {
      ledger: this.ledgerTable(name) ?? '',
      idempotency: this.job(name).consumer?.environment.IDEMPOTENCY_TABLE_NAME ?? '',
    };
  }

  private ledgerTable(name: string): string | undefined {
    const job = this.job(name);
    return job.consumer?.environment.LEDGER_TABLE_NAME ?? job.producer?.environment.LEDGER_TABLE_NAME;
  }

  private sinceIso(): string {
    return new Date(this.startedAt.getTime() - 1000).toISOString();
  }
}

const DYNAMO_WRITES = new Set<ObservedWrite['action']>(['PutItem', 'UpdateItem', 'DeleteItem']);

/** A successful write on the wire, as a fixture reads it; undefined for reads, failures and other services. */
export function observedWrite(service: 'dynamodb' | 'sqs' | 's3', r: ObservedRequest): ObservedWrite | undefined {
  // Only answered successes changed anything: a refused conditional write (400) or a failed call is not an effect.
  if (r.status >= 300) return undefined;
  if (service === 's3') {
    const object = objectRequestOf(r.method, r.url);
    return object
      ? { at: r.at, service, action: object.operation, resource: object.bucket, key: { key: object.key } }
      : undefined;
  }
  if (service !== 'dynamodb') return undefined;
  const action = String(r.headers['x-amz-target'] ?? '')
    .split('.')
    .pop() as ObservedWrite['action'];
  if (!DYNAMO_WRITES.has(action)) return undefined;
  try {
    const body = JSON.parse(r.body) as {
      TableName: string;
      Key?: Record<string, AttributeText>;
      Item?: Record<string, AttributeText>;
    };
    const key = body.Key ?? keyOfItem(body.Item);
    return {
      at: r.at,
      service,
      action,
      resource: body.TableName,
      key: Object.fromEntries(Object.entries(key).map(([k, v]) => [k, v.S ?? v.N ?? ''])),
    };
  } catch {
    // A body that is not JSON is dynalite's to reject; it made no effect to count.
    return undefined;
  }
}

type AttributeText = { S?: string; N?: string };

/** A PutItem carries the whole item, not its key: keep the string and number attributes (the key is among them). */
function keyOfItem(item: Record<string, AttributeText> | undefined): Record<string, AttributeText> {
  return Object.fromEntries(Object.entries(item ?? {}).filter(([, v]) => v.S !== undefined || v.N !== undefined));
}

/** A downstream as it was from `since` on (epoch ms): arrivals and effects before it are left out, and so are their counts. */
export function downstreamSince(downstream: FakeDownstream, since: number): FakeDownstream {
  const arrivals: readonly DownstreamArrival[] = downstream.arrivals.filter((a) => a.at >= since);
  const effects: readonly DownstreamEffect[] = downstream.effects.filter((e) => e.at >= since);
  return {
    get endpoint() {
      return downstream.endpoint;
    },
    start: () => downstream.start(),
    close: () => downstream.close(),
    configure: (settings) => downstream.configure(settings),
    allowSecret: (value) => downstream.allowSecret(value),
    setFaults: (policy) => downstream.setFaults(policy),
    arrivals,
    effects,
    replays: arrivals.filter((a) => a.replayed).length,
    throttled: arrivals.filter((a) => a.status === 429).length,
  };
}

/** The app's stack synthesized (if needed) and its template, as the session's `template` option changes it. */
function appTemplate(
  cwd: string,
  options: SessionOptions,
): { artifact: StackArtifact; template: CloudFormationTemplate } {
  const env = appEnv(cwd, options.env);
  const artifact = ensureAppStack({
    env,
    stack: options.stack,
    assemblyDir: options.assemblyDir ?? 'cdk.out',
    cwd,
    log: (line) => options.log('provision', line),
    synth: options.synth,
  });
  const loaded = loadTemplate(artifact.templateFile);
  const template = options.template ? options.template(loaded) : loaded;
  return { artifact, template };
}

/** What the local stack deploys, where, and with which of the session's runtime settings and faults. */
function stackDeployment(
  cwd: string,
  artifact: StackArtifact,
  template: CloudFormationTemplate,
  options: SessionOptions,
): Omit<LocalStackOptions, 'log' | 'onMetric' | 'onRequest' | 'environmentOverride'> {
  return {
    template,
    stackName: artifact.stackName,
    assemblyDir: artifact.assemblyDir,
    // A stack pinned to an account and region names its ARNs with them (its grants too): it runs there locally.
    region: artifact.environment?.region,
    accountId: artifact.environment?.account,
    dataDir: options.dataDir ? resolve(cwd, options.dataDir) : undefined,
    ports: options.ports,
    asyncRetryDelaysMs: options.asyncRetryDelaysMs,
    iam: options.iam,
    asyncDuplicateRate: options.asyncDuplicateRate,
    killAfterMs: options.killAfterMs,
    onInvoke: options.onInvoke,
    returnConsumedCapacity: options.returnConsumedCapacity,
  };
}

/**
 * Each job's settings for the run (`jobSettings` applied), its fixture, and its fake downstream (not started yet),
 * from a first plan made before any server exists: the settings decide the downstream (quota, secrets).
 */
function loadJobFixtures(
  cwd: string,
  preview: Map<string, JobView>,
  options: Pick<SessionOptions, 'jobSettings' | 'downstream'>,
): {
  runSettings: Map<string, JobRuntimeSettings>;
  fixtures: Map<string, JobFixture | undefined>;
  downstreams: Map<string, FakeDownstream>;
} {
  const runSettings = new Map<string, JobRuntimeSettings>();
  const fixtures = new Map<string, JobFixture | undefined>();
  const downstreams = new Map<string, FakeDownstream>();
  for (const job of preview.values()) {
    const settings = options.jobSettings ? options.jobSettings(structuredClone(job.settings)) : job.settings;
    runSettings.set(job.name, settings);
    const fixture = loadFixture(cwd, job.name, job.entry);
    fixtures.set(job.name, fixture);
    if (fixture?.downstream)
      downstreams.set(job.name, fixture.downstream(settings, options.downstream?.(job.name, settings) ?? {}));
  }
  return { runSettings, fixtures, downstreams };
}

/** A function's JOB_SETTINGS for the run: the job's run settings, pointed at its fake downstream when it has one. */
export function runJobSettings(
  synthesizedJson: string,
  runSettings: ReadonlyMap<string, JobRuntimeSettings>,
  downstreams: ReadonlyMap<string, Pick<FakeDownstream, 'configure'>>,
): string {
  const synthesized = JSON.parse(synthesizedJson) as JobRuntimeSettings;
  let settings = runSettings.get(synthesized.jobName) ?? synthesized;
  const downstream = downstreams.get(synthesized.jobName);
  if (downstream) settings = downstream.configure(settings);
  return JSON.stringify(settings);
}

/** Starts the fake downstreams, then the stack; on a failure stops whatever had started, and throws. */
async function startAll(stack: LocalStack, downstreams: Iterable<FakeDownstream>): Promise<void> {
  const started: FakeDownstream[] = [];
  try {
    for (const d of downstreams) {
      await d.start();
      started.push(d);
    }
    await stack.start();
  } catch (error) {
    await stack.stop().catch(() => undefined);
    for (const d of started) await d.close().catch(() => undefined);
    throw error;
  }
}
