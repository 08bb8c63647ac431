// Chaos harness, the run: deploys the synthesized dev stack on the local runtime (bundled functions, embedded AWS
// servers), drives the payment job through one business date while injecting seeded faults, switches the faults off,
// redrives the DLQ, waits to settle and checks the invariants. Everything random comes from one seed.
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
import { jobViews, type JobView } from '../local/run';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import { Prng, keyedDraw } from './prng';
import { DynamoFaultProxy, type DynamoFault } from './dynamoProxy';
import { checkInvariants, type DlqMessage, type LedgerBatch, type Verdict } from './invariants';

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
  /** Give up waiting for each phase to settle after this long. @default defaultTimeoutSeconds(ops, ratePerMinute) */
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
}

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

/** The dev stack, retimed for a local chaos run: a short consumer timeout (and visibility), no batching wait, the rate. */
export function retimeTemplate(template: CloudFormationTemplate, o: { consumerTimeoutSeconds: number; ratePerMinute: number }): CloudFormationTemplate {
  const copy = JSON.parse(JSON.stringify(template)) as CloudFormationTemplate;
  const resources = copy.Resources as Record<string, { Type: string; Properties: Record<string, any> }>;
  for (const r of Object.values(resources)) {
    const vars = r.Properties?.Environment?.Variables as Record<string, unknown> | undefined;
    if (r.Type === 'AWS::Lambda::Function' && typeof vars?.JOB_SETTINGS === 'string' && vars.JOB_NAME === CHAOS_JOB) {
      const settings = JSON.parse(vars.JOB_SETTINGS) as JobRuntimeSettings;
      settings.rateLimit = { ...settings.rateLimit, startsPerInterval: o.ratePerMinute, intervalSeconds: 60 };
      vars.JOB_SETTINGS = JSON.stringify(settings);
      if (vars.IDEMPOTENCY_TABLE_NAME) r.Properties.Timeout = o.consumerTimeoutSeconds;
    }
    if (r.Type === 'AWS::SQS::Queue' && r.Properties.RedrivePolicy && r.Properties.VisibilityTimeout) {
      r.Properties.VisibilityTimeout = o.consumerTimeoutSeconds + 2;
    }
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
};

/** `defaults`, with every value `given` sets (undefined leaves the default). */
function withDefaults<T extends object>(defaults: T, given: Partial<T>): T {
  const out = { ...defaults };
  for (const key of Object.keys(defaults) as (keyof T)[]) if (given[key] !== undefined) out[key] = given[key] as T[keyof T];
  return out;
}

/**
 * The default settle timeout: 900 s, or four times the least time the limiter lets `ops` operations start in (plus the
 * faults, the re-runs and the redrive), whichever is longer. It only stops a run that would never settle.
 */
export function defaultTimeoutSeconds(ops: number, ratePerMinute: number): number {
  return Math.max(900, Math.ceil((4 * ops * 60) / ratePerMinute));
}

export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const started = Date.now();
  const say = options.log ?? (() => undefined);
  const cwd = resolve(options.cwd);
  const o = {
    ...withDefaults(CHAOS_DEFAULTS, options),
    timeoutSeconds: options.timeoutSeconds ?? defaultTimeoutSeconds(options.ops, options.ratePerMinute ?? CHAOS_DEFAULTS.ratePerMinute),
  };
  const dice = new Prng(options.seed);
  const dupDice = dice.fork('duplicates');
  const killDice = dice.fork('kills');
  const ddbDice = dice.fork('dynamodb');
  const stallDice = dice.fork('stalls');
  const planDice = dice.fork('plan');
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

  const artifact = ensureStack({ env: o.env, assemblyDir: 'cdk.out', cwd, log: say, synth: false });
  const template = retimeTemplate(loadTemplate(artifact.templateFile), o);

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
    onRequest: (service, r) => {
      // Published messages, read off the wire as SQS received them: the copies are the very same bodies.
      if (service !== 'sqs' || r.status >= 300 || !String(r.headers['x-amz-target'] ?? '').endsWith('.SendMessageBatch')) return;
      try {
        const req = JSON.parse(r.body) as { QueueUrl?: string; Entries?: { MessageBody: string }[] };
        if (req.QueueUrl === queueUrl) for (const e of req.Entries ?? []) duplicate(e.MessageBody);
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

  const documents = () => DynamoDBDocumentClient.from(new DynamoDBClient(stack!.clientConfig('dynamodb')));
  try {
    await provider.start();
    await proxy.start();
    await stack.start();
    const job = jobViews(stack.plan, stack.mappings).get(CHAOS_JOB);
    if (!job?.queueUrl || !job.dlqUrl || !job.queueArn || !job.dlqArn || !job.scheduleName || !job.consumer) {
      throw new ChaosError(`the ${o.env} stack has no complete ${CHAOS_JOB} job (schedule, producer, queue, DLQ, consumer)`);
    }
    queueUrl = job.queueUrl;
    consumerName = job.consumer.name;
    for (const alias of Object.values(job.settings.secrets)) {
      const secret = stack.secrets.find(alias);
      if (secret) provider.allowApiKey(secret.value);
    }
    await stack.runtime.prewarm(new Map([[job.consumer.name, 4], [stack.runtime.get(job.producer!.arn).spec.name, 1]]));
    const ddb = new DynamoDBClient(stack.clientConfig('dynamodb'));
    const s3 = new S3Client(stack.clientConfig('s3'));
    const seeded = await seedDemoData({ dynamodb: ddb, s3, businessDate: o.businessDate, jobs: new Map([[CHAOS_JOB, job.settings]]) }, { payments: options.ops, uploads: 0, tenants: 0 });
    ddb.destroy();
    s3.destroy();
    say(`seeded ${seeded.paymentIds.length} payments for ${o.businessDate}; faults on`);
    const mapping = stack.mappings.find((m) => m.config.functionName === job.consumer!.name)!;
    mapping.start();

    const fire = async () => {
      const result = await stack!.scheduler.fire(job.scheduleName!, { scheduledTime: new Date(), businessDate: o.businessDate });
      if (!result.delivered) throw new ChaosError(`schedule ${job.scheduleName} could not deliver to its producer: ${result.error}`);
    };
    await fire();
    for (let i = 0; i < o.producerReruns; i++) {
      await sleep(planDice.int(500, 3000));
      await fire();
      faults.producerReruns++;
    }
    const poison = Math.max(1, Math.round(options.ops * o.poisonRate));
    for (let i = 0; i < poison; i++) {
      await stack.sqs().send(new SendMessageCommand({ QueueUrl: job.queueUrl, MessageBody: POISON_BODIES[i % POISON_BODIES.length] }));
      faults.poisonMessages++;
    }

    const deadline = started + o.timeoutSeconds * 1000;
    let settled = await settle(stack, job, pendingSends, deadline, say);
    faultsOn = false;
    const before = await depth(stack, job.dlqUrl);
    faults.dlqBeforeRedrive = before;
    say(`faults off; ${before} messages in the DLQ; redriving`);
    if (before > 0) {
      await stack.sqs().send(new StartMessageMoveTaskCommand({ SourceArn: job.dlqArn, DestinationArn: job.queueArn }));
      faults.redriven = before;
      for (let i = 0; i < 40 && (await depth(stack, job.dlqUrl)) > 0; i++) await sleep(250);
      settled = (await settle(stack, job, pendingSends, deadline, say)) && settled;
    }
    if (sendErrors.length > 0) throw new ChaosError(`${sendErrors.length} injected sends failed: ${sendErrors[0].message}`, { cause: sendErrors[0] });

    const docs = documents();
    const ledgerTable = job.consumer.environment.LEDGER_TABLE_NAME;
    const batchItems = await queryAll(docs, ledgerTable, `BATCH#${CHAOS_JOB}`);
    const rejections = await queryAll(docs, ledgerTable, `REJECTED#${CHAOS_JOB}`);
    docs.destroy();
    const batches: LedgerBatch[] = batchItems.map((i) => ({
      batchId: String(i.sk),
      discovered: Number(i.discovered ?? 0),
      published: Number(i.published ?? 0),
      completed: Number(i.completed ?? 0),
      duplicates: Number(i.duplicates ?? 0),
      rejected: Number(i.rejected ?? 0),
      deadLettered: Number(i.deadLettered ?? 0),
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
    return { ok: verdict.ok && settled, ops: options.ops, seed: options.seed, settled, durationMs: Date.now() - started, invariants: verdict.invariants, faultsInjected: faults };
  } finally {
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

/** Waits until the queue is empty, nothing runs and no injected send is pending, twice in a row. */
async function settle(stack: LocalStack, job: JobView, pending: Set<Promise<unknown>>, deadline: number, say: (line: string) => void): Promise<boolean> {
  let quiet = 0;
  let lastSay = 0;
  while (Date.now() < deadline) {
    await sleep(500);
    const left = await depth(stack, job.queueUrl!);
    const busy = left > 0 || !stack.runtime.isIdle() || stack.scheduler.pending > 0 || pending.size > 0;
    if (Date.now() - lastSay > 5000) {
      lastSay = Date.now();
      say(`queue ${left}, running ${stack.runtime.list().reduce((n, f) => n + f.inFlight, 0)}`);
    }
    quiet = busy ? 0 : quiet + 1;
    if (quiet >= 2) return true;
  }
  return false;
}
