import { CronError, instantOf, nextFireTime, parseCron, scheduledRuns, zonedDate } from '../../../lambda/core/cron';

describe('Function: parseCron', () => {
  it('reads the six AWS fields, names and steps', () => {
    const cron = parseCron('cron(0/15 9-17 ? JAN,MAR MON-FRI 2030)');
    expect([...cron.minutes]).toEqual([0, 15, 30, 45]);
    expect([...cron.hours]).toEqual([9, 10, 11, 12, 13, 14, 15, 16, 17]);
    expect(cron.daysOfMonth).toBeUndefined();
    expect([...cron.months]).toEqual([1, 3]);
    expect([...cron.daysOfWeek!]).toEqual([2, 3, 4, 5, 6]);
    expect([...cron.years!]).toEqual([2030]);
  });

  it('throws when the field count is wrong', () => {
    expect(() => parseCron('0 2 * * ?')).toThrow(
      new CronError(
        'cron expression "0 2 * * ?" must have 6 fields (minutes hours day-of-month month day-of-week year), found 5',
        '0 2 * * ?',
      ),
    );
  });

  it('throws when "?" is not in exactly one day field', () => {
    expect(() => parseCron('0 2 * * * *')).toThrow(
      'cron expression "0 2 * * * *" must have "?" in exactly one of day-of-month and day-of-week',
    );
  });

  it('throws when a value is out of range', () => {
    expect(() => parseCron('0 24 * * ? *')).toThrow('cron hours field: 24 is outside 0-23');
  });

  it('throws on L, W and # rather than mis-evaluating them', () => {
    expect(() => parseCron('0 2 L * ? *')).toThrow(
      'cron day-of-month field: "L" uses L, W or #, which the local scheduler does not emulate',
    );
  });
});

describe('Function: nextFireTime', () => {
  it('fires at 02:00 London time, which is 01:00 UTC in summer and 02:00 UTC in winter', () => {
    const cron = parseCron('0 2 * * ? *');
    expect(nextFireTime(cron, 'Europe/London', new Date('2026-07-01T12:00:00Z'))!.toISOString()).toBe(
      '2026-07-02T01:00:00.000Z',
    );
    expect(nextFireTime(cron, 'Europe/London', new Date('2026-12-01T12:00:00Z'))!.toISOString()).toBe(
      '2026-12-02T02:00:00.000Z',
    );
  });

  it('skips a local time that does not exist when the clocks go forward', () => {
    // 2026-03-29: London jumps from 01:00 to 02:00, so 01:30 never happens that day.
    const cron = parseCron('30 1 * * ? *');
    expect(nextFireTime(cron, 'Europe/London', new Date('2026-03-28T12:00:00Z'))!.toISOString()).toBe(
      '2026-03-30T00:30:00.000Z',
    );
  });

  it('fires once for a local time that happens twice when the clocks go back', () => {
    // 2026-10-25: London repeats 01:00-02:00; 01:30 fires at its first occurrence (BST) only.
    const cron = parseCron('30 1 * * ? *');
    const first = nextFireTime(cron, 'Europe/London', new Date('2026-10-24T12:00:00Z'))!;
    expect(first.toISOString()).toBe('2026-10-25T00:30:00.000Z');
    expect(nextFireTime(cron, 'Europe/London', first)!.toISOString()).toBe('2026-10-26T01:30:00.000Z');
  });

  it('honours day-of-week counted 1-7 from Sunday', () => {
    const cron = parseCron('0 9 ? * 2 *'); // Mondays
    expect(nextFireTime(cron, 'UTC', new Date('2026-11-29T10:00:00Z'))!.toISOString()).toBe('2026-11-30T09:00:00.000Z');
  });

  it('returns undefined when the year field is in the past', () => {
    expect(nextFireTime(parseCron('0 0 1 1 ? 2020'), 'UTC', new Date('2026-01-01T00:00:00Z'))).toBeUndefined();
  });
});

describe('Function: instantOf', () => {
  it('returns undefined for a wall time skipped by DST', () => {
    expect(instantOf({ year: 2026, month: 3, day: 8, hour: 2, minute: 30 }, 'America/New_York')).toBeUndefined();
  });
});

describe('Function: zonedDate', () => {
  it('gives the calendar date in the zone, shifted by days', () => {
    expect(zonedDate(new Date('2026-06-30T23:30:00Z'), 'Europe/London')).toBe('2026-07-01');
    expect(zonedDate(new Date('2026-06-30T23:30:00Z'), 'Europe/London', -1)).toBe('2026-06-30');
  });
});

describe('Function: scheduledRuns', () => {
  const berlin = parseCron('cron(30 2 * * ? *)');

  it("lists each night's run with the business date it covers, the repeated local time once, and a nonexistent one as skipped", () => {
    // Berlin springs forward on 2026-03-29 (02:00 -> 03:00: 02:30 does not exist) and falls back on 2026-10-25.
    const spring = scheduledRuns(
      berlin,
      'Europe/Berlin',
      -1,
      new Date('2026-03-27T12:00:00Z'),
      new Date('2026-03-31T12:00:00Z'),
    );
    expect(spring.map((r) => [r.businessDate, r.at?.toISOString()])).toEqual([
      ['2026-03-27', '2026-03-28T01:30:00.000Z'],
      ['2026-03-28', undefined],
      ['2026-03-29', '2026-03-30T00:30:00.000Z'],
      ['2026-03-30', '2026-03-31T00:30:00.000Z'],
    ]);
    const autumn = scheduledRuns(
      berlin,
      'Europe/Berlin',
      0,
      new Date('2026-10-24T12:00:00Z'),
      new Date('2026-10-26T12:00:00Z'),
    );
    expect(autumn.map((r) => [r.businessDate, r.at?.toISOString()])).toEqual([
      ['2026-10-25', '2026-10-25T00:30:00.000Z'],
      ['2026-10-26', '2026-10-26T01:30:00.000Z'],
    ]);
  });

  it("keeps only the runs after `from` and up to `to`, on the schedule's days", () => {
    const weekdays = parseCron('cron(0 2 ? * MON-FRI *)');
    const runs = scheduledRuns(weekdays, 'UTC', 0, new Date('2026-11-27T02:00:00Z'), new Date('2026-12-01T02:00:00Z'));
    // Fri 27th at 02:00 is `from` itself (excluded), the weekend has none, Tue 1st at 02:00 is `to` (included).
    expect(runs.map((r) => r.businessDate)).toEqual(['2026-11-30', '2026-12-01']);
  });
});
