import { checkInvariants, isNonReplayedStart, type Observations } from '../../chaos/invariants';
import type { DownstreamArrival } from '../../local/fixture';

const tally = (keys: string[]) => {
  const m = new Map<string, number>();
  for (const k of keys) m.set(k, (m.get(k) ?? 0) + 1);
  return m;
};

/** A job with a fake downstream: its effects read off the downstream, which replayed one applied key. */
const withDownstream = (): Observations => ({
  expectedOperations: ['p1', 'p2'],
  effects: { effectsByOperation: tally(['p1', 'p2']), starts: [0, 1, 5], unexpectedEffects: [] },
  downstream: {
    effects: [
      { at: 1, operationKey: 'p1', idempotencyKey: 'k1' },
      { at: 2, operationKey: 'p2', idempotencyKey: 'k2' },
    ],
    arrivals: [
      { at: 0, operationKey: 'p1', idempotencyKey: 'k1', status: 200 },
      { at: 1, operationKey: 'p2', idempotencyKey: 'k2', status: 200 },
      { at: 5, operationKey: 'p1', idempotencyKey: 'k1', status: 200, replayed: true },
    ],
    replays: 1,
  },
  rateLimit: { startsPerInterval: 2, intervalSeconds: 60 },
  // Exact: one of the two completions was adopted from an invocation killed before its ledger write.
  batches: [
    {
      batchId: 'b1',
      discovered: 2,
      published: 2,
      completed: 2,
      adopted: 1,
      duplicates: 1,
      rejected: 0,
      deadLettered: 0,
      admission: 'complete',
    },
  ],
  rejectedMessageIds: ['m9', 'm9'],
  poisonInjected: 1,
  queueLeft: 0,
  dlq: [],
  dlqOperations: [],
});

/** A job whose effects land on AWS: one operation touches several items, and the fixture's starts are the servers'. */
const onAws = (): Observations => ({
  ...withDownstream(),
  expectedOperations: ['t1', 't2'],
  effects: {
    effectsByOperation: tally(['t1', 't2']),
    effectsByItem: tally(['sessions/t1/s1', 'sessions/t1/s2', 'sessions/t2/s1']),
    starts: [10, 20],
    unexpectedEffects: [],
  },
  downstream: undefined,
});

describe('Function: checkInvariants', () => {
  it('holds for one effect per operation, a reconciled ledger, the rate and a clean DLQ, with the figures', () => {
    const verdict = checkInvariants(withDownstream());
    expect(verdict.ok).toBe(true);
    expect(verdict.invariants.effectsEqualUniqueOperations).toMatchObject({
      ok: true,
      effects: 2,
      uniqueOperations: 2,
      downstreamReplays: 1,
      dedupOnlyGuard: 1,
    });
    expect(verdict.invariants.nothingLost).toMatchObject({
      ok: true,
      operations: 2,
      withEffect: 2,
      missing: 0,
      batchesExact: 1,
      ledgerCompletedAllBatches: 2,
    });
    expect(verdict.invariants.ledgerExact).toMatchObject({
      ok: true,
      batches: 1,
      batchesExact: 1,
      inexactBatches: [],
      ledgerCompleted: 2,
      completedOperations: 2,
      adopted: 1,
    });
    expect(verdict.invariants.rateRespected).toMatchObject({
      ok: true,
      maxStartsInAnyWindow: 2,
      limit: 2,
      nonReplayedStarts: 2,
    });
    expect(verdict.invariants.onlyTerminalFailuresInDlq).toMatchObject({
      ok: true,
      dlqMessages: 0,
      poisonInjected: 1,
      poisonRejected: 1,
    });
  });

  it('holds for a job without a downstream, on the items each operation touched, and reports no downstream figures', () => {
    const verdict = checkInvariants(onAws());
    expect(verdict.ok).toBe(true);
    expect(verdict.invariants.effectsEqualUniqueOperations).toEqual({
      ok: true,
      effects: 2,
      uniqueOperations: 2,
      repeatedOperations: [],
      unexpectedEffects: [],
      itemEffects: 3,
      uniqueItems: 3,
      repeatedItems: [],
    });
  });

  it('fails on a second effect for one operation', () => {
    const o = withDownstream();
    o.effects.effectsByOperation.set('p1', 2);
    const inv = checkInvariants(o).invariants.effectsEqualUniqueOperations;
    expect(inv).toMatchObject({ ok: false, effects: 3, uniqueOperations: 2, repeatedOperations: ['p1 x2'] });
  });

  it('fails on an item touched twice, though its operation counts one effect', () => {
    const o = onAws();
    o.effects.effectsByItem!.set('sessions/t1/s2', 2);
    expect(checkInvariants(o).invariants.effectsEqualUniqueOperations).toMatchObject({
      ok: false,
      repeatedOperations: [],
      repeatedItems: ['sessions/t1/s2 x2'],
    });
  });

  it('fails when an expected item was never touched, unless its operation is in the DLQ', () => {
    const o = onAws();
    o.effects.expectedItems = new Map([
      ['sessions/t1/s1', 't1'],
      ['sessions/t1/s2', 't1'],
      ['sessions/t2/s1', 't2'],
      ['sessions/t2/s2', 't2'],
    ]);
    expect(checkInvariants(o).invariants.nothingLost).toMatchObject({
      ok: false,
      items: 4,
      missingItems: 1,
      missingItemExamples: ['sessions/t2/s2'],
    });
    o.dlqOperations = ['t2'];
    expect(checkInvariants(o).invariants.nothingLost).toMatchObject({ missingItems: 0 });
  });

  it('fails on an effect the fixture calls unexpected, and on one for an operation never seeded', () => {
    const o = onAws();
    o.effects.unexpectedEffects = ['sessions/t1/active-1'];
    expect(checkInvariants(o).invariants.effectsEqualUniqueOperations).toMatchObject({
      ok: false,
      unexpectedEffects: ['sessions/t1/active-1'],
    });
    const q = withDownstream();
    q.effects.effectsByOperation.set('p9', 1);
    expect(checkInvariants(q).invariants.effectsEqualUniqueOperations).toMatchObject({
      ok: false,
      unexpectedEffects: ['p9'],
    });
  });

  it('fails when an operation has neither an effect nor a DLQ entry, and accepts one terminally dead-lettered', () => {
    const o = withDownstream();
    o.effects.effectsByOperation.delete('p2');
    expect(checkInvariants(o).invariants.nothingLost).toMatchObject({ ok: false, missing: 1, missingExamples: ['p2'] });
    o.dlq = [{ body: '{}', attributes: { failureReason: 'downstream answered 422' } }];
    o.dlqOperations = ['p2'];
    expect(checkInvariants(o).invariants.nothingLost).toMatchObject({ ok: true, withEffect: 1, terminalInDlq: 1 });
  });

  it('fails when a batch discovered more than it accounts for, or messages are left', () => {
    const o = withDownstream();
    o.batches[0] = { ...o.batches[0], completed: 1, duplicates: 0 };
    expect(checkInvariants(o).invariants.nothingLost.ok).toBe(false);
    const left = withDownstream();
    left.queueLeft = 1;
    expect(checkInvariants(left).invariants.nothingLost.ok).toBe(false);
  });

  it('ledgerExact fails on a batch whose counts miss an operation, though duplicates cover it (a lost flush)', () => {
    const o = withDownstream();
    o.batches[0] = { ...o.batches[0], completed: 1, adopted: 0, duplicates: 1 };
    expect(checkInvariants(o).invariants.nothingLost.ok).toBe(true);
    expect(checkInvariants(o).invariants.ledgerExact).toMatchObject({
      ok: false,
      batchesExact: 0,
      inexactBatches: ['b1: discovered 2 != completed 1 + elsewhere 0 + rejected 0 + DLQ 0'],
      ledgerCompleted: 1,
      completedOperations: 2,
    });
    expect(checkInvariants(o).ok).toBe(false);
  });

  it("ledgerExact fails when the business date's audit is not exact, and reports what it misses", () => {
    const o = withDownstream();
    o.audit = {
      exact: false,
      missing: ['1 operation still open (0 in flight, 1 waiting)'],
      discovered: 2,
      completed: 1,
      rejected: 0,
      deadLettered: 0,
    };
    expect(checkInvariants(o).invariants.ledgerExact).toMatchObject({
      ok: false,
      batchesExact: 1,
      auditExact: false,
      auditMissing: ['1 operation still open (0 in flight, 1 waiting)'],
    });
    o.audit = { ...o.audit, exact: true, missing: [], completed: 2 };
    expect(checkInvariants(o).invariants.ledgerExact).toMatchObject({ ok: true, auditExact: true, auditCompleted: 2 });
  });

  it('ledgerExact holds for a re-run: each operation completed in one batch, completedElsewhere in the other', () => {
    const o = withDownstream();
    o.batches = [
      {
        batchId: 'b1',
        discovered: 2,
        published: 2,
        completed: 1,
        completedElsewhere: 1,
        duplicates: 0,
        rejected: 0,
        deadLettered: 0,
        admission: 'complete',
      },
      {
        batchId: 'b2',
        discovered: 2,
        published: 2,
        completed: 1,
        completedElsewhere: 1,
        duplicates: 0,
        rejected: 0,
        deadLettered: 0,
        admission: 'complete',
      },
    ];
    expect(checkInvariants(o).invariants.ledgerExact).toMatchObject({
      ok: true,
      batchesExact: 2,
      ledgerCompleted: 2,
      completedOperations: 2,
      completedElsewhere: 2,
    });
    // The same operation counted completed by both batches is one completion too many.
    o.batches[1] = { ...o.batches[1], completed: 2, completedElsewhere: 0 };
    expect(checkInvariants(o).invariants.ledgerExact).toMatchObject({
      ok: false,
      ledgerCompleted: 3,
      completedOperations: 2,
    });
  });

  it('fails when a run did not finish its admission, even if another run published its operations', () => {
    const o = withDownstream();
    o.batches.push({
      batchId: 'b2',
      discovered: 0,
      published: 0,
      completed: 0,
      duplicates: 0,
      rejected: 0,
      deadLettered: 0,
      admission: 'admitting',
    });
    o.batches.push({
      batchId: 'b3',
      discovered: 0,
      published: 0,
      completed: 0,
      duplicates: 0,
      rejected: 0,
      deadLettered: 0,
    });
    expect(checkInvariants(o).invariants.nothingLost).toMatchObject({
      ok: false,
      missing: 0,
      runsNotFullyAdmitted: ['b2 (admitting)', 'b3 (no admission state)'],
    });
  });

  it("counts the downstream's non-replayed arrivals, failed ones too, for the rate", () => {
    const o = withDownstream();
    o.downstream = {
      ...o.downstream!,
      arrivals: [...o.downstream!.arrivals, { at: 59_000, operationKey: 'p3', idempotencyKey: 'k3', status: 502 }],
    };
    expect(checkInvariants(o).invariants.rateRespected).toMatchObject({
      ok: false,
      maxStartsInAnyWindow: 3,
      limit: 2,
      nonReplayedStarts: 3,
    });
  });

  it("counts the fixture's starts for the rate when the job has no downstream, in a sliding window", () => {
    const o = onAws();
    o.effects.starts = [0, 30_000, 59_999];
    expect(checkInvariants(o).invariants.rateRespected).toMatchObject({
      ok: false,
      maxStartsInAnyWindow: 3,
      starts: 3,
    });
    o.effects.starts = [0, 30_000, 60_000];
    expect(checkInvariants(o).invariants.rateRespected).toMatchObject({ ok: true, maxStartsInAnyWindow: 2 });
  });

  it('fails on a DLQ message without failureReason (retries exhausted and not redriven) or an unrejected poison message', () => {
    const o = withDownstream();
    o.dlq = [{ body: '{}', attributes: {} }];
    expect(checkInvariants(o).invariants.onlyTerminalFailuresInDlq).toMatchObject({
      ok: false,
      withoutFailureReason: 1,
    });
    const p = withDownstream();
    p.poisonInjected = 2;
    expect(checkInvariants(p).invariants.onlyTerminalFailuresInDlq).toMatchObject({ ok: false, poisonRejected: 1 });
  });
});

describe('Function: isNonReplayedStart', () => {
  it('counts applied, failed and dropped requests, not replays or refusals', () => {
    const a = (status: number, replayed?: boolean): DownstreamArrival => ({
      at: 0,
      operationKey: 'p',
      status,
      replayed,
    });
    expect([a(200), a(500), a(0), a(200, true), a(429), a(409), a(401), a(400)].map(isNonReplayedStart)).toEqual([
      true,
      true,
      true,
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});
