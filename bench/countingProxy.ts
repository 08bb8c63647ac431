// Benchmark (`npm run bench`), request counting: an HTTP proxy in front of an embedded AWS-protocol server that the
// functions (worker threads, out of reach of SDK middleware in this process) are pointed at. It counts every request by
// action and table, and asks DynamoDB for the capacity each one consumed.
//
// Hand-written: a proxy that only forwards and reads is a few dozen lines, and it must rewrite one request field
// (ReturnConsumedCapacity) that general-purpose proxies do not know about. Responses pass through byte for byte, so the
// SDK's CRC32 check on DynamoDB answers still holds. dynalite does not check signatures, so the rewritten body is
// accepted.
import { createServer, request as httpRequest, Agent, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenOnLoopback, type RunningServer } from '../local/servers';

/** One request the proxy forwarded, and what its answer said. */
export interface CountedRequest {
  service: 'dynamodb' | 'sqs';
  /** e.g. PutItem, SendMessageBatch. */
  action: string;
  status: number;
  /** DynamoDB: the table named in the request (TableName, or the first of RequestItems). */
  table?: string;
  /** DynamoDB: the partition key (`pk`) of a single-item request, when it has one. */
  pk?: string;
  /** DynamoDB: capacity units the server reported as consumed (writes and reads are told apart by action). */
  capacityUnits?: number;
  /** SQS ReceiveMessage: messages returned. SendMessageBatch: entries sent. */
  messages?: number;
}

/**
 * What a limiter-table item is for, from its key (the names lambda/adapters give them): the job-wide slots (its GCRA
 * TAT), the adaptive rate, backfill's cap, and the per-key items.
 */
export function limiterItemKind(pk: string): string {
  if (pk.startsWith('LIMITS#')) return 'key overrides';
  if (pk.endsWith('#rate')) return pk.includes('#key#') ? 'key rate' : 'rate';
  if (pk.endsWith('#queue')) return 'key queue';
  if (pk.includes('#conc#')) return 'key concurrency';
  if (pk.includes('#key#')) return 'key slots';
  if (pk.endsWith('#backfill')) return 'backfill cap';
  return 'slots';
}

export const DYNAMO_WRITE_ACTIONS = new Set([
  'PutItem',
  'UpdateItem',
  'DeleteItem',
  'BatchWriteItem',
  'TransactWriteItems',
]);
export const DYNAMO_READ_ACTIONS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem', 'TransactGetItems']);

export interface CountingProxy extends RunningServer {
  readonly requests: CountedRequest[];
}

/** The action of a JSON-protocol (X-Amz-Target) or query-protocol (Action=) AWS request. */
export function actionOf(headers: IncomingMessage['headers'], url: string, body: string): string {
  const target = String(headers['x-amz-target'] ?? '');
  if (target) return target.slice(target.lastIndexOf('.') + 1);
  const fromQuery = new URL(url, 'http://local').searchParams.get('Action') ?? new URLSearchParams(body).get('Action');
  return fromQuery ?? 'Unknown';
}

function tableOf(json: Record<string, unknown>): string | undefined {
  if (typeof json.TableName === 'string') return json.TableName;
  const items = (json.RequestItems ?? undefined) as Record<string, unknown> | undefined;
  return items ? Object.keys(items)[0] : undefined;
}

function capacityOf(json: {
  ConsumedCapacity?: { CapacityUnits?: number } | { CapacityUnits?: number }[];
}): number | undefined {
  const c = json.ConsumedCapacity;
  if (c === undefined) return undefined;
  return (Array.isArray(c) ? c : [c]).reduce((sum, x) => sum + (x.CapacityUnits ?? 0), 0);
}

/** A request body as JSON, or {} where it is not (a query-protocol body is form-encoded). */
function jsonOf(text: string): Record<string, unknown> {
  try {
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    // A query-protocol body is form-encoded; it carries nothing this proxy rewrites.
    return {};
  }
}

/** The body to forward: a DynamoDB read or write that does not ask for its consumed capacity is made to. */
function bodyToForward(
  service: CountedRequest['service'],
  action: string,
  json: Record<string, unknown>,
  body: Buffer,
): Buffer {
  if (
    service === 'dynamodb' &&
    (DYNAMO_WRITE_ACTIONS.has(action) || DYNAMO_READ_ACTIONS.has(action)) &&
    json.ReturnConsumedCapacity === undefined
  ) {
    return Buffer.from(JSON.stringify({ ...json, ReturnConsumedCapacity: 'TOTAL' }), 'utf8');
  }
  return body;
}

/** One answered request as counted: DynamoDB's table, key and units; the messages of an SQS receive or batch send. */
function countedAnswer(
  service: CountedRequest['service'],
  action: string,
  json: Record<string, unknown>,
  status: number,
  raw: Buffer,
): CountedRequest {
  const counted: CountedRequest = { service, action, status };
  if (service === 'dynamodb') {
    counted.table = tableOf(json);
    const pk = (json.Key as { pk?: { S?: unknown } } | undefined)?.pk?.S;
    if (typeof pk === 'string') counted.pk = pk;
    try {
      counted.capacityUnits = capacityOf(JSON.parse(raw.toString('utf8')));
    } catch {
      // Not JSON (should not happen with dynalite): the request is still counted, without capacity.
    }
  } else if (action === 'ReceiveMessage') {
    try {
      counted.messages = ((JSON.parse(raw.toString('utf8')) as { Messages?: unknown[] }).Messages ?? []).length;
    } catch {
      counted.messages = (raw.toString('utf8').match(/<Message>/g) ?? []).length;
    }
  } else if (action === 'SendMessageBatch') {
    counted.messages = Array.isArray(json.Entries) ? json.Entries.length : undefined;
  }
  return counted;
}

/** What every request the proxy handles shares: the service, where to forward, the connections, the count. */
interface ProxyContext {
  service: CountedRequest['service'];
  targetOf: () => string;
  agent: Agent;
  requests: CountedRequest[];
}

/** Forwards one whole request to the target, counts it with its answer, and passes the answer back byte for byte. */
function forwardCounted(proxy: ProxyContext, req: IncomingMessage, res: ServerResponse, received: Buffer): void {
  const { service, targetOf, agent, requests } = proxy;
  const text = received.toString('utf8');
  const action = actionOf(req.headers, req.url ?? '/', text);
  const json = jsonOf(text);
  const body = bodyToForward(service, action, json, received);
  const upstream = new URL(targetOf());
  const headers = { ...req.headers, host: upstream.host, 'content-length': String(body.length) };
  const forward = httpRequest(
    { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers, agent },
    (answer) => {
      const out: Buffer[] = [];
      answer.on('data', (c: Buffer) => out.push(c));
      answer.on('end', () => {
        const raw = Buffer.concat(out);
        requests.push(countedAnswer(service, action, json, answer.statusCode ?? 0, raw));
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        res.end(raw);
      });
    },
  );
  forward.on('error', (error) => {
    requests.push({ service, action, status: 502 });
    res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`bench proxy could not reach ${targetOf()}: ${error.message}`);
  });
  forward.end(body);
}

/**
 * Starts a counting proxy on a free loopback port forwarding to `target` (e.g. http://127.0.0.1:4566). The target may
 * be given late (a function), as the local stack picks its servers' ports while it deploys the functions.
 */
export async function startCountingProxy(
  service: 'dynamodb' | 'sqs',
  target: string | (() => string),
): Promise<CountingProxy> {
  const proxy: ProxyContext = {
    service,
    targetOf: typeof target === 'string' ? () => target : target,
    agent: new Agent({ keepAlive: true, maxSockets: 64 }),
    requests: [],
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => forwardCounted(proxy, req, res, Buffer.concat(chunks)));
  });
  const running = await listenOnLoopback(server);
  return {
    ...running,
    requests: proxy.requests,
    close: async () => {
      proxy.agent.destroy();
      await running.close();
    },
  };
}
