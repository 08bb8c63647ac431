// Entry point of `npm run new-job -- <name>`: writes a complete, runnable job (code, local fixture, tests, config in
// every environment) for the user to edit. The rules and the writing live in scaffold/newJob.ts.
import { resolve } from 'node:path';
import { Command, CommanderError } from 'commander';
import { ScaffoldError, planNewJob, readProjectState, writePlan, KEBAB_CASE, MAX_NAME_LENGTH, MIN_NAME_LENGTH } from './newJob';

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

const processIo: CliIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

/** Runs the command; resolves to the exit code (0 written, 1 nothing written, 2 bad usage). */
export async function run(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  let code = 0;
  const program = new Command()
    .name('new-job')
    .description(
      `Writes a new job that discovers its items through a sparse index and applies each with a conditional write.\n` +
        `<name>: kebab-case (${KEBAB_CASE}), ${MIN_NAME_LENGTH} to ${MAX_NAME_LENGTH} characters, not reserved, not taken.`,
    )
    .argument('<name>', 'the job name, e.g. invoice-sync')
    .option('--root <dir>', 'the project to add the job to', process.cwd())
    .option('--dry-run', 'check the name and print what would be written, writing nothing')
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .action((name: string, options: { root: string; dryRun?: boolean }) => {
      const root = resolve(options.root);
      try {
        const plan = planNewJob(name, readProjectState(root));
        if (!options.dryRun) writePlan(root, plan);
        const verb = options.dryRun ? 'Would write' : 'Wrote';
        io.out(
          [
            `${verb} job "${name}":`,
            ...plan.files.map((f) => `  ${f.path}`),
            `  ${plan.edits[0].path} (appResources.tables.${plan.names.tableKey} and jobs.${name}, in ${plan.environments.join(', ')})`,
            '',
            `Next: edit lambda/jobs/${name}/index.ts where it says EDIT, then run`,
            `  npx jest test/lambda/jobs/${name}`,
            `  npx cdk synth -c env=dev`,
            `  npm start`,
            '',
          ].join('\n'),
        );
      } catch (error) {
        if (!(error instanceof ScaffoldError)) throw error;
        io.err(`new-job: ${error.message}\n`);
        code = 1;
      }
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
