// Pacing math (pure): slots a container was granted and can no longer reach, handed back for the fleet to use.
//
// ## Why
// A container takes one block of slots for its whole batch and starts its records one after another. When one record's
// downstream call runs long (a slow answer, a call held until its timeout), every later slot of the block passes
// unused, and nobody else can take it: the lanes it came from are booked up to the block's end. Under a provider that
// answers slowly now and then, that is a large share of the allowance (chaos measured about a third of the granted
// slots lost this way). So a container whose call overruns hands its block's later slots back, on the limiter item,
// and the next acquire anywhere in the fleet takes them before it books new ones.
//
// ## The guarantee
// A handed-back slot is a start time the GCRA already granted (lanes.ts); its first owner gives it up before it comes
// and never starts on it. The set of times anyone starts at is therefore a subset of the times the lanes granted, and
// any window of W still holds at most R of them. A slot is taken by at most one caller: the taking write removes it on
// the condition that it is still there (rateLimiter.ts).
//
// ## What a caller may take
// Only slots it can start on time: no earlier than its decision's "now" (the clock plus the write's round trip), no
// later than its longest wait, and its own starts at least `paceMs` apart, as with a block from the lanes.

/** Slots an item keeps handed back at most: a few blocks' worth; a release that would pass it is dropped (the slots are lost, as before hand-back). */
export const MAX_RETURNED_SLOTS = 100;

export interface ReturnedTake {
  /** Taken slots, epoch ms, ascending. */
  taken: number[];
  /** Slots that have passed (before `nowMs`): nobody can use them any more, so the taking write removes them too. */
  expired: number[];
}

/**
 * Which of the item's handed-back slots a caller takes: ascending from `nowMs`, each at least `paceMs` after the last it
 * took, none later than `nowMs + maxWaitMs`, at most `count`.
 */
export function takeReturned(returned: readonly number[], request: { nowMs: number; maxWaitMs: number; count: number; paceMs: number }): ReturnedTake {
  const latest = request.nowMs + Math.max(0, request.maxWaitMs);
  const sorted = [...new Set(returned)].sort((a, b) => a - b);
  const taken: number[] = [];
  const expired: number[] = [];
  let previous = Number.NEGATIVE_INFINITY;
  for (const slot of sorted) {
    if (slot < request.nowMs) {
      expired.push(slot);
      continue;
    }
    if (taken.length >= request.count || slot > latest) break;
    if (slot - previous < request.paceMs) continue;
    taken.push(slot);
    previous = slot;
  }
  return { taken, expired };
}
