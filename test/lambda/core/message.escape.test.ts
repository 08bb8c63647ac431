// The one escape of data on its way into text a person reads: dead-letter reasons, ops tables and output, the console.
import { escapeUnprintable } from '../../../lambda/core/message';

describe('Function: escapeUnprintable', () => {
  it.each([
    [
      'C0 controls (NUL, tab, line feed, carriage return, escape)',
      'a\u0000\t\n\r\u001bb',
      'a\\u0000\\u0009\\u000a\\u000d\\u001bb',
    ],
    ['DEL and C1 controls (NEL, CSI)', 'a\u007f\u0085\u009bb', 'a\\u007f\\u0085\\u009bb'],
    ['line and paragraph separators', 'a\u2028b\u2029c', 'a\\u2028b\\u2029c'],
    [
      'bidi embeddings and overrides',
      'x\u202a\u202b\u202c\u202d\u202egnp.exe',
      'x\\u202a\\u202b\\u202c\\u202d\\u202egnp.exe',
    ],
    [
      'bidi isolates and marks',
      '\u2066\u2067\u2068\u2069\u200e\u200f\u061c',
      '\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f\\u061c',
    ],
    [
      'zero-width and invisible characters',
      'a\u200b\u200c\u200d\u2060\ufeff\u00adb',
      'a\\u200b\\u200c\\u200d\\u2060\\ufeff\\u00adb',
    ],
  ])('writes %s as \\uXXXX', (_label, raw, escaped) => {
    expect(escapeUnprintable(raw)).toBe(escaped);
  });

  it('keeps printable text, accents, scripts and emoji as they are', () => {
    expect(escapeUnprintable('café Ünïcode مرحبا 日本 🎉 "quoted" \\ back')).toBe(
      'café Ünïcode مرحبا 日本 🎉 "quoted" \\ back',
    );
  });

  it('keeps the characters it is told to keep, and escapes the rest', () => {
    expect(escapeUnprintable('row 1\nrow\u202e 2\r\n', '\n')).toBe('row 1\nrow\\u202e 2\\u000d\n');
  });

  it('leaves a JSON document meaning what it meant: its escapes are JSON escapes', () => {
    const value = { key: 'x\u202egnp.exe\u2028', n: 1 };
    const text = escapeUnprintable(JSON.stringify(value, null, 2), '\n');

    expect(text).toContain('"x\\u202egnp.exe\\u2028"');
    expect(JSON.parse(text)).toEqual(value);
  });
});
