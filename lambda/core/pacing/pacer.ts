// The port the consumer paces itself through (#36): it plans a batch's block of slots, starts each record (its slot,
// its key's token, its key's lease, the wait) and hears each outcome. No AWS here: the adapter that composes the
// limiters is lambda/handlers/consumer/limiterPacer.ts, and tests give the consumer a fake.

/** Whose record a slot is for: a live one stamps the limiter item, so backfill knows live work waits. */
export type SlotPriority = 'live' | 'backfill';

/** What the downstream made of a started record: rates follow throttles and successes; a failure moves none. */
export type PacedOutcome = 'success' | 'throttle' | 'failure';

/** A record asking to start: its per-key limits' key, whose slot it is, whether it takes only what live work left. */
export interface PacedRecord {
  key?: string;
  priority: SlotPriority;
  /** A backfill record while live work waits: only a slot free now, and within backfill's cap. */
  behindLive?: boolean;
}

/** A record cleared to start now: its slot has come, its key has a token and a lease (when the job limits keys). */
export interface PacedStart {
  /** The slot the record starts at, on the pacer's clock. */
  readonly startAtMs: number;
  /** When the record was ready to start, before it waited for its slot (the wait is not the container's work). */
  readonly readyAtMs: number;
  /** Whether the start has drifted past what its slot allows (checked again once the claim is held). */
  missed(): boolean;
  /** A downstream call starts on the slot. */
  use(): void;
  /** The call was not made after all (answered at the claim): the slot is free for the next record. */
  giveBack(): void;
  /** The record has ended: its key's lease, if it holds one, is given back. */
  end(): Promise<void>;
}

/** A start, or how long the record should wait in the queue (it is deferred by it, unclaimed). */
export type StartAnswer = { start: PacedStart } | { waitMs: number };

/** One invocation's pacing: its block, its records' starts, the outcomes it heard. */
export interface InvocationPacing {
  /** False: pacing is off; every record starts now and there is no slot to be late for. */
  readonly paced: boolean;
  /** The limiter key the slots are on (for log lines). */
  readonly key: string;
  /** Records planned to run and not yet started: a refill takes no more than they can use. */
  runLeft: number;
  /** Whether backfill must go behind live work now (the backfill share is below 1 and live work waits). */
  backfillGated(): Promise<boolean>;
  /** Slots this container can start on time in one block. */
  usableBlock(): number;
  /**
   * The invocation's block: up to `count` slots within the longest wait, kept for the records as they start.
   * @throws the limiter's error (LimiterContentionError when the item is hot); nothing is granted then
   */
  acquireBlock(count: number, priority: SlotPriority): Promise<{ granted: number; waitMs: number }>;
  /** Waits until the record may start, or says how long it should wait in the queue instead. */
  start(record: PacedRecord): Promise<StartAnswer>;
  /** What the downstream made of a started record's call. */
  report(key: string | undefined, outcome: PacedOutcome): void;
  /** At the invocation's end: the outcomes heard go to the adaptive rates; never throws. */
  finish(): Promise<void>;
  /** Slots granted and never started on: allowance the fleet lost. */
  unused(): number;
}

/** What planning a batch's block needs of the invocation's pacing (consumer/planner.ts). */
export type BlockPacing = Pick<InvocationPacing, 'paced' | 'key' | 'backfillGated' | 'usableBlock' | 'acquireBlock'>;

export interface Pacer {
  /** The resource field records are keyed on (per-key rate or concurrency), when the job has one. */
  readonly keyField?: string;
  /** The expected spacing between starts: deferrals past the grant are spread by it. */
  readonly spacingMs: number;
  /** The clock the slots are on, epoch ms. */
  readonly clock: () => number;
  /** One invocation's pacing, bounded by its remaining time (Context.getRemainingTimeInMillis). */
  begin(remainingMs: () => number): InvocationPacing;
  /** One record's cycle, from the previous apply's end (less its slot wait) to its own apply's end. */
  recordCycle(ms: number): void;
  /** One record's claim, from its turn to its downstream call being allowed: blocks leave room for it. */
  recordClaim(ms: number): void;
  /** The container's pace (75th percentile of its cycles; 0 before any): how long a record's turn usually takes. */
  paceMs(): number;
}
