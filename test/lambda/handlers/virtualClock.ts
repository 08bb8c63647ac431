// Virtual time for the paced consumer's component tests. The consumer and its limiters read `now` and wait with `sleep`
// (LimiterPacerOptions, the limiters' `clock`); given this clock's, pacing runs on virtual time while the requests
// to the local servers stay real. Jest's fake timers cannot do this: the SDK's real I/O to dynalite runs on timers too.
// A request takes no virtual time, so what a test asserts about starts and windows is exact and the same under any
// load, and a wait costs no real time.

interface Sleeper {
  atMs: number;
  order: number;
  wake: () => void;
}

/**
 * A clock whose time moves only when the code under test sleeps. With one caller, a sleep moves time to its end at
 * once. Callers running concurrently (several containers) are started with `concurrently`: time then moves only when
 * every one of them sleeps, to the earliest wake-up, so none is woken late because another one slept. A caller that
 * never sleeps holds time still: loops that run until a virtual moment must sleep each turn (POLL_GAP_MS).
 */
export class VirtualClock {
  private nowMs: number;
  private readonly sleepers: Sleeper[] = [];
  private running = 0;
  private order = 0;

  constructor(startMs: number = Date.now()) {
    this.nowMs = startMs;
  }

  /** Epoch milliseconds, virtual. */
  readonly now = (): number => this.nowMs;

  /** Resolves when virtual time reaches now + `ms` (at once for 0 or less), as the product's sleep does on real time. */
  readonly sleep = (ms: number): Promise<void> => {
    if (!(ms > 0)) return Promise.resolve();
    return new Promise((wake) => {
      this.sleepers.push({ atMs: this.nowMs + ms, order: this.order++, wake });
      this.moveIfAllAsleep();
    });
  };

  /** Moves time on by `ms` between a test's steps (e.g. past a lease's expiry); sleepers due by then wake, at the new time. */
  advance(ms: number): void {
    const to = this.nowMs + ms;
    while (this.sleepers.length > 0 && this.earliest().atMs <= to) this.wakeEarliest();
    this.nowMs = Math.max(this.nowMs, to);
  }

  /** Runs `tasks` as concurrent callers on this clock (e.g. one per container) and resolves with their results. */
  async concurrently<T>(tasks: (() => Promise<T>)[]): Promise<T[]> {
    this.running += tasks.length;
    return Promise.all(
      tasks.map(async (task) => {
        try {
          return await task();
        } finally {
          this.running--;
          this.moveIfAllAsleep();
        }
      }),
    );
  }

  private earliest(): Sleeper {
    return this.sleepers.reduce((a, b) => (b.atMs < a.atMs || (b.atMs === a.atMs && b.order < a.order) ? b : a));
  }

  private wakeEarliest(): void {
    const next = this.earliest();
    this.sleepers.splice(this.sleepers.indexOf(next), 1);
    this.nowMs = Math.max(this.nowMs, next.atMs);
    next.wake();
  }

  /** One caller outside `concurrently` counts as one: its sleep is the only thing that can move time. */
  private moveIfAllAsleep(): void {
    if (this.sleepers.length > 0 && this.sleepers.length >= Math.max(1, this.running)) this.wakeEarliest();
  }
}

/**
 * The gap between one invocation of a container and its next, as the event source's poll leaves it: a loop that runs
 * invocations until a virtual moment sleeps it each turn, so time moves even when a whole batch was deferred.
 */
export const POLL_GAP_MS = 10;
