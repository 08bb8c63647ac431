// Entry point of `npm run new-job -- <name>` here and `paced-jobs new-job <name>` in a team's app: writes a complete,
// runnable job (code, local fixture, tests; here also its config in every environment, in an app the PacedJobs lines
// to add, printed) for the user to edit. The rules and the writing live in scaffold/newJob.ts.
import { resolve } from 'node:path';
import { Command, CommanderError } from 'commander';
import {
  ScaffoldError,
  planAppJob,
  planNewJob,
  projectKind,
  readAppState,
  readProjectState,
  writePlan,
  KEBAB_CASE,
  MAX_NAME_LENGTH,
  MIN_NAME_LENGTH,
  type Plan,
} from './newJob';

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

const processIo: CliIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

/** The command line: writes the job its action is given, or calls `onFailed` (the docs' flag tables read it too). */
export function buildProgram(io: CliIo, onFailed: () => void = () => undefined): Command {
  return new Command()
    .name('new-job')
    .description(
      `Writes a new job that discovers its items through a sparse index and applies each with a conditional write.\n` +
        `In a CDK app that depends on paced-jobs: jobs/<name>/ (code, local fixture, tests), and prints the lines to add\n` +
        `to its PacedJobs. In the paced-jobs repository: lambda/jobs/<name>/, its tests, and its config in every environment.\n` +
        `<name>: kebab-case (${KEBAB_CASE}), ${MIN_NAME_LENGTH} to ${MAX_NAME_LENGTH} characters, not reserved, not taken.`,
    )
    .argument('<name>', 'the job name, e.g. invoice-sync')
    .option('--root <dir>', 'the app (or this repository) to add the job to', process.cwd())
    .option('--dry-run', 'check the name and print what would be written, writing nothing')
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .action((name: string, options: { root: string; dryRun?: boolean }) => {
      const root = resolve(options.root);
      try {
        const plan =
          projectKind(root) === 'app' ? planAppJob(name, readAppState(root)) : planNewJob(name, readProjectState(root));
        if (!options.dryRun) writePlan(root, plan);
        io.out(summary(plan, Boolean(options.dryRun)));
      } catch (error) {
        if (!(error instanceof ScaffoldError)) throw error;
        io.err(`new-job: ${error.message}\n`);
        onFailed();
      }
    });
}

/** Runs the command; resolves to the exit code (0 written, 1 nothing written, 2 bad usage). */
export async function run(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  let code = 0;
  const program = buildProgram(io, () => {
    code = 1;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (error) {
    // Commander has already printed its usage message (a missing name, an unknown option, --help).
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
    throw error;
  }
  return code;
}

/** What the command prints once the plan is written (or, with --dry-run, would be). */
export function summary(plan: Plan, dryRun: boolean): string {
  const { name } = plan.names;
  const wrote = [`${dryRun ? 'Would write' : 'Wrote'} job "${name}":`, ...plan.files.map((f) => `  ${f.path}`)];
  if (plan.kind === 'app') {
    return [
      ...wrote,
      '',
      "Add it to your stack's PacedJobs (the table and the job's entry; edit both to fit):",
      '',
      ...(plan.snippet ?? '').split('\n').map((line) => (line ? `  ${line}` : line)),
      '',
      `Next: edit jobs/${name}/index.ts where it says EDIT, then run`,
      `  npx jest jobs/${name}        (its tests: jest with ts-jest, as cdk init sets up)`,
      '  npx cdk synth',
      '  npx paced-jobs start',
      '',
    ].join('\n');
  }
  return [
    ...wrote,
    `  ${plan.edits[0].path} (appResources.tables.${plan.names.tableKey} and jobs.${name}, in ${plan.environments.join(', ')})`,
    '',
    `Next: edit lambda/jobs/${name}/index.ts where it says EDIT, then run`,
    `  npx jest lambda/jobs/${name}`,
    `  npx cdk synth -c env=dev`,
    `  npm start`,
    '',
  ].join('\n');
}

if (require.main === module) {
  run(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`new-job: ${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
