// Chaos harness, the run: deploys the synthesized stack (a team's app's, or this repository's dev stack) on the local
// session (bundled functions, embedded AWS servers, every job's fixture and fake downstream), drives one job through one
// business date while injecting seeded faults (at the consumer, the job's downstream, DynamoDB, S3, and the producer's
// chain of admission steps), recovers a stopped chain as an operator would, switches the faults off, redrives the DLQ,
// waits to settle and checks the invariants on what the job's fixture saw. Everything random comes from one seed. It
// names no job: the job is chosen by `job`, or found by what its fixture offers.
import { createWriteStream, mkdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { SendMessageCommand, StartMessageMoveTaskCommand } from '@aws-sdk/client-sqs';
import { LocalSession, type JobState, type SessionJob } from '../local/session';
import { auditDate } from '../ops/commands/audit';
import { waitFor, WaitTimeoutError } from '../local/waitFor';
import { fixturePath, loadFixture, type JobFixture, type SeededDemo } from '../local/fixture';
import type { CloudFormationTemplate } from '../local/template';
import { jobViews, previewPlan } from '../local/jobs';
import { JOB_ENTRY_METADATA, SQS_MAX_MESSAGE_BYTES, type JobRuntimeSettings } from '../lambda/core/constants';
import { parseMessage } from '../lambda/core/message';
import { batchIdOf, LedgerItemKind } from '../lambda/core/ledgerContract';
import { DynamoFaultProxy } from './dynamoProxy';
import { ChaosFaults, faultCounters } from './faults';
import { S3FaultProxy } from './s3Proxy';
import { checkInvariants, isNonReplayedStart, type LedgerBatch, type Verdict } from './invariants';
import { pacingFigures, type PacingFigures, type Span } from './pacing';
import {
  admissionStepOf,
  ProducerFaultInjector,
  producerMessagesByBatch,
  recoveryStepBody,
  stoppedChains,
  type ProducerFaultCounts,
  type RunLedgerItem,
} from './producerFaults';
import { chaosCharts } from './report';
import type { ChartSpec } from '../console/chartSpec';

/** Fault rates (probabilities per opportunity) and the local timing the run uses. */
export interface ChaosOptions {
  ops: number;
  seed: number;
  /** The CDK app's folder (cdk.json; each job's fixture is the local.ts beside its entry). */
  cwd: string;
  /**
   * The job to drive; it needs a local fixture. @default the first job (in the stack's order) whose fixture offers a
   * fake downstream, else the first with a fixture
   */
  job?: string;
  /** The environment synthesized (`-c env=<env>`). @default "dev" in this repository, none in a team's app */
  env?: string;
  /** The stack holding the jobs, where several of the app's stacks do. @default the one that does */
  stack?: string;
  /** The app's cloud assembly, relative to `cwd` (synthesized there when it lacks the stack). @default "cdk.out" */
  assemblyDir?: string;
  /** Business date of the run; fixed so a seed reproduces the same operations. @default "2026-01-15" */
  businessDate?: string;
  /** The job's start rate per minute for this run (its limiter, and its fake downstream's quota). @default 1200 */
  ratePerMinute?: number;
  /** The consumer's Lambda timeout locally, seconds (the queue's visibility timeout follows it). @default 20 */
  consumerTimeoutSeconds?: number;
  /** Per published message: re-send copies. @default 0.05 */
  duplicateRate?: number;
  /** Producer re-runs of the same business date. @default 1 */
  producerReruns?: number;
  /** Per consumer invocation: kill the execution environment at a random point. @default 0.03 */
  killRate?: number;
  /** Per request at the job's fake downstream: 5xx before the effect. @default 0.03 */
  downstreamErrorRate?: number;
  /**
   * Per request at the job's fake downstream: a permanent 422 before the effect. The consumer dead-letters the
   * operation; the harness redrives the DLQ once faults are off, and the operation completes then. @default 0.003
   */
  rejectRate?: number;
  /** Per request at the job's fake downstream: extra latency before the effect. @default 0.05 */
  slowRate?: number;
  /** Per request at the job's fake downstream: effect applied, answer held past the caller's remaining time. @default 0.02 */
  hangAfterEffectRate?: number;
  /** Per request at the job's fake downstream: held, then the connection dropped without an effect. @default 0.01 */
  dropBeforeEffectRate?: number;
  /** Share of the fault phase the job's fake downstream spends in 429 storms. @default 0.1 */
  stormShare?: number;
  /** Per DynamoDB request from the job's functions: a throttling or internal error. @default 0.02 */
  dynamoFaultRate?: number;
  /**
   * Per consumer claim (PutItem) or pre-check (BatchGetItem): the request stalls, never answered, so the invocation
   * runs into its Lambda timeout. @default 0.002
   */
  dynamoStallRate?: number;
  /**
   * Per object the job's functions write or delete in S3 (a job with buckets): its first call fails, every attempt
   * the SDK makes (its standard 3) answered 503 SlowDown or 500 InternalError. @default 0.05
   */
  s3FaultRate?: number;
  /** Poison messages per operation. @default 0.01 (at least 1) */
  poisonRate?: number;
  /**
   * Per producer invocation (the first attempt of a direct step 0, the first receive of an admission step): kill it
   * right after its first or second SendMessageBatch call of a page, before the page is committed. @default 0.2
   */
  producerKillRate?: number;
  /**
   * Admission steps (the first continuations delivered, step 1 on) made to fail on every receive until SQS dead-letters them to the
   * producer DLQ; the harness then finds the stopped chain and sends a step message for it, as an operator would.
   * @default 1
   */
  producerDeadLetters?: number;
  /** Schedule deliveries fired a second time for the same scheduled time (the same batch). @default 1 */
  duplicateSchedules?: number;
  /**
   * The job's producer timeout locally, seconds: the lease of a killed step lasts this long. At least
   * MIN_PRODUCER_TIMEOUT_SECONDS (the producer stops publishing with 20 s left). @default 30
   */
  producerTimeoutSeconds?: number;
  /** The admission horizon locally, seconds: small, so a run is a chain of steps. @default defaultHorizonSeconds(ops, ratePerMinute) */
  admissionHorizonSeconds?: number;
  /**
   * The admission queue's visibility timeout locally, seconds: how long a killed step waits to be delivered again.
   * @default producerTimeoutSeconds + the stack's margin (the template's visibility less its producer timeout, 60 s)
   */
  admissionVisibilitySeconds?: number;
  /** Receives of an admission step before SQS dead-letters it. @default the template's (5) */
  admissionMaxReceiveCount?: number;
  /** Give up waiting for each phase to settle after this long. @default defaultTimeoutSeconds(ops, ratePerMinute, admission) */
  timeoutSeconds?: number;
  /** Progress lines. */
  log?: (line: string) => void;
}

export interface ChaosResult extends Verdict {
  /** The job the run drove; absent in a result recorded before runs chose their job. */
  job?: string;
  /** What the job's fixture seeded, in its words (its SeededDemo.summary). */
  seeded?: string;
  ops: number;
  seed: number;
  settled: boolean;
  durationMs: number;
  faultsInjected: Record<string, number>;
  /** Absent in a result recorded before the producer's faults existed. */
  producerFaults?: ProducerFaultCounts;
  /** The admission timing the run used (after defaults), which the producer's recovery times follow. */
  admission?: AdmissionTiming;
  /**
   * The fleet's starts against the allowance outside the storms, while work waited (chaos/pacing.ts);
   * `outsideStormsAnyDepth`: the same while any message was on the queue, failed records waiting out their visibility
   * timeout included (the figure runs before it reported).
   */
  pacing?: PacingFigures & { outsideStormsAnyDepth?: PacingFigures['outsideStorms'] };
  /**
   * The run's charts (chaos/report.ts chaosCharts), for its HTML report; kept with the result so `--report` alone can
   * draw the last run again. Absent in a result recorded before reports had charts, or when they could not be built.
   */
  charts?: ChartSpec[];
  /** Why the charts could not be built (the verdict stands without them). */
  chartsError?: string;
}

/** The chaos job's producer and admission queue timing, as the run rewrote the template. */
export interface AdmissionTiming {
  producerTimeoutSeconds: number;
  horizonSeconds: number;
  visibilitySeconds: number;
  maxReceiveCount: number;
}

/** The producer reserves 20 s of its budget (reserveMs) before each page: below this, steps would publish nothing. */
export const MIN_PRODUCER_TIMEOUT_SECONDS = 25;

export class ChaosError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ChaosError';
  }
}

/** Bodies the consumer of `jobName` must reject and keep for review: not JSON, wrong shape, wrong version, hostile IDs. */
export function poisonBodies(jobName: string): string[] {
  return [
    'not json at all',
    '{}',
    JSON.stringify({ v: 99, jobType: jobName }),
    JSON.stringify({ v: 1, jobType: jobName, operationId: 'x'.repeat(5000) }),
    JSON.stringify({ v: 1, jobType: 'no-such-job', operationId: 'op-1', batchId: 'b-1' }),
    JSON.stringify({ v: 1, jobType: jobName, operationId: "'; DROP TABLE items; --", batchId: '\u0000\u0007' }),
    '[1,2,3]',
  ];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// biome-ignore lint/suspicious/noExplicitAny: a template's properties are loose JSON the run rewrites in place.
type TemplateResource = { Type: string; Properties: Record<string, any>; Metadata?: Record<string, unknown> };

const functionsOf = (template: CloudFormationTemplate): TemplateResource[] =>
  Object.values(template.Resources as Record<string, TemplateResource>).filter(
    (r) => r.Type === 'AWS::Lambda::Function',
  );

/** The jobs of a template, in its order (the stack's): the JOB_NAME its functions carry, each once. */
export function templateJobs(template: CloudFormationTemplate): string[] {
  return [...templateJobEntries(template).keys()];
}

/**
 * Each job of a template, in its order, with its entry (its functions' `paced-jobs:job-entry` Metadata, relative to
 * the app's folder): where its fixture is. Undefined for a template synthesized before the Metadata.
 */
export function templateJobEntries(template: CloudFormationTemplate): Map<string, string | undefined> {
  const entries = new Map<string, string | undefined>();
  for (const r of functionsOf(template)) {
    const name = r.Properties?.Environment?.Variables?.JOB_NAME;
    if (typeof name !== 'string') continue;
    const entry = r.Metadata?.[JOB_ENTRY_METADATA];
    entries.set(name, typeof entry === 'string' ? entry : entries.get(name));
  }
  return entries;
}

/**
 * The job a run drives: the one `named`, or the first of `jobs` (the stack's order) whose fixture offers a fake
 * downstream (its faults reach the most places), else the first with a fixture. A job without one can be neither
 * seeded nor seen: an error naming the file it needs (`fixtureFileOf`, relative to the app), as is a name the stack
 * does not have.
 */
export function chooseJob(
  jobs: readonly string[],
  fixtureOf: (job: string) => JobFixture | undefined,
  named?: string,
  fixtureFileOf: (job: string) => string = (job) => join('lambda', 'jobs', job, 'local.ts'),
): { name: string; fixture: JobFixture } {
  const needs = (name: string) => `chaos needs ${fixtureFileOf(name)} to seed and see effects`;
  if (named !== undefined) {
    if (!jobs.includes(named))
      throw new ChaosError(`the stack has no job "${named}" (jobs: ${jobs.join(', ') || 'none'})`);
    const fixture = fixtureOf(named);
    if (!fixture) throw new ChaosError(`job ${named} has no local fixture: ${needs(named)}`);
    return { name: named, fixture };
  }
  const withFixture = jobs.flatMap((name) => {
    const fixture = fixtureOf(name);
    return fixture ? [{ name, fixture }] : [];
  });
  const chosen = withFixture.find((j) => typeof j.fixture.downstream === 'function') ?? withFixture[0];
  if (!chosen) {
    const looked = jobs.map(fixtureFileOf).join(', ');
    throw new ChaosError(
      `no job of the stack has a local fixture: chaos needs one, local.ts beside a job's code, to seed and see effects (${looked ? `none of ${looked} exists` : 'the stack has no jobs'})`,
    );
  }
  return chosen;
}

/** A job's resources in the template, found through its functions' environment (JOB_NAME, the queue Refs). */
export function chaosJobResources(
  template: CloudFormationTemplate,
  jobName: string,
): {
  producer: TemplateResource;
  consumer: TemplateResource;
  queue: TemplateResource;
  admissionQueue: TemplateResource;
  settings: JobRuntimeSettings;
} {
  const resources = template.Resources as Record<string, TemplateResource>;
  const functions = functionsOf(template).filter((r) => r.Properties?.Environment?.Variables?.JOB_NAME === jobName);
  const consumer = functions.find((r) => r.Properties.Environment.Variables.IDEMPOTENCY_TABLE_NAME);
  const producer = functions.find((r) => !r.Properties.Environment.Variables.IDEMPOTENCY_TABLE_NAME);
  const ref = (fn: TemplateResource | undefined, name: string) =>
    resources[(fn?.Properties.Environment.Variables[name] as { Ref?: string } | undefined)?.Ref ?? ''];
  const queue = ref(consumer, 'QUEUE_URL');
  const admissionQueue = ref(producer, 'ADMISSION_QUEUE_URL');
  const raw = consumer?.Properties.Environment.Variables.JOB_SETTINGS;
  if (
    !producer ||
    !consumer ||
    queue?.Type !== 'AWS::SQS::Queue' ||
    admissionQueue?.Type !== 'AWS::SQS::Queue' ||
    raw === undefined
  ) {
    throw new ChaosError(
      `the template has no complete ${jobName} job (producer, consumer with JOB_SETTINGS, their QUEUE_URL and ADMISSION_QUEUE_URL queues)`,
    );
  }
  // JOB_SETTINGS is a string, or a Fn::Join where it names a resource the stack creates (a bucket's Ref): the preview
  // plan resolves it as the local deployment will.
  const settings =
    typeof raw === 'string'
      ? (JSON.parse(raw) as JobRuntimeSettings)
      : jobViews(previewPlan(template, 'Chaos')).get(jobName)!.settings;
  return { producer, consumer, queue, admissionQueue, settings };
}

/** What the stack gives a job's admission queue: its visibility margin over the producer's timeout, and its receives. */
export function templateAdmission(
  template: CloudFormationTemplate,
  jobName: string,
): { visibilityMarginSeconds: number; maxReceiveCount: number } {
  const { producer, admissionQueue } = chaosJobResources(template, jobName);
  const policy = admissionQueue.Properties.RedrivePolicy as { maxReceiveCount?: number } | undefined;
  return {
    visibilityMarginSeconds: Number(admissionQueue.Properties.VisibilityTimeout) - Number(producer.Properties.Timeout),
    maxReceiveCount: Number(policy?.maxReceiveCount),
  };
}

/**
 * The stack, retimed for a local chaos run of `job`: a short consumer timeout (and its queue's visibility), a short
 * producer timeout with the admission queue's visibility and receives to match, no batching wait. The rate and the
 * horizon are the job's settings (retimeSettings).
 */
export function retimeTemplate(
  template: CloudFormationTemplate,
  o: { job: string; consumerTimeoutSeconds: number; admission: AdmissionTiming },
): CloudFormationTemplate {
  const copy = structuredClone(template);
  const job = chaosJobResources(copy, o.job);
  job.consumer.Properties.Timeout = o.consumerTimeoutSeconds;
  job.queue.Properties.VisibilityTimeout = o.consumerTimeoutSeconds + 2;
  job.producer.Properties.Timeout = o.admission.producerTimeoutSeconds;
  job.admissionQueue.Properties.VisibilityTimeout = o.admission.visibilitySeconds;
  job.admissionQueue.Properties.RedrivePolicy = {
    ...job.admissionQueue.Properties.RedrivePolicy,
    maxReceiveCount: o.admission.maxReceiveCount,
  };
  for (const r of Object.values(copy.Resources as Record<string, TemplateResource>)) {
    if (r.Type === 'AWS::Lambda::EventSourceMapping') r.Properties.MaximumBatchingWindowInSeconds = 0;
  }
  return copy;
}

/** The job's JOB_SETTINGS for the run: the rate, per minute, and the admission horizon (its producer and consumer get the same). */
export function retimeSettings(
  settings: JobRuntimeSettings,
  o: { ratePerMinute: number; horizonSeconds: number },
): JobRuntimeSettings {
  return {
    ...settings,
    rateLimit: { ...settings.rateLimit, startsPerInterval: o.ratePerMinute, intervalSeconds: 60 },
    ...(settings.admission ? { admission: { ...settings.admission, horizonSeconds: o.horizonSeconds } } : {}),
  };
}

/** Every default of ChaosOptions but the job and the settle timeout (which depend on the run): the CLI shows these too. */
export const CHAOS_DEFAULTS = {
  businessDate: '2026-01-15',
  ratePerMinute: 1200,
  consumerTimeoutSeconds: 20,
  duplicateRate: 0.05,
  producerReruns: 1,
  killRate: 0.03,
  downstreamErrorRate: 0.03,
  rejectRate: 0.003,
  slowRate: 0.05,
  hangAfterEffectRate: 0.02,
  dropBeforeEffectRate: 0.01,
  stormShare: 0.1,
  dynamoFaultRate: 0.02,
  dynamoStallRate: 0.002,
  s3FaultRate: 0.05,
  poisonRate: 0.01,
  producerKillRate: 0.2,
  producerDeadLetters: 1,
  duplicateSchedules: 1,
  producerTimeoutSeconds: 30,
};

/** `defaults`, with every value `given` sets (undefined leaves the default). */
function withDefaults<T extends object>(defaults: T, given: Partial<T>): T {
  const out = { ...defaults };
  for (const key of Object.keys(defaults) as (keyof T)[])
    if (given[key] !== undefined) out[key] = given[key] as T[keyof T];
  return out;
}

/**
 * The default settle timeout: 900 s, or four times the least time the limiter lets `ops` operations start in (plus the
 * faults, the re-runs and the redrive), whichever is longer; and on top, the producer's recoveries: a dead-lettered
 * step's receives, each one visibility timeout apart, and two more for the killed steps. It only stops a run that
 * would never settle.
 */
export function defaultTimeoutSeconds(
  ops: number,
  ratePerMinute: number,
  admission: { visibilitySeconds: number; maxReceiveCount: number },
): number {
  return (
    Math.max(900, Math.ceil((4 * ops * 60) / ratePerMinute)) +
    (admission.maxReceiveCount + 2) * admission.visibilitySeconds
  );
}

/**
 * The default admission horizon: a quarter of the least time the run's work takes at the rate (2 s at least), so a run
 * of any size is a chain of several steps for the producer's faults to hit.
 */
export function defaultHorizonSeconds(ops: number, ratePerMinute: number): number {
  return Math.min(300, Math.max(2, Math.round((ops * 60) / ratePerMinute / 4)));
}

/** The operation a DLQ message stands for, as the job's fixture keys it; undefined for a body that is not a job message. */
export function dlqOperationOf(fixture: Pick<JobFixture, 'operationKeyOf'>, body: string): string | undefined {
  const parsed = parseMessage(body, SQS_MAX_MESSAGE_BYTES);
  return parsed.ok ? fixture.operationKeyOf(parsed.message.resource) : undefined;
}

/** What the template callback decides: the job, its fixture, and the timing the run uses. */
interface RunPlan {
  job: string;
  fixture: JobFixture;
  admission: AdmissionTiming;
  buckets: boolean;
  timeoutSeconds: number;
}

type RunSettings = typeof CHAOS_DEFAULTS;

/**
 * The template callback: chooses the job in the synthesized template and times the run after it (the session then
 * deploys the result), and the plan it made.
 */
function runPlanner(cwd: string, options: ChaosOptions, o: RunSettings, say: (line: string) => void) {
  let plan: RunPlan | undefined;
  const prepare = (deployed: CloudFormationTemplate): CloudFormationTemplate => {
    const entries = templateJobEntries(deployed);
    const fileOf = (job: string) => relative(cwd, fixturePath(cwd, job, entries.get(job)));
    const { name, fixture } = chooseJob(
      [...entries.keys()],
      (job) => loadFixture(cwd, job, entries.get(job)),
      options.job,
      fileOf,
    );
    const stackAdmission = templateAdmission(deployed, name);
    const admission: AdmissionTiming = {
      producerTimeoutSeconds: o.producerTimeoutSeconds,
      horizonSeconds: options.admissionHorizonSeconds ?? defaultHorizonSeconds(options.ops, o.ratePerMinute),
      visibilitySeconds:
        options.admissionVisibilitySeconds ?? o.producerTimeoutSeconds + stackAdmission.visibilityMarginSeconds,
      maxReceiveCount: options.admissionMaxReceiveCount ?? stackAdmission.maxReceiveCount,
    };
    // A step redelivered while its killed holder's lease still runs is turned away as in progress, and its chain stops.
    if (admission.visibilitySeconds <= admission.producerTimeoutSeconds) {
      throw new ChaosError(
        `admissionVisibilitySeconds ${admission.visibilitySeconds} must exceed producerTimeoutSeconds ${admission.producerTimeoutSeconds}, or a killed step's redelivery finds its lease still held`,
      );
    }
    plan = {
      job: name,
      fixture,
      admission,
      buckets: Object.keys(chaosJobResources(deployed, name).settings.buckets ?? {}).length > 0,
      timeoutSeconds: options.timeoutSeconds ?? defaultTimeoutSeconds(options.ops, o.ratePerMinute, admission),
    };
    say(`job ${name} (fixture ${fileOf(name)}${fixture.downstream ? ', with a fake downstream' : ''})`);
    return retimeTemplate(deployed, { job: name, consumerTimeoutSeconds: o.consumerTimeoutSeconds, admission });
  };
  return { prepare, plan: () => plan };
}

/** What the session's hooks need of the run, filled in once the session has deployed the job. */
interface Wiring {
  plan: () => RunPlan | undefined;
  faults: ChaosFaults;
  dynamoEndpoint: string;
  s3Endpoint: string;
  queueUrl: string;
  consumerName: string;
  producerName: string;
  producerFaults?: ProducerFaultInjector;
  session?: LocalSession;
  /** The injected copies' sends still under way, and those that failed. */
  pendingSends: Set<Promise<unknown>>;
  sendErrors: Error[];
}

/** Re-sends the copies the faults ask for of one published message. */
function duplicate(w: Wiring, body: string): void {
  const operationId = operationIdOf(body);
  const session = w.session;
  if (!session || operationId === undefined) return;
  for (const delay of w.faults.duplicates(operationId)) {
    const sent = session
      .sqs()
      .send(new SendMessageCommand({ QueueUrl: w.queueUrl, MessageBody: body, DelaySeconds: delay }))
      .catch((e: Error) => w.sendErrors.push(e));
    w.pendingSends.add(sent);
    void sent.finally(() => w.pendingSends.delete(sent));
  }
}

/** The local session's options for a chaos run: the chaos job retimed, its functions through the fault proxies. */
function sessionOptions(
  cwd: string,
  options: ChaosOptions,
  o: RunSettings,
  w: Wiring,
  template: (t: CloudFormationTemplate) => CloudFormationTemplate,
  log: (source: string, line: string) => void,
): Parameters<typeof LocalSession.open>[0] {
  return {
    cwd,
    env: options.env,
    stack: options.stack,
    assemblyDir: options.assemblyDir,
    template,
    jobSettings: (settings) => {
      const plan = w.plan();
      return settings.jobName === plan?.job
        ? retimeSettings(settings, { ratePerMinute: o.ratePerMinute, horizonSeconds: plan.admission.horizonSeconds })
        : settings;
    },
    // The job's fake downstream enforces the rate the job runs at, not the one it is configured with.
    downstream: (name, settings) =>
      name === w.plan()?.job
        ? {
            quota: {
              startsPerWindow: settings.rateLimit.startsPerInterval,
              windowSeconds: settings.rateLimit.intervalSeconds,
            },
          }
        : undefined,
    // Only the chaos job's functions go through the fault proxies (S3's only for a job with buckets).
    environment: (fn, env) => {
      const plan = w.plan();
      return (env.JOB_NAME ?? fn.environment.JOB_NAME) !== plan?.job
        ? env
        : {
            ...env,
            AWS_ENDPOINT_URL_DYNAMODB: w.dynamoEndpoint,
            ...(plan.buckets ? { AWS_ENDPOINT_URL_S3: w.s3Endpoint } : {}),
          };
    },
    log,
    // Warmed below: the chaos job's functions only, and fewer than the session's default.
    prewarm: false,
    killAfterMs: (fn) => (fn === w.consumerName ? w.faults.consumerKillAfterMs() : undefined),
    onInvoke: (fn, event, invocation) => {
      if (fn === w.producerName) w.producerFaults?.onInvoke(event, invocation);
    },
    onRequest: (service, r) => {
      // Published messages, read off the wire as SQS received them: the copies are the very same bodies.
      if (
        service !== 'sqs' ||
        r.status >= 300 ||
        !String(r.headers['x-amz-target'] ?? '').endsWith('.SendMessageBatch')
      )
        return;
      try {
        const req = JSON.parse(r.body) as { QueueUrl?: string; Entries?: { MessageBody: string }[] };
        if (req.QueueUrl !== w.queueUrl) return;
        // The producer's own pages: where its armed kills strike, and how re-published pages are counted.
        for (const [batchId, operationIds] of producerMessagesByBatch(req.Entries ?? []))
          w.producerFaults?.onPublish(batchId, operationIds);
        for (const e of req.Entries ?? []) duplicate(w, e.MessageBody);
      } catch (error) {
        w.sendErrors.push(
          new ChaosError(`could not read a SendMessageBatch request: ${(error as Error).message}`, { cause: error }),
        );
      }
    },
  };
}

/** Where the pacing alone decided how fast the fleet started: spans when work waited, sampled until stopped. */
function sampleBusy(session: LocalSession, job: CompleteJob, perSecond: number) {
  // Work that waits is visible on the job's queue, delayed there (a deferral waiting out its delay), or held by a
  // running invocation; not a failed record waiting out its visibility timeout, which nothing can start.
  // `busyAnyDepth` also counts those (any message on the queue): the figure as runs before it reported it.
  const busy: Span[] = [];
  const busyAnyDepth: Span[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const at = Date.now();
      const held = job.mapping.recordsHeld;
      const depth = await session.depth(job.queueUrl).catch(() => undefined);
      await sleep(500);
      if (depth && depth.visible + depth.delayed + held >= perSecond) busy.push([at, Date.now()]);
      if (depth && depth.total >= perSecond) busyAnyDepth.push([at, Date.now()]);
    }
  })();
  return {
    busy,
    busyAnyDepth,
    stop: async () => {
      sampling = false;
      await sampler;
    },
  };
}

/** Fires the run, the schedule's duplicate copies and the re-runs of the date, then puts poison on the queue. */
async function driveRun(
  session: LocalSession,
  job: CompleteJob,
  run: RunPlan,
  options: ChaosOptions,
  o: RunSettings,
  faults: ChaosFaults,
  producerFaults: ProducerFaultInjector,
): Promise<void> {
  // Whole seconds, as the Scheduler's times are: the batch ID keeps only seconds.
  const scheduledTime = new Date(Math.floor(Date.now() / 1000) * 1000);
  const fire = (at: Date) => session.fire(run.job, { scheduledTime: at, businessDate: o.businessDate });
  await fire(scheduledTime);
  for (let i = 0; i < o.duplicateSchedules; i++) {
    // At once, while step 0 holds the lease (the copy leaves a takeover step), or after it (the copy finds the run
    // past step 0): either way the copy admits nothing.
    await sleep(faults.planDice.chance(0.5) ? 0 : faults.planDice.int(200, 1500));
    await fire(scheduledTime);
    producerFaults.counts.duplicateSchedules++;
  }
  for (let i = 0; i < o.producerReruns; i++) {
    await sleep(faults.planDice.int(500, 3000));
    // A later scheduled time, so a re-run is a new batch of the same date, never the schedule's duplicate.
    await fire(new Date(Math.max(Math.floor(Date.now() / 1000) * 1000, scheduledTime.getTime() + (i + 1) * 1000)));
    faults.counts.producerReruns++;
  }
  const poison = poisonBodies(run.job);
  const poisonCount = Math.max(1, Math.round(options.ops * o.poisonRate));
  for (let i = 0; i < poisonCount; i++) {
    await session
      .sqs()
      .send(new SendMessageCommand({ QueueUrl: job.queueUrl, MessageBody: poison[i % poison.length] }));
    faults.counts.poisonMessages++;
  }
}

/** Waits for `done`; at the timeout it says so and goes on (what is left is the verdict's to judge). */
async function waitOrSay(
  what: string,
  done: () => Promise<boolean>,
  o: { timeoutMs: number; intervalMs: number },
  say: (line: string) => void,
): Promise<void> {
  await waitFor(what, done, o).catch((error: unknown) => {
    if (!(error instanceof WaitTimeoutError)) throw error;
    say(error.message);
  });
}

/** Redrives the DLQ once the faults are off, as an operator would; resolves to whether the run settled again. */
async function redriveAfterFaults(
  session: LocalSession,
  job: CompleteJob,
  faults: ChaosFaults,
  waiting: SettleContext,
): Promise<boolean> {
  const before = (await session.depth(job.dlqUrl)).total;
  faults.counts.dlqBeforeRedrive = before;
  waiting.say(`faults off; ${before} messages in the DLQ; redriving`);
  if (before === 0) return true;
  await session.sqs().send(new StartMessageMoveTaskCommand({ SourceArn: job.dlqArn, DestinationArn: job.queueArn }));
  faults.counts.redriven = before;
  // A move task that leaves messages behind is the verdict's to judge (they stay in the DLQ), not a broken run.
  const emptied = async () => (await session.depth(job.dlqUrl)).total === 0;
  await waitOrSay(
    'the DLQ redrive to move every message',
    emptied,
    { timeoutMs: 10_000, intervalMs: 250 },
    waiting.say,
  );
  return settle(waiting);
}

/** The invariants on what the job's fixture, the ledger and the queues hold once the run settled. */
async function judge(
  session: LocalSession,
  job: CompleteJob,
  run: RunPlan,
  seeded: SeededDemo,
  o: RunSettings,
  faults: ChaosFaults,
): Promise<Verdict> {
  // Every batch of the job, resolved exactly as ops status resolves it (ops/ledger.ts batchFigures).
  const batches: LedgerBatch[] = (await session.ledgerBatches(run.job, undefined)).map(
    ({ batchId, item, figures: f }) => ({
      batchId,
      discovered: f.discovered,
      published: f.published,
      completed: f.completed,
      completedElsewhere: f.completedElsewhere,
      adopted: f.adopted,
      duplicates: f.duplicates,
      retries: f.retries,
      rejected: f.rejected,
      deadLettered: f.deadLettered,
      admission: typeof item.admission === 'string' ? item.admission : undefined,
    }),
  );
  const rejections = await session.ledgerItems(run.job, LedgerItemKind.rejection);
  const dlq = await session.readQueue(job.dlqUrl, 60);
  return checkInvariants({
    expectedOperations: seeded.expectedOperations,
    effects: await session.effects(run.job, seeded),
    downstream: job.downstream,
    rateLimit: {
      startsPerInterval: job.settings.rateLimit.startsPerInterval,
      intervalSeconds: job.settings.rateLimit.intervalSeconds,
    },
    batches,
    rejectedMessageIds: rejections.map((r) => String(r.messageId)),
    poisonInjected: faults.counts.poisonMessages,
    queueLeft: (await session.depth(job.queueUrl)).total,
    dlq,
    dlqOperations: dlq.flatMap((m) => dlqOperationOf(run.fixture, m.body) ?? []),
    audit: await auditDate(session.documents(), session.stateTables(run.job), { job: run.job, date: o.businessDate }),
  });
}

/** The producer's doomed steps that SQS moved to the producer DLQ (the alarm an operator answered). */
async function stepsDeadLettered(
  session: LocalSession,
  job: CompleteJob,
  run: RunPlan,
  producerFaults: ProducerFaultInjector,
  producerDlqUrl: string,
  say: (line: string) => void,
): Promise<number> {
  // A doomed step moves to the producer DLQ at the first receive after its last, once its visibility lapses. A run
  // that settled sooner (the harness recovered its chain) may still hold it in flight in the admission queue, which
  // nothing else fills now: wait for that move before counting, as an operator would find it after the alarm.
  if (producerFaults.counts.stepsDoomed > 0) {
    const timeoutMs = (run.admission.visibilitySeconds + 30) * 1000;
    const left = async () => (await session.depth(job.admissionQueueUrl)).total === 0;
    await waitOrSay(
      'the doomed admission steps to leave the admission queue',
      left,
      { timeoutMs, intervalMs: 500 },
      say,
    );
  }
  // The schedule dead-letters there too; only admission steps count.
  return (await session.readQueue(producerDlqUrl, 60)).filter((m) => admissionStepOf(m.body)).length;
}

/** The run's log file under .local/chaos, and the provisioning notes said to the user. */
function runLog(cwd: string, seed: number, say: (line: string) => void) {
  const localDir = join(cwd, '.local', 'chaos');
  mkdirSync(localDir, { recursive: true });
  const logFile = createWriteStream(join(localDir, `run-${seed}.log`), { flags: 'w' });
  return {
    log: (source: string, line: string) => {
      logFile.write(`${source} ${line}\n`);
      // The assembly's own notes (a synth, a template older than the sources) are the user's to see.
      if (source === 'provision') say(line);
    },
    close: () => new Promise((r) => logFile.end(r)),
  };
}

/** The deployed chaos job, its names filled into the wiring, and its faults armed (the producer's and the downstream's). */
function wireJob(session: LocalSession, run: RunPlan | undefined, w: Wiring, o: RunSettings) {
  if (!run) throw new ChaosError('the session deployed a template the run never saw');
  const job = completeJob(session.job(run.job), session.artifact.stackName);
  w.queueUrl = job.queueUrl;
  w.consumerName = job.consumer.name;
  w.producerName = session.stack.runtime.get(job.producer.arn).spec.name;
  const admissionQueue = session.stack.plan.queues.find((q) => q.url === job.admissionQueueUrl);
  if (!admissionQueue?.deadLetterTargetArn)
    throw new ChaosError(`the ${run.job} admission queue has no producer DLQ (RedrivePolicy)`);
  const producerDlqUrl = session.stack.queueUrl(admissionQueue.deadLetterTargetArn);
  const { faults } = w;
  faults.counts = faultCounters({ downstream: job.downstream !== undefined, buckets: run.buckets });
  const producerFaults = (w.producerFaults = new ProducerFaultInjector({
    jobName: run.job,
    killRate: o.producerKillRate,
    deadLetters: o.producerDeadLetters,
    dice: faults.producerDice,
    isOn: () => faults.on,
  }));
  job.downstream?.setFaults(faults.downstream);
  return { run, job, producerDlqUrl, producerFaults };
}

/** The fault phase's pacing, against the storms planned: where work waited, and the same by any queue depth. */
function runPacing(
  job: CompleteJob,
  stormSpans: Span[],
  perSecond: number,
  busy: { busy: Span[]; busyAnyDepth: Span[] },
): Pick<ChaosResult, 'pacing'> {
  // The starts the job's fake downstream saw (none without one): the same for both figures.
  const starts = job.downstream?.arrivals.filter(isNonReplayedStart).map((a) => a.at);
  if (!starts) return {};
  const pacingOf = (spans: Span[]) =>
    pacingFigures({
      starts,
      storms: stormSpans,
      busy: spans,
      allowancePerSecond: perSecond,
      windowSeconds: job.settings.rateLimit.intervalSeconds,
    });
  return { pacing: { ...pacingOf(busy.busy), outsideStormsAnyDepth: pacingOf(busy.busyAnyDepth).outsideStorms } };
}

/** What settle watches for the chaos job, and how it takes a stopped chain on: its step sent again, as an operator would. */
function settleContext(
  session: LocalSession,
  job: CompleteJob,
  run: RunPlan,
  w: Wiring,
  deadline: number,
  say: (line: string) => void,
): SettleContext {
  const producerFaults = w.producerFaults!;
  return {
    session,
    job: run.job,
    producerName: w.producerName,
    pending: w.pendingSends,
    deadline,
    say,
    recover: async (item) => {
      const sent = await session
        .sqs()
        .send(new SendMessageCommand({ QueueUrl: job.admissionQueueUrl, MessageBody: recoveryStepBody(item) }));
      producerFaults.exemptMessage(sent.MessageId!);
      producerFaults.counts.recoveredChains++;
      say(
        `run ${batchIdOf(item)} stopped at admission step ${item.step} (due ${item.nextStepAt ?? item.startedAt}, nothing in the admission queue); sent a step ${item.step} message, as an operator would`,
      );
    },
  };
}

/** The DynamoDB and S3 fault proxies in front of the session's servers, deciding by the run's faults. */
function faultProxies(w: Wiring) {
  const endpointOf = (service: 'dynamodb' | 's3') => {
    if (!w.session) throw new ChaosError(`no local ${service} server yet`);
    return w.session.stack.endpoints[service];
  };
  return {
    dynamoProxy: new DynamoFaultProxy({
      target: () => endpointOf('dynamodb'),
      decide: (operation) => w.faults.dynamo(operation),
    }),
    s3Proxy: new S3FaultProxy({ target: () => endpointOf('s3'), decide: (request) => w.faults.s3(request) }),
  };
}

/**
 * The run's settings, the defaults applied.
 * @throws ChaosError for a producer timeout its steps could publish nothing in.
 */
function runSettings(options: ChaosOptions): RunSettings {
  const o = withDefaults(CHAOS_DEFAULTS, options);
  if (o.producerTimeoutSeconds < MIN_PRODUCER_TIMEOUT_SECONDS) {
    throw new ChaosError(
      `producerTimeoutSeconds ${o.producerTimeoutSeconds} is below ${MIN_PRODUCER_TIMEOUT_SECONDS}: the producer keeps 20 s in reserve before each page, so its steps would publish nothing`,
    );
  }
  return o;
}

/** The wiring before the session opens: the endpoints and the job's names are filled in as the run's parts start. */
function newWiring(plan: () => RunPlan | undefined, faults: ChaosFaults): Wiring {
  return {
    plan,
    faults,
    dynamoEndpoint: '',
    s3Endpoint: '',
    queueUrl: '',
    consumerName: '',
    producerName: '',
    pendingSends: new Set(),
    sendErrors: [],
  };
}

/** The deployed chaos job with its faults armed (wireJob's result). */
type WiredJob = ReturnType<typeof wireJob>;

/** What every phase of the run reads: its options, its settings with the defaults applied, its faults, its start. */
interface RunContext {
  options: ChaosOptions;
  o: RunSettings;
  faults: ChaosFaults;
  /** When the run started (ms): the storms' times and the settle deadline count from it. */
  started: number;
  say: (line: string) => void;
}

/** Warms the job's functions, seeds the fixture's operations and starts both event sources: the faults are on. */
async function seedAndStart(
  session: LocalSession,
  { run, job }: WiredJob,
  w: Wiring,
  { options, o, say }: RunContext,
): Promise<SeededDemo> {
  await session.stack.runtime.prewarm(
    new Map([
      [w.consumerName, 4],
      [w.producerName, 2],
    ]),
  );
  const seeded = await session.seed(run.job, options.ops, o.businessDate);
  if (seeded.expectedOperations.length === 0)
    throw new ChaosError(`the ${run.job} fixture seeded no operations for ${options.ops} (${seeded.summary})`);
  say(`seeded ${seeded.summary} for ${o.businessDate}; faults on`);
  job.mapping.start();
  job.admissionMapping.start();
  return seeded;
}

/** What the fault phase leaves for the result: whether the run settled, when it began and ended, where work waited. */
interface FaultPhase {
  settled: boolean;
  firedAt: number;
  faultsOffAt: number;
  perSecond: number;
  busy: { busy: Span[]; busyAnyDepth: Span[] };
}

/**
 * Drives the run under faults until it settles, then turns the faults off and redrives the DLQ.
 * @throws ChaosError when an injected send failed.
 */
async function faultPhase(
  session: LocalSession,
  { run, job, producerFaults }: WiredJob,
  w: Wiring,
  { options, o, faults, started, say }: RunContext,
): Promise<FaultPhase> {
  // When work waited (a second's allowance or more), sampled until the faults end (chaos/pacing.ts).
  const perSecond = job.settings.rateLimit.startsPerInterval / job.settings.rateLimit.intervalSeconds;
  const sampler = sampleBusy(session, job, perSecond);
  const firedAt = Date.now();
  await driveRun(session, job, run, options, o, faults, producerFaults);
  const waiting = settleContext(session, job, run, w, started + run.timeoutSeconds * 1000, say);
  let settled = await settle(waiting);
  await sampler.stop();
  faults.on = false;
  job.downstream?.setFaults(undefined);
  const faultsOffAt = Date.now();
  settled = (await redriveAfterFaults(session, job, faults, waiting)) && settled;
  if (w.sendErrors.length > 0)
    throw new ChaosError(`${w.sendErrors.length} injected sends failed: ${w.sendErrors[0].message}`, {
      cause: w.sendErrors[0],
    });
  return { settled, firedAt, faultsOffAt, perSecond, busy: sampler };
}

/** The counts only the run's end knows: requests the proxies forwarded, Lambda timeouts, steps dead-lettered. */
async function countAfterRun(
  session: LocalSession,
  { run, job, producerFaults, producerDlqUrl }: WiredJob,
  w: Wiring,
  proxies: { dynamoProxy: DynamoFaultProxy; s3Proxy: S3FaultProxy },
  say: (line: string) => void,
): Promise<void> {
  const { faults } = w;
  faults.counts.dynamoRequestsForwarded = proxies.dynamoProxy.forwarded;
  if (run.buckets) faults.counts.s3RequestsForwarded = proxies.s3Proxy.forwarded;
  faults.counts.lambdaTimeouts = session.stack.runtime.get(w.consumerName).timeoutCount;
  producerFaults.counts.stepsDeadLettered = await stepsDeadLettered(
    session,
    job,
    run,
    producerFaults,
    producerDlqUrl,
    say,
  );
}

/** The run's result: the verdict, the counts, the pacing against the storms and the charts. */
function chaosResult(
  session: LocalSession,
  { run, job, producerFaults }: WiredJob,
  { options, o, faults, started, say }: RunContext,
  judged: { seeded: SeededDemo; verdict: Verdict; phase: FaultPhase },
): ChaosResult {
  const { seeded, verdict, phase } = judged;
  const stormSpans = o.stormShare > 0 ? faults.storms.map(([a, b]): Span => [started + a, started + b]) : [];
  // The charts show the storms that happened: none after the faults went off (the plan runs on for an hour).
  const stormsSeen = stormSpans
    .filter(([a]) => a < phase.faultsOffAt)
    .map(([a, b]): Span => [a, Math.min(b, phase.faultsOffAt)]);
  const charts = runCharts(session, job, { fromMs: phase.firedAt, stormSpans: stormsSeen, say });
  return {
    ok: verdict.ok && phase.settled,
    job: run.job,
    seeded: seeded.summary,
    ops: options.ops,
    seed: options.seed,
    settled: phase.settled,
    durationMs: Date.now() - started,
    invariants: verdict.invariants,
    faultsInjected: faults.counts,
    producerFaults: { ...producerFaults.counts },
    admission: run.admission,
    ...runPacing(job, stormSpans, phase.perSecond, phase.busy),
    ...charts,
  };
}

export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const started = Date.now();
  const say = options.log ?? (() => undefined);
  const cwd = resolve(options.cwd);
  const o = runSettings(options);
  const planner = runPlanner(cwd, options, o, say);
  const faults = new ChaosFaults(options.seed, o, started);
  const { log, close: closeLog } = runLog(cwd, options.seed, say);
  const w = newWiring(planner.plan, faults);
  const ctx: RunContext = { options, o, faults, started, say };
  const proxies = faultProxies(w);
  const { dynamoProxy, s3Proxy } = proxies;
  try {
    await dynamoProxy.start();
    await s3Proxy.start();
    [w.dynamoEndpoint, w.s3Endpoint] = [dynamoProxy.endpoint, s3Proxy.endpoint];
    const session = (w.session = await LocalSession.open(sessionOptions(cwd, options, o, w, planner.prepare, log)));
    const wired = wireJob(session, planner.plan(), w, o);
    const seeded = await seedAndStart(session, wired, w, ctx);
    const phase = await faultPhase(session, wired, w, ctx);
    const verdict = await judge(session, wired.job, wired.run, seeded, o, faults);
    await countAfterRun(session, wired, w, proxies, say);
    return chaosResult(session, wired, ctx, { seeded, verdict, phase });
  } finally {
    await w.session?.close();
    await dynamoProxy.close();
    await s3Proxy.close();
    await closeLog();
  }
}

/**
 * The run's charts, from the fake downstream's log (exact starts and 429s) and the session's metrics (what CloudWatch
 * would hold: the functions' EMF lines, every queue's depth). A failure to build them is reported in the result and
 * said on the log; it never costs the run its verdict.
 */
function runCharts(
  session: LocalSession,
  job: CompleteJob,
  o: { fromMs: number; stormSpans: Span[]; say: (line: string) => void },
): Pick<ChaosResult, 'charts' | 'chartsError'> {
  try {
    const queueName = (url: string) => session.stack.plan.queues.find((q) => q.url === url)?.name;
    const arrivals = job.downstream?.arrivals;
    return {
      charts: chaosCharts({
        job: job.name,
        fromMs: o.fromMs,
        toMs: Date.now(),
        allowance: {
          starts: job.settings.rateLimit.startsPerInterval,
          intervalMs: job.settings.rateLimit.intervalSeconds * 1000,
        },
        sloMinutes: job.settings.slo?.completeWithinMinutes,
        starts: arrivals?.filter(isNonReplayedStart).map((a) => a.at),
        throttles: arrivals?.filter((a) => a.status === 429).map((a) => a.at),
        storms: o.stormSpans,
        // A copy: the recorder's list is live, and the session is about to close.
        samples: [...session.metrics.samples()],
        queueName: queueName(job.queueUrl),
        dlqName: queueName(job.dlqUrl),
      }),
    };
  } catch (error) {
    const message = `${(error as Error).name}: ${(error as Error).message}`;
    o.say(`the run's charts could not be built: ${message}`);
    return { chartsError: message };
  }
}

type CompleteJob = SessionJob &
  Required<
    Pick<
      SessionJob,
      | 'queueUrl'
      | 'queueArn'
      | 'dlqUrl'
      | 'dlqArn'
      | 'scheduleName'
      | 'consumer'
      | 'producer'
      | 'mapping'
      | 'admissionQueueUrl'
      | 'admissionMapping'
    >
  >;

/** The job as deployed, with every part a chaos run drives; a job missing one cannot be run. */
function completeJob(job: SessionJob, stackName: string): CompleteJob {
  const parts = [
    'queueUrl',
    'queueArn',
    'dlqUrl',
    'dlqArn',
    'scheduleName',
    'consumer',
    'producer',
    'mapping',
    'admissionQueueUrl',
    'admissionMapping',
  ] as const;
  const missing = parts.filter((p) => job[p] === undefined);
  if (missing.length > 0)
    throw new ChaosError(
      `stack ${stackName}'s job ${job.name} is not complete for a chaos run (missing: ${missing.join(', ')})`,
    );
  return job as CompleteJob;
}

function operationIdOf(body: string): string | undefined {
  try {
    const id = (JSON.parse(body) as { operationId?: unknown }).operationId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    // Not a message of the contract: nothing to duplicate.
    return undefined;
  }
}

/** What settle watches, and how it recovers a stopped chain. */
interface SettleContext {
  session: LocalSession;
  job: string;
  producerName: string;
  pending: Set<Promise<unknown>>;
  deadline: number;
  say: (line: string) => void;
  /** Sends the step message that takes a stopped chain on. */
  recover: (item: RunLedgerItem) => Promise<void>;
}

/**
 * The session's wait (queues empty, every run finished and admitted, nothing running, no injected send pending), with
 * what only a chaos run needs on each poll: a run whose chain has stopped (its next step lost to the producer DLQ:
 * due, unleased, nothing in the admission queue, no producer running) is seen on two polls in a row, then recovered.
 */
async function settle(c: SettleContext): Promise<boolean> {
  let lastSay = 0;
  const stoppedSeen = new Map<string, number>();
  const onPoll = async (states: Map<string, JobState>): Promise<void> => {
    const state = states.get(c.job)!;
    const producer = c.session.stack.runtime.get(c.producerName);
    const producerIdle =
      producer.inFlight === 0 && producer.pendingAsync === 0 && c.session.stack.scheduler.pending === 0;
    const look = state.admissionQueue.total === 0 && producerIdle && state.ledger.admitting > 0;
    const stopped = look
      ? stoppedChains(
          (await c.session.ledgerItems(c.job, LedgerItemKind.batch)) as unknown as RunLedgerItem[],
          Date.now(),
          1000,
        )
      : [];
    for (const id of [...stoppedSeen.keys()]) if (!stopped.some((r) => batchIdOf(r) === id)) stoppedSeen.delete(id);
    for (const run of stopped) {
      const seen = (stoppedSeen.get(batchIdOf(run)) ?? 0) + 1;
      stoppedSeen.set(batchIdOf(run), seen);
      if (seen < 2) continue;
      stoppedSeen.delete(batchIdOf(run));
      await c.recover(run);
    }
    if (Date.now() - lastSay > 5000) {
      lastSay = Date.now();
      const running = c.session.stack.runtime.list().reduce((n, f) => n + f.inFlight, 0);
      c.say(
        `queue ${state.queue.total}, admission steps ${state.admissionQueue.total}, runs admitting ${state.ledger.admitting}, running ${running}`,
      );
    }
  };
  return c.session.settle({ deadline: c.deadline, jobs: [c.job], pending: () => c.pending.size > 0, onPoll });
}
