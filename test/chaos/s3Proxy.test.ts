import {
  DeleteObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { s3ErrorBody, S3FaultProxy, type S3Fault } from '../../chaos/s3Proxy';
import { objectRequestOf, type S3ObjectRequest } from '../../local/servers';
import { LOCAL_CREDENTIALS, startS3, type RunningS3 } from '../../local/servers';

describe('Class: S3FaultProxy', () => {
  let s3: RunningS3;
  let proxy: S3FaultProxy;
  let next: S3Fault | undefined;
  const asked: S3ObjectRequest[] = [];
  let client: S3Client;
  let direct: S3Client;
  const config = (endpoint: string) => ({
    endpoint,
    region: 'us-east-1',
    credentials: LOCAL_CREDENTIALS,
    forcePathStyle: true,
    maxAttempts: 1,
  });
  const exists = (key: string) =>
    direct.send(new HeadObjectCommand({ Bucket: 'chaos-bucket', Key: key })).then(
      () => true,
      () => false,
    );
  beforeAll(async () => {
    s3 = await startS3({ buckets: ['chaos-bucket'] });
    proxy = new S3FaultProxy({
      target: () => s3.endpoint,
      decide: (r) => {
        asked.push(r);
        return next;
      },
    });
    await proxy.start();
    // One attempt, so each injected fault reaches the test as the SDK's own error.
    client = new S3Client(config(proxy.endpoint));
    direct = new S3Client(config(s3.endpoint));
  });
  afterAll(async () => {
    client.destroy();
    direct.destroy();
    await proxy.close();
    await s3.close();
  });

  describe('Method: start', () => {
    it('forwards object writes and deletes to S3 when no fault is decided, and offers each to decide', async () => {
      next = undefined;
      await client.send(new PutObjectCommand({ Bucket: 'chaos-bucket', Key: 'a/one.bin', Body: 'one' }));
      expect(await exists('a/one.bin')).toBe(true);
      await client.send(new DeleteObjectCommand({ Bucket: 'chaos-bucket', Key: 'a/one.bin' }));
      expect(await exists('a/one.bin')).toBe(false);
      expect(asked).toEqual([
        { operation: 'PutObject', bucket: 'chaos-bucket', key: 'a/one.bin' },
        { operation: 'DeleteObject', bucket: 'chaos-bucket', key: 'a/one.bin' },
      ]);
      expect(proxy.forwarded).toBe(2);
    });

    it("answers a delete with 503 SlowDown in S3's XML, which the SDK names, and leaves the object in place", async () => {
      next = undefined;
      await client.send(new PutObjectCommand({ Bucket: 'chaos-bucket', Key: 'b.bin', Body: 'b' }));
      next = 'SlowDown';
      const error = await client
        .send(new DeleteObjectCommand({ Bucket: 'chaos-bucket', Key: 'b.bin' }))
        .catch((e: Error) => e);
      expect(error).toBeInstanceOf(S3ServiceException);
      expect((error as S3ServiceException).name).toBe('SlowDown');
      expect((error as S3ServiceException).$metadata.httpStatusCode).toBe(503);
      expect(await exists('b.bin')).toBe(true);
    });

    it('answers a write with 500 InternalError, and writes nothing', async () => {
      next = 'InternalError';
      const error = await client
        .send(new PutObjectCommand({ Bucket: 'chaos-bucket', Key: 'c.bin', Body: 'c' }))
        .catch((e: Error) => e);
      expect((error as S3ServiceException).name).toBe('InternalError');
      expect((error as S3ServiceException).$metadata.httpStatusCode).toBe(500);
      expect(await exists('c.bin')).toBe(false);
      expect(proxy.injected).toEqual([
        { fault: 'SlowDown', operation: 'DeleteObject', bucket: 'chaos-bucket', key: 'b.bin' },
        { fault: 'InternalError', operation: 'PutObject', bucket: 'chaos-bucket', key: 'c.bin' },
      ]);
    });

    it('never faults what is not an object write or delete (a listing is forwarded, not offered)', async () => {
      next = 'SlowDown';
      const before = asked.length;
      const listed = await client.send(new ListObjectsV2Command({ Bucket: 'chaos-bucket' }));
      expect(listed.Contents?.map((o) => o.Key)).toEqual(['b.bin']);
      expect(asked.length).toBe(before);
      next = undefined;
    });
  });
});

describe('Function: objectRequestOf', () => {
  it("reads path-style object writes and deletes, with or without the SDK's x-id, and nothing else", () => {
    expect(objectRequestOf('PUT', '/bkt/uploads/a%20b.bin?x-id=PutObject')).toEqual({
      operation: 'PutObject',
      bucket: 'bkt',
      key: 'uploads/a b.bin',
    });
    expect(objectRequestOf('DELETE', '/bkt/k')).toEqual({ operation: 'DeleteObject', bucket: 'bkt', key: 'k' });
    expect(objectRequestOf('PUT', '/bkt')).toBeUndefined();
    expect(objectRequestOf('PUT', '/bkt/k?tagging')).toBeUndefined();
    expect(objectRequestOf('PUT', '/bkt/k?partNumber=1&uploadId=u')).toBeUndefined();
    expect(objectRequestOf('GET', '/bkt/k')).toBeUndefined();
    expect(objectRequestOf('POST', '/bkt?delete')).toBeUndefined();
  });
});

describe('Function: s3ErrorBody', () => {
  it('names the error in Code as S3 does', () => {
    expect(s3ErrorBody('SlowDown', 'r-1')).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate. (injected)</Message><RequestId>r-1</RequestId></Error>',
    );
  });
});
