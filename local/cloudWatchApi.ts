// The CloudWatch API over a local run's metric samples (local/metricSamples.ts: the functions' EMF metrics and the
// queues' AWS/SQS depth), so the console and `ops` read a job's time series with GetMetricData and ListMetrics the same
// way from the local runtime as from CloudWatch on AWS. Every LocalSession serves one (local/session.ts).
//
// Hand-written, like the SNS API beside it: no CloudWatch emulator on npm answers from samples we already hold, and
// what is needed is two read calls in CloudWatch's AWS JSON 1.0 protocol (X-Amz-Target GraniteServiceVersion20100801.*,
// dates as epoch seconds, errors as `__type` plus the query-compatible `x-amzn-query-error` code the SDK maps to its
// exceptions). Not behind a local IAM gateway: only operators and the console call it (no function reads metrics).
//
// The subset, and where it differs from CloudWatch:
// - GetMetricData takes MetricStat queries only (Namespace, MetricName, Dimensions; Period 1, 5, 10, 20, 30 or a
//   multiple of 60; Stat Sum, Maximum, Minimum, Average or SampleCount), with Id, Label and ReturnData; ScanBy; a
//   metric matches only with exactly the query's dimensions, as on CloudWatch. Metric math (Expression), percentiles,
//   MetricStat.Unit, a query-level Period, AccountId and dynamic labels are refused by name (InvalidParameterValue).
// - Periods start at StartTime rounded down as CloudWatch rounds it (to the period under a minute, else to the minute,
//   the five minutes past 15 days ago, the hour past 63), and a datapoint is the period's aggregate of the samples in
//   [StartTime, EndTime); a period with no sample has no datapoint, as on CloudWatch.
// - Every sample is kept at its own timestamp, as if each metric were high resolution: a period under a minute shows
//   what CloudWatch would only show per minute for the pipeline's (standard resolution) metrics.
// - Pagination: MaxDatapoints (default CloudWatch's 100,800) caps the datapoints of a response; the rest is kept, as
//   computed at the first call, behind a NextToken for 10 minutes (a later page does not see samples recorded since;
//   the parameters of the call that carries the token are not compared with the first call's).
// - ListMetrics lists the metrics the samples hold (Namespace, MetricName, Dimensions filters: a metric matches when it
//   has every filter's dimension, with its value when given; RecentlyActive PT3H), 500 a page.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { listenOnLoopback, type RunningServer } from './servers';
import { datapoints, type MetricStatQuery, type Statistic } from './alarms';
import type { MetricSample } from './metricsTap';

/** The X-Amz-Target prefix of CloudWatch's JSON protocol. */
export const CLOUDWATCH_TARGET = 'GraniteServiceVersion20100801';
const CONTENT_TYPE = 'application/x-amz-json-1.0';
const XML_NAMESPACE = 'http://monitoring.amazonaws.com/doc/2010-08-01/';
const ACTIONS = ['GetMetricData', 'ListMetrics'] as const;
const STATISTICS: readonly Statistic[] = ['Sum', 'Maximum', 'Minimum', 'Average', 'SampleCount'];
/** The periods CloudWatch takes under a minute (high resolution); from a minute on, multiples of 60. */
const SHORT_PERIODS = [1, 5, 10, 20, 30];
/** CloudWatch's limits: queries a GetMetricData call, datapoints a response, dimensions a metric. */
const MAX_QUERIES = 500;
const DEFAULT_MAX_DATAPOINTS = 100_800;
const MAX_DIMENSIONS = 30;
/** What ListMetrics answers per page. */
const LIST_PAGE_SIZE = 500;
/** How long a GetMetricData NextToken holds its remaining datapoints, and how many such tokens are kept at once. */
const TOKEN_LIFETIME_MS = 10 * 60_000;
const MAX_TOKENS = 100;
const MINUTE_MS = 60_000;
const DAY_MS = 24 * 60 * MINUTE_MS;

export interface CloudWatchApiOptions {
  /** The samples to answer from, read at every request (a session's recorder). */
  samples: () => readonly MetricSample[];
  /** The clock StartTime's rounding and ListMetrics' RecentlyActive are measured on. @default Date.now */
  now?: () => number;
}

/** What CloudWatch's query-compatible errors carry: the query code, the JSON exception name, the HTTP status. */
const ERRORS = {
  InvalidParameterValue: { type: 'InvalidParameterValueException', status: 400 },
  InvalidParameterCombination: { type: 'InvalidParameterCombinationException', status: 400 },
  MissingParameter: { type: 'MissingRequiredParameterException', status: 400 },
  InvalidNextToken: { type: 'InvalidNextToken', status: 400 },
  InvalidAction: { type: 'UnknownOperationException', status: 400 },
  InternalServiceError: { type: 'InternalServiceFault', status: 500 },
} as const;
export type CloudWatchErrorCode = keyof typeof ERRORS;

/** An answer CloudWatch would give as an error: its query-compatible code (the SDK's exception follows from it). */
export class CloudWatchApiError extends Error {
  constructor(
    public readonly code: CloudWatchErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'CloudWatchApiError';
  }

  get status(): number {
    return ERRORS[this.code].status;
  }
}

interface Datapoints {
  id: string;
  label: string;
  timestamps: number[];
  values: number[];
}

interface MetricDataResult {
  Id: string;
  Label: string;
  Timestamps: number[];
  Values: number[];
  StatusCode: 'Complete' | 'PartialData';
  Messages: [];
}

type Body = Record<string, unknown>;
const isRecord = (v: unknown): v is Body => typeof v === 'object' && v !== null && !Array.isArray(v);

export async function startCloudWatchApi(options: CloudWatchApiOptions, port = 0): Promise<RunningServer> {
  const now = options.now ?? Date.now;
  /** GetMetricData's pending pages, by NextToken. */
  const pages = new Map<string, { rest: Datapoints[]; expiresAt: number }>();

  const server = createServer((req, res) => {
    handle(req, res).catch((error: Error) => {
      const known =
        error instanceof CloudWatchApiError
          ? error
          : new CloudWatchApiError('InternalServiceError', error.message, { cause: error });
      replyError(res, known);
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const contentType = String(req.headers['content-type'] ?? '');
    if (contentType.startsWith('application/x-www-form-urlencoded')) {
      // An older AWS CLI or SDK speaks CloudWatch's query protocol: say so in its own XML, which it can read.
      return replyQueryError(
        res,
        `the local CloudWatch speaks AWS JSON 1.0 only (X-Amz-Target ${CLOUDWATCH_TARGET}.<Action>), as the current AWS SDKs and CLI do; this request used the query protocol`,
      );
    }
    const target = String(req.headers['x-amz-target'] ?? '');
    const action = target.startsWith(`${CLOUDWATCH_TARGET}.`) ? target.slice(CLOUDWATCH_TARGET.length + 1) : '';
    if (req.method !== 'POST' || !(ACTIONS as readonly string[]).includes(action)) {
      throw new CloudWatchApiError(
        'InvalidAction',
        action
          ? `${action} is not supported by the local CloudWatch (it answers ${ACTIONS.join(' and ')})`
          : `the request names no action: the local CloudWatch answers POST requests with X-Amz-Target ${CLOUDWATCH_TARGET}.<Action> (${ACTIONS.join(', ')})`,
      );
    }
    let body: unknown;
    try {
      body = raw === '' ? {} : JSON.parse(raw);
    } catch (error) {
      throw new CloudWatchApiError(
        'InvalidParameterValue',
        `the request body is not JSON: ${(error as Error).message}`,
        { cause: error },
      );
    }
    if (!isRecord(body)) throw new CloudWatchApiError('InvalidParameterValue', 'the request body is not a JSON object');
    const samples = options.samples();
    if (action === 'ListMetrics') return reply(res, listMetrics(body, samples, now()));
    return reply(res, getMetricData(body, samples, now(), pages));
  }

  return listenOnLoopback(server, port);
}

/** GetMetricData: each query's datapoints, or the next page of an earlier call's. */
function getMetricData(
  body: Body,
  samples: readonly MetricSample[],
  nowMs: number,
  pages: Map<string, { rest: Datapoints[]; expiresAt: number }>,
): Body {
  for (const [token, page] of pages) if (page.expiresAt <= nowMs) pages.delete(token);
  const maxDatapoints = body.MaxDatapoints === undefined ? DEFAULT_MAX_DATAPOINTS : Number(body.MaxDatapoints);
  if (!Number.isSafeInteger(maxDatapoints) || maxDatapoints < 1)
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `The parameter MaxDatapoints must be a whole number of at least 1, got ${JSON.stringify(body.MaxDatapoints)}.`,
    );
  let results: Datapoints[];
  if (body.NextToken !== undefined) {
    const page = typeof body.NextToken === 'string' ? pages.get(body.NextToken) : undefined;
    if (!page)
      throw new CloudWatchApiError(
        'InvalidNextToken',
        'The service cannot find the NextToken (it expires 10 minutes after the call that gave it, and the local CloudWatch forgets it when it restarts).',
      );
    pages.delete(body.NextToken as string);
    results = page.rest;
  } else {
    results = queryAll(body, samples, nowMs);
  }
  const { page, rest } = paginate(results, maxDatapoints);
  const out: Body = {
    MetricDataResults: page.map(
      (r, i): MetricDataResult => ({
        Id: r.id,
        Label: r.label,
        Timestamps: r.timestamps,
        Values: r.values,
        // A result whose datapoints go on in the next page is partial in this one.
        StatusCode: i === page.length - 1 && rest.length > 0 && rest[0].id === r.id ? 'PartialData' : 'Complete',
        Messages: [],
      }),
    ),
    Messages: [],
  };
  if (rest.length > 0) {
    if (pages.size >= MAX_TOKENS) pages.delete(pages.keys().next().value as string);
    const token = randomUUID();
    pages.set(token, { rest, expiresAt: nowMs + TOKEN_LIFETIME_MS });
    out.NextToken = token;
  }
  return out;
}

/** The first `max` datapoints, query by query, and what is left for the next page. */
function paginate(results: Datapoints[], max: number): { page: Datapoints[]; rest: Datapoints[] } {
  const page: Datapoints[] = [];
  let room = max;
  let i = 0;
  for (; i < results.length; i++) {
    const r = results[i];
    if (r.timestamps.length <= room) {
      page.push(r);
      room -= r.timestamps.length;
      continue;
    }
    if (room > 0) page.push({ ...r, timestamps: r.timestamps.slice(0, room), values: r.values.slice(0, room) });
    const left = { ...r, timestamps: r.timestamps.slice(room), values: r.values.slice(room) };
    return { page, rest: [left, ...results.slice(i + 1)] };
  }
  return { page, rest: [] };
}

/** Every query of a GetMetricData request, validated (all of them before any is answered), then answered. */
function queryAll(body: Body, samples: readonly MetricSample[], nowMs: number): Datapoints[] {
  const window = readWindow(body);
  const queries = readQueries(body);
  const byMetric = samplesByMetric(samples, queries, window, nowMs);
  return queries
    .filter((q) => q.returnData)
    .map(({ query, label }) => answerQuery(query, label, byMetric, window, nowMs));
}

interface QueryWindow {
  startMs: number;
  endMs: number;
  scanBy: 'TimestampDescending' | 'TimestampAscending';
}

/** The request's time window and datapoint order (LabelOptions checked, and otherwise ignored). */
function readWindow(body: Body): QueryWindow {
  const startMs = timeOf(body.StartTime, 'StartTime');
  const endMs = timeOf(body.EndTime, 'EndTime');
  if (startMs >= endMs)
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      'The parameter StartTime must be less than the parameter EndTime.',
    );
  const scanBy = body.ScanBy ?? 'TimestampDescending';
  if (scanBy !== 'TimestampDescending' && scanBy !== 'TimestampAscending') {
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `The parameter ScanBy must be TimestampDescending or TimestampAscending, got ${JSON.stringify(scanBy)}.`,
    );
  }
  if (body.LabelOptions !== undefined && !isRecord(body.LabelOptions))
    throw new CloudWatchApiError('InvalidParameterValue', 'The parameter LabelOptions must be an object.');
  return { startMs, endMs, scanBy };
}

type ReadQuery = ReturnType<typeof metricStatQuery>;

/** MetricDataQueries: 1 to 500 of them, each valid, their Ids unique. */
function readQueries(body: Body): ReadQuery[] {
  if (body.MetricDataQueries === undefined)
    throw new CloudWatchApiError('MissingParameter', 'The parameter MetricDataQueries is required.');
  if (!Array.isArray(body.MetricDataQueries) || body.MetricDataQueries.length === 0) {
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      'The parameter MetricDataQueries must be a list of 1 to 500 queries.',
    );
  }
  if (body.MetricDataQueries.length > MAX_QUERIES) {
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `The collection MetricDataQueries must not have a size greater than ${MAX_QUERIES} (it has ${body.MetricDataQueries.length}).`,
    );
  }
  const queries = body.MetricDataQueries.map((q, i) => metricStatQuery(q, `MetricDataQueries.member.${i + 1}`));
  const ids = new Set<string>();
  for (const q of queries) {
    if (ids.has(q.query.id))
      throw new CloudWatchApiError(
        'InvalidParameterValue',
        `The value ${q.query.id} for field Id in MetricDataQueries is not unique.`,
      );
    ids.add(q.query.id);
  }
  return queries;
}

/**
 * One pass over the samples: the window's (from the earliest aligned start), grouped by metric, so each query scans
 * its own metric's samples only.
 */
function samplesByMetric(
  samples: readonly MetricSample[],
  queries: ReadQuery[],
  { startMs, endMs }: QueryWindow,
  nowMs: number,
): Map<string, MetricSample[]> {
  const byMetric = new Map<string, MetricSample[]>();
  const wanted = new Set(queries.map((q) => metricKey(q.query.namespace, q.query.metricName)));
  const earliest = Math.min(...queries.map((q) => alignStart(startMs, q.query.periodSeconds, nowMs)));
  for (const s of samples) {
    if (s.timestamp < earliest || s.timestamp >= endMs) continue;
    const key = metricKey(s.namespace, s.metricName);
    if (!wanted.has(key)) continue;
    let group = byMetric.get(key);
    if (!group) byMetric.set(key, (group = []));
    group.push(s);
  }
  return byMetric;
}

/** One query's datapoints from its metric's samples, in the order ScanBy asks for. */
function answerQuery(
  query: MetricStatQuery,
  label: string,
  byMetric: Map<string, MetricSample[]>,
  { startMs, scanBy }: QueryWindow,
  nowMs: number,
): Datapoints {
  const alignedStart = alignStart(startMs, query.periodSeconds, nowMs);
  const mine = (byMetric.get(metricKey(query.namespace, query.metricName)) ?? []).filter(
    (s) => s.timestamp >= alignedStart,
  );
  const points = mine.length > 0 ? periodPoints(query, mine, alignedStart) : [];
  if (scanBy === 'TimestampDescending') points.reverse();
  return {
    id: query.id,
    label,
    timestamps: points.map((p) => p.timestamp / 1000),
    values: points.map((p) => p.value),
  };
}

/** The datapoints of the periods (from `alignedStart`) that have samples, oldest first. */
function periodPoints(
  query: MetricStatQuery,
  mine: MetricSample[],
  alignedStart: number,
): { timestamp: number; value: number }[] {
  const periodMs = query.periodSeconds * 1000;
  // Only the periods the samples span: the window may be days long, the samples a few minutes.
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const s of mine) {
    if (s.timestamp < first) first = s.timestamp;
    if (s.timestamp > last) last = s.timestamp;
  }
  const from = alignedStart + Math.floor((first - alignedStart) / periodMs) * periodMs;
  const periods = Math.floor((last - from) / periodMs) + 1;
  const points: { timestamp: number; value: number }[] = [];
  datapoints(query, mine, from, periods).forEach((value, i) => {
    if (value !== undefined) points.push({ timestamp: from + i * periodMs, value });
  });
  return points;
}

/**
 * StartTime as CloudWatch rounds it down for GetMetricData: a period under a minute to its own multiple (even 5-, 10-,
 * 20- or 30-second divisions of a minute), else to the minute within 15 days, 5 minutes within 63, the hour before.
 */
export function alignStart(startMs: number, periodSeconds: number, nowMs: number): number {
  const age = nowMs - startMs;
  const unit =
    periodSeconds < 60
      ? periodSeconds * 1000
      : age <= 15 * DAY_MS
        ? MINUTE_MS
        : age <= 63 * DAY_MS
          ? 5 * MINUTE_MS
          : 60 * MINUTE_MS;
  return Math.floor(startMs / unit) * unit;
}

/** One query, refused by name when it asks for what the local CloudWatch does not do. */
function metricStatQuery(raw: unknown, at: string): { query: MetricStatQuery; label: string; returnData: boolean } {
  if (!isRecord(raw)) throw new CloudWatchApiError('InvalidParameterValue', `The parameter ${at} must be an object.`);
  const id = queryId(raw.Id, at);
  refuseUnsupported(raw, at, id);
  const label = labelOf(raw.Label, at, id);
  if (raw.ReturnData !== undefined && typeof raw.ReturnData !== 'boolean')
    throw new CloudWatchApiError('InvalidParameterValue', `The parameter ${at}.ReturnData must be true or false.`);
  const stat = raw.MetricStat;
  if (stat === undefined)
    throw new CloudWatchApiError(
      'MissingParameter',
      `${at} (query ${id}) needs a MetricStat: the local CloudWatch answers MetricStat queries only.`,
    );
  if (!isRecord(stat))
    throw new CloudWatchApiError('InvalidParameterValue', `The parameter ${at}.MetricStat must be an object.`);
  const query = metricStatOf(stat, `${at}.MetricStat`, id);
  return { query, label: label ?? query.metricName, returnData: raw.ReturnData !== false };
}

/** A query's Id: a lowercase letter, then letters, digits and underscores. */
function queryId(id: unknown, at: string): string {
  if (id === undefined) throw new CloudWatchApiError('MissingParameter', `The parameter ${at}.Id is required.`);
  if (typeof id !== 'string' || !/^[a-z][a-zA-Z0-9_]{0,254}$/.test(id)) {
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `The value ${JSON.stringify(id)} for parameter ${at}.Id is not valid: it must start with a lowercase letter and hold only letters, digits and underscores.`,
    );
  }
  return id;
}

/** Refuses metric math, a cross-account query and a query-level Period, each by name. */
function refuseUnsupported(raw: Body, at: string, id: string): void {
  if (raw.Expression !== undefined) {
    const both =
      raw.MetricStat !== undefined ? ' (and a query has either an Expression or a MetricStat, not both)' : '';
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `${at}.Expression (metric math or SEARCH, query ${id}) is not supported by the local CloudWatch: it answers MetricStat queries only${both}.`,
    );
  }
  if (raw.AccountId !== undefined)
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `${at}.AccountId (a cross-account query, query ${id}) is not supported by the local CloudWatch: it holds one account's metrics.`,
    );
  if (raw.Period !== undefined) {
    throw new CloudWatchApiError(
      'InvalidParameterCombination',
      `${at}.Period applies to an Expression, which the local CloudWatch does not support; query ${id} takes its period from MetricStat.Period.`,
    );
  }
}

/** A query's Label, when given: a string without dynamic labels. */
function labelOf(label: unknown, at: string, id: string): string | undefined {
  if (label !== undefined && typeof label !== 'string')
    throw new CloudWatchApiError('InvalidParameterValue', `The parameter ${at}.Label must be a string.`);
  if (typeof label === 'string' && label.includes('${'))
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `${at}.Label: dynamic labels (\${...}, query ${id}) are not supported by the local CloudWatch.`,
    );
  return label;
}

/** A MetricStat (at `where`): its statistic, its period and its metric, without a Unit. */
function metricStatOf(stat: Body, where: string, id: string): MetricStatQuery {
  if (stat.Unit !== undefined)
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `${where}.Unit (query ${id}) is not supported by the local CloudWatch: it keeps samples without their unit; leave Unit out.`,
    );
  const statistic = statisticOf(stat.Stat, where, id);
  const periodSeconds = periodOf(stat.Period, where);
  const metric = stat.Metric;
  if (!isRecord(metric)) throw new CloudWatchApiError('MissingParameter', `The parameter ${where}.Metric is required.`);
  if (typeof metric.Namespace !== 'string' || metric.Namespace === '')
    throw new CloudWatchApiError('MissingParameter', `The parameter ${where}.Metric.Namespace is required.`);
  if (typeof metric.MetricName !== 'string' || metric.MetricName === '')
    throw new CloudWatchApiError('MissingParameter', `The parameter ${where}.Metric.MetricName is required.`);
  return {
    id,
    namespace: metric.Namespace,
    metricName: metric.MetricName,
    dimensions: dimensionsOf(metric.Dimensions, `${where}.Metric.Dimensions`, true) as Record<string, string>,
    stat: statistic,
    periodSeconds,
  };
}

function statisticOf(raw: unknown, where: string, id: string): Statistic {
  if (raw === undefined) throw new CloudWatchApiError('MissingParameter', `The parameter ${where}.Stat is required.`);
  if (typeof raw !== 'string' || !(STATISTICS as readonly string[]).includes(raw)) {
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `${where}.Stat ${JSON.stringify(raw)} (query ${id}) is not supported by the local CloudWatch (it supports ${STATISTICS.join(', ')}).`,
    );
  }
  return raw as Statistic;
}

/** A MetricStat's Period: 1, 5, 10, 20 or 30 seconds, or a whole number of minutes. */
function periodOf(raw: unknown, where: string): number {
  if (raw === undefined) throw new CloudWatchApiError('MissingParameter', `The parameter ${where}.Period is required.`);
  const period = Number(raw);
  if (!Number.isInteger(period) || period <= 0 || (period < 60 ? !SHORT_PERIODS.includes(period) : period % 60 !== 0)) {
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `The parameter ${where}.Period must be 1, 5, 10, 20, 30 or a multiple of 60, got ${JSON.stringify(raw)}.`,
    );
  }
  return period;
}

/** A list of { Name, Value } as a record; with `valueRequired` false a Value may be absent (ListMetrics' filters). */
function dimensionsOf(raw: unknown, at: string, valueRequired: boolean): Record<string, string | undefined> {
  if (raw === undefined) return {};
  if (!Array.isArray(raw)) throw new CloudWatchApiError('InvalidParameterValue', `The parameter ${at} must be a list.`);
  if (raw.length > MAX_DIMENSIONS)
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `The collection ${at} must not have a size greater than ${MAX_DIMENSIONS}.`,
    );
  const out: Record<string, string | undefined> = {};
  raw.forEach((d, i) => {
    const where = `${at}.member.${i + 1}`;
    if (!isRecord(d) || typeof d.Name !== 'string' || d.Name === '')
      throw new CloudWatchApiError('MissingParameter', `The parameter ${where}.Name is required.`);
    if (d.Value !== undefined && typeof d.Value !== 'string')
      throw new CloudWatchApiError('InvalidParameterValue', `The parameter ${where}.Value must be a string.`);
    if (valueRequired && d.Value === undefined)
      throw new CloudWatchApiError('MissingParameter', `The parameter ${where}.Value is required.`);
    if (d.Name in out)
      throw new CloudWatchApiError('InvalidParameterValue', `The dimension ${d.Name} appears more than once in ${at}.`);
    out[d.Name] = d.Value as string | undefined;
  });
  return out;
}

/** A date as the JSON protocol sends it (epoch seconds, fractions allowed), or an ISO string (a hand-written call). */
function timeOf(raw: unknown, name: string): number {
  if (raw === undefined) throw new CloudWatchApiError('MissingParameter', `The parameter ${name} is required.`);
  const ms = typeof raw === 'number' ? raw * 1000 : typeof raw === 'string' ? Date.parse(raw) : Number.NaN;
  if (!Number.isFinite(ms))
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `The parameter ${name} must be a timestamp (epoch seconds), got ${JSON.stringify(raw)}.`,
    );
  return ms;
}

const metricKey = (namespace: string, metricName: string) => `${namespace}\u0000${metricName}`;

/** ListMetrics: every metric (namespace, name, dimension set) the samples hold that the filters let through. */
function listMetrics(body: Body, samples: readonly MetricSample[], nowMs: number): Body {
  for (const field of ['Namespace', 'MetricName'] as const) {
    if (body[field] !== undefined && typeof body[field] !== 'string')
      throw new CloudWatchApiError('InvalidParameterValue', `The parameter ${field} must be a string.`);
  }
  if (body.IncludeLinkedAccounts === true || body.OwningAccount !== undefined) {
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `${body.OwningAccount !== undefined ? 'OwningAccount' : 'IncludeLinkedAccounts'} (cross-account observability) is not supported by the local CloudWatch: it holds one account's metrics.`,
    );
  }
  if (body.RecentlyActive !== undefined && body.RecentlyActive !== 'PT3H')
    throw new CloudWatchApiError(
      'InvalidParameterValue',
      `The parameter RecentlyActive must be PT3H, got ${JSON.stringify(body.RecentlyActive)}.`,
    );
  const filters = dimensionsOf(body.Dimensions, 'Dimensions', false);
  const since = body.RecentlyActive === 'PT3H' ? nowMs - 3 * 60 * MINUTE_MS : Number.NEGATIVE_INFINITY;
  const metrics = new Map<
    string,
    { Namespace: string; MetricName: string; Dimensions: { Name: string; Value: string }[] }
  >();
  for (const s of samples) {
    if (s.timestamp < since) continue;
    if (body.Namespace !== undefined && s.namespace !== body.Namespace) continue;
    if (body.MetricName !== undefined && s.metricName !== body.MetricName) continue;
    if (
      !Object.entries(filters).every(
        ([name, value]) => name in s.dimensions && (value === undefined || s.dimensions[name] === value),
      )
    )
      continue;
    const names = Object.keys(s.dimensions).sort();
    const key = JSON.stringify([s.namespace, s.metricName, ...names.map((n) => [n, s.dimensions[n]])]);
    if (!metrics.has(key))
      metrics.set(key, {
        Namespace: s.namespace,
        MetricName: s.metricName,
        Dimensions: names.map((Name) => ({ Name, Value: s.dimensions[Name] })),
      });
  }
  // Sorted, so a page boundary stays put while samples of the same metrics keep arriving.
  const all = [...metrics].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, m]) => m);
  const token = body.NextToken;
  const start =
    token === undefined
      ? 0
      : typeof token === 'string'
        ? Number(Buffer.from(token, 'base64url').toString('utf8'))
        : Number.NaN;
  if (!Number.isSafeInteger(start) || start < 0 || start > all.length)
    throw new CloudWatchApiError('InvalidNextToken', 'The service cannot find the NextToken.');
  const end = start + LIST_PAGE_SIZE;
  return {
    Metrics: all.slice(start, end),
    ...(end < all.length ? { NextToken: Buffer.from(String(end), 'utf8').toString('base64url') } : {}),
  };
}

function reply(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': CONTENT_TYPE, 'x-amzn-requestid': randomUUID() });
  res.end(JSON.stringify(body));
}

/** AWS JSON 1.0's error, with the query-compatible code CloudWatch adds (`x-amzn-query-error: Code;Sender`). */
function replyError(res: ServerResponse, error: CloudWatchApiError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { type, status } = ERRORS[error.code];
  res.writeHead(status, {
    'content-type': CONTENT_TYPE,
    'x-amzn-requestid': randomUUID(),
    'x-amzn-query-error': `${error.code};${status >= 500 ? 'Receiver' : 'Sender'}`,
  });
  res.end(JSON.stringify({ __type: `com.amazonaws.cloudwatch#${type}`, message: error.message }));
}

function replyQueryError(res: ServerResponse, message: string): void {
  const requestId = randomUUID();
  res.writeHead(400, { 'content-type': 'text/xml', 'x-amzn-requestid': requestId });
  res.end(
    `<ErrorResponse xmlns="${XML_NAMESPACE}"><Error><Type>Sender</Type><Code>InvalidAction</Code>` +
      `<Message>${message.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')}</Message></Error><RequestId>${requestId}</RequestId></ErrorResponse>`,
  );
}
