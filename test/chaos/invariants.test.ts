import { checkInvariants, isNonReplayedStart, type Observations } from '../../chaos/invariants';
import type { ProviderArrival } from '../../local/provider';

const base = (): Observations => ({
  expectedOperations: ['p1', 'p2'],
  effects: [
    { at: 1, paymentId: 'p1', idempotencyKey: 'k1', providerReference: 'r1' },
    { at: 2, paymentId: 'p2', idempotencyKey: 'k2', providerReference: 'r2' },
  ],
  arrivals: [
    { at: 0, paymentId: 'p1', idempotencyKey: 'k1', status: 200 },
    { at: 1, paymentId: 'p2', idempotencyKey: 'k2', status: 200 },
    { at: 5, paymentId: 'p1', idempotencyKey: 'k1', status: 200, replayed: true },
  ],
  replays: 1,
  rateLimit: { startsPerInterval: 2, intervalSeconds: 60 },
  batches: [{ batchId: 'b1', discovered: 2, published: 2, completed: 1, duplicates: 1, rejected: 0, deadLettered: 0, admission: 'complete' }],
  rejectedMessageIds: ['m9', 'm9'],
  poisonInjected: 1,
  queueLeft: 0,
  dlq: [],
  dlqOperations: [],
});

describe('Function: checkInvariants', () => {
  it('holds for one effect per operation, a reconciled ledger, the rate and a clean DLQ, with the figures', () => {
    const verdict = checkInvariants(base());
    expect(verdict.ok).toBe(true);
    expect(verdict.invariants.effectsEqualUniqueOperations).toMatchObject({ ok: true, effects: 2, uniqueOperations: 2, providerReplays: 1, dedupOnlyGuard: 1 });
    expect(verdict.invariants.nothingLost).toMatchObject({ ok: true, operations: 2, withEffect: 2, missing: 0, batchesExact: 0, ledgerCompletedAllBatches: 1 });
    expect(verdict.invariants.rateRespected).toMatchObject({ ok: true, maxStartsInAnyWindow: 2, limit: 2, nonReplayedStarts: 2 });
    expect(verdict.invariants.onlyTerminalFailuresInDlq).toMatchObject({ ok: true, dlqMessages: 0, poisonInjected: 1, poisonRejected: 1 });
  });

  it('fails on a second effect for one operation', () => {
    const o = base();
    o.effects.push({ at: 3, paymentId: 'p1', idempotencyKey: 'k1b', providerReference: 'r3' });
    const inv = checkInvariants(o).invariants.effectsEqualUniqueOperations;
    expect(inv.ok).toBe(false);
    expect(inv.repeatedOperations).toEqual(['p1 x2']);
  });

  it('fails when an operation has neither an effect nor a DLQ entry, and accepts one terminally dead-lettered', () => {
    const o = base();
    o.effects = o.effects.slice(0, 1);
    expect(checkInvariants(o).invariants.nothingLost).toMatchObject({ ok: false, missing: 1, missingExamples: ['p2'] });
    o.dlq = [{ body: '{}', attributes: { failureReason: 'provider answered 422' } }];
    o.dlqOperations = ['p2'];
    expect(checkInvariants(o).invariants.nothingLost).toMatchObject({ ok: true, terminalInDlq: 1 });
  });

  it('fails when a batch discovered more than it accounts for, or messages are left', () => {
    const o = base();
    o.batches[0].duplicates = 0;
    expect(checkInvariants(o).invariants.nothingLost.ok).toBe(false);
    const left = base();
    left.queueLeft = 1;
    expect(checkInvariants(left).invariants.nothingLost.ok).toBe(false);
  });

  it('fails when a run did not finish its admission, even if another run published its operations', () => {
    const o = base();
    o.batches.push({ batchId: 'b2', discovered: 0, published: 0, completed: 0, duplicates: 0, rejected: 0, deadLettered: 0, admission: 'admitting' });
    o.batches.push({ batchId: 'b3', discovered: 0, published: 0, completed: 0, duplicates: 0, rejected: 0, deadLettered: 0 });
    expect(checkInvariants(o).invariants.nothingLost).toMatchObject({ ok: false, missing: 0, runsNotFullyAdmitted: ['b2 (admitting)', 'b3 (no admission state)'] });
  });

  it('fails when more non-replayed starts than the limit fall in one window', () => {
    const o = base();
    o.arrivals.push({ at: 59_000, paymentId: 'p3', idempotencyKey: 'k3', status: 502 });
    expect(checkInvariants(o).invariants.rateRespected).toMatchObject({ ok: false, maxStartsInAnyWindow: 3, limit: 2 });
  });

  it('fails on a DLQ message without failureReason (retries exhausted and not redriven) or an unrejected poison message', () => {
    const o = base();
    o.dlq = [{ body: '{}', attributes: {} }];
    expect(checkInvariants(o).invariants.onlyTerminalFailuresInDlq).toMatchObject({ ok: false, withoutFailureReason: 1 });
    const p = base();
    p.poisonInjected = 2;
    expect(checkInvariants(p).invariants.onlyTerminalFailuresInDlq).toMatchObject({ ok: false, poisonRejected: 1 });
  });
});

describe('Function: isNonReplayedStart', () => {
  it('counts applied, failed and dropped requests, not replays or refusals', () => {
    const a = (status: number, replayed?: boolean): ProviderArrival => ({ at: 0, paymentId: 'p', status, replayed });
    expect([a(200), a(500), a(0), a(200, true), a(429), a(409), a(401), a(400)].map(isNonReplayedStart)).toEqual([true, true, true, false, false, false, false, false]);
  });
});
