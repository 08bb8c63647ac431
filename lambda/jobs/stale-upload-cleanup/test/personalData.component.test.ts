// An upload's object key (often a user's name or file name) is carried by its message to the apply that deletes the
// object, and kept nowhere after it: logs, DLQ reasons, the ledger's entries and the idempotency results name it by
// its hash. The one copy kept on purpose is a rejected message's body, for review, and it expires within 14 days.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, resetClients } from '../../../adapters/clients';
import { S3ObjectStore } from '../../../adapters/s3Objects';
import { REJECTED_RETENTION_DAYS } from '../../../core/ledgerContract';
import { personalDataHash } from '../../../core/privacy';
import { createConsumer } from '../../../handlers/consumer';
import { createDeps, job, JOB_NAME } from '..';
import { pendingUpload } from '../items';
import { startLocalAws, type LocalAws } from '../../../../test/support/aws';
import { captureOutput } from '../../../../test/support/capturedOutput';
import { startHttpStub, type HttpStub, type StubHandler } from '../../../../test/support/httpStub';
import { lambdaContext, sqsEvent, sqsRecord } from '../../../../test/support/lambdaEvents';
import {
  createIdempotencyTable,
  createLedgerTable,
  createLimiterTable,
  createQueue,
  drainQueue,
  STATE_TABLES,
  unpacedConsumerOptions,
} from '../../../../test/lambda/handlers/harness';
import { createTable, putAll, runtimeSettings, scanAll } from '../../../../test/support/jobs';
import { TABLES } from './tables';

const DATE = '2026-11-28';
const DEADLINE = '2026-11-28T10:00:00.000Z';
const BUCKET = 'uploads-personal';
/** unpacedConsumerOptions' maxReceiveCount: a record on this receive is on its last. */
const MAX_RECEIVES = 5;

const s3Answer =
  (status: number, code: string, key: string): StubHandler =>
  (_req, res) => {
    // S3 quoting the key, in its message and as a field the SDK copies onto its error.
    res
      .writeHead(status, { 'content-type': 'application/xml' })
      .end(
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code} on ${key}</Message><Key>${key}</Key></Error>`,
      );
  };

interface Scenario {
  name: string;
  uploadId: string;
  /** A key naming a person, so that any copy of it (or of the name) is found. */
  objectKey: string;
  s3: StubHandler;
  receives?: number;
}

const SCENARIOS: Scenario[] = [
  {
    name: 'deleted',
    uploadId: 'up-applied',
    objectKey: 'uploads/Ada Lovelace/notes.pdf',
    s3: (_req, res) => res.writeHead(204).end(),
  },
  {
    name: 'S3 refuses',
    uploadId: 'up-refused',
    objectKey: 'uploads/Grace Hopper/cv.pdf',
    s3: s3Answer(403, 'AccessDenied', 'uploads/Grace Hopper/cv.pdf'),
  },
  {
    name: 'S3 fails on the last allowed receive',
    uploadId: 'up-last',
    objectKey: 'uploads/Alan Turing/draft.docx',
    s3: s3Answer(500, 'InternalError', 'uploads/Alan Turing/draft.docx'),
    receives: MAX_RECEIVES,
  },
  {
    name: 'retention extended while the object is deleted',
    uploadId: 'up-race',
    objectKey: 'uploads/Katherine Johnson/orbit.xlsx',
    s3: (_req, res) => {
      void documentClient()
        .send(
          new UpdateCommand({
            TableName: TABLES.uploads.name,
            Key: { uploadId: 'up-race' },
            UpdateExpression: 'SET deleteAfter = :d',
            ExpressionAttributeValues: { ':d': '2027-06-01T00:00:00.000Z' },
          }),
        )
        .then(() => res.writeHead(204).end());
    },
  },
];
/** A message the consumer rejects (an unknown resource field): its body, key included, is kept for review. */
const REJECTED_KEY = 'uploads/Hedy Lamarr/patent.pdf';
/** Every name the keys hold: none may be in what is kept. */
const NAMES = ['Ada Lovelace', 'Grace Hopper', 'Alan Turing', 'Katherine Johnson', 'Hedy Lamarr'];
const leaksIn = (text: string, names = NAMES) =>
  names.flatMap((n) => [n, encodeURIComponent(n)]).filter((form) => text.includes(form));

const body = (resource: Record<string, unknown>) =>
  JSON.stringify({
    version: 1,
    jobType: JOB_NAME,
    operationId: `stale-upload:${String(resource.uploadId)}:${DEADLINE}`,
    batchId: `${JOB_NAME}:${DATE}:personal`,
    businessDate: DATE,
    resource,
    enqueuedAt: new Date().toISOString(),
  });

describe('Function: createConsumer', () => {
  let aws: LocalAws;
  let stub: HttpStub;
  let s3: S3Client;
  let queueUrl: string;
  let dlqUrl: string;
  const output: string[] = [];
  const failed: string[] = [];

  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    stub = await startHttpStub();
    s3 = new S3Client({
      endpoint: stub.url,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
    });
    const raw = new DynamoDBClient({});
    await Promise.all([
      createIdempotencyTable(STATE_TABLES.idempotency),
      createLedgerTable(STATE_TABLES.ledger),
      createLimiterTable(STATE_TABLES.limiter),
      createTable(raw, TABLES.uploads),
    ]);
    raw.destroy();
    [queueUrl, dlqUrl] = await Promise.all([createQueue('personal'), createQueue('personal-dlq')]);
    await putAll(
      documentClient(),
      TABLES.uploads.name,
      SCENARIOS.map((s) => pendingUpload({ uploadId: s.uploadId, objectKey: s.objectKey, deleteAfter: DEADLINE })),
    );

    const handle = createConsumer({
      job,
      jobDeps: {
        ...createDeps(
          runtimeSettings({
            jobName: JOB_NAME,
            tables: { uploads: TABLES.uploads.name },
            buckets: { uploads: BUCKET },
          }),
        ),
        objects: new S3ObjectStore(s3),
      },
      ...unpacedConsumerOptions(queueUrl, dlqUrl, 'personal'),
    });

    const captured = captureOutput();
    try {
      const run = async (messageId: string, text: string, receives = 1) => {
        const record = sqsRecord(text, {
          messageId,
          attributes: { ...sqsRecord('').attributes, ApproximateReceiveCount: String(receives) },
        });
        const response = await handle(sqsEvent(record), lambdaContext());
        failed.push(...response.batchItemFailures.map((f) => f.itemIdentifier));
      };
      for (const s of SCENARIOS) {
        stub.handle(s.s3);
        await run(
          `m-${s.uploadId}`,
          body({ uploadId: s.uploadId, objectKey: s.objectKey, deleteAfter: DEADLINE }),
          s.receives,
        );
      }
      // A duplicate delivery of the deleted upload: answered from its idempotency record.
      await run(
        'm-duplicate',
        body({ uploadId: 'up-applied', objectKey: SCENARIOS[0].objectKey, deleteAfter: DEADLINE }),
      );
      await run(
        'm-rejected',
        body({ uploadId: 'up-rejected', objectKey: REJECTED_KEY, deleteAfter: DEADLINE, owner: 'someone' }),
      );
    } finally {
      captured.stop();
      output.push(...captured.chunks);
    }
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    s3.destroy();
    resetClients();
    await stub.close();
    await aws.stop();
  });

  describe('Method: handler (object keys kept as hashes)', () => {
    it('reaches each path: a delete, two dead-letters, a failure on its last receive, a duplicate and a rejection', () => {
      const text = output.join('');
      expect(failed).toEqual(['m-up-last']);
      for (const line of [
        'operation completed',
        'permanent failure: message sent to the DLQ',
        'failed on its last allowed receive',
        'duplicate suppressed',
        'message rejected and kept for review',
      ]) {
        expect(text).toContain(line);
      }
    });

    it('logs no key and no name, at any level, and names the objects by their hashes', () => {
      const text = output.join('');
      expect(leaksIn(text)).toEqual([]);
      expect(text).toContain(personalDataHash('uploads/Grace Hopper/cv.pdf'));
    });

    it('gives the DLQ reasons with the key hashed; the bodies are the messages as they came, for a redrive', async () => {
      const messages = await drainQueue(dlqUrl);
      const reasons = Object.fromEntries(
        messages.map((m) => [
          JSON.parse(m.Body as string).resource.uploadId,
          m.MessageAttributes?.failureReason?.StringValue,
        ]),
      );
      expect(reasons).toEqual({
        'up-refused': `S3 refused to delete object ${personalDataHash('uploads/Grace Hopper/cv.pdf')} in s3://${BUCKET}: AccessDenied (403)`,
        'up-race': `upload up-race: retention changed while its object was being deleted; the object ${personalDataHash('uploads/Katherine Johnson/orbit.xlsx')} is gone but the record was kept`,
      });
      expect(leaksIn(JSON.stringify(messages.map((m) => m.MessageAttributes)))).toEqual([]);
      expect(messages.map((m) => JSON.parse(m.Body as string).resource.objectKey).sort()).toEqual([
        'uploads/Grace Hopper/cv.pdf',
        'uploads/Katherine Johnson/orbit.xlsx',
      ]);
    });

    it('keeps results in the idempotency table by hash only', async () => {
      const items = await scanAll(documentClient(), 'idempotency');
      expect(items.length).toBeGreaterThan(0);
      expect(leaksIn(JSON.stringify(items))).toEqual([]);
      expect(JSON.stringify(items)).toContain(personalDataHash('uploads/Ada Lovelace/notes.pdf'));
    });

    it("keeps the ledger's dead-letter entries by hash, and the rejected body for 14 days", async () => {
      const items = await scanAll(documentClient(), 'ledger');
      const rejections = items.filter((i) => String(i.pk).startsWith('REJECTED#'));
      // Expiry is measured from the record's own rejection time, so no clock of the test's enters the assertion.
      const rejectedAtS = Math.floor(Date.parse(String(rejections[0]?.rejectedAt)) / 1000);
      expect(rejections.map((r) => ({ messageId: r.messageId, expiresAt: r.expiresAt }))).toEqual([
        { messageId: 'm-rejected', expiresAt: rejectedAtS + REJECTED_RETENTION_DAYS * 86_400 },
      ]);
      expect(rejections[0].body).toContain(REJECTED_KEY);
      const kept = JSON.stringify(items.map(({ body: _body, ...rest }) => rest));
      expect(leaksIn(kept)).toEqual([]);
      expect(kept).toContain(personalDataHash('uploads/Alan Turing/draft.docx'));
    });
  });
});
