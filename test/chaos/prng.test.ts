import { keyedDraw, Prng } from '../../chaos/prng';

describe('Class: Prng', () => {
  describe('Method: next', () => {
    it('repeats the same sequence for the same seed and differs for another seed', () => {
      const a = new Prng(7);
      const b = new Prng(7);
      const c = new Prng(8);
      const seqA = Array.from({ length: 5 }, () => a.next());
      expect(Array.from({ length: 5 }, () => b.next())).toEqual(seqA);
      expect(Array.from({ length: 5 }, () => c.next())).not.toEqual(seqA);
      for (const x of seqA) {
        expect(x).toBeGreaterThanOrEqual(0);
        expect(x).toBeLessThan(1);
      }
    });
  });

  describe('Method: chance', () => {
    it('never fires at 0 and fires near the rate over many draws', () => {
      const p = new Prng(1);
      expect(Array.from({ length: 100 }, () => p.chance(0)).some(Boolean)).toBe(false);
      const hits = Array.from({ length: 10_000 }, () => p.chance(0.1)).filter(Boolean).length;
      expect(hits).toBeGreaterThan(900);
      expect(hits).toBeLessThan(1100);
    });
  });

  describe('Method: int', () => {
    it('stays within the inclusive bounds and reaches both ends', () => {
      const p = new Prng(3);
      const seen = new Set(Array.from({ length: 500 }, () => p.int(2, 4)));
      expect([...seen].sort()).toEqual([2, 3, 4]);
    });
  });

  describe('Method: fork', () => {
    it('gives independent streams per label, each reproducible', () => {
      const x = new Prng(5).fork('kills').next();
      expect(new Prng(5).fork('kills').next()).toBe(x);
      expect(new Prng(5).fork('duplicates').next()).not.toBe(x);
    });
  });
});

describe('Function: keyedDraw', () => {
  it('depends only on the seed and the key', () => {
    expect(keyedDraw(7, 'op-1#1')).toBe(keyedDraw(7, 'op-1#1'));
    expect(keyedDraw(7, 'op-1#2')).not.toBe(keyedDraw(7, 'op-1#1'));
    expect(keyedDraw(8, 'op-1#1')).not.toBe(keyedDraw(7, 'op-1#1'));
  });
});
