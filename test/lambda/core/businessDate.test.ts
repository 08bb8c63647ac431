import {
  assertNotFutureBusinessDate,
  BusinessDateError,
  businessDateFor,
  compactTimestamp,
  FutureBusinessDateError,
  latestBusinessDate,
  makeBatchId,
} from '../../../lambda/core/businessDate';
import { idSchema } from '../../../lambda/core/message';

describe('Function: businessDateFor', () => {
  it('returns the UTC calendar date for UTC', () => {
    expect(businessDateFor(new Date('2026-03-01T23:30:00Z'), 'UTC')).toBe('2026-03-01');
  });

  it('returns the calendar date in the given zone, which may already be the next day', () => {
    expect(businessDateFor(new Date('2026-03-01T23:30:00Z'), 'Europe/Berlin')).toBe('2026-03-02');
    expect(businessDateFor(new Date('2026-03-02T03:00:00Z'), 'America/Los_Angeles')).toBe('2026-03-01');
  });

  it('applies a negative offset across a month and leap-day boundary', () => {
    expect(businessDateFor(new Date('2028-03-01T02:00:00Z'), 'UTC', -1)).toBe('2028-02-29');
    expect(businessDateFor(new Date('2027-01-01T00:30:00Z'), 'Europe/Berlin', -1)).toBe('2026-12-31');
  });

  it('is exact on a daylight-saving change day', () => {
    // 2026-03-29 02:00 CET jumps to 03:00 CEST; 00:30 UTC is 01:30 local, 01:30 UTC is 03:30 local.
    expect(businessDateFor(new Date('2026-03-29T01:30:00Z'), 'Europe/Berlin', -1)).toBe('2026-03-28');
    expect(businessDateFor(new Date('2026-03-28T23:30:00Z'), 'Europe/Berlin')).toBe('2026-03-29');
  });

  it('throws for an unknown time zone', () => {
    const call = () => businessDateFor(new Date('2026-03-01T00:00:00Z'), 'Mars/Olympus');
    expect(call).toThrow(BusinessDateError);
    expect(call).toThrow('unknown time zone "Mars/Olympus"');
  });

  it('throws for an invalid instant', () => {
    expect(() => businessDateFor(new Date('nope'), 'UTC')).toThrow(
      'cannot derive a business date from an invalid time',
    );
  });
});

describe('Function: compactTimestamp', () => {
  it('drops separators and milliseconds', () => {
    expect(compactTimestamp(new Date('2026-11-29T02:00:00.000Z'))).toBe('20261129T020000Z');
  });
});

describe('Function: makeBatchId', () => {
  it('derives a stable ID from the scheduled time', () => {
    const id = makeBatchId('payments-job', '2026-11-28', new Date('2026-11-29T02:00:00Z'));
    expect(id).toBe('payments-job:2026-11-28:20261129T020000Z');
    expect(idSchema.safeParse(id).success).toBe(true);
  });

  it('uses a random manual suffix without a scheduled time', () => {
    expect(makeBatchId('fake-job', '2026-11-28', undefined, () => 'abcd1234')).toBe(
      'fake-job:2026-11-28:manual-abcd1234',
    );
    const a = makeBatchId('fake-job', '2026-11-28');
    expect(a).toMatch(/^fake-job:2026-11-28:manual-[0-9a-f]{8}$/);
    expect(idSchema.safeParse(a).success).toBe(true);
  });

  it('rejects a business date that is not a real date', () => {
    expect(() => makeBatchId('fake-job', '2026-02-30')).toThrow(
      'business date "2026-02-30" is not a real YYYY-MM-DD date',
    );
  });
});

describe('Function: latestBusinessDate', () => {
  const london = { timeZone: 'Europe/London', businessDateOffsetDays: -1 };

  it("is the date now in the job's zone plus its offset", () => {
    expect(latestBusinessDate(london, new Date('2026-12-05T01:10:00Z'))).toBe('2026-12-04');
    expect(latestBusinessDate({ timeZone: 'UTC', businessDateOffsetDays: 0 }, new Date('2026-12-05T01:10:00Z'))).toBe(
      '2026-12-05',
    );
  });

  it("turns at midnight in the job's zone, not in UTC", () => {
    const tokyo = { timeZone: 'Asia/Tokyo', businessDateOffsetDays: 0 };
    // 14:59:59 UTC is 23:59:59 in Tokyo; a second later the next day has begun there.
    expect(latestBusinessDate(tokyo, new Date('2026-12-04T14:59:59Z'))).toBe('2026-12-04');
    expect(latestBusinessDate(tokyo, new Date('2026-12-04T15:00:00Z'))).toBe('2026-12-05');
    const la = { timeZone: 'America/Los_Angeles', businessDateOffsetDays: 0 };
    expect(latestBusinessDate(la, new Date('2026-12-05T07:59:59Z'))).toBe('2026-12-04');
  });

  it('crosses a year end with the offset', () => {
    expect(latestBusinessDate(london, new Date('2027-01-01T00:00:00Z'))).toBe('2026-12-31');
  });
});

describe('Function: assertNotFutureBusinessDate', () => {
  const london = { timeZone: 'Europe/London', businessDateOffsetDays: -1 };
  const now = new Date('2026-12-05T01:10:00Z');

  it('accepts the latest date and any earlier one', () => {
    expect(() => assertNotFutureBusinessDate('sessions-job', '2026-12-04', london, now)).not.toThrow();
    expect(() => assertNotFutureBusinessDate('sessions-job', '2025-12-04', london, now)).not.toThrow();
  });

  it('refuses a date after the latest, naming it, the latest and the rule', () => {
    const call = () => assertNotFutureBusinessDate('sessions-job', '2027-12-04', london, now);
    expect(call).toThrow(FutureBusinessDateError);
    expect(call).toThrow(BusinessDateError);
    expect(call).toThrow(
      'business date 2027-12-04 is in the future: the latest for sessions-job now is 2026-12-04 (Europe/London, offset -1)',
    );
  });

  it('refuses the very next day, and shows a positive offset with its sign', () => {
    expect(() => assertNotFutureBusinessDate('sessions-job', '2026-12-05', london, now)).toThrow(
      'business date 2026-12-05 is in the future: the latest for sessions-job now is 2026-12-04 (Europe/London, offset -1)',
    );
    expect(() =>
      assertNotFutureBusinessDate('j', '2026-12-07', { timeZone: 'UTC', businessDateOffsetDays: 1 }, now),
    ).toThrow('business date 2026-12-07 is in the future: the latest for j now is 2026-12-06 (UTC, offset +1)');
  });

  it('carries the refused and the latest date for callers that report them', () => {
    let caught: unknown;
    try {
      assertNotFutureBusinessDate('sessions-job', '2027-12-04', london, now);
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({
      name: 'FutureBusinessDateError',
      jobName: 'sessions-job',
      businessDate: '2027-12-04',
      latest: '2026-12-04',
    });
  });
});
