// A job bundled by its entry, as `cdk synth` bundles it: the consumer's bundle holds the entry's code (and no example
// job's), and run as Lambda would load it, its job loader finds that job, or names the entry when the job is not it.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { type App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { PacedJobs } from '../../lib';
import { testApp } from './cdkContext';
import { resourceOf } from './templateHelpers';

const ROOT = path.join(__dirname, '..', '..');
const FAKE_JOB = path.join(__dirname, '..', 'fixtures', 'jobs', 'fake-job', 'index.ts');

describe('Class: PacedJobs (bundled)', () => {
  let app: App;
  let jobs: PacedJobs;
  let template: Template;
  let bundle: string;
  let layerModules: string;

  beforeAll(() => {
    app = testApp({ bundling: true });
    const stack = new Stack(app, 'TeamStack');
    jobs = new PacedJobs(stack, 'Jobs', {
      jobs: {
        'fake-job': {
          entry: FAKE_JOB,
          schedule: { cron: '0 4 * * ? *', timeZone: 'UTC' },
          pacing: { starts: 60 },
          settings: { items: 3 },
        },
      },
    });
    template = Template.fromStack(stack);
    // The staged asset folders are named after the hashes CDK puts in the S3 keys.
    const assetDir = (s3Key: string) => path.join(app.outdir, `asset.${s3Key.replace(/\.zip$/, '')}`);
    bundle = path.join(
      assetDir(resourceOf(template, jobs.jobs['fake-job'].consumer).Properties.Code.S3Key),
      'index.js',
    );
    const [layer] = Object.values(template.findResources('AWS::Lambda::LayerVersion'));
    layerModules = path.join(assetDir(layer.Properties.Content.S3Key), 'nodejs', 'node_modules');
  });

  it("bundles the entry's code into the consumer, and no job of lambda/jobs", () => {
    const { sources } = JSON.parse(readFileSync(`${bundle}.map`, 'utf8')) as { sources: string[] };
    expect(sources.filter((source) => source.endsWith('fixtures/jobs/fake-job/index.ts'))).toHaveLength(1);
    expect(sources.filter((source) => source.includes('lambda/jobs/'))).toEqual([]);
  });

  /** Runs the bundled consumer on an empty batch in a Node process with the function's own variables. */
  function invoke(jobName: string): { status: number | null; stdout: string; stderr: string } {
    const variables = resourceOf(template, jobs.jobs['fake-job'].consumer).Properties.Environment.Variables as Record<
      string,
      unknown
    >;
    // References (queue URLs, table names) resolve at deploy; an empty batch never uses them.
    const env = Object.fromEntries(
      Object.entries(variables).map(([k, v]) => [k, typeof v === 'string' ? v : `unresolved-${k}`]),
    );
    const settings = JSON.parse(env.JOB_SETTINGS) as { jobName: string };
    const script =
      `require(${JSON.stringify(bundle)}).handler({ Records: [] }, { awsRequestId: 'r-1', getRemainingTimeInMillis: () => 60000 })` +
      '.then((r) => process.stdout.write(JSON.stringify(r)), (e) => { process.stderr.write(String(e.message)); process.exit(3); });';
    const result = spawnSync(process.execPath, ['-e', script], {
      encoding: 'utf8',
      timeout: 30_000,
      env: {
        PATH: process.env.PATH,
        // Lambda puts a layer's nodejs/node_modules on the path, and provides the AWS SDK itself.
        NODE_PATH: [layerModules, path.join(ROOT, 'node_modules')].join(path.delimiter),
        AWS_REGION: 'eu-west-1',
        AWS_ACCESS_KEY_ID: 'test',
        AWS_SECRET_ACCESS_KEY: 'test',
        ...env,
        JOB_NAME: jobName,
        JOB_SETTINGS: JSON.stringify({ ...settings, jobName }),
      },
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  it('loads the job from the bundle and answers an empty batch', () => {
    const result = invoke('fake-job');
    expect({ status: result.status, stderr: result.stderr }).toEqual({
      status: 0,
      stderr: expect.not.stringContaining('cannot load job'),
    });
    expect(JSON.parse(result.stdout)).toEqual({ batchItemFailures: [] });
  });

  it("names the bundled entry when the job it exports is not the function's job", () => {
    const result = invoke('other-job');
    expect(result.status).toBe(3);
    expect(result.stderr).toBe(
      'cannot load job "other-job": the `job` exported by test/fixtures/jobs/fake-job/index.ts is named "fake-job"',
    );
  });
});
