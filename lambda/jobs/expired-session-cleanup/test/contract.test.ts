// The job as the engine loads it, with its longest resource and the operation ID its discovery builds for it.
import { describeJobContract } from '../../../../test/support/jobs';
import { JOB_NAME, expiredSessionsOperationId } from '..';

describeJobContract(JOB_NAME, {
  resource: { tenantId: 't'.repeat(128) },
  operationId: expiredSessionsOperationId({ tenantId: 't'.repeat(128), businessDate: '2026-11-28' }),
});
