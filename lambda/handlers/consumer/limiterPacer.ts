// The Pacer the consumer runs on (core/pacing/pacer.ts's adapter): the job-wide limiter and the backfill share (the
// slot pool), the per-key rate (keyRateGate.ts), the per-key concurrency leases (keyLeases.ts) and the adaptive rates
// (rateFeedback.ts), composed; built from the job's PacingSettings alone (pacerFromSettings).
import { ApplyTimeEstimator } from '../../core/pacing/applyEstimator';
import { gcraLimits } from '../../core/pacing/gcra';
import type {
  InvocationPacing,
  PacedOutcome,
  PacedRecord,
  PacedStart,
  Pacer,
  SlotPriority,
  StartAnswer,
} from '../../core/pacing/pacer';
import { sleep as realSleep, waitForSlot } from '../../core/pacing/sleep';
import { backfillItemKey, backfillLimits } from '../../core/backfill';
import { MIN_SHORT_WAIT_MS, type PacingSettings } from '../../core/pacingSettings';
import { AdaptiveDynamoDbRateLimiter, type RateFeedback } from '../../adapters/adaptiveRateLimiter';
import { KeyConcurrencyLimiter } from '../../adapters/keyConcurrency';
import { KeyRateLimiter } from '../../adapters/keyRateLimiter';
import { logger } from '../../adapters/observability';
import { DynamoDbRateLimiter, type RateLimiter } from '../../adapters/rateLimiter';
import { BackfillShare } from './backfillShare';
import { KeyLeases, type KeyConcurrency } from './keyLeases';
import { KeyRateGate, type KeyLimiter } from './keyRateGate';
import { RateFeedbackReporter, RateSignals } from './rateFeedback';
import { SlotPool, type SlotPoolSettings } from './slotPool';

/** The pacer's parts and numbers, as pacerFromSettings builds them or a test gives them. */
export interface LimiterPacerOptions {
  /** The limiter item starts are counted on (one per downstream). */
  key: string;
  /**
   * The fleet-wide limiter; one block of slots per invocation. Undefined: pacing is off (the job's `pacing: false`), no
   * limiter I/O, and only the concurrency cap bounds the downstream.
   */
  limiter: RateLimiter | undefined;
  /**
   * Told once per invocation whether the downstream throttled (any 429/503) or not (some success), so a shared
   * adaptive rate can follow the provider's real tolerance. @default none: the rate stays as configured
   */
  rateFeedback?: RateFeedback;
  /**
   * The per-key limit (rateLimit.perKey), enforced beside the job-wide limiter: a record starts only when its key has a
   * token at its slot, and a key's 429s cut that key's rate. @default none
   */
  keys?: KeyLimiter;
  /**
   * The per-key concurrency limit (concurrency.perKey): a record starts only while its key has fewer than the limit in
   * progress fleet-wide, each start holding a lease that expires with its invocation. @default none
   */
  keyConcurrency?: KeyConcurrency;
  /**
   * Backfill's cap while live work waits (rateLimit.backfillShare below 1): a limiter at the share of the allowance,
   * on its own item. Backfill then also takes only slots live work left. @default none: backfill paces as live work
   */
  backfill?: { limiter: RateLimiter; key?: string };
  /**
   * Longest wait for a slot spent inside the function; records whose slot would be later are deferred. The stack's
   * value is PacingSettings' (its default is applied there); this default is for pacers a test builds. @default MIN_SHORT_WAIT_MS
   */
  shortWaitMs?: number;
  /**
   * Time kept back from the invocation's remaining time for the last record's apply and the acknowledgement: no slot is
   * taken later than remaining time minus this. @default 5000, or a quarter of the invocation's time when that is less
   * (a short timeout would otherwise spend half its time on the reserve and defer what it could have waited for)
   */
  reserveMs?: number;
  /**
   * How late a record may start after its slot: woken later, it takes a new slot (see LimiterPacer.start). Keep it
   * below the limiter's safetyMarginMs. @default 0
   */
  lateToleranceMs?: number;
  /**
   * The expected spacing between starts on the key (the limiter's emission interval). Records beyond the grant are
   * deferred by the limiter's hint plus their position times this, so they do not all come back together. @default 0
   */
  spacingMs?: number;
  /** The clock the limiter's start times are on, epoch ms. @default Date.now */
  clock?: () => number;
  /**
   * How a record waits for its slot, on `clock`'s time: a test gives a virtual clock's pair, so pacing runs on virtual
   * time (test/lambda/handlers/virtualClock.ts). @default the real timer (core/pacing/sleep.ts)
   */
  sleep?: (ms: number) => Promise<void>;
}

const DEFAULT_RESERVE_MS = 5_000;

/**
 * New slots a record takes after waking later than its tolerance before it is deferred instead (each costs a limiter
 * write; a container that keeps waking late is stalled, and its records are better started elsewhere).
 */
export const MAX_LATE_RETAKES = 2;

/** The container's parts an invocation starts its records through, beside its own slot pool. */
interface StartParts {
  clock: () => number;
  sleep: (ms: number) => Promise<void>;
  lateToleranceMs: number;
  /** How late a start may wake (the late tolerance less its claim to come: ApplyTimeEstimator.wakeToleranceMs). */
  wakeToleranceMs: () => number;
  gate: KeyRateGate | undefined;
  leases: KeyLeases | undefined;
  feedback: RateFeedbackReporter;
}

export class LimiterPacer implements Pacer {
  readonly keyField: string | undefined;
  readonly spacingMs: number;
  readonly clock: () => number;
  /** This container's last record cycles: how fast it reaches its slots, which bounds its blocks. */
  private readonly estimator = new ApplyTimeEstimator();
  private readonly slotSettings: SlotPoolSettings;
  private readonly parts: StartParts;

  constructor(readonly options: LimiterPacerOptions) {
    const { key, limiter, keys, keyConcurrency, backfill } = options;
    this.keyField = keys?.field ?? keyConcurrency?.field;
    this.spacingMs = options.spacingMs ?? 0;
    this.clock = options.clock ?? Date.now;
    this.slotSettings = {
      limiter,
      key,
      shortWaitMs: options.shortWaitMs ?? MIN_SHORT_WAIT_MS,
      lateToleranceMs: options.lateToleranceMs ?? 0,
      spacingMs: this.spacingMs,
      clock: this.clock,
      estimator: this.estimator,
      keyed: keys !== undefined,
      ...(limiter && backfill
        ? {
            backfill: new BackfillShare({
              limiter,
              key,
              cap: { limiter: backfill.limiter, key: backfill.key ?? backfillItemKey(key) },
              clock: this.clock,
              spacingMs: this.spacingMs,
            }),
          }
        : {}),
    };
    this.parts = {
      clock: this.clock,
      sleep: options.sleep ?? realSleep,
      lateToleranceMs: this.slotSettings.lateToleranceMs,
      wakeToleranceMs: () => this.estimator.wakeToleranceMs(this.slotSettings.lateToleranceMs),
      gate: keys && new KeyRateGate(keys),
      leases: keyConcurrency && new KeyLeases(keyConcurrency),
      feedback: new RateFeedbackReporter({
        key,
        ...(options.rateFeedback ? { rate: options.rateFeedback } : {}),
        ...(keys ? { keys } : {}),
      }),
    };
  }

  recordCycle(ms: number): void {
    this.estimator.record(ms);
  }

  recordClaim(ms: number): void {
    this.estimator.recordClaim(ms);
  }

  paceMs(): number {
    return this.estimator.paceMs();
  }

  begin(remainingMs: () => number): InvocationPacing {
    const reserveMs = this.options.reserveMs ?? Math.min(DEFAULT_RESERVE_MS, Math.floor(remainingMs() / 4));
    return new LimiterInvocation(this.parts, new SlotPool(this.slotSettings, remainingMs, reserveMs), remainingMs);
  }
}

/** One invocation on a LimiterPacer: its slot pool, and the outcomes it heard. */
class LimiterInvocation implements InvocationPacing {
  private readonly signals = new RateSignals();

  constructor(
    private readonly parts: StartParts,
    private readonly pool: SlotPool,
    private readonly remainingMs: () => number,
  ) {}

  get paced(): boolean {
    return this.pool.paced;
  }

  get key(): string {
    return this.pool.key;
  }

  get runLeft(): number {
    return this.pool.runLeft;
  }

  set runLeft(value: number) {
    this.pool.runLeft = value;
  }

  backfillGated(): Promise<boolean> {
    return this.pool.backfillGated();
  }

  usableBlock(): number {
    return this.pool.usableBlock();
  }

  acquireBlock(count: number, priority: SlotPriority): Promise<{ granted: number; waitMs: number }> {
    return this.pool.acquireBlock(count, priority);
  }

  /**
   * The late-start rule: a record never starts later than the tolerance after its slot. A start that late could join
   * the next window's starts as the provider sees them (the limiter's margin absorbs only so much); so a record woken
   * past it gives the slot up and takes a new one, up to MAX_LATE_RETAKES times, then waits in the queue instead.
   */
  async start(record: PacedRecord): Promise<StartAnswer> {
    for (let retakes = 0; ; retakes++) {
      const answer = await this.startOnce(record);
      if (answer !== 'late') return answer;
      if (retakes >= MAX_LATE_RETAKES) return { waitMs: 0 };
    }
  }

  /** A slot, the key's lease and token for it, and the wait until it; 'late' when the wait woke past the tolerance. */
  private async startOnce(record: PacedRecord): Promise<StartAnswer | 'late'> {
    const { pool } = this;
    const { clock, gate, leases, wakeToleranceMs, sleep } = this.parts;
    const slot = record.behindLive ? await pool.nextBackfill() : await pool.next(record.priority);
    if (!('startAtMs' in slot)) return { waitMs: slot.waitMs };
    let end = async () => {};
    if (leases && record.key !== undefined) {
      // The lease first: it is the one given back when the key's rate then refuses the start.
      const leased = await leases.take(record.key, clock() + this.remainingMs());
      if (!('lease' in leased)) {
        pool.putBack(slot.startAtMs);
        return { waitMs: leased.waitMs };
      }
      end = () => leases.give(leased.lease);
    }
    let startAtMs = slot.startAtMs;
    if (gate && record.key !== undefined) {
      // The key's token is for the job-wide slot's very moment, so both limits hold for the start. A busy key defers
      // its record by its place in the key's queue; the gate has given the slot back for the next record's key.
      const answer = await gate.answer(record.key, startAtMs, pool, record.priority);
      if (!answer.granted) {
        await end();
        return { waitMs: answer.waitMs };
      }
      startAtMs = answer.startAtMs;
    }
    // Short waits only (the block was bounded by the short wait and the remaining time). Pacing off: "now" is not a
    // slot to be late for.
    const readyAtMs = clock();
    if (pool.paced && !(await waitForSlot(startAtMs, wakeToleranceMs(), clock, sleep))) {
      // Starting now would bunch this start with the slots after it: the slot is lost, unclaimed.
      const lateByMs = clock() - startAtMs;
      logger.warn('woke too late for the rate-limit slot; taking a new one', { startAtMs, lateByMs });
      await end();
      return 'late';
    }
    return { start: this.started(startAtMs, readyAtMs, end) };
  }

  private started(startAtMs: number, readyAtMs: number, end: () => Promise<void>): PacedStart {
    const { pool } = this;
    const { clock, lateToleranceMs } = this.parts;
    return {
      startAtMs,
      readyAtMs,
      // The claim's write comes between the slot and the downstream call. The window's margin is the whole budget
      // from a slot to its arrival at the provider: half of it (the late tolerance) for the wake and the claim, the
      // other half for the request's way there. (Checking at the whole margin here, as before, left the request
      // nothing: the backlog bench saw 81 starts in a window of 80.)
      missed: () => pool.paced && clock() - startAtMs > lateToleranceMs,
      use: () => pool.markUsed(),
      giveBack: () => pool.giveBack(startAtMs),
      end,
    };
  }

  report(key: string | undefined, outcome: PacedOutcome): void {
    this.signals.add(key, outcome);
  }

  finish(): Promise<void> {
    return this.parts.feedback.report(this.signals);
  }

  unused(): number {
    return this.pool.unused();
  }
}

/**
 * Set by the stack for each consumer's bundle (lib/paced-job.ts): whether its job uses per-key rate limits and per-key
 * concurrency. A bundle built for a job without them leaves their code out (esbuild drops the branch that is false);
 * anywhere else (tests, the local runtime from source) both are in.
 */
declare const PACED_PER_KEY_RATE: boolean | undefined;
declare const PACED_PER_KEY_CONCURRENCY: boolean | undefined;

/** The consumer's pacer from the job's pacing settings (their numbers only), on the limiter table. */
export function pacerFromSettings(paced: PacingSettings, tableName: string, jobName: string): LimiterPacer {
  const { limits, leadMs, limiterKey, perKey, concurrencyPerKey } = paced;
  const limiter = paced.enabled ? new AdaptiveDynamoDbRateLimiter({ tableName, limits, leadMs }) : undefined;
  const { safetyMarginMs } = limits;
  // The flags tested inline, so esbuild sees a constant condition and drops the branch a bundle does not need.
  const keys =
    (typeof PACED_PER_KEY_RATE === 'undefined' || PACED_PER_KEY_RATE) && paced.enabled && perKey
      ? new KeyRateLimiter({
          tableName,
          job: jobName,
          limiterKey,
          perKey,
          adaptive: paced.adaptiveRate,
          safetyMarginMs,
        })
      : undefined;
  const keyConcurrency =
    (typeof PACED_PER_KEY_CONCURRENCY === 'undefined' || PACED_PER_KEY_CONCURRENCY) && concurrencyPerKey
      ? new KeyConcurrencyLimiter({
          tableName,
          limiterKey,
          field: concurrencyPerKey.field,
          maxConcurrent: concurrencyPerKey.maxConcurrent,
        })
      : undefined;
  const backfillCap = paced.enabled ? backfillLimits(limits, paced.backfillShare) : undefined;
  const backfill = backfillCap && new DynamoDbRateLimiter({ tableName, limits: backfillCap, leadMs });
  return new LimiterPacer({
    key: limiterKey,
    limiter,
    ...(paced.adaptiveRate && limiter ? { rateFeedback: limiter } : {}),
    ...(keys ? { keys } : {}),
    ...(keyConcurrency ? { keyConcurrency } : {}),
    ...(backfill ? { backfill: { limiter: backfill } } : {}),
    shortWaitMs: paced.shortWaitMs,
    lateToleranceMs: paced.lateToleranceMs,
    spacingMs: gcraLimits(limits).emissionIntervalUs / 1000,
  });
}
