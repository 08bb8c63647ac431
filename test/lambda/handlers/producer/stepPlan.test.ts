import { logger } from '../../../../lambda/adapters/observability';
import { planStep, type StepPlanOptions } from '../../../../lambda/handlers/producer/stepPlan';
import { FakeRunState, JOB, NOW_MS, QUEUE_URL, runState, step } from './fakes';

/** 1 start/s and a 30 s horizon, as the handler tests pace. */
const paced = { ratePerSecond: 1, horizonMs: 30_000, groupSize: 10 };

describe('Function: planStep', () => {
  let store: FakeRunState;
  let queueDepth: jest.Mock<Promise<number>, [string]>;
  const options = (admission: StepPlanOptions['admission'] = paced): StepPlanOptions => ({
    jobName: JOB,
    queueUrl: QUEUE_URL,
    queueDepth,
    runState: store,
    admission,
  });
  const plan = (state = runState(), admitting = step()) => planStep(options(), admitting, state, NOW_MS);

  beforeAll(() => logger.setLogLevel('SILENT'));

  beforeEach(() => {
    jest.restoreAllMocks();
    store = new FakeRunState();
    queueDepth = jest.fn(async (_queueUrl: string) => 0);
  });

  it('admits everything at once without a rate, reading nothing', async () => {
    const unlimited = options({ ratePerSecond: undefined, horizonMs: 0, groupSize: 1 });
    expect(await planStep(unlimited, step(), runState(), NOW_MS)).toEqual({ admit: Infinity, firstVisibleMs: NOW_MS });
    expect(queueDepth).not.toHaveBeenCalled();
  });

  it('admits one horizon into an empty queue, and after what the queue holds', async () => {
    expect(await plan()).toEqual({ admit: 30, firstVisibleMs: NOW_MS });
    queueDepth.mockResolvedValue(20);
    expect(await plan()).toEqual({ admit: 10, firstVisibleMs: NOW_MS + 20_000 });
    expect(queueDepth).toHaveBeenCalledWith(QUEUE_URL);
  });

  it("plans after the run's own last slot", async () => {
    const afterOwn = await plan(runState({ plannedUntilMs: NOW_MS + 20_000 }));
    expect(afterOwn).toEqual({ admit: 9, firstVisibleMs: NOW_MS + 21_000 });
  });

  it('lets a live run queue only behind what is not backfill, and a catch-up behind all', async () => {
    queueDepth.mockResolvedValue(40);
    store.backfillOutstanding = jest.fn(async () => 30);
    expect(await plan()).toEqual({ admit: 20, firstVisibleMs: NOW_MS + 10_000 });
    expect(await plan(runState(), step(0, { backfill: true }))).toEqual({ admit: 0, firstVisibleMs: NOW_MS + 40_000 });
    expect(store.backfillOutstanding).toHaveBeenCalledTimes(1);
  });

  it('counts the whole queue when the backfill figures cannot be read', async () => {
    const warn = jest.spyOn(logger, 'warn');
    queueDepth.mockResolvedValue(20);
    store.backfillOutstanding = async () => {
      throw new Error('ledger unavailable');
    };
    expect(await plan()).toMatchObject({ admit: 10 });
    expect(warn).toHaveBeenCalledWith("could not read the backfill runs' figures; admission counts the whole queue", {
      error: new Error('ledger unavailable'),
    });
  });

  it('logs the plan', async () => {
    const info = jest.spyOn(logger, 'info');
    queueDepth.mockResolvedValue(5);
    await plan(runState(), step(2));
    const firstVisibleAt = new Date(NOW_MS + 5_000).toISOString();
    expect(info).toHaveBeenCalledWith('admission step', { step: 2, queueDepth: 5, admit: 25, firstVisibleAt });
  });
});
