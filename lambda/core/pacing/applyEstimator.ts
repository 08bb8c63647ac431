// How fast a container reaches its rate-limit slots: its recent record cycles (each apply, with the container's time
// since the previous apply ended, slot waits excluded), and from them how many slots of one block it can start on
// time, and its usual pace. Pure: the consumer feeds it durations.

/** Apply durations a container remembers for sizing its blocks. @default 20 */
export const APPLY_SAMPLES = 20;

/**
 * The share of a block's slots a container may expect to lose behind its own slow records (see
 * ApplyTimeEstimator.overrunBlock). A smaller block costs a limiter write more every few records; a lost slot is the
 * provider's quota, which a night's backlog is bound by. So blocks shrink only where records overrun often, and the
 * write units a job pays stay those of one block per batch while its provider behaves.
 */
export const MAX_BLOCK_LOSS_SHARE = 0.1;

/** overrunBlock looks no further: a block this large is as good as unbounded. */
const MAX_OVERRUN_BLOCK = 10_000;

export class ApplyTimeEstimator {
  private readonly samples: number[] = [];
  private readonly claims: number[] = [];

  constructor(private readonly capacity: number = APPLY_SAMPLES) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }

  /** One apply's duration, in ms; the oldest is forgotten past the capacity. */
  record(ms: number): void {
    this.remember(this.samples, ms);
  }

  /**
   * One claim's duration, in ms: from a record's turn to its downstream call being allowed (the idempotency write that
   * comes between them). A start's lateness is checked after its claim, so a block is sized with the claim still to come.
   */
  recordClaim(ms: number): void {
    this.remember(this.claims, ms);
  }

  private remember(samples: number[], ms: number): void {
    samples.push(ms);
    if (samples.length > this.capacity) samples.shift();
  }

  /**
   * The 90th percentile of the recent applies (0 before the first), not the mean: one slow apply in a block loses every
   * slot that passes during it, so blocks are sized for the slow tail (a provider's latency spikes, SDK retries).
   */
  estimateMs(): number {
    return percentile(this.samples, 0.9);
  }

  /** The 90th percentile of the recent claims (0 before the first). */
  claimMs(): number {
    return percentile(this.claims, 0.9);
  }

  /**
   * The pace a container usually keeps from one start to the next: the 75th percentile of the recent applies (0 before
   * the first), which a few hangs do not move (the consumer times how long a record may hold its message by it).
   */
  paceMs(): number {
    return percentile(this.samples, 0.75);
  }

  /**
   * Slots a container can start on time in one block. Records run one after another, so when an apply takes longer
   * than the slot spacing, each later slot of a block is reached that much later; a slot reached past the late
   * tolerance is lost to the whole fleet (the limiter counted it). Taking only what can be used keeps the fleet's
   * starts at the allowance instead of at the allowance minus the missed slots. A start is checked after its claim, so
   * the last slot must be reached with the claim's time still to spare: sized by the tolerance alone, a container's
   * last slots of each block were reached on time and lost behind the claim (40 of 400 uploads deferred at 126-174 ms
   * late against a 125 ms tolerance). Unbounded while applies are quicker than the spacing.
   */
  usableBlock(spacingMs: number, lateToleranceMs: number): number {
    const lag = this.estimateMs() - spacingMs;
    if (lag <= 0) return Number.POSITIVE_INFINITY;
    return 1 + Math.floor(this.wakeToleranceMs(lateToleranceMs) / lag);
  }

  /**
   * How late a record may wake for its slot and still start on it: the late tolerance less its claim (p90), which
   * comes between the wake and the check that counts. A start woken later takes the next slot now rather than claim,
   * find itself late and be deferred (a re-publish, and a claim written and released for nothing). Never less than
   * half the tolerance: claims slower than that (a loaded table) would leave no wake on time at all, and every record
   * would retake and be deferred; past half, a claim that runs late is caught after it, as before.
   */
  wakeToleranceMs(lateToleranceMs: number): number {
    return Math.max(lateToleranceMs / 2, lateToleranceMs - this.claimMs());
  }

  /**
   * Slots a container takes in one block of slots `spacingMs` apart: what it reaches on time by its usual lag
   * (usableBlock), and no more than its slow tail allows (overrunBlock). The consumer's slot pool and the pacing bench
   * both size blocks by it.
   */
  blockSize(spacingMs: number, lateToleranceMs: number): number {
    return Math.min(this.usableBlock(spacingMs, lateToleranceMs), this.overrunBlock(spacingMs, lateToleranceMs));
  }

  /**
   * Slots a container may take in one block whose slots come `gapMs` apart (the key's spacing), by its slow tail rather
   * than its usual lag (usableBlock). Records run one after another, so a record that runs long
   * loses every later slot of its block that passes meanwhile (starting late would bunch the fleet's starts): a record
   * of `d` ms loses the slots more than the late tolerance behind its end, ceil((d - tolerance) / gap) - 1 of them, as
   * far as the block reaches. A slow call, a hang held to the provider's timeout or a stalled claim thus loses up to the
   * rest of its block, and those slots are the fleet's.
   *
   * The block is the largest whose expected loss, by the recent records (each equally likely at each place of the
   * block), is at most `maxLossShare` of its slots, and at least one: unbounded while the container's records keep its
   * pace, a few slots for a container whose records overrun often (a faulty provider), so most of its allowance stays
   * with the limiter item for the fleet's other containers, at the price of a limiter write every few records.
   */
  overrunBlock(gapMs: number, lateToleranceMs: number, maxLossShare: number = MAX_BLOCK_LOSS_SHARE): number {
    if (!(maxLossShare > 0)) throw new RangeError(`maxLossShare must be above 0, got ${maxLossShare}`);
    if (this.samples.length === 0 || gapMs <= 0) return Number.POSITIVE_INFINITY;
    const losses = this.samples.map((ms) => Math.max(0, Math.ceil((ms - lateToleranceMs) / gapMs) - 1));
    const meanLoss = losses.reduce((sum, l) => sum + l, 0) / losses.length;
    // The expected share lost, for a block of b slots: the mean over its places k = 1..b of what a record there loses,
    // at most the b - k slots after it. It rises with b towards meanLoss, so a mean within the share never exceeds it.
    if (meanLoss <= maxLossShare) return Number.POSITIVE_INFINITY;
    // Summed over the samples (whole slots), so the comparison is exact where the share is met to the slot.
    let lost = 0;
    for (let b = 1; b <= MAX_OVERRUN_BLOCK; b++) {
      // A block of b has one record more than a block of b - 1, at the front, with b - 1 slots after it.
      lost += losses.reduce((sum, l) => sum + Math.min(l, b - 1), 0);
      if (lost > maxLossShare * b * losses.length + 1e-9) return b - 1;
    }
    return MAX_OVERRUN_BLOCK;
  }
}

/** The p-th percentile of `samples` (0 for none). */
function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return 0;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.ceil(p * sorted.length) - 1];
}
