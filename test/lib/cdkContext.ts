// Test helper: the context stack tests build their App with: the feature flags from cdk.json, so stacks built in tests
// match what `cdk synth` produces, and no asset bundling.
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { BUNDLING_STACKS } from 'aws-cdk-lib/cx-api';

export interface TestContextOptions {
  /**
   * Bundle the functions' and the layer's assets with esbuild, as `cdk synth` does. Only a test about the bundles
   * themselves needs it: without it, CDK skips bundling (Stack.bundlingRequired), so a stack synthesizes in a fraction
   * of the time, with every resource and property but the assets' contents and hashes (their S3 keys are placeholders
   * derived from the construct's path). The synthesized dev assembly in cdk.out (test/support/globalSetup.ts) holds
   * the real bundles; test/lib/bundles.test.ts reads them. @default false
   */
  readonly bundling?: boolean;
}

export function cdkJsonContext(options: TestContextOptions = {}): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
  // No stack to bundle: what the CDK CLI itself passes the app for the commands that need no assets (`cdk ls`, ...).
  return { ...(cdkJson.context ?? {}), ...(options.bundling ? {} : { [BUNDLING_STACKS]: [] }) };
}
