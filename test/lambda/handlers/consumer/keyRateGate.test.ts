import { logger } from '../../../../lambda/adapters/observability';
import {
  KEY_LIMITER_DOWN_WAIT_MS,
  KeyRateGate,
  type GatePool,
  type KeyLimiter,
} from '../../../../lambda/handlers/consumer/keyRateGate';

const T0 = 1_800_000_000_000;

/** A per-key limiter answering acquireAt from `answers` in turn; `queueBehind` answers `behindMs`. */
function keys(answers: ({ granted: true } | { granted: false; waitMs: number } | Error)[], behindMs = 0) {
  const asked: number[] = [];
  const limiter = {
    field: 'tenant',
    acquireAt: jest.fn(async (_key: string, atMs: number) => {
      asked.push(atMs);
      const answer = answers.shift();
      if (answer === undefined) throw new Error('no scripted answer');
      if (answer instanceof Error) throw answer;
      return answer;
    }),
    queueBehind: jest.fn(async () => behindMs),
    throttled: jest.fn(),
    succeeded: jest.fn(),
  };
  return { limiter: limiter as unknown as KeyLimiter & typeof limiter, asked };
}

/** A pool whose slotFrom answers `slot` (undefined: none within the wait); what is put back is kept. */
function pool(slot: number | undefined, maxWaitMs = 10_000) {
  const putBack: number[] = [];
  const p: GatePool & { putBack: jest.Mock } = {
    putBack: jest.fn((at: number) => putBack.push(at)),
    slotFrom: jest.fn(async () => slot),
    maxWaitMs: () => maxWaitMs,
  } as never;
  return { pool: p, putBack };
}

describe('Class: KeyRateGate', () => {
  describe('Method: answer', () => {
    it('grants the start at the job-wide slot when the key has a token at that very moment', async () => {
      const { limiter, asked } = keys([{ granted: true }]);
      const { pool: p, putBack } = pool(undefined);
      expect(await new KeyRateGate(limiter).answer('a', T0, p, 'live')).toEqual({ granted: true, startAtMs: T0 });
      expect(asked).toEqual([T0]);
      expect(putBack).toEqual([]);
    });

    it("gives the slot back, takes a job-wide slot at the key's close token, then the token at that slot", async () => {
      const { limiter, asked } = keys([{ granted: false, waitMs: 500 }, { granted: true }]);
      const { pool: p, putBack } = pool(T0 + 600);
      expect(await new KeyRateGate(limiter).answer('a', T0, p, 'live')).toEqual({ granted: true, startAtMs: T0 + 600 });
      expect(p.slotFrom).toHaveBeenCalledWith(T0 + 500, 'live');
      expect(asked).toEqual([T0, T0 + 600]);
      expect(putBack).toEqual([T0]);
    });

    it("defers a busy key's record by its place in the key's queue when its token is past the short wait", async () => {
      const { limiter } = keys([{ granted: false, waitMs: 5_000 }], 8_000);
      const { pool: p, putBack } = pool(T0 + 5_000);
      expect(await new KeyRateGate(limiter).answer('a', T0, p, 'live')).toEqual({ granted: false, waitMs: 8_000 });
      expect(p.slotFrom).not.toHaveBeenCalled();
      expect(putBack).toEqual([T0]);
    });

    it("puts the later job-wide slot back too when another container took the key's token meanwhile", async () => {
      const { limiter } = keys(
        [
          { granted: false, waitMs: 500 },
          { granted: false, waitMs: 300 },
        ],
        0,
      );
      const { pool: p, putBack } = pool(T0 + 500);
      expect(await new KeyRateGate(limiter).answer('a', T0, p, 'live')).toEqual({ granted: false, waitMs: 500 });
      expect(putBack).toEqual([T0, T0 + 500]);
    });

    it('gives the slot back once and defers briefly when the key limiter cannot be asked', async () => {
      jest.spyOn(logger, 'warn').mockImplementation(() => undefined);
      const { limiter } = keys([new Error('table gone')]);
      const { pool: p, putBack } = pool(undefined);
      const answer = await new KeyRateGate(limiter).answer('a', T0, p, 'live');
      expect(answer).toEqual({ granted: false, waitMs: KEY_LIMITER_DOWN_WAIT_MS });
      expect(putBack).toEqual([T0]);
      jest.restoreAllMocks();
    });
  });
});
