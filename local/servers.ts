// Embedded AWS-protocol servers (dynalite for DynamoDB, local-aws-sqs for SQS) on free loopback ports.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { emulateFairQueue, fairQueueFigures, type FairQueueFigures, type FairQueueSettings, type FairQueueTarget } from './fairQueue';

export interface RunningServer {
  /** e.g. http://127.0.0.1:43123 */
  endpoint: string;
  port: number;
  close(): Promise<void>;
}

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
      reject(err.code === 'EADDRINUSE' ? new Error(`port ${port} on ${LOOPBACK} is already in use`, { cause: err }) : err);
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
}

export async function startDynamoDb(options: DynaliteOptions = {}): Promise<RunningServer> {
  // dynalite ships no types; its default export builds a plain http.Server.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const dynalite = require('dynalite') as (opts: Record<string, unknown>) => Server;
  const server = dynalite({ path: options.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  if (options.onRequest) observeRequests(server, options.onRequest);
  const port = await listen(server, options.port ?? 0);
  return { endpoint: `http://${LOOPBACK}:${port}`, port, close: () => closeServer(server) };
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
}

export type RequestObserver = (request: ObservedRequest) => void;

/**
 * Lets the runtime see the requests an embedded server receives, and its answers, without changing them. The listener
 * is prepended and only reads a copy of the body chunks; the server's own handler, attached after it, still gets them.
 */
export function observeRequests(server: Server, observer: RequestObserver): void {
  server.prependListener('request', (req, res) => {
    const at = Date.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    res.on('finish', () =>
      observer({ at, method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), status: res.statusCode }),
    );
  });
}

export interface S3Options {
  /** 0 picks a free port. @default 0 */
  port?: number;
  /** Folder for objects; a fresh temporary folder when absent (removed on close). */
  directory?: string;
  /** Buckets to create at start. @default [] */
  buckets?: string[];
}

/** Credentials s3rver accepts; every local client uses them (dynalite and local-aws-sqs accept anything). */
export const LOCAL_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const;

export interface RunningS3 extends RunningServer {
  server: Server;
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
  const S3rver = require('@20minutes/s3rver') as new (opts: Record<string, unknown>) => {
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
    httpServer: Server;
  };
  if (options.port) await ensurePortFree(options.port, 'S3');
  const temporary = options.directory === undefined;
  const directory = options.directory ?? mkdtempSync(join(tmpdir(), 'paced-jobs-s3-'));
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
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw e.code === 'EADDRINUSE' ? new Error(`port ${options.port} on ${LOOPBACK} is already in use`, { cause: e }) : e;
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
      reject(err.code === 'EADDRINUSE' ? new Error(`port ${port} on ${LOOPBACK} is already in use (${service})`, { cause: err }) : err),
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
