// No test asserts a duration (issue #34): how long something took on the real clock depends on the machine and its
// load, so such an assertion is either loose enough to check nothing or fails on a busy machine. Timing belongs to the
// benchmarks; a test asserts the cause, order or state the timing stood for, an injected clock's reading, or a count.
// This is a static scan of every test file: each assertion (expect, assert) whose value or matcher argument holds an
// elapsed time is reported: a later reading of the real clock minus anything but a constant (`Date.now() - started`,
// `performance.now() - t0`, `end - started` with both read from the clock, `Date.now() - item.at`), process.hrtime(start),
// or a variable computed from one. A clock read shifted by a constant (`Date.now() - 1`, `Date.now() - LOG_LAG_MS`) is a
// point in time and passes; so does the time left until an instant (`expiresAt - Date.now()`), and an injected clock
// (`clock.now() - started`). Not seen: a stamp kept elsewhere minus a start (`events[0].at - started`), which the
// source cannot tell from a computed instant minus now (`nextFire.getTime() - now`, asserting a schedule).
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import * as ts from 'typescript';

const ROOT = join(__dirname, '..', '..');

interface DurationAssertion {
  line: number;
  text: string;
}

const REAL_CLOCK_CALLS = new Set([
  'Date.now',
  'performance.now',
  'globalThis.performance.now',
  'process.hrtime.bigint',
]);

/** A read of the real clock: Date.now(), performance.now(), process.hrtime.bigint(), process.hrtime(), new Date().getTime(). */
function isClockRead(node: ts.Node): boolean {
  if (!ts.isCallExpression(node)) return false;
  const callee = node.expression.getText();
  if (REAL_CLOCK_CALLS.has(callee)) return true;
  if (callee === 'process.hrtime' && node.arguments.length === 0) return true;
  const target = ts.isPropertyAccessExpression(node.expression) ? node.expression : undefined;
  if (target && ['getTime', 'valueOf'].includes(target.name.text)) {
    let inner: ts.Expression = target.expression;
    while (ts.isParenthesizedExpression(inner)) inner = inner.expression;
    return ts.isNewExpression(inner) && inner.expression.getText() === 'Date' && (inner.arguments?.length ?? 0) === 0;
  }
  return false;
}

/** A value fixed in the source: a number, an UPPER_CASE constant, or arithmetic of them (`5 * 60_000`). */
function isConstant(node: ts.Expression): boolean {
  if (ts.isNumericLiteral(node) || ts.isBigIntLiteral(node)) return true;
  if (ts.isIdentifier(node)) return /^[A-Z][A-Z0-9_]*$/.test(node.text);
  if (ts.isParenthesizedExpression(node)) return isConstant(node.expression);
  if (ts.isPrefixUnaryExpression(node)) return isConstant(node.operand);
  if (ts.isBinaryExpression(node)) return isConstant(node.left) && isConstant(node.right);
  return false;
}

interface Names {
  /** Variables holding a point in time read from the real clock (`const started = Date.now()`). */
  instants: Set<string>;
  /** Variables holding a wall-clock difference (`const elapsed = Date.now() - started`), or computed from one. */
  durations: Set<string>;
}

/** A point in time on the real clock: a clock read, a variable holding one, or either shifted by a constant. */
function isInstant(node: ts.Expression, names: Names): boolean {
  if (ts.isParenthesizedExpression(node) || ts.isNonNullExpression(node)) return isInstant(node.expression, names);
  if (isClockRead(node)) return true;
  if (ts.isIdentifier(node)) return names.instants.has(node.text);
  if (
    ts.isBinaryExpression(node) &&
    [ts.SyntaxKind.PlusToken, ts.SyntaxKind.MinusToken].includes(node.operatorToken.kind)
  ) {
    return (
      (isInstant(node.left, names) && isConstant(node.right)) ||
      (node.operatorToken.kind === ts.SyntaxKind.PlusToken && isConstant(node.left) && isInstant(node.right, names))
    );
  }
  return false;
}

/** Whether the expression is, or is computed from, a wall-clock difference. */
function hasDuration(node: ts.Node, names: Names): boolean {
  if (ts.isCallExpression(node) && node.expression.getText() === 'process.hrtime' && node.arguments.length > 0)
    return true;
  if (ts.isIdentifier(node) && names.durations.has(node.text)) return true;
  // `x.name`: only x is a reference; the property's name is not the variable of that name.
  if (ts.isPropertyAccessExpression(node)) return hasDuration(node.expression, names);
  // The real clock now (or a reading kept from it) minus an earlier moment: the time elapsed since.
  if (
    ts.isBinaryExpression(node) &&
    node.operatorToken.kind === ts.SyntaxKind.MinusToken &&
    isInstant(node.left, names) &&
    !isConstant(node.right)
  )
    return true;
  return ts.forEachChild(node, (child) => hasDuration(child, names) || undefined) ?? false;
}

/** Every variable assignment of the file, by name (scopes ignored: a test file reuses few names for different things). */
function assignments(file: ts.SourceFile): { name: string; value: ts.Expression }[] {
  const found: { name: string; value: ts.Expression }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer)
      found.push({ name: node.name.text, value: node.initializer });
    if (
      ts.isBinaryExpression(node) &&
      node.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
      ts.isIdentifier(node.left)
    )
      found.push({ name: node.left.text, value: node.right });
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

function namesOf(file: ts.SourceFile): Names {
  const names: Names = { instants: new Set(), durations: new Set() };
  const all = assignments(file);
  // To a fixed point: `const seconds = elapsed / 1000` is a duration once `elapsed` is known to be one.
  for (let size = -1; size !== names.instants.size + names.durations.size; ) {
    size = names.instants.size + names.durations.size;
    for (const { name, value } of all) {
      // A function is not a value: what it computes is judged where it is called.
      if (ts.isArrowFunction(value) || ts.isFunctionExpression(value)) continue;
      // A record is not a duration for carrying one among its fields (a command's result with its durationMs): what
      // is asserted of it is judged by the field read, and an object asserted whole is scanned where it is written.
      if (ts.isObjectLiteralExpression(value)) continue;
      if (isInstant(value, names)) names.instants.add(name);
      else if (hasDuration(value, names)) names.durations.add(name);
    }
  }
  return names;
}

/** The assertion an `expect(...)` call begins: the call and every matcher call chained on it (`.not.toBeLessThan(x)`). */
function assertionParts(call: ts.CallExpression): ts.Node[] {
  const parts: ts.Node[] = [...call.arguments];
  let node: ts.Node = call;
  while (
    node.parent &&
    (ts.isPropertyAccessExpression(node.parent) ||
      (ts.isCallExpression(node.parent) && node.parent.expression === node))
  ) {
    node = node.parent;
    if (ts.isCallExpression(node)) parts.push(...node.arguments);
  }
  return parts;
}

const isAssertion = (call: ts.CallExpression) => {
  const callee = call.expression.getText();
  return callee === 'expect' || callee === 'assert' || callee.startsWith('assert.');
};

/** The assertions in `source` whose value or matcher argument is a wall-clock difference. */
function durationAssertions(source: string, fileName = 'test.ts'): DurationAssertion[] {
  // Every clock read the scan knows names one of these: a file without any is not parsed (most are not).
  if (!/Date\.now|performance\.now|hrtime|new\s+Date\s*\(\s*\)/.test(source)) return [];
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const names = namesOf(file);
  const found: DurationAssertion[] = [];
  const visit = (node: ts.Node): void => {
    if (
      ts.isCallExpression(node) &&
      isAssertion(node) &&
      assertionParts(node).some((part) => hasDuration(part, names))
    ) {
      const { line } = file.getLineAndCharacterOfPosition(node.getStart(file));
      found.push({ line: line + 1, text: source.split('\n')[line].trim() });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/**
 * The scan's own cases, kept as data (test/corpus/durationAssertions.json) like the other corpora: sources that must be
 * reported, each at its line, and sources that must pass. Written into this file, the sources that must be reported
 * would read as this file's own assertions on elapsed time.
 */
const cases = JSON.parse(readFileSync(join(ROOT, 'test', 'corpus', 'durationAssertions.json'), 'utf8')) as {
  reports: { what: string; source: string; line: number }[];
  passes: { what: string; source: string }[];
};

describe('Function: durationAssertions (the scanner itself)', () => {
  it.each(cases.reports.map((c) => [c.what, c.source, c.line] as const))('reports %s', (_what, source, line) => {
    expect(durationAssertions(source).map((f) => f.line)).toEqual([line]);
  });

  it.each(cases.passes.map((c) => [c.what, c.source] as const))('passes %s', (_what, source) => {
    expect(durationAssertions(source)).toEqual([]);
  });
});

describe('Test files: no assertion on elapsed wall-clock time', () => {
  const files = (readdirSync(join(ROOT, 'test'), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.test.ts'))
    .sort();

  it('scans every test file (this one among them)', () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files).toContain(join('support', 'timing.test.ts'));
  });

  it('finds none', () => {
    const found = files.flatMap((f) => {
      const path = join(ROOT, 'test', f);
      return durationAssertions(readFileSync(path, 'utf8'), path).map(
        (d) => `${relative(ROOT, path)}:${d.line}: ${d.text}`,
      );
    });
    expect(found).toEqual([]);
  });
});
