import { statSync } from 'node:fs';
import { join } from 'node:path';
import { findStack } from '../../local/assembly';
import { loadTemplate } from '../../local/template';
import { loadEnvironment } from '../../lib/config/load';

// The synthesized dev assembly (test/support/globalSetup.ts keeps it current) holds what `cdk deploy` would upload.
const ROOT = join(__dirname, '..', '..');
/** Issue 7's goal for one handler bundle; a size, so deterministic, unlike the init time the benchmark measures. */
const MAX_BUNDLE_BYTES = 250 * 1024;

describe('Bundles: the handlers in the cloud assembly', () => {
  const artifact = findStack(join(ROOT, 'cdk.out'), 'dev');
  const template = artifact ? loadTemplate(artifact.templateFile) : undefined;
  const bundles = Object.entries(template?.Resources ?? {}).flatMap(([logicalId, resource]) => {
    const assetPath = (resource.Metadata as Record<string, unknown> | undefined)?.['aws:asset:path'];
    const handler = (resource.Properties as { Handler?: string } | undefined)?.Handler;
    return resource.Type === 'AWS::Lambda::Function' && typeof assetPath === 'string' && handler === 'index.handler'
      ? [{ logicalId, file: join(ROOT, 'cdk.out', assetPath, 'index.js') }]
      : [];
  });

  it('finds a bundle for every job function (a producer and a consumer per job)', () => {
    expect(bundles.length).toBe(2 * Object.keys(loadEnvironment('dev').jobs).length);
    expect(bundles.length).toBeGreaterThanOrEqual(6);
  });

  it.each(bundles.map((b) => [b.logicalId, b.file]))('keeps %s under 250 KB minified', (_id, file) => {
    expect(statSync(file).size).toBeLessThan(MAX_BUNDLE_BYTES);
  });
});
