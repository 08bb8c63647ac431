// The CDK app as the CLI runs it: every environment synthesizes with zero cdk-nag findings; a bad one fails readably.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { App, type PolicyValidationPluginReport } from 'aws-cdk-lib';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import { buildApp } from '../../bin/app';
import { environments } from '../../lib/config/environments';
import { cdkJsonContext } from '../lib/cdkContext';

const ROOT = path.join(__dirname, '..', '..');

/** Runs the app's entry point the way `cdk synth` does, with the context passed through CDK_CONTEXT_JSON. */
function runApp(context: Record<string, unknown>) {
  const outdir = mkdtempSync(path.join(tmpdir(), 'paced-jobs-app-'));
  try {
    return runIn(outdir, context);
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

function runIn(outdir: string, context: Record<string, unknown>) {
  return spawnSync(process.execPath, [path.join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs'), 'bin/app.ts'], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, CDK_CONTEXT_JSON: JSON.stringify(context), CDK_OUTDIR: outdir },
    timeout: 30000,
  });
}

/** Runs `synth` with CDK's built-in CloudFormation validation as `cdk synth` has it: CDK_VALIDATION unset. */
function withValidation<T>(synth: () => T): T {
  const saved = process.env.CDK_VALIDATION;
  delete process.env.CDK_VALIDATION;
  try {
    return synth();
  } finally {
    if (saved !== undefined) process.env.CDK_VALIDATION = saved;
  }
}

const describeViolations = (report: PolicyValidationPluginReport): string[] =>
  report.violations.map(
    (v) => `${v.severity} ${v.ruleName} at ${v.violatingResources.map((r) => r.constructPath).join(', ')}`,
  );

describe('Function: buildApp', () => {
  describe.each(Object.keys(environments))('environment %s', (environmentName) => {
    let app: App;
    let stackName: string;
    let assemblyDir: string;

    beforeAll(() => {
      // cdk.json's context without bundling (the bundles are test/lib/bundles.test.ts's), and CDK's built-in
      // CloudFormation validation on, as `cdk synth` runs it: the one test of the reference app that runs it
      // (test/lib/cdkContext.ts; test/support/setupEnv.ts turns it off for the others through CDK_VALIDATION).
      const built = buildApp(new App({ context: { ...cdkJsonContext(), env: environmentName } }));
      app = built.app;
      stackName = built.stack.stackName;
      // Synthesis runs the registered nag plugins and throws on any unacknowledged error.
      assemblyDir = withValidation(() => app.synth().directory);
    });

    it('names the stack PacedJobs-<env> and synthesizes without credentials or lookups', () => {
      expect(stackName).toBe(`PacedJobs-${environmentName}`);
      expect(
        app.node.metadata.filter((m) => m.type === 'aws:cdk:missing-context' || m.type.startsWith('aws:cdk:lookup')),
      ).toEqual([]);
    });

    it('has zero unacknowledged AwsSolutions findings (errors or warnings)', () => {
      expect(describeViolations(new AwsSolutionsChecks().validateScope(app))).toEqual([]);
    });

    it('has zero unacknowledged Serverless findings (errors or warnings)', () => {
      expect(describeViolations(new ServerlessChecks().validateScope(app))).toEqual([]);
    });

    it("has zero findings from CDK's built-in CloudFormation validation (resource schemas and rules), which only warns", () => {
      const report = JSON.parse(readFileSync(path.join(assemblyDir, 'validation-report.json'), 'utf8')) as {
        pluginReports: { pluginName: string; violations: { ruleName: string; description: string }[] }[];
      };
      expect(
        report.pluginReports.flatMap((r) => r.violations.map((v) => `${r.pluginName} ${v.ruleName}: ${v.description}`)),
      ).toEqual([]);
    });
  });
});

describe('Script: bin/app.ts', () => {
  it('fails with the readable message and the valid environments for an unknown environment', () => {
    const result = runApp({ env: 'nope' });
    expect(result.status).toBe(1);
    expect(result.stderr).toBe('Unknown environment "nope". Valid environments: dev, staging, prod.\n');
  });

  it('fails with the readable message when no environment is chosen', () => {
    const result = runApp({});
    expect(result.status).toBe(1);
    expect(result.stderr).toBe('No environment chosen. Pass -c env=<name>; valid environments: dev, staging, prod.\n');
  });
});
