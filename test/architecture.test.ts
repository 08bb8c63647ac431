// The dependency rules of ARCHITECTURE.md that the lint cannot hold. Which layer may import which is biome.jsonc's
// (`noRestrictedImports` per folder, `noImportCycles`; test/lint.integration.test.ts proves each on seeded files): a
// pattern on an import's text. What is left here: that the local tools name no job in their text at all, and that no
// source reaches a project module by require(), which the lint's import rules do not see.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..');

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir))) {
    const path = join(dir, entry);
    if (statSync(join(ROOT, path)).isDirectory()) out.push(...sources(path));
    else if (/\.ts$/.test(entry) && !entry.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

const jobNames = readdirSync(join(ROOT, 'lambda/jobs')).filter((n) =>
  statSync(join(ROOT, 'lambda/jobs', n)).isDirectory(),
);

/** A require() of a project path (relative), which the lint's layer rules, reading import and export, would miss. */
const requiresProjectModule = (text: string): boolean => /\brequire\(\s*['"`]\.{1,2}\//.test(text);

/** The lazy require()s a layer allows, each with why it is lazy rather than an import. */
const LAZY_REQUIRES: Record<string, string> = {
  'ops/environment.ts': 'lib/config (ops reads it), loaded only by the commands that take an environment',
  'ops/jobCode.ts': "a job by its folder, for preflight's discovery check: the one place ops runs job code",
};

describe('dependency rules', () => {
  it('finds the example jobs, whichever the reference app keeps (the checks below are not vacuous)', () => {
    expect(jobNames.length).toBeGreaterThan(0);
  });

  it('local/, chaos/ and bench/ name no job (each job brings its own fixture, loaded by its folder)', () => {
    const offending: string[] = [];
    for (const file of [...sources('local'), ...sources('chaos'), ...sources('bench')]) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const job of jobNames) if (text.includes(job)) offending.push(`${file} names ${job}`);
    }
    expect(offending).toEqual([]);
  });

  it('tells a require() of a project module from one of a package', () => {
    expect(requiresProjectModule("const { x } = require('../ops/program');")).toBe(true);
    expect(requiresProjectModule('const y = require( "./iam" );')).toBe(true);
    expect(requiresProjectModule("const dynalite = require('dynalite');")).toBe(false);
    expect(requiresProjectModule("const { join } = require('node:path');")).toBe(false);
  });

  it('the layered code reaches project modules by import and export only, which the lint reads', () => {
    const layered = ['bin', 'lib', 'lambda', 'local', 'ops', 'console', 'chaos', 'bench'].flatMap((dir) =>
      sources(dir),
    );
    const offending = layered.filter(
      (f) => !(f in LAZY_REQUIRES) && requiresProjectModule(readFileSync(join(ROOT, f), 'utf8')),
    );
    expect(layered.length).toBeGreaterThan(100);
    expect(offending).toEqual([]);
  });
});
