import { logger } from '../../../../lambda/adapters/observability';
import type { KeyLease } from '../../../../lambda/adapters/keyConcurrency';
import type { StartAnswer } from '../../../../lambda/core/pacing/pacer';
import {
  LimiterPacer,
  MAX_LATE_RETAKES,
  type LimiterPacerOptions,
} from '../../../../lambda/handlers/consumer/limiterPacer';
import { VirtualClock } from '../virtualClock';
import { FakeLimiter, grant } from './fakes';

const KEY = 'provider';
const TOLERANCE_MS = 50;

let clock: VirtualClock;
/** Extra time each wait oversleeps by, in turn: a container stalled (frozen, a blocked event loop) while it waited. */
let stalls: number[];

function pacer(limiter: FakeLimiter | undefined, overrides: Partial<LimiterPacerOptions> = {}): LimiterPacer {
  return new LimiterPacer({
    key: KEY,
    limiter,
    lateToleranceMs: TOLERANCE_MS,
    spacingMs: 100,
    clock: clock.now,
    sleep: (ms) => clock.sleep(ms + (stalls.shift() ?? 0)),
    ...overrides,
  });
}

const startOf = (answer: StartAnswer) => {
  if (!('start' in answer)) throw new Error(`expected a start, got a wait of ${answer.waitMs} ms`);
  return answer.start;
};

describe('Class: LimiterPacer', () => {
  beforeEach(() => {
    clock = new VirtualClock(1_800_000_000_000);
    stalls = [];
    jest.spyOn(logger, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => jest.restoreAllMocks());

  describe('Method: start (the late-start rule)', () => {
    it('starts at its slot when it wakes on time', async () => {
      const t0 = clock.now();
      const invocation = pacer(new FakeLimiter([grant([t0 + 100])])).begin(() => 60_000);
      await invocation.acquireBlock(1, 'live');
      const start = startOf(await invocation.start({ priority: 'live' }));
      expect(start.startAtMs).toBe(t0 + 100);
      expect(clock.now()).toBe(t0 + 100);
    });

    it('takes a new slot rather than start late when it wakes past the tolerance, never starting later', async () => {
      const t0 = clock.now();
      stalls = [300];
      const limiter = new FakeLimiter([grant([t0 + 100])]);
      const invocation = pacer(limiter).begin(() => 60_000);
      await invocation.acquireBlock(1, 'live');
      // Woken at t0 + 400, 300 ms past its slot: the fresh slot the limiter grants then is the one it starts on.
      limiter.script(grant([t0 + 420]));
      const start = startOf(await invocation.start({ priority: 'live' }));
      expect(start.startAtMs).toBe(t0 + 420);
      expect(clock.now() - start.startAtMs).toBeLessThanOrEqual(TOLERANCE_MS);
      expect(limiter.calls.map((c) => c.count)).toEqual([1, 1]);
      // The passed slot is allowance the fleet lost; the new one is started on.
      start.use();
      expect(invocation.unused()).toBe(1);
    });

    it('leaves its claim time to spare: woken within the tolerance but not within it less the claim, takes a new slot', async () => {
      const t0 = clock.now();
      const paced = pacer(new FakeLimiter([grant([t0 + 100, t0 + 200])]));
      // The container's claims take 20 ms (p90): a start woken 40 ms late would be checked 60 ms late, past 50.
      for (let i = 0; i < 5; i++) paced.recordClaim(20);
      const invocation = paced.begin(() => 60_000);
      await invocation.acquireBlock(2, 'live');
      stalls = [40];
      const start = startOf(await invocation.start({ priority: 'live' }));
      // The first slot (woken at t0 + 140) is given up unclaimed; the second is woken on time.
      expect(start.startAtMs).toBe(t0 + 200);
      expect(clock.now()).toBe(t0 + 200);
      expect(start.missed()).toBe(false);
      // Without claims to come, 40 ms late is within the tolerance: it starts on its slot.
      const quick = pacer(new FakeLimiter([grant([clock.now() + 100])])).begin(() => 60_000);
      await quick.acquireBlock(1, 'live');
      const slot = clock.now() + 100;
      stalls = [40];
      expect(startOf(await quick.start({ priority: 'live' })).startAtMs).toBe(slot);
    });

    it('still starts records woken within half the tolerance when its claims are slower than all of it', async () => {
      const t0 = clock.now();
      const paced = pacer(new FakeLimiter([grant([t0 + 100])]));
      // A loaded table: 200 ms claims against a 50 ms tolerance would leave no wake on time.
      for (let i = 0; i < 5; i++) paced.recordClaim(200);
      const invocation = paced.begin(() => 60_000);
      await invocation.acquireBlock(1, 'live');
      stalls = [20];
      expect(startOf(await invocation.start({ priority: 'live' })).startAtMs).toBe(t0 + 100);
    });

    it(`defers the record, unclaimed, after ${MAX_LATE_RETAKES} new slots it also woke too late for`, async () => {
      const t0 = clock.now();
      stalls = Array(MAX_LATE_RETAKES + 1).fill(1_000);
      const retakes = Array.from({ length: MAX_LATE_RETAKES }, (_, i) => grant([t0 + 1_100 * (i + 1)]));
      const limiter = new FakeLimiter([grant([t0 + 10]), ...retakes]);
      const invocation = pacer(limiter).begin(() => 60_000);
      await invocation.acquireBlock(1, 'live');
      expect(await invocation.start({ priority: 'live' })).toEqual({ waitMs: 0 });
      expect(limiter.calls).toHaveLength(1 + MAX_LATE_RETAKES);
    });

    it("gives back the key's lease of a slot it woke too late for before taking the next", async () => {
      const t0 = clock.now();
      stalls = [300];
      const leases: KeyLease[] = [];
      const released: string[] = [];
      const keyConcurrency = {
        field: 'tenant',
        acquire: async (key: string, expiresAtMs: number) => {
          const lease = { key, leaseId: `l-${leases.length}`, expiresAtMs };
          leases.push(lease);
          return { granted: true as const, lease };
        },
        release: async (lease: KeyLease) => {
          released.push(lease.leaseId);
        },
      };
      const limiter = new FakeLimiter([grant([t0 + 100]), grant([t0 + 420])]);
      const invocation = pacer(limiter, { keyConcurrency }).begin(() => 60_000);
      await invocation.acquireBlock(1, 'live');
      const start = startOf(await invocation.start({ key: 'a', priority: 'live' }));
      expect(released).toEqual(['l-0']);
      await start.end();
      expect(released).toEqual(['l-0', 'l-1']);
    });

    it('starts now, with no slot to be late for, when pacing is off', async () => {
      stalls = [10_000];
      const start = startOf(
        await pacer(undefined)
          .begin(() => 60_000)
          .start({ priority: 'live' }),
      );
      expect(start.startAtMs).toBe(clock.now());
      expect(start.missed()).toBe(false);
    });
  });

  describe('Method: missed', () => {
    it("is true once the start, claim included, has drifted past the tolerance (the other half of the margin is the request's way)", async () => {
      const t0 = clock.now();
      const invocation = pacer(new FakeLimiter([grant([t0])])).begin(() => 60_000);
      await invocation.acquireBlock(1, 'live');
      const start = startOf(await invocation.start({ priority: 'live' }));
      clock.advance(TOLERANCE_MS);
      expect(start.missed()).toBe(false);
      clock.advance(1);
      expect(start.missed()).toBe(true);
    });
  });

  describe('Method: finish', () => {
    it('tells the adaptive rate what the invocation heard', async () => {
      const rateFeedback = { throttled: jest.fn(async () => undefined), succeeded: jest.fn(async () => undefined) };
      const invocation = pacer(undefined, { rateFeedback }).begin(() => 60_000);
      invocation.report(undefined, 'success');
      invocation.report(undefined, 'throttle');
      await invocation.finish();
      expect(rateFeedback.throttled).toHaveBeenCalledWith(KEY, { starts: 2, throttles: 1 });
    });
  });
});
