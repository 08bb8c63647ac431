// Embedded AWS-protocol servers (dynalite for DynamoDB, local-aws-sqs for SQS) on free loopback ports.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';

export interface RunningServer {
  /** e.g. http://127.0.0.1:43123 */
  endpoint: string;
  port: number;
  close(): Promise<void>;
}

const LOOPBACK = '127.0.0.1';

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((err) => (err ? reject(err) : resolve()));
    // Idle keep-alive sockets would otherwise hold close() open.
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
}

export async function startDynamoDb(options: DynaliteOptions = {}): Promise<RunningServer> {
  // dynalite ships no types; its default export builds a plain http.Server.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const dynalite = require('dynalite') as (opts: Record<string, unknown>) => Server;
  const server = dynalite({ path: options.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
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
}

export async function startSqs(options: SqsOptions = {}): Promise<RunningServer> {
  const { createSqsServer } = await import('local-aws-sqs');
  // local-aws-sqs listens itself; asking for port 0 and reading the address back gives a free port.
  const server = (await createSqsServer({
    port: options.port ?? 0,
    hostname: LOOPBACK,
    region: options.region ?? 'us-east-1',
    accountId: options.accountId ?? '000000000000',
    emulateQueueCreationLifecycle: false,
  })) as unknown as Server;
  const port = (server.address() as AddressInfo).port;
  return { endpoint: `http://${LOOPBACK}:${port}`, port, close: () => closeServer(server) };
}
