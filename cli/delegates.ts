// What each `paced-jobs` subcommand runs: the tools this repository runs as `npm start`, `npm run ops`, `npm run
// new-job`, `npm run chaos` and `npm run bench`, unchanged, with the command's arguments, in the current folder.
import { spawn } from 'node:child_process';
import { extname, join } from 'node:path';
import type { CliIo } from '../scaffold/cli';
import { registerTypeScript, typeScriptNodeArgs } from './typescript';

/** One subcommand: its arguments (after its name) and the folder it runs in; resolves to the exit code. */
export type Delegate = (argv: string[], cwd: string) => Promise<number>;

export interface Delegates {
  start: Delegate;
  ops: Delegate;
  newJob: Delegate;
  chaos: Delegate;
  bench: Delegate;
}

/** A tool's entry module, beside this one in the same tree (the repository's .ts, or the package's dist/*.js). */
export const toolEntry = (tool: 'local/cli' | 'chaos/cli' | 'bench/index'): string =>
  join(__dirname, '..', `${tool}${extname(__filename)}`);

/**
 * Runs a tool's entry module as the main module of a child process in `cwd`, its output on this terminal, and resolves
 * to its exit code. Ctrl-C reaches the child from the terminal; this process waits for the child to finish its own
 * shutdown rather than dying first.
 */
export function runEntry(entry: string, argv: string[], cwd: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, ...typeScriptNodeArgs(), entry, ...argv], {
      cwd,
      stdio: 'inherit',
    });
    const wait = () => undefined;
    process.on('SIGINT', wait);
    process.on('SIGTERM', wait);
    const done = () => {
      process.off('SIGINT', wait);
      process.off('SIGTERM', wait);
    };
    child.once('error', (error) => {
      done();
      reject(error);
    });
    child.once('exit', (code, signal) => {
      done();
      resolve(code ?? (signal === 'SIGINT' ? 130 : 1));
    });
  });
}

const processIo: CliIo = { out: (text) => process.stdout.write(text), err: (text) => process.stderr.write(text) };

export const defaultDelegates: Delegates = {
  // In this process: the local runtime's start command, in the app's folder (it loads a team's TypeScript fixtures
  // through the app's own tsx).
  start: (argv, cwd) => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return (require('./start') as typeof import('./start')).runStart(argv, { cwd });
  },
  // In this process: ops reads --local's endpoints file from the current folder, and preflight loads job code.
  // Each tool is loaded when its subcommand runs: `start` loads neither ops nor the scaffold.
  ops: (argv) => {
    registerTypeScript();
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return (require('./ops') as typeof import('./ops')).runOpsCli(argv);
  },
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  newJob: (argv, cwd) =>
    (require('../scaffold/cli') as typeof import('../scaffold/cli')).run(['--root', cwd, ...argv], processIo),
  chaos: (argv, cwd) => runEntry(toolEntry('chaos/cli'), argv, cwd),
  bench: (argv, cwd) => runEntry(toolEntry('bench/index'), argv, cwd),
};
