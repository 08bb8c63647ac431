// Test helper: a tiny HTTP server on a free loopback port whose answer each test sets, recording every request.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StubRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export type StubHandler = (request: StubRequest, res: ServerResponse) => void;

export interface HttpStub {
  /** e.g. http://127.0.0.1:43123 */
  url: string;
  requests: StubRequest[];
  /** Sets how the next requests are answered. */
  handle(handler: StubHandler): void;
  /** Answers with this status, JSON body and headers. */
  reply(status: number, body: unknown, headers?: Record<string, string>): void;
  close(): Promise<void>;
}

export async function startHttpStub(): Promise<HttpStub> {
  let handler: StubHandler = (_req, res) => {
    res.writeHead(500).end('no handler set');
  };
  const requests: StubRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const request = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(request);
      handler(request, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    handle(h) {
      handler = h;
    },
    reply(status, body, headers = {}) {
      handler = (_req, res) => {
        const text = typeof body === 'string' ? body : JSON.stringify(body);
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(text);
      };
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
