import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { resetClients } from '../../../adapters/clients';
import {
  encodeCursor,
  InvalidOperationIdError,
  PermanentError,
  personalDataHash,
  RetryableError,
  SettingsError,
  type ObjectStore,
} from '../../../job';
import { type StaleUploadDeps, createDeps, discoveryCutoff, job, staleUploadOperationId } from '..';
import { type UploadItem, demoUploads, pendingUpload } from '../items';
import { type LocalAws, startLocalAws } from '../../../../test/support/aws';
import { createTable, discoverAll, putAll, runtimeSettings } from '../../../../test/support/jobs';
import { TABLES } from './tables';

const DATE = '2026-11-28';
const NOW = new Date('2026-11-29T03:30:00.000Z');
const BUCKET = 'uploads-bucket';

/** The slice of S3 the job uses, in memory; `during` runs inside a delete to stage races. */
class FakeObjects implements ObjectStore {
  readonly deleted: string[] = [];
  during?: () => Promise<void>;
  failWith?: Error;
  async deleteObject(bucket: string, key: string): Promise<void> {
    if (this.failWith) throw this.failWith;
    await this.during?.();
    this.deleted.push(`${bucket}/${key}`);
  }
}

describe('Function: staleUploadOperationId', () => {
  it('builds stale-upload:<uploadId>:<deleteAfter>', () => {
    expect(staleUploadOperationId({ uploadId: 'u-1', deleteAfter: '2026-11-28T10:00:00.000Z' })).toBe(
      'stale-upload:u-1:2026-11-28T10:00:00.000Z',
    );
  });

  it('throws on a deadline that is not in canonical UTC form', () => {
    expect(() => staleUploadOperationId({ uploadId: 'u-1', deleteAfter: '2026-11-28T10:00:00Z' })).toThrow(
      new InvalidOperationIdError(
        'deleteAfter "2026-11-28T10:00:00Z" must be a UTC timestamp in the form YYYY-MM-DDTHH:mm:ss.sssZ',
      ),
    );
  });

  it('throws on an empty upload ID', () => {
    expect(() => staleUploadOperationId({ uploadId: '', deleteAfter: '2026-11-28T10:00:00.000Z' })).toThrow(
      'upload ID "" cannot be part of an operation ID',
    );
  });
});

describe('Job: stale-upload-cleanup', () => {
  let aws: LocalAws;
  let objects: FakeObjects;
  let discoverDeps: StaleUploadDeps;
  let deps: StaleUploadDeps;
  let seq = 0;
  const APPLY_TABLE = 'uploads-apply-test';

  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    const raw = new DynamoDBClient({});
    await createTable(raw, TABLES.uploads);
    await createTable(raw, { ...TABLES.uploads, name: APPLY_TABLE });
    raw.destroy();
    const base = createDeps(
      runtimeSettings({
        jobName: 'stale-upload-cleanup',
        tables: { uploads: TABLES.uploads.name },
        buckets: { uploads: BUCKET },
      }),
    );
    discoverDeps = { ...base, now: () => NOW };
    await putAll(base.documents, TABLES.uploads.name, [
      ...demoUploads(DATE, 6),
      ...demoUploads('2026-11-20', 2),
      pendingUpload({ uploadId: 'tomorrow', deleteAfter: '2026-11-29T00:00:00.000Z' }),
      { ...pendingUpload({ uploadId: 'on-hold', deleteAfter: '2026-11-01T00:00:00.000Z' }), retentionState: 'held' },
    ]);
  });
  afterAll(async () => {
    resetClients();
    await aws.stop();
  });
  beforeEach(() => {
    objects = new FakeObjects();
    deps = { ...discoverDeps, uploadsTable: APPLY_TABLE, objects };
  });

  const fresh = async (over: Partial<UploadItem> = {}): Promise<UploadItem> => {
    seq += 1;
    const item = { ...pendingUpload({ uploadId: `up-${seq}`, deleteAfter: '2026-11-28T10:00:00.000Z' }), ...over };
    await putAll(deps.documents, APPLY_TABLE, [item]);
    return item;
  };
  const record = async (uploadId: string) =>
    (await deps.documents.send(new GetCommand({ TableName: APPLY_TABLE, Key: { uploadId }, ConsistentRead: true })))
      .Item as UploadItem | undefined;
  const applyTo = (
    item: Pick<UploadItem, 'uploadId' | 'objectKey' | 'deleteAfter'>,
    operationId = `stale-upload:${item.uploadId}:${item.deleteAfter}`,
  ) =>
    job.apply(deps, {
      operationId,
      batchId: 'b',
      businessDate: DATE,
      resource: { uploadId: item.uploadId, objectKey: item.objectKey, deleteAfter: item.deleteAfter },
      remainingTimeMs: () => 60_000,
    });

  describe('Method: createDeps', () => {
    it('throws naming the missing table and bucket aliases', () => {
      expect(() => createDeps(runtimeSettings({ jobName: 'stale-upload-cleanup', tables: { other: 't' } }))).toThrow(
        new SettingsError(
          'stale-upload-cleanup: job settings are incomplete: tables.uploads is missing (it has: other); buckets.uploads is missing (it has: none)',
        ),
      );
    });
  });

  describe('Function: discoveryCutoff', () => {
    it('is the last millisecond of the business date when that has passed', () => {
      expect(discoveryCutoff(DATE, NOW)).toBe('2026-11-28T23:59:59.999Z');
    });

    it("is the run's clock when the business date has not ended yet", () => {
      expect(discoveryCutoff(DATE, new Date('2026-11-28T06:00:00.000Z'))).toBe('2026-11-28T06:00:00.000Z');
    });
  });

  describe('Method: discover', () => {
    it('pages through every pending upload due by the end of the business date, and only those', async () => {
      const { operations, pageSizes } = await discoverAll(job, discoverDeps, {
        businessDate: DATE,
        pageSize: 3,
        now: NOW,
      });
      const expected = [...demoUploads('2026-11-20', 2), ...demoUploads(DATE, 6)];
      expect(operations.map((o) => o.resource)).toEqual(
        expected.map(({ uploadId, objectKey, deleteAfter }) => ({ uploadId, objectKey, deleteAfter })),
      );
      expect(operations.map((o) => o.operationId)).toEqual(
        expected.map((u) => `stale-upload:${u.uploadId}:${u.deleteAfter}`),
      );
      expect(Math.max(...pageSizes)).toBeLessThanOrEqual(3);
    });

    it('counts exactly what discovery finds, with the same cutoff', async () => {
      for (const now of [NOW, new Date('2026-11-28T08:00:00.000Z')]) {
        const { operations } = await discoverAll(job, discoverDeps, { businessDate: DATE, pageSize: 50, now });
        await expect(job.countEligible!(discoverDeps, { businessDate: DATE, now })).resolves.toBe(operations.length);
      }
    });

    it("never finds an upload whose deadline is after the run's clock", async () => {
      const early = new Date('2026-11-28T08:00:00.000Z');
      const { operations } = await discoverAll(job, discoverDeps, { businessDate: DATE, pageSize: 50, now: early });
      expect(operations.every((o) => o.resource.deleteAfter <= early.toISOString())).toBe(true);
      expect(operations).toHaveLength(2 + 3); // 2026-11-20's two, and DATE's at 00:00, 04:00 and 08:00 (inclusive)
    });

    it('yields the same operation IDs on a re-run', async () => {
      const a = await discoverAll(job, discoverDeps, { businessDate: DATE, pageSize: 4, now: NOW });
      const b = await discoverAll(job, discoverDeps, { businessDate: DATE, pageSize: 50, now: NOW });
      expect(b.operations.map((o) => o.operationId)).toEqual(a.operations.map((o) => o.operationId));
    });

    it('refuses a cursor for another index partition', async () => {
      const cursor = encodeCursor({
        retentionState: 'held',
        deleteAfter: '2026-11-01T00:00:00.000Z',
        uploadId: 'on-hold',
      });
      await expect(job.discover(discoverDeps, { businessDate: DATE, cursor, pageSize: 5, now: NOW })).rejects.toThrow(
        'invalid cursor: it belongs to another query (retentionState is not "pending")',
      );
    });

    it('hands back the records that cannot become a valid message, with key and reason, and discovers the rest', async () => {
      const broken = [
        {
          ...pendingUpload({ uploadId: 'no-object-key', deleteAfter: '2026-10-01T00:00:00.000Z' }),
          objectKey: undefined,
        },
        pendingUpload({ uploadId: 'has space', deleteAfter: '2026-10-01T00:00:01.000Z' }),
        pendingUpload({ uploadId: 'has:colon', deleteAfter: '2026-10-01T00:00:02.000Z' }),
        {
          ...pendingUpload({ uploadId: 'no-millis', deleteAfter: '2026-10-01T00:00:03.000Z' }),
          deleteAfter: '2026-10-01T00:00:03Z',
        },
      ];
      await putAll(discoverDeps.documents, TABLES.uploads.name, broken);
      try {
        const page = await job.discover(discoverDeps, { businessDate: DATE, pageSize: 50, now: NOW });
        expect(page.invalid).toEqual([
          { key: 'no-object-key', reason: 'objectKey: Invalid input: expected string, received undefined' },
          {
            key: 'has space',
            reason:
              'uploadId: may hold only letters, digits and _ . @ # / + = - (no ":" or spaces), starting with a letter or digit',
          },
          {
            key: 'has:colon',
            reason:
              'uploadId: may hold only letters, digits and _ . @ # / + = - (no ":" or spaces), starting with a letter or digit',
          },
          { key: 'no-millis', reason: 'deleteAfter: must be a UTC timestamp with milliseconds' },
        ]);
        const expected = [...demoUploads('2026-11-20', 2), ...demoUploads(DATE, 6)].map((u) => u.uploadId).sort();
        expect(page.operations.map((o) => o.resource.uploadId).sort()).toEqual(expected);
        expect(page.nextCursor).toBeUndefined();
      } finally {
        for (const { uploadId } of broken)
          await discoverDeps.documents.send(new DeleteCommand({ TableName: TABLES.uploads.name, Key: { uploadId } }));
      }
    });
  });

  describe('Method: apply', () => {
    it('deletes the object, then the record', async () => {
      const item = await fresh();
      await expect(applyTo(item)).resolves.toEqual({
        outcome: 'applied',
        detail: { objectKeyHash: personalDataHash(item.objectKey) },
      });
      expect(objects.deleted).toEqual([`${BUCKET}/${item.objectKey}`]);
      expect(await record(item.uploadId)).toBeUndefined();
    });

    it("names the object in its result by the key's hash, since idempotency keeps the result for days", async () => {
      const item = await fresh({ objectKey: 'uploads/Jane Doe/passport.pdf' });
      const result = await applyTo(item);
      // printf %s 'uploads/Jane Doe/passport.pdf' | sha256sum | cut -c1-16
      expect(result).toEqual({ outcome: 'applied', detail: { objectKeyHash: 'sha256:0645ea154bf78ee0' } });
      expect(objects.deleted).toEqual([`${BUCKET}/uploads/Jane Doe/passport.pdf`]);
    });

    it('is already done when the record is gone, without touching S3', async () => {
      const item = pendingUpload({ uploadId: 'never-stored', deleteAfter: '2026-11-28T10:00:00.000Z' });
      await expect(applyTo(item)).resolves.toEqual({ outcome: 'already-done', detail: { skipped: 'record-gone' } });
      expect(objects.deleted).toEqual([]);
    });

    it('skips an upload whose retention was extended, keeping the object', async () => {
      const item = await fresh();
      await deps.documents.send(
        new UpdateCommand({
          TableName: APPLY_TABLE,
          Key: { uploadId: item.uploadId },
          UpdateExpression: 'SET deleteAfter = :d',
          ExpressionAttributeValues: { ':d': '2027-01-01T00:00:00.000Z' },
        }),
      );
      await expect(applyTo(item)).resolves.toEqual({
        outcome: 'already-done',
        detail: { skipped: 'retention-changed' },
      });
      expect(objects.deleted).toEqual([]);
      expect(await record(item.uploadId)).toMatchObject({ deleteAfter: '2027-01-01T00:00:00.000Z' });
    });

    it('skips an upload put on hold', async () => {
      const item = await fresh({ retentionState: 'held' });
      await expect(applyTo(item)).resolves.toEqual({
        outcome: 'already-done',
        detail: { skipped: 'retention-changed' },
      });
      expect(objects.deleted).toEqual([]);
    });

    it('throws PermanentError for a deadline that has not passed', async () => {
      const item = await fresh({ deleteAfter: '2026-12-01T00:00:00.000Z' });
      const error = await applyTo(item).catch((e: unknown) => e as PermanentError);
      expect(error).toBeInstanceOf(PermanentError);
      expect((error as PermanentError).message).toBe(
        `upload ${item.uploadId} is not due for deletion until 2026-12-01T00:00:00.000Z`,
      );
      expect(objects.deleted).toEqual([]);
    });

    it('throws PermanentError when the record points at another object', async () => {
      const item = await fresh();
      const error = await applyTo({ ...item, objectKey: 'uploads/other.bin' }).catch(
        (e: unknown) => e as PermanentError,
      );
      expect((error as PermanentError).message).toBe(
        `upload ${item.uploadId} now points at another object than the one discovered`,
      );
      expect((error as PermanentError).detail).toEqual({
        uploadId: item.uploadId,
        objectKeyHash: personalDataHash('uploads/other.bin'),
        recordObjectKeyHash: personalDataHash(item.objectKey),
      });
      expect(objects.deleted).toEqual([]);
    });

    it("throws PermanentError when the operation ID is not the resource's", async () => {
      const item = await fresh();
      const error = await applyTo(item, `stale-upload:${item.uploadId}`).catch((e: unknown) => e as PermanentError);
      expect(error).toBeInstanceOf(PermanentError);
      expect((error as PermanentError).message).toBe(
        `operation ID "stale-upload:${item.uploadId}" does not match its resource (expected "stale-upload:${item.uploadId}:${item.deleteAfter}")`,
      );
    });

    it('keeps the record when the object delete fails', async () => {
      const item = await fresh();
      objects.failWith = new RetryableError('deleting failed');
      await expect(applyTo(item)).rejects.toThrow(objects.failWith);
      expect(await record(item.uploadId)).toEqual(item);
    });

    it('is already done when a duplicate delivery deletes the record first', async () => {
      const item = await fresh();
      objects.during = async () => {
        await deps.documents.send(new DeleteCommand({ TableName: APPLY_TABLE, Key: { uploadId: item.uploadId } }));
      };
      await expect(applyTo(item)).resolves.toEqual({
        outcome: 'already-done',
        detail: { objectKeyHash: personalDataHash(item.objectKey) },
      });
    });

    it('throws PermanentError, keeping the record, when retention is extended during the object delete', async () => {
      const item = await fresh();
      objects.during = async () => {
        await deps.documents.send(
          new UpdateCommand({
            TableName: APPLY_TABLE,
            Key: { uploadId: item.uploadId },
            UpdateExpression: 'SET deleteAfter = :d',
            ExpressionAttributeValues: { ':d': '2027-01-01T00:00:00.000Z' },
          }),
        );
      };
      const error = await applyTo(item).catch((e: unknown) => e as PermanentError);
      expect(error).toBeInstanceOf(PermanentError);
      const hash = personalDataHash(item.objectKey);
      expect((error as PermanentError).message).toBe(
        `upload ${item.uploadId}: retention changed while its object was being deleted; the object ${hash} is gone but the record was kept`,
      );
      expect((error as PermanentError).detail).toEqual({
        uploadId: item.uploadId,
        objectKeyHash: hash,
        deleteAfter: item.deleteAfter,
        recordDeleteAfter: '2027-01-01T00:00:00.000Z',
        recordRetentionState: 'pending',
      });
      expect(await record(item.uploadId)).toBeDefined();
    });
  });
});
