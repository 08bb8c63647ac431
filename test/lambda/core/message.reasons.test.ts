// The bound on rejection reasons: a body full of bad keys still yields a review record that fits one DynamoDB item.
import { boundReasons, MAX_REASONS, parseMessage } from '../../../lambda/core/message';
import { REJECTION_REASON_CHARS } from '../../../lambda/core/reasonCaps';

describe('Function: boundReasons', () => {
  it('keeps a short list as it is', () => {
    expect(boundReasons(['a: bad', 'b: bad'])).toEqual(['a: bad', 'b: bad']);
  });

  it('keeps the first MAX_REASONS reasons and counts the rest', () => {
    const reasons = Array.from({ length: MAX_REASONS + 5 }, (_, i) => `k${i}: bad`);
    expect(boundReasons(reasons)).toEqual([...reasons.slice(0, MAX_REASONS), '... and 5 more problems']);
  });

  it('writes control, bidirectional and zero-width characters as escapes, so a reason reads as what it holds', () => {
    expect(
      boundReasons([
        'body: Unrecognized key: "x\u202egnp.exe"',
        'resource: Unrecognized key: "a\u0000\u001b[2J\u200b\u2028b"',
      ]),
    ).toEqual([
      'body: Unrecognized key: "x\\u202egnp.exe"',
      'resource: Unrecognized key: "a\\u0000\\u001b[2J\\u200b\\u2028b"',
    ]);
  });

  it('cuts a long reason and says how long it was', () => {
    const long = `body: Unrecognized keys: ${'"k", '.repeat(200)}`;
    const cut = long.slice(0, REJECTION_REASON_CHARS);
    expect(boundReasons([long])).toEqual([`${cut}... (${long.length} characters in all)`]);
  });
});

describe('Function: parseMessage', () => {
  it('bounds the reasons for an envelope with thousands of bad resource values', () => {
    const resource = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k${i}`, null]));
    const body = JSON.stringify({
      version: 1,
      jobType: 'fake-job',
      operationId: 'a',
      batchId: 'b',
      businessDate: '2026-11-28',
      resource,
      enqueuedAt: '2026-11-29T02:00:00.000Z',
    });
    const parsed = parseMessage(body, 262_144);
    expect(parsed).toEqual({
      ok: false,
      reasons: [
        ...Array.from({ length: MAX_REASONS }, (_, i) => `resource.k${i}: must be a string, a number or a boolean`),
        '... and 2980 more problems',
      ],
    });
  });
});
