// The web console's HTTP server (node:http, on 127.0.0.1 only): the page, its assets (uPlot and the charts' and
// page's own code, from this project: nothing from a CDN or the network) and the JSON API (console/api.ts). It is the
// console's security boundary: it refuses any request whose Host or Origin is not its own (DNS rebinding, other
// sites), every API request without the session's token, and a change when changes are off; and it keeps every
// credential it was told of out of every answer.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { CHART_ASSET_ROUTES, chartAsset } from './assets';
import { errorResponse, handleApi, type ApiOptions } from './api';
import { ConsoleError, ConsoleForbiddenError, type ConsoleSource } from './source';

export interface ConsoleServerOptions {
  /** What the console shows and changes; a promise while the stack is still being found (the API waits for it). */
  source: ConsoleSource | Promise<ConsoleSource>;
  /** The changing actions (pause, resume, redrive, catch-up) are on. */
  changesAllowed: boolean;
  /** Why they are off, shown next to the disabled buttons (e.g. "a deployed environment: start with --allow-changes"). */
  changesNote?: string;
  /** The port on 127.0.0.1. @default 0 (a free one) */
  port?: number;
  /** The session's token. @default 32 random bytes, base64url (tests pass their own) */
  token?: string;
  /** Strings that must never leave the server (credentials): replaced in every API answer. @default [] */
  redact?: readonly string[];
  refresh?: ApiOptions['refresh'];
  chartMinutes?: number;
  /** Refused requests and action errors, one line each. @default nothing */
  log?: (line: string) => void;
}

export interface ConsoleServer {
  /** `http://127.0.0.1:<port>/`: without the token, safe to write down (endpoints.json). */
  url: string;
  /** The URL that opens the page with the token (the terminal shows it; the page then drops it from the address bar). */
  tokenUrl: string;
  token: string;
  port: number;
  close(): Promise<void>;
}

/** The header the page sends its token in; a cross-origin page cannot set it without a CORS preflight, which fails. */
export const TOKEN_HEADER = 'x-console-token';
/** The largest request body an action takes. */
export const MAX_BODY_BYTES = 16 * 1024;

/**
 * No inline script or style (the token travels in a <meta>, read by app.js), nothing from another origin, no framing.
 * uPlot styles its elements through the CSSOM, which style-src does not restrict.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'Cache-Control': 'no-store',
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  // The first URL carries the token: never send it on as a referrer.
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/** An AWS access key ID (long-term AKIA, temporary ASIA): redacted wherever it would appear, whoever it belongs to. */
const ACCESS_KEY_ID = /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g;

interface Asset {
  type: string;
  body: string;
}

/** Every asset the page loads: the charts' (console/assets.ts, with their own routes) and the page's own code. */
function assets(): Map<string, Asset> {
  const web = join(__dirname, 'web');
  const own = (file: string) => readFileSync(join(web, file), 'utf8');
  const files = new Map<string, Asset>();
  for (const path of Object.keys(CHART_ASSET_ROUTES)) {
    const asset = chartAsset(path)!;
    files.set(path, { type: asset.contentType, body: asset.body });
  }
  files.set('/assets/app.js', { type: 'text/javascript; charset=utf-8', body: own('app.js') });
  files.set('/assets/app.css', { type: 'text/css; charset=utf-8', body: own('app.css') });
  return files;
}

/** Equal in constant time: both sides are hashed first, so neither the length nor a prefix leaks through timing. */
export function tokensEqual(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false;
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** Replaces every listed secret and anything shaped like an access key ID. */
export function redactor(secrets: readonly string[]): (text: string) => string {
  // Short strings would redact ordinary words; nothing this short is a credential.
  const listed = [...new Set(secrets.filter((s) => s.length >= 6))].sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const secret of listed) out = out.split(secret).join('[redacted]');
    return out.replace(ACCESS_KEY_ID, '[redacted]');
  };
}

/** How the server answers: every body through the redactor, every refusal logged. */
interface Replies {
  send(res: ServerResponse, status: number, type: string, body: string): void;
  sendJson(res: ServerResponse, status: number, body: unknown): void;
  refuse(res: ServerResponse, req: IncomingMessage, error: ConsoleForbiddenError): void;
}

function replies(redact: (text: string) => string, log: (line: string) => void): Replies {
  const send = (res: ServerResponse, status: number, type: string, body: string) => {
    res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  };
  const sendJson = (res: ServerResponse, status: number, body: unknown) =>
    send(res, status, 'application/json; charset=utf-8', redact(JSON.stringify(body)));
  return {
    send,
    sendJson,
    refuse(res, req, error) {
      log(`console: refused ${req.method} ${(req.url ?? '').split('?')[0]}: ${error.reason}`);
      sendJson(res, 403, errorResponse(error).body);
    },
  };
}

/**
 * Why a request is refused before anything else, if it is: a Host or an Origin that is not this console's on `port`.
 * A foreign name resolved to 127.0.0.1 (DNS rebinding) still says its own name in Host; browsers send Origin on every
 * cross-origin request and on same-origin POSTs.
 */
export function foreignRequest(headers: IncomingHttpHeaders, port: number): ConsoleForbiddenError | undefined {
  const host = (headers.host ?? '').toLowerCase();
  if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`) {
    return new ConsoleForbiddenError(`Host "${headers.host ?? ''}" is not this console's`, 'host');
  }
  const origin = headers.origin?.toLowerCase();
  if (origin !== undefined && origin !== `http://127.0.0.1:${port}` && origin !== `http://localhost:${port}`) {
    return new ConsoleForbiddenError(`Origin "${headers.origin}" is not this console's`, 'origin');
  }
  return undefined;
}

/** Why an API request is refused, if it is: another site's (fetch metadata, where the browser sends it), or no token. */
export function unauthorizedApiRequest(headers: IncomingHttpHeaders, token: string): ConsoleForbiddenError | undefined {
  const site = headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none')
    return new ConsoleForbiddenError(`a ${site} request`, 'fetch-site');
  const given = headers[TOKEN_HEADER];
  if (!tokensEqual(typeof given === 'string' ? given : undefined, token)) {
    return new ConsoleForbiddenError(
      `the console's token is missing or wrong: open the URL the terminal printed`,
      'token',
    );
  }
  return undefined;
}

/** A POST's JSON body (a GET's is undefined), or the error to answer: not JSON, or too large. */
async function requestBody(req: IncomingMessage): Promise<{ body: unknown } | { error: ConsoleError }> {
  if (req.method !== 'POST') return { body: undefined };
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) {
    return { error: new ConsoleError('send JSON (Content-Type: application/json)', { status: 415 }) };
  }
  const text = await readBody(req);
  if (text === undefined)
    return { error: new ConsoleError(`the body is over ${MAX_BODY_BYTES} bytes`, { status: 413 }) };
  try {
    return { body: text === '' ? {} : JSON.parse(text) };
  } catch {
    return { error: new ConsoleError('the body is not JSON') };
  }
}

/** The source once it is ready, or why it is not: the API waits for it, and answers 503 if it failed. */
function sourceWhenReady(
  given: ConsoleServerOptions['source'],
  log: (line: string) => void,
): () => Promise<{ source: ConsoleSource } | { error: ConsoleError }> {
  const ready: Promise<{ source: ConsoleSource } | { error: ConsoleError }> = Promise.resolve(given).then(
    (source) => ({ source }),
    (error: unknown) => {
      const message = error instanceof Error ? error.message : String(error);
      log(`console: the stack could not be loaded: ${message}`);
      return { error: new ConsoleError(`the stack could not be loaded: ${message}`, { status: 503 }) };
    },
  );
  return () => ready;
}

/** What answering a request needs beyond the request. */
interface Handling {
  options: ConsoleServerOptions;
  token: string;
  reply: Replies;
  redact: (text: string) => string;
  log: (line: string) => void;
  source: () => Promise<{ source: ConsoleSource } | { error: ConsoleError }>;
  files: Map<string, Asset>;
  page: string;
}

async function serveApi(req: IncomingMessage, res: ServerResponse, url: URL, h: Handling): Promise<void> {
  const refused = unauthorizedApiRequest(req.headers, h.token);
  if (refused) return h.reply.refuse(res, req, refused);
  const read = await requestBody(req);
  if ('error' in read) return h.reply.sendJson(res, read.error.status, errorResponse(read.error).body);
  const loaded = await h.source();
  if ('error' in loaded) return h.reply.sendJson(res, 503, errorResponse(loaded.error).body);
  const { options } = h;
  const answer = await handleApi(
    { method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, body: read.body },
    {
      source: loaded.source,
      changesAllowed: options.changesAllowed,
      changesNote: options.changesNote,
      refresh: options.refresh,
      chartMinutes: options.chartMinutes,
    },
  );
  if (answer.status >= 500 || (req.method === 'POST' && answer.status >= 400)) {
    h.log(`console: ${req.method} ${url.pathname}: ${h.redact(JSON.stringify(answer.body))}`);
  }
  return h.reply.sendJson(res, answer.status, answer.body);
}

function serveStatic(req: IncomingMessage, res: ServerResponse, url: URL, h: Handling): void {
  const { reply } = h;
  const path = url.pathname;
  if (req.method !== 'GET' && req.method !== 'HEAD')
    return reply.send(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n');
  if (path === '/' || path === '/index.html') {
    const given = url.searchParams.get('token');
    // A page asked for with a wrong token is refused outright; one asked for without any is the bare shell, which
    // finds the token in its tab's sessionStorage (kept from the first load) or says where to get it.
    if (given !== null && !tokensEqual(given, h.token)) {
      return reply.refuse(res, req, new ConsoleForbiddenError("the token in the URL is not this console's", 'token'));
    }
    const meta = `<meta name="console-token" content="${given === null ? '' : h.token}">`;
    return reply.send(
      res,
      200,
      'text/html; charset=utf-8',
      h.page.replace('<meta name="console-token" content="">', meta),
    );
  }
  const asset = h.files.get(path);
  if (asset) return reply.send(res, 200, asset.type, asset.body);
  if (path === '/favicon.ico') {
    res.writeHead(204, SECURITY_HEADERS);
    res.end();
    return;
  }
  return reply.send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
}

/** Listens on 127.0.0.1 and resolves to the port. */
async function listenOnLoopback(server: Server, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Loopback only: the console acts with the operator's credentials, so nothing off this machine may reach it.
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

export async function startConsoleServer(options: ConsoleServerOptions): Promise<ConsoleServer> {
  const token = options.token ?? randomBytes(32).toString('base64url');
  if (token.length < 16 || !/^[A-Za-z0-9_-]+$/.test(token)) {
    throw new ConsoleError('the console token must be at least 16 URL-safe characters', { status: 500 });
  }
  const log = options.log ?? (() => undefined);
  const redact = redactor(options.redact ?? []);
  const reply = replies(redact, log);
  const h: Handling = {
    options,
    token,
    reply,
    redact,
    log,
    source: sourceWhenReady(options.source, log),
    files: assets(),
    page: readFileSync(join(__dirname, 'web', 'index.html'), 'utf8'),
  };
  let port = 0;
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const refused = foreignRequest(req.headers, port);
    if (refused) return reply.refuse(res, req, refused);
    const url = new URL(req.url ?? '/', `http://${(req.headers.host ?? '').toLowerCase()}`);
    return url.pathname.startsWith('/api/') ? serveApi(req, res, url, h) : serveStatic(req, res, url, h);
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log(
        `console: ${req.method} ${(req.url ?? '').split('?')[0]} failed: ${redact(String((error as Error)?.message ?? error))}`,
      );
      if (!res.headersSent) reply.sendJson(res, 500, errorResponse(error).body);
      else res.destroy();
    });
  });
  port = await listenOnLoopback(server, options.port ?? 0);
  const url = `http://127.0.0.1:${port}/`;
  return {
    url,
    tokenUrl: `${url}?token=${token}`,
    token,
    port,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      // The source is its owner's to close (it may outlive this server, or share the CLI's clients).
    },
  };
}

/** The body as text, or undefined when it is over MAX_BODY_BYTES (the rest is not read). */
function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        over = true;
        req.pause();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!over) resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('error', reject);
  });
}
