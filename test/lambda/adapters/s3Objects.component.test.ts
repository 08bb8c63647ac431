import { S3Client } from '@aws-sdk/client-s3';
import { S3ObjectStore } from '../../../lambda/adapters/s3Objects';
import { PermanentError, RetryableError, ThrottledError } from '../../../lambda/core/errors';
import { type HttpStub, startHttpStub } from '../../support/httpStub';
import { loggedError } from '../../support/capturedOutput';

const s3Error = (code: string): string =>
  `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code} happened</Message><RequestId>r1</RequestId></Error>`;
/** An object key holding a person's name, and its hash: `printf %s 'uploads/Jane Doe/passport.pdf' | sha256sum`. */
const KEY = 'uploads/Jane Doe/passport.pdf';
const KEY_HASH = 'sha256:0645ea154bf78ee0';

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

    it("throws PermanentError on a missing bucket, naming the object by its key's hash", async () => {
      answer(404, 'NoSuchBucket');
      const error = await store.deleteObject('nope', KEY).catch((e: unknown) => e as PermanentError);
      expect(error).toBeInstanceOf(PermanentError);
      expect((error as PermanentError).message).toBe(
        `S3 refused to delete object ${KEY_HASH} in s3://nope: NoSuchBucket (404)`,
      );
      expect((error as PermanentError).detail).toEqual({
        bucket: 'nope',
        keyHash: KEY_HASH,
        code: 'NoSuchBucket',
        status: 404,
      });
    });

    it('throws PermanentError on access denied', async () => {
      answer(403, 'AccessDenied');
      await expect(store.deleteObject('uploads', KEY)).rejects.toThrow(
        `S3 refused to delete object ${KEY_HASH} in s3://uploads: AccessDenied (403)`,
      );
    });

    it('throws ThrottledError on SlowDown', async () => {
      answer(503, 'SlowDown');
      const error = await store.deleteObject('uploads', KEY).catch((e: unknown) => e as ThrottledError);
      expect(error).toBeInstanceOf(ThrottledError);
      expect((error as ThrottledError).message).toBe(
        `S3 asked to slow down deleting object ${KEY_HASH} in s3://uploads`,
      );
    });

    it('throws RetryableError on a server error', async () => {
      answer(500, 'InternalError');
      const error = await store.deleteObject('uploads', KEY).catch((e: unknown) => e as RetryableError);
      expect(error).toBeInstanceOf(RetryableError);
      expect((error as RetryableError).message).toBe(
        `deleting object ${KEY_HASH} in s3://uploads failed: InternalError (500)`,
      );
    });

    it("keeps S3's error only as its type and a message with the key hashed, so no log line holds the key", async () => {
      // An answer that quotes the key in its message and as a field, which the SDK copies onto its error.
      stub.handle((_req, res) => {
        res
          .writeHead(403, { 'content-type': 'application/xml' })
          .end(
            `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied to ${KEY}</Message><Key>${KEY}</Key><RequestId>r1</RequestId></Error>`,
          );
      });
      const error = (await store.deleteObject('uploads', KEY).catch((e: unknown) => e)) as PermanentError;
      const cause = error.cause as Error;
      expect({ name: cause.name, message: cause.message, cause: cause.cause }).toEqual({
        name: 'AccessDenied',
        message: `Access Denied to ${KEY_HASH}`,
        cause: undefined,
      });
      const logged = loggedError(error);
      expect(logged).toContain(KEY_HASH);
      expect(['Jane Doe', 'Jane%20Doe', 'passport'].filter((part) => logged.includes(part))).toEqual([]);
    });
  });
});
