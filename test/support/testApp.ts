// The engine's test app (test/fixtures/app): a plain CDK app with PacedJobs over three fixture jobs, which the tests
// that run a whole local stack use instead of this repository's reference app, so that they name no example job.
// globalSetup synthesizes it once per jest run (when its sources changed) into its own assembly at the project root,
// cdk.out.test-app, beside the reference app's cdk.out; every file then opens a LocalSession on that assembly.
import { statSync } from 'node:fs';
import { join } from 'node:path';
import {
  assemblyStacks,
  chooseStack,
  ensureAppStack,
  newestAppSourceMtime,
  newestReferenceInputMtime,
  type StackArtifact,
} from '../../local/assembly';
import { LocalSession, type SessionOptions } from '../../local/session';

const ROOT = join(__dirname, '..', '..');

/** The test app's folder: its cdk.json, bin/app.ts and jobs/<name>/ (each job's index.ts and local.ts). */
export const TEST_APP = join(ROOT, 'test', 'fixtures', 'app');
/** Its cloud assembly, relative to TEST_APP (outside test/, so jest and tsc do not crawl the bundles; git ignores it). */
export const TEST_APP_ASSEMBLY = join('..', '..', '..', 'cdk.out.test-app');
/** The one stack of the app. */
export const TEST_APP_STACK = 'PacedJobsTest';

/** The fixture jobs: one writing its own DynamoDB table (and reading an API key), one deleting S3 objects, and one
 * calling a fake non-AWS API that answers 429 past its quota (the fixture's fake downstream). */
export const RECORD_WRITER = 'record-writer';
export const OBJECT_SWEEPER = 'object-sweeper';
export const QUOTA_CALLER = 'quota-caller';

/**
 * Synthesizes the test app unless its assembly is newer than everything it is built from: the app's own folder (its
 * cdk.json among it) and what this repository's synth is built from (the engine's sources: the construct and the
 * handlers it bundles; package-lock.json).
 * @throws AssemblyError when the synth fails
 */
export function ensureTestApp(log: (line: string) => void): StackArtifact {
  const assemblyDir = join(TEST_APP, TEST_APP_ASSEMBLY);
  const found = assemblyStacks(assemblyDir).find((s) => s.stackName === TEST_APP_STACK);
  const newestInput = Math.max(newestReferenceInputMtime(ROOT), newestAppSourceMtime(TEST_APP));
  const synth = !found || newestInput > statSync(found.templateFile).mtimeMs;
  return ensureAppStack({
    cwd: TEST_APP,
    assemblyDir: TEST_APP_ASSEMBLY,
    stack: TEST_APP_STACK,
    log,
    synth,
    referenceApp: false,
  });
}

/** The test app's synthesized template (globalSetup wrote it). */
export const testAppTemplate = (): string => join(TEST_APP, TEST_APP_ASSEMBLY, `${TEST_APP_STACK}.template.json`);

/** A LocalSession on the test app's synthesized stack (globalSetup made it): no synth, whatever the options say. */
export function openTestAppSession(
  options: Omit<SessionOptions, 'cwd' | 'assemblyDir' | 'stack' | 'env'>,
): Promise<LocalSession> {
  return LocalSession.open({
    ...options,
    cwd: TEST_APP,
    assemblyDir: TEST_APP_ASSEMBLY,
    stack: TEST_APP_STACK,
    synth: false,
  });
}

/**
 * The test app's synthesized stack (globalSetup made it), for a test that deploys it on a LocalStack of its own.
 * @throws StackChoiceError when the assembly has no such stack
 */
export const testAppStack = (): StackArtifact =>
  chooseStack(join(TEST_APP, TEST_APP_ASSEMBLY), { stack: TEST_APP_STACK });
