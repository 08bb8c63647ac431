import type { JobRuntimeSettings } from '../../../../lambda/core/constants';
import type { AnyJob } from '../../../../lambda/core/job';
import { logger } from '../../../../lambda/adapters/observability';
import { Admitter, timeReserveMs } from '../../../../lambda/handlers/producer/admitter';
import { Continuation } from '../../../../lambda/handlers/producer/continuation';
import { PagePublisher } from '../../../../lambda/handlers/producer/pagePublisher';
import type { ProducerAdmissionOptions } from '../../../../lambda/handlers/producer/stepPlan';
import type { HeldStep } from '../../../../lambda/handlers/producer/stepLease';
import { emptySummary } from '../../../../lambda/handlers/producer/summary';
import { fakeJobCalls, job as fakeJob } from '../../../fixtures/jobs/fake-job';
import {
  ADMISSION_QUEUE_URL,
  BATCH,
  context,
  FakePublisher,
  FakeRunState,
  JOB,
  NOW,
  NOW_MS,
  QUEUE_URL,
  recordMetrics,
  runState,
  settings,
  step,
} from './fakes';

const OWNER = 'request-1/lease';
const unlimited: ProducerAdmissionOptions = { ratePerSecond: undefined, horizonMs: 0, groupSize: 10 };
/** 1 start/s, a 30 s horizon, groups of 10: a step into an empty queue admits 30, visible at +0, +10 and +20 s. */
const paced: ProducerAdmissionOptions = { ratePerSecond: 1, horizonMs: 30_000, groupSize: 10 };

let store: FakeRunState;
let publisher: FakePublisher;

interface Setup {
  items?: number;
  admission?: ProducerAdmissionOptions;
  settings?: JobRuntimeSettings;
  queueDepth?: number;
}

function admitter(setup: Setup = {}) {
  const { items = 55, admission = unlimited, settings: jobSettings = settings(), queueDepth = 0 } = setup;
  const now = () => NOW;
  const admissionQueueUrl = ADMISSION_QUEUE_URL;
  return new Admitter({
    job: fakeJob as AnyJob,
    jobDeps: { items },
    settings: jobSettings,
    jobName: JOB,
    queueUrl: QUEUE_URL,
    queueDepth: async () => queueDepth,
    runState: store,
    admission,
    maxMessageBytes: 4096,
    fairnessField: undefined,
    pages: new PagePublisher({ jobName: JOB, queueUrl: QUEUE_URL, runState: store, publisher, now }),
    continuation: new Continuation({ jobName: JOB, admissionQueueUrl, runState: store, publisher, now }),
    reserveFraction: 0.3,
    reserveMs: 20_000,
    now,
  });
}

/** Step 0 held by OWNER for a minute. */
function held(budgetMs = 60_000): HeldStep {
  return { held: true, owner: OWNER, state: { ...store.runs.get(BATCH)! }, startedMs: NOW_MS, budgetMs };
}

const admitted = () => ({ ...emptySummary(step()), outcome: 'admitted' as const });

describe('Function: timeReserveMs', () => {
  it('keeps back a share of the budget, or a floor, but never more than half of it', () => {
    expect(timeReserveMs(900_000, 0.3, 20_000)).toBe(270_000);
    expect(timeReserveMs(60_000, 0.3, 20_000)).toBe(20_000);
    expect(timeReserveMs(15_000, 0.3, 20_000)).toBe(7_500);
  });
});

describe('Class: Admitter', () => {
  beforeAll(() => logger.setLogLevel('SILENT'));

  beforeEach(() => {
    jest.restoreAllMocks();
    recordMetrics();
    fakeJobCalls.reset();
    const leased = runState({ leaseOwner: OWNER, leaseUntilMs: NOW_MS + 60_000, startedAt: NOW.toISOString() });
    store = new FakeRunState({ [BATCH]: leased });
    publisher = new FakePublisher();
  });

  describe('Method: admit', () => {
    it('walks every page from the cursor without a rate, and ends the step with the run complete', async () => {
      const summary = await admitter().admit(step(), context(), held(), admitted());

      expect(summary).toEqual({ ...admitted(), pages: 3, discovered: 55, published: 55, finished: true });
      expect(fakeJobCalls.discover.map((d) => d.cursor)).toEqual([undefined, '25', '50']);
      expect(new Set(publisher.work().map((m) => m.delaySeconds))).toEqual(new Set([0]));
      expect(store.runs.get(BATCH)).toMatchObject({ step: 1, status: 'complete', pages: 3, discovered: 55 });
      expect(publisher.steps()).toEqual([]);
    });

    it('admits one horizon, each group delayed to its slot, and comes back at half a horizon', async () => {
      const summary = await admitter({ items: 100, admission: paced }).admit(step(), context(), held(), admitted());

      expect(summary).toMatchObject({ pages: 2, discovered: 30, continued: true, nextStepInSeconds: 5 });
      expect(summary.finished).toBe(false);
      expect(fakeJobCalls.discover.map((d) => d.pageSize)).toEqual([25, 5]);
      const groups = [...Array(10).fill(0), ...Array(10).fill(10), ...Array(10).fill(20)];
      expect(publisher.work().map((m) => m.delaySeconds)).toEqual(groups);
      expect(publisher.steps()).toEqual([{ step: step(1), delaySeconds: 5 }]);
      expect(store.runs.get(BATCH)).toMatchObject({ step: 1, status: 'admitting', plannedUntilMs: NOW_MS + 20_000 });
      expect(store.runs.get(BATCH)?.cursor).toBe('30');
    });

    it('admits nothing into a full queue, and comes back when it has drained to half the horizon', async () => {
      const summary = await admitter({ admission: paced, queueDepth: 90 }).admit(step(), context(), held(), admitted());
      expect(summary).toMatchObject({ pages: 0, published: 0, continued: true, nextStepInSeconds: 74 });
      expect(fakeJobCalls.discover).toEqual([]);
    });

    it('stops at maxPagesPerRun with a warning, and ends the run there without a continuation', async () => {
      const warn = jest.spyOn(logger, 'warn');
      const capped = settings({ pageSize: 10, maxPagesPerRun: 2 });
      const summary = await admitter({ items: 100, settings: capped }).admit(step(), context(), held(), admitted());

      expect(summary).toMatchObject({ pages: 2, published: 20, stoppedAtPageLimit: true });
      expect(summary).toMatchObject({ continued: false, finished: false });
      expect(store.runs.get(BATCH)).toMatchObject({ step: 1, status: 'page-limit', cursor: '20' });
      expect(warn).toHaveBeenCalledWith(
        'stopped at maxPagesPerRun with work remaining; raise it or the page size, or catch up',
        { maxPagesPerRun: 2, cursor: '20' },
      );
    });

    it('goes on at once through the admission queue when time runs low, after at least one page', async () => {
      // 100 s at the start: 30 s reserve. 25 s left after the first page.
      const summary = await admitter().admit(step(), context(25_000), held(100_000), admitted());
      expect(summary).toMatchObject({ pages: 1, discovered: 25, continued: true, nextStepInSeconds: 0 });
      expect(publisher.steps()).toEqual([{ step: step(1), delaySeconds: 0 }]);
    });

    it('stops, and ends nothing, when the lease is lost while publishing', async () => {
      const warn = jest.spyOn(logger, 'warn');
      jest.spyOn(store, 'commitPage').mockResolvedValue(false);
      const summary = await admitter().admit(step(), context(), held(), admitted());

      expect(summary).toMatchObject({ outcome: 'lease-lost', pages: 0, published: 0 });
      expect(fakeJobCalls.discover).toHaveLength(1);
      expect(store.methods()).not.toContain('endStep');
      expect(warn).toHaveBeenCalledWith(
        'lost the admission lease while publishing; the step continues in the invocation that took it',
        { step: 0 },
      );
    });

    it("sends no next step when the lease is lost at the step's end", async () => {
      jest.spyOn(store, 'endStep').mockResolvedValue(false);
      const summary = await admitter({ items: 100, admission: paced }).admit(step(), context(), held(), admitted());
      expect(summary).toMatchObject({ outcome: 'lease-lost', pages: 2, continued: false });
      expect(publisher.steps()).toEqual([]);
    });

    it('counts what each committed page published', async () => {
      const metrics = recordMetrics();
      await admitter({ items: 30 }).admit(step(), context(), held(), admitted());
      expect(metrics).toEqual({ Published: 30 });
    });
  });
});
