// The package's dependency split (package.json): every module the shipped code imports resolves, in a team's app, to
// something the package brings: one of its `dependencies` (or `optionalDependencies`), a `peerDependencies` entry the
// app installs (aws-cdk-lib, constructs), or a Node builtin. The shipped code is what tsconfig.build.json compiles.
import { builtinModules } from 'node:module';
import { readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import * as ts from 'typescript';
import { JOB_ENTRY_MODULE } from '../../lambda/core/constants';

const ROOT = resolve(__dirname, '..', '..');
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
};

/** The files `npm pack` compiles (prepack: tsc -p tsconfig.build.json), relative to the repository. */
function shippedSources(): string[] {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.build.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (!parsed) throw new Error('tsconfig.build.json cannot be read');
  return parsed.fileNames.map((f) => relative(ROOT, f)).sort();
}

interface ImportSite {
  file: string;
  specifier: string;
  /** Erased from the emitted JavaScript: `import type`, `export type`, `import('x').T` in a type. */
  typeOnly: boolean;
}

/** Every module specifier a file names: imports, re-exports, require(), require.resolve() and import(). */
function importSites(file: string): ImportSite[] {
  const source = ts.createSourceFile(file, readFileSync(join(ROOT, file), 'utf8'), ts.ScriptTarget.ES2022, true);
  const sites: ImportSite[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      const typeOnly = ts.isImportDeclaration(node)
        ? Boolean(node.importClause?.isTypeOnly) ||
          Boolean(
            node.importClause &&
              !node.importClause.name &&
              node.importClause.namedBindings &&
              ts.isNamedImports(node.importClause.namedBindings) &&
              node.importClause.namedBindings.elements.length > 0 &&
              node.importClause.namedBindings.elements.every((e) => e.isTypeOnly),
          )
        : node.isTypeOnly;
      sites.push({ file, specifier: node.moduleSpecifier.text, typeOnly });
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      sites.push({ file, specifier: node.argument.literal.text, typeOnly: true });
    } else if (ts.isCallExpression(node) && node.arguments.length >= 1 && ts.isStringLiteralLike(node.arguments[0])) {
      const callee = node.expression;
      const isRequire = ts.isIdentifier(callee) && callee.text === 'require';
      const isResolve =
        ts.isPropertyAccessExpression(callee) &&
        ts.isIdentifier(callee.expression) &&
        callee.expression.text === 'require' &&
        callee.name.text === 'resolve';
      if (isRequire || isResolve || callee.kind === ts.SyntaxKind.ImportKeyword)
        sites.push({ file, specifier: node.arguments[0].text, typeOnly: false });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return sites;
}

/** `@scope/name/sub/path` -> `@scope/name`; `name/sub` -> `name`. */
const packageOf = (specifier: string): string =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');
const isBuiltin = (specifier: string): boolean =>
  specifier.startsWith('node:') || builtinModules.includes(packageOf(specifier));
const isBare = (specifier: string): boolean => !specifier.startsWith('.') && !specifier.startsWith('/');

const brought = new Set([
  // Not a package: the bundler's alias of a job's entry, which the job loader requires.
  JOB_ENTRY_MODULE,
  ...Object.keys(manifest.dependencies ?? {}),
  ...Object.keys(manifest.peerDependencies ?? {}),
  ...Object.keys(manifest.optionalDependencies ?? {}),
]);

describe('package.json: the dependencies of the shipped code', () => {
  const files = shippedSources();
  const sites = files.flatMap(importSites).filter((s) => isBare(s.specifier) && !isBuiltin(s.specifier));

  it('compiles the engine, the construct library and the tools, and no example job, test or reference-app entry', () => {
    expect(files).toEqual(
      expect.arrayContaining([
        'lambda/job.ts',
        'lambda/handlers/producer.ts',
        'local/fixture.ts',
        'local/testing.ts',
        'cli/paced-jobs.ts',
        'ops/program.ts',
      ]),
    );
    expect(files.filter((f) => /^(bin|test|lambda\/jobs)\//.test(f) || f.endsWith('.test.ts'))).toEqual([]);
    // The scan below reads something, or it proves nothing.
    expect(sites.length).toBeGreaterThan(100);
  });

  it('imports at run time only packages it depends on (or peers the app installs) and Node builtins', () => {
    const missing = sites
      .filter((s) => !s.typeOnly && !brought.has(packageOf(s.specifier)))
      .map((s) => `${s.file} -> ${s.specifier}`);
    expect(missing).toEqual([]);
  });

  it('names in its declarations only packages whose types the app gets (a dependency, a peer, or its @types package)', () => {
    const typesOf = (pkg: string) => `@types/${pkg.startsWith('@') ? pkg.slice(1).replace('/', '__') : pkg}`;
    const missing = sites
      .filter(
        (s) => s.typeOnly && !brought.has(packageOf(s.specifier)) && !brought.has(typesOf(packageOf(s.specifier))),
      )
      .map((s) => `${s.file} -> ${s.specifier}`);
    expect(missing).toEqual([]);
  });

  it("keeps the CDK itself a peer: one aws-cdk-lib and one constructs in the app, the app's own", () => {
    expect(Object.keys(manifest.peerDependencies ?? {}).sort()).toEqual(['aws-cdk-lib', 'constructs']);
    expect(Object.keys(manifest.dependencies ?? {})).not.toEqual(expect.arrayContaining(['aws-cdk-lib']));
    expect(Object.keys(manifest.dependencies ?? {})).not.toEqual(expect.arrayContaining(['constructs']));
    // And this repository still builds with them.
    expect(Object.keys(manifest.devDependencies ?? {})).toEqual(expect.arrayContaining(['aws-cdk-lib', 'constructs']));
  });
});
