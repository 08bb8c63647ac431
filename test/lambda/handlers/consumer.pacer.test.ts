// The consumer's own logic (validate, claim, apply, acknowledge, defer) against a fake Pacer that grants or denies each
// start: no limiter, no AWS, no timers; what the consumer asks of its pacer and does with the answers.
import { IdempotencyItemAlreadyExistsError, IdempotencyItemNotFoundError } from '@aws-lambda-powertools/idempotency';
import { BasePersistenceLayer, type IdempotencyRecord } from '@aws-lambda-powertools/idempotency/persistence';
import { logger } from '../../../lambda/adapters/observability';
import type {
  InvocationPacing,
  PacedOutcome,
  PacedRecord,
  Pacer,
  StartAnswer,
} from '../../../lambda/core/pacing/pacer';
import { createDeferralPolicy } from '../../../lambda/core/deferral';
import { createConsumer } from '../../../lambda/handlers/consumer';
import { fakeJobCalls, job as fakeJob } from '../../fixtures/jobs/fake-job';
import { lambdaContext, sqsEvent } from '../../support/lambdaEvents';
import {
  FakeCompletedLookup,
  FakeLedger,
  FakePublisher,
  message,
  NOW,
  operationId,
  record,
  recordMetrics,
} from './consumer/fakes';

/** Idempotency records in memory, as Powertools keeps them in DynamoDB: a live record refuses a second claim. */
class MemoryPersistence extends BasePersistenceLayer {
  readonly records = new Map<string, IdempotencyRecord>();

  protected async _getRecord(key: string): Promise<IdempotencyRecord> {
    const found = this.records.get(key);
    if (!found) throw new IdempotencyItemNotFoundError();
    return found;
  }

  protected async _putRecord(record: IdempotencyRecord): Promise<void> {
    const existing = this.records.get(record.idempotencyKey);
    if (existing && !existing.isExpired()) throw new IdempotencyItemAlreadyExistsError('exists', existing);
    this.records.set(record.idempotencyKey, record);
  }

  protected async _updateRecord(record: IdempotencyRecord): Promise<void> {
    this.records.set(record.idempotencyKey, record);
  }

  protected async _deleteRecord(record: IdempotencyRecord): Promise<void> {
    this.records.delete(record.idempotencyKey);
  }
}

/** A start the fake grants: what the consumer did with it. */
interface GrantedStart {
  startAtMs: number;
  used: number;
  givenBack: number;
  ended: boolean;
}

/**
 * A pacer whose answers a test scripts: the block's grant (or the limiter's error) and, per record in turn, a start or
 * a wait. It keeps what it was asked and told.
 */
class FakePacer implements Pacer {
  readonly spacingMs = 100;
  readonly clock = () => NOW.getTime();
  readonly keyField: string | undefined = undefined;
  block: { granted: number; waitMs: number } | Error | undefined;
  /** Per start asked, in turn: 'start' grants it, a number is the wait it is deferred by. Default: 'start'. */
  readonly answers: ('start' | number)[] = [];
  /** Makes a granted start report missed (the claim pushed it past its slot). */
  missed = false;
  readonly asked: PacedRecord[] = [];
  readonly starts: GrantedStart[] = [];
  readonly reports: [string | undefined, PacedOutcome][] = [];
  finished = 0;

  begin(): InvocationPacing {
    return {
      paced: this.block !== undefined,
      key: 'fake-provider',
      runLeft: 0,
      backfillGated: async () => false,
      usableBlock: () => 10,
      acquireBlock: async () => {
        if (this.block instanceof Error) throw this.block;
        return this.block as { granted: number; waitMs: number };
      },
      start: async (record: PacedRecord): Promise<StartAnswer> => {
        this.asked.push(record);
        const answer = this.answers.shift() ?? 'start';
        if (answer !== 'start') return { waitMs: answer };
        const granted: GrantedStart = { startAtMs: this.clock(), used: 0, givenBack: 0, ended: false };
        this.starts.push(granted);
        return {
          start: {
            startAtMs: granted.startAtMs,
            readyAtMs: granted.startAtMs,
            missed: () => this.missed,
            use: () => void granted.used++,
            giveBack: () => void granted.givenBack++,
            end: async () => {
              granted.ended = true;
            },
          },
        };
      },
      report: (key, outcome) => void this.reports.push([key, outcome]),
      finish: async () => void this.finished++,
      unused: () => 0,
    };
  }

  recordCycle(): void {}

  /** The claims' durations the consumer reported, one per record whose claim was taken. */
  readonly claims: number[] = [];
  recordClaim(ms: number): void {
    this.claims.push(ms);
  }

  paceMs(): number {
    return 0;
  }
}

let pacer: FakePacer;
let publisher: FakePublisher;
let persistence: MemoryPersistence;

function consumer() {
  return createConsumer({
    job: fakeJob,
    jobDeps: { items: 0 },
    queueUrl: 'https://sqs.local/queue',
    dlqUrl: 'https://sqs.local/dlq',
    idempotencyTableName: 'unused',
    idempotencyTtlSeconds: 86_400,
    maxMessageBytes: 2048,
    ledger: new FakeLedger(),
    pacer,
    publisher,
    persistenceStore: persistence,
    completedLookup: new FakeCompletedLookup(),
    // No jitter: a paced deferral waits exactly the pacer's hint, rounded up to seconds.
    deferralPolicy: createDeferralPolicy({ random: () => 0 }),
    now: () => NOW,
  });
}

/** The re-published copies of the messages, by operation ID. */
const republished = () =>
  Object.fromEntries(
    publisher.calls
      .flatMap((c) => c.messages)
      .map((m) => [m.operationId, JSON.parse(m.body) as Record<string, unknown>]),
  );

describe('Function: createConsumer (on a fake Pacer)', () => {
  beforeEach(() => {
    pacer = new FakePacer();
    publisher = new FakePublisher();
    persistence = new MemoryPersistence();
    fakeJobCalls.reset();
    recordMetrics();
    jest.spyOn(logger, 'warn').mockImplementation(() => undefined);
    jest.spyOn(logger, 'info').mockImplementation(() => undefined);
  });
  afterEach(() => jest.restoreAllMocks());

  it('asks a start for valid records only, applies and acknowledges each granted one, reports success', async () => {
    const response = await consumer()(sqsEvent(record('a'), record('bad', '{not json'), record('b')), lambdaContext());

    expect(response).toEqual({ batchItemFailures: [] });
    expect(pacer.asked).toEqual([{ priority: 'live' }, { priority: 'live' }]);
    expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual([operationId('a'), operationId('b')]);
    expect(pacer.starts.map((s) => [s.used, s.givenBack, s.ended])).toEqual([
      [1, 0, true],
      [1, 0, true],
    ]);
    expect(pacer.reports).toEqual([
      [undefined, 'success'],
      [undefined, 'success'],
    ]);
    expect(pacer.finished).toBe(1);
    expect(publisher.calls).toEqual([]);
    // Each started record's claim is timed for the block sizing (ApplyTimeEstimator.usableBlock).
    expect(pacer.claims).toHaveLength(2);
    expect(pacer.claims.every((ms) => ms >= 0)).toBe(true);
  });

  it('defers a record the pacer denies a start, unclaimed, by the wait it gave, as a paced deferral', async () => {
    pacer.answers.push(1_500);
    const response = await consumer()(sqsEvent(record('denied'), record('granted')), lambdaContext());

    expect(response).toEqual({ batchItemFailures: [] });
    expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual([operationId('granted')]);
    expect(persistence.records.size).toBe(1);
    expect(publisher.calls[0].messages[0].delaySeconds).toBe(2);
    expect(republished()[operationId('denied')]).toMatchObject({ attempt: 0, pacedDeferrals: 1 });
  });

  it('defers the records past a partial block together, before any start, spread by the spacing', async () => {
    pacer.block = { granted: 1, waitMs: 3_000 };
    const response = await consumer()(sqsEvent(record('first'), record('second'), record('third')), lambdaContext());

    expect(response).toEqual({ batchItemFailures: [] });
    expect(pacer.asked).toHaveLength(1);
    expect(fakeJobCalls.apply.map((r) => r.operationId)).toEqual([operationId('first')]);
    // One batch: the limiter's hint (3 s), and one spacing more for the record behind (3.1 s, rounded up to seconds).
    expect(publisher.calls).toHaveLength(1);
    expect(publisher.calls[0].messages.map((m) => m.delaySeconds)).toEqual([3, 4]);
  });

  it('hands the due records back to SQS, unclaimed, when the block cannot be asked for', async () => {
    jest.spyOn(logger, 'error').mockImplementation(() => undefined);
    pacer.block = new Error('limiter table gone');
    const response = await consumer()(sqsEvent(record('a')), lambdaContext());

    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'msg-a' }]);
    expect(pacer.asked).toEqual([]);
    expect(persistence.records.size).toBe(0);
  });

  it('reports a throttle to the pacer and defers the record against its deferral budget', async () => {
    const throttled = record('t', message('t', { resource: { id: 't', behaviour: 'throttled' } }));
    const response = await consumer()(sqsEvent(throttled), lambdaContext());

    expect(response).toEqual({ batchItemFailures: [] });
    expect(pacer.reports).toEqual([[undefined, 'throttle']]);
    expect(republished()[operationId('t')]).toMatchObject({ attempt: 1 });
    // The claim was released, so the re-published copy applies again.
    expect(persistence.records.size).toBe(0);
  });

  it('gives the slot back when the claim finds the operation completed, and starts no call', async () => {
    await consumer()(sqsEvent(record('dup')), lambdaContext());
    const response = await consumer()(sqsEvent(record('dup')), lambdaContext());

    expect(response).toEqual({ batchItemFailures: [] });
    expect(fakeJobCalls.apply).toHaveLength(1);
    expect(pacer.starts[1]).toMatchObject({ used: 1, givenBack: 1, ended: true });
    expect(pacer.reports).toEqual([[undefined, 'success']]);
  });

  it('gives up a start missed by the time the claim is held: claim released, slot given back, deferred', async () => {
    pacer.missed = true;
    const response = await consumer()(sqsEvent(record('late')), lambdaContext());

    expect(response).toEqual({ batchItemFailures: [] });
    expect(fakeJobCalls.apply).toEqual([]);
    expect(persistence.records.size).toBe(0);
    expect(pacer.starts[0]).toMatchObject({ givenBack: 1, ended: true });
    expect(republished()[operationId('late')]).toMatchObject({ attempt: 0, pacedDeferrals: 1 });
  });
});
