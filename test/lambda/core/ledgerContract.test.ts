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
  ledgerKeys,
  ledgerPartition,
} from '../../../lambda/core/ledgerContract';

describe('the ledger key layout', () => {
  it('keys a batch BATCH#<job> / <batchId>', () => {
    expect(ledgerKeys.batch('payment-reconciliation', 'payment-reconciliation:2026-11-28:20261129T020000Z')).toEqual({
      pk: 'BATCH#payment-reconciliation',
      sk: 'payment-reconciliation:2026-11-28:20261129T020000Z',
    });
  });

  it('keys a rejection REJECTED#<job> / <ISO time>#<messageId>', () => {
    expect(ledgerKeys.rejection('fake-job', new Date('2026-11-29T02:00:01.5Z'), 'm-1')).toEqual({ pk: 'REJECTED#fake-job', sk: '2026-11-29T02:00:01.500Z#m-1' });
  });

  it('names the partitions a job\'s batches and rejections are listed from, the same as the items\' keys', () => {
    expect(ledgerKeys.batchPartition('fake-job')).toBe('BATCH#fake-job');
    expect(ledgerKeys.rejectionPartition('fake-job')).toBe('REJECTED#fake-job');
    expect(ledgerPartition(LedgerItemKind.batch, 'fake-job')).toBe(ledgerKeys.batch('fake-job', 'b').pk);
    expect(ledgerPartition(LedgerItemKind.rejection, 'fake-job')).toBe(ledgerKeys.rejection('fake-job', new Date(0), 'm').pk);
  });

  it('reads a batch item\'s batch ID from its sort key', () => {
    expect(batchIdOf({ pk: 'BATCH#fake-job', sk: 'fake-job:2026-11-28:manual-ab12' } as { sk: unknown })).toBe('fake-job:2026-11-28:manual-ab12');
  });
});

describe('the batch counters', () => {
  it('lists every counter the ledger adds, in its write order', () => {
    expect(BATCH_COUNTERS).toEqual(['discovered', 'published', 'consumed', 'completed', 'duplicates', 'retries', 'rejected', 'deferred', 'throttled', 'deadLettered']);
  });

  it('reads a stored item\'s counters, an absent or non-numeric one as 0, and nothing else', () => {
    expect(batchCountersOf({ sk: 'b', discovered: 5, completed: 3, rejected: 'x', admission: 'complete', pages: 2 })).toEqual({
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
    const killed = { discovered: 10, completed: 5, duplicates: 2, rejected: 2, deadLettered: 1, admission: AdmissionStatus.complete };
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
