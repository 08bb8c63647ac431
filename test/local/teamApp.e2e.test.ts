// `paced-jobs start` (runStart, what the package's dispatcher calls) in a team's app folder: no environment, the
// stack holding the jobs named with --stack where two do, each job's fixture found beside its entry (the
// `paced-jobs:job-entry` Metadata, in the app's own layout), and a resource of the team's that the local runtime does
// not emulate left out with one line. The app's assembly is the engine's test app's synthesized stack (test/fixtures/app,
// globalSetup synthesizes it) under the team's stack names, with the Metadata the construct wrote, so no synth runs here.
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { PassThrough } from 'node:stream';
import { assemblyStacks } from '../../local/assembly';
import { runStart } from '../../cli/start';
import { JOB_ENTRY_METADATA } from '../../local/plan';
import { loadTemplate } from '../../local/template';
import {
  OBJECT_SWEEPER,
  QUOTA_CALLER,
  RECORD_WRITER,
  TEST_APP,
  TEST_APP_ASSEMBLY,
  TEST_APP_STACK,
} from '../support/testApp';

/** A stream that keeps what is written to it. */
function collector(): PassThrough & { text: () => string } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk) => (text += chunk));
  return Object.assign(stream, { text: () => text });
}

/**
 * A team's app: package.json, a `local.ts` beside each job's entry as the construct's Metadata names it (the test app's
 * fixtures, re-exported), and cdk.out with two stacks holding the jobs (Reporting, Billing), one without (Web), and
 * the team's own event bus.
 */
function teamApp(): string {
  const app = mkdtempSync(join(tmpdir(), 'team-app-'));
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'team-app', private: true }));
  const source = assemblyStacks(join(TEST_APP, TEST_APP_ASSEMBLY)).find((s) => s.stackName === TEST_APP_STACK);
  if (!source)
    throw new Error(`no synthesized ${TEST_APP_STACK} in the test app's assembly (globalSetup synthesizes it)`);
  const template = loadTemplate(source.templateFile);
  for (const r of Object.values(template.Resources)) {
    const entry = r.Metadata?.[JOB_ENTRY_METADATA];
    if (r.Type !== 'AWS::Lambda::Function' || typeof entry !== 'string') continue;
    // The entry relative to the app's folder, as the construct wrote it (jobs/<name>/index.ts in the test app).
    mkdirSync(join(app, dirname(entry)), { recursive: true });
    writeFileSync(
      join(app, dirname(entry), 'local.ts'),
      `export { fixture } from ${JSON.stringify(join(TEST_APP, dirname(entry), 'local'))};\n`,
    );
  }
  template.Resources.TeamBus = { Type: 'AWS::Events::EventBus', Properties: { Name: 'team-bus' } };
  const out = join(app, 'cdk.out');
  mkdirSync(out);
  for (const entry of readdirSync(source.assemblyDir).filter((e) => e.startsWith('asset.')))
    cpSync(join(source.assemblyDir, entry), join(out, entry), { recursive: true });
  writeFileSync(join(out, 'Jobs.template.json'), JSON.stringify(template));
  writeFileSync(
    join(out, 'Web.template.json'),
    JSON.stringify({ Resources: { Api: { Type: 'AWS::ApiGateway::RestApi' } } }),
  );
  const stack = (stackName: string, templateFile: string) => ({
    type: 'aws:cloudformation:stack',
    displayName: stackName,
    properties: { templateFile, stackName },
  });
  writeFileSync(
    join(out, 'manifest.json'),
    JSON.stringify({
      version: '55.0.0',
      artifacts: {
        Web: stack('Web', 'Web.template.json'),
        Reporting: stack('Reporting', 'Jobs.template.json'),
        Billing: stack('Billing', 'Jobs.template.json'),
      },
    }),
  );
  return app;
}

describe("Function: runStart, in a team's app", () => {
  let app: string;
  let localDir: string;
  beforeAll(() => {
    app = teamApp();
    localDir = mkdtempSync(join(tmpdir(), 'team-app-local-'));
  });
  afterAll(() => {
    rmSync(app, { recursive: true, force: true });
    rmSync(localDir, { recursive: true, force: true });
  });

  it('needs --stack when two stacks hold jobs, naming them, before anything runs (the app named with --app)', async () => {
    const stdout = collector();
    const stderr = collector();
    await expect(runStart(['--app', app, '--json'], { cwd: tmpdir(), stdout, stderr })).resolves.toBe(2);
    expect(stderr.text()).toBe(
      'paced-jobs start failed: StackChoiceError: several stacks hold PacedJobs: Reporting, Billing; pick one with --stack <name>\n',
    );
    expect(stdout.text()).toBe('');
  });

  it("runs the local proof on the stack named: every job's fixture found beside its entry, every check passing", async () => {
    const stdout = collector();
    const stderr = collector();
    // --objects is the object-sweeper fixture's unit: a flag read off the fixture beside the job's entry.
    const args = [
      '--json',
      '--stack',
      'Reporting',
      '--objects',
      '2',
      '--count',
      `${RECORD_WRITER}=2`,
      '--count',
      `${QUOTA_CALLER}=1`,
      '--prewarm',
      '1',
    ];
    const code = await runStart([...args, '--local-dir', localDir, '--timeout', '90'], { cwd: app, stdout, stderr });
    const report = JSON.parse(stdout.text()) as {
      ok: boolean;
      env: string;
      jobs: Record<string, Record<string, number>>;
      checks: { ok: boolean; name: string }[];
      warnings: string[];
    };
    expect(code).toBe(0);
    expect(stderr.text()).not.toContain('cdk synth');
    expect(stderr.text()).toContain('not emulated, no job needs them: TeamBus (AWS::Events::EventBus)\n');
    expect(report.env).toBe('Reporting');
    expect(report.jobs).toMatchObject({
      [OBJECT_SWEEPER]: expect.objectContaining({ discovered: 2, completed: 2, effects: 2, dlq: 0 }),
      [RECORD_WRITER]: expect.objectContaining({ discovered: 2, completed: 2, effects: 2, dlq: 0 }),
      [QUOTA_CALLER]: expect.objectContaining({ discovered: 1, completed: 1, effects: 1, dlq: 0 }),
    });
    expect(report.warnings.filter((w) => w.includes('IAM') || w.includes('pipeline'))).toEqual([]);
    expect(report.checks.filter((c) => !c.ok)).toEqual([]);
    expect(report.ok).toBe(true);
  }, 240_000);
});
