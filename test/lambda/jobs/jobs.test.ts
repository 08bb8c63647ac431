import { loadJob } from '../../../lambda/handlers/jobLoader';
import { MESSAGE_VERSION, SQS_MAX_MESSAGE_BYTES } from '../../../lambda/core/constants';
import { parseMessage, serializeMessage } from '../../../lambda/core/message';
import { expiredSessionsOperationId } from '../../../lambda/jobs/expired-session-cleanup';
import { reconcileOperationId } from '../../../lambda/jobs/payment-reconciliation';
import { staleUploadOperationId } from '../../../lambda/jobs/stale-upload-cleanup';

// The longest resource each job can discover, with the operation ID its discovery builds for it.
const samples = {
  'payment-reconciliation': {
    resource: { paymentId: 'p'.repeat(128) },
    operationId: reconcileOperationId({ provider: 'acme', paymentId: 'p'.repeat(128), businessDate: '2026-11-28' }),
  },
  'stale-upload-cleanup': {
    resource: { uploadId: 'u'.repeat(128), objectKey: 'k'.repeat(1024), deleteAfter: '2026-11-28T10:00:00.000Z' },
    operationId: staleUploadOperationId({ uploadId: 'u'.repeat(128), deleteAfter: '2026-11-28T10:00:00.000Z' }),
  },
  'expired-session-cleanup': {
    resource: { tenantId: 't'.repeat(128) },
    operationId: expiredSessionsOperationId({ tenantId: 't'.repeat(128), businessDate: '2026-11-28' }),
  },
};

describe('Job plug-ins', () => {
  describe.each(Object.entries(samples))('Job: %s', (name, sample) => {
    it('loads through the job loader by its folder name', () => {
      expect(loadJob(name).name).toBe(name);
    });

    it('accepts its largest resource, which fits the message contract', () => {
      const job = loadJob(name);
      expect(job.resourceSchema.safeParse(sample.resource).success).toBe(true);
      const body = serializeMessage(
        {
          version: MESSAGE_VERSION,
          jobType: name,
          operationId: sample.operationId,
          batchId: 'batch-1',
          businessDate: '2026-11-28',
          resource: sample.resource,
          enqueuedAt: '2026-11-29T02:00:00.000Z',
        },
        SQS_MAX_MESSAGE_BYTES,
      );
      expect(parseMessage(body, SQS_MAX_MESSAGE_BYTES).ok).toBe(true);
      expect(Buffer.byteLength(body)).toBeLessThan(2048);
    });

    it('rejects an unknown field and an over-long value', () => {
      const job = loadJob(name);
      expect(job.resourceSchema.safeParse({ ...sample.resource, extra: 'x' }).success).toBe(false);
      const [key] = Object.keys(sample.resource);
      expect(job.resourceSchema.safeParse({ ...sample.resource, [key]: 'x'.repeat(2000) }).success).toBe(false);
    });
  });
});
