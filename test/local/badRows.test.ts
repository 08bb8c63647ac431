// Issue #33's night on the local stack: one good upload beside two rows discovery cannot turn into messages (an ID
// holding a space, a deadline without milliseconds). The good upload is deleted; the bad rows are recorded in the run
// ledger with key and reason, listed by `ops audit`, counted on the batch, and left alone; the producer's DLQ is empty.
import { GetQueueAttributesCommand, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { pendingUpload } from '../../lambda/jobs/stale-upload-cleanup/items';
import { resourceName, type SeededDemo } from '../../local/fixture';
import { LocalSession, type JobEffects } from '../../local/session';
import { renderAudit, type AuditResult } from '../../ops/commands/audit';

const JOB = 'stale-upload-cleanup';
const ID_REASON = 'uploadId: may hold only letters, digits and _ . @ # / + = - (no ":" or spaces), starting with a letter or digit';

describe('A night with bad source rows (stale-upload-cleanup, local stack)', () => {
  let session: LocalSession;
  let seeded: SeededDemo;
  let settled: boolean;
  let effects: JobEffects;
  let audit: AuditResult;
  let table: string;
  let businessDate: string;
  const bad = (date: string) => [
    { ...pendingUpload({ uploadId: 'bad upload', deleteAfter: `${date}T00:00:01.000Z` }), objectKey: 'uploads/bad-space.bin' },
    { ...pendingUpload({ uploadId: 'no-millis', deleteAfter: `${date}T00:00:02.000Z` }), deleteAfter: `${date}T00:00:02Z` },
  ];

  beforeAll(async () => {
    session = await LocalSession.open({ cwd: process.cwd(), log: () => undefined, prewarm: 2 });
    businessDate = session.businessDateFor(JOB);
    seeded = await session.seed(JOB, 1, businessDate);
    const { settings } = session.job(JOB);
    table = resourceName(settings, 'tables', 'uploads');
    // A delete of a bad row's object would show as an effect the fixture did not expect (it reads the S3 deletes).
    for (const row of bad(businessDate)) await session.documents().send(new PutCommand({ TableName: table, Item: row }));
    session.startConsumers();
    await session.fire(JOB, { scheduledTime: new Date(), businessDate });
    settled = await session.settle({ deadline: Date.now() + 90_000, jobs: [JOB] });
    effects = await session.effects(JOB, seeded);
    audit = await session.auditDate(JOB, businessDate);
  }, 180_000);

  afterAll(async () => {
    await session?.close();
  });

  it('deletes the good upload, and nothing of the bad rows', async () => {
    expect(settled).toBe(true);
    expect([...effects.effectsByOperation.entries()]).toEqual(seeded.expectedOperations.map((key) => [key, 1]));
    expect(effects.unexpectedEffects).toEqual([]);
    for (const row of bad(businessDate)) {
      expect((await session.documents().send(new GetCommand({ TableName: table, Key: { uploadId: row.uploadId } }))).Item).toEqual(row);
    }
  });

  it('records each bad row in the run ledger with its key and reason, and ops audit lists them', () => {
    expect(audit).toMatchObject({ exact: true, discovered: 1, completed: 1, rejected: 0, deadLettered: 0 });
    expect(audit.batches).toEqual([expect.objectContaining({ discovered: 1, completed: 1, invalidRows: 2, admission: 'complete', exact: true })]);
    expect(audit.invalidRows.map(({ key, reasons, page }) => ({ key, reasons, page }))).toEqual([
      { key: 'bad upload', reasons: [ID_REASON], page: 1 },
      { key: 'no-millis', reasons: ['deleteAfter: must be a UTC timestamp with milliseconds'], page: 1 },
    ]);
    expect(renderAudit(audit)).toContain('1 operation: 1 completed, 0 rejected, 0 dead-lettered, 0 open; 2 invalid source rows recorded and skipped');
  });

  it('leaves nothing in the job DLQ or the producer DLQ', async () => {
    const job = session.job(JOB);
    const state = await session.state(JOB);
    expect({ queue: state.queue.total, dlq: state.dlq.total, admission: state.admissionQueue.total }).toEqual({ queue: 0, dlq: 0, admission: 0 });
    // The producer's DLQ is the admission queue's dead-letter target.
    const { Attributes } = await session.sqs().send(new GetQueueAttributesCommand({ QueueUrl: job.admissionQueueUrl, AttributeNames: ['RedrivePolicy'] }));
    const target = String(JSON.parse(Attributes?.RedrivePolicy ?? '{}').deadLetterTargetArn);
    const { QueueUrl } = await session.sqs().send(new GetQueueUrlCommand({ QueueName: target.split(':').pop() }));
    expect(await session.depth(QueueUrl)).toMatchObject({ total: 0 });
  });
});
