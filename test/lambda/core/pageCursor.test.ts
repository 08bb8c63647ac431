import { InvalidCursorError, MAX_CURSOR_LENGTH, decodeCursor, encodeCursor } from '../../../lambda/core/pageCursor';

const encode = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('Function: encodeCursor', () => {
  it('round-trips a key through decodeCursor', () => {
    const key = { unsettledDate: '2026-11-28', paymentId: 'p/1+=' };
    const cursor = encodeCursor(key)!;
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(cursor, ['paymentId', 'unsettledDate'])).toEqual(key);
  });

  it('gives undefined when there is no key', () => {
    expect(encodeCursor(undefined)).toBeUndefined();
    expect(encodeCursor({})).toBeUndefined();
  });

  it('throws on a non-string key attribute', () => {
    expect(() => encodeCursor({ n: 1 })).toThrow(
      new InvalidCursorError('cannot encode key attribute "n": only string keys are supported'),
    );
  });
});

describe('Function: decodeCursor', () => {
  it.each([
    ['empty', '', `invalid cursor: must be 1 to ${MAX_CURSOR_LENGTH} characters`],
    ['too long', 'a'.repeat(MAX_CURSOR_LENGTH + 1), `invalid cursor: must be 1 to ${MAX_CURSOR_LENGTH} characters`],
    ['not base64url', 'abc+/=', 'invalid cursor: not base64url'],
    ['not JSON', Buffer.from('{nope').toString('base64url'), 'invalid cursor: not an encoded key'],
    ['an array', encode(['a']), 'invalid cursor: not an encoded key'],
    ['missing an attribute', encode({ tenantId: 't' }), 'invalid cursor: expected key attributes a, tenantId'],
    [
      'an extra attribute',
      encode({ tenantId: 't', a: 'x', b: 'y' }),
      'invalid cursor: expected key attributes a, tenantId',
    ],
    [
      'a number attribute',
      encode({ tenantId: 't', a: 1 }),
      'invalid cursor: key attribute a must be a non-empty string',
    ],
  ])('throws when the cursor is %s', (_label, cursor, message) => {
    expect(() => decodeCursor(cursor, ['tenantId', 'a'])).toThrow(new InvalidCursorError(message));
  });

  it('throws when the cursor belongs to another partition', () => {
    const cursor = encodeCursor({ unsettledDate: '2026-11-27', paymentId: 'p' })!;
    expect(() => decodeCursor(cursor, ['unsettledDate', 'paymentId'], { unsettledDate: '2026-11-28' })).toThrow(
      'invalid cursor: it belongs to another query (unsettledDate is not "2026-11-28")',
    );
  });
});
