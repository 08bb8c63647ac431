// Benchmark (`npm run bench:pacing`), outside the deployed system: K consumer instances drain one backlog against a
// local provider with a quota, paced first by the shared DynamoDB limiter (dynalite), then by a per-process ticker.
//
// Each "instance" is an async worker in this process with its own limiter object, as each Lambda container has its own
// (its own cached TAT); they share only the DynamoDB item, exactly as the fleet does. The baseline gives each instance
// the same allowance on its own, which is what a per-process ticker does: K instances send K times the rate.
// dynalite and the provider run in child processes, as they would be other machines: their CPU cannot stall the
// instances' timers, and the instances' stalls cannot delay the provider's arrival log.
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Command, InvalidArgumentError } from 'commander';
import { performance } from 'node:perf_hooks';
import { DynamoDbRateLimiter, RateLimiter } from '../lambda/adapters/rateLimiter';
import { gcraLimits, GcraState, RateLimitSpec, reserve } from '../lambda/core/pacing/gcra';
import { maxInAnyWindow } from '../lambda/core/pacing/slidingWindow';
import { sleep, sleepUntil, waitForSlot } from '../lambda/core/pacing/sleep';
import { startDynaliteProcess } from './dynaliteProcess';
import { startQuotaProviderProcess } from './quotaProviderProcess';

export interface PacingBenchOptions {
  /** The window the quota is counted over. @default 1000 */
  windowMs?: number;
  /** The provider's quota R per window, and the allowance both pacers are given. @default 20 */
  allowedPerWindow?: number;
  /** Concurrent consumer instances K. @default 8 */
  instances?: number;
  /** Backlog = this many times the per-window allowance. @default 20 */
  backlogFactor?: number;
  /** Messages per batch an instance takes (one limiter call per batch). @default 10 */
  batchSize?: number;
  /** The short-wait threshold: tokens further out than this are deferred, not waited for. @default 5000 */
  maxWaitMs?: number;
  /**
   * Window stretch absorbing start-time jitter between a reserved start and the provider logging the arrival
   * (timers, the event loop, loopback HTTP, other processes on a busy machine). @default 25
   */
  safetyMarginMs?: number;
  /**
   * An instance that wakes later than this after its reserved start gives the slot up. What is left of the margin
   * (safetyMarginMs - lateToleranceMs) is the budget for the request reaching the provider's log. @default 10
   */
  lateToleranceMs?: number;
}

export interface ModeReport {
  /** The provider's quota per window. */
  allowedPerWindow: number;
  /** The most arrivals (accepted or throttled) the provider logged in any sliding window of `windowMs`. */
  maxStartsInAnyWindow: number;
  /**
   * Accepted requests over the allowance's capacity for the time they took:
   *   accepted / (allowedPerWindow * (lastAccepted - firstAccepted + windowMs / allowedPerWindow) / windowMs)
   * i.e. each start is counted as occupying one slot of windowMs / allowedPerWindow, so perfectly even pacing at the
   * allowance scores exactly 1.0; idle slots lower it. (A bursty schedule can score a little over 1.)
   */
  utilization: number;
  /** Requests the provider answered 429. */
  throttled: number;
  /**
   * Time an instance spent blocked on pacing immediately before a request: the limiter call plus the sleep until the
   * reserved start, or the ticker's sleep. Not counted: sending, and time a deferred message spends back in the queue.
   */
  p50WaitMs: number;
  p99WaitMs: number;
  /** Every request that reached the provider. */
  requests: number;
  /** Reserved slots given up because the instance woke later than the tolerance (the limiter only). */
  missedSlots: number;
  elapsedMs: number;
}

export interface PacingBenchReport {
  limiter: ModeReport;
  baseline: ModeReport;
}

const KEY = 'bench-provider';
const POLL_MS = 20;
const LEAD_MS = 25;
const now = (): number => performance.timeOrigin + performance.now();

/** The shared queue the instances drain, simulating SQS: take a batch, put back (optionally delayed), mark done. */
class Backlog {
  private readonly items: number[];
  private remaining: number;
  private readonly timers = new Set<NodeJS.Timeout>();
  constructor(size: number) {
    this.items = Array.from({ length: size }, (_, i) => i);
    this.remaining = size;
  }
  get finished(): boolean {
    return this.remaining === 0;
  }
  take(n: number): number[] {
    return this.items.splice(0, n);
  }
  putBack(items: number[], delayMs = 0): void {
    if (items.length === 0) return;
    if (delayMs <= 0) {
      this.items.push(...items);
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.items.push(...items);
    }, delayMs);
    this.timers.add(timer);
  }
  done(): void {
    this.remaining--;
  }
  dispose(): void {
    for (const t of this.timers) clearTimeout(t);
  }
}

async function send(url: string, item: number): Promise<number> {
  const res = await fetch(url, { method: 'POST', body: JSON.stringify({ operationId: `op-${item}` }) });
  await res.arrayBuffer();
  return res.status;
}

interface Run {
  backlog: Backlog;
  url: string;
  waits: number[];
  missedSlots: number;
}

/**
 * One consumer instance paced by the shared limiter: reserve a block per batch, start each at its slot, and give up a
 * slot it woke too late for (the message goes back and is reserved again).
 */
async function limiterInstance(run: Run, limiter: RateLimiter, batchSize: number, maxWaitMs: number, lateToleranceMs: number): Promise<void> {
  const { backlog } = run;
  while (!backlog.finished) {
    const batch = backlog.take(batchSize);
    if (batch.length === 0) {
      await sleep(POLL_MS);
      continue;
    }
    let readyAt = now();
    const got = await limiter.acquire(KEY, batch.length, { maxWaitMs });
    // What does not fit the short wait is deferred, as the consumer re-publishes it with DelaySeconds.
    backlog.putBack(batch.slice(got.granted), got.waitMs);
    for (let i = 0; i < got.granted; i++) {
      if (!(await waitForSlot(got.startAtMs[i], lateToleranceMs))) {
        run.missedSlots++;
        backlog.putBack([batch[i]]);
        continue;
      }
      run.waits.push(now() - readyAt);
      const status = await send(run.url, batch[i]);
      readyAt = now();
      if (status === 200) backlog.done();
      else backlog.putBack([batch[i]]);
    }
    // Nothing granted: the next slot is waitMs away; asking again sooner would only be refused again.
    if (got.granted === 0) await sleep(Math.min(got.waitMs, maxWaitMs));
  }
}

/** One consumer instance with a per-process ticker: the same allowance, enforced only within the instance. */
async function tickerInstance(run: Run, spec: RateLimitSpec, batchSize: number): Promise<void> {
  const { backlog } = run;
  const limits = gcraLimits(spec);
  let state: GcraState | undefined;
  while (!backlog.finished) {
    const batch = backlog.take(batchSize);
    if (batch.length === 0) {
      await sleep(POLL_MS);
      continue;
    }
    for (const item of batch) {
      const readyAt = now();
      const tick = reserve(state, { nowMs: Date.now(), count: 1, maxWaitMs: spec.intervalMs }, limits);
      state = tick.state;
      await sleepUntil(tick.startAtMs[0]);
      run.waits.push(now() - readyAt);
      const status = await send(run.url, item);
      // A throttled message goes back to the queue, as a failed batch item would be redelivered.
      if (status === 200) backlog.done();
      else backlog.putBack([item]);
    }
  }
}

/** The p-th percentile (nearest rank) of `values`; `whenEmpty` when there are none. */
export function percentile(values: number[], p: number, whenEmpty = 0): number {
  if (values.length === 0) return whenEmpty;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const round = (n: number, digits: number): number => Number(n.toFixed(digits));

async function runMode(
  options: Required<PacingBenchOptions>,
  instance: (run: Run, index: number) => Promise<void>,
): Promise<ModeReport> {
  const { windowMs, allowedPerWindow, instances, backlogFactor } = options;
  const provider = await startQuotaProviderProcess({ allowedPerWindow, windowMs });
  const backlog = new Backlog(backlogFactor * allowedPerWindow);
  const run: Run = { backlog, url: provider.url, waits: [], missedSlots: 0 };
  // Warm-up outside the measurement: each instance opens its connection, as a warm container already has one.
  await Promise.all(Array.from({ length: instances }, () => send(provider.warmUpUrl, -1)));
  const began = now();
  let log;
  try {
    await Promise.all(Array.from({ length: instances }, (_, i) => instance(run, i)));
  } finally {
    backlog.dispose();
    log = await provider.finish();
  }
  const { accepted, arrivals, throttled } = log;
  const span = accepted.length === 0 ? 0 : accepted[accepted.length - 1] - accepted[0] + windowMs / allowedPerWindow;
  return {
    allowedPerWindow,
    maxStartsInAnyWindow: maxInAnyWindow(arrivals, windowMs),
    utilization: span === 0 ? 0 : round(accepted.length / ((allowedPerWindow * span) / windowMs), 4),
    throttled,
    p50WaitMs: round(percentile(run.waits, 50), 1),
    p99WaitMs: round(percentile(run.waits, 99), 1),
    requests: arrivals.length,
    missedSlots: run.missedSlots,
    elapsedMs: Math.round(now() - began),
  };
}

export const DEFAULTS: Required<PacingBenchOptions> = {
  windowMs: 1000,
  allowedPerWindow: 20,
  instances: 8,
  backlogFactor: 20,
  batchSize: 10,
  maxWaitMs: 5000,
  safetyMarginMs: 25,
  lateToleranceMs: 10,
};

/** Runs the shared limiter, then the per-process baseline, each against a fresh provider with the same quota. */
export async function runPacingBench(input: PacingBenchOptions = {}): Promise<PacingBenchReport> {
  const options = { ...DEFAULTS, ...input };
  const spec: RateLimitSpec = {
    startsPerInterval: options.allowedPerWindow,
    intervalMs: options.windowMs,
    safetyMarginMs: options.safetyMarginMs,
  };
  const dynamodb = await startDynaliteProcess();
  // Credentials and endpoint for the embedded server only; nothing here can reach AWS.
  const client = new DynamoDBClient({
    endpoint: dynamodb.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  try {
    const tableName = 'bench-limiter';
    await client.send(
      new CreateTableCommand({
        TableName: tableName,
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    // maxAttempts is generous: K instances racing for one item is the point of the exercise.
    // leadMs covers a contended acquire's round trips, so the first slot on an idle key is not missed on arrival.
    const limiters = Array.from({ length: options.instances }, () => new DynamoDbRateLimiter({ limits: spec, tableName, client, maxAttempts: 50, leadMs: LEAD_MS }));
    // Warm-up on another key, racing as the run will: loads the SDK's write, conflict and read paths in each instance,
    // as in a warm container.
    for (let round = 0; round < 3; round++) await Promise.all(limiters.map((l) => l.acquire(`${KEY}-warm-up`, 1, { maxWaitMs: 60_000 })));
    const limiter = await runMode(options, (run, i) => limiterInstance(run, limiters[i], options.batchSize, options.maxWaitMs, options.lateToleranceMs));
    const baseline = await runMode(options, (run) => tickerInstance(run, spec, options.batchSize));
    return { limiter, baseline };
  } finally {
    client.destroy();
    await dynamodb.close();
  }
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError('must be zero or a positive integer');
  return n;
}

function summarize(name: string, m: ModeReport): string {
  const verdict = m.maxStartsInAnyWindow <= m.allowedPerWindow ? 'within quota' : 'OVER QUOTA';
  return `${name.padEnd(9)} max ${m.maxStartsInAnyWindow}/${m.allowedPerWindow} per window (${verdict}), utilization ${m.utilization}, ` +
    `throttled ${m.throttled}, missed slots ${m.missedSlots}, wait p50 ${m.p50WaitMs} ms p99 ${m.p99WaitMs} ms, ${m.requests} requests in ${m.elapsedMs} ms`;
}

async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name('bench:pacing')
    .description('Shared DynamoDB limiter vs per-process tickers, against a local provider with a quota.')
    .option('--json', 'print one JSON document on stdout', false)
    .option('--window-ms <n>', 'quota window in ms', positiveInt, DEFAULTS.windowMs)
    .option('--allowed <n>', 'quota R per window', positiveInt, DEFAULTS.allowedPerWindow)
    .option('--instances <n>', 'concurrent consumer instances K', positiveInt, DEFAULTS.instances)
    .option('--backlog-factor <n>', 'backlog as a multiple of R', positiveInt, DEFAULTS.backlogFactor)
    .option('--batch-size <n>', 'messages per batch', positiveInt, DEFAULTS.batchSize)
    .option('--max-wait-ms <n>', 'short-wait threshold', nonNegativeInt, DEFAULTS.maxWaitMs)
    .option('--safety-margin-ms <n>', 'window stretch absorbing start jitter', nonNegativeInt, DEFAULTS.safetyMarginMs)
    .option('--late-tolerance-ms <n>', 'give up a slot woken later than this', nonNegativeInt, DEFAULTS.lateToleranceMs)
    .parse(argv);
  const o = program.opts<{
    json: boolean; windowMs: number; allowed: number; instances: number; backlogFactor: number; batchSize: number;
    maxWaitMs: number; safetyMarginMs: number; lateToleranceMs: number;
  }>();
  const report = await runPacingBench({
    windowMs: o.windowMs,
    allowedPerWindow: o.allowed,
    instances: o.instances,
    backlogFactor: o.backlogFactor,
    batchSize: o.batchSize,
    maxWaitMs: o.maxWaitMs,
    safetyMarginMs: o.safetyMarginMs,
    lateToleranceMs: o.lateToleranceMs,
  });
  if (o.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    process.stdout.write(`${summarize('limiter', report.limiter)}\n${summarize('baseline', report.baseline)}\n`);
  }
}

if (require.main === module) {
  main(process.argv).catch((error: unknown) => {
    process.stderr.write(`bench:pacing failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
