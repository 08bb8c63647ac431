import * as z from 'zod/mini';
import { describeIssues, issuePath } from '../../../lambda/core/issues';

// Messages of its own: zod/mini loads no locale, and the lines' shape is what is tested here.
const schema = z.strictObject(
  {
    name: z.string('a name is text'),
    limits: z.array(z.strictObject({ starts: z.number().check(z.positive('starts is positive')) })),
    tags: z.record(z.string().check(z.regex(/^[a-z]+$/, 'a tag is lowercase letters')), z.string()),
  },
  'an object',
);
const issuesOf = (value: unknown) => {
  const parsed = schema.safeParse(value);
  if (parsed.success) throw new Error('expected the value not to parse');
  return parsed.error;
};

describe('Function: describeIssues', () => {
  it("gives one line per issue, the path dotted with array indexes, in zod's order", () => {
    const error = issuesOf({ name: 3, limits: [{ starts: 1 }, { starts: -1 }], tags: {} });
    expect(describeIssues(error)).toEqual(['name: a name is text', 'limits.1.starts: starts is positive']);
  });

  it('names an issue about the whole value by the root given, (root) by default', () => {
    const error = issuesOf('not an object');
    expect(describeIssues(error)).toEqual(['(root): an object']);
    expect(describeIssues(error, { root: 'body' })).toEqual(['body: an object']);
  });

  it('starts every path with the root when asked', () => {
    const error = issuesOf({ name: 'a', limits: [{ starts: 0 }], tags: {} });
    expect(describeIssues(error, { root: 'resource', rootInPaths: true })).toEqual([
      'resource.limits.0.starts: starts is positive',
    ]);
  });

  it("reports a bad record key at the key, with the key's own problem rather than zod's generic line", () => {
    const error = issuesOf({ name: 'a', limits: [], tags: { Bad: 'x' } });
    expect(error.issues[0]).toMatchObject({ code: 'invalid_key' });
    expect(describeIssues(error)).toEqual(['tags.Bad: a tag is lowercase letters']);
  });
});

describe('Function: issuePath', () => {
  it('joins keys and indexes with dots, and is empty for the root', () => {
    expect(issuePath(['jobs', 'session-expiry', 'limits', 0])).toBe('jobs.session-expiry.limits.0');
    expect(issuePath([])).toBe('');
  });
});
