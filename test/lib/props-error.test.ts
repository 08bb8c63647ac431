// InvalidPropsError: one readable message listing every problem.
import { assertNoProblems, InvalidPropsError } from '../../lib/props-error';

describe('Class: InvalidPropsError', () => {
  it('lists each problem on its own line and keeps them for callers', () => {
    const error = new InvalidPropsError('PacedJob S/J', ['first', 'second']);
    expect(error.name).toBe('InvalidPropsError');
    expect(error.message).toBe('Invalid props for PacedJob S/J:\n  - first\n  - second');
    expect(error.problems).toEqual(['first', 'second']);
    expect(error.construct).toBe('PacedJob S/J');
  });
});

describe('Function: assertNoProblems', () => {
  it('passes when there is nothing wrong and throws otherwise', () => {
    expect(() => assertNoProblems('X', [])).not.toThrow();
    expect(() => assertNoProblems('X', ['bad'])).toThrow(new InvalidPropsError('X', ['bad']));
  });
});
