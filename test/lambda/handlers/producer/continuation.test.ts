import { logger } from '../../../../lambda/adapters/observability';
import { AdmissionStatus } from '../../../../lambda/adapters/admissionState';
import { Continuation, stepMessage } from '../../../../lambda/handlers/producer/continuation';
import { ADMISSION_QUEUE_URL, BATCH, FakePublisher, FakeRunState, JOB, NOW, NOW_MS, runState, step } from './fakes';

describe('Function: stepMessage', () => {
  it('names the message by its run and step, and brings its delay within what SQS accepts', () => {
    expect(stepMessage(step(2), 30)).toEqual({
      operationId: `admission:${BATCH}:2`,
      body: JSON.stringify(step(2)),
      delaySeconds: 30,
    });
    expect(stepMessage(step(2), 5_000).delaySeconds).toBe(900);
    expect(stepMessage(step(2), -3).delaySeconds).toBe(0);
  });
});

describe('Class: Continuation', () => {
  const OWNER = 'request-1/lease';
  const admitting = { status: AdmissionStatus.admitting };
  let store: FakeRunState;
  let publisher: FakePublisher;
  let continuation: Continuation;

  beforeAll(() => logger.setLogLevel('SILENT'));

  beforeEach(() => {
    store = new FakeRunState({ [BATCH]: runState({ leaseOwner: OWNER, leaseUntilMs: NOW_MS + 60_000 }) });
    publisher = new FakePublisher();
    const admissionQueueUrl = ADMISSION_QUEUE_URL;
    continuation = new Continuation({ jobName: JOB, admissionQueueUrl, runState: store, publisher, now: () => NOW });
  });

  describe('Method: chainNext', () => {
    it('ends the step with the next one due, sends that step, and marks it sent, in that order', async () => {
      const end = { status: AdmissionStatus.admitting, plannedUntilMs: NOW_MS + 20_000 };
      expect(await continuation.chainNext(step(0), OWNER, 5, end)).toBe(true);

      expect(store.methods()).toEqual(['endStep', 'markContinuation']);
      const nextStepAt = new Date(NOW_MS + 5_000).toISOString();
      expect(store.calls[0].args).toEqual([BATCH, 0, OWNER, { ...end, nextStepAt }]);
      expect(publisher.steps()).toEqual([{ step: step(1), delaySeconds: 5 }]);
      expect(store.runs.get(BATCH)).toMatchObject({ step: 1, continuationSent: 1 });
    });

    it('sends nothing when the lease was lost before the step ended', async () => {
      const warn = jest.spyOn(logger, 'warn');
      expect(await continuation.chainNext(step(0), 'someone-else', 5, admitting)).toBe(false);
      expect(publisher.calls).toEqual([]);
      expect(store.methods()).toEqual(['endStep']);
      expect(warn).toHaveBeenCalledWith(
        'lost the admission lease at the end of the step; the invocation that took it goes on',
        { step: 0 },
      );
    });

    it('leaves the continuation unmarked when the send fails, so a retry of the step sends it', async () => {
      publisher.failWith = () => new Error('SQS unavailable');
      await expect(continuation.chainNext(step(0), OWNER, 5, admitting)).rejects.toThrow('SQS unavailable');
      expect(store.runs.get(BATCH)).toMatchObject({ step: 1, continuationSent: -1 });
    });
  });

  describe('Method: leaveTakeover', () => {
    it('sends the same step again without marking a continuation: the run has not moved', async () => {
      await continuation.leaveTakeover(step(0), 41);
      expect(publisher.steps()).toEqual([{ step: step(0), delaySeconds: 41 }]);
      expect(store.methods()).toEqual([]);
    });
  });
});
