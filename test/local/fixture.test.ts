// A job's fixture found by its entry (the `paced-jobs:job-entry` Metadata), in a team's app laid out its own way; and
// a TypeScript fixture loaded from compiled JavaScript (the package's `paced-jobs start`) through the app's tsx.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FixtureError, fixturePath, loadFixture } from '../../local/fixture';
import { appJobs, unitFlags } from '../../local/cli';

const ROOT = join(__dirname, '..', '..');

/** A fixture module's source: everything the contract requires, `unit` naming the file it came from. */
const fixtureSource = (unit: string, typed: boolean) =>
  `${typed ? 'const unit: string' : 'const unit'} = '${unit}';\n` +
  `exports.fixture = { unit, defaultCount: 3, seed: async () => ({ expectedOperations: [], summary: '' }), effects: () => ({ effectsByOperation: new Map(), starts: [], unexpectedEffects: [] }), operationKeyOf: () => undefined };\n`;

describe("Function: loadFixture, by the job's entry", () => {
  let app: string;
  beforeEach(() => {
    app = mkdtempSync(join(tmpdir(), 'team-app-'));
  });
  afterEach(() => rmSync(app, { recursive: true, force: true }));

  const write = (path: string, text: string) => {
    mkdirSync(join(app, path, '..'), { recursive: true });
    writeFileSync(join(app, path), text);
  };

  it('loads local.ts beside the entry, relative to the app folder', () => {
    write('src/jobs/usage-report/index.ts', '');
    write('src/jobs/usage-report/local.ts', fixtureSource('reports', true));
    expect(fixturePath(app, 'usage-report', 'src/jobs/usage-report/index.ts')).toBe(
      join(app, 'src/jobs/usage-report/local.ts'),
    );
    expect(loadFixture(app, 'usage-report', 'src/jobs/usage-report/index.ts')?.unit).toBe('reports');
  });

  it("takes the fixture in the entry's own language first, and the other when that is all there is", () => {
    write('dist/jobs/export/index.js', '');
    write('dist/jobs/export/local.js', fixtureSource('compiled', false));
    write('dist/jobs/export/local.ts', fixtureSource('source', true));
    expect(loadFixture(app, 'export', 'dist/jobs/export/index.js')?.unit).toBe('compiled');
    write('jobs/only-js/local.js', fixtureSource('only js', false));
    expect(loadFixture(app, 'only-js', 'jobs/only-js/index.ts')?.unit).toBe('only js');
  });

  it('falls back to lambda/jobs/<name>/local.ts without the Metadata (an assembly synthesized before it existed)', () => {
    write('lambda/jobs/legacy/local.ts', fixtureSource('legacy', true));
    expect(fixturePath(app, 'legacy')).toBe(join(app, 'lambda/jobs/legacy/local.ts'));
    expect(loadFixture(app, 'legacy')?.unit).toBe('legacy');
  });

  it('has none when there is no fixture beside the entry, and names the file that exports none', () => {
    write('jobs/bare/index.ts', '');
    expect(loadFixture(app, 'bare', 'jobs/bare/index.ts')).toBeUndefined();
    write('jobs/broken/local.ts', 'export const notAFixture = 1;\n');
    expect(() => loadFixture(app, 'broken', 'jobs/broken/index.ts')).toThrow(
      new FixtureError(
        `${join(app, 'jobs/broken/local.ts')} must export \`fixture: JobFixture\` (missing: fixture)`,
        'broken',
      ),
    );
  });
});

describe("Function: appJobs, a team's jobs and fixtures read off its existing assembly", () => {
  let app: string;
  beforeEach(() => {
    app = mkdtempSync(join(tmpdir(), 'team-app-'));
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'team-app' }));
  });
  afterEach(() => rmSync(app, { recursive: true, force: true }));

  it('names each job with its entry from the Metadata, so its fixture unit becomes a flag', () => {
    const out = join(app, 'build', 'assembly');
    mkdirSync(out, { recursive: true });
    const fn = (job: string, entry?: string) => ({
      Type: 'AWS::Lambda::Function',
      Properties: { Environment: { Variables: { JOB_NAME: job } } },
      ...(entry ? { Metadata: { 'paced-jobs:job-entry': entry } } : {}),
    });
    writeFileSync(
      join(out, 'Reporting.template.json'),
      JSON.stringify({
        Resources: {
          P: fn('usage-report', 'jobs/usage-report/index.ts'),
          C: fn('usage-report', 'jobs/usage-report/index.ts'),
          Q: fn('plain'),
        },
      }),
    );
    writeFileSync(
      join(out, 'manifest.json'),
      JSON.stringify({
        artifacts: {
          Reporting: { type: 'aws:cloudformation:stack', properties: { templateFile: 'Reporting.template.json' } },
        },
      }),
    );
    mkdirSync(join(app, 'jobs', 'usage-report'), { recursive: true });
    writeFileSync(join(app, 'jobs', 'usage-report', 'local.ts'), fixtureSource('accounts', true));

    const jobs = appJobs(app, ['--json', '--cdk-out=build/assembly'])!;
    expect(jobs).toEqual({
      names: ['plain', 'usage-report'],
      source: 'stack Reporting',
      entries: new Map([
        ['usage-report', 'jobs/usage-report/index.ts'],
        ['plain', undefined],
      ]),
    });
    expect(unitFlags(app, jobs.names, (job) => jobs.entries.get(job))).toEqual([
      { unit: 'accounts', job: 'usage-report', defaultCount: 3 },
    ]);
    // No assembly there yet: the run synthesizes first and decides then.
    expect(appJobs(app, [])).toBeUndefined();
  });
});

describe('A TypeScript fixture loaded from compiled JavaScript', () => {
  let work: string;
  let loader: string;
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'fixture-loader-'));
    loader = join(work, 'loader.js');
    // local/fixture.ts as the package ships it: compiled JavaScript, run by plain node (no tsx hook in the process).
    const built = spawnSync(
      join(ROOT, 'node_modules', '.bin', 'esbuild'),
      [
        join(ROOT, 'local', 'fixture.ts'),
        '--bundle',
        '--platform=node',
        '--format=cjs',
        `--outfile=${join(work, 'fixture.js')}`,
      ],
      {
        encoding: 'utf8',
      },
    );
    if (built.status !== 0) throw new Error(`esbuild failed: ${built.stderr}`);
    writeFileSync(
      loader,
      `const { loadFixture } = require('./fixture.js');\n` +
        `try { console.log(loadFixture(process.argv[2], 'usage-report', 'jobs/usage-report/index.ts').unit); }\n` +
        `catch (e) { console.log(e.name + ': ' + e.message); }\n`,
    );
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  /** A team's app with a TypeScript fixture (types and an import the tsx hook must compile), tsx installed or not. */
  const teamApp = (withTsx: boolean) => {
    const app = join(work, withTsx ? 'with-tsx' : 'without-tsx');
    mkdirSync(join(app, 'jobs', 'usage-report'), { recursive: true });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'team-app' }));
    writeFileSync(join(app, 'jobs', 'usage-report', 'unit.ts'), "export const UNIT: string = 'accounts';\n");
    writeFileSync(
      join(app, 'jobs', 'usage-report', 'local.ts'),
      "import { UNIT } from './unit';\n" + fixtureSource('x', true).replace("'x'", 'UNIT'),
    );
    if (withTsx) symlinkSync(join(ROOT, 'node_modules'), join(app, 'node_modules'), 'dir');
    return app;
  };
  // The bundle carries its own dependencies, so nothing but the app's folder can give it tsx.
  const run = (app: string) => {
    const { NODE_PATH, NODE_OPTIONS, ...env } = process.env;
    return spawnSync(process.execPath, [loader, app], { encoding: 'utf8', env }).stdout.trim();
  };

  it("loads it through tsx's CommonJS hook, resolved from the app's folder", () => {
    expect(run(teamApp(true))).toBe('accounts');
  });

  it('fails naming the fixture and the fix when the app has no tsx', () => {
    const app = teamApp(false);
    expect(run(app)).toBe(
      `FixtureError: ${join(app, 'jobs', 'usage-report', 'local.ts')}: loading a TypeScript fixture needs tsx in the app (${app}), and it is not installed there: run \`npm install -D tsx\` in it, or compile the fixture to local.js`,
    );
  });
});
