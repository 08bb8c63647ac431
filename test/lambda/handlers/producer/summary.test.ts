import { logger } from '../../../../lambda/adapters/observability';
import { emptySummary, LOGGED_INVALID_ROWS, reportPage } from '../../../../lambda/handlers/producer/summary';
import { BATCH, recordMetrics, step } from './fakes';

const rows = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ key: `row-${i}`, reasons: ['id: must not be empty'] }));

describe('Function: emptySummary', () => {
  it('is stale, with nothing done, until the step is held', () => {
    expect(emptySummary(step(3))).toEqual({
      batchId: BATCH,
      businessDate: '2026-11-28',
      step: 3,
      outcome: 'stale',
      pages: 0,
      discovered: 0,
      published: 0,
      continued: false,
      finished: false,
      stoppedAtPageLimit: false,
    });
  });
});

describe('Function: reportPage', () => {
  beforeAll(() => logger.setLogLevel('SILENT'));
  beforeEach(() => jest.restoreAllMocks());

  it('adds each page to the summary and counts what it published', () => {
    const metrics = recordMetrics();
    const summary = emptySummary(step());
    reportPage(summary, { page: 1, discovered: 25, published: 25, invalid: [], more: true });
    reportPage(summary, { page: 2, discovered: 5, published: 4, invalid: [], more: false });
    expect(summary).toMatchObject({ pages: 2, discovered: 30, published: 29 });
    expect(summary).not.toHaveProperty('invalidRows');
    expect(metrics).toEqual({ Published: 29 });
  });

  it('counts invalid rows apart and warns naming the first few, as the ledger holds them all', () => {
    const metrics = recordMetrics();
    const warn = jest.spyOn(logger, 'warn');
    const info = jest.spyOn(logger, 'info');
    const summary = emptySummary(step());
    reportPage(summary, { page: 4, discovered: 3, published: 3, invalid: rows(12), more: false });
    reportPage(summary, { page: 5, discovered: 0, published: 0, invalid: rows(1), more: false });

    expect(summary.invalidRows).toBe(13);
    expect(metrics).toEqual({ Published: 3, DiscoveryRowsRejected: 13 });
    expect(warn).toHaveBeenCalledWith(
      'source rows that cannot become messages were recorded in the run ledger and skipped; `ops audit` lists them',
      { page: 4, invalidRows: 12, firstRows: rows(12).slice(0, LOGGED_INVALID_ROWS) },
    );
    expect(LOGGED_INVALID_ROWS).toBe(10);
    expect(info).toHaveBeenCalledWith('page published', { page: 4, published: 3, more: false });
  });
});
