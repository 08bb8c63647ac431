// Benchmark stand-in for the downstream: an HTTP server on loopback that enforces a quota and logs every arrival.
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { closeServer } from '../local/servers';

export interface QuotaProviderOptions {
  /** Requests accepted in any sliding window of `windowMs`; the rest get 429. */
  allowedPerWindow: number;
  windowMs: number;
}

export interface QuotaProvider {
  url: string;
  /** Arrival time of every request, accepted or not, epoch ms with sub-millisecond precision, in arrival order. */
  arrivals: number[];
  /** Arrival times of the accepted (200) requests. */
  accepted: number[];
  /** Same server, not logged or counted: lets clients open their connections before the measured run. */
  warmUpUrl: string;
  /** Requests answered 429. */
  throttled(): number;
  close(): Promise<void>;
}

/** The provider's own clock: sub-millisecond, so two arrivals in the same millisecond still order and count. */
const WARM_UP_PATH = '/warm-up';

const clock = (): number => performance.timeOrigin + performance.now();

/**
 * Starts the provider. Its quota is a sliding-window log of accepted requests: the strictest reading of "R per
 * window", so any excess a client sends shows up as a 429 rather than being forgiven at a fixed-window boundary.
 */
export async function startQuotaProvider(options: QuotaProviderOptions): Promise<QuotaProvider> {
  const { allowedPerWindow, windowMs } = options;
  const arrivals: number[] = [];
  const accepted: number[] = [];
  let throttled = 0;
  // Index of the oldest accepted arrival still inside the window ending now.
  let oldest = 0;

  const server: Server = createServer((req, res) => {
    if (req.url === WARM_UP_PATH) {
      req.resume();
      req.on('end', () => res.writeHead(204).end());
      return;
    }
    const at = clock();
    arrivals.push(at);
    while (oldest < accepted.length && accepted[oldest] <= at - windowMs) oldest++;
    // Decide at arrival, in arrival order; the answer waits for the body so keep-alive connections stay reusable.
    const ok = accepted.length - oldest < allowedPerWindow;
    if (ok) accepted.push(at);
    else throttled++;
    const retryAfterS = ok ? 0 : Math.max(1, Math.ceil((accepted[oldest] + windowMs - at) / 1000));
    req.resume();
    req.on('end', () => {
      if (ok) res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      else res.writeHead(429, { 'retry-after': String(retryAfterS) }).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/operations`,
    warmUpUrl: `http://127.0.0.1:${port}${WARM_UP_PATH}`,
    arrivals,
    accepted,
    throttled: () => throttled,
    close: () => closeServer(server),
  };
}
