// The dependency rules of ARCHITECTURE.md, checked on the source: which layer may import which, and that the local
// tools name no job (each job brings its own fixture).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, dirname } from 'node:path';

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

/** Every module a file imports (static imports, re-exports, require), resolved to a project path when relative. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const specifiers = [...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"`;]*?from\s+['"]([^'"]+)['"]|require\(\s*['"]([^'"]+)['"]\s*\)|import\(\s*['"]([^'"]+)['"]\s*\)/g)].map(
    (m) => m[1] ?? m[2] ?? m[3],
  );
  return specifiers.map((s) => (s.startsWith('.') ? relative(ROOT, resolve(ROOT, dirname(file), s)) : s));
}

const jobNames = readdirSync(join(ROOT, 'lambda/jobs')).filter((n) => statSync(join(ROOT, 'lambda/jobs', n)).isDirectory());
/** A job's own tests (lambda/jobs/<job>/test/): test code beside the job, never bundled, held to the tests' rules. */
const isJobTest = (file: string) => /^lambda\/jobs\/[^/]+\/test\//.test(file);
/** A job's code: its folder but its tests. */
const jobSources = (dir: string) => sources(dir).filter((f) => !isJobTest(f));

describe('dependency rules', () => {
  it('finds the example jobs, whichever the reference app keeps (the checks below are not vacuous)', () => {
    expect(jobNames.length).toBeGreaterThan(0);
  });

  it("tells a job's own tests from its code", () => {
    expect(isJobTest('lambda/jobs/some-job/test/index.test.ts')).toBe(true);
    expect(isJobTest('lambda/jobs/some-job/test/tables.ts')).toBe(true);
    expect(isJobTest('lambda/jobs/some-job/index.ts')).toBe(false);
    expect(isJobTest('lambda/jobs/some-job/lib/test.ts')).toBe(false);
  });

  it("a job's own tests import no other job (deleting a job deletes them with it, and nothing else)", () => {
    const offending: string[] = [];
    for (const job of jobNames) {
      for (const file of sources(join('lambda/jobs', job)).filter(isJobTest)) {
        for (const i of importsOf(file)) {
          const ownFolder = i === `lambda/jobs/${job}` || i.startsWith(`lambda/jobs/${job}/`);
          if (i.startsWith('lambda/jobs/') && !ownFolder) offending.push(`${file} -> ${i}`);
        }
      }
    }
    expect(offending).toEqual([]);
  });

  it('lambda/core imports nothing from the other layers and no AWS SDK', () => {
    const offending = sources('lambda/core').flatMap((f) =>
      importsOf(f)
        .filter((i) => /^(lambda\/(adapters|handlers|jobs)|local|ops|chaos|bench|lib)(\/|$)/.test(i) || i.startsWith('@aws-sdk/'))
        .map((i) => `${f} -> ${i}`),
    );
    expect(offending).toEqual([]);
  });

  // What a job may import at all is test/architecture/jobApi.test.ts's: the job API, the SDK, zod, Node and its folder.
  it('a job never imports the handlers, another job or the local tools (its fixture excepted)', () => {
    const offending: string[] = [];
    for (const job of jobNames) {
      for (const file of jobSources(join('lambda/jobs', job))) {
        const fixtureSide = /\/local[A-Za-z]*\.ts$/.test(file);
        for (const i of importsOf(file)) {
          if (i.startsWith('lambda/handlers')) offending.push(`${file} -> ${i}`);
          if (i.startsWith('lambda/jobs/') && !i.startsWith(`lambda/jobs/${job}/`)) offending.push(`${file} -> ${i}`);
          // Only the fixture side (local.ts and its helpers) may use the local tools' contract.
          if (/^(local|ops|chaos|bench)\//.test(i) && !fixtureSide) offending.push(`${file} -> ${i}`);
        }
      }
    }
    expect(offending).toEqual([]);
  });

  it('bundled code imports zod/mini, never classic zod (its schemas carry about 65 KB of JSON-Schema code into every bundle)', () => {
    const bundled = [...sources('lambda/core'), ...sources('lambda/adapters'), ...sources('lambda/handlers'), ...jobSources('lambda/jobs').filter((f) => !/\/local\.ts$/.test(f))];
    const offending = bundled.flatMap((f) => importsOf(f).filter((i) => i === 'zod' || i === 'zod/v4' || i.startsWith('zod/v4/classic')).map((i) => `${f} -> ${i}`));
    expect(bundled.length).toBeGreaterThan(20);
    expect(offending).toEqual([]);
  });

  it('the handlers never import a job fixture (it is never bundled into a function)', () => {
    const offending = sources('lambda/handlers').flatMap((f) => importsOf(f).filter((i) => /lambda\/jobs\/.+\/local/.test(i) || /^local\//.test(i)).map((i) => `${f} -> ${i}`));
    expect(offending).toEqual([]);
  });

  it('lib imports from the Lambda side only the pure contracts in lambda/core it shares with the handlers', () => {
    const allowed = ['lambda/core/constants', 'lambda/core/pacingSettings', 'lambda/core/issues', 'lambda/core/metricNames'];
    const offending = sources('lib').flatMap((f) => importsOf(f).filter((i) => /^lambda(\/|$)/.test(i) && !allowed.includes(i)).map((i) => `${f} -> ${i}`));
    expect(offending).toEqual([]);
    expect(importsOf('lib/config/schema.ts')).toContain('lambda/core/pacingSettings');
  });

  it('local/ and ops/ never import handlers or adapters', () => {
    const offending = [...sources('local'), ...sources('ops')].flatMap((f) => importsOf(f).filter((i) => /^lambda\/(handlers|adapters)(\/|$)/.test(i)).map((i) => `${f} -> ${i}`));
    expect(offending).toEqual([]);
  });

  it('local/iam imports only the plan, the servers\' helpers and itself; the stack reaches it through local/iamWiring.ts alone', () => {
    const inside = sources('local/iam').flatMap((f) => importsOf(f).filter((i) => i.startsWith('local/') && !/^local\/(plan|servers|iam\/.*)$/.test(i)).map((i) => `${f} -> ${i}`));
    const outside = [...sources('local'), ...sources('chaos'), ...sources('bench'), ...sources('ops')]
      .filter((f) => !f.startsWith('local/iam/') && f !== 'local/iamWiring.ts')
      .flatMap((f) => importsOf(f).filter((i) => /^local\/iam(\/|$)/.test(i)).map((i) => `${f} -> ${i}`));
    expect([...inside, ...outside]).toEqual([]);
    expect(importsOf('local/iamWiring.ts')).toContain('local/iam');
  });

  it('local/, chaos/ and bench/ name no job and import no job code', () => {
    const offending: string[] = [];
    for (const file of [...sources('local'), ...sources('chaos'), ...sources('bench')]) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const job of jobNames) if (text.includes(job)) offending.push(`${file} names ${job}`);
      for (const i of importsOf(file)) if (i.startsWith('lambda/jobs/')) offending.push(`${file} -> ${i}`);
    }
    expect(offending).toEqual([]);
  });
});
