// Runs once before the suites: the tests that run the local stack (npm start, the ops end-to-end test, chaos) execute
// the bundled assets in cdk.out, so it must exist and be no older than the sources. Synthesizing here, once, also keeps
// two suites from racing to synthesize the same assembly.
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { ensureStack, findStack, newestSourceMtime } from '../../local/assembly';

export default function globalSetup(): void {
  const cwd = join(__dirname, '..', '..');
  const found = findStack(join(cwd, 'cdk.out'), 'dev');
  if (found && newestSourceMtime(cwd) <= statSync(found.templateFile).mtimeMs) return;
  ensureStack({ env: 'dev', assemblyDir: 'cdk.out', cwd, log: (line) => process.stderr.write(`${line}\n`), synth: true });
}
