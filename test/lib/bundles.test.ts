import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { findStack } from '../../local/assembly';
import { loadTemplate } from '../../local/template';
import { loadEnvironment } from '../../lib/config/load';

// The synthesized dev assembly (test/support/globalSetup.ts keeps it current) holds what `cdk deploy` would upload: the
// one place the suite reads the handlers' real bundles, since the stack tests synthesize without bundling.
const ROOT = join(__dirname, '..', '..');
/** Issue 7's goal for one handler bundle; a size, so deterministic, unlike the init time the benchmark measures. */
const MAX_BUNDLE_BYTES = 250 * 1024;
const JOBS = Object.keys(loadEnvironment('dev').jobs);

describe('Bundles: the handlers in the cloud assembly', () => {
  const artifact = findStack(join(ROOT, 'cdk.out'), 'dev');
  const template = artifact ? loadTemplate(artifact.templateFile) : undefined;
  const bundles = Object.entries(template?.Resources ?? {}).flatMap(([logicalId, resource]) => {
    const assetPath = (resource.Metadata as Record<string, unknown> | undefined)?.['aws:asset:path'];
    const { Handler: handler, Environment: environment } = (resource.Properties ?? {}) as {
      Handler?: string;
      Environment?: { Variables?: Record<string, unknown> };
    };
    const entry = (resource.Metadata as Record<string, unknown> | undefined)?.['paced-jobs:job-entry'];
    return resource.Type === 'AWS::Lambda::Function' && typeof assetPath === 'string' && handler === 'index.handler'
      ? [
          {
            logicalId,
            jobName: environment?.Variables?.JOB_NAME,
            entry,
            file: join(ROOT, 'cdk.out', assetPath, 'index.js'),
          },
        ]
      : [];
  });

  it('finds a bundle for every job function (a producer and a consumer per job)', () => {
    expect(bundles.length).toBe(2 * JOBS.length);
    // At least one job: an app whose config lost every job would pass the line above with no bundle at all.
    expect(JOBS.length).toBeGreaterThan(0);
    expect(bundles.map((b) => b.jobName).sort()).toEqual([...JOBS, ...JOBS].sort());
  });

  it.each(bundles.map((b) => [b.logicalId, b.file]))('keeps %s under 250 KB minified', (_id, file) => {
    expect(statSync(file).size).toBeLessThan(MAX_BUNDLE_BYTES);
  });

  // Each function's esbuild run aliases the job loader's module to its job's entry (lib/paced-function.ts `jobEntry`),
  // which its Metadata names; its source map names every file esbuild put in.
  it.each(bundles.map((b) => [b.logicalId, b.jobName, b.file]))(
    "bundles into %s its job's code (%s) alone, not the other jobs'",
    (_id, ownJob, file) => {
      const map = JSON.parse(readFileSync(`${file}.map`, 'utf8')) as { sources: string[] };
      const bundledJobs = JOBS.filter((jobName) =>
        map.sources.some((source) => source.endsWith(`lambda/jobs/${jobName}/index.ts`)),
      );
      expect(bundledJobs).toEqual([ownJob]);
      expect(bundles.find((b) => b.file === file)?.entry).toBe(`lambda/jobs/${ownJob}/index.ts`);
      expect(map.sources.some((source) => source.includes('@aws-sdk/'))).toBe(false);
    },
  );
});
