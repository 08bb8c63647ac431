// Runs once before the suites: the tests that run the local stack (npm start, the ops end-to-end test, chaos) execute
// the bundled assets in cdk.out, so it must exist and be no older than the sources. Synthesizing here, once, also keeps
// two suites from racing to synthesize the same assembly. The same for the engine's test app (test/fixtures/app, see
// testApp.ts), which the whole-stack tests of the engine run instead of the reference app: one synth, into its own
// assembly (cdk.out.test-app), shared by every file.
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { ensureStack, findStack, newestReferenceInputMtime } from '../../local/assembly';
// The test files' environment, here too: the synths below (and their child processes) run as the tests' would, CDK's
// built-in CloudFormation validation off (setupEnv.ts says why), and the workers inherit the same values.
import './setupEnv';

export default async function globalSetup(): Promise<void> {
  const cwd = join(__dirname, '..', '..');
  const log = (line: string) => process.stderr.write(`${line}\n`);
  // The test app synthesizes in a process of its own while this one synthesizes the reference app: on a fresh clone
  // (CI) each takes 30 to 55 s of mostly one core, and no test starts before both are done.
  const testApp = synthTestApp(cwd);
  try {
    const found = findStack(join(cwd, 'cdk.out'), 'dev');
    if (!found || newestReferenceInputMtime(cwd) > statSync(found.templateFile).mtimeMs) {
      ensureStack({ env: 'dev', assemblyDir: 'cdk.out', cwd, log, synth: true });
    }
  } finally {
    await testApp;
  }
}

/** Runs test/support/synthTestApp.ts (the test app's synth, when stale) as a child process. */
function synthTestApp(cwd: string): Promise<void> {
  const child = spawn(process.execPath, [require.resolve('tsx/cli'), join(__dirname, 'synthTestApp.ts')], {
    cwd,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) =>
      code === 0
        ? resolve()
        : reject(new Error(`the test app's synth (test/support/synthTestApp.ts) exited ${signal ?? code}`)),
    );
  });
}
