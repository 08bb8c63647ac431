// Test helper: the App stack tests build their stacks in: the feature flags from cdk.json, so stacks built in tests match
// what `cdk synth` produces, without asset bundling or CDK's built-in CloudFormation validation (each costs seconds).
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { App } from 'aws-cdk-lib';
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
  const cdkJson = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'cdk.json'), 'utf8')) as {
    context?: Record<string, unknown>;
  };
  // No stack to bundle: what the CDK CLI itself passes the app for the commands that need no assets (`cdk ls`, ...).
  return { ...(cdkJson.context ?? {}), ...(options.bundling ? {} : { [BUNDLING_STACKS]: [] }) };
}

/**
 * A new App for a stack test: cdkJsonContext(options) and `context` on top. CDK's built-in CloudFormation validation
 * (a schema check of every template, in WebAssembly: about 15 s to start in a jest worker here) is off: its findings are
 * only warnings unless the app opts in (`@aws-cdk/core:validateAgainstDefaultRules`, which this project does not), so no
 * stack test could fail on it. test/bin/app.test.ts runs it on every environment, as `cdk synth` does, and asserts that
 * it finds nothing.
 */
export function testApp(options: TestContextOptions & { readonly context?: Record<string, unknown> } = {}): App {
  return new App({
    context: { ...cdkJsonContext(options), ...options.context },
    builtinCloudFormationValidation: false,
  });
}
