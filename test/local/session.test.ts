// The local session on the engine's synthesized test app (test/fixtures/app, see test/support/testApp.ts): one job
// seeded through its fixture, fired, settled, and its effects read as the fixture sees them; IAM enforced on the
// unchanged template, which denies nothing; and queue depths as AWS reports them (a message in flight counted once).
import { GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { type LocalSession, observedWrite, type JobEffects, type LedgerTotals } from '../../local/session';
import type { SeededDemo } from '../../local/fixture';
import { buildRunReport } from '../../local/report';
import { observeJob } from '../../local/run';
import { OBJECT_SWEEPER, openTestAppSession, RECORD_WRITER, TEST_APP_STACK } from '../support/testApp';

/** A job whose effects are S3 deletes. */
const JOB = OBJECT_SWEEPER;
const COUNT = 5;

describe('Class: LocalSession', () => {
  let session: LocalSession;
  const logs: string[] = [];

  beforeAll(async () => {
    // Two execution environments a function: the runs here are a few records each.
    session = await openTestAppSession({ log: (source, line) => logs.push(`[${source}] ${line}`), prewarm: 2 });
  }, 120_000);

  afterAll(async () => {
    await session?.close();
  });

  describe('Method: seed, fire, settle, effects', () => {
    let seeded: SeededDemo;
    let settled: boolean;
    let ledger: LedgerTotals;
    let effects: JobEffects;

    beforeAll(async () => {
      const businessDate = session.businessDateFor(JOB);
      seeded = await session.seed(JOB, COUNT, businessDate);
      session.startConsumers();
      await session.fire(JOB, { scheduledTime: new Date(), businessDate });
      settled = await session.settle({ deadline: Date.now() + 90_000, jobs: [JOB] });
      ledger = await session.ledgerTotals(JOB);
      effects = await session.effects(JOB, seeded);
    }, 120_000);

    it("seeds the asked count through the job's fixture", () => {
      expect(session.job(JOB).fixture).toBeDefined();
      expect(seeded.expectedOperations).toHaveLength(COUNT);
      expect(new Set(seeded.expectedOperations).size).toBe(COUNT);
    });

    it('settles with every seeded operation discovered and completed, nothing left queued or dead-lettered', async () => {
      expect(settled).toBe(true);
      expect(ledger).toMatchObject({
        discovered: COUNT,
        published: COUNT,
        completed: COUNT,
        rejected: 0,
        deadLettered: 0,
        admitting: 0,
      });
      expect(ledger.finished).toBe(ledger.batches);
      const state = await session.state(JOB);
      expect({ queue: state.queue.total, dlq: state.dlq.total, admission: state.admissionQueue.total }).toEqual({
        queue: 0,
        dlq: 0,
        admission: 0,
      });
    });

    it('reads the effects off the local servers through the fixture: one per seeded operation, nothing else touched', () => {
      expect(effects.source).toBe('fixture');
      expect([...effects.effectsByOperation.keys()].sort()).toEqual([...seeded.expectedOperations].sort());
      expect([...effects.effectsByOperation.values()].every((n) => n === 1)).toBe(true);
      expect(effects.unexpectedEffects).toEqual([]);
      expect(effects.starts).toHaveLength(COUNT);
    });

    it('leaves the jobs it did not fire alone', async () => {
      const others = [...session.jobs.keys()].filter((name) => name !== JOB);
      expect(others.length).toBeGreaterThan(0);
      for (const name of others) expect((await session.ledgerTotals(name)).batches).toBe(0);
    });
  });

  // After the case above, which checks that the jobs it did not fire have no batch; before `depth`, which leaves
  // messages in a DLQ (the run report's dead-letter check would count them).
  describe('IAM enforced: the unchanged template', () => {
    /** A job writing its own table and reading its secret, with the grants its `uses` gave it. */
    const IAM_JOB = RECORD_WRITER;
    const ITEMS = 3;

    it('runs a job that writes with its grants to completion with no request denied', async () => {
      const businessDate = session.businessDateFor(IAM_JOB);
      const seeded = await session.seed(IAM_JOB, ITEMS, businessDate);
      session.startConsumers();
      await session.fire(IAM_JOB, { scheduledTime: new Date(), businessDate });
      const settled = await session.settle({ deadline: Date.now() + 90_000, jobs: [IAM_JOB] });
      expect(settled).toBe(true);
      expect(await session.ledgerTotals(IAM_JOB)).toMatchObject({
        discovered: ITEMS,
        completed: ITEMS,
        rejected: 0,
        deadLettered: 0,
      });
      expect(session.stack.iam.enforced).toBe(true);
      expect(session.denials(IAM_JOB)).toEqual([]);
      expect(session.stack.denials()).toEqual([]);
      // What `npm start` observes of the job at the end of its run (local/run.ts collectReport), as a run report.
      const observation = await observeJob(session, IAM_JOB, seeded);
      const report = buildRunReport({
        env: TEST_APP_STACK,
        businessDate,
        settled,
        durationMs: 0,
        jobs: new Map([[IAM_JOB, observation]]),
        warnings: session.warnings(),
      });
      expect(report.checks.find((c) => c.name === 'iam-allowed')).toEqual({
        job: IAM_JOB,
        name: 'iam-allowed',
        ok: true,
        detail: "every request allowed by the template's IAM",
      });
      expect(report.ok).toBe(true);
    }, 120_000);
  });

  describe('Method: depth', () => {
    it('counts a message in flight once, as AWS does: not among the visible ones', async () => {
      // A DLQ: no event source mapping reads it, so only this test receives from it.
      const url = [...session.jobs.values()].find((j) => j.name !== JOB && j.dlqUrl)!.dlqUrl!;
      await session.sqs().send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: ['a', 'b', 'c'].map((Id) => ({ Id, MessageBody: Id })),
        }),
      );
      expect(await session.depth(url)).toEqual({ visible: 3, inFlight: 0, delayed: 0, total: 3 });
      const got = await session
        .sqs()
        .send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, VisibilityTimeout: 60 }));
      expect(got.Messages).toHaveLength(1);
      expect(await session.depth(url)).toEqual({ visible: 2, inFlight: 1, delayed: 0, total: 3 });
      // What any client reads (ops status, the producer's admission): the server's own answer, not a correction.
      const raw = await session.sqs().send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
      expect(raw.Attributes).toMatchObject({
        ApproximateNumberOfMessages: '2',
        ApproximateNumberOfMessagesNotVisible: '1',
        ApproximateNumberOfMessagesDelayed: '0',
      });
    });
  });
});

describe('Function: observedWrite', () => {
  const request = (method: string, url: string, status = 204) => ({
    at: 1,
    method,
    url,
    headers: {},
    body: '',
    status,
  });

  it("reads an S3 object delete, with or without the SDK's x-id query", () => {
    expect(observedWrite('s3', request('DELETE', '/uploads-dev/a/b.txt?x-id=DeleteObject'))).toEqual({
      at: 1,
      service: 's3',
      action: 'DeleteObject',
      resource: 'uploads-dev',
      key: { key: 'a/b.txt' },
    });
    expect(observedWrite('s3', request('DELETE', '/uploads-dev/a%20b.txt'))).toEqual({
      at: 1,
      service: 's3',
      action: 'DeleteObject',
      resource: 'uploads-dev',
      key: { key: 'a b.txt' },
    });
  });

  it('ignores what is not an object write: a tagging or multipart request, a bucket, a failure', () => {
    expect(observedWrite('s3', request('DELETE', '/uploads-dev/a.txt?tagging'))).toBeUndefined();
    expect(
      observedWrite('s3', request('PUT', '/uploads-dev/a.txt?partNumber=1&uploadId=u&x-id=UploadPart', 200)),
    ).toBeUndefined();
    expect(observedWrite('s3', request('DELETE', '/uploads-dev'))).toBeUndefined();
    expect(observedWrite('s3', request('DELETE', '/uploads-dev/a.txt?x-id=DeleteObject', 403))).toBeUndefined();
  });
});
