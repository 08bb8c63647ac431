// Chaos harness, the faults the run injects: each decided from the run's seed (a keyed draw where the order of requests
// must not matter), counted as it is injected, and all off at once when the fault phase ends. chaos/run.ts wires them
// into the local session, the fault proxies and the job's fake downstream.
import type { DownstreamFault, DownstreamFaultPolicy } from '../local/fixture';
import type { DynamoFault } from './dynamoProxy';
import { keyedDraw, Prng } from './prng';
import type { S3Fault } from './s3Proxy';

/** Fault rates, probabilities per opportunity (ChaosOptions documents each), and the consumer's timeout they follow. */
export interface FaultRates {
  duplicateRate: number;
  killRate: number;
  downstreamErrorRate: number;
  rejectRate: number;
  slowRate: number;
  hangAfterEffectRate: number;
  dropBeforeEffectRate: number;
  stormShare: number;
  dynamoFaultRate: number;
  dynamoStallRate: number;
  s3FaultRate: number;
  consumerTimeoutSeconds: number;
}

/** Requests of one S3 call a faulted object fails: the SDK's standard retry mode makes 3 attempts. */
export const S3_FAULTED_ATTEMPTS = 3;

/** The fault counters of a run, in the report's order: the downstream's only for a job with one, S3's for one with buckets. */
export function faultCounters(job: { downstream: boolean; buckets: boolean }): Record<string, number> {
  return {
    duplicatedMessages: 0,
    duplicateCopies: 0,
    producerReruns: 0,
    workerKillsArmed: 0,
    ...(job.downstream
      ? {
          downstreamStormThrottles: 0,
          downstreamErrors: 0,
          downstreamRejects: 0,
          downstreamSlow: 0,
          downstreamHangsAfterEffect: 0,
          downstreamDropsBeforeEffect: 0,
        }
      : {}),
    dynamoThrottles: 0,
    dynamoErrors: 0,
    dynamoStalls: 0,
    ...(job.buckets ? { s3SlowDowns: 0, s3Errors: 0 } : {}),
    lambdaTimeouts: 0,
    poisonMessages: 0,
    dlqBeforeRedrive: 0,
    redriven: 0,
  };
}

/**
 * 429 storms at the downstream: windows in the fault phase's timeline (ms from the run's start), planned from the seed
 * up front, over an hour (longer than any run's fault phase).
 */
export function planStormWindows(planDice: Prng, stormShare: number): [number, number][] {
  const storms: [number, number][] = [];
  for (let t = planDice.int(500, 3000); t < 3_600_000; t += planDice.int(4000, 12000)) {
    const length = Math.round(planDice.int(500, 2000) * (stormShare / 0.1));
    storms.push([t, t + length]);
  }
  return storms;
}

export class ChaosFaults {
  /** What was injected so far; the run reports it. */
  counts: Record<string, number> = faultCounters({ downstream: false, buckets: false });
  /** Off once the fault phase ends: nothing more is injected. */
  on = true;
  /** The run's own plan: the storms, the copies of the schedule, the re-runs' timing. */
  readonly planDice: Prng;
  /** The producer's kills and dead-letters (chaos/producerFaults.ts). */
  readonly producerDice: Prng;
  readonly storms: [number, number][];
  private readonly dupDice: Prng;
  private readonly killDice: Prng;
  private readonly ddbDice: Prng;
  private readonly stallDice: Prng;
  private readonly attemptsPerKey = new Map<string, number>();
  private readonly s3Requests = new Map<string, number>();
  // One decision per operation: deferrals re-publish the same operation, and duplicating those too would multiply
  // copies of copies under a backlog.
  private readonly considered = new Set<string>();

  constructor(
    private readonly seed: number,
    private readonly rates: FaultRates,
    /** When the run started (epoch ms): the storms' timeline starts here. */
    private readonly started: number,
  ) {
    const dice = new Prng(seed);
    this.dupDice = dice.fork('duplicates');
    this.killDice = dice.fork('kills');
    this.ddbDice = dice.fork('dynamodb');
    this.stallDice = dice.fork('stalls');
    this.planDice = dice.fork('plan');
    this.producerDice = dice.fork('producer');
    this.storms = planStormWindows(this.planDice, rates.stormShare);
  }

  /** The job's fake downstream: storms first, then one keyed draw per operation and attempt. */
  readonly downstream: DownstreamFaultPolicy = (r): DownstreamFault | undefined => {
    const o = this.rates;
    const faults = this.counts;
    const rel = r.at - this.started;
    if (o.stormShare > 0 && this.storms.some(([a, b]) => rel >= a && rel < b)) {
      faults.downstreamStormThrottles++;
      return { kind: 'throttle', retryAfterSeconds: 1 };
    }
    const attempt = (this.attemptsPerKey.get(r.idempotencyKey) ?? 0) + 1;
    this.attemptsPerKey.set(r.idempotencyKey, attempt);
    // Keyed on the operation and its attempt: the same request meets the same fault whatever the interleaving.
    let u = keyedDraw(this.seed, `${r.idempotencyKey}#${attempt}`);
    if ((u -= o.downstreamErrorRate) < 0) {
      faults.downstreamErrors++;
      return { kind: 'error', status: ([500, 502, 503] as const)[attempt % 3] };
    }
    if ((u -= o.rejectRate) < 0) {
      faults.downstreamRejects++;
      return { kind: 'reject', status: 422 };
    }
    if ((u -= o.slowRate) < 0) {
      faults.downstreamSlow++;
      return {
        kind: 'slow',
        delayMs: 100 + Math.round(keyedDraw(this.seed, `${r.idempotencyKey}#${attempt}#slow`) * 700),
      };
    }
    if ((u -= o.hangAfterEffectRate) < 0) {
      faults.downstreamHangsAfterEffect++;
      return { kind: 'hangAfterEffect', delayMs: (o.consumerTimeoutSeconds + 2) * 1000 };
    }
    if ((u -= o.dropBeforeEffectRate) < 0) {
      faults.downstreamDropsBeforeEffect++;
      return { kind: 'dropBeforeEffect', delayMs: 300 };
    }
    return undefined;
  };

  /** A DynamoDB request of the chaos job's functions. */
  dynamo(operation: string): DynamoFault | undefined {
    // Only the consumer claims (PutItem) and pre-checks (BatchGetItem): a stall there times out a consumer invocation,
    // never the producer.
    if (
      this.on &&
      (operation === 'PutItem' || operation === 'BatchGetItem') &&
      this.stallDice.chance(this.rates.dynamoStallRate)
    ) {
      this.counts.dynamoStalls++;
      return 'Stall';
    }
    if (!this.on || !this.ddbDice.chance(this.rates.dynamoFaultRate)) return undefined;
    const fault = this.ddbDice.pick([
      'ProvisionedThroughputExceededException',
      'ThrottlingException',
      'InternalServerError',
    ] as const);
    if (fault === 'InternalServerError') this.counts.dynamoErrors++;
    else this.counts.dynamoThrottles++;
    return fault;
  }

  /**
   * An S3 object request. Per object, decided once from the seed and its key: its first calls fail whole, so the
   * consumer meets S3's throttle (it defers) or an internal error (SQS redelivers), not a blip the SDK retries away.
   */
  s3({ bucket, key }: { bucket: string; key: string }): S3Fault | undefined {
    if (!this.on) return undefined;
    const object = `${bucket}/${key}`;
    const n = (this.s3Requests.get(object) ?? 0) + 1;
    this.s3Requests.set(object, n);
    const u = keyedDraw(this.seed, `s3#${object}`);
    if (n > S3_FAULTED_ATTEMPTS || u >= this.rates.s3FaultRate) return undefined;
    const fault: S3Fault = u < this.rates.s3FaultRate / 3 ? 'InternalError' : 'SlowDown';
    if (fault === 'SlowDown') this.counts.s3SlowDowns++;
    else this.counts.s3Errors++;
    return fault;
  }

  /** A consumer invocation: when to kill its execution environment, if at all. */
  consumerKillAfterMs(): number | undefined {
    if (!this.on || !this.killDice.chance(this.rates.killRate)) return undefined;
    this.counts.workerKillsArmed++;
    return this.killDice.int(0, 1500);
  }

  /** A published operation, seen once: the delays (seconds) of the copies to re-send of it, none mostly. */
  duplicates(operationId: string): number[] {
    if (!this.on || this.considered.has(operationId)) return [];
    this.considered.add(operationId);
    if (!this.dupDice.chance(this.rates.duplicateRate)) return [];
    this.counts.duplicatedMessages++;
    const copies = this.dupDice.int(1, 3);
    const delays: number[] = [];
    for (let i = 0; i < copies; i++) {
      this.counts.duplicateCopies++;
      delays.push(this.dupDice.int(0, 3));
    }
    return delays;
  }
}
