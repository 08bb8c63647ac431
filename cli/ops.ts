// The operator CLI as `npm run ops` and `paced-jobs ops` run it: ops/program.ts with the `ops console` command the
// console adds (console/opsCommand.ts). Composed here, above both, so ops/ imports nothing of the console.
import { consoleCommand, type ConsoleCommandOptions } from '../console/opsCommand';
import { runOps, type OpsDependencies } from '../ops/program';

export interface OpsCliDependencies extends OpsDependencies {
  /** `ops console`'s stop, listening hook and samples. @default Ctrl-C, none, CloudWatch's */
  console?: ConsoleCommandOptions;
}

/** runOps with the console: resolves to the exit code; never calls process.exit. */
export function runOpsCli(argv: string[], deps: OpsCliDependencies = {}): Promise<number> {
  const { console: consoleOptions, ...opsDeps } = deps;
  return runOps(argv, { ...opsDeps, commands: [...(opsDeps.commands ?? []), consoleCommand(consoleOptions)] });
}

/** Runs the CLI on this process's arguments, its exit code the process's. */
export function main(): void {
  // The SDK warns on every command that its releases after January 2027 need Node 22; an operator cannot act on that
  // per command (docs/getting-started.md says which Node to use), so the CLI turns the notice off unless the caller set it.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  runOpsCli(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      // runOps reports every error itself; reaching here is a bug in the CLI, shown with its stack.
      process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}

if (require.main === module) main();
