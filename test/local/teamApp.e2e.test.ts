// `paced-jobs start` (runStartCli, what the package's dispatcher calls) in a team's app folder: no environment, the
// stack holding the jobs named with --stack where two do, each job's fixture found beside its entry (the
// `paced-jobs:job-entry` Metadata, in the app's own layout), and a resource of the team's that the local runtime does
// not emulate left out with one line. The app's assembly is this repository's synthesized dev stack under the team's
// stack names, with the Metadata the construct writes, so no synth runs here.
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { findStack } from '../../local/assembly';
import { runStartCli } from '../../local/cli';
import { JOB_ENTRY_METADATA } from '../../local/plan';
import { loadTemplate } from '../../local/template';

const ROOT = join(__dirname, '..', '..');

/** A stream that keeps what is written to it. */
function collector(): PassThrough & { text: () => string } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk) => (text += chunk));
  return Object.assign(stream, { text: () => text });
}

/**
 * A team's app: package.json, `jobs/<name>/local.ts` for each job (the examples' fixtures, re-exported), and cdk.out
 * with two stacks holding the jobs (Reporting, Billing), one without (Web), the job functions' entry Metadata and the
 * team's own event bus.
 */
function teamApp(): string {
  const app = mkdtempSync(join(tmpdir(), 'team-app-'));
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'team-app', private: true }));
  const source = findStack(join(ROOT, 'cdk.out'), 'dev');
  if (!source) throw new Error('no synthesized PacedJobs-dev in cdk.out (globalSetup synthesizes it)');
  const template = loadTemplate(source.templateFile);
  for (const r of Object.values(template.Resources)) {
    const job = (r.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables?.JOB_NAME;
    if (r.Type !== 'AWS::Lambda::Function' || typeof job !== 'string') continue;
    r.Metadata = { ...r.Metadata, [JOB_ENTRY_METADATA]: `jobs/${job}/index.ts` };
    mkdirSync(join(app, 'jobs', job), { recursive: true });
    writeFileSync(join(app, 'jobs', job, 'local.ts'), `export { fixture } from ${JSON.stringify(join(ROOT, 'lambda', 'jobs', job, 'local'))};\n`);
  }
  template.Resources.TeamBus = { Type: 'AWS::Events::EventBus', Properties: { Name: 'team-bus' } };
  const out = join(app, 'cdk.out');
  mkdirSync(out);
  for (const entry of readdirSync(source.assemblyDir).filter((e) => e.startsWith('asset.'))) cpSync(join(source.assemblyDir, entry), join(out, entry), { recursive: true });
  writeFileSync(join(out, 'Jobs.template.json'), JSON.stringify(template));
  writeFileSync(join(out, 'Web.template.json'), JSON.stringify({ Resources: { Api: { Type: 'AWS::ApiGateway::RestApi' } } }));
  const stack = (stackName: string, templateFile: string) => ({ type: 'aws:cloudformation:stack', displayName: stackName, properties: { templateFile, stackName } });
  writeFileSync(
    join(out, 'manifest.json'),
    JSON.stringify({ version: '55.0.0', artifacts: { Web: stack('Web', 'Web.template.json'), Reporting: stack('Reporting', 'Jobs.template.json'), Billing: stack('Billing', 'Jobs.template.json') } }),
  );
  return app;
}

describe("Function: runStartCli, in a team's app", () => {
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
    await expect(runStartCli(['--app', app, '--json'], { cwd: tmpdir(), stdout, stderr })).resolves.toBe(2);
    expect(stderr.text()).toBe('paced-jobs start failed: StackChoiceError: several stacks hold PacedJobs: Reporting, Billing; pick one with --stack <name>\n');
    expect(stdout.text()).toBe('');
  });

  it("runs the local proof on the stack named: every job's fixture found beside its entry, every check passing", async () => {
    const stdout = collector();
    const stderr = collector();
    // --uploads is the stale-upload-cleanup fixture's unit: a flag read off the fixture beside the job's entry.
    const args = ['--json', '--stack', 'Reporting', '--uploads', '2', '--count', 'payment-reconciliation=2', '--count', 'expired-session-cleanup=1', '--prewarm', '1'];
    const code = await runStartCli([...args, '--local-dir', localDir, '--timeout', '90'], { cwd: app, stdout, stderr });
    const report = JSON.parse(stdout.text()) as { ok: boolean; env: string; jobs: Record<string, Record<string, number>>; checks: { ok: boolean; name: string }[]; warnings: string[] };
    expect(code).toBe(0);
    expect(stderr.text()).not.toContain('cdk synth');
    expect(stderr.text()).toContain('not emulated, no job needs them: TeamBus (AWS::Events::EventBus)\n');
    expect(report.env).toBe('Reporting');
    expect(report.jobs).toMatchObject({
      'stale-upload-cleanup': expect.objectContaining({ discovered: 2, completed: 2, effects: 2, dlq: 0 }),
      'payment-reconciliation': expect.objectContaining({ discovered: 2, completed: 2, effects: 2, dlq: 0 }),
      'expired-session-cleanup': expect.objectContaining({ discovered: 1, completed: 1, effects: 1, dlq: 0 }),
    });
    expect(report.warnings.filter((w) => w.includes('IAM') || w.includes('pipeline'))).toEqual([]);
    expect(report.checks.filter((c) => !c.ok)).toEqual([]);
    expect(report.ok).toBe(true);
  }, 240_000);
});
