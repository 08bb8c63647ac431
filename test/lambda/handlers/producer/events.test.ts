import {
  isSqsEvent,
  parseProducerEvent,
  parseStepRecord,
  ProducerEventError,
} from '../../../../lambda/handlers/producer/events';
import { sqsEvent, sqsRecord } from '../../../support/lambdaEvents';
import { BATCH } from './fakes';

/** The ProducerEventError `parse` throws. */
function caught(parse: () => unknown): ProducerEventError {
  try {
    parse();
  } catch (error) {
    if (error instanceof ProducerEventError) return error;
    throw error;
  }
  throw new Error('expected a ProducerEventError, nothing was thrown');
}

describe('Function: parseProducerEvent', () => {
  it('reads a Scheduler input, a manual run and a catch-up', () => {
    const scheduled = { scheduledTime: '2026-11-29T01:00:00Z' };
    expect(parseProducerEvent(scheduled)).toEqual(scheduled);
    expect(parseProducerEvent({ businessDate: '2026-11-25', batchId: BATCH, backfill: true })).toEqual({
      businessDate: '2026-11-25',
      batchId: BATCH,
      backfill: true,
    });
  });

  it('takes no event for the empty one: a run of the current business date', () => {
    expect(parseProducerEvent(undefined)).toEqual({});
    expect(parseProducerEvent(null)).toEqual({});
  });

  it('throws naming every problem, each under its field', () => {
    const error = caught(() => parseProducerEvent({ scheduledTime: 'tonight', businessDate: '2026-02-30' }));
    expect(error).toBeInstanceOf(ProducerEventError);
    const reasons = ['scheduledTime: must be an ISO-8601 timestamp', 'businessDate: must be a real calendar date'];
    expect(error.message).toBe(`invalid producer event: ${reasons.join('; ')}`);
    expect(error.reasons).toEqual(reasons);
  });
});

describe('Function: parseStepRecord', () => {
  const valid = { kind: 'admission-step', batchId: BATCH, businessDate: '2026-11-28', step: 2 };

  it('reads the step a record carries', () => {
    expect(parseStepRecord(sqsRecord(JSON.stringify(valid)))).toEqual(valid);
  });

  it('throws for a body that is not JSON, naming the record and keeping the parse error as the cause', () => {
    const error = caught(() => parseStepRecord(sqsRecord('{not json', { messageId: 'm-1' })));
    expect(error).toEqual(new ProducerEventError('admission step m-1 is not JSON', ['body: not JSON']));
    expect(error.reasons).toEqual(['body: not JSON']);
    expect(error.cause).toBeInstanceOf(SyntaxError);
  });

  it('throws naming every way the body is not a step', () => {
    expect(() => parseStepRecord(sqsRecord(JSON.stringify({ ...valid, step: -1, extra: true })))).toThrow(
      'invalid admission step: step: Too small: expected number to be >=0; event: Unrecognized key: "extra"',
    );
  });
});

describe('Function: isSqsEvent', () => {
  it('tells a batch from the admission queue from a direct invocation', () => {
    expect(isSqsEvent(sqsEvent(sqsRecord('{}')))).toBe(true);
    expect(isSqsEvent({ Records: [{ eventSource: 'aws:s3' }] })).toBe(false);
    expect(isSqsEvent({ scheduledTime: '2026-11-29T01:00:00Z' })).toBe(false);
    expect(isSqsEvent(undefined)).toBe(false);
  });
});
