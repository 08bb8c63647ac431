// Chaos harness, the dice: every injection decision comes from here, so a run is reproducible from its seed.
// Hand-written: mulberry32 is a dozen lines, and the libraries that offer it add nothing for this use.

/** A seeded pseudo-random source (mulberry32): the same seed gives the same sequence. */
export class Prng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return p > 0 && this.next() < p;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }

  /** An independent stream for one kind of fault, so adding draws to one stream does not shift the others. */
  fork(label: string): Prng {
    let h = this.state ^ 0x9e3779b9;
    for (const c of label) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
    return new Prng(h);
  }
}

/**
 * A decision that depends only on the seed and a key (an operation ID and its attempt), not on the order requests
 * arrive in: concurrent workers interleave differently from run to run, a keyed draw does not.
 */
export function keyedDraw(seed: number, key: string): number {
  return new Prng(seed).fork(key).next();
}
