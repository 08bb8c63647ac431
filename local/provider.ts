// Downstream stand-in: a local payment provider with a quota (R starts per window, C concurrent), Idempotency-Key
// dedup, and a record of every arrival and effect, so a run can prove pacing and exactly-once effects.
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { closeServer } from './servers';

export interface ProviderOptions {
  /** Starts allowed in any window of `windowSeconds`. */
  startsPerWindow: number;
  /** @default 60 */
  windowSeconds?: number;
  /** Requests allowed in progress at once. */
  maxConcurrent: number;
  /** Bearer tokens accepted; empty accepts any non-empty token. @default [] */
  apiKeys?: string[];
  /** Simulated processing time per request. @default 20 */
  latencyMs?: number;
  /** 0 picks a free port. @default 0 */
  port?: number;
  /** Fault injection (the chaos harness): asked once per request that passed auth; absent means no faults. */
  faults?: ProviderFaultPolicy;
}

/**
 * What the provider does wrong with one request. `throttle` answers 429 and `error` 500, both before the effect;
 * `slow` adds latency before the effect; `hangAfterEffect` applies the effect and then holds the answer back (the
 * caller times out: the documented window between effect and completion record); `dropBeforeEffect` holds the
 * request then closes the connection without any effect.
 */
export type ProviderFault =
  | { kind: 'throttle'; retryAfterSeconds: number }
  | { kind: 'error'; status: 500 | 502 | 503 }
  | { kind: 'slow'; delayMs: number }
  | { kind: 'hangAfterEffect'; delayMs: number }
  | { kind: 'dropBeforeEffect'; delayMs: number };

export type ProviderFaultPolicy = (request: { paymentId: string; idempotencyKey: string; at: number }) => ProviderFault | undefined;

export interface ProviderArrival {
  at: number;
  paymentId: string;
  idempotencyKey?: string;
  status: number;
  /** Answered from the Idempotency-Key store (no new effect). */
  replayed?: boolean;
  /** The fault injected into this request, if any. */
  fault?: ProviderFault['kind'];
}

export interface ProviderEffect {
  at: number;
  paymentId: string;
  idempotencyKey: string;
  providerReference: string;
}

interface StoredResult {
  status: number;
  body: Record<string, unknown>;
}

const PATH = /^\/v1\/payments\/([^/]+)\/reconcile$/;

/**
 * The largest number of timestamps that fall in any half-open window [t, t + windowMs).
 * Used for arrivals here and for every job's starts in the run report.
 */
export function maxInAnyWindow(timestamps: number[], windowMs: number): number {
  const sorted = [...timestamps].sort((a, b) => a - b);
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < sorted.length; hi++) {
    while (sorted[hi] - sorted[lo] >= windowMs) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

export class PaymentProvider {
  public readonly arrivals: ProviderArrival[] = [];
  public readonly effects: ProviderEffect[] = [];
  /** Requests answered from the Idempotency-Key store instead of being applied again. */
  public replays = 0;
  private readonly results = new Map<string, StoredResult>();
  /** Keys whose first request is still in progress: a concurrent retry must not apply twice. */
  private readonly inProgress = new Set<string>();
  private readonly starts: number[] = [];
  private concurrent = 0;
  private server?: Server;
  private readonly windowMs: number;

  constructor(private readonly options: ProviderOptions) {
    this.windowMs = (options.windowSeconds ?? 60) * 1000;
  }

  get endpoint(): string {
    if (!this.server) throw new Error('the payment provider is not started');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Adds a bearer token (the stack's generated secret is known only after provisioning). */
  allowApiKey(key: string): void {
    (this.options.apiKeys ??= []).push(key);
  }

  /** Starts whose requests reached the quota check (accepted, replayed or refused). */
  maxStartsInAnyWindow(): number {
    return maxInAnyWindow(this.arrivals.map((a) => a.at), this.windowMs);
  }

  /** Effects per payment: exactly one each is the goal. */
  effectsByPayment(): Map<string, number> {
    const out = new Map<string, number>();
    for (const e of this.effects) out.set(e.paymentId, (out.get(e.paymentId) ?? 0) + 1);
    return out;
  }

  get throttled(): number {
    return this.arrivals.filter((a) => a.status === 429).length;
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((error: Error) => this.send(res, 500, { message: error.message }));
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', (err: NodeJS.ErrnoException) =>
        reject(err.code === 'EADDRINUSE' ? new Error(`port ${this.options.port} on 127.0.0.1 is already in use (payment provider)`, { cause: err }) : err),
      );
      this.server!.listen(this.options.port ?? 0, '127.0.0.1', () => resolve());
    });
    return this.endpoint;
  }

  async close(): Promise<void> {
    if (this.server) await closeServer(this.server);
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
    const record = (status: number, extra: Pick<ProviderArrival, 'replayed' | 'fault'> = {}) => this.arrivals.push({ at: now, paymentId, idempotencyKey, status, ...extra });

    const auth = req.headers.authorization ?? '';
    const token = auth.startsWith('Bearer ') ? auth.slice(7) : '';
    const keys = this.options.apiKeys ?? [];
    if (token === '' || (keys.length > 0 && !keys.includes(token))) {
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
    const fault = this.options.faults?.({ paymentId, idempotencyKey, at: now });
    if (fault?.kind === 'throttle') {
      record(429, { fault: fault.kind });
      return this.send(res, 429, { message: 'injected throttle' }, { 'retry-after': String(fault.retryAfterSeconds) });
    }
    this.starts.push(now);
    const stored = this.results.get(idempotencyKey);
    if (stored) {
      record(stored.status, { replayed: true });
      this.replays++;
      return this.send(res, stored.status, stored.body, { 'idempotent-replayed': 'true' });
    }
    if (fault?.kind === 'error') {
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
      this.effects.push({ at: Date.now(), paymentId, idempotencyKey, providerReference });
      this.results.set(idempotencyKey, { status: 200, body });
      if (fault?.kind === 'hangAfterEffect') holdAfterEffectMs = fault.delayMs;
      else this.send(res, 200, body);
    } finally {
      this.concurrent--;
      this.inProgress.delete(idempotencyKey);
    }
    if (holdAfterEffectMs > 0) {
      // The effect is stored, so a retry is replayed; this caller only hears back (if still listening) much later.
      await new Promise((r) => setTimeout(r, holdAfterEffectMs));
      const stored = this.results.get(idempotencyKey)!;
      if (!res.destroyed) this.send(res, stored.status, stored.body);
    }
  }
}
