import type { DateRun } from '../../../../lambda/core/admission';
import { AdmissionStatus } from '../../../../lambda/adapters/admissionState';
import { logger } from '../../../../lambda/adapters/observability';
import { Continuation } from '../../../../lambda/handlers/producer/continuation';
import { RunOrder } from '../../../../lambda/handlers/producer/runOrder';
import { emptySummary } from '../../../../lambda/handlers/producer/summary';
import { ADMISSION_QUEUE_URL, BATCH, FakePublisher, FakeRunState, JOB, NOW, NOW_MS, runState, step } from './fakes';

const EARLIER = 'fake-job:2026-11-28:20261128T010000Z';
const OWNER = 'request-1/lease';
const startedAt = (msAgo: number) => new Date(NOW_MS - msAgo).toISOString();
const admitted = () => ({ ...emptySummary(step()), outcome: 'admitted' as const });

let store: FakeRunState;
let publisher: FakePublisher;

function order(rate: number | 'unlimited' = 1) {
  const ratePerSecond = rate === 'unlimited' ? undefined : rate;
  const admissionQueueUrl = ADMISSION_QUEUE_URL;
  const now = () => NOW;
  const continuation = new Continuation({ jobName: JOB, admissionQueueUrl, runState: store, publisher, now });
  return new RunOrder({ jobName: JOB, runState: store, continuation, ratePerSecond, groupSize: 10, now });
}

/** This run, started now, and an earlier run of the date. */
function dateRuns(earlier: Partial<DateRun>): DateRun[] {
  return [
    { batchId: BATCH, startedAt: NOW.toISOString(), admission: 'admitting' } as DateRun,
    { batchId: EARLIER, startedAt: startedAt(60_000), admission: 'admitting', ...earlier } as DateRun,
  ];
}

describe('Class: RunOrder', () => {
  beforeAll(() => logger.setLogLevel('SILENT'));

  beforeEach(() => {
    jest.restoreAllMocks();
    const leased = runState({ startedAt: NOW.toISOString(), leaseOwner: OWNER, leaseUntilMs: NOW_MS + 60_000 });
    store = new FakeRunState({ [BATCH]: leased });
    publisher = new FakePublisher();
  });

  describe('Method: earlierRun', () => {
    const self = () => runState({ startedAt: NOW.toISOString() });

    it('names an earlier run of the date whose chain is alive', async () => {
      const runs = dateRuns({ leaseUntilMs: NOW_MS + 30_000 });
      store.dateRuns = jest.fn(async () => runs);
      const ahead = await order().earlierRun(step(), self(), NOW_MS, 60_000);
      expect(ahead).toMatchObject({ run: { batchId: EARLIER }, reason: 'admitting' });
      expect(store.dateRuns).toHaveBeenCalledWith(JOB, '2026-11-28');
    });

    it('names none when the earlier run has finished and its last slots are behind', async () => {
      store.dateRuns = async () => dateRuns({ admission: 'complete', plannedUntilMs: NOW_MS - 20_000 });
      expect(await order().earlierRun(step(), self(), NOW_MS, 60_000)).toBeUndefined();
    });

    it("waits out one group's slots after an ended run's plan, at the run's rate", async () => {
      store.dateRuns = async () => dateRuns({ admission: 'complete', plannedUntilMs: NOW_MS - 5_000 });
      // Groups of 10 at 1/s: the last group's starts go on for 10 s after its plan's end.
      const ahead = await order(1).earlierRun(step(), self(), NOW_MS, 60_000);
      expect(ahead).toMatchObject({ reason: 'plan', resumeAtMs: NOW_MS + 5_000 });
      // Unlimited admission plans no slots.
      expect(await order('unlimited').earlierRun(step(), self(), NOW_MS, 60_000)).toBeUndefined();
    });

    it("waits for none when the store cannot list a date's runs, or the read fails", async () => {
      expect(await order().earlierRun(step(), self(), NOW_MS, 60_000)).toBeUndefined();
      const warn = jest.spyOn(logger, 'warn');
      store.dateRuns = async () => {
        throw new Error('ledger unavailable');
      };
      expect(await order().earlierRun(step(), self(), NOW_MS, 60_000)).toBeUndefined();
      expect(warn).toHaveBeenCalledWith(
        'could not read the runs of the business date; this step admits without waiting for an earlier one',
        { error: new Error('ledger unavailable') },
      );
    });
  });

  describe('Method: wait', () => {
    const earlier: DateRun = { batchId: EARLIER, startedAt: startedAt(60_000), admission: 'admitting' };
    const ahead = { run: earlier, reason: 'admitting' as const, resumeAtMs: NOW_MS + 12_000 };

    it('admits nothing and chains the next step for when the earlier run may be done, naming it', async () => {
      const summary = await order().wait(step(), ahead, OWNER, admitted());
      expect(summary).toMatchObject({ outcome: 'waiting', pages: 0, continued: true, nextStepInSeconds: 12 });
      expect(store.calls.find((c) => c.method === 'endStep')?.args[3]).toEqual({
        status: AdmissionStatus.admitting,
        waitingFor: EARLIER,
        nextStepAt: new Date(NOW_MS + 12_000).toISOString(),
      });
      expect(publisher.steps()).toEqual([{ step: step(1), delaySeconds: 12 }]);
    });

    it('logs whether the earlier run is still admitting or only its last slots are ahead', async () => {
      const info = jest.spyOn(logger, 'info');
      await order().wait(step(), { ...ahead, reason: 'plan' }, OWNER, admitted());
      expect(info).toHaveBeenCalledWith('admission waits for an earlier run of the business date', {
        step: 0,
        earlierBatchId: EARLIER,
        earlierRun: 'admission ended, its last slots still ahead',
        delaySeconds: 12,
      });
    });

    it('reports the lease lost, sending nothing, when another invocation took the step over', async () => {
      const summary = await order().wait(step(), ahead, 'someone-else', admitted());
      expect(summary.outcome).toBe('lease-lost');
      expect(publisher.calls).toEqual([]);
    });
  });
});
