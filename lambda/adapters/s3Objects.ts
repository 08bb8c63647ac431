// The object-storage edge: deleting one S3 object, with S3's answers mapped onto the outcome rules.
import { DeleteObjectCommand, type S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { PermanentError, RetryableError, ThrottledError } from '../core/errors';
import { personalDataHash, redactValue, sanitizedCause } from '../core/privacy';
import { s3Client } from './clients';

/** The slice of object storage the jobs use. */
export interface ObjectStore {
  /** Deletes one object; an object that is already absent counts as deleted. */
  deleteObject(bucket: string, key: string): Promise<void>;
}

/**
 * ObjectStore on S3: an absent object counts as deleted; S3's refusals map onto the outcome errors (SlowDown and 503
 * throttle, other 4xx are permanent, the rest retryable), naming the object by its key's hash.
 */
export class S3ObjectStore implements ObjectStore {
  constructor(private readonly client: S3Client = s3Client()) {}

  async deleteObject(bucket: string, key: string): Promise<void> {
    try {
      // S3 answers 204 for a missing key already; the 404 branch below covers stores that do not.
      await this.client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
    } catch (error) {
      const code = (error as { name?: string }).name ?? 'Error';
      const status = error instanceof S3ServiceException ? error.$metadata.httpStatusCode : undefined;
      if (code === 'NoSuchKey' || (status === 404 && code !== 'NoSuchBucket')) return;
      // An object key often holds a user's name or file name: what outlives the call (the message in logs, DLQ reasons
      // and the ledger; the cause, which the logger prints with every field of S3's error) names it by its hash.
      const keyHash = personalDataHash(key);
      const where = `object ${keyHash} in s3://${bucket}`;
      const message = (error as { message?: unknown } | null)?.message;
      const cause = sanitizedCause(
        error,
        redactValue(typeof message === 'string' ? message : String(error), key, keyHash),
      );
      if (status === 503 || code === 'SlowDown') {
        throw new ThrottledError(`S3 asked to slow down deleting ${where}`, undefined, { cause });
      }
      if (status !== undefined && status >= 400 && status < 500) {
        throw new PermanentError(
          `S3 refused to delete ${where}: ${code} (${status})`,
          { bucket, keyHash, code, status },
          { cause },
        );
      }
      throw new RetryableError(`deleting ${where} failed: ${code}${status ? ` (${status})` : ''}`, { cause });
    }
  }
}
