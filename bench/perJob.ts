// Benchmark (`npm run bench`), the arithmetic: turns the requests counted during a local run into figures per job,
// derives the naive design's figures from the same counts, and prices both. Pure, so the model is unit-tested.
import { costFor, type Architecture, type CostBreakdown, type PerJobUsage } from './prices';

/** Goals per job (issue 7). */
export const PER_JOB_GOALS = { sqsRequests: 0.35, dynamoWriteUnits: 2.2, lambdaInvocations: 0.1 } as const;

/** Everything counted during one local run of the jobs. */
export interface RunCounts {
  /** Operations seeded and discovered (one job = one operation, however many deliveries it took). */
  jobs: number;
  /** Messages the event sources acknowledged: jobs plus every deferral's re-published copy. */
  deliveries: number;
  sqs: {
    sendCalls: number;
    /** ReceiveMessage calls that returned at least one message. */
    receiveCalls: number;
    /** ReceiveMessage calls that returned nothing (idle polls and batching-window top-ups). */
    emptyReceiveCalls: number;
    deleteCalls: number;
    /** GetQueueAttributes by the functions (the producer reads its queue's depth once per admission step). @default 0 */
    attributeCalls?: number;
  };
  /** Write / read units on the pipeline's own tables, by table role. */
  dynamo: {
    idempotency: { write: number; read: number };
    ledger: { write: number; read: number };
    limiter: { write: number; read: number };
    /** The jobs' own tables (discovery reads, business deletes): reported apart, not part of the overhead. */
    business: { write: number; read: number };
  };
  lambda: {
    producerInvocations: number;
    consumerInvocations: number;
    /** Every invocation's duration (s) times its function's memory (GB), producers' admission steps included. */
    gbSeconds: number;
    /**
     * The same at the jobs' configured rates when the run was time-scaled: the slot waits inside the consumer grow by
     * the time scale, the work does not. Undefined: not estimated (a scaled job whose starts are not observed).
     */
    gbSecondsAtRealRate?: number;
    architecture: Architecture;
  };
  /** Scheduled producer runs (one Scheduler invocation each). */
  scheduledRuns: number;
}

export interface PerJobFigures extends PerJobUsage {
  /** Deliveries per job: above 1 when records were deferred and re-published (a slot missed, a throttle). */
  deliveries: number;
  /** Empty receives per job, not in sqsRequests (AWS long-polls; locally the mapping short-polls with backoff). */
  sqsIdlePolls: number;
  /** The jobs' own reads and writes per job, not in the overhead units. */
  businessWriteUnits: number;
  businessReadUnits: number;
}

export interface DesignFigures {
  perJob: PerJobFigures;
  costPerMillionUsd: CostBreakdown;
}

/**
 * The measured (batched) design per job. `atRealRate`: with the GB-seconds the run's waits would take at the configured
 * rates (falls back to the measured ones when the run was not scaled or could not be estimated).
 */
export function batchedFigures(c: RunCounts, options: { atRealRate?: boolean } = {}): DesignFigures {
  const n = Math.max(1, c.jobs);
  const d = c.dynamo;
  const gbSeconds = options.atRealRate ? (c.lambda.gbSecondsAtRealRate ?? c.lambda.gbSeconds) : c.lambda.gbSeconds;
  const perJob: PerJobFigures = {
    sqsRequests: (c.sqs.sendCalls + c.sqs.receiveCalls + c.sqs.deleteCalls + (c.sqs.attributeCalls ?? 0)) / n,
    dynamoWriteUnits: (d.idempotency.write + d.ledger.write + d.limiter.write) / n,
    dynamoReadUnits: (d.idempotency.read + d.ledger.read + d.limiter.read) / n,
    lambdaInvocations: (c.lambda.producerInvocations + c.lambda.consumerInvocations) / n,
    lambdaGbSeconds: gbSeconds / n,
    schedulerInvocations: c.scheduledRuns / n,
    deliveries: c.deliveries / n,
    sqsIdlePolls: c.sqs.emptyReceiveCalls / n,
    businessWriteUnits: d.business.write / n,
    businessReadUnits: d.business.read / n,
  };
  return { perJob, costPerMillionUsd: costFor(perJob, c.lambda.architecture) };
}

/**
 * The naive design (one SendMessage per operation, event source batch size 1), from the same run's counts:
 * - SQS: one send, one receive and one delete per job;
 * - Lambda: one consumer invocation per job, the producers' invocations as measured;
 * - DynamoDB: idempotency units per job as measured (they are per operation in both designs); the limiter's and the
 *   ledger's units are per invocation, so they are scaled from per consumer invocation to per job;
 * - duration: the same GB-seconds per job (the work per record is the same; the per-invocation overhead of 10x more
 *   invocations is left out, so the naive cost is a lower bound).
 */
export function naiveFigures(c: RunCounts): DesignFigures {
  const n = Math.max(1, c.jobs);
  const measured = batchedFigures(c).perJob;
  const d = c.dynamo;
  const invocations = Math.max(1, c.lambda.consumerInvocations);
  const perInvocation = (units: { write: number; read: number }) => ({
    write: units.write / invocations,
    read: units.read / invocations,
  });
  const limiter = perInvocation(d.limiter);
  const ledger = perInvocation(d.ledger);
  const perJob: PerJobFigures = {
    ...measured,
    sqsRequests: 3,
    dynamoWriteUnits: d.idempotency.write / n + limiter.write + ledger.write,
    dynamoReadUnits: d.idempotency.read / n + limiter.read + ledger.read,
    lambdaInvocations: 1 + c.lambda.producerInvocations / n,
  };
  return { perJob, costPerMillionUsd: costFor(perJob, c.lambda.architecture) };
}

export interface GoalCheck {
  metric: keyof typeof PER_JOB_GOALS;
  value: number;
  goal: number;
  met: boolean;
}

export function checkGoals(perJob: PerJobUsage): GoalCheck[] {
  return (Object.keys(PER_JOB_GOALS) as (keyof typeof PER_JOB_GOALS)[]).map((metric) => ({
    metric,
    value: perJob[metric],
    goal: PER_JOB_GOALS[metric],
    // A hair of float noise (2.2000000001) is not a miss.
    met: perJob[metric] <= PER_JOB_GOALS[metric] + 1e-9,
  }));
}

/** One timed invocation: when it ran, its function's memory, and the operation keys of the records it carried (matched to the starts). */
export interface TimedInvocation {
  startMs: number;
  endMs: number;
  memoryMb: number;
  keys: string[];
}

/**
 * GB-seconds the consumer spent waiting for rate-limit slots, estimated from the downstream's arrival log (its starts):
 * in each invocation, the time from its start to its last record's start, less one record's work per record started
 * (the work is the median time from an invocation's last start to its end: an apply and the writes after it). What is
 * left is sleeping until slots, the part that a slower (real) rate stretches and that a time-scaled run shrinks.
 */
export function slotWaitGbSeconds(invocations: TimedInvocation[], startsOf: (key: string) => number[]): number {
  const spans: { n: number; toLast: number; tail: number; memoryMb: number }[] = [];
  for (const inv of invocations) {
    const starts = inv.keys.flatMap((k) => {
      const at = startsOf(k).find((t) => t >= inv.startMs && t <= inv.endMs);
      return at === undefined ? [] : [at];
    });
    if (starts.length === 0) continue;
    const last = Math.max(...starts);
    spans.push({ n: starts.length, toLast: last - inv.startMs, tail: inv.endMs - last, memoryMb: inv.memoryMb });
  }
  if (spans.length === 0) return 0;
  const tails = spans.map((s) => s.tail).sort((a, b) => a - b);
  const workMs = tails[Math.floor(tails.length / 2)];
  return spans.reduce((sum, s) => sum + (Math.max(0, s.toLast - s.n * workMs) / 1000) * (s.memoryMb / 1024), 0);
}

export interface FlatVerdict {
  /** True when neither figure grew by more than the tolerance from the shorter backlog to the longer one. */
  flat: boolean;
  tolerance: number;
  short: { multiple: number; deliveriesPerJob: number; costPerMillionUsd: number };
  long: { multiple: number; deliveriesPerJob: number; costPerMillionUsd: number };
}

/** Growth above `tolerance` (a fraction: 0.1 = 10%) counts; less is run-to-run noise on a shared machine. */
export function flatVerdict(short: FlatVerdict['short'], long: FlatVerdict['long'], tolerance = 0.1): FlatVerdict {
  const grew = (a: number, b: number) => b > a * (1 + tolerance) + 1e-9;
  return {
    flat:
      !grew(short.deliveriesPerJob, long.deliveriesPerJob) && !grew(short.costPerMillionUsd, long.costPerMillionUsd),
    tolerance,
    short,
    long,
  };
}

/** One kind of limiter-table item's requests over a run (bench/countingProxy.ts limiterItemKind). */
export interface LimiterKindFigures {
  /** Conditional writes that landed. */
  writes: number;
  /** Conditional writes refused (a lost race, or a refusal such as a full key): billed as writes all the same. */
  lostRaces: number;
  reads: number;
}

export interface LimiterFigures {
  consumerInvocations: number;
  /** The job-wide slots item (its GCRA TAT), per consumer invocation: the block, its refills, their lost races. */
  slotsPerInvocation: LimiterKindFigures;
  /** Every limiter-table item the job touched, by kind, in total. */
  byKind: Record<string, LimiterKindFigures>;
}

/**
 * The limiter's requests of a run, by item kind and per consumer invocation. `requests`: the limiter table's, each with
 * its action, HTTP status and item kind.
 */
export function limiterFigures(
  requests: { action: string; status: number; kind: string }[],
  consumerInvocations: number,
): LimiterFigures {
  const byKind: Record<string, LimiterKindFigures> = {};
  for (const r of requests) {
    const k = (byKind[r.kind] ??= { writes: 0, lostRaces: 0, reads: 0 });
    if (['PutItem', 'UpdateItem', 'DeleteItem'].includes(r.action)) {
      if (r.status === 200) k.writes++;
      else if (r.status === 400) k.lostRaces++;
    } else if (['GetItem', 'Query', 'BatchGetItem'].includes(r.action) && r.status === 200) {
      k.reads++;
    }
  }
  const slots = byKind.slots ?? { writes: 0, lostRaces: 0, reads: 0 };
  const per = (n: number) => (consumerInvocations === 0 ? 0 : Number((n / consumerInvocations).toFixed(3)));
  return {
    consumerInvocations,
    slotsPerInvocation: { writes: per(slots.writes), lostRaces: per(slots.lostRaces), reads: per(slots.reads) },
    byKind,
  };
}
