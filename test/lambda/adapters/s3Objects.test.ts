import { S3Client } from '@aws-sdk/client-s3';
import { S3ObjectStore } from '../../../lambda/adapters/s3Objects';
import { PermanentError, RetryableError, ThrottledError } from '../../../lambda/core/errors';
import { HttpStub, startHttpStub } from '../../support/httpStub';

const s3Error = (code: string): string => `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code} happened</Message><RequestId>r1</RequestId></Error>`;

describe('Class: S3ObjectStore', () => {
  let stub: HttpStub;
  let client: S3Client;
  let store: S3ObjectStore;

  beforeAll(async () => {
    stub = await startHttpStub();
    client = new S3Client({
      endpoint: stub.url,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
    });
    store = new S3ObjectStore(client);
  });
  afterAll(async () => {
    client.destroy();
    await stub.close();
  });
  beforeEach(() => {
    stub.requests.length = 0;
  });

  const answer = (status: number, code?: string) =>
    stub.handle((_req, res) => {
      res.writeHead(status, { 'content-type': 'application/xml' }).end(code === undefined ? '' : s3Error(code));
    });

  describe('Method: deleteObject', () => {
    it('sends DeleteObject for the bucket and key', async () => {
      answer(204);
      await expect(store.deleteObject('uploads', 'a/b c.bin')).resolves.toBeUndefined();
      expect(stub.requests.map((r) => `${r.method} ${r.url.split('?')[0]}`)).toEqual(['DELETE /uploads/a/b%20c.bin']);
    });

    it('treats NoSuchKey as already deleted', async () => {
      answer(404, 'NoSuchKey');
      await expect(store.deleteObject('uploads', 'gone')).resolves.toBeUndefined();
    });

    it('throws PermanentError on a missing bucket', async () => {
      answer(404, 'NoSuchBucket');
      const error = await store.deleteObject('nope', 'k').catch((e: unknown) => e as PermanentError);
      expect(error).toBeInstanceOf(PermanentError);
      expect((error as PermanentError).message).toBe('S3 refused to delete s3://nope/k: NoSuchBucket (404)');
      expect((error as PermanentError).detail).toEqual({ bucket: 'nope', key: 'k', code: 'NoSuchBucket', status: 404 });
    });

    it('throws PermanentError on access denied', async () => {
      answer(403, 'AccessDenied');
      await expect(store.deleteObject('uploads', 'k')).rejects.toThrow('S3 refused to delete s3://uploads/k: AccessDenied (403)');
    });

    it('throws ThrottledError on SlowDown', async () => {
      answer(503, 'SlowDown');
      const error = await store.deleteObject('uploads', 'k').catch((e: unknown) => e as ThrottledError);
      expect(error).toBeInstanceOf(ThrottledError);
      expect((error as ThrottledError).message).toBe('S3 asked to slow down deleting s3://uploads/k');
    });

    it('throws RetryableError on a server error', async () => {
      answer(500, 'InternalError');
      const error = await store.deleteObject('uploads', 'k').catch((e: unknown) => e as RetryableError);
      expect(error).toBeInstanceOf(RetryableError);
      expect((error as RetryableError).message).toBe('deleting s3://uploads/k failed: InternalError (500)');
    });
  });
});
