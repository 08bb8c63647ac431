// The job as the engine loads it, with its longest resource and the operation ID its discovery builds for it.
import { describeJobContract } from '../../../../test/support/jobs';
import { JOB_NAME, reconcileOperationId } from '..';

describeJobContract(JOB_NAME, {
  resource: { paymentId: 'p'.repeat(128) },
  operationId: reconcileOperationId({ provider: 'acme', paymentId: 'p'.repeat(128), businessDate: '2026-11-28' }),
});
