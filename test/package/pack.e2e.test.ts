// The package as a team meets it (issue #35's first test): `npm pack` here, the tarball installed into a fresh CDK app
// outside the repository with the packages, a stack with its own table and one job that writes to it through
// `uses`; then `tsc`, `cdk synth`, `paced-jobs start --json` (every operation completed, every check passing, IAM
// enforced) and `paced-jobs new-job` in that app. Packages come from the registry through npm's cache
// (--prefer-offline).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  assertSucceeded,
  copyProject,
  PROJECT_ROOT,
  runIn,
  type CommandResult,
  type ProjectCopy,
} from '../support/projectCopy';
import { ACCOUNTS, APP_FILES, JOB } from './teamApp';

/** npm pack runs prepack: tsc of the whole shipped tree, with declarations. */
const PACK_TIMEOUT_MS = 300_000;
/** Two npm installs of a CDK app's packages from npm's cache (the registry for what it lacks). */
const INSTALL_TIMEOUT_MS = 600_000;
const SYNTH_TIMEOUT_MS = 300_000;
/** `start` synthesizes again (bundling the job), starts the local runtime and runs one cycle of 30 operations. */
const START_TIMEOUT_MS = 600_000;

interface RunReport {
  ok: boolean;
  jobs: Record<string, { discovered: number; completed: number; dlq: number }>;
  checks: { job: string; name: string; ok: boolean; detail: string }[];
  warnings: string[];
}

describe("The package, installed into a team's CDK app", () => {
  let copy: ProjectCopy;
  let scratch: string;
  let app: string;
  const inApp = (command: string, args: string[], timeoutMs: number): Promise<CommandResult> =>
    // CDK_VALIDATION unset: the app synthesizes with CDK's built-in CloudFormation validation, as a team's does (the
    // suite turns it off elsewhere, test/support/setupEnv.ts).
    runIn(app, command, args, {
      timeoutMs,
      env: {
        npm_config_fund: 'false',
        npm_config_audit: 'false',
        npm_config_update_notifier: 'false',
        CDK_VALIDATION: undefined,
      },
    });

  beforeAll(() => {
    // Packed from a copy, so prepack's dist/ is built there and the work tree is left alone.
    copy = copyProject({ prefix: 'pack-e2e-' });
    scratch = mkdtempSync(join(tmpdir(), 'paced-jobs-app-'));
    app = join(scratch, 'team-app');
    mkdirSync(app);
  });
  afterAll(() => {
    copy?.remove();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it(
    "packs, installs with the issue's packages, and type-checks a job that imports paced-jobs/job",
    async () => {
      expect(app.startsWith(PROJECT_ROOT)).toBe(false);
      const pack = await copy.run('npm', ['pack', '--json', '--pack-destination', scratch], {
        timeoutMs: PACK_TIMEOUT_MS,
      });
      assertSucceeded('npm pack', pack);
      const [packed] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as {
        filename: string;
        files: { path: string }[];
      }[];
      const shipped = packed.files.map((f) => f.path);
      // The entry points the exports name, the command, and the templates and web page the compiled code reads.
      expect(shipped).toEqual(
        expect.arrayContaining([
          'dist/lib/index.js',
          'dist/lib/index.d.ts',
          'dist/lambda/job.js',
          'dist/lambda/job.d.ts',
          'dist/local/fixture.js',
          'dist/local/testing.js',
          'dist/cli/paced-jobs.js',
          'dist/lambda/handlers/producer.js',
          'dist/lambda/handlers/consumer.js',
          'dist/scaffold/templates/index.ts.tmpl',
          'dist/console/web/index.html',
        ]),
      );
      // Not the reference app: its entry, its config, its example jobs, the tests.
      expect(
        shipped.filter((p) =>
          /^(bin|test|lambda)\/|^dist\/(bin|test)\/|^dist\/lambda\/jobs\/|environments\.|\.test\.(js|d\.ts)$/.test(p),
        ),
      ).toEqual([]);

      writeFileSync(
        join(app, 'package.json'),
        `${JSON.stringify({ name: 'team-app', version: '1.0.0', private: true }, null, 2)}\n`,
      );
      const tarball = join(scratch, packed.filename);
      const install = await inApp(
        'npm',
        [
          'install',
          '--prefer-offline',
          tarball,
          'aws-cdk-lib',
          'constructs',
          'zod',
          '@aws-sdk/client-dynamodb',
          '@aws-sdk/lib-dynamodb',
        ],
        INSTALL_TIMEOUT_MS,
      );
      assertSucceeded(
        'npm install <tarball> aws-cdk-lib constructs zod @aws-sdk/client-dynamodb @aws-sdk/lib-dynamodb',
        install,
      );
      const installDev = await inApp(
        'npm',
        ['install', '--prefer-offline', '-D', 'aws-cdk', 'typescript', 'tsx', 'esbuild'],
        INSTALL_TIMEOUT_MS,
      );
      assertSucceeded('npm install -D aws-cdk typescript tsx esbuild', installDev);
      // One copy of the CDK in the app, its own (the package only peers it).
      expect(existsSync(join(app, 'node_modules', 'paced-jobs', 'node_modules', 'aws-cdk-lib'))).toBe(false);

      // The stack and the job are docs/getting-started.md's own blocks (test/package/teamApp.ts): the example is tried as written.
      expect(Object.keys(APP_FILES).sort()).toEqual([
        'bin/app.ts',
        'cdk.json',
        `jobs/${JOB}/index.ts`,
        'tsconfig.json',
      ]);
      for (const [path, text] of Object.entries(APP_FILES)) {
        mkdirSync(dirname(join(app, path)), { recursive: true });
        writeFileSync(join(app, path), text);
      }
      assertSucceeded('npx tsc', await inApp('npx', ['tsc', '-p', '.'], SYNTH_TIMEOUT_MS));
    },
    PACK_TIMEOUT_MS + 2 * INSTALL_TIMEOUT_MS + SYNTH_TIMEOUT_MS,
  );

  it(
    'synthesizes the app with the job bundled from its entry',
    async () => {
      const synth = await inApp('npx', ['cdk', 'synth', '--quiet'], SYNTH_TIMEOUT_MS);
      assertSucceeded('npx cdk synth', synth);
      const template = JSON.parse(readFileSync(join(app, 'cdk.out', 'TeamStack.template.json'), 'utf8')) as {
        Resources: Record<
          string,
          {
            Type: string;
            Properties?: { Environment?: { Variables?: Record<string, string> } };
            Metadata?: Record<string, string>;
          }
        >;
      };
      const functions = Object.values(template.Resources).filter(
        (r) => r.Type === 'AWS::Lambda::Function' && r.Properties?.Environment?.Variables?.JOB_NAME === JOB,
      );
      expect(functions).toHaveLength(2);
      for (const f of functions) expect(f.Metadata?.['paced-jobs:job-entry']).toBe(`jobs/${JOB}/index.ts`);
    },
    SYNTH_TIMEOUT_MS,
  );

  it(
    'runs every operation locally with every check passing, IAM enforced',
    async () => {
      const start = await inApp('npx', ['paced-jobs', 'start', '--json'], START_TIMEOUT_MS);
      assertSucceeded('npx paced-jobs start --json', start);
      const report = JSON.parse(start.stdout) as RunReport;
      expect(report.jobs[JOB]).toMatchObject({ discovered: ACCOUNTS, completed: ACCOUNTS, dlq: 0 });
      expect(report.checks.filter((c) => !c.ok)).toEqual([]);
      expect(report.checks.find((c) => c.job === JOB && c.name === 'iam-allowed')?.detail).toBe(
        "every request allowed by the template's IAM",
      );
      expect(report.warnings.filter((w) => /IAM/.test(w))).toEqual([]);
      expect(report.ok).toBe(true);
    },
    START_TIMEOUT_MS,
  );

  it('writes a new job into the app with new-job', async () => {
    const newJob = await inApp('npx', ['paced-jobs', 'new-job', 'export-expiry'], 120_000);
    assertSucceeded('npx paced-jobs new-job export-expiry', newJob);
    expect(readFileSync(join(app, 'jobs', 'export-expiry', 'index.ts'), 'utf8')).toContain("from 'paced-jobs/job'");
    expect(newJob.stdout).toContain(
      "  'export-expiry': {\n    entry: path.join(__dirname, '..', 'jobs', 'export-expiry', 'index.ts'),",
    );
  }, 120_000);
});
