// The console's JSON API: one request (method, path, query, parsed body) to one ConsoleSource call, with every
// parameter checked first; console/server.ts has already refused what is not the page's own (Host, Origin, token).
// The changing actions are refused here, before the source is called, when the console was started with changes off.
import { escapeUnprintable } from '../lambda/core/message';
import { OpsError, UsageError } from '../ops/errors';
import { MAX_REDRIVE_RATE } from '../ops/commands/redrive';
import { MAX_PEEK, PEEK_WARNING } from '../ops/commands/dlqPeek';
import {
  CHANGING_ACTIONS,
  ConsoleError,
  ConsoleForbiddenError,
  type ChangingAction,
  type ConsoleSource,
} from './source';

export interface ApiRequest {
  method: string;
  /** The path, without the query: `/api/overview`. */
  path: string;
  query: URLSearchParams;
  /** The parsed JSON body of a POST; undefined for a GET. */
  body?: unknown;
}

export interface ApiResponse {
  status: number;
  body: unknown;
}

export interface ApiOptions {
  source: ConsoleSource;
  /** The changing actions (pause, resume, redrive, catch-up) are on. */
  changesAllowed: boolean;
  /** Why they are off, shown by the page next to the disabled buttons. */
  changesNote?: string;
  /** How often the page polls. @default { overviewMs: 5000, chartsMs: 3000 } */
  refresh?: { overviewMs: number; chartsMs: number };
  /** The charts' window when the page does not ask for one. @default 15 */
  chartMinutes?: number;
}

/** The longest window the charts take: six hours (a night's run). */
export const MAX_CHART_MINUTES = 360;
/** Most batches the overview lists per job. */
export const MAX_OVERVIEW_BATCHES = 50;

const BUSINESS_DATE = /^\d{4}-\d{2}-\d{2}$/;

type Handler = (request: ApiRequest, options: ApiOptions) => Promise<unknown>;

const GET: Record<string, Handler> = {
  '/api/config': async (_request, options) => ({
    description: options.source.description,
    jobs: await options.source.jobs(),
    changesAllowed: options.changesAllowed,
    changesNote: options.changesAllowed ? undefined : (options.changesNote ?? 'changes are off for this console'),
    refresh: options.refresh ?? { overviewMs: 5000, chartsMs: 3000 },
    chartMinutes: options.chartMinutes ?? 15,
    peekWarning: PEEK_WARNING,
  }),
  '/api/overview': async (request, options) =>
    options.source.overview({
      batches: intParam(request.query.get('batches') ?? undefined, 'batches', 1, MAX_OVERVIEW_BATCHES, 5),
    }),
  '/api/charts': async (request, options) => {
    const job = await jobParam(request.query.get('job') ?? undefined, options.source);
    const minutes = intParam(
      request.query.get('minutes') ?? undefined,
      'minutes',
      1,
      MAX_CHART_MINUTES,
      options.chartMinutes ?? 15,
    );
    return options.source.charts(job, { minutes });
  },
  '/api/operation': async (request, options) => {
    const id = (request.query.get('id') ?? '').trim();
    if (id === '' || id.length > 1024)
      throw new ConsoleError('say which operation: ?id=<operationId> (1 to 1024 characters)');
    const job = request.query.get('job') || undefined;
    return options.source.operation(id, { job: job === undefined ? undefined : await jobParam(job, options.source) });
  },
};

const POST: Record<string, Handler> = {
  // A peek changes nothing an operator would undo (the messages are released at once), so it needs the token but not
  // --allow-changes; the page says that it is a receive.
  '/api/dlq-peek': async (request, options) => {
    const body = objectBody(request.body);
    return options.source.dlqPeek(await jobParam(body.job, options.source), {
      max: intParam(body.max, 'max', 1, MAX_PEEK, 10),
    });
  },
  '/api/pause': async (request, options) =>
    options.source.pause(await jobParam(objectBody(request.body).job, options.source)),
  '/api/resume': async (request, options) =>
    options.source.resume(await jobParam(objectBody(request.body).job, options.source)),
  '/api/redrive': async (request, options) => {
    const body = objectBody(request.body);
    const job = await jobParam(body.job, options.source);
    return options.source.redrive(job, {
      rate:
        body.rate === undefined || body.rate === '' ? undefined : intParam(body.rate, 'rate', 1, MAX_REDRIVE_RATE, 10),
    });
  },
  '/api/catch-up': async (request, options) => {
    const body = objectBody(request.body);
    const job = await jobParam(body.job, options.source);
    if (body.missed === true) {
      const since = body.since === undefined || body.since === '' ? undefined : dateParam(body.since, 'since');
      return options.source.catchUp(job, { missed: true, ...(since ? { since } : {}) });
    }
    return options.source.catchUp(job, { from: dateParam(body.from, 'from'), to: dateParam(body.to, 'to') });
  },
};

/** Whether a POST path is one of the actions that change the stack. */
export function changingAction(path: string): ChangingAction | undefined {
  const name = path.replace(/^\/api\//, '');
  return (CHANGING_ACTIONS as readonly string[]).includes(name) ? (name as ChangingAction) : undefined;
}

/** Answers one API request; never throws (every error becomes its status and `{ error: { name, message } }`). */
export async function handleApi(request: ApiRequest, options: ApiOptions): Promise<ApiResponse> {
  try {
    const table =
      request.method === 'POST' ? POST : request.method === 'GET' || request.method === 'HEAD' ? GET : undefined;
    if (!table) throw new ConsoleError(`${request.method} is not allowed here`, { status: 405 });
    const handler = table[request.path];
    if (!handler) {
      const other = request.method === 'POST' ? GET : POST;
      if (other[request.path])
        throw new ConsoleError(`${request.path} takes ${request.method === 'POST' ? 'GET' : 'POST'}`, { status: 405 });
      throw new ConsoleError(`no such API: ${request.path}`, { status: 404 });
    }
    const action = request.method === 'POST' ? changingAction(request.path) : undefined;
    if (action && !options.changesAllowed) {
      throw new ConsoleForbiddenError(
        `${action} is off: ${options.changesNote ?? 'changes are off for this console'}`,
        'changes-off',
      );
    }
    return { status: 200, body: escapedData(await handler(request, options)) };
  } catch (error) {
    return errorResponse(error);
  }
}

/** The error as the page shows it: its name and message, and the status that says whose fault it was. */
export function errorResponse(error: unknown): ApiResponse {
  const e = error instanceof Error ? error : new Error(String(error));
  const status =
    e instanceof ConsoleError ? e.status : e instanceof UsageError ? 400 : e instanceof OpsError ? 409 : 500;
  return { status, body: escapedData({ ok: false, error: { name: e.name, message: e.message } }) };
}

/**
 * An answer with every string in it, keys too, escaped (escapeUnprintable): what the page shows is data (DLQ bodies
 * and reasons, keys, batch IDs), and though it only ever goes in as text, never HTML, a bidi override or a line
 * separator in a text node still makes the page show something else than the data holds. Escaped here, on the
 * server, once for every view the page has or will have, rather than in each of app.js's renderers, and tested
 * here. The page only ever sends back what it was given for job names, which config keeps printable.
 */
function escapedData(body: unknown): unknown {
  const text = JSON.stringify(body, (_key, value: unknown) => {
    if (typeof value === 'string') return escapeUnprintable(value);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [escapeUnprintable(k), v]));
  });
  return text === undefined ? undefined : JSON.parse(text);
}

function objectBody(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new ConsoleError('the request body must be a JSON object');
  return body as Record<string, unknown>;
}

/** @throws ConsoleError for a missing job, or 404 for one the stack does not have. */
async function jobParam(value: unknown, source: ConsoleSource): Promise<string> {
  if (typeof value !== 'string' || value === '') throw new ConsoleError('say which job: "job" is required');
  const jobs = await source.jobs();
  if (!jobs.includes(value))
    throw new ConsoleError(`unknown job "${value}"; the stack has: ${jobs.join(', ')}`, { status: 404 });
  return value;
}

function intParam(value: unknown, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(n) || n < min || n > max)
    throw new ConsoleError(`${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  return n;
}

function dateParam(value: unknown, name: string): string {
  if (typeof value !== 'string' || !BUSINESS_DATE.test(value))
    throw new ConsoleError(`${name} must be a date YYYY-MM-DD, got ${JSON.stringify(value ?? null)}`);
  return value;
}
