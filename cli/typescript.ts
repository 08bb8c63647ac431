// The package's command loads a team's TypeScript (a job's entry for `ops preflight`, its `local.ts` fixture for the
// local tools) as this repository's tools do under tsx: through require. Compiled (dist/*.js, plain node) it registers
// tsx's CommonJS hook in its own process and in the tools it starts; from source it already runs under tsx.
import { extname } from 'node:path';

/** True when this module runs as the package's compiled JavaScript rather than from the repository's TypeScript. */
export const RUNS_COMPILED = extname(__filename) === '.js';

let registered = false;

/** Lets require() load `.ts` files in this process (tsx's CommonJS hook), once; a no-op where something already does. */
export function registerTypeScript(): void {
  if (registered || !RUNS_COMPILED || require.extensions['.ts'] !== undefined) return;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  (require('tsx/cjs/api') as { register(): () => void }).register();
  registered = true;
}

/** The node options a child process of the command needs to load `.ts` files as this one does. */
export function typeScriptNodeArgs(): string[] {
  // From source, the process runs under tsx and its execArgv (which the child inherits) carries tsx's loader.
  return RUNS_COMPILED ? ['--require', require.resolve('tsx/cjs')] : [];
}
