// Synthesizes the engine's test app when it is stale (testApp.ts ensureTestApp), as a process of its own: globalSetup
// runs it beside the reference app's synth, so that the two `cdk synth` runs (each mostly one core for 30 to 55 s on a
// fresh clone) overlap instead of the test workers waiting for one after the other.
import { ensureTestApp } from './testApp';

try {
  ensureTestApp((line) => process.stderr.write(`${line}\n`));
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
