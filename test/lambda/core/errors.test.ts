import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import * as ts from 'typescript';
import { PacedJobsError, PermanentError, RetryableError, ThrottledError } from '../../../lambda/core/errors';
import * as jobApi from '../../../lambda/job';

const ROOT = resolve(__dirname, '..', '..', '..');

/** lambda/'s code, tests aside (a job's own tests may define throwaway errors). */
function engineSources(dir = 'lambda'): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(join(ROOT, path)).isDirectory()) return entry === 'test' ? [] : engineSources(path);
    return entry.endsWith('.ts') && !entry.endsWith('.d.ts') ? [path] : [];
  });
}

interface DeclaredClass {
  file: string;
  name: string;
  base: string;
  exported: boolean;
}

/** Every class under lambda/ that extends another, with the base as written (read with TypeScript's parser). */
function declaredClasses(): DeclaredClass[] {
  return engineSources().flatMap((file) => {
    const source = ts.createSourceFile(file, readFileSync(join(ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true);
    return source.statements.filter(ts.isClassDeclaration).flatMap((node) => {
      const base = node.heritageClauses?.find((h) => h.token === ts.SyntaxKind.ExtendsKeyword)?.types[0];
      if (!node.name || !base) return [];
      const exported = node.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword) ?? false;
      return [{ file, name: node.name.text, base: base.expression.getText(source), exported }];
    });
  });
}

/** The classes whose chain reaches a built-in error (Error, TypeError, ...), through bases declared under lambda/. */
function errorClasses(classes: DeclaredClass[]): DeclaredClass[] {
  const byName = new Map(classes.map((c) => [c.name, c]));
  const isError = (c: DeclaredClass, seen = new Set<string>()): boolean => {
    if (/^(?:Error|[A-Z][a-z]+Error)$/.test(c.base) && !byName.has(c.base)) return true;
    const base = byName.get(c.base);
    return base !== undefined && !seen.has(base.name) && isError(base, seen.add(c.name));
  };
  return classes.filter((c) => isError(c));
}

/** A class's chain up to a built-in error: [FutureBusinessDateError, BusinessDateError, PacedJobsError, Error]. */
function chain(c: DeclaredClass, classes: DeclaredClass[]): string[] {
  const base = classes.find((d) => d.name === c.base);
  return [c.name, ...(base ? chain(base, classes) : [c.base])];
}

describe('Class: PacedJobsError', () => {
  it("takes the subclass's name and keeps the cause", () => {
    class SomeJobError extends PacedJobsError {}
    const cause = new Error('socket hang up');
    const error = new SomeJobError('could not reach the provider', { cause });
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('SomeJobError');
    expect(error.message).toBe('could not reach the provider');
    expect(error.cause).toBe(cause);
  });

  it('is the base of the outcome errors a job throws, exported beside them from the job API', () => {
    expect(new RetryableError('x')).toBeInstanceOf(PacedJobsError);
    expect(new ThrottledError('x', 1000)).toBeInstanceOf(PacedJobsError);
    expect(new PermanentError('x')).toBeInstanceOf(PacedJobsError);
    expect(jobApi.PacedJobsError).toBe(PacedJobsError);
    expect(new jobApi.PermanentError('x').name).toBe('PermanentError');
  });
});

describe('every error class under lambda/', () => {
  const classes = declaredClasses();
  const errors = errorClasses(classes);

  it('finds them, a family base and its subclasses among them (the checks below are not vacuous)', () => {
    expect(errors.length).toBeGreaterThan(20);
    expect(errors.filter((c) => c.base !== 'PacedJobsError' && c.base !== 'Error').length).toBeGreaterThan(0);
    expect(errors.filter((c) => !c.exported).length).toBeGreaterThan(0);
  });

  it('extends PacedJobsError, directly or through its family base; only PacedJobsError extends Error itself', () => {
    const offending = errors
      .filter((c) => c.name !== 'PacedJobsError' && !chain(c, classes).includes('PacedJobsError'))
      .map((c) => `${c.file}: ${chain(c, classes).join(' -> ')}`);
    expect(offending).toEqual([]);
    expect(errors.filter((c) => c.base === 'Error').map((c) => `${c.file}: ${c.name}`)).toEqual([
      'lambda/core/errors.ts: PacedJobsError',
    ]);
  });

  it('is, at run time, an instance of PacedJobsError (each exported class, from its module)', () => {
    const exported = errors.filter((c) => c.exported && c.name !== 'PacedJobsError');
    const notBased = exported.filter((c) => {
      const cls = (require(join(ROOT, c.file)) as Record<string, unknown>)[c.name];
      return typeof cls !== 'function' || !(cls.prototype instanceof PacedJobsError);
    });
    expect(exported.length).toBeGreaterThan(20);
    expect(notBased.map((c) => `${c.file}: ${c.name}`)).toEqual([]);
  });
});
