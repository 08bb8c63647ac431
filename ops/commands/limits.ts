// `ops limits`: an operator's per-key rate limits, set apart from a job's deployed `pacing.perKey` default without a
// deploy (a large tenant's contract tier). The overrides live on one item of the limiter table (lambda/core/keyLimits.ts
// is the contract); the consumers re-read it every OVERRIDE_REFRESH_MS, so a change holds within that.
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { GetCallerIdentityCommand } from '@aws-sdk/client-sts';
import type { JobRuntimeSettings } from '../../lambda/core/constants';
import { describeIssues } from '../../lambda/core/issues';
import { pacingSettings } from '../../lambda/core/pacingSettings';
import {
  effectiveKeyLimit,
  type KeyLimit,
  type KeyLimitOverride,
  keyLimitOverrideSchema,
  keyLimitsItemKey,
  MAX_OVERRIDES,
  OVERRIDE_REFRESH_MS,
  OVERRIDES_ATTRIBUTE,
} from '../../lambda/core/keyLimits';
import { StackOutput } from '../../lib/outputs';
import { type ChangeOptions, type CommandContext, confirmChange, selectJobs } from '../context';
import { KeyLimitsError, ResourceDiscoveryError, UsageError } from '../errors';
import { type Cell, renderTable } from '../io';
import { producerSettings } from '../jobSettings';

/** Most starts per interval an override may give a key. */
export const MAX_OVERRIDE_STARTS = 1_000_000;
/** Longest interval an override may set (keyLimitOverrideSchema's bound). */
export const MAX_OVERRIDE_INTERVAL_SECONDS = 3600;
/** Longest key value an override may name. */
export const MAX_KEY_LENGTH = 256;

/** How soon a change holds everywhere, as the results say it. */
const EFFECTIVE_WITHIN = `${OVERRIDE_REFRESH_MS / 1000} s`;

/** A job's per-key default, as deployed (its JOB_SETTINGS): the allowance after headroom. */
export type PerKeyDefault = NonNullable<JobRuntimeSettings['rateLimit']['perKey']>;

export interface LimitsOverrideEntry {
  key: string;
  /** The stored document; for an invalid one, what is stored. */
  override: KeyLimitOverride;
  /** What the consumer enforces for the key: the default's, when the stored override is invalid (the consumer skips it). */
  effective: KeyLimit;
  /** Why the stored override is not a valid KeyLimitOverride. */
  invalid?: string;
}

/** A job's job-wide pacing as deployed: the allowance, the cap, and the batching set or derived at synthesis. */
export interface DeployedPacing {
  startsPerInterval: number;
  intervalSeconds: number;
  burst: number;
  concurrency: number;
  /** The event source's batch (admission's group); absent for a job deployed with admission off. */
  batchSize?: number;
  batchingWindowSeconds?: number;
  shortWaitMs: number;
  /** The window stretch for start jitter (pacing.safetyMarginMs, or derived from the interval). */
  safetyMarginMs: number;
  adaptiveRate: boolean;
  /** False: no shared limiter, only the concurrency cap. */
  enabled: boolean;
}

export interface LimitsListResult {
  ok: true;
  command: 'limits list';
  job: string;
  table: string;
  /** The job-wide pacing the limits below sit under. */
  pacing: DeployedPacing;
  /** The per-key default; absent for a job without a per-key rate limit (it has no overrides either). */
  default?: PerKeyDefault;
  /** Sorted by key. */
  overrides: LimitsOverrideEntry[];
  maxOverrides: number;
}

export interface LimitsSetOptions extends ChangeOptions {
  job: string;
  key: string;
  starts: string | number;
  intervalSeconds?: string | number;
  burst?: string | number;
}

export interface LimitsSetResult {
  ok: true;
  command: 'limits set';
  dryRun: boolean;
  job: string;
  key: string;
  table: string;
  default: PerKeyDefault;
  /** The key's override before this one, which it replaces. */
  previous?: KeyLimitOverride;
  override: KeyLimitOverride;
  /** What the consumer enforces for the key with the new override. */
  effective: KeyLimit;
  written: boolean;
  /** How soon every consumer enforces it (they re-read the overrides this often). */
  effectiveWithin: string;
}

export interface LimitsClearOptions extends ChangeOptions {
  job: string;
  key: string;
}

export interface LimitsClearResult {
  ok: true;
  command: 'limits clear';
  dryRun: boolean;
  job: string;
  key: string;
  table: string;
  default: PerKeyDefault;
  /** The override cleared (or that would be); absent when the key had none, and nothing changed. */
  previous?: KeyLimitOverride;
  /** What the consumer enforces for the key once cleared: the default. */
  effective: KeyLimit;
  cleared: boolean;
  effectiveWithin: string;
}

/** @throws UsageError in positiveInt's words (ops/program.ts) for anything but a whole number from 1 to max. */
function wholeNumber(flag: string, value: string | number, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new UsageError(`${flag} must be a whole number from 1 to ${max}, got "${value}"`);
  return n;
}

/** @throws UsageError for an empty key, one longer than MAX_KEY_LENGTH, or one with a control character. */
export function parseKey(value: string): string {
  if (value.length < 1 || value.length > MAX_KEY_LENGTH || /[\u0000-\u001f\u007f-\u009f]/.test(value)) {
    throw new UsageError(
      `--key must be 1 to ${MAX_KEY_LENGTH} characters with no control characters, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** The limiter table: the one output only these commands need. @throws ResourceDiscoveryError when the stack lacks it. */
function limiterTable(ctx: CommandContext): string {
  const table = ctx.resources.tables.limiter;
  if (!table) {
    throw new ResourceDiscoveryError(
      `${ctx.resources.stackName} lacks the output ${StackOutput.LimiterTableName}: the per-key overrides live in the limiter table, ` +
        'so the limits commands need it (deploy the stack again)',
      ctx.resources.stackName,
    );
  }
  return table;
}

/** @throws UsageError when the job's deployed settings have no per-key rate limit. */
function perKeyDefault(settings: JobRuntimeSettings, job: string): PerKeyDefault {
  const perKey = settings.rateLimit.perKey;
  if (!perKey) throw new UsageError(`job ${job} has no per-key rate limit: add pacing.perKey to its config and deploy`);
  return perKey;
}

/** The job-wide pacing its consumers run with, from its deployed settings (lambda/core/pacingSettings.ts reads them). */
export function deployedPacing(settings: JobRuntimeSettings): DeployedPacing {
  const paced = pacingSettings(settings);
  return {
    startsPerInterval: settings.rateLimit.startsPerInterval,
    intervalSeconds: settings.rateLimit.intervalSeconds,
    burst: settings.rateLimit.burst,
    concurrency: settings.concurrency,
    ...(settings.admission
      ? {
          batchSize: settings.admission.batchSize,
          batchingWindowSeconds: settings.admission.batchingWindowSeconds ?? 0,
        }
      : {}),
    shortWaitMs: paced.shortWaitMs,
    safetyMarginMs: paced.limits.safetyMarginMs,
    adaptiveRate: paced.adaptiveRate,
    enabled: paced.enabled,
  };
}

/** The job's overrides as stored (consistent read), by key; empty when the item or its map does not exist. */
async function readOverrides(ctx: CommandContext, table: string, job: string): Promise<Record<string, unknown>> {
  const { Item } = await ctx.clients.dynamo.send(
    new GetCommand({
      TableName: table,
      Key: { pk: keyLimitsItemKey(job) },
      ConsistentRead: true,
      ProjectionExpression: '#o',
      ExpressionAttributeNames: { '#o': OVERRIDES_ATTRIBUTE },
    }),
  );
  const overrides = Item?.[OVERRIDES_ATTRIBUTE];
  return overrides && typeof overrides === 'object' ? (overrides as Record<string, unknown>) : {};
}

/** The job, its limiter table and its deployed settings: what every limits command reads first. */
async function loadJob(ctx: CommandContext, jobName: string) {
  const [job] = selectJobs(ctx.resources, jobName);
  const table = limiterTable(ctx);
  const settings = await producerSettings(ctx, job.producerFunctionName);
  return { job: job.job, table, settings };
}

/** Everything a changing limits command starts from: the job, its table and per-key default, its stored overrides. */
async function load(ctx: CommandContext, jobName: string) {
  const { job, table, settings } = await loadJob(ctx, jobName);
  const perKey = perKeyDefault(settings, job);
  const stored = await readOverrides(ctx, table, job);
  return { job, table, perKey, stored };
}

function entryOf(key: string, stored: unknown, perKey: PerKeyDefault): LimitsOverrideEntry {
  const parsed = keyLimitOverrideSchema.safeParse(stored);
  if (parsed.success) return { key, override: parsed.data, effective: effectiveKeyLimit(perKey, parsed.data) };
  return {
    key,
    override: stored as KeyLimitOverride,
    effective: effectiveKeyLimit(perKey, undefined),
    invalid: describeIssues(parsed.error).join('; '),
  };
}

/** Who sets an override: the caller's ARN for a deployed stack, "local" for the local one. */
async function caller(ctx: CommandContext): Promise<string | undefined> {
  if (ctx.resources.source === 'local') return 'local';
  return (await ctx.clients.sts.send(new GetCallerIdentityCommand({}))).Arn;
}

const describeLimit = (l: KeyLimit): string => `${l.startsPerInterval} per ${l.intervalSeconds} s, burst ${l.burst}`;

/**
 * @throws UsageError for an unknown job, one without a per-key default, or a bad --key.
 * @throws ResourceDiscoveryError when the stack has no limiter table output.
 */
export async function limitsList(ctx: CommandContext, options: { job: string }): Promise<LimitsListResult> {
  const { job, table, settings } = await loadJob(ctx, options.job);
  const pacing = deployedPacing(settings);
  // A job without per-key limits still has its job-wide pacing to show, and no overrides.
  const perKey = settings.rateLimit.perKey;
  if (!perKey)
    return { ok: true, command: 'limits list', job, table, pacing, overrides: [], maxOverrides: MAX_OVERRIDES };
  const stored = await readOverrides(ctx, table, job);
  const overrides = Object.keys(stored)
    .sort()
    .map((key) => entryOf(key, stored[key], perKey));
  for (const o of overrides.filter((e) => e.invalid)) {
    ctx.io.stderr(
      `limits: the override of key ${JSON.stringify(o.key)} on ${job} is not valid (${o.invalid}): the consumers skip it and apply the default; set it again or clear it`,
    );
  }
  return {
    ok: true,
    command: 'limits list',
    job,
    table,
    pacing,
    default: perKey,
    overrides,
    maxOverrides: MAX_OVERRIDES,
  };
}

/**
 * Two writes, since DynamoDB refuses overlapping paths in one expression: the map is created if absent, then the key
 * is set in it, on the condition that the map still has room.
 * @throws the error `full` makes, with the map's size now, when the map has no room for the key.
 */
async function writeOverride(
  ctx: CommandContext,
  w: { table: string; job: string; key: string; override: KeyLimitOverride; full: (count: number) => KeyLimitsError },
): Promise<void> {
  const { table, job, key, override, full } = w;
  const pk = keyLimitsItemKey(job);
  await ctx.clients.dynamo.send(
    new UpdateCommand({
      TableName: table,
      Key: { pk },
      UpdateExpression: 'SET #o = if_not_exists(#o, :empty)',
      ExpressionAttributeNames: { '#o': OVERRIDES_ATTRIBUTE },
      ExpressionAttributeValues: { ':empty': {} },
    }),
  );
  try {
    await ctx.clients.dynamo.send(
      new UpdateCommand({
        TableName: table,
        Key: { pk },
        UpdateExpression: 'SET #o.#k = :v',
        // The count read above may be stale by now: the map's own size decides.
        ConditionExpression: 'attribute_exists(#o.#k) OR size(#o) < :max',
        ExpressionAttributeNames: { '#o': OVERRIDES_ATTRIBUTE, '#k': key },
        ExpressionAttributeValues: { ':v': override, ':max': MAX_OVERRIDES },
      }),
    );
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException)
      throw full(Object.keys(await readOverrides(ctx, table, job)).length);
    throw error;
  }
}

/**
 * Sets one key's override (replacing any it had), in two writes (writeOverride).
 * @throws UsageError for an unknown job, one without a per-key default, or a bad flag.
 * @throws KeyLimitsError when the job already keeps MAX_OVERRIDES overrides and the key is not one of them.
 * @throws ConfirmationError when not confirmed.
 */
export async function limitsSet(ctx: CommandContext, options: LimitsSetOptions): Promise<LimitsSetResult> {
  selectJobs(ctx.resources, options.job);
  const key = parseKey(options.key);
  const starts = wholeNumber('--starts', options.starts, MAX_OVERRIDE_STARTS);
  const intervalSeconds =
    options.intervalSeconds === undefined
      ? undefined
      : wholeNumber('--interval-seconds', options.intervalSeconds, MAX_OVERRIDE_INTERVAL_SECONDS);
  const burst = options.burst === undefined ? undefined : wholeNumber('--burst', options.burst, starts);
  const { job, table, perKey, stored } = await load(ctx, options.job);

  const count = Object.keys(stored).length;
  const had = Object.hasOwn(stored, key);
  const full = (n: number) =>
    new KeyLimitsError(
      `job ${job} already keeps ${n} per-key overrides, the most one job may (${MAX_OVERRIDES}); clear one it no longer needs ` +
        `(\`ops limits list --job ${job}\`), or raise pacing.perKey in its config for every key`,
      job,
      key,
      n,
    );
  if (!had && count >= MAX_OVERRIDES) throw full(count);

  const setBy = await caller(ctx);
  const override = keyLimitOverrideSchema.parse({
    starts,
    ...(intervalSeconds !== undefined ? { intervalSeconds } : {}),
    ...(burst !== undefined ? { burst } : {}),
    setAt: ctx.io.now().toISOString(),
    ...(setBy ? { setBy } : {}),
  });
  const previous = had ? entryOf(key, stored[key], perKey).override : undefined;
  const effective = effectiveKeyLimit(perKey, override);
  const result: LimitsSetResult = {
    ok: true,
    command: 'limits set',
    dryRun: Boolean(options.dryRun),
    job,
    key,
    table,
    default: perKey,
    ...(previous ? { previous } : {}),
    override,
    effective,
    written: false,
    effectiveWithin: EFFECTIVE_WITHIN,
  };
  if (options.dryRun) return result;

  const documented = `${starts} starts per ${intervalSeconds ?? perKey.intervalSeconds} s, burst ${burst ?? perKey.burst}`;
  await confirmChange(
    ctx,
    `${had ? 'replace' : 'set'} the override of key ${JSON.stringify(key)} on job ${job}: ${documented} (enforced after headroom ${perKey.headroom}: ${describeLimit(effective)})`,
    options,
  );
  await writeOverride(ctx, { table, job, key, override, full });
  result.written = true;
  ctx.io.stderr(
    `limits: key ${JSON.stringify(key)} on ${job} set to ${documented}; the consumers enforce ${describeLimit(effective)} within ${EFFECTIVE_WITHIN}`,
  );
  return result;
}

/**
 * Clears one key's override: the key goes back to the job's default. A key without one changes nothing.
 * @throws UsageError for an unknown job, one without a per-key default, or a bad --key.
 * @throws ConfirmationError when not confirmed.
 */
export async function limitsClear(ctx: CommandContext, options: LimitsClearOptions): Promise<LimitsClearResult> {
  selectJobs(ctx.resources, options.job);
  const key = parseKey(options.key);
  const { job, table, perKey, stored } = await load(ctx, options.job);
  const had = Object.hasOwn(stored, key);
  const result: LimitsClearResult = {
    ok: true,
    command: 'limits clear',
    dryRun: Boolean(options.dryRun),
    job,
    key,
    table,
    default: perKey,
    ...(had ? { previous: entryOf(key, stored[key], perKey).override } : {}),
    effective: effectiveKeyLimit(perKey, undefined),
    cleared: false,
    effectiveWithin: EFFECTIVE_WITHIN,
  };
  if (!had) {
    ctx.io.stderr(
      `limits: key ${JSON.stringify(key)} on ${job} has no override; nothing to clear (it has the default)`,
    );
    return result;
  }
  if (options.dryRun) return result;

  await confirmChange(
    ctx,
    `clear the override of key ${JSON.stringify(key)} on job ${job} (back to the default: ${describeLimit(result.effective)})`,
    options,
  );
  try {
    await ctx.clients.dynamo.send(
      new UpdateCommand({
        TableName: table,
        Key: { pk: keyLimitsItemKey(job) },
        UpdateExpression: 'REMOVE #o.#k',
        ConditionExpression: 'attribute_exists(#o.#k)',
        ExpressionAttributeNames: { '#o': OVERRIDES_ATTRIBUTE, '#k': key },
      }),
    );
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
    // Cleared by someone else since the read: the outcome asked for holds.
    ctx.io.stderr(`limits: key ${JSON.stringify(key)} on ${job} was cleared meanwhile; nothing left to clear`);
    return result;
  }
  result.cleared = true;
  ctx.io.stderr(
    `limits: key ${JSON.stringify(key)} on ${job} cleared; the consumers enforce the default within ${EFFECTIVE_WITHIN}`,
  );
  return result;
}

const defaultLine = (job: string, d: PerKeyDefault): string =>
  `limits ${job}: per key of field "${d.field}", default ${describeLimit(d)} (after headroom ${d.headroom}, as deployed)`;

const overrideRow = (label: string, o: KeyLimitOverride): Cell[] => [
  label,
  o.starts,
  o.intervalSeconds,
  o.burst,
  o.setAt,
  o.setBy,
];
const limitRow = (label: string, l: KeyLimit): Cell[] => [
  label,
  l.startsPerInterval,
  l.intervalSeconds,
  l.burst,
  undefined,
  undefined,
];
const LIMIT_HEAD = ['', 'starts', 'interval (s)', 'burst', 'set at', 'set by'];

const pacingLine = (job: string, p: DeployedPacing): string =>
  `pacing ${job}: ${p.enabled ? `${p.startsPerInterval} starts per ${p.intervalSeconds} s (after headroom), burst ${p.burst}` : 'off (the concurrency cap alone)'}, ` +
  `concurrency ${p.concurrency}; ` +
  (p.batchSize !== undefined ? `batches of ${p.batchSize}, window ${p.batchingWindowSeconds} s, ` : 'admission off, ') +
  `short wait ${p.shortWaitMs / 1000} s (set in pacing, or derived from the rate at synthesis), ` +
  `safety margin ${p.safetyMarginMs} ms` +
  (p.adaptiveRate ? '' : '; adaptive rate off');

export function renderLimitsList(result: LimitsListResult): string {
  if (!result.default)
    return `${pacingLine(result.job, result.pacing)}\nno per-key limits: add pacing.perKey to the job's config`;
  const lines = [pacingLine(result.job, result.pacing), defaultLine(result.job, result.default)];
  if (result.overrides.length === 0) {
    lines.push('no overrides: every key has the default');
  } else {
    lines.push(
      renderTable(
        ['key', 'starts', 'interval (s)', 'burst', 'enforced', 'set at', 'set by'],
        result.overrides.map((o) => [
          o.key,
          o.override.starts,
          o.override.intervalSeconds,
          o.override.burst,
          o.invalid ? `invalid, so the default: ${describeLimit(o.effective)}` : describeLimit(o.effective),
          o.override.setAt,
          o.override.setBy,
        ]),
      ),
    );
  }
  lines.push(
    `${result.overrides.length} of at most ${result.maxOverrides} overrides; an override's starts is the key's documented quota ` +
      `(unset fields take the default's), and the per-key headroom (${result.default.headroom}) applies`,
  );
  return lines.join('\n');
}

export function renderLimitsSet(result: LimitsSetResult): string {
  const head = `limits set ${result.job} ${JSON.stringify(result.key)}${result.dryRun ? ' (dry run: nothing written)' : ''}`;
  const table = renderTable(LIMIT_HEAD, [
    limitRow('default (enforced)', result.default),
    ...(result.previous ? [overrideRow('previous override', result.previous)] : []),
    overrideRow('override', result.override),
    limitRow('enforced', result.effective),
  ]);
  const tail = result.written
    ? `every consumer enforces it within ${result.effectiveWithin}; \`ops limits list --job ${result.job}\` shows every override`
    : `once written, every consumer would enforce it within ${result.effectiveWithin}`;
  return `${head}\n${defaultLine(result.job, result.default)}\n${table}\n${tail}`;
}

export function renderLimitsClear(result: LimitsClearResult): string {
  const head = `limits clear ${result.job} ${JSON.stringify(result.key)}${result.dryRun && result.previous ? ' (dry run: nothing cleared)' : ''}`;
  if (!result.previous)
    return `${head}\nkey ${JSON.stringify(result.key)} has no override: nothing changed; it has the default, ${describeLimit(result.effective)}`;
  const table = renderTable(LIMIT_HEAD, [
    overrideRow('override', result.previous),
    limitRow('enforced after', result.effective),
  ]);
  const tail = result.cleared
    ? `every consumer enforces the default within ${result.effectiveWithin}`
    : result.dryRun
      ? `once cleared, every consumer would enforce the default within ${result.effectiveWithin}`
      : 'it was cleared meanwhile: nothing left to clear';
  return `${head}\n${defaultLine(result.job, result.default)}\n${table}\n${tail}`;
}
