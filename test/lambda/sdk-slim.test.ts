import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import * as facade from '../../lambda/sdk-slim';
import { buildSdkSlim, SDK_SLIM_MODULE, SDK_SLIM_PACKAGES } from '../../lib/sdk-layer';

const ROOT = join(__dirname, '..', '..');

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Runtime values (not types) a source imports from the aliased packages: a missing one would be undefined in Lambda. */
function valuesImportedByOurCode(): Map<string, string> {
  const needed = new Map<string, string>();
  // A job's own tests (lambda/jobs/<job>/test/) are never bundled: what they import need not be in the layer.
  const bundled = (f: string) => !f.includes(`${join('lambda', 'sdk-slim')}`) && !f.includes(`${sep}test${sep}`);
  for (const file of tsFiles(join(ROOT, 'lambda')).filter(bundled)) {
    const source = readFileSync(file, 'utf8');
    for (const m of source.matchAll(/import\s+(type\s+)?\{([^}]*)\}\s+from\s+'([^']+)'/g)) {
      const [, typeOnly, names, pkg] = m;
      if (typeOnly || !(SDK_SLIM_PACKAGES as readonly string[]).includes(pkg)) continue;
      const exports = require(pkg) as Record<string, unknown>;
      for (const raw of names
        .split(',')
        .map((n) => n.trim())
        .filter(Boolean)) {
        if (raw.startsWith('type ')) continue;
        const name = raw.split(/\s+as\s+/)[0];
        // Interfaces imported without `type` (AttributeValue) are erased by the compiler: only values matter.
        if (exports[name] !== undefined) needed.set(name, `${file.slice(ROOT.length + 1)} (${pkg})`);
      }
    }
  }
  return needed;
}

/** What Powertools' idempotency (the one bundled library that uses these packages) reads from them. */
function valuesUsedByPowertools(): Map<string, string> {
  const needed = new Map<string, string>();
  // Its package.json is not an exported subpath: the package folder is found from the project's node_modules.
  const base = join(ROOT, 'node_modules', '@aws-lambda-powertools', 'idempotency', 'lib', 'cjs');
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.js') ? [join(dir, e.name)] : [],
    );
  for (const file of walk(base)) {
    const source = readFileSync(file, 'utf8');
    for (const [, variable, pkg] of source.matchAll(/(\w+)\s*=\s*require\("([^"]+)"\)/g)) {
      if (!(SDK_SLIM_PACKAGES as readonly string[]).includes(pkg)) continue;
      for (const [, name] of source.matchAll(new RegExp(`\\b${variable}\\.(\\w+)`, 'g')))
        needed.set(name, `${file.slice(base.length + 1)} (${pkg})`);
    }
  }
  return needed;
}

describe('Module: sdk-slim', () => {
  const needed = new Map([...valuesUsedByPowertools(), ...valuesImportedByOurCode()]);

  it('finds what the handlers need from the aliased packages (a sanity check of the scan itself)', () => {
    expect([...needed.keys()]).toEqual(
      expect.arrayContaining([
        'DynamoDBClient',
        'ConditionalCheckFailedException',
        'SendMessageBatchCommand',
        'PutItemCommand',
        'marshall',
      ]),
    );
  });

  it('exports every value the handlers and Powertools import from the packages the bundles alias to it', () => {
    const missing = [...needed]
      .filter(([name]) => (facade as Record<string, unknown>)[name] === undefined)
      .map(([name, where]) => `${name} (used in ${where})`);
    expect(missing).toEqual([]);
  });

  it('builds into a layer module whose every export is defined', () => {
    const out = mkdtempSync(join(tmpdir(), 'sdk-slim-'));
    try {
      buildSdkSlim(out, 'node20');
      const built = require(join(out, 'nodejs', 'node_modules', SDK_SLIM_MODULE)) as Record<string, unknown>;
      for (const name of [...needed.keys(), ...Object.keys(facade)])
        expect([name, typeof built[name]]).toEqual([name, expect.not.stringMatching(/^undefined$/)]);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
