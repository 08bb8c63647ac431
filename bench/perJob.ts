// Benchmark (`npm run bench`), the arithmetic: turns the requests counted during a local run into figures per job,
// derives the naive design's figures from the same counts, and prices both. Pure, so the model is unit-tested.
import { costFor, type Architecture, type CostBreakdown, type PerJobUsage } from './prices';

/** Goals per job (issue 7). */
export const PER_JOB_GOALS = { sqsRequests: 0.35, dynamoWriteUnits: 2.2, lambdaInvocations: 0.1 } as const;

/** Everything counted during one local run of every job, pacing off. */
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
    /** Sum of consumer invocation durations, ms. */
    consumerDurationMs: number;
    memoryMb: number;
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

/** The measured (batched) design per job. */
export function batchedFigures(c: RunCounts): DesignFigures {
  const n = Math.max(1, c.jobs);
  const d = c.dynamo;
  const gbSeconds = (c.lambda.consumerDurationMs / 1000) * (c.lambda.memoryMb / 1024);
  const perJob: PerJobFigures = {
    sqsRequests: (c.sqs.sendCalls + c.sqs.receiveCalls + c.sqs.deleteCalls) / n,
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
  const perInvocation = (units: { write: number; read: number }) => ({ write: units.write / invocations, read: units.read / invocations });
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
