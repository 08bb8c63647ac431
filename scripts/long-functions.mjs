#!/usr/bin/env node
// Lists the project's non-test functions of 80 lines or more (the #36 budget: at most 8, each with its reason in a
// `// long-function: <why>` comment directly above it; test/longFunctions.integration.test.ts holds the budget). Uses the
// TypeScript compiler's parser: a function is any declaration, method, constructor, accessor, arrow or function
// expression; its length runs from its first line to its last.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const ROOTS = ['bin', 'lib', 'lambda', 'local', 'ops', 'console', 'chaos', 'bench', 'scaffold', 'cli', 'scripts'];
const LIMIT = Number(process.argv.find((a) => a.startsWith('--min='))?.slice(6) ?? 80);
const root = process.cwd();

function* files(dir) {
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of entries) {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'test' || name === 'dist' || name === 'cdk.out') continue;
    if (statSync(path).isDirectory()) yield* files(path);
    else if (/\.(ts|mts|mjs|js)$/.test(name) && !/\.test\.|\.d\.ts$/.test(name)) yield path;
  }
}

function nameOf(node, sf) {
  if (node.name) return node.name.getText(sf);
  if (ts.isConstructorDeclaration(node)) return `${node.parent.name?.getText(sf) ?? 'class'}.constructor`;
  const p = node.parent;
  if (p && ts.isVariableDeclaration(p)) return p.name.getText(sf);
  if (p && ts.isPropertyAssignment(p)) return p.name.getText(sf);
  if (p && ts.isCallExpression(p)) return `(callback of ${p.expression.getText(sf).slice(0, 40)})`;
  return '(anonymous)';
}

/** The `// long-function:` reason in the comments directly above a function (or the statement that declares it). */
function reasonOf(node, text) {
  let holder = node;
  while (
    holder.parent &&
    !ts.isSourceFile(holder.parent) &&
    !ts.isBlock(holder.parent) &&
    !ts.isClassLike(holder.parent)
  )
    holder = holder.parent;
  for (const range of ts.getLeadingCommentRanges(text, holder.getFullStart()) ?? []) {
    const match = /^\/\/\s*long-function:\s*(.+)$/.exec(text.slice(range.pos, range.end));
    if (match) return match[1].trim();
  }
  return undefined;
}

const found = [];
for (const rootDir of ROOTS) {
  for (const path of files(join(root, rootDir))) {
    const text = readFileSync(path, 'utf8');
    const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
    const visit = (node) => {
      if (ts.isFunctionLike(node) && node.body) {
        const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
        const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
        const lines = end - start + 1;
        if (lines >= LIMIT) {
          const reason = reasonOf(node, text);
          found.push({ file: relative(root, path), name: nameOf(node, sf), lines, line: start + 1, reason });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
}
found.sort((a, b) => b.lines - a.lines);
if (process.argv.includes('--json')) console.log(JSON.stringify(found, null, 2));
else {
  for (const f of found)
    console.log(`${String(f.lines).padStart(4)}  ${f.file}:${f.line}  ${f.name}${f.reason ? `  (${f.reason})` : ''}`);
  console.log(`${found.length} non-test functions of ${LIMIT} lines or more`);
}
