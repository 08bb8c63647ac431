import { BACKFILL_GROUP, fairnessGroup, keyField, keyOf } from '../../../lambda/core/fairness';

describe('Module: fairness', () => {
  describe('Function: keyField', () => {
    it("keys records on the per-key rate limit's field, else the per-key concurrency's, else not at all", () => {
      const rateLimit = { startsPerInterval: 10, intervalSeconds: 60, burst: 1 };
      expect(
        keyField({
          rateLimit: {
            ...rateLimit,
            perKey: { field: 'merchantId', startsPerInterval: 5, intervalSeconds: 60, burst: 1, headroom: 0.8 },
          },
        }),
      ).toBe('merchantId');
      expect(keyField({ rateLimit, concurrencyPerKey: { field: 'tenantId', maxConcurrent: 2 } })).toBe('tenantId');
      expect(keyField({ rateLimit })).toBeUndefined();
    });
  });

  describe('Function: keyOf', () => {
    it('reads a string or a finite number as the key, and nothing else', () => {
      expect(keyOf({ m: 'acct_1' }, 'm')).toBe('acct_1');
      expect(keyOf({ m: 42 }, 'm')).toBe('42');
      expect(keyOf({ m: '' }, 'm')).toBeNull();
      expect(keyOf({ m: true }, 'm')).toBeNull();
      expect(keyOf({}, 'm')).toBeNull();
    });
  });

  describe('Function: fairnessGroup', () => {
    it('uses a key SQS accepts as a MessageGroupId as it is', () => {
      expect(fairnessGroup({ m: 'acct_1-EU:x' }, 'm')).toBe('acct_1-EU:x');
    });

    it('replaces a key SQS would refuse (a space, other characters, over 128) by its SHA-256, the same for the same key', () => {
      const spaced = fairnessGroup({ m: 'Acme Corp' }, 'm');
      expect(spaced).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(fairnessGroup({ m: 'Acme Corp' }, 'm')).toBe(spaced);
      expect(fairnessGroup({ m: 'Acme Corp.' }, 'm')).not.toBe(spaced);
      expect(fairnessGroup({ m: 'é' }, 'm')).toMatch(/^sha256:/);
      expect(fairnessGroup({ m: 'x'.repeat(129) }, 'm')).toMatch(/^sha256:/);
      expect(fairnessGroup({ m: 'x'.repeat(128) }, 'm')).toBe('x'.repeat(128));
    });

    it('puts all of backfill in one group, whatever its key, so a fair queue lets live work pass it', () => {
      expect(fairnessGroup({ m: 'acct_1' }, 'm', true)).toBe(BACKFILL_GROUP);
      expect(fairnessGroup({}, undefined, true)).toBe(BACKFILL_GROUP);
    });

    it('gives no group to a job without a key, or a record without one', () => {
      expect(fairnessGroup({ m: 'a' }, undefined)).toBeUndefined();
      expect(fairnessGroup({}, 'm')).toBeUndefined();
    });
  });
});
