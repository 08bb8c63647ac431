// Operator CLI entry point (`npm run ops -- <command> [--stack <name> | --env <env> | --local] [--json]`); see ops/program.ts.
import { runOps } from './program';

// The SDK warns on every command that its releases after January 2027 need Node 22; an operator cannot act on that
// per command (the README says which Node to use), so the CLI turns the notice off unless the caller set it.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

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
