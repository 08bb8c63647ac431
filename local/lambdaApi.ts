// The Lambda control and data plane the stack's code calls: Invoke (the producer continues itself with an Event
// invocation) and the event source mapping calls an operator uses to pause and resume consumers.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { listenOnLoopback, type RunningServer } from './servers';
import {
  FunctionError,
  FunctionNotFoundError,
  type LambdaRuntime,
  ThrottledInvocationError,
  type FunctionSpec,
} from './lambdaRuntime';
import type { SqsEventSourceMapping } from './eventSourceMapping';
import { RESERVED_ENVIRONMENT_KEYS } from './lambdaRules';

export interface LambdaApiOptions {
  runtime: LambdaRuntime;
  /** The mappings that exist now (read at every request). */
  mappings: () => SqsEventSourceMapping[];
  functionArn: (name: string) => string;
  /**
   * The account's concurrency limit GetAccountSettings answers: the local runtime does not enforce one (each function
   * without reserved concurrency has its own small cap), so this is AWS's default quota for an account. @default 1000
   */
  accountConcurrencyLimit?: number;
}

const INVOKE = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/;
const CONFIGURATION = /^\/2015-03-31\/functions\/([^/]+)\/configuration$/;
const MAPPINGS = /^\/2015-03-31\/event-source-mappings\/?$/;
const CONCURRENCY = /^\/2019-09-30\/functions\/([^/]+)\/concurrency$/;
const ACCOUNT_SETTINGS = /^\/2016-08-19\/account-settings\/?$/;
const MAPPING = /^\/2015-03-31\/event-source-mappings\/([^/?]+)$/;

export function describeMapping(m: SqsEventSourceMapping, functionArn: string): Record<string, unknown> {
  return {
    UUID: m.uuid,
    EventSourceArn: m.config.queueArn,
    FunctionArn: functionArn,
    BatchSize: m.config.batchSize,
    MaximumBatchingWindowInSeconds: m.config.maximumBatchingWindowSeconds,
    ScalingConfig: m.config.maximumConcurrency ? { MaximumConcurrency: m.config.maximumConcurrency } : undefined,
    FunctionResponseTypes: m.config.reportBatchItemFailures ? ['ReportBatchItemFailures'] : [],
    State: m.state,
    LastModified: Math.floor(Date.now() / 1000),
  };
}

export async function startLambdaApi(options: LambdaApiOptions, port = 0): Promise<RunningServer> {
  const server = createServer((req, res) => {
    handle(options, req, res).catch((error: Error) =>
      reply(res, 500, { Type: 'Service', message: error.message }, 'ServiceException'),
    );
  });
  return listenOnLoopback(server, port);
}

/** The function by name or ARN; undefined once a 404 has been answered, as Lambda answers an unknown function. */
function functionOr404(
  options: LambdaApiOptions,
  res: ServerResponse,
  nameOrArn: string,
): ReturnType<LambdaRuntime['get']> | undefined {
  try {
    return options.runtime.get(nameOrArn);
  } catch (error) {
    if (error instanceof FunctionNotFoundError) {
      reply(res, 404, { Type: 'User', message: error.message }, 'ResourceNotFoundException');
      return undefined;
    }
    throw error;
  }
}

/** Invoke: RequestResponse (its answer, or the function's error as Lambda reports it), Event (queued), DryRun. */
async function invokeFunction(
  options: LambdaApiOptions,
  req: IncomingMessage,
  res: ServerResponse,
  name: string,
  raw: string,
): Promise<void> {
  const fn = functionOr404(options, res, name);
  if (!fn) return;
  let event: unknown;
  try {
    event = raw === '' ? {} : JSON.parse(raw);
  } catch {
    return reply(
      res,
      400,
      { Type: 'User', message: 'Could not parse request body into json' },
      'InvalidRequestContentException',
    );
  }
  const type = String(req.headers['x-amz-invocation-type'] ?? 'RequestResponse');
  if (type === 'DryRun') return reply(res, 204, undefined);
  if (type === 'Event') {
    fn.invokeAsync(event);
    return reply(res, 202, undefined);
  }
  try {
    const value = await fn.invoke(event);
    return reply(res, 200, value ?? null, undefined, { 'x-amz-executed-version': '$LATEST' });
  } catch (error) {
    if (error instanceof ThrottledInvocationError)
      return reply(
        res,
        429,
        { Type: 'User', message: error.message, Reason: 'ReservedFunctionConcurrentInvocationLimitExceeded' },
        'TooManyRequestsException',
      );
    if (error instanceof FunctionError) {
      return reply(res, 200, { errorType: error.errorType, errorMessage: error.message }, undefined, {
        'x-amz-function-error': 'Unhandled',
        'x-amz-executed-version': '$LATEST',
      });
    }
    throw error;
  }
}

/** A request as a route answers it: the API's options, the request with its body and URL, the response to write. */
interface LambdaRequest {
  options: LambdaApiOptions;
  req: IncomingMessage;
  res: ServerResponse;
  raw: string;
  url: URL;
}

interface Route {
  /** The method it answers; absent: every method (its handler answers those it does not emulate). */
  method?: string;
  path: RegExp;
  answer: (request: LambdaRequest, match: RegExpExecArray) => Promise<void> | void;
}

/** The calls the local Lambda answers, tried in order: the first whose path and method match answers. */
const ROUTES: Route[] = [
  {
    method: 'POST',
    path: INVOKE,
    answer: ({ options, req, res, raw }, match) => invokeFunction(options, req, res, decodeURIComponent(match[1]), raw),
  },
  { method: 'GET', path: CONFIGURATION, answer: getFunctionConfiguration },
  { method: 'GET', path: CONCURRENCY, answer: getFunctionConcurrency },
  { method: 'GET', path: ACCOUNT_SETTINGS, answer: getAccountSettings },
  { method: 'GET', path: MAPPINGS, answer: listEventSourceMappings },
  { path: MAPPING, answer: eventSourceMapping },
];

async function handle(options: LambdaApiOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let raw = '';
  for await (const chunk of req) raw += chunk;
  const url = new URL(req.url ?? '/', 'http://local');
  const request: LambdaRequest = { options, req, res, raw, url };
  for (const route of ROUTES) {
    const match = route.path.exec(url.pathname);
    if (match && (route.method === undefined || route.method === req.method)) return route.answer(request, match);
  }
  return notEmulated(request);
}

/**
 * GetFunctionConfiguration: what an operator's tools read of a function (ops catch-up --missed reads its
 * JOB_SETTINGS): its name, ARN, handler, timeout and environment.
 */
function getFunctionConfiguration({ options, res }: LambdaRequest, match: RegExpExecArray): void {
  const fn = functionOr404(options, res, decodeURIComponent(match[1]));
  if (!fn) return;
  const spec = fn.spec as Partial<FunctionSpec> & { name: string; arn: string };
  return reply(res, 200, {
    FunctionName: spec.name,
    FunctionArn: spec.arn,
    Handler: spec.handler,
    Timeout: spec.timeoutSeconds,
    MemorySize: spec.memoryMb,
    // The template's variables only: never the runtime's own (credentials, handler, TZ), as AWS answers.
    Environment: {
      Variables: Object.fromEntries(
        Object.entries(spec.environment ?? {}).filter(
          ([k]) => !RESERVED_ENVIRONMENT_KEYS.includes(k) && !k.startsWith('AWS_'),
        ),
      ),
    },
    State: 'Active',
  });
}

/** GetFunctionConcurrency: the function's reserved concurrency, absent when it has none (as AWS answers). */
function getFunctionConcurrency({ options, res }: LambdaRequest, match: RegExpExecArray): void {
  const fn = functionOr404(options, res, decodeURIComponent(match[1]));
  if (!fn) return;
  const reserved = (fn.spec as Partial<FunctionSpec>).reservedConcurrency;
  return reply(res, 200, reserved === undefined ? {} : { ReservedConcurrentExecutions: reserved });
}

/** GetAccountSettings: the limit, and what reserved concurrency leaves unreserved, over every function deployed. */
function getAccountSettings({ options, res }: LambdaRequest): void {
  const limit = options.accountConcurrencyLimit ?? 1000;
  const reserved = options.runtime
    .list()
    .reduce((sum, fn) => sum + ((fn.spec as Partial<FunctionSpec>).reservedConcurrency ?? 0), 0);
  return reply(res, 200, {
    AccountLimit: {
      ConcurrentExecutions: limit,
      UnreservedConcurrentExecutions: limit - reserved,
      TotalCodeSize: 80_530_636_800,
      CodeSizeUnzipped: 262_144_000,
      CodeSizeZipped: 52_428_800,
    },
    AccountUsage: { FunctionCount: options.runtime.list().length, TotalCodeSize: 0 },
  });
}

/** ListEventSourceMappings, filtered by FunctionName (a name or an ARN) and EventSourceArn. */
function listEventSourceMappings({ options, res, url }: LambdaRequest): void {
  const fnFilter = url.searchParams.get('FunctionName');
  const arnFilter = url.searchParams.get('EventSourceArn');
  const list = options
    .mappings()
    .filter(
      (m) => !fnFilter || m.config.functionName === fnFilter || options.functionArn(m.config.functionName) === fnFilter,
    )
    .filter((m) => !arnFilter || m.config.queueArn === arnFilter)
    .map((m) => describeMapping(m, options.functionArn(m.config.functionName)));
  return reply(res, 200, { EventSourceMappings: list });
}

/** GetEventSourceMapping, and UpdateEventSourceMapping's Enabled (how an operator pauses and resumes a consumer). */
async function eventSourceMapping(request: LambdaRequest, match: RegExpExecArray): Promise<void> {
  const { options, req, res, raw } = request;
  const mapping = options.mappings().find((m) => m.uuid === decodeURIComponent(match[1]));
  if (!mapping)
    return reply(
      res,
      404,
      { Type: 'User', message: `The resource you requested does not exist. (Service: Lambda, UUID: ${match[1]})` },
      'ResourceNotFoundException',
    );
  if (req.method === 'PUT') {
    const body = raw ? (JSON.parse(raw) as { Enabled?: boolean; BatchSize?: number }) : {};
    if (body.Enabled === true) mapping.start();
    if (body.Enabled === false) await mapping.stop();
    return reply(res, 202, describeMapping(mapping, options.functionArn(mapping.config.functionName)));
  }
  if (req.method === 'GET')
    return reply(res, 200, describeMapping(mapping, options.functionArn(mapping.config.functionName)));
  return notEmulated(request);
}

function notEmulated({ req, res, url }: LambdaRequest): void {
  return reply(
    res,
    404,
    { Type: 'User', message: `${req.method} ${url.pathname} is not emulated locally` },
    'ResourceNotFoundException',
  );
}

function reply(
  res: ServerResponse,
  status: number,
  body: unknown,
  errorType?: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    'x-amzn-requestid': randomUUID(),
    ...(errorType ? { 'x-amzn-errortype': errorType } : {}),
    ...headers,
  });
  res.end(body === undefined ? '' : JSON.stringify(body));
}
