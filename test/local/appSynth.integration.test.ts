// `cdk synth` of a team's app, as `paced-jobs start` runs it: in the app's folder with its own cdk.json, no `-c env`
// unless --env is given, and the stack holding the jobs found in what it wrote.
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureAppStack } from '../../local/assembly';

const ROOT = join(__dirname, '..', '..');

/**
 * Two stacks, one with a job function (JOB_NAME), one without; each stack's description records the `env` context
 * the synth was given, so the test can see what was passed.
 */
const APP = `
const { App, Stack } = require('aws-cdk-lib');
const lambda = require('aws-cdk-lib/aws-lambda');
const app = new App();
const env = String(app.node.tryGetContext('env'));
new Stack(app, 'Web', { description: 'env=' + env });
const reporting = new Stack(app, 'Reporting', { description: 'env=' + env });
new lambda.Function(reporting, 'Consumer', {
  runtime: lambda.Runtime.NODEJS_22_X,
  handler: 'index.handler',
  code: lambda.Code.fromInline('exports.handler = async () => undefined'),
  environment: { JOB_NAME: 'usage-report' },
});
`;

describe("Function: ensureAppStack, synthesizing a team's app", () => {
  let app: string;
  beforeAll(() => {
    app = mkdtempSync(join(tmpdir(), 'team-app-'));
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'team-app', private: true }));
    writeFileSync(join(app, 'cdk.json'), JSON.stringify({ app: 'node app.js' }));
    writeFileSync(join(app, 'app.js'), APP);
    // The app's own install: aws-cdk-lib, and the CDK CLI npx runs (nothing is fetched).
    symlinkSync(join(ROOT, 'node_modules'), join(app, 'node_modules'), 'dir');
  });
  afterAll(() => rmSync(app, { recursive: true, force: true }));

  const description = (templateFile: string) =>
    (JSON.parse(readFileSync(templateFile, 'utf8')) as { Description?: string }).Description;

  it("synthesizes with the app's cdk.json and no environment, then takes the stack holding the jobs", () => {
    const logs: string[] = [];
    const artifact = ensureAppStack({ cwd: app, assemblyDir: 'cdk.out', log: (l) => logs.push(l) });
    expect(logs).toEqual([`no stack to run in ${join(app, 'cdk.out')}; running npx cdk synth --quiet`]);
    expect(artifact).toEqual({
      stackName: 'Reporting',
      templateFile: join(app, 'cdk.out', 'Reporting.template.json'),
      assemblyDir: join(app, 'cdk.out'),
    });
    expect(description(artifact.templateFile)).toBe('env=undefined');
  }, 120_000);

  it('passes --env on as -c env=<name> when given, into the assembly --cdk-out names', () => {
    const logs: string[] = [];
    const artifact = ensureAppStack({
      cwd: app,
      assemblyDir: 'build/staging',
      env: 'staging',
      log: (l) => logs.push(l),
    });
    expect(logs).toEqual([
      `no synthesized PacedJobs-staging in ${join(app, 'build', 'staging')}; running npx cdk synth -c env=staging --quiet`,
    ]);
    expect(artifact.templateFile).toBe(join(app, 'build', 'staging', 'Reporting.template.json'));
    expect(description(artifact.templateFile)).toBe('env=staging');
  }, 120_000);
});
