// Embedded AWS-protocol servers (dynalite for DynamoDB, local-aws-sqs for SQS, s3rver for S3) on free loopback ports,
// in this process or, for the storage emulators, each in a child process of its own.
import { spawn, type ChildProcess } from 'node:child_process';
import { createCipheriv } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { dirname } from 'node:path';
import { cpuProfileArgs } from './cpuProfile';
import {
  emulateFairQueue,
  fairQueueFigures,
  type FairQueueFigures,
  type FairQueueSettings,
  type FairQueueTarget,
} from './fairQueue';

export interface RunningServer {
  /** e.g. http://127.0.0.1:43123 */
  endpoint: string;
  port: number;
  close(): Promise<void>;
  /**
   * Hands one request to the server over its process's IPC channel instead of over HTTP, and resolves with its answer:
   * only a server in a process of its own that takes requests so (dynalite). The server's own request handler answers
   * it, observers included, exactly as a request on its port; what is saved is an HTTP client and server on the way.
   */
  forward?: ChannelForward;
  /**
   * The server itself, when it runs in this process (dynalite and local-aws-sqs unless in a process of their own): the
   * component tests' shared servers are unref'd through it, so a jest worker can exit with them still listening.
   */
  server?: Server;
}

/** A request sent over a server process's IPC channel (RunningServer.forward). */
export interface ChannelRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  /** The whole body, as UTF-8 (the JSON protocols' bodies). */
  body: string;
}

/** The server's answer to a ChannelRequest. */
export interface ChannelAnswer {
  status: number;
  headers: Record<string, string | number | string[]>;
  body: string;
}

export type ChannelForward = (request: ChannelRequest) => Promise<ChannelAnswer>;

const LOOPBACK = '127.0.0.1';

/** Closes an http.Server, dropping idle keep-alive sockets that would otherwise hold close() open. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((err) => (err ? reject(err) : resolve()));
    server.closeAllConnections?.();
  });
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      reject(
        err.code === 'EADDRINUSE' ? new Error(`port ${port} on ${LOOPBACK} is already in use`, { cause: err }) : err,
      );
    };
    server.once('error', onError);
    server.listen(port, LOOPBACK, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

export interface DynaliteOptions {
  /** 0 picks a free port. @default 0 */
  port?: number;
  /** LevelDB folder that keeps data across runs; in memory when absent. */
  path?: string;
  /** Sees every request (for the run report). */
  onRequest?: RequestObserver;
  /**
   * Run dynalite in a child process of its own (see startServerProcess): its CPU then neither stalls this process's
   * timers nor waits behind them, as a table on AWS is another machine. It then also takes requests over its IPC
   * channel (RunningServer.forward). @default false
   */
  childProcess?: boolean;
  /**
   * Answer every read and write with its ConsumedCapacity (TOTAL) whether the request asked for it or not, and give
   * each observed request its answer (`responseBody`): a measurement's capacity units, counted as DynamoDB reports
   * them. A client sees a field it did not ask for. @default false
   */
  returnConsumedCapacity?: boolean;
}

export async function startDynamoDb(options: DynaliteOptions = {}): Promise<RunningServer> {
  if (options.childProcess) {
    return startServerProcess(
      {
        kind: 'dynalite',
        module: require.resolve('dynalite'),
        port: options.port ?? 0,
        path: options.path,
        observe: options.onRequest !== undefined,
        returnConsumedCapacity: options.returnConsumedCapacity === true,
        channel: true,
      },
      options.onRequest,
    );
  }
  // dynalite ships no types; its default export builds a plain http.Server.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const dynalite = require('dynalite') as (opts: Record<string, unknown>) => Server;
  const server = dynalite({ path: options.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  if (options.returnConsumedCapacity) askForCapacity(server);
  if (options.onRequest) observeRequests(server, options.onRequest, { answers: options.returnConsumedCapacity });
  const port = await listen(server, options.port ?? 0);
  return { endpoint: `http://${LOOPBACK}:${port}`, port, server, close: () => closeServer(server) };
}

/** What a server process is asked to run (its one command-line argument, as JSON). */
interface ServerProcessSpec {
  kind: 'dynalite' | 's3rver';
  /** The module's resolved entry file: the child resolves nothing itself, whatever its working directory. */
  module: string;
  port: number;
  /** dynalite: its LevelDB folder. */
  path?: string;
  /** s3rver: its folder and buckets. */
  directory?: string;
  buckets?: string[];
  observe: boolean;
  returnConsumedCapacity?: boolean;
  /** Take requests over the IPC channel too (RunningServer.forward). */
  channel?: boolean;
}

/*
 * The child's program, plain CommonJS for `node -e` (it needs no TypeScript loader, whether the parent runs under tsx
 * or jest). It starts the server, answers the parent its port, and, when asked, reports each request it answered, as
 * observeRequests does in-process: a copy of the body as received and the status, sent in batches (one IPC write per
 * turn of its event loop, not per request). With returnConsumedCapacity, dynalite's handler is given a copy of each
 * request that asks for ConsumedCapacity; the observer still sees the original. With channel, it also answers the
 * requests the parent hands it over the IPC channel (RunningServer.forward), the answers in the same batches.
 */
const SERVER_PROCESS_SOURCE = String.raw`'use strict';
const spec = JSON.parse(process.argv[1]);
const { EventEmitter } = require('node:events');
let pending = [];
let answers = [];
// Observed requests and the answers to channel requests go in one message per turn of the event loop.
const flush = () => {
  const batch = pending, answered = answers;
  pending = [];
  answers = [];
  if ((batch.length || answered.length) && process.connected) process.send({ type: 'requests', requests: batch, answers: answered });
};
const later = () => { if (pending.length + answers.length === 1) setImmediate(flush); };
function observe(server, withAnswers) {
  server.prependListener('request', (req, res) => {
    const at = Date.now();
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    let answer;
    if (withAnswers) {
      answer = [];
      const write = res.write, end = res.end;
      res.write = function (c, ...rest) { if (c != null && typeof c !== 'function') answer.push(Buffer.from(c)); return write.call(this, c, ...rest); };
      res.end = function (c, ...rest) { if (c != null && typeof c !== 'function') answer.push(Buffer.from(c)); return end.call(this, c, ...rest); };
    }
    res.on('finish', () => {
      const r = { at, method: req.method || '', url: req.url || '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), status: res.statusCode };
      if (answer) r.responseBody = Buffer.concat(answer).toString('utf8');
      pending.push(r);
      later();
    });
  });
}
const CAPACITY_ACTIONS = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems', 'GetItem', 'Query', 'Scan', 'BatchGetItem', 'TransactGetItems']);
function askForCapacity(server) {
  const handlers = server.listeners('request').slice(-1);
  const handler = handlers[0];
  server.removeListener('request', handler);
  server.on('request', (req, res) => {
    const target = String(req.headers['x-amz-target'] || '');
    if (!CAPACITY_ACTIONS.has(target.slice(target.lastIndexOf('.') + 1))) return handler(req, res);
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      try {
        const json = JSON.parse(body.toString('utf8'));
        if (json && typeof json === 'object' && json.ReturnConsumedCapacity === undefined) body = Buffer.from(JSON.stringify({ ...json, ReturnConsumedCapacity: 'TOTAL' }), 'utf8');
      } catch {
        // Not JSON: dynalite answers it as it would.
      }
      // dynalite reads headers, method and url, and the body from 'data' and 'end' events.
      const copy = Object.assign(new EventEmitter(), { headers: { ...req.headers, 'content-length': String(body.length) }, method: req.method, url: req.url, socket: req.socket, connection: req.socket });
      handler(copy, res);
      copy.emit('data', body);
      copy.emit('end');
    });
  });
}
/*
 * A request the parent hands over the IPC channel: the server's own 'request' listeners (observer, capacity, dynalite)
 * get a request and a response that carry what they read and write (dynalite reads method, url, headers and the body's
 * events; it writes statusCode, setHeader and end), and the answer goes back over the channel.
 */
function answerOverChannel(server) {
  process.on('message', (m) => {
    if (m && m.type === 'channel') m.requests.forEach(answer);
  });
  function answer(m) {
    const req = Object.assign(new EventEmitter(), { method: m.method, url: m.url, headers: m.headers });
    const headers = {};
    const chunks = [];
    const res = Object.assign(new EventEmitter(), {
      statusCode: 200,
      setHeader(name, value) { headers[name.toLowerCase()] = value; return this; },
      getHeader(name) { return headers[name.toLowerCase()]; },
      removeHeader(name) { delete headers[name.toLowerCase()]; },
      write(c) { if (c != null && typeof c !== 'function') chunks.push(Buffer.from(c)); return true; },
      end(c) {
        if (c != null && typeof c !== 'function') chunks.push(Buffer.from(c));
        answers.push({ id: m.id, status: this.statusCode, headers, body: Buffer.concat(chunks).toString('utf8') });
        later();
        this.emit('finish');
        return this;
      },
    });
    server.emit('request', req, res);
    if (m.body) req.emit('data', Buffer.from(m.body, 'utf8'));
    req.emit('end');
  }
}
let close = (done) => done();
function listening(server, port) {
  process.send({ type: 'listening', port });
}
if (spec.kind === 'dynalite') {
  const server = require(spec.module)({ path: spec.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  if (spec.returnConsumedCapacity) askForCapacity(server);
  if (spec.observe) observe(server, spec.returnConsumedCapacity);
  if (spec.channel) answerOverChannel(server);
  server.once('error', (error) => process.send({ type: 'failed', code: error.code, message: error.message }, () => process.exit(1)));
  server.listen(spec.port, '127.0.0.1', () => listening(server, server.address().port));
  close = (done) => { server.close(() => done()); if (server.closeAllConnections) server.closeAllConnections(); };
} else {
  const S3rver = require(spec.module);
  const s3rver = new S3rver({ port: spec.port, address: '127.0.0.1', silent: true, directory: spec.directory, allowMismatchedSignatures: true, configureBuckets: (spec.buckets || []).map((name) => ({ name, configs: [] })) });
  s3rver.run().then((address) => {
    if (spec.observe) observe(s3rver.httpServer, false);
    listening(s3rver.httpServer, address.port);
  }, (error) => {
    process.send({ type: 'failed', code: error.code, message: error.message }, () => process.exit(1));
  });
  close = (done) => { if (s3rver.httpServer && s3rver.httpServer.closeAllConnections) s3rver.httpServer.closeAllConnections(); s3rver.close().then(done, done); };
}
process.on('message', (m) => { if (m && m.type === 'close') { flush(); close(() => process.exit(0)); } });
// The parent is gone: nothing will ever ask this server anything again.
process.on('disconnect', () => close(() => process.exit(0)));
// Ctrl-C reaches the whole process group: the parent closes the stack (and with it this server, its data folder
// flushed) in its own time.
process.on('SIGINT', () => undefined);
`;

/** How long a server process may take to close (dynalite closes its LevelDB) before it is killed. */
const SERVER_PROCESS_CLOSE_MS = 5000;

/** Requests handed to a server process over its IPC channel, by id, until their answer comes back (or it ends). */
class ProcessChannel {
  private readonly waiting = new Map<
    number,
    { resolve: (answer: ChannelAnswer) => void; reject: (error: Error) => void }
  >();
  private nextId = 0;
  /** Sent in one message per turn of this event loop, as the process answers them (one IPC write, not one per request). */
  private outgoing: (ChannelRequest & { id: number })[] = [];

  constructor(private readonly child: ChildProcess) {}

  readonly forward: ChannelForward = (request) =>
    new Promise((resolve, reject) => {
      const id = ++this.nextId;
      this.waiting.set(id, { resolve, reject });
      if (this.outgoing.push({ id, ...request }) === 1) setImmediate(() => this.send());
    });

  answered(answers: (ChannelAnswer & { id: number })[]): void {
    for (const { id, ...answer } of answers) {
      this.waiting.get(id)?.resolve(answer);
      this.waiting.delete(id);
    }
  }

  /** Fails every request still waiting (the process is gone). */
  failAll(error: () => Error): void {
    for (const w of this.waiting.values()) w.reject(error());
    this.waiting.clear();
  }

  private send(): void {
    const batch = this.outgoing;
    this.outgoing = [];
    try {
      this.child.send({ type: 'channel', requests: batch });
    } catch (error) {
      for (const r of batch) {
        this.waiting.get(r.id)?.reject(error as Error);
        this.waiting.delete(r.id);
      }
    }
  }
}

/**
 * Starts an emulator in a child process on the host's Node, and hands its observed requests to `onRequest` as they
 * come in (a few milliseconds after the answer, not before it as in-process: readers of a run's record read it once
 * the run has settled). The process ends with close(), and on its own when this one goes.
 */
function startServerProcess(spec: ServerProcessSpec, onRequest: RequestObserver | undefined): Promise<RunningServer> {
  // s3rver signs a truncated listing's NextContinuationToken with DES, which Node's OpenSSL 3 keeps in its legacy
  // provider: without it every ListObjectsV2 cut by MaxKeys answers InternalError (a job paging its bucket's listing).
  const legacyCiphers = spec.kind === 's3rver' ? ['--openssl-legacy-provider'] : [];
  const child: ChildProcess = spawn(
    process.execPath,
    [...cpuProfileArgs(spec.kind), ...legacyCiphers, '-e', SERVER_PROCESS_SOURCE, JSON.stringify(spec)],
    {
      cwd: dirname(spec.module),
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      // Not the parent's NODE_OPTIONS (a loader, an inspector, a profiler): the child runs plain JavaScript.
      env: { ...process.env, NODE_OPTIONS: '' },
    },
  );
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const channel = new ProcessChannel(child);
  void exited.then(() => channel.failAll(() => new Error(`the ${spec.kind} process exited`)));
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null, signal: string | null) =>
      reject(
        new Error(`${spec.kind} process exited before listening (${signal ? `signal ${signal}` : `code ${code}`})`),
      );
    child.once('error', reject);
    child.once('exit', onExit);
    child.on(
      'message',
      (message: {
        type: string;
        port?: number;
        requests?: ObservedRequest[];
        answers?: (ChannelAnswer & { id: number })[];
        code?: string;
        message?: string;
      }) => {
        if (message.type === 'requests') {
          // The answers first: a request is observed after it was answered, as over HTTP.
          channel.answered(message.answers ?? []);
          for (const r of message.requests ?? []) onRequest?.(r);
          return;
        }
        if (message.type === 'failed') {
          child.off('exit', onExit);
          const error = new Error(message.message) as NodeJS.ErrnoException;
          error.code = message.code;
          reject(
            message.code === 'EADDRINUSE'
              ? new Error(`port ${spec.port} on ${LOOPBACK} is already in use`, { cause: error })
              : error,
          );
          return;
        }
        if (message.type !== 'listening') return;
        child.off('exit', onExit);
        const port = message.port!;
        resolve({
          endpoint: `http://${LOOPBACK}:${port}`,
          port,
          ...(spec.channel ? { forward: channel.forward } : {}),
          close: async () => {
            if (child.exitCode !== null || child.signalCode !== null) return;
            const killer = setTimeout(() => child.kill('SIGKILL'), SERVER_PROCESS_CLOSE_MS);
            try {
              child.send({ type: 'close' });
            } catch {
              child.kill('SIGKILL');
            }
            await exited;
            clearTimeout(killer);
          },
        });
      },
    );
  });
}

export interface SqsOptions {
  /** 0 picks a free port. @default 0 */
  port?: number;
  /** @default "us-east-1" */
  region?: string;
  /** @default "000000000000" */
  accountId?: string;
  /** Sees every request (for the run report). */
  onRequest?: RequestObserver;
  /** Standard queues deliver as SQS fair queues (local/fairQueue.ts); false turns that off. @default AWS's thresholds */
  fairQueues?: Partial<FairQueueSettings> | false;
}

export interface RunningSqs extends RunningServer {
  /**
   * Makes the queue URLs the server hands out (CreateQueue, GetQueueUrl, ListQueues) name this port: the IAM gateway's,
   * when one stands in front. The SDK sends a request to its QueueUrl's host, so a URL naming the server's own port
   * would go around the gateway.
   */
  advertise(port: number): void;
  /** Per standard queue: its tenants (MessageGroupId), their in-flight messages and shares, and which are noisy now. */
  fairQueues(): FairQueueFigures[];
}

export async function startSqs(options: SqsOptions = {}): Promise<RunningSqs> {
  if (options.port) await ensurePortFree(options.port, 'SQS');
  const { createRequestHandler } = await import('local-aws-sqs');
  const { createServer } = await import('node:http');
  const { service, requestHandler } = createRequestHandler({
    port: options.port ?? 0,
    hostname: LOOPBACK,
    region: options.region ?? 'us-east-1',
    accountId: options.accountId ?? '000000000000',
    emulateQueueCreationLifecycle: false,
  });
  const server = createServer((req, res) => {
    // Every queue exists before a request can name it (CreateQueue answered earlier), so each is patched in time: before
    // its first message too, which the fair-queue emulation needs. That one goes first: the depth patch reads through it.
    for (const queue of service.Queues) {
      if (options.fairQueues !== false) emulateFairQueue(queue as unknown as FairQueueTarget, options.fairQueues);
      answerDepthLikeAws(queue as unknown as LocalSqsQueue);
    }
    void requestHandler(req, res);
  });
  if (options.onRequest) observeRequests(server, options.onRequest);
  const port = await listen(server, options.port ?? 0);
  // What createSqsServer does once listening: queue URLs carry the port actually bound.
  service.PORT = port;
  return {
    endpoint: `http://${LOOPBACK}:${port}`,
    port,
    server,
    close: () => closeServer(server),
    advertise: (advertised) => {
      service.PORT = advertised;
    },
    fairQueues: () => service.Queues.flatMap((q) => fairQueueFigures(q as unknown as FairQueueTarget) ?? []),
  };
}

/** The part of local-aws-sqs's queue that answers GetQueueAttributes and starts a message move task. */
interface LocalSqsQueue {
  getAttributes(names: string[]): Record<string, string> | undefined;
  startMessageMoveTask(...args: unknown[]): unknown;
  [AWS_DEPTH]?: true;
}

const AWS_DEPTH = Symbol('answers depth like AWS');

/**
 * local-aws-sqs counts a message in flight in ApproximateNumberOfMessages as well as in ...NotVisible; AWS counts it
 * only in the latter (ApproximateNumberOfMessages is the messages available to receive). Patched per queue so every
 * client (the session, `ops status`, the producer's admission) reads AWS's figures. A message is delayed only until it
 * is first received, so "not delayed, minus not visible" is exactly the visible ones. The library's own move task
 * (StartMessageMoveTask) computes what to move as ApproximateNumberOfMessages - ...NotVisible, from its own figures:
 * it keeps them while it starts.
 */
function answerDepthLikeAws(queue: LocalSqsQueue): void {
  if (queue[AWS_DEPTH]) return;
  queue[AWS_DEPTH] = true;
  const ownAttributes = queue.getAttributes.bind(queue);
  const ownMoveTask = queue.startMessageMoveTask.bind(queue);
  let starting = false;
  queue.getAttributes = (names) => {
    const answer = ownAttributes(names);
    if (starting || answer?.ApproximateNumberOfMessages === undefined) return answer;
    const counts = ownAttributes(['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'])!;
    const visible = Number(counts.ApproximateNumberOfMessages) - Number(counts.ApproximateNumberOfMessagesNotVisible);
    return { ...answer, ApproximateNumberOfMessages: String(Math.max(0, visible)) };
  };
  queue.startMessageMoveTask = (...args) => {
    // The task reads the queue's depth synchronously in its constructor, inside this call.
    starting = true;
    try {
      return ownMoveTask(...args);
    } finally {
      starting = false;
    }
  };
}

/** One request seen by an embedded server, for the run report (who wrote what, and when). */
export interface ObservedRequest {
  at: number;
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** The status the server answered with. */
  status: number;
  /** The answer's body: only from a server asked for it (startDynamoDb's returnConsumedCapacity). */
  responseBody?: string;
}

export type RequestObserver = (request: ObservedRequest) => void;

/**
 * Lets the runtime see the requests an embedded server receives, and its answers, without changing them. The listener
 * is prepended and only reads a copy of the body chunks; the server's own handler, attached after it, still gets them.
 */
export function observeRequests(server: Server, observer: RequestObserver, options: { answers?: boolean } = {}): void {
  server.prependListener('request', (req, res) => {
    const at = Date.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    let answer: Buffer[] | undefined;
    if (options.answers) {
      // A copy of what the server writes, as it writes it (the answer itself is untouched).
      const parts: Buffer[] = (answer = []);
      const copy = (c: unknown) => {
        if (typeof c === 'string' || Buffer.isBuffer(c) || c instanceof Uint8Array)
          parts.push(Buffer.from(c as string));
      };
      const write = res.write.bind(res) as (...args: unknown[]) => boolean;
      const end = res.end.bind(res) as (...args: unknown[]) => typeof res;
      res.write = ((c: unknown, ...rest: unknown[]) => {
        copy(c);
        return write(c, ...rest);
      }) as typeof res.write;
      res.end = ((c?: unknown, ...rest: unknown[]) => {
        copy(c);
        return end(c, ...rest);
      }) as typeof res.end;
    }
    res.on('finish', () =>
      observer({
        at,
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        status: res.statusCode,
        ...(answer ? { responseBody: Buffer.concat(answer).toString('utf8') } : {}),
      }),
    );
  });
}

/** The DynamoDB actions that report ConsumedCapacity when asked. */
const CAPACITY_ACTIONS = new Set([
  'PutItem',
  'UpdateItem',
  'DeleteItem',
  'BatchWriteItem',
  'TransactWriteItems',
  'GetItem',
  'Query',
  'Scan',
  'BatchGetItem',
  'TransactGetItems',
]);

/**
 * Makes dynalite answer every read and write with its ConsumedCapacity (TOTAL) unless the request chose otherwise: its
 * handler is given a copy of the request that asks for it. An observer prepended to the server still sees the request
 * as sent. The server process's program does the same (SERVER_PROCESS_SOURCE).
 */
function askForCapacity(server: Server): void {
  const handler = server.listeners('request').slice(-1)[0] as (req: unknown, res: ServerResponse) => void;
  server.removeListener('request', handler);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const target = String(req.headers['x-amz-target'] ?? '');
    if (!CAPACITY_ACTIONS.has(target.slice(target.lastIndexOf('.') + 1))) return handler(req, res);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      try {
        const json = JSON.parse(body.toString('utf8')) as Record<string, unknown> | null;
        if (json && typeof json === 'object' && json.ReturnConsumedCapacity === undefined)
          body = Buffer.from(JSON.stringify({ ...json, ReturnConsumedCapacity: 'TOTAL' }), 'utf8');
      } catch {
        // Not JSON: dynalite answers it as it would.
      }
      // dynalite reads headers, method and url, and the body from 'data' and 'end' events.
      const copy = Object.assign(new EventEmitter(), {
        headers: { ...req.headers, 'content-length': String(body.length) },
        method: req.method,
        url: req.url,
        socket: req.socket,
        connection: req.socket,
      });
      handler(copy, res);
      copy.emit('data', body);
      copy.emit('end');
    });
  });
}

export interface S3Options {
  /** 0 picks a free port. @default 0 */
  port?: number;
  /** Folder for objects; a fresh temporary folder when absent (removed on close). */
  directory?: string;
  /** Buckets to create at start. @default [] */
  buckets?: string[];
  /** Sees every request (for the run report). */
  onRequest?: RequestObserver;
  /**
   * Run s3rver in a child process of its own (see startServerProcess). A process without DES (Node 20 without
   * --openssl-legacy-provider) starts one whatever this says: s3rver signs continuation tokens with DES. @default false
   */
  childProcess?: boolean;
}

/** Credentials s3rver accepts; every local client uses them (dynalite and local-aws-sqs accept anything). */
export const LOCAL_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const;

export interface RunningS3 extends RunningServer {
  /** s3rver's own server, in this process; absent when it runs in a child process. */
  server?: Server;
}

/** Whether this process can run DES (createCipheriv throws without OpenSSL 3's legacy provider). */
function desAvailable(): boolean {
  try {
    createCipheriv('des', Buffer.alloc(8), Buffer.alloc(8));
    return true;
  } catch {
    return false;
  }
}

/**
 * S3 via @20minutes/s3rver 4 (5 needs Node 24). PutObject, HeadObject and DeleteObject work with the current SDK; its
 * signature check disagrees with the current SDK's signer, so signatures are not checked (allowMismatchedSignatures);
 * the access key must still be S3RVER.
 */
export async function startS3(options: S3Options = {}): Promise<RunningS3> {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  // s3rver ships no types.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const S3rver = require('@20minutes/s3rver') as new (
    opts: Record<string, unknown>,
  ) => {
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
    httpServer: Server;
  };
  if (options.port) await ensurePortFree(options.port, 'S3');
  const temporary = options.directory === undefined;
  const directory = options.directory ?? mkdtempSync(join(tmpdir(), 'paced-jobs-s3-'));
  // In this process only when it can run the DES s3rver signs a truncated listing's continuation token with: Node's
  // OpenSSL 3 has it only with the legacy provider (--openssl-legacy-provider), which the child process is given.
  if (options.childProcess || !desAvailable()) {
    let running: RunningServer;
    try {
      running = await startServerProcess(
        {
          kind: 's3rver',
          module: require.resolve('@20minutes/s3rver'),
          port: options.port ?? 0,
          directory,
          buckets: options.buckets ?? [],
          observe: options.onRequest !== undefined,
        },
        options.onRequest,
      );
    } catch (error) {
      if (temporary) rmSync(directory, { recursive: true, force: true });
      throw error;
    }
    return {
      ...running,
      async close() {
        await running.close();
        if (temporary) rmSync(directory, { recursive: true, force: true });
      },
    };
  }
  const s3rver = new S3rver({
    port: options.port ?? 0,
    address: LOOPBACK,
    silent: true,
    directory,
    allowMismatchedSignatures: true,
    configureBuckets: (options.buckets ?? []).map((name) => ({ name, configs: [] })),
  });
  let address: AddressInfo;
  try {
    address = await s3rver.run();
    if (options.onRequest) observeRequests(s3rver.httpServer, options.onRequest);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw e.code === 'EADDRINUSE'
      ? new Error(`port ${options.port} on ${LOOPBACK} is already in use`, { cause: e })
      : e;
  }
  return {
    endpoint: `http://${LOOPBACK}:${address.port}`,
    port: address.port,
    server: s3rver.httpServer,
    async close() {
      s3rver.httpServer.closeAllConnections?.();
      await s3rver.close();
      if (temporary) rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** Starts an http.Server on loopback (port 0 = free port), failing clearly when the port is taken. */
export async function listenOnLoopback(server: Server, port = 0): Promise<RunningServer> {
  const bound = await listen(server, port);
  return { endpoint: `http://${LOOPBACK}:${bound}`, port: bound, close: () => closeServer(server) };
}

/**
 * Fails clearly when a chosen port is taken. local-aws-sqs and s3rver listen themselves and leave an EADDRINUSE as an
 * unhandled 'error' event that kills the process, so the port is tried first.
 */
export async function ensurePortFree(port: number, service: string): Promise<void> {
  const { createServer } = await import('node:net');
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(`port ${port} on ${LOOPBACK} is already in use (${service})`, { cause: err })
          : err,
      ),
    );
    probe.listen(port, LOOPBACK, () => probe.close(() => resolve()));
  });
}

/** An object write or delete, read off a path-style S3 request. */
export interface S3ObjectRequest {
  operation: 'PutObject' | 'DeleteObject';
  bucket: string;
  key: string;
}

const S3_OBJECT_OPERATIONS: Record<string, S3ObjectRequest['operation']> = { PUT: 'PutObject', DELETE: 'DeleteObject' };

/**
 * The object write or delete a path-style request is, or undefined for anything else (bucket requests, multi-object
 * deletes, tagging, ACLs, multipart parts: any query but the SDK's own `x-id` naming the operation).
 */
export function objectRequestOf(method: string | undefined, url: string | undefined): S3ObjectRequest | undefined {
  const operation = S3_OBJECT_OPERATIONS[method ?? ''];
  if (!operation) return undefined;
  const parsed = new URL(url ?? '/', 'http://local');
  if ([...parsed.searchParams.keys()].some((k) => k !== 'x-id')) return undefined;
  const [bucket, ...key] = decodeURIComponent(parsed.pathname).slice(1).split('/');
  return bucket && key.join('/') !== '' ? { operation, bucket, key: key.join('/') } : undefined;
}
