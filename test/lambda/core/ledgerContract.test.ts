import {
  AdmissionStatus,
  BATCH_COUNTERS,
  LedgerItemKind,
  batchAccountedWithDuplicates,
  batchCountersOf,
  batchExact,
  batchIdOf,
  batchOutstanding,
  batchReconciles,
  batchSettledCount,
  completedByOf,
  deadLetterEntriesOf,
  deadLetterEntry,
  deadLetteredOperationsOf,
  DRAIN_WINDOW_MINUTES,
  drainPerMinute,
  decodePageOperations,
  encodePageOperations,
  invalidRowsOf,
  ledgerEntry,
  ledgerKeys,
  ledgerPartition,
  orphansOf,
  resolveBatch,
} from '../../../lambda/core/ledgerContract';

describe('the ledger key layout', () => {
  it('keys a batch BATCH#<job> / <batchId>', () => {
    expect(ledgerKeys.batch('payments-job', 'payments-job:2026-11-28:20261129T020000Z')).toEqual({
      pk: 'BATCH#payments-job',
      sk: 'payments-job:2026-11-28:20261129T020000Z',
    });
  });

  it('keys a rejection REJECTED#<job> / <ISO time>#<messageId>', () => {
    expect(ledgerKeys.rejection('fake-job', new Date('2026-11-29T02:00:01.5Z'), 'm-1')).toEqual({
      pk: 'REJECTED#fake-job',
      sk: '2026-11-29T02:00:01.500Z#m-1',
    });
  });

  it("names the partitions a job's batches and rejections are listed from, the same as the items' keys", () => {
    expect(ledgerKeys.batchPartition('fake-job')).toBe('BATCH#fake-job');
    expect(ledgerKeys.rejectionPartition('fake-job')).toBe('REJECTED#fake-job');
    expect(ledgerPartition(LedgerItemKind.batch, 'fake-job')).toBe(ledgerKeys.batch('fake-job', 'b').pk);
    expect(ledgerPartition(LedgerItemKind.rejection, 'fake-job')).toBe(
      ledgerKeys.rejection('fake-job', new Date(0), 'm').pk,
    );
  });

  it('keys an invalid source row INVALID_ROW#<job>#<batchId> / the SHA-256 of its key, whatever the key holds', () => {
    expect(ledgerKeys.invalidRow('fake-job', 'b-1', 'row 1')).toEqual({
      pk: 'INVALID_ROW#fake-job#b-1',
      // sha256('row 1'), hex.
      sk: '96e3051150089bfa9f3564e2a94c62ed4e956174403606a91477120d2ed06895',
    });
    expect(ledgerKeys.invalidRow('fake-job', 'b-1', 'x'.repeat(5000)).sk).toHaveLength(64);
    expect(ledgerKeys.invalidRow('fake-job', 'b-1', 'row 1').sk).not.toBe(
      ledgerKeys.invalidRow('fake-job', 'b-1', 'row 2').sk,
    );
    expect(ledgerKeys.invalidRowPartition('fake-job', 'b-1')).toBe(
      ledgerPartition(LedgerItemKind.invalidRow, 'fake-job') + '#b-1',
    );
  });

  it("reads a batch item's count of invalid rows, 0 when it has none", () => {
    expect(invalidRowsOf({ invalidRows: 3 })).toBe(3);
    expect(invalidRowsOf({ discovered: 3 })).toBe(0);
  });

  it("reads a batch item's batch ID from its sort key", () => {
    expect(batchIdOf({ pk: 'BATCH#fake-job', sk: 'fake-job:2026-11-28:manual-ab12' } as { sk: unknown })).toBe(
      'fake-job:2026-11-28:manual-ab12',
    );
  });
});

describe('the batch counters', () => {
  it('lists every counter the ledger adds, in its write order', () => {
    expect(BATCH_COUNTERS).toEqual([
      'discovered',
      'published',
      'consumed',
      'completed',
      'duplicates',
      'retries',
      'rejected',
      'deferred',
      'throttled',
      'deadLettered',
    ]);
  });

  it("reads a stored item's counters, an absent or non-numeric one as 0, and nothing else", () => {
    expect(
      batchCountersOf({ sk: 'b', discovered: 5, completed: 3, rejected: 'x', admission: 'complete', pages: 2 }),
    ).toEqual({
      completedElsewhere: 0,
      discovered: 5,
      published: 0,
      consumed: 0,
      completed: 3,
      duplicates: 0,
      retries: 0,
      rejected: 0,
      deferred: 0,
      throttled: 0,
      deadLettered: 0,
    });
  });
});

describe('the reconciliation rule', () => {
  const settled = { discovered: 10, completed: 7, rejected: 2, deadLettered: 1, duplicates: 0 };

  it('settled = completed + rejected + deadLettered, an absent counter 0; outstanding = discovered - settled', () => {
    expect(batchSettledCount(settled)).toBe(10);
    expect(batchSettledCount({ completed: 4 })).toBe(4);
    expect(batchSettledCount({})).toBe(0);
    expect(batchOutstanding({ ...settled, completed: 5 })).toBe(2);
    expect(batchOutstanding({ discovered: 3 })).toBe(3);
    // More settled than discovered (a batch counted twice somewhere) shows as negative, not hidden.
    expect(batchOutstanding({ ...settled, completed: 8 })).toBe(-1);
  });

  it('exact: discovered = completed + rejected + deadLettered, whatever the admission', () => {
    expect(batchExact(settled)).toBe(true);
    expect(batchExact({ ...settled, completed: 6 })).toBe(false);
    expect(batchExact({ ...settled, completed: 8 })).toBe(false);
    expect(batchExact({})).toBe(true);
  });

  it('reconciles (ops status): exact and admission no longer admitting', () => {
    expect(batchReconciles({ ...settled, admission: AdmissionStatus.complete })).toBe(true);
    expect(batchReconciles({ ...settled, admission: AdmissionStatus.pageLimit })).toBe(true);
    // A batch written before admission existed is judged on its counters.
    expect(batchReconciles({ ...settled })).toBe(true);
    // A batch still admitting does not reconcile, even when its counts add up so far.
    expect(batchReconciles({ ...settled, admission: AdmissionStatus.admitting })).toBe(false);
    expect(batchReconciles({ ...settled, completed: 6, admission: AdmissionStatus.complete })).toBe(false);
  });

  it('suppressed duplicates count toward the chaos check (accounted with duplicates) but never toward exact or reconciles', () => {
    // An invocation killed before its ledger flush: 2 completions lost, their records came back as duplicates.
    const killed = {
      discovered: 10,
      completed: 5,
      duplicates: 2,
      rejected: 2,
      deadLettered: 1,
      admission: AdmissionStatus.complete,
    };
    expect(batchAccountedWithDuplicates(killed)).toBe(true);
    expect(batchExact(killed)).toBe(false);
    expect(batchReconciles(killed)).toBe(false);
    // Redeliveries of completed records on top of an exact batch: accounted, and exact all the same (duplicates are
    // counted apart, on neither side of the exact equation).
    expect(batchAccountedWithDuplicates({ ...settled, duplicates: 3 })).toBe(true);
    expect(batchExact({ ...settled, duplicates: 3 })).toBe(true);
    expect(batchAccountedWithDuplicates({ ...killed, duplicates: 1 })).toBe(false);
  });

  it('the chaos check ignores admission (the chaos invariants require every run complete on their own)', () => {
    const admitting = { ...settled, admission: AdmissionStatus.admitting };
    expect(batchAccountedWithDuplicates(admitting)).toBe(true);
    expect(batchExact(admitting)).toBe(true);
    expect(batchReconciles(admitting)).toBe(false);
  });
});

describe('Function: resolveBatch', () => {
  const B = 'job:2026-11-28:20261129T020000Z';
  const batch = { sk: B, discovered: 4, published: 4, admission: 'complete' };
  const inv = (sk: string, record: Record<string, unknown>) => ({
    pk: ledgerKeys.invocationPartition('job', B),
    sk,
    ...record,
  });

  it("adds up the invocations' counters, keeps the largest age, and reconciles exactly", () => {
    const figures = resolveBatch(B, batch, [
      inv('i1', { consumed: 3, completed: 3, retries: 1, oldestMessageAgeMs: 900 }),
      inv('i2', { consumed: 1, completed: 1, deferred: 2, throttled: 1, oldestMessageAgeMs: 4_000 }),
    ]);
    expect(figures).toMatchObject({
      discovered: 4,
      consumed: 4,
      completed: 4,
      completedElsewhere: 0,
      adopted: 0,
      retries: 1,
      deferred: 2,
      throttled: 1,
      invocations: 2,
      oldestMessageAgeMs: 4_000,
    });
    expect(batchExact(figures)).toBe(true);
  });

  it('adopts the completions of an invocation that never wrote its counts, once per operation, and counts the rest as duplicates', () => {
    // i-killed completed op-3 and op-4, then died before its write; their redeliveries saw its completions.
    const items = [
      inv('i1', { consumed: 2, completed: 2 }),
      inv('i2', { consumed: 2, replays: [ledgerEntry('i-killed', 'op-3'), ledgerEntry('i-killed', 'op-4')] }),
    ];
    expect(resolveBatch(B, batch, items)).toMatchObject({ completed: 4, adopted: 2, duplicates: 0 });
    // A second redelivery of op-3 adopts nothing more.
    const again = [...items, inv('i3', { consumed: 1, replays: [ledgerEntry('i-killed', 'op-3')] })];
    expect(resolveBatch(B, batch, again)).toMatchObject({ completed: 4, adopted: 2, duplicates: 1 });
    expect(batchExact(resolveBatch(B, batch, again))).toBe(true);
  });

  it('counts a replay of a completion whose invocation did write as a duplicate, whichever was written first', () => {
    // i1 was still running when op-1's duplicate arrived at i2; it wrote its counts afterwards.
    const before = [inv('i2', { consumed: 1, replays: [ledgerEntry('i1', 'op-1')] })];
    expect(resolveBatch(B, { ...batch, discovered: 1 }, before)).toMatchObject({
      completed: 1,
      adopted: 1,
      duplicates: 0,
    });
    const after = [...before, inv('i1', { consumed: 1, completed: 1 })];
    expect(resolveBatch(B, { ...batch, discovered: 1 }, after)).toMatchObject({
      completed: 1,
      adopted: 0,
      duplicates: 1,
    });
  });

  it('counts an operation another batch completed first as completedElsewhere, once, and names that batch', () => {
    const figures = resolveBatch(B, batch, [
      inv('i1', { consumed: 2, completed: 2 }),
      inv('i2', {
        consumed: 3,
        elsewhere: [
          ledgerEntry('job:2026-11-28:manual-1', 'op-3'),
          ledgerEntry('job:2026-11-28:manual-1', 'op-4'),
          ledgerEntry('job:2026-11-28:manual-1', 'op-3'),
        ],
      }),
    ]);
    expect(figures).toMatchObject({
      completed: 2,
      completedElsewhere: 2,
      duplicates: 1,
      completedElsewhereBy: { 'op-3': 'job:2026-11-28:manual-1', 'op-4': 'job:2026-11-28:manual-1' },
    });
    expect(batchExact(figures)).toBe(true);
  });

  it('counts a dead-lettered operation until it completes: by a redrive in this batch, or by another batch', () => {
    const items = [
      inv('i1', { consumed: 2, completed: 2 }),
      inv('i2', {
        consumed: 2,
        deadLetteredOperations: [
          deadLetterEntry('op-3', 'provider answered 422'),
          deadLetterEntry('op-4', 'deferral budget spent'),
        ],
      }),
    ];
    expect(deadLetteredOperationsOf(items)).toEqual(['op-3', 'op-4']);
    expect(deadLetterEntriesOf(items)).toEqual([
      { operationId: 'op-3', reason: 'provider answered 422' },
      { operationId: 'op-4', reason: 'deferral budget spent' },
    ]);
    expect(resolveBatch(B, batch, items)).toMatchObject({ deadLettered: 2, deadLetteredOperations: ['op-3', 'op-4'] });
    // op-3 redriven and completed here (its invocation counted it), op-4 completed by a re-run.
    const redriven = [...items, inv('i3', { consumed: 1, completed: 1 })];
    const completions = new Map([
      ['op-3', { batchId: B, invocationId: 'i3' }],
      ['op-4', { batchId: 'job:2026-11-28:manual-1', invocationId: 'x' }],
    ]);
    const figures = resolveBatch(B, batch, redriven, completions);
    expect(figures).toMatchObject({ completed: 3, completedElsewhere: 1, deadLettered: 0, deadLetteredOperations: [] });
    expect(batchExact(figures)).toBe(true);
  });

  it("resolves the run's orphans by their completions: another batch's is completedElsewhere, its own already counted", () => {
    // A killed attempt of a page discovered op-3 and op-4; the attempt that committed the page found neither again.
    // op-3 it had published, and this batch completed it; op-4 it had not, and a re-run completed it.
    const item = { ...batch, orphans: new Set(['op-3', 'op-4']) };
    expect(orphansOf(item)).toEqual(['op-3', 'op-4']);
    const completions = new Map([
      ['op-3', { batchId: B, invocationId: 'i1' }],
      ['op-4', { batchId: 'job:2026-11-28:manual-1', invocationId: 'x' }],
    ]);
    const figures = resolveBatch(B, item, [inv('i1', { consumed: 3, completed: 3 })], completions);
    expect(figures).toMatchObject({
      completed: 3,
      completedElsewhere: 1,
      completedElsewhereBy: { 'op-4': 'job:2026-11-28:manual-1' },
    });
    expect(batchExact(figures)).toBe(true);
    // Before op-4 completes anywhere, the batch has one outstanding.
    expect(
      batchExact(
        resolveBatch(
          B,
          item,
          [inv('i1', { consumed: 3, completed: 3 })],
          new Map([['op-3', { batchId: B, invocationId: 'i1' }]]),
        ),
      ),
    ).toBe(false);
  });

  it('counts a message rejected twice (delivered twice) once, and adds counters a batch item holds itself', () => {
    const figures = resolveBatch(B, { ...batch, completed: 1, duplicates: 1 }, [
      inv('i1', { rejectedMessages: ['m-1'] }),
      inv('i2', { rejectedMessages: ['m-1'], completed: 2 }),
    ]);
    expect(figures).toMatchObject({ rejected: 1, completed: 3, duplicates: 1 });
  });
});

describe("the completion's CompletedBy and the page manifest", () => {
  it('reads who completed an operation from a stored result, as an object or as JSON, and nothing from others', () => {
    const by = { batchId: 'b', invocationId: 'i' };
    expect(completedByOf({ outcome: 'applied', completedBy: by })).toEqual(by);
    expect(completedByOf(JSON.stringify({ completedBy: by }))).toEqual(by);
    expect(completedByOf({ outcome: 'applied' })).toBeUndefined();
    expect(completedByOf('not json')).toBeUndefined();
    expect(completedByOf(undefined)).toBeUndefined();
  });

  it("round-trips a page's operation IDs through their stored form, far smaller than the IDs", () => {
    const ops = Array.from({ length: 500 }, (_, i) => `reconcile:acme:pay_${String(i).padStart(6, '0')}:2026-11-28`);
    const stored = encodePageOperations(ops);
    expect(decodePageOperations(stored)).toEqual(ops);
    expect(decodePageOperations(encodePageOperations([]))).toEqual([]);
    expect(stored.byteLength).toBeLessThan(ops.join('\n').length / 5);
  });

  it('keys a page attempt PAGES#<job>#<batchId> / <6-digit page>#<attempt> and an invocation INVOCATIONS#<job>#<batchId> / <invocationId>', () => {
    expect(ledgerKeys.page('job', 'b', 12, 'req-9')).toEqual({ pk: 'PAGES#job#b', sk: '000012#req-9' });
    expect(ledgerKeys.invocation('job', 'b', 'req-1')).toEqual({ pk: 'INVOCATIONS#job#b', sk: 'req-1' });
  });
});

describe('Function: drainPerMinute', () => {
  const now = Date.parse('2026-12-01T23:00:00.000Z');
  const minutesAgo = (m: number) => new Date(now - m * 60_000).toISOString();
  /** An invocation item that settled `completed` operations `m` minutes before now. */
  const settledAt = (m: number, completed: number) => ({ at: minutesAgo(m), completed });

  it('divides what settled in the window by the window for a batch older than it', () => {
    const items = [settledAt(2, 400), settledAt(9, 400), settledAt(11, 5_000)];
    expect(drainPerMinute(items, now - 30 * 60_000, now)).toBe(800 / DRAIN_WINDOW_MINUTES);
  });

  it('measures a batch younger than the window over its own life: a minute-old batch at 80 a minute drains at 80', () => {
    // The reviewer's night: one minute into 400 payments at 80 a minute, 80 settled. Over ten minutes that read 8.
    expect(drainPerMinute([settledAt(0.5, 80)], now - 60_000, now)).toBe(80);
    expect(drainPerMinute([settledAt(1, 60), settledAt(2, 60)], now - 3 * 60_000, now)).toBe(40);
  });

  it("measures over at least a minute, so a batch seconds old is not forecast at a burst's pace", () => {
    expect(drainPerMinute([settledAt(0.1, 30)], now - 10_000, now)).toBe(30);
  });

  it('measures over the whole window without a start, and is 0 when nothing settled in it', () => {
    expect(drainPerMinute([settledAt(1, 25)], undefined, now)).toBe(2.5);
    expect(drainPerMinute([settledAt(1, 25)], Number.NaN, now)).toBe(2.5);
    expect(drainPerMinute([settledAt(12, 25)], now - 60_000 * 60, now)).toBe(0);
  });

  it('counts every settled outcome: completed, completed elsewhere, dead-lettered and rejected', () => {
    const item = {
      at: minutesAgo(1),
      completed: 2,
      elsewhere: ['a'],
      deadLetteredOperations: ['b', 'c'],
      rejectedMessages: ['d'],
    };
    expect(drainPerMinute([item], now - 2 * 60_000, now)).toBe(3);
  });
});
