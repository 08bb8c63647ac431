// The uploads table as the cleanup job sees it: the item shape, and builders the local runtime seeds with.

/** The value of `retentionState` while an upload awaits deletion; only such items are in the `by-deadline` index. */
export const PENDING_DELETION = 'pending';

/**
 * One upload's metadata (table key `uploadId`); its object lives in the uploads bucket (alias buckets.uploads) under
 * `objectKey`. `retentionState` + `deleteAfter` are the keys of the sparse index `by-deadline`: an application that
 * puts the upload on hold removes or changes `retentionState`, and one that extends retention moves `deleteAfter`.
 */
export interface UploadItem {
  uploadId: string;
  objectKey: string;
  /** The retention deadline, always in the canonical form of Date#toISOString (UTC, milliseconds), so strings sort as time. */
  deleteAfter: string;
  retentionState?: typeof PENDING_DELETION | string;
  /** ISO-8601 UTC timestamp. */
  uploadedAt: string;
  sizeBytes?: number;
}

/** An upload that becomes due for deletion at `deleteAfter`. */
export function pendingUpload(input: {
  uploadId: string;
  deleteAfter: Date | string;
  objectKey?: string;
  uploadedAt?: string;
  sizeBytes?: number;
}): UploadItem {
  const deleteAfter =
    typeof input.deleteAfter === 'string' ? new Date(input.deleteAfter).toISOString() : input.deleteAfter.toISOString();
  return {
    uploadId: input.uploadId,
    objectKey: input.objectKey ?? `uploads/${input.uploadId}.bin`,
    deleteAfter,
    retentionState: PENDING_DELETION,
    uploadedAt: input.uploadedAt ?? new Date(Date.parse(deleteAfter) - 30 * 86_400_000).toISOString(),
    ...(input.sizeBytes === undefined ? {} : { sizeBytes: input.sizeBytes }),
  };
}

/** `count` uploads whose deadlines fall across `businessDate` (UTC), with stable IDs `upl-<businessDate>-0001`, ... */
export function demoUploads(businessDate: string, count: number): UploadItem[] {
  const start = Date.parse(`${businessDate}T00:00:00.000Z`);
  const step = Math.floor(86_400_000 / Math.max(1, count));
  return Array.from({ length: count }, (_, i) =>
    pendingUpload({
      uploadId: `upl-${businessDate}-${String(i + 1).padStart(4, '0')}`,
      deleteAfter: new Date(start + i * step),
      sizeBytes: 1024,
    }),
  );
}
