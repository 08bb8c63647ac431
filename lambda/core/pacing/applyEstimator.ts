// How fast a container reaches its rate-limit slots: its recent record cycles (each apply, with the container's time
// since the previous apply ended, slot waits excluded), and from them how many slots of one block it can start on
// time, and its usual pace. Pure: the consumer feeds it durations.

/** Apply durations a container remembers for sizing its blocks. @default 20 */
export const APPLY_SAMPLES = 20;

export class ApplyTimeEstimator {
  private readonly samples: number[] = [];

  constructor(private readonly capacity: number = APPLY_SAMPLES) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }

  /** One apply's duration, in ms; the oldest is forgotten past the capacity. */
  record(ms: number): void {
    this.samples.push(ms);
    if (this.samples.length > this.capacity) this.samples.shift();
  }

  /**
   * The 90th percentile of the recent applies (0 before the first), not the mean: one slow apply in a block loses every
   * slot that passes during it, so blocks are sized for the slow tail (a provider's latency spikes, SDK retries).
   */
  estimateMs(): number {
    return this.percentile(0.9);
  }

  private percentile(p: number): number {
    if (this.samples.length === 0) return 0;
    const sorted = [...this.samples].sort((a, b) => a - b);
    return sorted[Math.ceil(p * sorted.length) - 1];
  }

  /**
   * The pace a container usually keeps from one start to the next: the 75th percentile of the recent applies (0 before
   * the first), which a few hangs do not move (the consumer times how long a record may hold its message by it).
   */
  paceMs(): number {
    return this.percentile(0.75);
  }

  /**
   * Slots a container can start on time in one block. Records run one after another, so when an apply takes longer
   * than the slot spacing, each later slot of a block is reached that much later; a slot reached past the late
   * tolerance is lost to the whole fleet (the limiter counted it). Taking only what can be used keeps the fleet's
   * starts at the allowance instead of at the allowance minus the missed slots. Unbounded while applies are quicker
   * than the spacing.
   */
  usableBlock(spacingMs: number, lateToleranceMs: number): number {
    const lag = this.estimateMs() - spacingMs;
    return lag <= 0 ? Number.POSITIVE_INFINITY : 1 + Math.floor(lateToleranceMs / lag);
  }
}
