// Operator CLI: `preflight`, the go/no-go before a night's runs. Every check reads what is deployed (the functions'
// settings, the queues, the schedules, the tables, the alarm topic, the account) and says pass or fail with its reason;
// one failure makes the exit code 1. It changes nothing: discovery is run read-only, and the operator's permissions
// for pause, resume, catch-up and redrive are simulated (iam:SimulatePrincipalPolicy), never tried.
import {
  GetFunctionConcurrencyCommand,
  GetAccountSettingsCommand,
  type FunctionConfiguration,
} from '@aws-sdk/client-lambda';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { GetScheduleCommand, type GetScheduleCommandOutput } from '@aws-sdk/client-scheduler';
import { ListSubscriptionsByTopicCommand, type Subscription } from '@aws-sdk/client-sns';
import { DescribeSecretCommand } from '@aws-sdk/client-secrets-manager';
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { GetRoleCommand, SimulatePrincipalPolicyCommand } from '@aws-sdk/client-iam';
import { GetCallerIdentityCommand } from '@aws-sdk/client-sts';
import { EnvVar, LAMBDA_MAX_TIMEOUT_SECONDS, type JobRuntimeSettings } from '../../lambda/core/constants';
import { nextFireTime, parseCron, zonedDate } from '../../lambda/core/cron';
import { ledgerKeys } from '../../lambda/core/ledgerContract';
import { allowanceAfterHeadroom } from '../../lambda/core/pacingSettings';
import { QUEUE_DEPTH_ATTRIBUTES, queueDepthOf } from '../../lambda/core/queueDepth';
import { type CommandContext, selectJobs } from '../context';
import { principalOf } from '../environment';
import { jobCode } from '../jobCode';
import { functionSettings } from '../jobSettings';
import { renderTable } from '../io';
import { queryAll } from '../../local/ledgerFigures';
import { latestBatchItems } from '../ledger';
import type { JobResources } from '../resources';

/** A check's names, as `--json` and the table show them; a failure names its check. */
export const PreflightCheck = {
  producerTime: 'producer-time',
  discoveryStable: 'discovery-stable',
  rateHeadroom: 'rate-headroom',
  concurrencyLimit: 'concurrency-limit',
  idempotencyLifetime: 'idempotency-lifetime',
  operatorPermissions: 'operator-permissions',
  alarmSubscriptions: 'alarm-subscriptions',
  schedule: 'schedule',
  secrets: 'secrets',
  discoveryIndexes: 'discovery-indexes',
  dlqEmpty: 'dlq-empty',
  accountConcurrency: 'account-concurrency',
} as const;
export type PreflightCheckName = (typeof PreflightCheck)[keyof typeof PreflightCheck];

export type CheckStatus = 'pass' | 'fail' | 'skip';

export interface CheckResult {
  check: PreflightCheckName;
  /** The job the check is about; absent for a stack- or account-wide check. */
  job?: string;
  status: CheckStatus;
  reason: string;
  /** The figures the reason is made of. */
  detail?: Record<string, unknown>;
}

export interface PreflightResult {
  ok: boolean;
  command: 'preflight';
  stackName: string;
  source: 'cloudformation' | 'local';
  checks: CheckResult[];
  /** `<check>` or `<check> (<job>)` of every failed check. */
  failed: string[];
}

/** Least share of the documented quota the rate limit must leave unused: clocks, retries and other clients need it. */
export const MIN_HEADROOM_MARGIN = 0.05;
/** AWS keeps this much of an account's concurrency unreserved; reserved concurrency can take only the rest. */
export const UNRESERVED_CONCURRENCY_FLOOR = 100;
/** Pages each discovery of the stability check reads at most: enough to cross a page boundary, bounded in cost. */
export const DISCOVERY_PROBE_PAGES = 2;
/**
 * Time to publish one message when no run was recorded: SendMessageBatch carries 10 and the producer keeps 5 calls in
 * flight (lambda/adapters/sqsPublisher.ts), so one slow 100 ms round trip within a region publishes 50 messages: 2 ms
 * a message. A recorded run replaces the estimate.
 */
export const ESTIMATED_PUBLISH_MS_PER_MESSAGE = 2;
/** Batches whose page records the producer-time check reads. */
const RECORDED_BATCHES = 5;

export interface PreflightOptions {
  job?: string;
}

/** What one job's checks read once and share. */
export interface JobFacts {
  job: JobResources;
  producer: FunctionConfiguration;
  consumer: FunctionConfiguration;
  settings: JobRuntimeSettings;
  consumerSettings: JobRuntimeSettings;
  schedule?: GetScheduleCommandOutput;
  scheduleError?: string;
  /** The job's code entry the stack's template names (relative to the CDK app's folder); absent in an older stack. */
  entry?: string;
}

export async function preflight(ctx: CommandContext, options: PreflightOptions = {}): Promise<PreflightResult> {
  const jobs = selectJobs(ctx.resources, options.job);
  const checks: CheckResult[] = [];
  const facts: JobFacts[] = [];
  const entries = await jobEntries(ctx);
  for (const job of jobs) {
    const [producer, consumer] = await Promise.all([
      functionSettings(ctx, job.producerFunctionName),
      functionSettings(ctx, job.consumerFunctionName),
    ]);
    let schedule: GetScheduleCommandOutput | undefined;
    let scheduleError: string | undefined;
    try {
      schedule = await ctx.clients.scheduler.send(
        new GetScheduleCommand({ Name: job.scheduleName, GroupName: job.scheduleGroupName }),
      );
    } catch (error) {
      scheduleError = (error as Error).message;
    }
    facts.push({
      job,
      producer: producer.configuration,
      consumer: consumer.configuration,
      settings: producer.settings,
      consumerSettings: consumer.settings,
      schedule,
      scheduleError,
      ...(entries[job.job] !== undefined ? { entry: entries[job.job] } : {}),
    });
  }

  for (const f of facts) {
    const discovery = await discoveryStable(ctx, f);
    checks.push(
      await producerTime(ctx, f, discovery.msPerPage),
      discovery.result,
      rateHeadroom(f),
      await concurrencyLimit(ctx, f),
      await idempotencyLifetime(ctx, f),
      scheduleCheck(ctx, f),
      await secretsCheck(ctx, f),
      await discoveryIndexes(ctx, f),
      await dlqEmpty(ctx, f),
    );
  }
  checks.push(
    await operatorPermissions(ctx, facts),
    await alarmSubscriptions(ctx),
    await accountConcurrency(ctx, facts),
  );
  const failed = checks.filter((c) => c.status === 'fail').map((c) => (c.job ? `${c.check} (${c.job})` : c.check));
  return {
    ok: failed.length === 0,
    command: 'preflight',
    stackName: ctx.resources.stackName,
    source: ctx.resources.source,
    checks,
    failed,
  };
}

const fmt = (n: number) => n.toLocaleString('en-US');
const seconds = (ms: number) => `${fmt(Math.round(ms / 100) / 10)} s`;

/**
 * The longest step a full run takes, projected from recorded page times (the producer keeps when each page attempt
 * started; consecutive pages of one invocation give a page's time), or from the stability probe's discovery time and
 * an estimated publish time when no run is recorded, against the producer's timeout and Lambda's 900 s.
 */
async function producerTime(
  ctx: CommandContext,
  f: JobFacts,
  probeMsPerPage: number | undefined,
): Promise<CheckResult> {
  const { settings } = f;
  const timeoutSeconds = f.producer.Timeout ?? 3;
  const base = { check: PreflightCheck.producerTime, job: f.job.job } as const;
  const recorded = await recordedPageMs(ctx, f.job.job);
  let msPerPage: number;
  let source: string;
  if (recorded.length > 0) {
    msPerPage = Math.max(...recorded);
    source = `the slowest of ${fmt(recorded.length)} recorded page(s)`;
  } else if (probeMsPerPage !== undefined) {
    msPerPage = probeMsPerPage + settings.pageSize * ESTIMATED_PUBLISH_MS_PER_MESSAGE;
    source = `no recorded run: discovery measured now plus an estimated ${ESTIMATED_PUBLISH_MS_PER_MESSAGE} ms to publish each message`;
  } else {
    return {
      ...base,
      status: 'fail',
      reason:
        'no recorded run and discovery could not be measured (see discovery-stable): run the job once, locally or in a lower environment',
    };
  }
  // A step admits the work of its horizon at the job's rate (all of the run without admission), in whole pages.
  const runPages = settings.maxPagesPerRun;
  const ratePerSecond = settings.rateLimit.startsPerInterval / settings.rateLimit.intervalSeconds;
  const stepPages = settings.admission
    ? Math.min(
        runPages,
        Math.max(1, Math.ceil((ratePerSecond * settings.admission.horizonSeconds) / settings.pageSize)),
      )
    : runPages;
  const stepMs = stepPages * msPerPage;
  const ceilingMs = Math.min(timeoutSeconds, LAMBDA_MAX_TIMEOUT_SECONDS) * 1000;
  const detail = {
    msPerPage: Math.round(msPerPage),
    source,
    runPages,
    stepPages,
    projectedStepMs: Math.round(stepMs),
    projectedRunMs: Math.round(runPages * msPerPage),
    timeoutSeconds,
  };
  const what =
    `a full run (${fmt(runPages)} pages of ${fmt(settings.pageSize)}) at ${fmt(Math.round(msPerPage))} ms a page (${source}): ` +
    `its longest step (${fmt(stepPages)} page(s)) takes ${seconds(stepMs)}`;
  if (timeoutSeconds > LAMBDA_MAX_TIMEOUT_SECONDS)
    return {
      ...base,
      status: 'fail',
      reason: `the producer's timeout ${timeoutSeconds} s is over Lambda's ${LAMBDA_MAX_TIMEOUT_SECONDS} s`,
      detail,
    };
  if (stepMs > ceilingMs) {
    return {
      ...base,
      status: 'fail',
      reason: `${what}, over the producer's ${timeoutSeconds} s timeout: lower pageSize, or shorten admission.horizonSeconds`,
      detail,
    };
  }
  return {
    ...base,
    status: 'pass',
    reason: `${what}, within the producer's ${timeoutSeconds} s timeout (Lambda's ceiling: ${LAMBDA_MAX_TIMEOUT_SECONDS} s)`,
    detail,
  };
}

/** Page times of recent runs: from each page attempt's start to the next page's start in the same invocation. */
async function recordedPageMs(ctx: CommandContext, job: string): Promise<number[]> {
  const batches = await latestBatchItems(ctx.clients.dynamo, ctx.resources.tables.ledger, job, RECORDED_BATCHES, 'sk');
  const times: number[] = [];
  for (const batch of batches) {
    const pages = await queryAll(ctx.clients.dynamo, {
      TableName: ctx.resources.tables.ledger,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': ledgerKeys.pagePartition(job, String(batch.sk)) },
      ProjectionExpression: 'sk, startedMs',
    });
    // The sort key is `<page>#<owner>`: an owner is one invocation's hold of a step.
    const byOwner = new Map<string, { page: number; startedMs: number }[]>();
    for (const item of pages) {
      if (typeof item.startedMs !== 'number') continue;
      const [page, ...owner] = String(item.sk).split('#');
      const list = byOwner.get(owner.join('#')) ?? [];
      list.push({ page: Number(page), startedMs: item.startedMs });
      byOwner.set(owner.join('#'), list);
    }
    for (const list of byOwner.values()) {
      list.sort((a, b) => a.page - b.page);
      for (let i = 1; i < list.length; i++)
        if (list[i].page === list[i - 1].page + 1) times.push(list[i].startedMs - list[i - 1].startedMs);
    }
  }
  return times;
}

/** One read of the job's discovery: its operation IDs in order, the pages read and the mean time per page. */
interface DiscoveryProbe {
  ids: string[];
  pages: number;
  ms: number;
}

/** A discovery probe of `date`: the job's own discover, at most DISCOVERY_PROBE_PAGES pages (and maxPagesPerRun). */
function discoveryProbe(f: JobFacts, date: string, now: Date): () => Promise<DiscoveryProbe> {
  const job = jobCode(f.job.job, f.entry);
  const deps = job.createDeps(f.settings);
  return async () => {
    const ids: string[] = [];
    let cursor: string | undefined;
    const started = Date.now();
    let pages = 0;
    do {
      const page = await job.discover(deps, { businessDate: date, cursor, pageSize: f.settings.pageSize, now });
      ids.push(...page.operations.map((o) => o.operationId));
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < Math.min(DISCOVERY_PROBE_PAGES, f.settings.maxPagesPerRun));
    return { ids, pages, ms: (Date.now() - started) / pages };
  };
}

/** Why two discoveries that differ fail the check: how many IDs each found, and how many only one of them did. */
function differingDiscoveries(date: string, first: DiscoveryProbe, second: DiscoveryProbe): string {
  const a = new Set(first.ids);
  const b = new Set(second.ids);
  const onlyFirst = first.ids.filter((id) => !b.has(id)).length;
  const onlySecond = second.ids.filter((id) => !a.has(id)).length;
  return (
    `two discoveries of ${date} differ (${fmt(first.ids.length)} then ${fmt(second.ids.length)} operations; ${fmt(onlyFirst)} only in the first, ` +
    `${fmt(onlySecond)} only in the second${onlyFirst + onlySecond === 0 ? ', same IDs in another order' : ''}): operation IDs must come from the record and the date, ` +
    'and pages from a stable sort, or a rerun repeats or skips work'
  );
}

/** The check's result from two discoveries of `date`: the same IDs in the same order pass, none at all skip. */
function compareDiscoveries(
  base: Pick<CheckResult, 'check' | 'job'>,
  date: string,
  first: DiscoveryProbe,
  second: DiscoveryProbe,
): CheckResult {
  const detail = {
    businessDate: date,
    pages: first.pages,
    operations: first.ids.length,
    msPerPage: Math.round(first.ms),
  };
  const same = first.ids.length === second.ids.length && first.ids.every((id, i) => id === second.ids[i]);
  if (!same) return { ...base, status: 'fail', reason: differingDiscoveries(date, first, second), detail };
  if (first.ids.length === 0) {
    return {
      ...base,
      status: 'skip',
      reason: `nothing is eligible for ${date}: two discoveries agree, but on no operations`,
      detail,
    };
  }
  return {
    ...base,
    status: 'pass',
    reason: `two discoveries of ${date} (${fmt(first.pages)} page(s)) gave the same ${fmt(first.ids.length)} operation IDs in the same order`,
    detail,
  };
}

/**
 * Runs the job's own discovery twice for one business date (the one the next run will process, else the latest
 * batch's), reading at most DISCOVERY_PROBE_PAGES pages each time, and compares the operation IDs. Read-only: discovery
 * never writes. Against the local stack its clients point at the local servers.
 */
async function discoveryStable(ctx: CommandContext, f: JobFacts): Promise<{ result: CheckResult; msPerPage?: number }> {
  const base = { check: PreflightCheck.discoveryStable, job: f.job.job } as const;
  // Tonight's date is the one that matters; without a schedule to read, the latest batch's.
  const date = nextRun(f, ctx.io.now())?.businessDate ?? (await latestBatchDate(ctx, f.job.job));
  if (!date)
    return {
      result: {
        ...base,
        status: 'fail',
        reason: 'no business date to discover: the job has no batch and its schedule cannot be read',
      },
    };
  const restore = pointSdkAt(ctx);
  try {
    const discoverAll = discoveryProbe(f, date, ctx.io.now());
    const first = await discoverAll();
    const second = await discoverAll();
    return { msPerPage: first.ms, result: compareDiscoveries(base, date, first, second) };
  } catch (error) {
    return { result: { ...base, status: 'fail', reason: `discovery of ${date} failed: ${(error as Error).message}` } };
  } finally {
    restore();
  }
}

/**
 * Points the job code's SDK clients at the stack: the local servers and credentials, or the environment's region,
 * through the standard variables they read. A job's clients are created on its first use and kept (as in a Lambda
 * container), so one process runs one preflight against one stack, as `npm run ops` does. Returns what undoes it.
 */
function pointSdkAt(ctx: CommandContext): () => void {
  const { clients } = ctx.resources;
  const vars: Record<string, string | undefined> = {
    AWS_REGION: clients.region ?? process.env.AWS_REGION,
    ...(clients.endpoints?.dynamodb ? { AWS_ENDPOINT_URL_DYNAMODB: clients.endpoints.dynamodb } : {}),
    // A job may discover from S3 (a listing) as well as from DynamoDB.
    ...(clients.endpoints?.s3 ? { AWS_ENDPOINT_URL_S3: clients.endpoints.s3 } : {}),
    ...(clients.credentials
      ? {
          AWS_ACCESS_KEY_ID: clients.credentials.accessKeyId,
          AWS_SECRET_ACCESS_KEY: clients.credentials.secretAccessKey,
        }
      : {}),
  };
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const set = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  set(vars);
  return () => set(saved);
}

/**
 * Each job's code entry from the stack's template. A template that cannot be read leaves every job on the
 * repository's own layout (a stack deployed before the Metadata existed), and the discovery checks say why they fail.
 */
async function jobEntries(ctx: CommandContext): Promise<Record<string, string>> {
  try {
    return (await ctx.resources.jobEntries?.()) ?? {};
  } catch (error) {
    ctx.io.stderr(
      `preflight: cannot read the job entries from the stack's template (${(error as Error).message}); loading jobs from lambda/jobs/<name>`,
    );
    return {};
  }
}

async function latestBatchDate(ctx: CommandContext, job: string): Promise<string | undefined> {
  const [latest] = await latestBatchItems(ctx.clients.dynamo, ctx.resources.tables.ledger, job, 1, 'businessDate');
  return typeof latest?.businessDate === 'string' ? latest.businessDate : undefined;
}

/** The schedule's next fire after now and the business date it will process. */
function nextRun(f: JobFacts, now = new Date()): { at: Date; businessDate: string } | undefined {
  const expression = f.schedule?.ScheduleExpression;
  if (!expression) return undefined;
  const timeZone = f.schedule?.ScheduleExpressionTimezone ?? f.settings.timeZone;
  const at = nextFireTime(parseCron(expression), timeZone, now);
  return at ? { at, businessDate: zonedDate(at, timeZone, f.settings.businessDateOffsetDays) } : undefined;
}

/**
 * The rate the consumer enforces (its deployed settings) must be at most the documented quota less the configured
 * headroom, and that headroom must keep at least MIN_HEADROOM_MARGIN of the quota unused.
 */
function rateHeadroom(f: JobFacts): CheckResult {
  const base = { check: PreflightCheck.rateHeadroom, job: f.job.job } as const;
  const { rateLimit, quota } = f.consumerSettings;
  const per = `per ${rateLimit.intervalSeconds} s`;
  if (!quota)
    return {
      ...base,
      status: 'fail',
      reason:
        "the deployed consumer's settings carry no documented quota (deployed before preflight existed): deploy again",
    };
  const allowed = allowanceAfterHeadroom(quota.starts, quota.headroom);
  const margin = 1 - rateLimit.startsPerInterval / quota.starts;
  const detail = {
    startsPerInterval: rateLimit.startsPerInterval,
    intervalSeconds: rateLimit.intervalSeconds,
    quota: quota.starts,
    headroom: quota.headroom,
    margin: Math.round(margin * 1000) / 1000,
  };
  const pct = (x: number) => `${Math.round(x * 1000) / 10}%`;
  if (rateLimit.startsPerInterval > allowed) {
    return {
      ...base,
      status: 'fail',
      reason: `the consumer paces ${fmt(rateLimit.startsPerInterval)} starts ${per}, above the quota's ${fmt(quota.starts)} x headroom ${quota.headroom} = ${fmt(allowed)}: deploy the config again`,
      detail,
    };
  }
  if (margin < MIN_HEADROOM_MARGIN - 1e-9) {
    return {
      ...base,
      status: 'fail',
      reason:
        `headroom ${quota.headroom} leaves ${pct(margin)} of the documented ${fmt(quota.starts)} starts ${per} unused; keep at least ${pct(MIN_HEADROOM_MARGIN)} ` +
        `(pacing.headroom at most ${1 - MIN_HEADROOM_MARGIN}) for clock skew, retries and other clients of the quota`,
      detail,
    };
  }
  return {
    ...base,
    status: 'pass',
    reason: `${fmt(rateLimit.startsPerInterval)} starts ${per} leave ${pct(margin)} of the documented ${fmt(quota.starts)} unused (headroom ${quota.headroom})`,
    detail,
  };
}

/** The consumer's reserved concurrency (its cap) against the downstream's documented concurrent-request limit. */
async function concurrencyLimit(ctx: CommandContext, f: JobFacts): Promise<CheckResult> {
  const base = { check: PreflightCheck.concurrencyLimit, job: f.job.job } as const;
  const answer = await ctx.clients.lambda.send(
    new GetFunctionConcurrencyCommand({ FunctionName: f.job.consumerFunctionName }),
  );
  const reserved = answer.ReservedConcurrentExecutions;
  const cap = f.consumerSettings.concurrency;
  const detail = {
    reservedConcurrency: reserved ?? null,
    concurrency: cap,
    maxConcurrent: f.consumerSettings.quota?.maxConcurrent ?? null,
  };
  if (reserved === undefined)
    return {
      ...base,
      status: 'fail',
      reason: `the consumer has no reserved concurrency: its cap of ${cap} is not enforced (deploy again)`,
      detail,
    };
  if (reserved !== cap)
    return {
      ...base,
      status: 'fail',
      reason: `the consumer's reserved concurrency is ${reserved}, but its settings say ${cap}: deploy again`,
      detail,
    };
  const limit = f.consumerSettings.quota?.maxConcurrent;
  if (limit === undefined)
    return {
      ...base,
      status: 'pass',
      reason: `the cap is ${cap} concurrent invocations; the downstream documents no concurrent-request limit (pacing.maxConcurrent)`,
      detail,
    };
  if (cap > limit)
    return {
      ...base,
      status: 'fail',
      reason: `the concurrency cap ${cap} is above the downstream's ${limit} concurrent requests: lower pacing.concurrency to at most ${limit}`,
      detail,
    };
  return {
    ...base,
    status: 'pass',
    reason: `the concurrency cap ${cap} is within the downstream's ${limit} concurrent requests`,
    detail,
  };
}

/** The consumer's idempotency record lifetime against the work queue's plus the DLQ's retention. */
async function idempotencyLifetime(ctx: CommandContext, f: JobFacts): Promise<CheckResult> {
  const base = { check: PreflightCheck.idempotencyLifetime, job: f.job.job } as const;
  const ttl = Number(f.consumer.Environment?.Variables?.[EnvVar.IDEMPOTENCY_TTL_SECONDS]);
  const retention = async (url: string) => {
    const { Attributes } = await ctx.clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['MessageRetentionPeriod'] }),
    );
    return Number(Attributes?.MessageRetentionPeriod);
  };
  const [queue, dlq] = await Promise.all([retention(f.job.queueUrl), retention(f.job.dlqUrl)]);
  const days = (s: number) => `${fmt(Math.round((s / 86400) * 10) / 10)} days`;
  const detail = { idempotencyTtlSeconds: ttl, queueRetentionSeconds: queue, dlqRetentionSeconds: dlq };
  if (!Number.isFinite(ttl) || !Number.isFinite(queue) || !Number.isFinite(dlq))
    return {
      ...base,
      status: 'fail',
      reason: "the idempotency lifetime or a queue's retention could not be read",
      detail,
    };
  const need = queue + dlq;
  if (ttl < need) {
    return {
      ...base,
      status: 'fail',
      reason: `idempotency records live ${days(ttl)}, less than the queue's ${days(queue)} plus the DLQ's ${days(dlq)}: a late redrive would repeat an effect (raise idempotencyRecordDays)`,
      detail,
    };
  }
  return {
    ...base,
    status: 'pass',
    reason: `idempotency records live ${days(ttl)}, at least the queue's ${days(queue)} plus the DLQ's ${days(dlq)}`,
    detail,
  };
}

/** The schedule is enabled, and when it fires next and for which business date. */
function scheduleCheck(ctx: CommandContext, f: JobFacts): CheckResult {
  const base = { check: PreflightCheck.schedule, job: f.job.job } as const;
  if (!f.schedule)
    return { ...base, status: 'fail', reason: `schedule ${f.job.scheduleName} cannot be read: ${f.scheduleError}` };
  const next = nextRun(f, ctx.io.now());
  const detail = {
    state: f.schedule.State,
    expression: f.schedule.ScheduleExpression,
    timeZone: f.schedule.ScheduleExpressionTimezone,
    group: f.schedule.GroupName,
    nextFire: next?.at.toISOString() ?? null,
    businessDate: next?.businessDate ?? null,
  };
  const when = next
    ? `next fires ${next.at.toISOString()} (${f.schedule.ScheduleExpression} ${f.schedule.ScheduleExpressionTimezone}) for business date ${next.businessDate}`
    : 'never fires again';
  if (f.schedule.State !== 'ENABLED')
    return {
      ...base,
      status: 'fail',
      reason: `the schedule is ${f.schedule.State ?? 'in no state'}: it would have ${when.replace(/^next /, '')}; run resume`,
      detail,
    };
  if (!next) return { ...base, status: 'fail', reason: `the schedule ${when}`, detail };
  return { ...base, status: 'pass', reason: `enabled; ${when}`, detail };
}

/** Every secret the job's settings name exists (DescribeSecret: never its value). */
async function secretsCheck(ctx: CommandContext, f: JobFacts): Promise<CheckResult> {
  const base = { check: PreflightCheck.secrets, job: f.job.job } as const;
  const entries = Object.entries(f.settings.secrets);
  if (entries.length === 0) return { ...base, status: 'pass', reason: 'the job uses no secret' };
  const problems: string[] = [];
  for (const [alias, id] of entries) {
    try {
      const secret = await ctx.clients.secrets.send(new DescribeSecretCommand({ SecretId: id }));
      if (secret.DeletedDate) problems.push(`${alias} (${id}) is scheduled for deletion`);
    } catch (error) {
      problems.push(
        `${alias} (${id}): ${(error as Error).name === 'ResourceNotFoundException' ? 'does not exist' : (error as Error).message}`,
      );
    }
  }
  const names = entries.map(([alias, id]) => `${alias} (${id})`).join(', ');
  if (problems.length > 0)
    return {
      ...base,
      status: 'fail',
      reason: `secret ${problems.join('; ')}: create it, or fix appResources.secrets`,
      detail: { secrets: f.settings.secrets },
    };
  return { ...base, status: 'pass', reason: `${names} exist`, detail: { secrets: f.settings.secrets } };
}

/** The secondary indexes the job's discovery queries exist on its deployed tables and are active. */
async function discoveryIndexes(ctx: CommandContext, f: JobFacts): Promise<CheckResult> {
  const base = { check: PreflightCheck.discoveryIndexes, job: f.job.job } as const;
  const wanted = jobCode(f.job.job, f.entry).discoveryIndexes ?? [];
  if (wanted.length === 0) return { ...base, status: 'pass', reason: 'discovery queries no secondary index' };
  const problems: string[] = [];
  const found: string[] = [];
  for (const { table: alias, index } of wanted) {
    const table = f.settings.tables[alias];
    if (!table) {
      problems.push(`table alias "${alias}" is not in the job's uses.tables`);
      continue;
    }
    try {
      const { Table } = await ctx.clients.dynamo.send(new DescribeTableCommand({ TableName: table }));
      const gsi = (Table?.GlobalSecondaryIndexes ?? []).find((g) => g.IndexName === index);
      const lsi = (Table?.LocalSecondaryIndexes ?? []).find((l) => l.IndexName === index);
      if (!gsi && !lsi) problems.push(`${table} has no index ${index}`);
      else if (gsi && gsi.IndexStatus !== undefined && gsi.IndexStatus !== 'ACTIVE')
        problems.push(`${table}'s index ${index} is ${gsi.IndexStatus}`);
      else found.push(`${table}/${index}`);
    } catch (error) {
      problems.push(
        `${table}: ${(error as Error).name === 'ResourceNotFoundException' ? 'does not exist' : (error as Error).message}`,
      );
    }
  }
  if (problems.length > 0)
    return {
      ...base,
      status: 'fail',
      reason: `${problems.join('; ')}: discovery would fail (add the index to the table, as appResources.tables declares it)`,
    };
  return { ...base, status: 'pass', reason: `${found.join(', ')} active` };
}

/** The job's DLQ holds nothing: a night should not start on top of last night's failures. */
async function dlqEmpty(ctx: CommandContext, f: JobFacts): Promise<CheckResult> {
  const base = { check: PreflightCheck.dlqEmpty, job: f.job.job } as const;
  const { Attributes } = await ctx.clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: f.job.dlqUrl, AttributeNames: [...QUEUE_DEPTH_ATTRIBUTES] }),
  );
  const count = queueDepthOf(Attributes).total;
  if (count > 0) {
    return {
      ...base,
      status: 'fail',
      reason: `the DLQ holds ${fmt(count)} message(s): read them (dlq peek --job ${f.job.job}), fix the cause, then redrive or purge`,
      detail: { messages: count },
    };
  }
  return { ...base, status: 'pass', reason: 'the DLQ is empty', detail: { messages: 0 } };
}

/** What each operator action calls, and on which resource (for the IAM simulation). */
function operatorActions(ctx: CommandContext, facts: JobFacts[]): { action: string; resource: string; for: string }[] {
  const region = ctx.resources.region ?? 'us-east-1';
  const account = ctx.resources.accountId ?? '*';
  const partition = region.startsWith('cn-') ? 'aws-cn' : region.startsWith('us-gov-') ? 'aws-us-gov' : 'aws';
  return facts.flatMap((f) => {
    const scheduleArn =
      f.schedule?.Arn ??
      `arn:${partition}:scheduler:${region}:${account}:schedule/${f.job.scheduleGroupName}/${f.job.scheduleName}`;
    const mapping = (uuid: string) => `arn:${partition}:lambda:${region}:${account}:event-source-mapping:${uuid}`;
    const roleArn = f.schedule?.Target?.RoleArn;
    return [
      { action: 'scheduler:GetSchedule', resource: scheduleArn, for: 'pause/resume' },
      { action: 'scheduler:UpdateSchedule', resource: scheduleArn, for: 'pause/resume' },
      // UpdateSchedule passes the schedule's execution role again.
      ...(roleArn ? [{ action: 'iam:PassRole', resource: roleArn, for: 'pause/resume' }] : []),
      { action: 'lambda:GetEventSourceMapping', resource: mapping(f.job.eventSourceMappingUuid), for: 'pause/resume' },
      {
        action: 'lambda:UpdateEventSourceMapping',
        resource: mapping(f.job.eventSourceMappingUuid),
        for: 'pause/resume',
      },
      { action: 'lambda:GetEventSourceMapping', resource: mapping(f.job.admissionMappingUuid), for: 'pause/resume' },
      { action: 'lambda:UpdateEventSourceMapping', resource: mapping(f.job.admissionMappingUuid), for: 'pause/resume' },
      {
        action: 'lambda:InvokeFunction',
        resource: f.producer.FunctionArn ?? f.job.producerFunctionName,
        for: 'catch-up',
      },
      {
        action: 'lambda:GetFunctionConfiguration',
        resource: f.producer.FunctionArn ?? f.job.producerFunctionName,
        for: 'catch-up',
      },
      {
        action: 'dynamodb:Query',
        resource: `arn:${partition}:dynamodb:${region}:${account}:table/${ctx.resources.tables.ledger}`,
        for: 'catch-up',
      },
      { action: 'sqs:StartMessageMoveTask', resource: f.job.dlqArn, for: 'redrive' },
      { action: 'sqs:ReceiveMessage', resource: f.job.dlqArn, for: 'redrive' },
      { action: 'sqs:DeleteMessage', resource: f.job.dlqArn, for: 'redrive' },
      { action: 'sqs:SendMessage', resource: f.job.queueArn, for: 'redrive' },
      // Per-key overrides (`ops limits`), where the stack has the limiter table's output and the job a per-key limit.
      ...(ctx.resources.tables.limiter && f.settings.rateLimit.perKey
        ? [
            {
              action: 'dynamodb:GetItem',
              resource: `arn:${partition}:dynamodb:${region}:${account}:table/${ctx.resources.tables.limiter}`,
              for: 'limits',
            },
            {
              action: 'dynamodb:UpdateItem',
              resource: `arn:${partition}:dynamodb:${region}:${account}:table/${ctx.resources.tables.limiter}`,
              for: 'limits',
            },
          ]
        : []),
    ];
  });
}

/**
 * Whether the operator's identity may pause, resume, catch up and redrive, simulated with the identity's own policies
 * (iam:SimulatePrincipalPolicy): trying the calls would change the stack. The local stack has no IAM for operators.
 */
export async function operatorPermissions(ctx: CommandContext, facts: JobFacts[]): Promise<CheckResult> {
  const base = { check: PreflightCheck.operatorPermissions } as const;
  if (ctx.resources.source === 'local') {
    return {
      ...base,
      status: 'skip',
      reason:
        "the local stack authorizes its functions' roles only; an operator's calls are not IAM-bound locally (check with --env)",
    };
  }
  const wanted = operatorActions(ctx, facts);
  let principal: { arn: string; role?: string };
  try {
    const caller = await ctx.clients.sts.send(new GetCallerIdentityCommand({}));
    principal = principalOf(caller.Arn ?? '');
    if (principal.role) {
      const { Role } = await ctx.clients.iam.send(new GetRoleCommand({ RoleName: principal.role }));
      if (Role?.Arn) principal = { ...principal, arn: Role.Arn };
    }
  } catch (error) {
    return { ...base, status: 'fail', reason: `cannot tell who the operator is: ${(error as Error).message}` };
  }
  const denied: string[] = [];
  try {
    // One simulation per resource: SimulatePrincipalPolicy takes many actions against one resource list.
    const byResource = new Map<string, string[]>();
    for (const w of wanted) byResource.set(w.resource, [...new Set([...(byResource.get(w.resource) ?? []), w.action])]);
    for (const [resource, actions] of byResource) {
      let marker: string | undefined;
      do {
        const answer = await ctx.clients.iam.send(
          new SimulatePrincipalPolicyCommand({
            PolicySourceArn: principal.arn,
            ActionNames: actions,
            ResourceArns: [resource],
            ...(marker ? { Marker: marker } : {}),
          }),
        );
        for (const r of answer.EvaluationResults ?? []) {
          if (r.EvalDecision !== 'allowed') {
            const uses = [
              ...new Set(
                wanted.filter((w) => w.action === r.EvalActionName && w.resource === resource).map((w) => w.for),
              ),
            ].join(', ');
            denied.push(`${r.EvalActionName} on ${resource} (${uses}: ${r.EvalDecision})`);
          }
        }
        marker = answer.IsTruncated ? answer.Marker : undefined;
      } while (marker);
    }
  } catch (error) {
    return {
      ...base,
      status: 'fail',
      reason: `cannot simulate ${principal.arn}'s permissions: ${(error as Error).message} (the operator needs iam:SimulatePrincipalPolicy on itself for this check)`,
    };
  }
  const detail = { principal: principal.arn, actions: wanted.length };
  if (denied.length > 0)
    return {
      ...base,
      status: 'fail',
      reason: `${principal.arn} may not: ${denied.join('; ')}`,
      detail: { ...detail, denied },
    };
  return {
    ...base,
    status: 'pass',
    reason: `${principal.arn} may pause, resume, catch up and redrive every job (${fmt(wanted.length)} calls simulated)`,
    detail,
  };
}

/** The alarm topic has at least one confirmed subscription: an alarm nobody receives pages nobody. */
async function alarmSubscriptions(ctx: CommandContext): Promise<CheckResult> {
  const base = { check: PreflightCheck.alarmSubscriptions } as const;
  const topic = ctx.resources.alarmTopicArn;
  if (!topic) return { ...base, status: 'fail', reason: 'the stack has no AlarmTopicArn output: deploy again' };
  const subscriptions: Subscription[] = [];
  try {
    let next: string | undefined;
    do {
      const page = await ctx.clients.sns.send(
        new ListSubscriptionsByTopicCommand({ TopicArn: topic, ...(next ? { NextToken: next } : {}) }),
      );
      subscriptions.push(...(page.Subscriptions ?? []));
      next = page.NextToken;
    } while (next);
  } catch (error) {
    return {
      ...base,
      status: 'fail',
      reason: `cannot list the subscriptions of ${topic}: ${(error as Error).message}`,
    };
  }
  const confirmed = subscriptions.filter(
    (s) => s.SubscriptionArn && s.SubscriptionArn !== 'PendingConfirmation' && s.SubscriptionArn !== 'Deleted',
  );
  const pending = subscriptions.filter((s) => s.SubscriptionArn === 'PendingConfirmation');
  const detail = {
    topicArn: topic,
    confirmed: confirmed.map((s) => `${s.Protocol}:${s.Endpoint}`),
    pending: pending.map((s) => `${s.Protocol}:${s.Endpoint}`),
  };
  if (confirmed.length === 0) {
    const why =
      pending.length > 0
        ? `its ${pending.length} subscription(s) (${detail.pending.join(', ')}) are not confirmed: confirm from the email SNS sent`
        : "it has no subscription: set alarmEmail in the environment's config, or subscribe the on-call tool to the topic";
    return { ...base, status: 'fail', reason: `no one receives the alarms of ${topic}: ${why}`, detail };
  }
  return { ...base, status: 'pass', reason: `${topic} notifies ${detail.confirmed.join(', ')}`, detail };
}

/** The account's concurrency limit leaves AWS's 100 unreserved after the stack's reserved concurrency. */
async function accountConcurrency(ctx: CommandContext, facts: JobFacts[]): Promise<CheckResult> {
  const base = { check: PreflightCheck.accountConcurrency } as const;
  const { AccountLimit } = await ctx.clients.lambda.send(new GetAccountSettingsCommand({}));
  const limit = AccountLimit?.ConcurrentExecutions ?? 0;
  const reservedOf = async (name: string) =>
    (await ctx.clients.lambda.send(new GetFunctionConcurrencyCommand({ FunctionName: name })))
      .ReservedConcurrentExecutions ?? 0;
  const reserved = (
    await Promise.all(
      facts.flatMap((f) => [reservedOf(f.job.consumerFunctionName), reservedOf(f.job.producerFunctionName)]),
    )
  ).reduce((a, b) => a + b, 0);
  const needed = reserved + UNRESERVED_CONCURRENCY_FLOOR;
  const detail = {
    accountLimit: limit,
    reserved,
    needed,
    unreserved: AccountLimit?.UnreservedConcurrentExecutions ?? null,
  };
  if (limit < needed) {
    return {
      ...base,
      status: 'fail',
      reason: `the account's concurrency limit is ${fmt(limit)}: the stack reserves ${fmt(reserved)} and AWS keeps ${UNRESERVED_CONCURRENCY_FLOOR} unreserved, so it needs at least ${fmt(needed)} (request a Lambda concurrent executions quota increase)`,
      detail,
    };
  }
  return {
    ...base,
    status: 'pass',
    reason: `the account's limit of ${fmt(limit)} covers the stack's ${fmt(reserved)} reserved plus the ${UNRESERVED_CONCURRENCY_FLOOR} AWS keeps unreserved`,
    detail,
  };
}

export function renderPreflight(result: PreflightResult): string {
  const rows = result.checks.map((c) => [
    c.status === 'pass' ? 'PASS' : c.status === 'fail' ? 'FAIL' : 'skip',
    c.check,
    c.job ?? '-',
    c.reason,
  ]);
  const verdict = result.ok
    ? `GO: every check of ${result.stackName} passed${result.checks.some((c) => c.status === 'skip') ? ' (skipped checks say why)' : ''}`
    : `NO-GO: ${result.failed.length} check(s) failed: ${result.failed.join(', ')}`;
  return `${renderTable(['', 'check', 'job', 'reason'], rows)}\n${verdict}\n`;
}
