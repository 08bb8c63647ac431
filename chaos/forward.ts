// Chaos harness: the forwarding half of its fault proxies (DynamoDB, S3). A request the proxy lets through goes to the
// local server as it came, and the answer comes back as the server gave it.
// Hand-written: an HTTP forwarder of a few lines; a proxy library would add a dependency for no gain.
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/**
 * Sends `req` (its body already read) to the server `target` names (resolved now: the proxies start before the stack
 * knows its endpoints) and pipes the answer back into `res`.
 */
export function forward(target: () => string, req: IncomingMessage, body: Buffer, res: ServerResponse): void {
  let url: URL;
  try {
    url = new URL(target());
  } catch (error) {
    // No server to send to yet: answer as an unreachable service would.
    res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`proxy: ${(error as Error).message}`);
    return;
  }
  const upstream = request(
    { host: url.hostname, port: url.port, method: req.method, path: req.url, headers: req.headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on('error', (error) => {
    // The server gone (shutdown): answer as an unreachable service would, so the caller's SDK retries or fails.
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`proxy: ${error.message}`);
  });
  upstream.end(body);
}

/**
 * Starts a fault proxy's HTTP server on a free loopback port: each request's body is read whole, then `handle` answers
 * it (a fault) or forwards it. Resolves once listening.
 */
export async function serveProxy(
  handle: (req: IncomingMessage, body: Buffer, res: ServerResponse) => void,
): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, Buffer.concat(chunks), res));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return server;
}
