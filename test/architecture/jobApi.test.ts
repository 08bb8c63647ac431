// The job API (lambda/job.ts, `paced-jobs/job` in the package) is all a job may rely on: the example jobs' code
// imports from the engine only through it, so a refactor of the engine cannot break a job that builds on the same API,
// and every name it exports is documented. Imports are read with TypeScript's parser (a comment or a string that
// names a module is not an import), and the rule is tried on seeded sources first, so a scan that finds nothing
// because it reads nothing fails.
import { builtinModules } from 'node:module';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix, relative, resolve } from 'node:path';
import * as ts from 'typescript';

const ROOT = resolve(__dirname, '..', '..');
const JOBS = 'lambda/jobs';
/** The job API, as a path in the project without its extension. */
const JOB_API = 'lambda/job';
/** The local-fixture contract (`paced-jobs/fixture`): a job's local.ts and its local*.ts helpers may use it too. */
const FIXTURE_CONTRACT = 'local/fixture';

/** Every module a source file names: import and export declarations, `import x = require()`, require() and import(). */
function moduleSpecifiers(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      found.push(node.moduleSpecifier.text);
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      found.push(node.moduleReference.expression.text);
    } else if (ts.isCallExpression(node) && node.arguments.length > 0) {
      const [first] = node.arguments;
      const isRequire = ts.isIdentifier(node.expression) && node.expression.text === 'require';
      const isDynamicImport = node.expression.kind === ts.SyntaxKind.ImportKeyword;
      if ((isRequire || isDynamicImport) && (ts.isStringLiteral(first) || ts.isNoSubstitutionTemplateLiteral(first)))
        found.push(first.text);
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      // `import('x').T` in a type position.
      found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const NODE_BUILTINS = new Set(builtinModules);

/** A job's local fixture (local.ts) or one of its helpers (local*.ts): local tooling, never bundled. */
const isFixtureSide = (file: string): boolean => /^local[A-Za-z]*\.ts$/.test(posix.basename(file));

/**
 * Why a job's file may not import `specifier`, or undefined when it may. `file` is the file's path in the project
 * (`lambda/jobs/<job>/...`). Allowed: the job API, the AWS SDK, zod, Node's built-in modules and the job's own folder;
 * for the fixture side, the local-fixture contract as well.
 */
function importViolation(file: string, specifier: string): string | undefined {
  const jobDir = file.split('/').slice(0, 3).join('/');
  if (specifier.startsWith('.')) {
    const target = posix.normalize(posix.join(posix.dirname(file), specifier)).replace(/\.(ts|js)$/, '');
    if (target === jobDir || target.startsWith(`${jobDir}/`)) return undefined;
    if (target === JOB_API) return undefined;
    if (target === FIXTURE_CONTRACT && isFixtureSide(file)) return undefined;
    const why =
      target === FIXTURE_CONTRACT
        ? 'only its local fixture (local*.ts) may use the fixture contract'
        : 'import the job API (lambda/job.ts) instead';
    return `${file} imports ${specifier} (${target}): ${why}`;
  }
  if (specifier.startsWith('node:') || NODE_BUILTINS.has(specifier)) return undefined;
  if (specifier.startsWith('@aws-sdk/')) return undefined;
  if (specifier === 'zod' || specifier.startsWith('zod/')) return undefined;
  return `${file} imports ${specifier}: a job's code imports the job API, the AWS SDK, zod, Node and its own folder only`;
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir))) {
    const path = posix.join(dir, entry);
    if (statSync(join(ROOT, path)).isDirectory()) out.push(...sources(path));
    else if (entry.endsWith('.ts') && !entry.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

const violationsIn = (file: string, text: string): string[] =>
  moduleSpecifiers(file, text)
    .map((s) => importViolation(file, s))
    .filter((v): v is string => v !== undefined);

describe('Job API: what a job imports', () => {
  describe('Function: importViolation (seeded)', () => {
    const JOB = 'lambda/jobs/some-job';
    it.each([
      ['the job API', `${JOB}/index.ts`, "import { defineJob, type ApplyResult } from '../../job';"],
      ['the job API from a nested file', `${JOB}/lib/ids.ts`, "import { buildOperationId } from '../../../job';"],
      [
        'the AWS SDK and zod/mini',
        `${JOB}/index.ts`,
        "import { QueryCommand } from '@aws-sdk/lib-dynamodb';\nimport * as z from 'zod/mini';",
      ],
      [
        'Node built-ins, with and without node:',
        `${JOB}/index.ts`,
        "import { createHash } from 'node:crypto';\nimport { join } from 'path';",
      ],
      [
        'its own folder',
        `${JOB}/index.ts`,
        "import { demoItems } from './items';\nexport { helper } from './lib/helper';",
      ],
      [
        'the fixture contract, from its local.ts',
        `${JOB}/local.ts`,
        "import type { JobFixture } from '../../../local/fixture';",
      ],
      [
        'the fixture contract, from a local*.ts helper',
        `${JOB}/localProvider.ts`,
        "import { maxInAnyWindow } from '../../../local/fixture';",
      ],
      [
        'a module named in a comment or a string only',
        `${JOB}/index.ts`,
        "// import { x } from '../../core/job';\nconst s = \"require('../../adapters/clients')\";",
      ],
    ])('allows %s', (_what, file, text) => {
      expect(violationsIn(file, text)).toEqual([]);
    });

    it.each([
      [
        'an engine module',
        `${JOB}/index.ts`,
        "import { defineJob } from '../../core/job';",
        `${JOB}/index.ts imports ../../core/job (lambda/core/job): import the job API (lambda/job.ts) instead`,
      ],
      [
        'a type-only engine import',
        `${JOB}/index.ts`,
        "import type { AnyJob } from '../../core/job';",
        `${JOB}/index.ts imports ../../core/job (lambda/core/job): import the job API (lambda/job.ts) instead`,
      ],
      [
        'an adapter by require()',
        `${JOB}/index.ts`,
        "const c = require('../../adapters/clients');",
        `${JOB}/index.ts imports ../../adapters/clients (lambda/adapters/clients): import the job API (lambda/job.ts) instead`,
      ],
      [
        'a handler by import()',
        `${JOB}/index.ts`,
        "const h = await import('../../handlers/runtime');",
        `${JOB}/index.ts imports ../../handlers/runtime (lambda/handlers/runtime): import the job API (lambda/job.ts) instead`,
      ],
      [
        'an engine module re-exported',
        `${JOB}/index.ts`,
        "export { encodeCursor } from '../../core/pageCursor';",
        `${JOB}/index.ts imports ../../core/pageCursor (lambda/core/pageCursor): import the job API (lambda/job.ts) instead`,
      ],
      [
        'an engine type in a type position',
        `${JOB}/index.ts`,
        "let j: import('../../core/job').AnyJob;",
        `${JOB}/index.ts imports ../../core/job (lambda/core/job): import the job API (lambda/job.ts) instead`,
      ],
      [
        'another job',
        `${JOB}/index.ts`,
        "import { job } from '../other-job';",
        `${JOB}/index.ts imports ../other-job (lambda/jobs/other-job): import the job API (lambda/job.ts) instead`,
      ],
      [
        'the fixture contract from the job code',
        `${JOB}/index.ts`,
        "import { tally } from '../../../local/fixture';",
        `${JOB}/index.ts imports ../../../local/fixture (local/fixture): only its local fixture (local*.ts) may use the fixture contract`,
      ],
      [
        'another local tool from the fixture',
        `${JOB}/local.ts`,
        "import { closeServer } from '../../../local/servers';",
        `${JOB}/local.ts imports ../../../local/servers (local/servers): import the job API (lambda/job.ts) instead`,
      ],
      [
        'a package that is not the SDK or zod',
        `${JOB}/index.ts`,
        "import { Logger } from '@aws-lambda-powertools/logger';",
        `${JOB}/index.ts imports @aws-lambda-powertools/logger: a job's code imports the job API, the AWS SDK, zod, Node and its own folder only`,
      ],
    ])('refuses %s', (_what, file, text, message) => {
      expect(violationsIn(file, text)).toEqual([message]);
    });
  });

  describe('the example jobs', () => {
    // A job's own tests (lambda/jobs/<job>/test/) are test code: they reach into the engine and its test support.
    const files = sources(JOBS).filter((f) => !/^lambda\/jobs\/[^/]+\/test\//.test(f));

    it('are found, each with its index.ts, and import the job API (the check below is not vacuous)', () => {
      const jobs = new Set(files.map((f) => f.split('/')[2]));
      expect(jobs.size).toBeGreaterThanOrEqual(1);
      for (const job of jobs) expect(files).toEqual(expect.arrayContaining([`${JOBS}/${job}/index.ts`]));
      expect(
        files.filter((f) => !isFixtureSide(f)).flatMap((f) => moduleSpecifiers(f, readFileSync(join(ROOT, f), 'utf8'))),
      ).toContain('../../job');
    });

    it('import from the engine only the job API (and their fixtures the fixture contract)', () => {
      expect(files.flatMap((f) => violationsIn(f, readFileSync(join(ROOT, f), 'utf8')))).toEqual([]);
    });
  });
});

describe('Job API: lambda/job.ts', () => {
  it('documents every name it exports (TSDoc on the declaration a job sees on hover)', () => {
    const entry = join(ROOT, `${JOB_API}.ts`);
    // The job API and the engine files it re-exports from, alone: no package or lib is read (noResolve), which keeps
    // the check to a second or two; a declaration's comment does not depend on them.
    const engine = [...sources('lambda/core'), ...sources('lambda/adapters')].map((f) => join(ROOT, f));
    const program = ts.createProgram([entry, ...engine], { noResolve: true, noLib: true, types: [], noEmit: true });
    const checker = program.getTypeChecker();
    const module = checker.getSymbolAtLocation(program.getSourceFile(entry) as ts.SourceFile) as ts.Symbol;
    const exported = checker.getExportsOfModule(module);
    const undocumented = exported
      .filter((symbol) => {
        const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
        return ts.displayPartsToString(target.getDocumentationComment(checker)).trim() === '';
      })
      .map((symbol) => {
        const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
        const file = target.declarations?.[0]?.getSourceFile().fileName;
        return `${symbol.name} (${file ? relative(ROOT, file) : 'no declaration'})`;
      });
    expect(exported.length).toBeGreaterThan(20);
    expect(undocumented).toEqual([]);
  });
});
