#!/usr/bin/env node
// `paced-jobs`, the package's command, run in a team's CDK app folder (or in this repository): `start` runs the app's
// jobs on the local runtime, `ops` operates a deployed stack (or the local one), `new-job` writes a job, `chaos` and
// `bench` run the fault-injection harness and the benchmarks on the app's jobs. Each subcommand is the tool this
// repository runs through npm scripts, with its own flags and its own --help (cli/delegates.ts).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { defaultDelegates, type Delegates } from './delegates';

export interface ProgramIo {
  out(text: string): void;
  err(text: string): void;
}

const SUBCOMMANDS: { name: string; delegate: keyof Delegates; description: string }[] = [
  {
    name: 'start',
    delegate: 'start',
    description:
      "synthesize the app (its cdk.json) and run one cycle of every job on the local runtime, IAM enforced, then report; --serve keeps it running (npm start's flags)",
  },
  {
    name: 'ops',
    delegate: 'ops',
    description:
      'operate the jobs of a deployed stack (--stack <name>) or of the local one (--local): status, pause, redrive, preflight, ...',
  },
  {
    name: 'new-job',
    delegate: 'newJob',
    description:
      "write a new job into jobs/<name> (code, local fixture, tests) and print the lines to add to the app's PacedJobs",
  },
  {
    name: 'chaos',
    delegate: 'chaos',
    description: 'fault-injection run of one job on the local runtime; exits 0 iff every invariant holds',
  },
  { name: 'bench', delegate: 'bench', description: "benchmarks of the app's jobs on the local runtime" },
];

/** The package's version, from its package.json (one folder up from cli/ in the repository, two from dist/cli/). */
export function packageVersion(from = __dirname): string {
  for (let dir = from; dir !== dirname(dir); dir = dirname(dir)) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (manifest.name === 'paced-jobs') return manifest.version ?? '0.0.0';
    } catch {
      // no package.json here: look one folder up
    }
  }
  return '0.0.0';
}

/**
 * The command line: its version, and each subcommand handing its arguments, --help included, to `run` unparsed (the
 * docs' flag tables read it too).
 */
export function buildProgram(
  io: ProgramIo,
  run: (delegate: keyof Delegates, args: string[]) => Promise<void>,
): Command {
  const program = new Command('paced-jobs')
    .description('Scheduled, rate-limited, idempotent jobs on AWS serverless: run them locally, operate them, add one.')
    .version(packageVersion(), '-v, --version')
    .enablePositionalOptions()
    .helpCommand(false)
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showHelpAfterError();
  for (const sub of SUBCOMMANDS) {
    program
      .command(sub.name)
      .description(`${sub.description} (\`paced-jobs ${sub.name} --help\`)`)
      .helpOption(false)
      .allowUnknownOption()
      .allowExcessArguments()
      .passThroughOptions()
      .argument('[args...]', 'the arguments of the tool')
      .action((args: string[]) => run(sub.delegate, args));
  }
  return program;
}

/**
 * Runs the command on `argv` (without the node and script entries) in `cwd`; resolves to the exit code. A subcommand's
 * arguments, --help included, go to its tool unparsed.
 */
export async function runPacedJobs(
  argv: readonly string[],
  options: { cwd?: string; io?: ProgramIo; delegates?: Delegates } = {},
): Promise<number> {
  const io = options.io ?? { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) };
  const delegates = options.delegates ?? defaultDelegates;
  const cwd = options.cwd ?? process.cwd();
  let code = 0;
  const program = buildProgram(io, async (delegate, args) => {
    code = await delegates[delegate](args, cwd);
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (error) {
    // Commander has printed its message (usage, --help, --version, an unknown command).
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
    throw error;
  }
  return code;
}

if (require.main === module) {
  // The SDK's notice about Node releases is not the operator's to act on per command (cli/ops.ts does the same).
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  runPacedJobs(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`paced-jobs: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
