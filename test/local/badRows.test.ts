// Issue #33's night on the local stack (the engine's test app, test/support/testApp.ts): one good item beside two rows
// discovery cannot turn into messages (an ID holding a space, a due time without milliseconds). The good item's result
// is written; the bad rows are recorded in the run ledger with key and reason, listed by `ops audit`, counted on the
// batch, and left alone; the producer's DLQ is empty.
import { GetQueueAttributesCommand, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { resourceName, type SeededDemo } from '../../local/fixture';
import type { JobEffects, LocalSession } from '../../local/session';
import { auditDate, renderAudit, type AuditResult } from '../../ops/commands/audit';
import { openTestAppSession, RECORD_WRITER } from '../support/testApp';

/** Discovers the items of a date in its table `items`, writes one result each into `results`. */
const JOB = RECORD_WRITER;
const ID_REASON =
  'itemId: may hold only letters, digits and _ . @ # / + = - (no ":" or spaces), starting with a letter or digit';

describe('A night with bad source rows (a job discovering from its own table, local stack)', () => {
  let session: LocalSession;
  let seeded: SeededDemo;
  let settled: boolean;
  let effects: JobEffects;
  let audit: AuditResult;
  let table: string;
  let results: string;
  let businessDate: string;
  const bad = (date: string) => [
    { itemId: 'bad item', businessDate: date, dueAt: `${date}T00:00:01.000Z` },
    { itemId: 'no-millis', businessDate: date, dueAt: `${date}T00:00:02Z` },
  ];

  beforeAll(async () => {
    session = await openTestAppSession({ log: () => undefined, prewarm: 2 });
    businessDate = session.businessDateFor(JOB);
    seeded = await session.seed(JOB, 1, businessDate);
    const { settings } = session.job(JOB);
    table = resourceName(settings, 'tables', 'items');
    results = resourceName(settings, 'tables', 'results');
    // A result written for a bad row would show as an effect the fixture did not expect (it reads the result writes).
    for (const row of bad(businessDate))
      await session.documents().send(new PutCommand({ TableName: table, Item: row }));
    session.startConsumers();
    await session.fire(JOB, { scheduledTime: new Date(), businessDate });
    settled = await session.settle({ deadline: Date.now() + 90_000, jobs: [JOB] });
    effects = await session.effects(JOB, seeded);
    audit = await auditDate(session.documents(), session.stateTables(JOB), { job: JOB, date: businessDate });
  }, 180_000);

  afterAll(async () => {
    await session?.close();
  });

  it("writes the good item's result, and nothing for the bad rows", async () => {
    expect(settled).toBe(true);
    expect([...effects.effectsByOperation.entries()]).toEqual(seeded.expectedOperations.map((key) => [key, 1]));
    expect(effects.unexpectedEffects).toEqual([]);
    for (const row of bad(businessDate)) {
      expect(
        (await session.documents().send(new GetCommand({ TableName: table, Key: { itemId: row.itemId } }))).Item,
      ).toEqual(row);
      expect(
        (await session.documents().send(new GetCommand({ TableName: results, Key: { itemId: row.itemId } }))).Item,
      ).toBeUndefined();
    }
  });

  it('records each bad row in the run ledger with its key and reason, and ops audit lists them', () => {
    expect(audit).toMatchObject({ exact: true, discovered: 1, completed: 1, rejected: 0, deadLettered: 0 });
    expect(audit.batches).toEqual([
      expect.objectContaining({ discovered: 1, completed: 1, invalidRows: 2, admission: 'complete', exact: true }),
    ]);
    // By key: the job scans its table, in the table's own order.
    const rows = audit.invalidRows
      .map(({ key, reasons, page }) => ({ key, reasons, page }))
      .sort((a, b) => a.key.localeCompare(b.key));
    expect(rows).toEqual([
      { key: 'bad item', reasons: [ID_REASON], page: 1 },
      { key: 'no-millis', reasons: ['dueAt: must be a UTC timestamp with milliseconds'], page: 1 },
    ]);
    expect(renderAudit(audit)).toContain(
      '1 operation: 1 completed, 0 rejected, 0 dead-lettered, 0 open; 2 invalid source rows recorded and skipped',
    );
  });

  it('leaves nothing in the job DLQ or the producer DLQ', async () => {
    const job = session.job(JOB);
    const state = await session.state(JOB);
    expect({ queue: state.queue.total, dlq: state.dlq.total, admission: state.admissionQueue.total }).toEqual({
      queue: 0,
      dlq: 0,
      admission: 0,
    });
    // The producer's DLQ is the admission queue's dead-letter target.
    const { Attributes } = await session
      .sqs()
      .send(new GetQueueAttributesCommand({ QueueUrl: job.admissionQueueUrl, AttributeNames: ['RedrivePolicy'] }));
    const target = String(JSON.parse(Attributes?.RedrivePolicy ?? '{}').deadLetterTargetArn);
    const { QueueUrl } = await session.sqs().send(new GetQueueUrlCommand({ QueueName: target.split(':').pop() }));
    expect(await session.depth(QueueUrl)).toMatchObject({ total: 0 });
  });
});
