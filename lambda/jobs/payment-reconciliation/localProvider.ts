// The payment provider's local stand-in (the job's fake downstream, see local/fixture.ts): a quota (R starts per
// window, C concurrent), Idempotency-Key dedup, injectable faults, and a record of every arrival and effect, so a local
// run can prove pacing and exactly-once effects. Local tooling only: nothing under lambda/handlers imports it.
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { JobRuntimeSettings } from '../../job';
import { maxInAnyWindow } from '../../../local/fixture';
import type { DownstreamArrival, DownstreamEffect, DownstreamFaultPolicy, FakeDownstream } from '../../../local/fixture';

export interface PaymentProviderOptions {
  /** Starts allowed in any window of `windowSeconds`. */
  startsPerWindow: number;
  /** @default 60 */
  windowSeconds?: number;
  /** Requests allowed in progress at once. */
  maxConcurrent: number;
  /** Bearer tokens accepted; empty accepts any non-empty token. More are added with allowSecret. @default [] */
  apiKeys?: string[];
  /** Simulated processing time per request. @default 20 */
  latencyMs?: number;
  /** 0 picks a free port. @default 0 */
  port?: number;
}

/** One settlement, as the provider applied it. `operationKey` is the payment ID. */
export interface PaymentEffect extends DownstreamEffect {
  providerReference: string;
}

interface StoredResult {
  status: number;
  body: Record<string, unknown>;
}

const PATH = /^\/v1\/payments\/([^/]+)\/reconcile$/;

export class PaymentProvider implements FakeDownstream {
  /** Every request that reached a route, with its answer; `operationKey` is the payment ID. */
  public readonly arrivals: DownstreamArrival[] = [];
  public readonly effects: PaymentEffect[] = [];
  private replayCount = 0;
  private readonly apiKeys: string[];
  private readonly results = new Map<string, StoredResult>();
  /** Keys whose first request is still in progress: a concurrent retry must not apply twice. */
  private readonly inProgress = new Set<string>();
  private readonly starts: number[] = [];
  private concurrent = 0;
  private server?: Server;
  private readonly windowMs: number;
  private faults?: DownstreamFaultPolicy;
  /** Ends answers held back after their effect, so close() does not wait out (or leave behind) their timers. */
  private readonly closing = new AbortController();

  constructor(private readonly options: PaymentProviderOptions) {
    this.windowMs = (options.windowSeconds ?? 60) * 1000;
    this.apiKeys = [...(options.apiKeys ?? [])];
  }

  get endpoint(): string {
    if (!this.server) throw new Error('the payment provider is not started');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Requests answered from the Idempotency-Key store instead of being applied again. */
  get replays(): number {
    return this.replayCount;
  }

  /** Requests answered 429, by the quota or by an injected throttle. */
  get throttled(): number {
    return this.arrivals.filter((a) => a.status === 429).length;
  }

  /** Adds an accepted bearer token (the stack's generated secret is known only after provisioning). */
  allowSecret(value: string): void {
    this.apiKeys.push(value);
  }

  setFaults(policy: DownstreamFaultPolicy | undefined): void {
    this.faults = policy;
  }

  /** The job's settings with the provider URL pointed here; the settings handed in are left as they were. */
  configure(settings: JobRuntimeSettings): JobRuntimeSettings {
    const copy = structuredClone(settings);
    copy.settings.providerBaseUrl = this.endpoint;
    return copy;
  }

  /** The most requests that reached the quota check (accepted, replayed or refused) in any window. */
  maxStartsInAnyWindow(): number {
    return maxInAnyWindow(this.arrivals.map((a) => a.at), this.windowMs);
  }

  async start(): Promise<void> {
    const server = createServer((req, res) => {
      this.handle(req, res).catch((error: Error) => this.send(res, 500, { message: error.message }));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) =>
        reject(err.code === 'EADDRINUSE' ? new Error(`port ${this.options.port} on 127.0.0.1 is already in use (payment provider)`, { cause: err }) : err),
      );
      server.listen(this.options.port ?? 0, '127.0.0.1', () => resolve());
    });
    this.server = server;
  }

  async close(): Promise<void> {
    this.closing.abort();
    const server = this.server;
    if (!server) return;
    // Open keep-alive connections would hold close() until they time out.
    await new Promise<void>((resolve, reject) => {
      server.close((err) => (err ? reject(err) : resolve()));
      server.closeAllConnections();
    });
  }

  private send(res: ServerResponse, status: number, body: Record<string, unknown>, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    for await (const chunk of req) void chunk; // the body is not needed; drain it so keep-alive works
    const match = req.method === 'POST' ? PATH.exec(req.url ?? '') : null;
    if (!match) return this.send(res, 404, { message: `no route for ${req.method} ${req.url}` });
    const paymentId = decodeURIComponent(match[1]);
    const now = Date.now();
    const key = req.headers['idempotency-key'];
    const idempotencyKey = typeof key === 'string' && key !== '' ? key : undefined;
    const record = (status: number, extra: Pick<DownstreamArrival, 'replayed' | 'fault'> = {}) =>
      this.arrivals.push({ at: now, operationKey: paymentId, idempotencyKey, status, ...extra });

    const auth = req.headers.authorization ?? '';
    const token = auth.startsWith('Bearer ') ? auth.slice(7) : '';
    if (token === '' || (this.apiKeys.length > 0 && !this.apiKeys.includes(token))) {
      record(401);
      return this.send(res, 401, { message: 'missing or invalid bearer token' });
    }
    if (!idempotencyKey) {
      record(400);
      return this.send(res, 400, { message: 'Idempotency-Key header is required' });
    }
    // The quota counts every start, replays included, as a real provider's rate limiter would.
    while (this.starts.length > 0 && now - this.starts[0] >= this.windowMs) this.starts.shift();
    if (this.starts.length >= this.options.startsPerWindow) {
      record(429);
      const retryAfter = Math.max(1, Math.ceil((this.starts[0] + this.windowMs - now) / 1000));
      return this.send(res, 429, { message: `quota of ${this.options.startsPerWindow} per ${this.windowMs / 1000}s exceeded` }, { 'retry-after': String(retryAfter) });
    }
    if (this.concurrent >= this.options.maxConcurrent) {
      record(429);
      return this.send(res, 429, { message: `more than ${this.options.maxConcurrent} concurrent requests` }, { 'retry-after': '1' });
    }
    if (this.inProgress.has(idempotencyKey)) {
      record(409);
      return this.send(res, 409, { message: `a request with Idempotency-Key ${idempotencyKey} is in progress` });
    }
    const fault = this.faults?.({ operationKey: paymentId, idempotencyKey, at: now });
    if (fault?.kind === 'throttle') {
      record(429, { fault: fault.kind });
      return this.send(res, 429, { message: 'injected throttle' }, { 'retry-after': String(fault.retryAfterSeconds) });
    }
    this.starts.push(now);
    const stored = this.results.get(idempotencyKey);
    if (stored) {
      record(stored.status, { replayed: true });
      this.replayCount++;
      return this.send(res, stored.status, stored.body, { 'idempotent-replayed': 'true' });
    }
    if (fault?.kind === 'error' || fault?.kind === 'reject') {
      record(fault.status, { fault: fault.kind });
      return this.send(res, fault.status, { message: `injected ${fault.status}` });
    }
    record(fault?.kind === 'dropBeforeEffect' ? 0 : 200, fault ? { fault: fault.kind } : {});
    this.concurrent++;
    this.inProgress.add(idempotencyKey);
    let holdAfterEffectMs = 0;
    try {
      const extra = fault?.kind === 'slow' || fault?.kind === 'dropBeforeEffect' ? fault.delayMs : 0;
      await new Promise((r) => setTimeout(r, (this.options.latencyMs ?? 20) + extra));
      if (fault?.kind === 'dropBeforeEffect') {
        res.socket?.destroy();
        return;
      }
      const providerReference = `prov_${randomUUID()}`;
      const body = { paymentId, status: 'settled', providerReference };
      this.effects.push({ at: Date.now(), operationKey: paymentId, idempotencyKey, providerReference });
      this.results.set(idempotencyKey, { status: 200, body });
      if (fault?.kind === 'hangAfterEffect') holdAfterEffectMs = fault.delayMs;
      else this.send(res, 200, body);
    } finally {
      this.concurrent--;
      this.inProgress.delete(idempotencyKey);
    }
    if (holdAfterEffectMs > 0) {
      // The effect is stored, so a retry is replayed; this caller only hears back (if still listening) much later.
      const held = await delay(holdAfterEffectMs, true, { signal: this.closing.signal }).catch((error: Error) => {
        if (error.name === 'AbortError') return false; // closed meanwhile: nobody is left to answer
        throw error;
      });
      if (!held) return;
      const stored = this.results.get(idempotencyKey)!;
      if (!res.destroyed) this.send(res, stored.status, stored.body);
    }
  }
}
