// Pacing input: turns a downstream's Retry-After header (429/503) into a wait in milliseconds, or nothing usable.

/** Longest wait we take from a Retry-After hint; a larger or absurd value is clamped to it. @default 3600000 (1 hour) */
export const MAX_RETRY_AFTER_MS = 60 * 60 * 1000;

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const LONG_DAY = '(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)';
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
// RFC 9110 section 5.6.7: IMF-fixdate, plus the two obsolete forms a recipient must still accept.
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
const RFC850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
const ASCTIME = new RegExp(`^${DAY} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`);

/**
 * Parses an HTTP-date strictly. Hand-written because Date.parse is far too lenient here (it reads "5" as the year
 * 2005), and no dependency we carry parses RFC 9110 dates.
 */
export function parseHttpDate(value: string): number | undefined {
  let day: string, month: string, year: number, hh: string, mm: string, ss: string;
  let m = IMF_FIXDATE.exec(value);
  if (m) {
    [, day, month, , hh, mm, ss] = m;
    year = Number(m[3]);
  } else if ((m = RFC850.exec(value))) {
    [, day, month, , hh, mm, ss] = m;
    // RFC 9110: a two-digit year that looks more than 50 years in the future is in the past century.
    const yy = Number(m[3]);
    const thisYear = new Date().getUTCFullYear();
    year = 2000 + yy > thisYear + 50 ? 1900 + yy : 2000 + yy;
  } else if ((m = ASCTIME.exec(value))) {
    [, month, day, hh, mm, ss] = m;
    year = Number(m[6]);
  } else {
    return undefined;
  }
  const monthIndex = MONTHS.indexOf(month);
  const d = Number(day.trim());
  const ms = Date.UTC(year, monthIndex, d, Number(hh), Number(mm), Number(ss));
  const back = new Date(ms);
  // Date.UTC rolls 31 Feb over into March; a date that does not survive the round trip is not a real date.
  if (
    back.getUTCDate() !== d ||
    back.getUTCMonth() !== monthIndex ||
    back.getUTCHours() !== Number(hh) ||
    back.getUTCMinutes() !== Number(mm) ||
    back.getUTCSeconds() !== Number(ss)
  ) {
    return undefined;
  }
  return ms;
}

/**
 * Reads a Retry-After value in either form: delta-seconds ("120") or an HTTP-date.
 *
 * @param value the raw header value; absent, empty or malformed gives undefined so the caller falls back to backoff
 * @param now the clock to measure an HTTP-date against
 * @param maxMs the clamp for a large hint. @default MAX_RETRY_AFTER_MS
 * @returns milliseconds to wait, never negative (a date in the past means "now": 0), at most `maxMs`
 */
export function parseRetryAfter(
  value: string | null | undefined,
  now: Date | number,
  maxMs: number = MAX_RETRY_AFTER_MS,
): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (trimmed === '') return undefined;
  if (/^\d+$/.test(trimmed)) {
    // Long digit strings overflow to Infinity or lose precision; either way they are "very long", hence the clamp.
    return Math.min(Number(trimmed) * 1000, maxMs);
  }
  const at = parseHttpDate(trimmed);
  if (at === undefined) return undefined;
  const nowMs = typeof now === 'number' ? now : now.getTime();
  return Math.min(Math.max(0, at - nowMs), maxMs);
}
