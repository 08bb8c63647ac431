// Job plug-in stale-upload-cleanup: discovers uploads whose retention deadline has passed, deletes each object from
// S3 (absent counts as deleted), then deletes the upload's record conditionally.
//
// Table `uploads` (alias tables.uploads), item shape in items.ts; bucket alias buckets.uploads.
// Choices:
// - Discovery cutoff: deadlines up to the end of the business date (UTC), but never later than the run's clock, so
//   a re-run of a date finds the same uploads and nothing is ever deleted before its deadline.
// - Operation ID `stale-upload:<uploadId>:<deleteAfter>`: stable across dates and re-runs; a moved deadline is a new
//   operation (see staleUploadOperationId below for why).
// - Apply re-reads the record before touching S3 and skips it when its deadline moved or it left the pending state,
//   because an object cannot be undeleted; only then deletes the object, then the record on the condition that its
//   deadline is still the one we acted on. The remaining race (retention extended between the re-read and the record
//   delete) is a PermanentError for review, since the object is already gone.
// - What outlives the call names the object by its key's hash (personalDataHash), never the key: the apply result
//   (kept by idempotency, 30 days), the failure reasons and details (DLQ, ledger, logs). The message still carries the
//   key, as apply needs it to delete.
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, type DynamoDBDocumentClient, GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import * as z from 'zod/mini';
import {
  assertOperationId,
  buildOperationId,
  countQuery,
  decodeCursor,
  defineJob,
  describeIssues,
  documentClient,
  encodeCursor,
  InvalidOperationIdError,
  JobSettingsReader,
  operationsOf,
  PermanentError,
  personalDataHash,
  S3ObjectStore,
  idPartSchema,
  type ApplyResult,
  type JobRuntimeSettings,
  type ObjectStore,
} from '../../job';
import { PENDING_DELETION, type UploadItem } from './items';

export const JOB_NAME = 'stale-upload-cleanup';
export const DEADLINE_INDEX = 'by-deadline';
const DAY_MS = 86_400_000;

/** The canonical timestamp form (Date#toISOString), so the same instant always gives the same ID. */
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * `stale-upload:<uploadId>:<deleteAfter>`. The deadline is part of the ID on purpose: an upload whose retention is
 * extended is skipped, and idempotency remembers that skip for the record lifetime; with the new deadline the later
 * deletion is a new operation, instead of a duplicate that would be suppressed for weeks past its deadline.
 * @throws InvalidOperationIdError naming the part that cannot be used.
 */
export function staleUploadOperationId(parts: { uploadId: string; deleteAfter: string }): string {
  if (!ISO_UTC.test(parts.deleteAfter) || Number.isNaN(Date.parse(parts.deleteAfter))) {
    throw new InvalidOperationIdError(
      `deleteAfter ${JSON.stringify(parts.deleteAfter.slice(0, 40))} must be a UTC timestamp in the form YYYY-MM-DDTHH:mm:ss.sssZ`,
    );
  }
  return buildOperationId(['stale-upload', { label: 'upload ID', id: parts.uploadId }, parts.deleteAfter]);
}

export const resourceSchema = z.strictObject({
  uploadId: idPartSchema,
  objectKey: z.string().check(z.minLength(1), z.maxLength(1024)),
  deleteAfter: z.iso.datetime({ precision: 3, message: 'must be a UTC timestamp with milliseconds' }),
});
export type UploadResource = z.infer<typeof resourceSchema>;

export interface StaleUploadDeps {
  documents: DynamoDBDocumentClient;
  uploadsTable: string;
  bucket: string;
  objects: ObjectStore;
  /** Apply's clock: a message is never acted on before its deadline. */
  now: () => Date;
}

export function createDeps(settings: JobRuntimeSettings): StaleUploadDeps {
  const read = new JobSettingsReader(settings);
  const uploadsTable = read.name('tables', 'uploads');
  const bucket = read.name('buckets', 'uploads');
  read.done();
  return { documents: documentClient(), uploadsTable, bucket, objects: new S3ObjectStore(), now: () => new Date() };
}

/** The latest deadline a run for `businessDate` deletes: the end of that date (UTC), or `now` if earlier. */
export function discoveryCutoff(businessDate: string, now: Date): string {
  const endOfDate = Date.parse(`${businessDate}T00:00:00.000Z`) + DAY_MS - 1;
  return new Date(Math.min(endOfDate, now.getTime())).toISOString();
}

const readUpload = async (deps: StaleUploadDeps, uploadId: string): Promise<UploadItem | undefined> => {
  const got = await deps.documents.send(
    new GetCommand({ TableName: deps.uploadsTable, Key: { uploadId }, ConsistentRead: true }),
  );
  return got.Item as UploadItem | undefined;
};

export const job = defineJob<UploadResource, StaleUploadDeps>({
  name: JOB_NAME,
  discoveryIndexes: [{ table: 'uploads', index: DEADLINE_INDEX }],
  resourceSchema,
  createDeps,

  async discover(deps, { businessDate, cursor, pageSize, now }) {
    const startKey =
      cursor === undefined
        ? undefined
        : decodeCursor(cursor, ['retentionState', 'deleteAfter', 'uploadId'], { retentionState: PENDING_DELETION });
    const page = await deps.documents.send(
      new QueryCommand({
        TableName: deps.uploadsTable,
        IndexName: DEADLINE_INDEX,
        KeyConditionExpression: 'retentionState = :pending AND deleteAfter <= :cutoff',
        ExpressionAttributeValues: { ':pending': PENDING_DELETION, ':cutoff': discoveryCutoff(businessDate, now) },
        ProjectionExpression: 'uploadId, objectKey, deleteAfter',
        Limit: pageSize,
        ExclusiveStartKey: startKey,
      }),
    );
    // A record that cannot become a valid message (an ID holding a space or ':', a deadline without milliseconds) is
    // handed back for review instead of stopping the run: the good uploads of the page are still deleted.
    const { operations, invalid } = operationsOf(
      page.Items ?? [],
      (item) => String(item.uploadId),
      (item) => {
        const parsed = resourceSchema.safeParse({
          uploadId: item.uploadId,
          objectKey: item.objectKey,
          deleteAfter: item.deleteAfter,
        });
        if (!parsed.success) return describeIssues(parsed.error).join('; ');
        return { operationId: staleUploadOperationId(parsed.data), resource: parsed.data };
      },
    );
    return { operations, invalid, nextCursor: encodeCursor(page.LastEvaluatedKey) };
  },

  /** The same index and cutoff, counted: what the run will discover in all (a lower bound past MAX_COUNT_PAGES pages). */
  async countEligible(deps, { businessDate, now }) {
    const { count } = await countQuery(deps.documents, {
      TableName: deps.uploadsTable,
      IndexName: DEADLINE_INDEX,
      KeyConditionExpression: 'retentionState = :pending AND deleteAfter <= :cutoff',
      ExpressionAttributeValues: { ':pending': PENDING_DELETION, ':cutoff': discoveryCutoff(businessDate, now) },
    });
    return count;
  },

  async apply(deps, { operationId, resource }): Promise<ApplyResult> {
    const { uploadId, objectKey, deleteAfter } = resource;
    try {
      assertOperationId(operationId, () => staleUploadOperationId({ uploadId, deleteAfter }));
    } catch (error) {
      if (error instanceof InvalidOperationIdError)
        throw new PermanentError(error.message, { operationId, uploadId }, { cause: error });
      throw error;
    }
    const now = deps.now();
    if (Date.parse(deleteAfter) > now.getTime()) {
      throw new PermanentError(`upload ${uploadId} is not due for deletion until ${deleteAfter}`, {
        uploadId,
        deleteAfter,
        now: now.toISOString(),
      });
    }

    const record = await readUpload(deps, uploadId);
    if (record === undefined) return { outcome: 'already-done', detail: { skipped: 'record-gone' } };
    if (record.deleteAfter !== deleteAfter || record.retentionState !== PENDING_DELETION) {
      return { outcome: 'already-done', detail: { skipped: 'retention-changed' } };
    }
    const objectKeyHash = personalDataHash(objectKey);
    if (record.objectKey !== objectKey) {
      throw new PermanentError(`upload ${uploadId} now points at another object than the one discovered`, {
        uploadId,
        objectKeyHash,
        recordObjectKeyHash: personalDataHash(String(record.objectKey)),
      });
    }

    await deps.objects.deleteObject(deps.bucket, objectKey);

    try {
      await deps.documents.send(
        new DeleteCommand({
          TableName: deps.uploadsTable,
          Key: { uploadId },
          ConditionExpression:
            'attribute_exists(uploadId) AND deleteAfter = :deleteAfter AND retentionState = :pending',
          ExpressionAttributeValues: { ':deleteAfter': deleteAfter, ':pending': PENDING_DELETION },
        }),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      const after = await readUpload(deps, uploadId);
      // A duplicate delivery finished first: the record is gone, as we wanted.
      if (after === undefined) return { outcome: 'already-done', detail: { objectKeyHash } };
      throw new PermanentError(
        `upload ${uploadId}: retention changed while its object was being deleted; the object ${objectKeyHash} is gone but the record was kept`,
        {
          uploadId,
          objectKeyHash,
          deleteAfter,
          recordDeleteAfter: after.deleteAfter,
          recordRetentionState: after.retentionState,
        },
        { cause: error },
      );
    }
    return { outcome: 'applied', detail: { objectKeyHash } };
  },
});
