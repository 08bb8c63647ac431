// Local runtime, SQS: startSqs (local/servers.ts) hands every standard queue of the embedded local-aws-sqs server to
// emulateFairQueue, so a ReceiveMessage delivers as an Amazon SQS fair queue would. Emulated behaviour, from "How Amazon
// SQS fair queues work" (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-fair-queues-detailed.html):
//   - a tenant is a MessageGroupId; each message without one is a tenant of its own;
//   - a tenant is noisy when its concurrency share (its in-flight messages over the queue's) is over 10% with at least
//     30 of its own in flight, or its recent share of consumer processing time (receive to delete) is over 10% (here
//     also over twice the others' mean share, once the queue has had 30 recent deliveries: see `disproportionate`);
//   - while a tenant is noisy, receives return quiet tenants' messages whenever some are available, else noisy ones as
//     usual (never dropped, never throttled); among noisy tenants, the one with the fewest in flight first;
//   - a tenant stops being noisy when its backlog is drained or it has sent nothing for 5 minutes.
// FIFO queues are left alone: there MessageGroupId means ordering.
//
// Hand-written on purpose: no library emulates fair queues. The SQS emulators at most accept MessageGroupId on a standard
// queue (ElasticMQ #1137, LocalStack #12898, moto #9146, fauxqs #263) and still deliver it first in, first out. This leans
// on local-aws-sqs 2.0.2's internals, read from its bundle:
//   - the queue keeps each message as an entry { visible, delayed, record, tm, tmRetention } in a private array that its
//     receive walks in order, taking every entry that is not `delayed` and is `visible`. The array cannot be reordered
//     from outside, and "receive more, release the rest" would raise ApproximateReceiveCount (and dead-letter messages
//     early), so instead each entry's `delayed` becomes an accessor that answers true, to that walk only, for a noisy
//     tenant's message while a better tenant has one available: the walk skips it untouched and it stays in place;
//   - every entry is made by the instance's own `newRecord` (sends, redrives into a DLQ, message move tasks), where it
//     is wrapped; its `visible` and `delayed` setters are the only state changes, and every way out of the array (delete,
//     retention, redrive to the DLQ, purge) reads `tmRetention` to clear its timer: that read is the removal signal;
//   - GetQueueAttributes (and the move task, through it) count entries by the same `delayed` flag, so the accessor tells
//     the truth while getAttributes runs: depths stay exactly the library's, nothing is held outside it.
// local-aws-sqs already accepts MessageGroupId on a standard queue (SendMessage and SendMessageBatch check only its
// characters) and returns it as an attribute, as AWS does for fair queues.

export interface FairQueueSettings {
  /** Concurrency share over which a tenant with `minInFlight` messages in flight is noisy. @default 0.1 */
  concurrencyShare: number;
  /** @default 30 */
  minInFlight: number;
  /** Recent processing-time share over which a tenant is noisy (see `processingShare` in the figures). @default 0.1 */
  processingShare: number;
  /**
   * Recent deliveries (weighted like processing time) the queue needs before processing-time shares count: a share of a
   * handful of messages says nothing (one message would be 100%), the same reason AWS asks 30 in flight. @default 30
   */
  minRecentDeliveries: number;
  /** What "recent" means: the time constant of the exponential weighting of processing time and deliveries. @default 60000 */
  recentMs: number;
  /** A tenant that sent nothing for this long is quiet whatever its shares. @default 300000 (AWS: 5 minutes) */
  quietAfterIdleMs: number;
  /**
   * The clock of idle times and processing time (epoch ms): a test moves it on instead of waiting out the real one.
   * @default Date.now
   */
  now: () => number;
}

export const FAIR_QUEUE_DEFAULTS: Readonly<FairQueueSettings> = {
  concurrencyShare: 0.1,
  minInFlight: 30,
  processingShare: 0.1,
  minRecentDeliveries: 30,
  recentMs: 60_000,
  quietAfterIdleMs: 5 * 60_000,
  now: () => Date.now(),
};

export interface FairTenantFigures {
  group: string;
  /** Visible: can be received now. */
  available: number;
  delayed: number;
  inFlight: number;
  /** Its in-flight messages over the queue's. */
  concurrencyShare: number;
  /** Its share of the queue's recent consumer time (time its messages spent in flight, exponentially weighted). */
  processingShare: number;
  noisy: boolean;
}

export interface FairQueueFigures {
  queueName: string;
  /** All in-flight messages of the queue, with and without MessageGroupId. */
  inFlight: number;
  /** Deliveries lately, weighted as processing time is (compare `minRecentDeliveries`). */
  recentDeliveries: number;
  /** Groups noisy right now, fewest in flight first (the order they are served in when no quiet message waits). */
  noisy: string[];
  tenants: FairTenantFigures[];
  /** Messages without MessageGroupId (each its own tenant, never noisy: it has at most one message). */
  ungrouped: { available: number; delayed: number; inFlight: number };
  /**
   * Walks that skipped a noisy tenant's message yet delivered nothing: only possible if this module's counts went wrong.
   * The next walk then skips nothing, so a receive never comes back empty while messages wait. Tests expect 0.
   */
  countMismatches: number;
}

/** The part of a local-aws-sqs queue entry this module reads and rewires. */
interface LibraryEntry {
  visible: boolean;
  delayed: boolean;
  tmRetention?: unknown;
  record: { MessageId: string; attributes: Record<string, string | undefined> };
}

/** The part of a local-aws-sqs queue this module patches. */
export interface FairQueueTarget {
  QueueName: string;
  FifoQueue: boolean;
  newRecord(record: unknown, delaySeconds: number): LibraryEntry;
  getAttributes(names: string[]): Record<string, string> | undefined;
}

type Place = 'delayed' | 'available' | 'inFlight' | 'gone';

class Tenant {
  available = 0;
  delayed = 0;
  inFlight = 0;
  /** Consumer time (ms) its messages spent in flight, exponentially weighted; exact as of `timeAt`. */
  time = 0;
  timeAt: number;
  lastSentAt: number;

  constructor(
    readonly group: string | undefined,
    now: number,
  ) {
    this.timeAt = now;
    this.lastSentAt = now;
  }

  get live(): number {
    return this.available + this.delayed + this.inFlight;
  }

  /**
   * Brings `time` to `now`: with k messages in flight it grows at k ms per ms and decays with constant tau, so the
   * closed form is exact between changes of k and costs O(1), however many messages are in flight.
   */
  advance(now: number, tau: number): void {
    const dt = now - this.timeAt;
    if (dt <= 0) return;
    const steady = this.inFlight * tau;
    this.time = steady + (this.time - steady) * Math.exp(-dt / tau);
    this.timeAt = now;
  }

  add(place: Place, n: number): void {
    if (place === 'available') this.available += n;
    else if (place === 'delayed') this.delayed += n;
    else if (place === 'inFlight') this.inFlight += n;
  }
}

interface Standing {
  tenant: Tenant;
  concurrencyShare: number;
  processingShare: number;
  noisy: boolean;
}

const placeOf = (visible: boolean, delayed: boolean): Place =>
  !visible ? 'inFlight' : delayed ? 'delayed' : 'available';

class FairQueue {
  private readonly tenants = new Map<string, Tenant>();
  private readonly ungrouped: Tenant;
  private available = 0;
  private inFlight = 0;
  private deliveries = 0;
  private deliveriesAt: number;
  /** Inside getAttributes: entries tell their true `delayed`. */
  private exact = 0;
  /** The walk (one synchronous pass of the library's receive over its entries) under way, if any. */
  private walk: { hidden: ReadonlySet<string>; hid: number; delivered: number } | undefined;
  private skipNextHiding = false;
  countMismatches = 0;

  constructor(
    readonly queue: FairQueueTarget,
    private readonly settings: FairQueueSettings,
  ) {
    const now = this.settings.now();
    this.ungrouped = new Tenant(undefined, now);
    this.deliveriesAt = now;
  }

  patch(): void {
    const ownNewRecord = this.queue.newRecord;
    const ownAttributes = this.queue.getAttributes.bind(this.queue);
    this.queue.newRecord = (record, delaySeconds) => {
      const entry = ownNewRecord(record, delaySeconds);
      this.track(entry);
      return entry;
    };
    this.queue.getAttributes = (names) => {
      this.exact++;
      try {
        return ownAttributes(names);
      } finally {
        this.exact--;
      }
    };
  }

  private track(entry: LibraryEntry): void {
    const now = this.settings.now();
    const group = entry.record.attributes.MessageGroupId || undefined;
    let tenant = this.ungrouped;
    if (group !== undefined) {
      tenant = this.tenants.get(group) ?? new Tenant(group, now);
      this.tenants.set(group, tenant);
      tenant.lastSentAt = now;
    }
    let { visible, delayed } = entry;
    let retention = entry.tmRetention;
    let place = placeOf(visible, delayed);
    this.shift(tenant, 'gone', place);
    const settle = () => {
      if (place === 'gone') return; // a removed message's delay timer still fires
      const next = placeOf(visible, delayed);
      if (next !== place) this.shift(tenant, place, next);
      place = next;
    };
    // Not enumerable (said outright: a redefined property keeps its old attributes): the library's receive copies an
    // entry with a for-in, whose read of tmRetention must not count as a removal.
    const unlisted = { configurable: true, enumerable: false };
    Object.defineProperties(entry, {
      visible: {
        ...unlisted,
        get: () => visible,
        set: (v: boolean) => {
          visible = v;
          settle();
        },
      },
      delayed: {
        ...unlisted,
        get: () => delayed || this.skips(group, visible),
        set: (v: boolean) => {
          delayed = v;
          settle();
        },
      },
      tmRetention: {
        ...unlisted,
        get: () => {
          if (place !== 'gone') this.shift(tenant, place, 'gone');
          place = 'gone';
          return retention;
        },
        set: (v: unknown) => {
          retention = v;
        },
      },
    });
  }

  private shift(tenant: Tenant, from: Place, to: Place): void {
    const now = this.settings.now();
    const tau = this.settings.recentMs;
    if ((from === 'inFlight') !== (to === 'inFlight')) tenant.advance(now, tau);
    tenant.add(from, -1);
    tenant.add(to, 1);
    if (from === 'available') this.available--;
    if (to === 'available') this.available++;
    if (from === 'inFlight') this.inFlight--;
    if (to === 'inFlight') {
      this.inFlight++;
      this.deliveries = this.recentDeliveries(now) + 1;
      this.deliveriesAt = now;
      if (from === 'available' && this.walk) this.walk.delivered++;
    }
  }

  private recentDeliveries(now: number): number {
    return this.deliveries * Math.exp(-Math.max(0, now - this.deliveriesAt) / this.settings.recentMs);
  }

  /**
   * Whether the walk under way skips this message (only ever a visible one of a noisy group). The first read of a walk
   * decides for all of it (the walk is synchronous, so a microtask marks its end): a decision taken mid-walk, after quiet
   * messages were taken, would let a noisy tenant's later messages overtake its earlier ones already skipped.
   */
  private skips(group: string | undefined, visible: boolean): boolean {
    if (this.exact) return false;
    if (!this.walk) {
      const walk = { hidden: this.skipNextHiding ? new Set<string>() : this.decide(), hid: 0, delivered: 0 };
      this.skipNextHiding = false;
      this.walk = walk;
      queueMicrotask(() => {
        this.walk = undefined;
        if (walk.hid > 0 && walk.delivered === 0) {
          this.countMismatches++;
          this.skipNextHiding = true;
        }
      });
    }
    const hidden = visible && group !== undefined && this.walk.hidden.has(group);
    if (hidden) this.walk.hid++;
    return hidden;
  }

  /** The noisy groups whose messages this walk skips: all while a quiet message is available, else all but the first. */
  private decide(): Set<string> {
    const waiting = this.standings().filter((s) => s.noisy && s.tenant.available > 0);
    if (waiting.length === 0) return new Set();
    const noisyAvailable = waiting.reduce((sum, s) => sum + s.tenant.available, 0);
    const skipped = this.available > noisyAvailable ? waiting : waiting.slice(1);
    return new Set(skipped.map((s) => s.tenant.group!));
  }

  /** Every group's shares and whether it is noisy, fewest in flight first; forgets groups that no longer matter. */
  private standings(): Standing[] {
    const now = this.settings.now();
    const s = this.settings;
    let totalTime = 0;
    for (const t of [...this.tenants.values(), this.ungrouped]) {
      t.advance(now, s.recentMs);
      totalTime += t.time;
    }
    for (const [group, t] of this.tenants) {
      // Bounds the work of a walk by the groups with messages, plus the few still holding a share worth weighing.
      if (t.live === 0 && t.time <= 0.01 * totalTime) this.tenants.delete(group);
    }
    const processingCounts = this.recentDeliveries(now) >= s.minRecentDeliveries && totalTime > 0;
    const standings: Standing[] = [];
    for (const t of this.tenants.values()) {
      const concurrencyShare = this.inFlight > 0 ? t.inFlight / this.inFlight : 0;
      const processingShare = totalTime > 0 ? t.time / totalTime : 0;
      const byConcurrency = t.inFlight >= s.minInFlight && concurrencyShare > s.concurrencyShare;
      const byProcessing =
        processingCounts && processingShare > s.processingShare && this.disproportionate(processingShare);
      const backlog = t.available + t.delayed;
      const sending = now - t.lastSentAt < s.quietAfterIdleMs;
      standings.push({
        tenant: t,
        concurrencyShare,
        processingShare,
        noisy: backlog > 0 && sending && (byConcurrency || byProcessing),
      });
    }
    return standings.sort(
      (a, b) =>
        a.tenant.inFlight - b.tenant.inFlight ||
        a.tenant.time - b.tenant.time ||
        (a.tenant.group! < b.tenant.group! ? -1 : 1),
    );
  }

  /**
   * Over twice the mean share of the other tenants. AWS's 10% alone would flag every tenant of a queue with nine or
   * fewer evenly served ones (each holds over 10%), where AWS speaks of "a disproportionate share" and of returning to
   * levels "comparable with quiet tenants"; an even split never passes this, one tenant taking most of the time does.
   */
  private disproportionate(share: number): boolean {
    const others = this.tenants.size - 1 + this.ungrouped.live;
    return others > 0 && share > (2 * (1 - share)) / others;
  }

  figures(): FairQueueFigures {
    const standings = this.standings();
    return {
      queueName: this.queue.QueueName,
      inFlight: this.inFlight,
      recentDeliveries: this.recentDeliveries(this.settings.now()),
      noisy: standings.filter((s) => s.noisy).map((s) => s.tenant.group!),
      tenants: standings.map(({ tenant: t, concurrencyShare, processingShare, noisy }) => ({
        group: t.group!,
        available: t.available,
        delayed: t.delayed,
        inFlight: t.inFlight,
        concurrencyShare,
        processingShare,
        noisy,
      })),
      ungrouped: {
        available: this.ungrouped.available,
        delayed: this.ungrouped.delayed,
        inFlight: this.ungrouped.inFlight,
      },
      countMismatches: this.countMismatches,
    };
  }
}

const FAIR = Symbol('emulates an SQS fair queue');
type Patched = FairQueueTarget & { [FAIR]?: FairQueue | null };

/**
 * Makes a local-aws-sqs standard queue deliver as an SQS fair queue (idempotent; a FIFO queue is left as it is). Must
 * run before the queue holds messages: entries made earlier are not tracked (and never reordered).
 */
export function emulateFairQueue(queue: FairQueueTarget, settings: Partial<FairQueueSettings> = {}): void {
  const patched = queue as Patched;
  if (patched[FAIR] !== undefined) return;
  if (queue.FifoQueue) {
    patched[FAIR] = null;
    return;
  }
  const fair = new FairQueue(queue, { ...FAIR_QUEUE_DEFAULTS, ...settings });
  fair.patch();
  patched[FAIR] = fair;
}

/** The queue's tenants and which are noisy now; undefined for a queue not emulated (FIFO, or never patched). */
export function fairQueueFigures(queue: FairQueueTarget): FairQueueFigures | undefined {
  return (queue as Patched)[FAIR]?.figures();
}
