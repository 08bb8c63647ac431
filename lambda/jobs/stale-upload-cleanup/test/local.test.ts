import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { createDeps, job } from '..';
import { fixture } from '../local';
import { FixtureError, loadFixture, type ObservedWrite } from '../../../../local/fixture';
import { discoverAll, runtimeSettings, scanAll, useFixtureServers } from '../../../../test/support/jobs';
import { TABLES } from './tables';

const DATE = '2026-11-28';
const BUCKET = 'uploads-bucket-test';
const OTHER_BUCKET = 'other-bucket-test';
const TABLE = TABLES.uploads.name;
const settings = (over: Parameters<typeof runtimeSettings>[0] = {}) =>
  runtimeSettings({
    jobName: 'stale-upload-cleanup',
    tables: { uploads: TABLE },
    buckets: { uploads: BUCKET },
    ...over,
  });

const write = (over: Partial<ObservedWrite>): ObservedWrite => ({
  at: 0,
  service: 's3',
  action: 'DeleteObject',
  resource: BUCKET,
  key: { key: 'k' },
  ...over,
});

describe('Fixture: stale-upload-cleanup', () => {
  const servers = useFixtureServers({
    jobName: 'stale-upload-cleanup',
    settings: () => settings(),
    businessDate: DATE,
    tables: [TABLES.uploads],
    buckets: [BUCKET],
  });
  const context = servers.context;

  it("loads through the local tools' loader by the job's folder name", () => {
    expect(loadFixture(process.cwd(), 'stale-upload-cleanup')).toBe(fixture);
    expect(fixture).toMatchObject({ unit: 'uploads', defaultCount: 40 });
    expect(fixture.downstream).toBeUndefined();
  });

  describe('Method: seed', () => {
    it('puts each object and its record, which the job discovers once the business date is over', async () => {
      const seeded = await fixture.seed(context(), 30);
      expect(seeded.summary).toBe('30 uploads');
      expect(seeded.expectedOperations).toHaveLength(30);
      expect(new Set(seeded.expectedOperations).size).toBe(30);
      const listed = await servers.s3().send(new ListObjectsV2Command({ Bucket: BUCKET }));
      expect((listed.Contents ?? []).map((o) => o.Key).sort()).toEqual([...seeded.expectedOperations].sort());
      const body = await (
        await servers.s3().send(new GetObjectCommand({ Bucket: BUCKET, Key: seeded.expectedOperations[0] }))
      ).Body!.transformToString();
      expect(body).toBe(`demo upload upl-${DATE}-0001`);
      const records = await scanAll(servers.documents(), TABLE);
      expect(records.map((r) => r.objectKey).sort()).toEqual([...seeded.expectedOperations].sort());

      const deps = createDeps(settings());
      const { operations } = await discoverAll(job, deps, {
        businessDate: DATE,
        pageSize: 25,
        now: new Date('2026-11-29T03:30:00.000Z'),
      });
      // Operation keys from the messages' resources are the ones the seed expects and the effects count.
      expect(operations.map((o) => fixture.operationKeyOf(o.resource)).sort()).toEqual(
        [...seeded.expectedOperations].sort(),
      );
    });

    it('throws naming the missing bucket alias', async () => {
      await expect(fixture.seed(context({ settings: settings({ buckets: {} }) }), 1)).rejects.toThrow(
        new FixtureError(
          'job stale-upload-cleanup has no buckets.uploads in its JOB_SETTINGS; cannot seed it',
          'stale-upload-cleanup',
        ),
      );
    });
  });

  describe('Method: effects', () => {
    const seeded = { expectedOperations: ['uploads/a.bin', 'uploads/b.bin', 'uploads/c.bin'], summary: '3 uploads' };

    it("counts deletes per object in the job's bucket, each delete a start, and flags objects not seeded", () => {
      const writes = [
        write({ at: 10, key: { key: 'uploads/a.bin' } }),
        write({ at: 20, key: { key: 'uploads/b.bin' } }),
        write({ at: 30, key: { key: 'uploads/b.bin' } }),
        write({ at: 40, key: { key: 'uploads/not-seeded.bin' } }),
        // Not this job's effects: another job's bucket, a put, a table delete.
        write({ at: 50, resource: 'someone-elses-bucket', key: { key: 'uploads/c.bin' } }),
        write({ at: 60, action: 'PutObject', key: { key: 'uploads/c.bin' } }),
        write({ at: 70, service: 'dynamodb', action: 'DeleteItem', resource: TABLE, key: { uploadId: 'u-c' } }),
      ];
      const reading = fixture.effects({ settings: settings(), seeded, writes });
      expect(reading.effectsByOperation).toEqual(
        new Map([
          ['uploads/a.bin', 1],
          ['uploads/b.bin', 2],
          ['uploads/not-seeded.bin', 1],
        ]),
      );
      expect(reading.starts).toEqual([10, 20, 30, 40]);
      expect(reading.throttled).toBeUndefined();
      expect(reading.unexpectedEffects).toEqual([`${BUCKET}/uploads/not-seeded.bin`]);
    });

    it("flags a delete in another of the job's buckets, where it deletes nothing", () => {
      const reading = fixture.effects({
        settings: settings({ buckets: { uploads: BUCKET, archive: OTHER_BUCKET } }),
        seeded,
        writes: [write({ at: 5, resource: OTHER_BUCKET, key: { key: 'uploads/a.bin' } })],
      });
      expect(reading.effectsByOperation.size).toBe(0);
      expect(reading.starts).toEqual([5]);
      expect(reading.unexpectedEffects).toEqual([`${OTHER_BUCKET}/uploads/a.bin`]);
    });
  });

  describe('Method: operationKeyOf', () => {
    it('is the object key of a valid resource, and undefined otherwise', () => {
      expect(
        fixture.operationKeyOf({
          uploadId: 'u1',
          objectKey: 'uploads/u1.bin',
          deleteAfter: '2026-11-28T10:00:00.000Z',
        }),
      ).toBe('uploads/u1.bin');
      expect(fixture.operationKeyOf({ uploadId: 'u1', objectKey: 'uploads/u1.bin' })).toBeUndefined();
    });
  });
});
