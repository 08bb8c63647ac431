import { logger } from '../../../../lambda/adapters/observability';
import { LIVE_WAITING_WINDOW_MS } from '../../../../lambda/core/backfill';
import { BackfillShare } from '../../../../lambda/handlers/consumer/backfillShare';
import { FakeLimiter, grant } from './fakes';

const KEY = 'provider';
const CAP_KEY = 'provider#backfill';
const T0 = 1_800_000_000_000;
const SPACING_MS = 100;

/** A share on `limiter` (the job-wide one, whose live stamp is `liveAtMs`) and `cap`. */
function share(limiter: FakeLimiter, cap: FakeLimiter, liveAtMs?: number | Error): BackfillShare {
  const liveAt = async () => {
    if (liveAtMs instanceof Error) throw liveAtMs;
    return liveAtMs;
  };
  const stamped = Object.assign(limiter, { liveAt });
  const capped = { limiter: cap, key: CAP_KEY };
  return new BackfillShare({ limiter: stamped, key: KEY, cap: capped, clock: () => T0, spacingMs: SPACING_MS });
}

/** What the share counted: job-wide slots granted, and slots put back for live records. */
function slots() {
  const counted = { granted: 0, putBack: [] as number[] };
  const granted = () => void counted.granted++;
  const putBack = (at: number) => void counted.putBack.push(at);
  return { counted, slots: { granted, putBack } };
}

describe('Class: BackfillShare', () => {
  beforeEach(() => jest.spyOn(logger, 'warn').mockImplementation(() => undefined));
  afterEach(() => jest.restoreAllMocks());

  describe('Method: gated', () => {
    it('is true while a live start is recent, and false once the live queue has been quiet the window', async () => {
      expect(await share(new FakeLimiter(), new FakeLimiter(), T0 - LIVE_WAITING_WINDOW_MS).gated()).toBe(true);
      expect(await share(new FakeLimiter(), new FakeLimiter(), T0 - LIVE_WAITING_WINDOW_MS - 1).gated()).toBe(false);
      expect(await share(new FakeLimiter(), new FakeLimiter(), undefined).gated()).toBe(false);
    });

    it('counts live work as waiting when the limiter cannot be asked: backfill is the one to wait', async () => {
      expect(await share(new FakeLimiter(), new FakeLimiter(), new Error('down')).gated()).toBe(true);
    });
  });

  describe('Method: slot', () => {
    it("takes a job-wide slot free now, and the cap's token at that very moment", async () => {
      const limiter = new FakeLimiter([grant([T0 + 5])]);
      const cap = new FakeLimiter([grant([T0 + 5])]);
      const { counted, slots: s } = slots();
      expect(await share(limiter, cap).slot(s)).toEqual({ startAtMs: T0 + 5 });
      expect(limiter.calls[0].options).toEqual({ maxWaitMs: 0, priority: 'backfill' });
      const options = { maxWaitMs: 0, atMs: T0 + 5, priority: 'backfill' };
      expect(cap.calls[0]).toEqual({ key: CAP_KEY, count: 1, options });
      expect(counted).toEqual({ granted: 1, putBack: [] });
    });

    it('gives a slot the cap refuses back to the pool for a live record, and waits at least the spacing', async () => {
      const { counted, slots: s } = slots();
      const answer = await share(new FakeLimiter([grant([T0 + 5])]), new FakeLimiter([grant([], 20)])).slot(s);
      expect(answer).toEqual({ waitMs: SPACING_MS });
      expect(counted).toEqual({ granted: 1, putBack: [T0 + 5] });
    });

    it('waits the job-wide hint when no slot is free now, and asks the cap nothing', async () => {
      const cap = new FakeLimiter();
      const { counted, slots: s } = slots();
      expect(await share(new FakeLimiter([grant([], 700)]), cap).slot(s)).toEqual({ waitMs: 700 });
      expect(cap.calls).toEqual([]);
      expect(counted.granted).toBe(0);
    });

    it('waits the spacing when a limiter cannot be asked', async () => {
      const { slots: s } = slots();
      const down = share(new FakeLimiter([new Error('down')]), new FakeLimiter());
      expect(await down.slot(s)).toEqual({ waitMs: SPACING_MS });
    });
  });
});
