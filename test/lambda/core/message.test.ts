import { parseMessage, serializeMessage, type JobMessage } from '../../../lambda/core/message';

const message: JobMessage = {
  version: 1,
  jobType: 'fake-job',
  operationId: 'fake:a:2026-11-28',
  batchId: 'fake-job:2026-11-28:run',
  businessDate: '2026-11-28',
  resource: { id: 'a' },
  enqueuedAt: '2026-11-29T02:00:00.000Z',
};

describe('Function: parseMessage', () => {
  it('accepts a chained deferral target and keeps it through serialization', () => {
    const chained = {
      ...message,
      attempt: 3,
      firstEnqueuedAt: '2026-11-29T01:00:00.000Z',
      notBefore: '2026-11-29T03:00:00.000Z',
    };
    expect(parseMessage(serializeMessage(chained, 4096), 4096)).toEqual({ ok: true, message: chained });
  });

  it('rejects a notBefore that is not a timestamp', () => {
    expect(parseMessage(JSON.stringify({ ...message, notBefore: 'tomorrow' }), 4096)).toEqual({
      ok: false,
      reasons: ['notBefore: must be an ISO-8601 timestamp'],
    });
  });

  it('names a body that is not JSON without quoting it, since the reason is kept in logs and the ledger', () => {
    // V8 would say: Unexpected token 'u', "uploads/Ja"... is not valid JSON
    expect(parseMessage('uploads/Jane Doe/cv.pdf', 4096)).toEqual({
      ok: false,
      reasons: ["body is not valid JSON (Unexpected token 'u')"],
    });
    expect(parseMessage('{"objectKey":"Jane Doe', 4096)).toEqual({
      ok: false,
      reasons: ['body is not valid JSON (Unterminated string in JSON at position 22)'],
    });
  });
});
