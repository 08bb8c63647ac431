// Test helper: the feature flags from cdk.json, so stacks built in tests match what `cdk synth` produces.
import { readFileSync } from 'node:fs';
import * as path from 'node:path';

export function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
  return cdkJson.context ?? {};
}
