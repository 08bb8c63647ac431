import { MAX_RETRY_AFTER_MS, parseHttpDate, parseRetryAfter } from '../../../lambda/core/retryAfter';

const NOW = Date.parse('2026-11-29T09:00:00.000Z');

describe('Function: parseRetryAfter', () => {
  describe('delta-seconds', () => {
    it('converts seconds to milliseconds', () => {
      expect(parseRetryAfter('120', NOW)).toBe(120_000);
    });

    it('accepts zero and surrounding whitespace', () => {
      expect(parseRetryAfter('0', NOW)).toBe(0);
      expect(parseRetryAfter(' 7 ', NOW)).toBe(7_000);
    });

    it('clamps a huge value to the cap', () => {
      expect(parseRetryAfter('999999999999999999999999', NOW)).toBe(MAX_RETRY_AFTER_MS);
      expect(parseRetryAfter('86400', NOW)).toBe(MAX_RETRY_AFTER_MS);
    });

    it('honours a caller-supplied cap', () => {
      expect(parseRetryAfter('60', NOW, 5_000)).toBe(5_000);
    });
  });

  describe('HTTP-date', () => {
    it('measures an IMF-fixdate from now', () => {
      expect(parseRetryAfter('Sun, 29 Nov 2026 09:00:30 GMT', NOW)).toBe(30_000);
    });

    it('accepts a Date as the clock', () => {
      expect(parseRetryAfter('Sun, 29 Nov 2026 09:01:00 GMT', new Date(NOW))).toBe(60_000);
    });

    it('accepts the obsolete RFC 850 and asctime forms', () => {
      expect(parseRetryAfter('Sunday, 29-Nov-26 09:00:10 GMT', NOW)).toBe(10_000);
      expect(parseRetryAfter('Sun Nov 29 09:00:05 2026', NOW)).toBe(5_000);
    });

    it('gives 0 for a date in the past', () => {
      expect(parseRetryAfter('Sat, 28 Nov 2026 09:00:00 GMT', NOW)).toBe(0);
    });

    it('clamps a far-future date to the cap', () => {
      expect(parseRetryAfter('Fri, 01 Jan 2100 00:00:00 GMT', NOW)).toBe(MAX_RETRY_AFTER_MS);
    });
  });

  describe('junk', () => {
    it.each([
      ['an empty string', ''],
      ['blanks', '   '],
      ['a word', 'soon'],
      ['a negative number', '-5'],
      ['exponent notation', '1e3'],
      ['a fraction', '1.5'],
      ['a digit with a suffix', '5s'],
      ['an ISO timestamp', '2026-11-29T09:00:30Z'],
      ['a date with an impossible day', 'Mon, 31 Feb 2026 09:00:00 GMT'],
      ['a date in another zone', 'Sun, 29 Nov 2026 09:00:30 PST'],
    ])('gives undefined for %s', (_label, value) => {
      expect(parseRetryAfter(value, NOW)).toBeUndefined();
    });

    it('gives undefined for a missing header', () => {
      expect(parseRetryAfter(null, NOW)).toBeUndefined();
      expect(parseRetryAfter(undefined, NOW)).toBeUndefined();
    });
  });
});

describe('Function: parseHttpDate', () => {
  it('parses an IMF-fixdate to epoch milliseconds', () => {
    expect(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')).toBe(Date.parse('1994-11-06T08:49:37Z'));
  });

  it('reads a two-digit RFC 850 year far in the future as the past century', () => {
    expect(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT')).toBe(Date.parse('1994-11-06T08:49:37Z'));
  });

  it('parses asctime with a space-padded day', () => {
    expect(parseHttpDate('Sun Nov  6 08:49:37 1994')).toBe(Date.parse('1994-11-06T08:49:37Z'));
  });

  it('refuses an out-of-range time', () => {
    expect(parseHttpDate('Sun, 06 Nov 1994 25:49:37 GMT')).toBeUndefined();
  });
});
