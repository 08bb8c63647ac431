// Benchmark plumbing for bench:pacing's scenarios: the backlog the instances drain, a limiter-paced instance (the
// consumer's loop, reduced to what pacing sees), the DynamoDB table the limiters share, and a count of the requests
// they make to it.
import {
  ConditionalCheckFailedException,
  CreateTableCommand,
  DynamoDBClient,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import { performance } from 'node:perf_hooks';
import type { RateChange, RateFeedback } from '../lambda/adapters/adaptiveRateLimiter';
import { RateLimiterError, type RateLimiter } from '../lambda/adapters/rateLimiter';
import { ApplyTimeEstimator } from '../lambda/core/pacing/applyEstimator';
import { sleep, waitForSlot } from '../lambda/core/pacing/sleep';
import { startDynaliteProcess } from './dynaliteProcess';

/** The limiter key every instance paces (one downstream). */
export const KEY = 'bench-provider';
/** How long an instance that found the backlog empty waits before looking again (an SQS poll, shortened). */
export const POLL_MS = 20;
/** The limiters' leadMs: covers a contended acquire's round trips, so the first slot on an idle key is not missed on arrival. */
export const LEAD_MS = 25;
export const now = (): number => performance.timeOrigin + performance.now();

/** `defaults` overridden by the options actually given (an option present but undefined keeps its default). */
export function withDefaults<T extends object>(defaults: T, input: Partial<T>): T {
  return { ...defaults, ...Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) };
}

/** The shared queue the instances drain, simulating SQS: take a batch, put back (optionally delayed), mark done. */
export class Backlog {
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

export async function send(url: string, item: number): Promise<number> {
  const res = await fetch(url, { method: 'POST', body: JSON.stringify({ operationId: `op-${item}` }) });
  await res.arrayBuffer();
  return res.status;
}

/** What the instances of one run share and fill in. */
export interface Run {
  backlog: Backlog;
  url: string;
  /** The limiter key the instances pace. */
  key: string;
  waits: number[];
  missedSlots: number;
  /** Epoch ms after which no instance starts anything (a scenario that runs for a set time); undefined: until drained. */
  stopAtMs?: number;
  /** Every change an instance's report made to the shared rate (adaptive limiters only), with when, epoch ms. */
  rateChanges: (RateChange & { atMs: number })[];
  /** Limiter or rate-item calls that failed (contention, DynamoDB): the consumer defers its batch, or logs, and goes on. */
  limiterErrors: number;
}

export function newRun(backlog: Backlog, url: string, stopAtMs?: number, key = KEY): Run {
  return { backlog, url, key, waits: [], missedSlots: 0, stopAtMs, rateChanges: [], limiterErrors: 0 };
}

export interface LimiterInstanceOptions {
  batchSize: number;
  maxWaitMs: number;
  lateToleranceMs: number;
  /**
   * The key's slot spacing (the limiter's emission interval), ms: an instance takes only the slots it can start on
   * time, as the consumer's slot pool does (ApplyTimeEstimator.blockSize).
   */
  spacingMs: number;
  /** How long each start holds the instance after the provider answers (a slow downstream call). @default 0 */
  applyMs?: number;
  /**
   * Told once per batch whether the provider throttled any of it, else that some of it succeeded: the consumer's
   * report at the end of an invocation (lambda/handlers/consumer.ts). Undefined: the rate stays as configured.
   */
  feedback?: RateFeedback;
}

/**
 * One consumer instance paced by the shared limiter: reserve a block per batch, start each at its slot, and give up a
 * slot it woke too late for (the message goes back and is reserved again).
 */
export async function limiterInstance(run: Run, limiter: RateLimiter, options: LimiterInstanceOptions): Promise<void> {
  const { backlog } = run;
  const { batchSize, maxWaitMs, lateToleranceMs, feedback, spacingMs, applyMs = 0 } = options;
  const stopped = () => run.stopAtMs !== undefined && now() >= run.stopAtMs;
  // The instance's record cycles, as the consumer's slot pool keeps them: it takes the slots it can reach on time.
  const pace = new ApplyTimeEstimator();
  const blockSize = (): number => Math.min(batchSize, pace.blockSize(spacingMs, lateToleranceMs));
  while (!backlog.finished && !stopped()) {
    const batch = backlog.take(blockSize());
    if (batch.length === 0) {
      await sleep(POLL_MS);
      continue;
    }
    let readyAt = now();
    let got;
    try {
      got = await limiter.acquire(run.key, batch.length, { maxWaitMs });
    } catch (error) {
      // As the consumer does: a limiter that cannot answer defers the batch (here: back to the queue after a pause).
      if (!(error instanceof RateLimiterError)) throw error;
      run.limiterErrors++;
      backlog.putBack(batch);
      await sleep(POLL_MS);
      continue;
    }
    // What does not fit the short wait is deferred, as the consumer re-publishes it with DelaySeconds.
    backlog.putBack(batch.slice(got.granted), got.waitMs);
    let throttles = 0;
    let successes = 0;
    for (let i = 0; i < got.granted; i++) {
      if (stopped()) {
        backlog.putBack(batch.slice(i, got.granted));
        break;
      }
      if (!(await waitForSlot(got.startAtMs[i], lateToleranceMs))) {
        run.missedSlots++;
        backlog.putBack([batch[i]]);
        continue;
      }
      run.waits.push(now() - readyAt);
      const sentAt = now();
      const status = await send(run.url, batch[i]);
      if (applyMs > 0) await sleep(applyMs);
      readyAt = now();
      pace.record(readyAt - sentAt);
      if (status === 200) {
        successes++;
        backlog.done();
      } else {
        throttles++;
        backlog.putBack([batch[i]]);
      }
    }
    if (feedback && (throttles > 0 || successes > 0)) {
      try {
        const counts = { starts: successes + throttles, throttles };
        const change =
          throttles > 0 ? await feedback.throttled(run.key, counts) : await feedback.succeeded(run.key, counts);
        if (change) run.rateChanges.push({ ...change, atMs: now() });
      } catch (error) {
        // The consumer logs a failed rate update and settles its records anyway; so does the bench.
        if (!(error instanceof RateLimiterError)) throw error;
        run.limiterErrors++;
      }
    }
    // Nothing granted: the next slot is waitMs away; asking again sooner would only be refused again.
    if (got.granted === 0) await sleep(Math.min(got.waitMs, maxWaitMs));
  }
}

/** DynamoDB requests the limiters made, by kind; lost races are conditional writes DynamoDB refused. */
export interface DynamoRequestCounts {
  writes: number;
  reads: number;
  lostRaces: number;
}

export interface LimiterRequests extends DynamoRequestCounts {
  /** Per start (request that reached the provider), rounded to 3 places. */
  writesPerStart: number;
  readsPerStart: number;
  lostRacesPerStart: number;
  /** Of the totals, the adaptive rate's own item (`<key>#rate`); absent for a limiter without one. */
  rateItem?: DynamoRequestCounts;
}

const WRITES = new Set([
  'UpdateItemCommand',
  'PutItemCommand',
  'DeleteItemCommand',
  'BatchWriteItemCommand',
  'TransactWriteItemsCommand',
]);
const READS = new Set([
  'GetItemCommand',
  'BatchGetItemCommand',
  'QueryCommand',
  'ScanCommand',
  'TransactGetItemsCommand',
]);

function lostRace(error: unknown): boolean {
  if (error instanceof ConditionalCheckFailedException) return true;
  return (
    error instanceof TransactionCanceledException &&
    (error.CancellationReasons ?? []).some((r) => r.Code === 'ConditionalCheckFailed')
  );
}

/** Counts the client's DynamoDB requests while switched on: a middleware, so whatever the limiters send is counted. */
export class DynamoRequestCounter {
  private counting = false;
  private total: DynamoRequestCounts = { writes: 0, reads: 0, lostRaces: 0 };
  private rate: DynamoRequestCounts = { writes: 0, reads: 0, lostRaces: 0 };

  constructor(client: DynamoDBClient) {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (!this.counting) return next(args);
        const input = args.input as { Key?: { pk?: { S?: string } } };
        const buckets = input.Key?.pk?.S?.endsWith('#rate') ? [this.total, this.rate] : [this.total];
        const kind = WRITES.has(context.commandName ?? '')
          ? 'writes'
          : READS.has(context.commandName ?? '')
            ? 'reads'
            : undefined;
        for (const b of buckets) if (kind) b[kind]++;
        try {
          return await next(args);
        } catch (error) {
          if (lostRace(error)) for (const b of buckets) b.lostRaces++;
          throw error;
        }
      },
      // Initialize: once per command, whatever the SDK's own retries do below it.
      { step: 'initialize', name: 'benchDynamoRequestCounter' },
    );
  }

  /** Starts a fresh count. */
  start(): void {
    this.total = { writes: 0, reads: 0, lostRaces: 0 };
    this.rate = { writes: 0, reads: 0, lostRaces: 0 };
    this.counting = true;
  }

  /** Stops counting and reports per start; `withRateItem` adds the rate item's share. */
  stop(starts: number, withRateItem = false): LimiterRequests {
    this.counting = false;
    const per = (n: number) => (starts === 0 ? 0 : Number((n / starts).toFixed(3)));
    return {
      ...this.total,
      writesPerStart: per(this.total.writes),
      readsPerStart: per(this.total.reads),
      lostRacesPerStart: per(this.total.lostRaces),
      ...(withRateItem ? { rateItem: { ...this.rate } } : {}),
    };
  }
}

export interface LimiterTable {
  /** The client the limiters share, counted by `counter`. */
  client: DynamoDBClient;
  tableName: string;
  counter: DynamoRequestCounter;
  close(): Promise<void>;
}

/** dynalite in its own process, the limiter table in it, and one client every limiter of the run shares. */
export async function startLimiterTable(): Promise<LimiterTable> {
  const dynamodb = await startDynaliteProcess();
  // Credentials and endpoint for the embedded server only; nothing here can reach AWS.
  const client = new DynamoDBClient({
    endpoint: dynamodb.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  const close = async () => {
    client.destroy();
    await dynamodb.close();
  };
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
    return { client, tableName, counter: new DynamoRequestCounter(client), close };
  } catch (error) {
    await close();
    throw error;
  }
}
