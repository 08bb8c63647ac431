import { personalDataHash, redactValue, sanitizedCause } from '../../../lambda/core/privacy';

describe('Function: personalDataHash', () => {
  it('is sha256: and the first 16 hex digits of the value, as `sha256sum | cut -c1-16` prints them', () => {
    // printf %s 'uploads/Jane Doe/passport.pdf' | sha256sum | cut -c1-16
    expect(personalDataHash('uploads/Jane Doe/passport.pdf')).toBe('sha256:0645ea154bf78ee0');
    expect(personalDataHash('')).toBe('sha256:e3b0c44298fc1c14');
  });

  it('tells values apart and never contains the value', () => {
    const a = personalDataHash('uploads/alice.pdf');
    expect(personalDataHash('uploads/bob.pdf')).not.toBe(a);
    expect(a).not.toContain('alice');
  });
});

describe('Function: sanitizedCause', () => {
  it("keeps the type and the given message, and none of the error's message, cause or fields", () => {
    const raw = Object.assign(
      new TypeError('header "Bearer sk_secret" is invalid', { cause: new Error('sk_secret') }),
      { header: 'sk_secret' },
    );
    const cause = sanitizedCause(raw, 'header "Bearer [redacted]" is invalid');
    expect(cause).toBeInstanceOf(Error);
    expect(cause.name).toBe('TypeError');
    expect(cause.message).toBe('header "Bearer [redacted]" is invalid');
    expect(cause.cause).toBeUndefined();
    expect(Object.keys(cause)).toEqual(['name']);
    expect(String(cause.stack)).not.toContain('sk_secret');
  });

  it('names a value that is not an error with a usable name as Error', () => {
    expect(sanitizedCause('a string thrown', 'm').name).toBe('Error');
    expect(sanitizedCause(null, 'm').name).toBe('Error');
    expect(sanitizedCause({ name: 'Bad\nName sk_secret' }, 'm').name).toBe('Error');
  });
});

describe('Function: redactValue', () => {
  it('replaces the value as is, JSON-escaped and URL-encoded', () => {
    const value = 'uploads/Jane Doe/"cv"\n.pdf';
    const text = `raw ${value}; json ${JSON.stringify(value)}; url /b/${encodeURI(value)}?k=${encodeURIComponent(value)}`;
    expect(redactValue(text, value, '#')).toBe('raw #; json "#"; url /b/#?k=#');
  });

  it('replaces a value holding a lone surrogate, which has no URL-encoded form', () => {
    expect(redactValue('key a\ud800b here', 'a\ud800b', '#')).toBe('key # here');
  });

  it('leaves the text alone for an empty value', () => {
    expect(redactValue('nothing to hide', '', '#')).toBe('nothing to hide');
  });
});
