import { logger } from '../../../../lambda/adapters/observability';
import type { KeyLease } from '../../../../lambda/adapters/keyConcurrency';
import { KeyLeases, LEASE_MARGIN_MS, type KeyConcurrency } from '../../../../lambda/handlers/consumer/keyLeases';
import { KEY_LIMITER_DOWN_WAIT_MS } from '../../../../lambda/handlers/consumer/keyRateGate';

const T0 = 1_800_000_000_000;
const lease: KeyLease = { key: 'a', leaseId: 'l-1', expiresAtMs: T0 };

type Mocked = KeyConcurrency & { acquire: jest.Mock; release: jest.Mock };

function limiter(acquire: KeyConcurrency['acquire'], release: KeyConcurrency['release'] = async () => {}): Mocked {
  return { field: 'tenant', acquire: jest.fn(acquire), release: jest.fn(release) } as never;
}

describe('Class: KeyLeases', () => {
  afterEach(() => jest.restoreAllMocks());

  describe('Method: take', () => {
    it("holds the lease until the invocation's end plus the margin for clocks that disagree", async () => {
      const l = limiter(async () => ({ granted: true, lease }));
      expect(await new KeyLeases(l).take('a', T0)).toEqual({ lease });
      expect(l.acquire).toHaveBeenCalledWith('a', T0 + LEASE_MARGIN_MS);
    });

    it("answers the key's wait when its leases are all held", async () => {
      const full = limiter(async () => ({ granted: false, waitMs: 700 }));
      expect(await new KeyLeases(full).take('a', T0)).toEqual({ waitMs: 700 });
    });

    it('answers a short wait, and warns, when the limiter cannot be asked', async () => {
      const warn = jest.spyOn(logger, 'warn').mockImplementation(() => undefined);
      const down = limiter(async () => Promise.reject(new Error('down')));
      expect(await new KeyLeases(down).take('a', T0)).toEqual({ waitMs: KEY_LIMITER_DOWN_WAIT_MS });
      const why = 'per-key concurrency limiter unavailable; deferring';
      expect(warn).toHaveBeenCalledWith(why, expect.objectContaining({ key: 'a' }));
    });
  });

  describe('Method: give', () => {
    it('releases the lease', async () => {
      const l = limiter(async () => ({ granted: true, lease }));
      await new KeyLeases(l).give(lease);
      expect(l.release).toHaveBeenCalledWith(lease);
    });

    it('does not throw when the release fails: the lease expires with the invocation', async () => {
      const warn = jest.spyOn(logger, 'warn').mockImplementation(() => undefined);
      const l = limiter(
        async () => ({ granted: true, lease }),
        async () => Promise.reject(new Error('down')),
      );
      await expect(new KeyLeases(l).give(lease)).resolves.toBeUndefined();
      const why = 'per-key concurrency lease could not be released; it expires with the invocation';
      expect(warn).toHaveBeenCalledWith(why, expect.objectContaining({ key: 'a' }));
    });
  });
});
