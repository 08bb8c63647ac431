// Operator CLI entry point (`npm run ops -- <command> [--env <env> | --local] [--json]`); see ops/program.ts.
import { runOps } from './program';

runOps(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    // runOps reports every error itself; reaching here is a bug in the CLI, shown with its stack.
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    process.exitCode = 1;
  },
);
