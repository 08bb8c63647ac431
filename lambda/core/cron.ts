// EventBridge Scheduler's six-field cron evaluated in an IANA time zone: the local Scheduler fires by it, and `ops catch-up
// --missed` works out from it the business dates a schedule should have produced.
//
// Hand-written on purpose: the maintained npm cron libraries (cron-parser, croner) read the five/six-field Unix or
// Quartz formats, where the sixth field is seconds, day-of-week counts from 0, and "?" and the year field mean other
// things. AWS's format is `minutes hours day-of-month month day-of-week year`, day-of-week 1-7 = SUN-SAT, with "?" in
// exactly one of the day fields; and Scheduler's DST rules (a local time that does not exist is skipped, a repeated one
// fires once) must hold. Supported: numbers, names, `*`, `?`, lists, ranges and `/` steps. `L`, `W` and `#` are
// rejected with a message rather than silently mis-evaluated.
import { PacedJobsError } from './errors';

export class CronError extends PacedJobsError {
  constructor(
    message: string,
    public readonly expression: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'CronError';
  }
}

const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  names?: string[];
}

const FIELDS: FieldSpec[] = [
  { name: 'minutes', min: 0, max: 59 },
  { name: 'hours', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: MONTHS },
  { name: 'day-of-week', min: 1, max: 7, names: DAYS },
  { name: 'year', min: 1970, max: 2199 },
];

/** A parsed expression: the allowed values of each field; `undefined` means "any" (`*` or `?`). */
export interface CronExpression {
  source: string;
  minutes: Set<number>;
  hours: Set<number>;
  daysOfMonth?: Set<number>;
  months: Set<number>;
  /** 1-7 = Sunday-Saturday, as AWS counts. */
  daysOfWeek?: Set<number>;
  years?: Set<number>;
}

function parseValue(raw: string, spec: FieldSpec, expression: string): number {
  const upper = raw.toUpperCase();
  const byName = spec.names?.indexOf(upper) ?? -1;
  if (byName >= 0) return byName + 1;
  if (!/^\d+$/.test(raw)) {
    throw new CronError(
      `cron ${spec.name} field: "${raw}" is not a number${spec.names ? ' or a name' : ''}`,
      expression,
    );
  }
  const value = Number(raw);
  if (value < spec.min || value > spec.max) {
    throw new CronError(`cron ${spec.name} field: ${value} is outside ${spec.min}-${spec.max}`, expression);
  }
  return value;
}

function parseField(raw: string, spec: FieldSpec, expression: string): Set<number> | undefined {
  if (raw === '*' || raw === '?') return undefined;
  if (/[LW#]/i.test(raw.replace(/[A-Z]{3}/gi, (n) => (spec.names?.includes(n.toUpperCase()) ? '' : n)))) {
    throw new CronError(
      `cron ${spec.name} field: "${raw}" uses L, W or #, which the local scheduler does not emulate`,
      expression,
    );
  }
  const values = new Set<number>();
  for (const part of raw.split(',')) {
    const [range, stepText] = part.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1)
      throw new CronError(`cron ${spec.name} field: bad step in "${part}"`, expression);
    let from: number;
    let to: number;
    if (range === '*') {
      from = spec.min;
      to = spec.max;
    } else if (range.includes('-')) {
      const [a, b] = range.split('-');
      from = parseValue(a, spec, expression);
      to = parseValue(b, spec, expression);
      if (to < from) throw new CronError(`cron ${spec.name} field: range "${range}" runs backwards`, expression);
    } else {
      from = parseValue(range, spec, expression);
      to = stepText === undefined ? from : spec.max;
    }
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return values;
}

/**
 * Parses `cron(...)` or its six-field body.
 * @throws CronError naming the field at fault.
 */
export function parseCron(expression: string): CronExpression {
  const body = expression
    .trim()
    .replace(/^cron\((.*)\)$/s, '$1')
    .trim();
  const fields = body.split(/\s+/);
  if (fields.length !== 6) {
    throw new CronError(
      `cron expression "${expression}" must have 6 fields (minutes hours day-of-month month day-of-week year), found ${fields.length}`,
      expression,
    );
  }
  if ((fields[2] === '?') === (fields[4] === '?')) {
    throw new CronError(
      `cron expression "${expression}" must have "?" in exactly one of day-of-month and day-of-week`,
      expression,
    );
  }
  const [minutes, hours, dom, month, dow, year] = fields.map((f, i) => parseField(f, FIELDS[i], expression));
  const all = (spec: FieldSpec) => new Set(Array.from({ length: spec.max - spec.min + 1 }, (_, i) => spec.min + i));
  return {
    source: expression,
    minutes: minutes ?? all(FIELDS[0]),
    hours: hours ?? all(FIELDS[1]),
    daysOfMonth: dom,
    months: month ?? all(FIELDS[3]),
    daysOfWeek: dow,
    years: year,
  };
}

interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The wall-clock time of an instant in a time zone. */
export function wallTimeAt(instant: Date, timeZone: string): WallTime {
  let fmt = formatters.get(timeZone);
  if (!fmt) {
    fmt = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
    });
    formatters.set(timeZone, fmt);
  }
  const parts = Object.fromEntries(fmt.formatToParts(instant).map((p) => [p.type, p.value]));
  return { year: +parts.year, month: +parts.month, day: +parts.day, hour: +parts.hour, minute: +parts.minute };
}

const asUtcMs = (w: WallTime): number => Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute);

/**
 * The instant a wall-clock time names in a zone, or undefined when that time does not exist (spring forward).
 * A repeated time (fall back) resolves to its first occurrence, so it fires once, as Scheduler does.
 */
export function instantOf(wall: WallTime, timeZone: string): Date | undefined {
  const target = asUtcMs(wall);
  const candidates = new Set<number>();
  // The zone's offset is within +-14h; trying the offsets in force around the target finds every solution.
  for (const probeHours of [-36, -12, 0, 12, 36]) {
    const probe = new Date(target + probeHours * 3600_000);
    const offset = asUtcMs(wallTimeAt(probe, timeZone)) - Math.floor(probe.getTime() / 60_000) * 60_000;
    const instant = target - offset;
    if (asUtcMs(wallTimeAt(new Date(instant), timeZone)) === target) candidates.add(instant);
  }
  if (candidates.size === 0) return undefined;
  return new Date(Math.min(...candidates));
}

function dayMatches(cron: CronExpression, year: number, month: number, day: number): boolean {
  if (cron.years && !cron.years.has(year)) return false;
  if (!cron.months.has(month)) return false;
  if (cron.daysOfMonth && !cron.daysOfMonth.has(day)) return false;
  if (cron.daysOfWeek && !cron.daysOfWeek.has(new Date(Date.UTC(year, month - 1, day)).getUTCDay() + 1)) return false;
  return true;
}

/** Days searched before giving up: covers a yearly schedule and leap days. */
const SEARCH_DAYS = 366 * 5;

/**
 * The first fire time strictly after `after`, evaluated in `timeZone`, or undefined when none exists within five
 * years (e.g. a year field in the past).
 */
export function nextFireTime(cron: CronExpression, timeZone: string, after: Date): Date | undefined {
  const start = wallTimeAt(after, timeZone);
  const hours = [...cron.hours].sort((a, b) => a - b);
  const minutes = [...cron.minutes].sort((a, b) => a - b);
  for (let d = 0; d < SEARCH_DAYS; d++) {
    const date = new Date(Date.UTC(start.year, start.month - 1, start.day + d));
    const [year, month, day] = [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()];
    if (!dayMatches(cron, year, month, day)) continue;
    for (const hour of hours) {
      for (const minute of minutes) {
        const instant = instantOf({ year, month, day, hour, minute }, timeZone);
        if (instant && instant.getTime() > after.getTime()) return instant;
      }
    }
  }
  return undefined;
}

/** The calendar date (YYYY-MM-DD) of an instant in a zone, shifted by whole days. */
export function zonedDate(instant: Date, timeZone: string, offsetDays = 0): string {
  const w = wallTimeAt(instant, timeZone);
  return new Date(Date.UTC(w.year, w.month - 1, w.day + offsetDays)).toISOString().slice(0, 10);
}

/** A night the schedule covers: its business date, and when it fires (absent: the local time does not exist that day). */
export interface ScheduledRun {
  businessDate: string;
  /** The fire time; undefined when the wall time does not exist that day (spring forward), so Scheduler skips it. */
  at?: Date;
}

/**
 * The runs a schedule makes from `from` (exclusive) to `to` (inclusive), oldest first, each with the business date it
 * covers: the fire's local calendar date in `timeZone`, shifted by `offsetDays` (as the producer derives it). A fire
 * whose local time does not exist that day (spring forward) is listed without `at`: Scheduler skips it, so its business
 * date is never processed unless caught up. A repeated local time (fall back) is one run, as Scheduler fires it once.
 */
export function scheduledRuns(
  cron: CronExpression,
  timeZone: string,
  offsetDays: number,
  from: Date,
  to: Date,
): ScheduledRun[] {
  const runs: ScheduledRun[] = [];
  const first = wallTimeAt(from, timeZone);
  const last = wallTimeAt(to, timeZone);
  const lastDay = Date.UTC(last.year, last.month - 1, last.day);
  const hours = [...cron.hours].sort((a, b) => a - b);
  const minutes = [...cron.minutes].sort((a, b) => a - b);
  for (let dayMs = Date.UTC(first.year, first.month - 1, first.day); dayMs <= lastDay; dayMs += 86_400_000) {
    const date = new Date(dayMs);
    const [year, month, day] = [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()];
    if (!dayMatches(cron, year, month, day)) continue;
    const businessDate = new Date(Date.UTC(year, month - 1, day + offsetDays)).toISOString().slice(0, 10);
    for (const hour of hours) {
      for (const minute of minutes) {
        const wall = { year, month, day, hour, minute };
        const at = instantOf(wall, timeZone);
        // A skipped time is judged by its wall time against the range's, as no instant names it.
        const inRange = at
          ? at.getTime() > from.getTime() && at.getTime() <= to.getTime()
          : asUtcMs(wall) > asUtcMs(first) && asUtcMs(wall) <= asUtcMs(last);
        if (inRange) runs.push(at ? { businessDate, at } : { businessDate });
      }
    }
  }
  return runs;
}
