import { FutureBusinessDateError } from '../../../../lambda/core/businessDate';
import type { AnyJob } from '../../../../lambda/core/job';
import { logger } from '../../../../lambda/adapters/observability';
import { RunStart } from '../../../../lambda/handlers/producer/runStart';
import { job as fakeJob } from '../../../fixtures/jobs/fake-job';
import { BATCH, FakeRunState, JOB, NOW, runState, settings, step } from './fakes';

const SCHEDULED = '2026-11-29T01:00:00Z';
let store: FakeRunState;

function runStart(overrides: { job?: AnyJob; ratePerSecond?: number } = {}) {
  const job = overrides.job ?? (fakeJob as AnyJob);
  const { ratePerSecond } = overrides;
  const jobDeps = { items: 40 };
  return new RunStart({ job, jobDeps, settings: settings(), runState: store, ratePerSecond, now: () => NOW });
}

describe('Class: RunStart', () => {
  beforeAll(() => logger.setLogLevel('SILENT'));

  beforeEach(() => {
    jest.restoreAllMocks();
    store = new FakeRunState();
  });

  describe('Method: identify', () => {
    it('names a scheduled run by its scheduled time, in the business date it falls in', () => {
      expect(runStart().identify({ scheduledTime: SCHEDULED })).toEqual({ businessDate: '2026-11-28', batchId: BATCH });
    });

    it('honours a given date and batch, and names a run without a schedule as a new manual batch', () => {
      const given = { businessDate: '2026-10-01', batchId: 'fake-job:2026-10-01:mine' };
      expect(runStart().identify(given)).toEqual(given);
      const manual = runStart().identify({ businessDate: '2026-10-01' });
      expect(manual.batchId).toMatch(/^fake-job:2026-10-01:manual-[0-9a-f]{8}$/);
      // No date and no schedule: the date now falls in.
      expect(runStart().identify({}).businessDate).toBe('2026-11-28');
    });

    it("refuses a business date after the job's latest, logging it", () => {
      const error = jest.spyOn(logger, 'error');
      const refused = new FutureBusinessDateError(JOB, '2027-12-04', '2026-11-28', settings());
      expect(() => runStart().identify({ scheduledTime: '2027-12-05T01:00:00Z' })).toThrow(refused);
      expect(error).toHaveBeenCalledWith('refused a business date in the future; nothing was admitted', {
        businessDate: '2027-12-04',
        error: expect.objectContaining({ name: 'FutureBusinessDateError' }),
      });
    });
  });

  describe('Method: refuseFuture', () => {
    it('lets the latest business date through and refuses the next', () => {
      expect(() => runStart().refuseFuture('2026-11-28')).not.toThrow();
      expect(() => runStart().refuseFuture('2026-11-29')).toThrow(
        'business date 2026-11-29 is in the future: the latest for fake-job now is 2026-11-28 ' +
          '(Europe/Berlin, offset -1)',
      );
    });
  });

  describe('Method: begin', () => {
    const run = { batchId: BATCH, businessDate: '2026-11-28' };

    it("writes the run's start facts with the job's eligible count and the rate, and returns step 0", async () => {
      const first = await runStart({ ratePerSecond: 80 / 60 }).begin(run, { scheduledTime: SCHEDULED });
      expect(first).toEqual(step(0, { scheduledTime: SCHEDULED }));
      expect(store.methods()).toEqual(['read', 'ensure']);
      const facts = { businessDate: '2026-11-28', scheduledTime: SCHEDULED, startedAt: NOW.toISOString() };
      expect(store.calls[1].args).toEqual([BATCH, { ...facts, admissionRatePerMinute: 80, eligible: 40 }]);
    });

    it('marks a catch-up backfill, on the run and its step', async () => {
      const first = await runStart().begin(run, { businessDate: '2026-11-28', backfill: true });
      expect(first).toEqual(step(0, { backfill: true }));
      expect(store.calls[1].args[1]).toMatchObject({ backfill: true, admissionRatePerMinute: undefined });
    });

    it('counts nothing for a run that already has its state (a repeated event)', async () => {
      const countEligible = jest.fn(async () => 40);
      store.runs.set(BATCH, runState({ step: 1 }));
      await runStart({ job: { ...(fakeJob as AnyJob), countEligible } }).begin(run, { scheduledTime: SCHEDULED });
      expect(countEligible).not.toHaveBeenCalled();
      expect(store.calls[1].args[1]).toMatchObject({ eligible: undefined });
    });

    it('starts the run without a count the job cannot give', async () => {
      const warn = jest.spyOn(logger, 'warn');
      const countEligible = async () => {
        throw new Error('index unavailable');
      };
      await runStart({ job: { ...(fakeJob as AnyJob), countEligible } }).begin(run, { scheduledTime: SCHEDULED });
      expect(store.calls[1].args[1]).toMatchObject({ eligible: undefined });
      expect(warn).toHaveBeenCalledWith(
        'could not count the eligible records; ops status will not project the finish',
        { error: new Error('index unavailable') },
      );
      const { countEligible: _none, ...uncounting } = fakeJob as AnyJob;
      await runStart({ job: uncounting as AnyJob }).begin({ ...run, batchId: `${BATCH}-2` }, {});
      expect(store.calls[3].args[1]).toMatchObject({ eligible: undefined });
    });
  });
});
