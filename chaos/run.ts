// Chaos harness, the run: deploys the synthesized dev stack on the local runtime (bundled functions, embedded AWS
// servers), drives the payment job through one business date while injecting seeded faults (at the consumer, the
// provider, DynamoDB, and the producer's chain of admission steps), recovers a stopped chain as an operator would,
// switches the faults off, redrives the DLQ, waits to settle and checks the invariants. Everything random comes from
// one seed.
import { createWriteStream, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand, StartMessageMoveTaskCommand } from '@aws-sdk/client-sqs';
import { ensureStack } from '../local/assembly';
import { loadTemplate, type CloudFormationTemplate } from '../local/template';
import { LocalStack } from '../local/stack';
import { PaymentProvider, type ProviderFault } from '../local/provider';
import { seedDemoData } from '../local/seed';
import { jobViews } from '../local/run';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import { Prng, keyedDraw } from './prng';
import { DynamoFaultProxy, type DynamoFault } from './dynamoProxy';
import { checkInvariants, type DlqMessage, type LedgerBatch, type Verdict } from './invariants';
import { admissionStepOf, ProducerFaultInjector, producerMessagesByBatch, recoveryStepBody, stoppedChains, type ProducerFaultCounts, type RunLedgerItem } from './producerFaults';

export const CHAOS_JOB = 'payment-reconciliation';

/** Fault rates (probabilities per opportunity) and the local timing the run uses. */
export interface ChaosOptions {
  ops: number;
  seed: number;
  /** Project root (cdk.json). */
  cwd: string;
  /** @default "dev" */
  env?: string;
  /** Business date of the run; fixed so a seed reproduces the same operations. @default "2026-01-15" */
  businessDate?: string;
  /** The payment job's start rate per minute for this run (the limiter and the provider's quota). @default 1200 */
  ratePerMinute?: number;
  /** The consumer's Lambda timeout locally, seconds (the queue's visibility timeout follows it). @default 20 */
  consumerTimeoutSeconds?: number;
  /** Per published message: re-send copies. @default 0.05 */
  duplicateRate?: number;
  /** Producer re-runs of the same business date. @default 1 */
  producerReruns?: number;
  /** Per consumer invocation: kill the execution environment at a random point. @default 0.03 */
  killRate?: number;
  /** Per provider request: 5xx before the effect. @default 0.03 */
  providerErrorRate?: number;
  /** Per provider request: extra latency before the effect. @default 0.05 */
  slowRate?: number;
  /** Per provider request: effect applied, answer held past the caller's remaining time. @default 0.02 */
  hangAfterEffectRate?: number;
  /** Per provider request: held, then the connection dropped without an effect. @default 0.01 */
  dropBeforeEffectRate?: number;
  /** Share of the fault phase spent in 429 storms. @default 0.1 */
  stormShare?: number;
  /** Per DynamoDB request from the functions: a throttling or internal error. @default 0.02 */
  dynamoFaultRate?: number;
  /**
   * Per consumer claim (PutItem) or pre-check (BatchGetItem): the request stalls, never answered, so the invocation
   * runs into its Lambda timeout. @default 0.002
   */
  dynamoStallRate?: number;
  /** Poison messages per operation. @default 0.01 (at least 1) */
  poisonRate?: number;
  /**
   * Per producer invocation (the first attempt of a direct step 0, the first receive of an admission step): kill it
   * right after its first or second SendMessageBatch call of a page, before the page is committed. @default 0.2
   */
  producerKillRate?: number;
  /**
   * Admission steps (continuations, step 1 or 2 on) made to fail on every receive until SQS dead-letters them to the
   * producer DLQ; the harness then finds the stopped chain and sends a step message for it, as an operator would.
   * @default 1
   */
  producerDeadLetters?: number;
  /** Schedule deliveries fired a second time for the same scheduled time (the same batch). @default 1 */
  duplicateSchedules?: number;
  /**
   * The payment job's producer timeout locally, seconds: the lease of a killed step lasts this long. At least
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
  ops: number;
  seed: number;
  settled: boolean;
  durationMs: number;
  faultsInjected: Record<string, number>;
  /** Absent in a result recorded before the producer's faults existed. */
  producerFaults?: ProducerFaultCounts;
  /** The admission timing the run used (after defaults), which the producer's recovery times follow. */
  admission?: AdmissionTiming;
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

/** Bodies the consumer must reject and keep for review: not JSON, wrong shape, wrong version, hostile IDs. */
export const POISON_BODIES: readonly string[] = [
  'not json at all',
  '{}',
  '{"v":99,"jobType":"payment-reconciliation"}',
  JSON.stringify({ v: 1, jobType: 'payment-reconciliation', operationId: 'x'.repeat(5000) }),
  JSON.stringify({ v: 1, jobType: 'no-such-job', operationId: 'op-1', batchId: 'b-1' }),
  JSON.stringify({ v: 1, jobType: 'payment-reconciliation', operationId: "'; DROP TABLE payments; --", batchId: '\u0000\u0007' }),
  '[1,2,3]',
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type TemplateResource = { Type: string; Properties: Record<string, any> };

/** The chaos job's resources in the template, found through its functions' environment (JOB_NAME, the queue Refs). */
export function chaosJobResources(template: CloudFormationTemplate): { producer: TemplateResource; consumer: TemplateResource; queue: TemplateResource; admissionQueue: TemplateResource } {
  const resources = template.Resources as Record<string, TemplateResource>;
  const functions = Object.values(resources).filter((r) => r.Type === 'AWS::Lambda::Function' && r.Properties?.Environment?.Variables?.JOB_NAME === CHAOS_JOB);
  const consumer = functions.find((r) => r.Properties.Environment.Variables.IDEMPOTENCY_TABLE_NAME);
  const producer = functions.find((r) => !r.Properties.Environment.Variables.IDEMPOTENCY_TABLE_NAME);
  const ref = (fn: TemplateResource | undefined, name: string) => resources[(fn?.Properties.Environment.Variables[name] as { Ref?: string } | undefined)?.Ref ?? ''];
  const queue = ref(consumer, 'QUEUE_URL');
  const admissionQueue = ref(producer, 'ADMISSION_QUEUE_URL');
  if (!producer || !consumer || queue?.Type !== 'AWS::SQS::Queue' || admissionQueue?.Type !== 'AWS::SQS::Queue') {
    throw new ChaosError(`the template has no complete ${CHAOS_JOB} job (producer, consumer, their QUEUE_URL and ADMISSION_QUEUE_URL queues)`);
  }
  return { producer, consumer, queue, admissionQueue };
}

/** What the stack gives the admission queue: its visibility margin over the producer's timeout, and its receives. */
export function templateAdmission(template: CloudFormationTemplate): { visibilityMarginSeconds: number; maxReceiveCount: number } {
  const { producer, admissionQueue } = chaosJobResources(template);
  const policy = admissionQueue.Properties.RedrivePolicy as { maxReceiveCount?: number } | undefined;
  return { visibilityMarginSeconds: Number(admissionQueue.Properties.VisibilityTimeout) - Number(producer.Properties.Timeout), maxReceiveCount: Number(policy?.maxReceiveCount) };
}

/**
 * The dev stack, retimed for a local chaos run: a short consumer timeout (and its queue's visibility), a short producer
 * timeout with the admission queue's visibility and receives to match, a small admission horizon, no batching wait,
 * the rate.
 */
export function retimeTemplate(
  template: CloudFormationTemplate,
  o: { consumerTimeoutSeconds: number; ratePerMinute: number; admission: AdmissionTiming },
): CloudFormationTemplate {
  const copy = JSON.parse(JSON.stringify(template)) as CloudFormationTemplate;
  const job = chaosJobResources(copy);
  for (const r of [job.producer, job.consumer]) {
    const vars = r.Properties.Environment.Variables as Record<string, unknown>;
    if (typeof vars.JOB_SETTINGS !== 'string') continue;
    const settings = JSON.parse(vars.JOB_SETTINGS) as JobRuntimeSettings;
    settings.rateLimit = { ...settings.rateLimit, startsPerInterval: o.ratePerMinute, intervalSeconds: 60 };
    if (settings.admission) settings.admission = { ...settings.admission, horizonSeconds: o.admission.horizonSeconds };
    vars.JOB_SETTINGS = JSON.stringify(settings);
  }
  job.consumer.Properties.Timeout = o.consumerTimeoutSeconds;
  job.queue.Properties.VisibilityTimeout = o.consumerTimeoutSeconds + 2;
  job.producer.Properties.Timeout = o.admission.producerTimeoutSeconds;
  job.admissionQueue.Properties.VisibilityTimeout = o.admission.visibilitySeconds;
  job.admissionQueue.Properties.RedrivePolicy = { ...job.admissionQueue.Properties.RedrivePolicy, maxReceiveCount: o.admission.maxReceiveCount };
  for (const r of Object.values(copy.Resources as Record<string, TemplateResource>)) {
    if (r.Type === 'AWS::Lambda::EventSourceMapping') r.Properties.MaximumBatchingWindowInSeconds = 0;
  }
  return copy;
}

/** Every default of ChaosOptions but the settle timeout (which depends on the run): the CLI shows these too. */
export const CHAOS_DEFAULTS = {
  env: 'dev',
  businessDate: '2026-01-15',
  ratePerMinute: 1200,
  consumerTimeoutSeconds: 20,
  duplicateRate: 0.05,
  producerReruns: 1,
  killRate: 0.03,
  providerErrorRate: 0.03,
  slowRate: 0.05,
  hangAfterEffectRate: 0.02,
  dropBeforeEffectRate: 0.01,
  stormShare: 0.1,
  dynamoFaultRate: 0.02,
  dynamoStallRate: 0.002,
  poisonRate: 0.01,
  producerKillRate: 0.2,
  producerDeadLetters: 1,
  duplicateSchedules: 1,
  producerTimeoutSeconds: 30,
};

/** `defaults`, with every value `given` sets (undefined leaves the default). */
function withDefaults<T extends object>(defaults: T, given: Partial<T>): T {
  const out = { ...defaults };
  for (const key of Object.keys(defaults) as (keyof T)[]) if (given[key] !== undefined) out[key] = given[key] as T[keyof T];
  return out;
}

/**
 * The default settle timeout: 900 s, or four times the least time the limiter lets `ops` operations start in (plus the
 * faults, the re-runs and the redrive), whichever is longer; and on top, the producer's recoveries: a dead-lettered
 * step's receives, each one visibility timeout apart, and two more for the killed steps. It only stops a run that
 * would never settle.
 */
export function defaultTimeoutSeconds(ops: number, ratePerMinute: number, admission: { visibilitySeconds: number; maxReceiveCount: number }): number {
  return Math.max(900, Math.ceil((4 * ops * 60) / ratePerMinute)) + (admission.maxReceiveCount + 2) * admission.visibilitySeconds;
}

/**
 * The default admission horizon: a quarter of the least time the run's work takes at the rate (2 s at least), so a run
 * of any size is a chain of several steps for the producer's faults to hit.
 */
export function defaultHorizonSeconds(ops: number, ratePerMinute: number): number {
  return Math.min(300, Math.max(2, Math.round((ops * 60) / ratePerMinute / 4)));
}

export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const started = Date.now();
  const say = options.log ?? (() => undefined);
  const cwd = resolve(options.cwd);
  const base = withDefaults(CHAOS_DEFAULTS, options);
  if (base.producerTimeoutSeconds < MIN_PRODUCER_TIMEOUT_SECONDS) {
    throw new ChaosError(`producerTimeoutSeconds ${base.producerTimeoutSeconds} is below ${MIN_PRODUCER_TIMEOUT_SECONDS}: the producer keeps 20 s in reserve before each page, so its steps would publish nothing`);
  }
  const artifact = ensureStack({ env: base.env, assemblyDir: 'cdk.out', cwd, log: say, synth: false });
  const deployed = loadTemplate(artifact.templateFile);
  const stackAdmission = templateAdmission(deployed);
  const admission: AdmissionTiming = {
    producerTimeoutSeconds: base.producerTimeoutSeconds,
    horizonSeconds: options.admissionHorizonSeconds ?? defaultHorizonSeconds(options.ops, base.ratePerMinute),
    visibilitySeconds: options.admissionVisibilitySeconds ?? base.producerTimeoutSeconds + stackAdmission.visibilityMarginSeconds,
    maxReceiveCount: options.admissionMaxReceiveCount ?? stackAdmission.maxReceiveCount,
  };
  // A step redelivered while its killed holder's lease still runs is turned away as in progress, and its chain stops.
  if (admission.visibilitySeconds <= admission.producerTimeoutSeconds) {
    throw new ChaosError(`admissionVisibilitySeconds ${admission.visibilitySeconds} must exceed producerTimeoutSeconds ${admission.producerTimeoutSeconds}, or a killed step's redelivery finds its lease still held`);
  }
  const o = { ...base, timeoutSeconds: options.timeoutSeconds ?? defaultTimeoutSeconds(options.ops, base.ratePerMinute, admission) };
  const dice = new Prng(options.seed);
  const dupDice = dice.fork('duplicates');
  const killDice = dice.fork('kills');
  const ddbDice = dice.fork('dynamodb');
  const stallDice = dice.fork('stalls');
  const planDice = dice.fork('plan');
  const producerFaults = new ProducerFaultInjector({
    jobName: CHAOS_JOB,
    killRate: o.producerKillRate,
    deadLetters: o.producerDeadLetters,
    dice: dice.fork('producer'),
    isOn: () => faultsOn,
  });
  const faults: Record<string, number> = {
    duplicatedMessages: 0,
    duplicateCopies: 0,
    producerReruns: 0,
    workerKillsArmed: 0,
    providerStormThrottles: 0,
    providerErrors: 0,
    providerSlow: 0,
    providerHangsAfterEffect: 0,
    providerDropsBeforeEffect: 0,
    dynamoThrottles: 0,
    dynamoErrors: 0,
    dynamoStalls: 0,
    lambdaTimeouts: 0,
    poisonMessages: 0,
    dlqBeforeRedrive: 0,
    redriven: 0,
  };
  let faultsOn = true;

  const localDir = join(cwd, '.local', 'chaos');
  mkdirSync(localDir, { recursive: true });
  const logFile = createWriteStream(join(localDir, `run-${options.seed}.log`), { flags: 'w' });
  const log = (source: string, line: string) => logFile.write(`${source} ${line}\n`);

  const template = retimeTemplate(deployed, { ...o, admission });

  // 429 storms: windows in the fault phase's timeline (relative ms), planned from the seed up front.
  const storms: [number, number][] = [];
  for (let t = planDice.int(500, 3000); t < 3_600_000; t += planDice.int(4000, 12000)) {
    const length = Math.round(planDice.int(500, 2000) * (o.stormShare / 0.1));
    storms.push([t, t + length]);
  }
  const attemptsPerKey = new Map<string, number>();
  const providerFault = (r: { idempotencyKey: string; at: number }): ProviderFault | undefined => {
    if (!faultsOn) return undefined;
    const rel = r.at - started;
    if (o.stormShare > 0 && storms.some(([a, b]) => rel >= a && rel < b)) {
      faults.providerStormThrottles++;
      return { kind: 'throttle', retryAfterSeconds: 1 };
    }
    const attempt = (attemptsPerKey.get(r.idempotencyKey) ?? 0) + 1;
    attemptsPerKey.set(r.idempotencyKey, attempt);
    // Keyed on the operation and its attempt: the same request meets the same fault whatever the interleaving.
    let u = keyedDraw(options.seed, `${r.idempotencyKey}#${attempt}`);
    if ((u -= o.providerErrorRate) < 0) {
      faults.providerErrors++;
      return { kind: 'error', status: ([500, 502, 503] as const)[attempt % 3] };
    }
    if ((u -= o.slowRate) < 0) {
      faults.providerSlow++;
      return { kind: 'slow', delayMs: 100 + Math.round(keyedDraw(options.seed, `${r.idempotencyKey}#${attempt}#slow`) * 700) };
    }
    if ((u -= o.hangAfterEffectRate) < 0) {
      faults.providerHangsAfterEffect++;
      return { kind: 'hangAfterEffect', delayMs: (o.consumerTimeoutSeconds + 2) * 1000 };
    }
    if ((u -= o.dropBeforeEffectRate) < 0) {
      faults.providerDropsBeforeEffect++;
      return { kind: 'dropBeforeEffect', delayMs: 300 };
    }
    return undefined;
  };

  const provider = new PaymentProvider({ startsPerWindow: o.ratePerMinute, windowSeconds: 60, maxConcurrent: 10, faults: providerFault });
  let stack: LocalStack | undefined;
  const proxy = new DynamoFaultProxy({
    target: () => stack!.endpoints.dynamodb,
    decide: (operation): DynamoFault | undefined => {
      // Only the consumer claims (PutItem) and pre-checks (BatchGetItem): a stall there times out a consumer invocation,
      // never the producer.
      if (faultsOn && (operation === 'PutItem' || operation === 'BatchGetItem') && stallDice.chance(o.dynamoStallRate)) {
        faults.dynamoStalls++;
        return 'Stall';
      }
      if (!faultsOn || !ddbDice.chance(o.dynamoFaultRate)) return undefined;
      const fault = ddbDice.pick(['ProvisionedThroughputExceededException', 'ThrottlingException', 'InternalServerError'] as const);
      if (fault === 'InternalServerError') faults.dynamoErrors++;
      else faults.dynamoThrottles++;
      return fault;
    },
  });

  let queueUrl = '';
  let consumerName = '';
  let producerName = '';
  const pendingSends = new Set<Promise<unknown>>();
  const track = (p: Promise<unknown>) => {
    pendingSends.add(p);
    void p.finally(() => pendingSends.delete(p));
  };
  const sendErrors: Error[] = [];
  // One decision per operation: deferrals re-publish the same operation, and duplicating those too would multiply
  // copies of copies under a backlog.
  const considered = new Set<string>();
  const duplicate = (body: string) => {
    const operationId = operationIdOf(body);
    if (!faultsOn || operationId === undefined || considered.has(operationId)) return;
    considered.add(operationId);
    if (!dupDice.chance(o.duplicateRate)) return;
    faults.duplicatedMessages++;
    const copies = dupDice.int(1, 3);
    for (let i = 0; i < copies; i++) {
      faults.duplicateCopies++;
      const delay = dupDice.int(0, 3);
      track(stack!.sqs().send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body, DelaySeconds: delay })).catch((e: Error) => sendErrors.push(e)));
    }
  };

  stack = new LocalStack({
    template,
    stackName: artifact.stackName,
    assemblyDir: artifact.assemblyDir,
    log,
    killAfterMs: (fn) => {
      if (!faultsOn || fn !== consumerName || !killDice.chance(o.killRate)) return undefined;
      faults.workerKillsArmed++;
      return killDice.int(0, 1500);
    },
    onInvoke: (fn, event, invocation) => {
      if (fn === producerName) producerFaults.onInvoke(event, invocation);
    },
    onRequest: (service, r) => {
      // Published messages, read off the wire as SQS received them: the copies are the very same bodies.
      if (service !== 'sqs' || r.status >= 300 || !String(r.headers['x-amz-target'] ?? '').endsWith('.SendMessageBatch')) return;
      try {
        const req = JSON.parse(r.body) as { QueueUrl?: string; Entries?: { MessageBody: string }[] };
        if (req.QueueUrl !== queueUrl) return;
        // The producer's own pages: where its armed kills strike, and how re-published pages are counted.
        for (const [batchId, operationIds] of producerMessagesByBatch(req.Entries ?? [])) producerFaults.onPublish(batchId, operationIds);
        for (const e of req.Entries ?? []) duplicate(e.MessageBody);
      } catch (error) {
        sendErrors.push(new ChaosError(`could not read a SendMessageBatch request: ${(error as Error).message}`, { cause: error }));
      }
    },
    environmentOverride: (_fn, env) => {
      const out = { ...env, AWS_ENDPOINT_URL_DYNAMODB: proxy.endpoint };
      if (!env.JOB_SETTINGS) return out;
      const settings = JSON.parse(env.JOB_SETTINGS) as JobRuntimeSettings;
      if (settings.settings.providerBaseUrl === undefined) return out;
      settings.settings.providerBaseUrl = provider.endpoint;
      return { ...out, JOB_SETTINGS: JSON.stringify(settings) };
    },
  });

  let docs: DynamoDBDocumentClient | undefined;
  try {
    await provider.start();
    await proxy.start();
    await stack.start();
    docs = DynamoDBDocumentClient.from(new DynamoDBClient(stack.clientConfig('dynamodb')));
    const job = jobViews(stack.plan, stack.mappings).get(CHAOS_JOB);
    if (!job?.queueUrl || !job.dlqUrl || !job.queueArn || !job.dlqArn || !job.scheduleName || !job.consumer || !job.producer || !job.admissionQueueUrl || !job.admissionMapping) {
      throw new ChaosError(`the ${o.env} stack has no complete ${CHAOS_JOB} job (schedule, producer, admission queue and mapping, queue, DLQ, consumer)`);
    }
    queueUrl = job.queueUrl;
    consumerName = job.consumer.name;
    producerName = stack.runtime.get(job.producer.arn).spec.name;
    const admissionQueue = stack.plan.queues.find((q) => q.url === job.admissionQueueUrl);
    if (!admissionQueue?.deadLetterTargetArn) throw new ChaosError(`the ${CHAOS_JOB} admission queue has no producer DLQ (RedrivePolicy)`);
    const producerDlqUrl = stack.queueUrl(admissionQueue.deadLetterTargetArn);
    for (const alias of Object.values(job.settings.secrets)) {
      const secret = stack.secrets.find(alias);
      if (secret) provider.allowApiKey(secret.value);
    }
    await stack.runtime.prewarm(new Map([[job.consumer.name, 4], [producerName, 2]]));
    const ddb = new DynamoDBClient(stack.clientConfig('dynamodb'));
    const s3 = new S3Client(stack.clientConfig('s3'));
    const seeded = await seedDemoData({ dynamodb: ddb, s3, businessDate: o.businessDate, jobs: new Map([[CHAOS_JOB, job.settings]]) }, { payments: options.ops, uploads: 0, tenants: 0 });
    ddb.destroy();
    s3.destroy();
    say(`seeded ${seeded.paymentIds.length} payments for ${o.businessDate}; faults on`);
    const mapping = stack.mappings.find((m) => m.config.functionName === job.consumer!.name)!;
    mapping.start();
    job.admissionMapping.start();

    const fire = async (scheduledTime: Date) => {
      const result = await stack!.scheduler.fire(job.scheduleName!, { scheduledTime, businessDate: o.businessDate });
      if (!result.delivered) throw new ChaosError(`schedule ${job.scheduleName} could not deliver to its producer: ${result.error}`);
    };
    // Whole seconds, as the Scheduler's times are: the batch ID keeps only seconds.
    const scheduledTime = new Date(Math.floor(Date.now() / 1000) * 1000);
    await fire(scheduledTime);
    for (let i = 0; i < o.duplicateSchedules; i++) {
      // At once, while step 0 holds the lease (the copy leaves a takeover step), or after it (the copy finds the run
      // past step 0): either way the copy admits nothing.
      await sleep(planDice.chance(0.5) ? 0 : planDice.int(200, 1500));
      await fire(scheduledTime);
      producerFaults.counts.duplicateSchedules++;
    }
    for (let i = 0; i < o.producerReruns; i++) {
      await sleep(planDice.int(500, 3000));
      // A later scheduled time, so a re-run is a new batch of the same date, never the schedule's duplicate.
      await fire(new Date(Math.max(Math.floor(Date.now() / 1000) * 1000, scheduledTime.getTime() + (i + 1) * 1000)));
      faults.producerReruns++;
    }
    const poison = Math.max(1, Math.round(options.ops * o.poisonRate));
    for (let i = 0; i < poison; i++) {
      await stack.sqs().send(new SendMessageCommand({ QueueUrl: job.queueUrl, MessageBody: POISON_BODIES[i % POISON_BODIES.length] }));
      faults.poisonMessages++;
    }

    const deadline = started + o.timeoutSeconds * 1000;
    const ledgerTable = job.consumer.environment.LEDGER_TABLE_NAME;
    const waiting: SettleContext = {
      stack,
      queueUrl: job.queueUrl,
      admissionQueueUrl: job.admissionQueueUrl,
      producerName,
      pending: pendingSends,
      deadline,
      say,
      runs: async () => (await queryAll(docs!, ledgerTable, `BATCH#${CHAOS_JOB}`)) as unknown as RunLedgerItem[],
      recover: async (item) => {
        const sent = await stack!.sqs().send(new SendMessageCommand({ QueueUrl: job.admissionQueueUrl, MessageBody: recoveryStepBody(item) }));
        producerFaults.exemptMessage(sent.MessageId!);
        producerFaults.counts.recoveredChains++;
        say(`run ${item.sk} stopped at admission step ${item.step} (due ${item.nextStepAt ?? item.startedAt}, nothing in the admission queue); sent a step ${item.step} message, as an operator would`);
      },
    };
    let settled = await settle(waiting);
    faultsOn = false;
    const before = await depth(stack, job.dlqUrl);
    faults.dlqBeforeRedrive = before;
    say(`faults off; ${before} messages in the DLQ; redriving`);
    if (before > 0) {
      await stack.sqs().send(new StartMessageMoveTaskCommand({ SourceArn: job.dlqArn, DestinationArn: job.queueArn }));
      faults.redriven = before;
      for (let i = 0; i < 40 && (await depth(stack, job.dlqUrl)) > 0; i++) await sleep(250);
      settled = (await settle(waiting)) && settled;
    }
    if (sendErrors.length > 0) throw new ChaosError(`${sendErrors.length} injected sends failed: ${sendErrors[0].message}`, { cause: sendErrors[0] });

    const batchItems = await queryAll(docs, ledgerTable, `BATCH#${CHAOS_JOB}`);
    const rejections = await queryAll(docs, ledgerTable, `REJECTED#${CHAOS_JOB}`);
    const batches: LedgerBatch[] = batchItems.map((i) => ({
      batchId: String(i.sk),
      discovered: Number(i.discovered ?? 0),
      published: Number(i.published ?? 0),
      completed: Number(i.completed ?? 0),
      duplicates: Number(i.duplicates ?? 0),
      rejected: Number(i.rejected ?? 0),
      deadLettered: Number(i.deadLettered ?? 0),
      admission: typeof i.admission === 'string' ? i.admission : undefined,
    }));
    const dlq = await readDlq(stack, job.dlqUrl, 60);
    const verdict = checkInvariants({
      expectedOperations: seeded.paymentIds,
      effects: provider.effects,
      arrivals: provider.arrivals,
      replays: provider.replays,
      rateLimit: { startsPerInterval: o.ratePerMinute, intervalSeconds: 60 },
      batches,
      rejectedMessageIds: rejections.map((r) => String(r.messageId)),
      poisonInjected: faults.poisonMessages,
      queueLeft: await depth(stack, job.queueUrl),
      dlq,
      dlqOperations: dlq.flatMap((m) => paymentIdOf(m.body) ?? []),
    });
    faults.dynamoRequestsForwarded = proxy.forwarded;
    faults.lambdaTimeouts = stack.runtime.get(job.consumer.name).timeoutCount;
    // What SQS moved: the doomed steps' messages, left in the producer DLQ (the alarm an operator answered). The
    // schedule dead-letters there too; only admission steps count.
    producerFaults.counts.stepsDeadLettered = (await readDlq(stack, producerDlqUrl, 60)).filter((m) => admissionStepOf(m.body)).length;
    return {
      ok: verdict.ok && settled,
      ops: options.ops,
      seed: options.seed,
      settled,
      durationMs: Date.now() - started,
      invariants: verdict.invariants,
      faultsInjected: faults,
      producerFaults: { ...producerFaults.counts },
      admission,
    };
  } finally {
    docs?.destroy();
    await stack.stop();
    await proxy.close();
    await provider.close();
    await new Promise((r) => logFile.end(r));
  }
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

function paymentIdOf(body: string): string | undefined {
  try {
    const m = JSON.parse(body) as { resource?: { paymentId?: unknown } };
    const id = m.resource?.paymentId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    // Not JSON: no payment to name; the DLQ invariant still sees the message itself.
    return undefined;
  }
}

async function queryAll(docs: DynamoDBDocumentClient, table: string | undefined, pk: string): Promise<Record<string, unknown>[]> {
  if (!table) throw new ChaosError('the consumer has no LEDGER_TABLE_NAME');
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await docs.send(new QueryCommand({ TableName: table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ExclusiveStartKey: start }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}

async function depth(stack: LocalStack, url: string): Promise<number> {
  const a = await stack.sqs().send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'] }),
  );
  // local-aws-sqs counts in-flight messages in ApproximateNumberOfMessages too (see local/run.ts).
  return Number(a.Attributes?.ApproximateNumberOfMessages ?? 0) + Number(a.Attributes?.ApproximateNumberOfMessagesDelayed ?? 0);
}

/** Reads every DLQ message (each hidden for `hideSeconds`, so a page never repeats one), deduplicated by ID. */
async function readDlq(stack: LocalStack, url: string, hideSeconds: number): Promise<DlqMessage[]> {
  const seen = new Map<string, DlqMessage>();
  for (let empty = 0; empty < 2; ) {
    const page = await stack.sqs().send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: hideSeconds, MessageAttributeNames: ['All'] }),
    );
    const fresh = (page.Messages ?? []).filter((m) => !seen.has(m.MessageId!));
    for (const m of fresh) {
      seen.set(m.MessageId!, {
        body: m.Body ?? '',
        attributes: Object.fromEntries(Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue ?? ''])),
      });
    }
    empty = fresh.length === 0 ? empty + 1 : 0;
  }
  return [...seen.values()];
}

/** What settle watches, and how it recovers a stopped chain. */
interface SettleContext {
  stack: LocalStack;
  queueUrl: string;
  admissionQueueUrl: string;
  producerName: string;
  pending: Set<Promise<unknown>>;
  deadline: number;
  say: (line: string) => void;
  /** The chaos job's run-ledger items. */
  runs: () => Promise<RunLedgerItem[]>;
  /** Sends the step message that takes a stopped chain on. */
  recover: (item: RunLedgerItem) => Promise<void>;
}

/**
 * Waits until the work queue and the admission queue are empty, no run is still admitting, nothing runs and no
 * injected send is pending, twice in a row. A run whose chain has stopped (its next step lost to the producer DLQ: due,
 * unleased, nothing in the admission queue, no producer running) is seen on two polls in a row, then recovered.
 */
async function settle(c: SettleContext): Promise<boolean> {
  let quiet = 0;
  let lastSay = 0;
  const stoppedSeen = new Map<string, number>();
  while (Date.now() < c.deadline) {
    await sleep(500);
    const [left, steps, runs] = await Promise.all([depth(c.stack, c.queueUrl), depth(c.stack, c.admissionQueueUrl), c.runs()]);
    const admitting = runs.filter((r) => r.admission === 'admitting').length;
    const producer = c.stack.runtime.get(c.producerName);
    const producerIdle = producer.inFlight === 0 && producer.pendingAsync === 0 && c.stack.scheduler.pending === 0;
    const stopped = steps === 0 && producerIdle ? stoppedChains(runs, Date.now(), 1000) : [];
    for (const id of [...stoppedSeen.keys()]) if (!stopped.some((r) => r.sk === id)) stoppedSeen.delete(id);
    for (const run of stopped) {
      const seen = (stoppedSeen.get(run.sk) ?? 0) + 1;
      stoppedSeen.set(run.sk, seen);
      if (seen < 2) continue;
      stoppedSeen.delete(run.sk);
      await c.recover(run);
    }
    const busy = left > 0 || steps > 0 || admitting > 0 || !c.stack.runtime.isIdle() || c.stack.scheduler.pending > 0 || c.pending.size > 0;
    if (Date.now() - lastSay > 5000) {
      lastSay = Date.now();
      c.say(`queue ${left}, admission steps ${steps}, runs admitting ${admitting}, running ${c.stack.runtime.list().reduce((n, f) => n + f.inFlight, 0)}`);
    }
    quiet = busy ? 0 : quiet + 1;
    if (quiet >= 2) return true;
  }
  return false;
}
