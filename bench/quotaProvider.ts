// Benchmark stand-in for the downstream: an HTTP server on loopback that enforces a quota and logs every arrival. The
// quota may change over time on a schedule (bench:pacing --scenario quota-drop), as a real provider's does when it is
// under load of its own: clients are not told, they only see more 429s.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { closeServer } from '../local/servers';

export interface QuotaProviderOptions {
  /** Requests accepted in any sliding window of `windowMs`; the rest get 429. Before any scheduled step, and without one. */
  allowedPerWindow: number;
  windowMs: number;
}

/** From `atMs` (epoch ms) on, the quota is `allowedPerWindow`, until the next step. */
export interface QuotaStep {
  atMs: number;
  allowedPerWindow: number;
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
  /**
   * Replaces the quota's schedule: steps in ascending `atMs`; before the first, `allowedPerWindow` applies.
   * @throws Error naming the bad step
   */
  setSchedule(steps: QuotaStep[]): void;
  close(): Promise<void>;
}

/** Checks a schedule: ascending times, allowances that are whole numbers (0: a storm). @throws Error naming every bad step */
export function checkSchedule(steps: QuotaStep[]): void {
  const problems = steps.flatMap((step, i) => [
    ...(Number.isFinite(step.atMs) ? [] : [`step ${i}: atMs must be a number (got ${step.atMs})`]),
    ...(i > 0 && !(step.atMs >= steps[i - 1].atMs)
      ? [`step ${i}: atMs ${step.atMs} is before step ${i - 1}'s ${steps[i - 1].atMs}`]
      : []),
    ...(Number.isSafeInteger(step.allowedPerWindow) && step.allowedPerWindow >= 0
      ? []
      : [
          `step ${i}: allowedPerWindow must be a whole number (got ${step.allowedPerWindow}; 0 is a storm: every request refused)`,
        ]),
  ]);
  if (problems.length > 0) throw new Error(`invalid quota schedule: ${problems.join('; ')}`);
}

const WARM_UP_PATH = '/warm-up';

/** The provider's own clock: sub-millisecond, so two arrivals in the same millisecond still order and count. */
const clock = (): number => performance.timeOrigin + performance.now();

/**
 * Starts the provider. Its quota is a sliding-window log of accepted requests: the strictest reading of "R per
 * window", so any excess a client sends shows up as a 429 rather than being forgiven at a fixed-window boundary.
 */
export async function startQuotaProvider(options: QuotaProviderOptions): Promise<QuotaProvider> {
  const { windowMs } = options;
  let schedule: QuotaStep[] = [];
  // Index of the step in force (-1: none yet); arrivals come in time order, so it only moves forward.
  let stepAt = -1;
  const allowedAt = (at: number): number => {
    while (stepAt + 1 < schedule.length && schedule[stepAt + 1].atMs <= at) stepAt++;
    return stepAt < 0 ? options.allowedPerWindow : schedule[stepAt].allowedPerWindow;
  };
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
    const allowed = allowedAt(at);
    const ok = accepted.length - oldest < allowed;
    if (ok) accepted.push(at);
    else throttled++;
    // The window frees a place when enough of its oldest have left for the count to fall under the quota: the oldest
    // one at the quota as configured, more of them right after the quota was lowered.
    // In a storm (a quota of 0) the provider only says to come back in a second, as an overloaded one does.
    const retryAfterS = ok
      ? 0
      : allowed === 0
        ? 1
        : Math.max(1, Math.ceil((accepted[accepted.length - allowed] + windowMs - at) / 1000));
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
    setSchedule(steps) {
      checkSchedule(steps);
      schedule = [...steps];
      stepAt = -1;
    },
    close: () => closeServer(server),
  };
}
