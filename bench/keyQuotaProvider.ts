// Benchmark stand-in for a multi-tenant downstream: an HTTP server on loopback that enforces a quota per key (a
// tenant's, a merchant account's) and one across all keys, each a sliding-window log, and logs every arrival.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { closeServer } from '../local/servers';

export interface KeyQuotaProviderOptions {
  /** Requests one key may make in any sliding window of `windowMs`; the rest get 429. */
  perKeyPerWindow: number;
  /** Requests all keys together may make in any window. */
  totalPerWindow: number;
  windowMs: number;
}

/** One request the provider saw. */
export interface KeyArrival {
  key: string;
  operationId: string;
  at: number;
  accepted: boolean;
}

export interface KeyQuotaProvider {
  /** POST `${url}?key=K&op=O`: 200 applied, or 429 with Retry-After. */
  url: string;
  arrivals: KeyArrival[];
  close(): Promise<void>;
}

/** The provider's clock: sub-millisecond, so two arrivals in one millisecond still order and count. */
const clock = (): number => performance.timeOrigin + performance.now();

/** A sliding-window log: at most `limit` accepted in any window of `windowMs`. */
class WindowLog {
  private readonly times: number[] = [];
  private oldest = 0;
  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  /** Whether a request at `at` fits, without taking it. */
  fits(at: number): boolean {
    while (this.oldest < this.times.length && this.times[this.oldest] <= at - this.windowMs) this.oldest++;
    return this.times.length - this.oldest < this.limit;
  }

  take(at: number): void {
    this.times.push(at);
  }
}

export async function startKeyQuotaProvider(options: KeyQuotaProviderOptions): Promise<KeyQuotaProvider> {
  const arrivals: KeyArrival[] = [];
  const total = new WindowLog(options.totalPerWindow, options.windowMs);
  const perKey = new Map<string, WindowLog>();
  const server = createServer((req, res) => {
    const at = clock();
    const url = new URL(req.url ?? '/', 'http://provider');
    const key = url.searchParams.get('key') ?? '';
    const operationId = url.searchParams.get('op') ?? '';
    let log = perKey.get(key);
    if (!log) perKey.set(key, (log = new WindowLog(options.perKeyPerWindow, options.windowMs)));
    // Both quotas hold: a request either fits both and counts in both, or is refused and counts in neither.
    const accepted = log.fits(at) && total.fits(at);
    if (accepted) {
      log.take(at);
      total.take(at);
    }
    arrivals.push({ key, operationId, at, accepted });
    req.resume();
    req.on('end', () => {
      if (accepted) res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      else res.writeHead(429, { 'retry-after': '1' }).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/apply`, arrivals, close: () => closeServer(server) };
}
