// The job as the engine loads it, with its longest resource and the operation ID its discovery builds for it.
import { describeJobContract } from '../../../../test/support/jobs';
import { JOB_NAME, staleUploadOperationId } from '..';

describeJobContract(JOB_NAME, {
  resource: { uploadId: 'u'.repeat(128), objectKey: 'k'.repeat(1024), deleteAfter: '2026-11-28T10:00:00.000Z' },
  operationId: staleUploadOperationId({ uploadId: 'u'.repeat(128), deleteAfter: '2026-11-28T10:00:00.000Z' }),
});
