import { createHash } from 'node:crypto';
import { idempotencyKeyPrefix, idempotencyRecordId } from '../../../lambda/core/idempotencyKey';

describe('Function: idempotencyRecordId', () => {
  it('prefixes the base64 md5 of the JSON-encoded operation ID with the job name', () => {
    expect(idempotencyKeyPrefix('payments-job')).toBe('payments-job');
    // md5('"op:1"') in base64, computed independently.
    expect(idempotencyRecordId('payments-job', 'op:1')).toBe(
      'payments-job#' + createHash('md5').update('"op:1"').digest('base64'),
    );
    expect(idempotencyRecordId('fake-job', 'a')).not.toBe(idempotencyRecordId('other-job', 'a'));
  });
});
