import { AdmissionStatus } from '../../../../lambda/adapters/admissionState';
import { logger } from '../../../../lambda/adapters/observability';
import { Continuation } from '../../../../lambda/handlers/producer/continuation';
import {
  AdmissionStateError,
  StepLease,
  type HeldStep,
  type PassedStep,
} from '../../../../lambda/handlers/producer/stepLease';
import { emptySummary } from '../../../../lambda/handlers/producer/summary';
import {
  ADMISSION_QUEUE_URL,
  BATCH,
  context,
  FakePublisher,
  FakeRunState,
  JOB,
  NOW,
  NOW_MS,
  runState,
  step,
} from './fakes';

let store: FakeRunState;
let publisher: FakePublisher;
let lease: StepLease;

function build(runs: Record<string, ReturnType<typeof runState>>) {
  store = new FakeRunState(runs);
  publisher = new FakePublisher();
  const now = () => NOW;
  const admissionQueueUrl = ADMISSION_QUEUE_URL;
  const continuation = new Continuation({ jobName: JOB, admissionQueueUrl, runState: store, publisher, now });
  lease = new StepLease({ jobName: JOB, runState: store, continuation, now });
}

const take = (n: number, direct = false, remaining = 60_000) =>
  lease.take(step(n), context(remaining), direct, emptySummary(step(n)));
const inProgress = (n: number) => ({ held: false, summary: { ...emptySummary(step(n)), outcome: 'in-progress' } });

describe('Class: StepLease', () => {
  beforeAll(() => logger.setLogLevel('SILENT'));
  beforeEach(() => jest.restoreAllMocks());

  describe('Method: take', () => {
    it('holds a due step for as long as the invocation can run, owned by this invocation alone', async () => {
      build({ [BATCH]: runState({ step: 1, cursor: '25' }) });
      const taken = (await take(1, false, 45_000)) as HeldStep;

      const owner = expect.stringMatching(/^request-1\/[0-9a-f-]{36}$/);
      const state = runState({ step: 1, cursor: '25' });
      expect(taken).toEqual({ held: true, owner, state, startedMs: NOW_MS, budgetMs: 45_000 });
      const leased = store.calls.find((c) => c.method === 'lease')?.args;
      expect(leased).toEqual([BATCH, 1, taken.owner, NOW_MS, NOW_MS + 45_000]);
    });

    it('lets only one of two invocations with one request ID (a duplicated delivery) hold the step', async () => {
      build({ [BATCH]: runState() });
      expect(await take(0)).toMatchObject({ held: true });
      expect(await take(0)).toEqual(inProgress(0));
    });

    it('fails a step whose run has no state, or that arrives before the run reaches it', async () => {
      build({});
      const missing = `admission step 0 of ${BATCH} has no run state in the ledger (expired or deleted); catch up the date`;
      await expect(take(0)).rejects.toThrow(new AdmissionStateError(missing, BATCH, 0));
      build({ [BATCH]: runState({ step: 1 }) });
      const error = (await take(3).catch((e: unknown) => e)) as AdmissionStateError;
      expect(error.message).toBe(`admission step 3 of ${BATCH} arrived before step 1 ended`);
      expect([error.batchId, error.step]).toEqual([BATCH, 3]);
    });

    it('passes over a step the run is past, or of a run that stopped admitting, sending nothing', async () => {
      const info = jest.spyOn(logger, 'info');
      build({ [BATCH]: runState({ step: 2, continuationSent: 2 }) });
      expect(await take(1)).toEqual({ held: false, summary: emptySummary(step(1)) });
      build({ [BATCH]: runState({ step: 1, status: AdmissionStatus.complete }) });
      expect(await take(1)).toEqual({ held: false, summary: emptySummary(step(1)) });
      expect(publisher.calls).toEqual([]);
      expect(store.methods()).not.toContain('lease');
      const facts = { step: 1, runStep: 1, status: 'complete' };
      expect(info).toHaveBeenCalledWith('admission step already taken; nothing to do', facts);
    });

    it('sends the continuation a crashed step never sent, when it is due', async () => {
      const nextStepAt = new Date(NOW_MS + 4_500).toISOString();
      build({ [BATCH]: runState({ step: 1, continuationSent: 0, nextStepAt }) });
      const passed = (await take(0)) as PassedStep;
      expect(passed.summary).toMatchObject({ outcome: 'stale', continued: true, nextStepInSeconds: 5 });
      expect(publisher.steps()).toEqual([{ step: step(1), delaySeconds: 5 }]);
      expect(store.runs.get(BATCH)).toMatchObject({ continuationSent: 1 });
    });

    it('leaves a step held elsewhere to its holder; a direct call leaves a takeover step for later', async () => {
      const held = { leaseOwner: 'other/lease', leaseUntilMs: NOW_MS + 40_000 };
      build({ [BATCH]: runState(held) });
      expect(await take(0, false)).toEqual(inProgress(0));
      expect(publisher.calls).toEqual([]);

      const direct = (await take(0, true)) as PassedStep;
      expect(direct.summary).toMatchObject({ outcome: 'in-progress', continued: true, nextStepInSeconds: 41 });
      expect(publisher.steps()).toEqual([{ step: step(0), delaySeconds: 41 }]);
      // Not a continuation: the run's step has not moved.
      expect(store.methods()).not.toContain('markContinuation');
    });

    it('reads the run again when the lease is refused: a step that ended meanwhile is stale', async () => {
      build({ [BATCH]: runState() });
      jest.spyOn(store, 'lease').mockImplementation(async () => {
        Object.assign(store.runs.get(BATCH)!, { step: 1, continuationSent: 1 });
        return false;
      });
      expect(await take(0, true)).toEqual({ held: false, summary: emptySummary(step(0)) });
      expect(publisher.calls).toEqual([]);
    });
  });

  describe('Method: release', () => {
    it('gives the lease up', async () => {
      build({ [BATCH]: runState() });
      const { owner } = (await take(0)) as HeldStep;
      await lease.release(step(0), owner);
      expect(store.runs.get(BATCH)).not.toHaveProperty('leaseOwner');
    });

    it("only warns when it cannot: the lease then expires at its holder's deadline", async () => {
      build({ [BATCH]: runState() });
      const warn = jest.spyOn(logger, 'warn');
      jest.spyOn(store, 'release').mockRejectedValue(new Error('ledger unavailable'));
      await expect(lease.release(step(0), 'request-1/lease')).resolves.toBeUndefined();
      expect(warn).toHaveBeenCalledWith(
        'could not release the admission lease of a failed step; it expires at the deadline',
        { step: 0, error: new Error('ledger unavailable') },
      );
    });
  });
});
