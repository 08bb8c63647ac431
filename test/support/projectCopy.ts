// Test helper: a throwaway copy of the project, to run tools that change it (the new-job scaffold) and the project's
// own commands (tsc, jest, cdk synth, npm start) in it, leaving the real work tree alone.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

/** The project this helper belongs to. */
export const PROJECT_ROOT = resolve(__dirname, '..', '..');

export interface CommandResult {
  /** Exit code; null when a signal (or the timeout) ended it. */
  status: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  durationMs: number;
}

export interface RunOptions {
  /** Kill the command (and what it started) after this long. @default 120000 */
  timeoutMs?: number;
  /** Added to the test process's environment. */
  env?: NodeJS.ProcessEnv;
}

export interface ProjectCopy {
  /** Absolute path of the copy. */
  readonly dir: string;
  /** The copied files, relative to the copy. */
  readonly files: readonly string[];
  /** Runs a command with the copy as its working directory. Never rejects on a failed command: the result says. */
  run(command: string, args: readonly string[], options?: RunOptions): Promise<CommandResult>;
  /** Stops any command still running in it (after a test timed out), then deletes the copy; node_modules is unlinked only. */
  remove(): void;
}

/** Folders never copied: dependencies are linked instead, and build output is regenerated in the copy. */
const SKIPPED = [/^node_modules(\/|$)/, /^cdk\.out(\.[^/]*)?(\/|$)/, /^\.local(\/|$)/];

/**
 * The project's files as the work tree has them: tracked files and new files git does not ignore (a file someone is
 * adding belongs to the project too), minus deleted ones and the build folders.
 */
export function projectFiles(from: string = PROJECT_ROOT): string[] {
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: from,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return [...new Set(listed.split('\0'))]
    .filter((f) => f.length > 0 && !SKIPPED.some((re) => re.test(f)))
    .filter((f) => existsSync(join(from, f)) && statSync(join(from, f)).isFile())
    .sort();
}

/**
 * Copies the project into a new folder under the OS temp dir and symlinks its node_modules (copying it would take
 * minutes; nothing under test writes there). The copy has no cdk.out: commands that need one synthesize it.
 */
export function copyProject(options: { from?: string; prefix?: string } = {}): ProjectCopy {
  const from = options.from ?? PROJECT_ROOT;
  const dir = mkdtempSync(join(tmpdir(), options.prefix ?? 'paced-jobs-copy-'));
  const files = projectFiles(from);
  for (const file of files) {
    const target = join(dir, file);
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(join(from, file), target);
  }
  symlinkSync(join(from, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const running = new Set<number>();
  return {
    dir,
    files,
    run: (command, args, runOptions = {}) => runIn(dir, command, args, { ...runOptions, running }),
    remove: () => {
      for (const pid of running) killGroup(pid);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Kills a process group this helper started; one that has ended already is ignored. */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/**
 * Starts a command in its own process group, so a timeout stops it and everything it started (npx, jest workers), and
 * hands back the child (to signal a long-running one, e.g. Ctrl-C to a served stack) with its result to come.
 * `running` tracks the groups still running, for whoever must stop them early. `baseEnv` replaces the test process's
 * environment under `env` (a new user's shell, without the test's AWS settings).
 */
export function spawnIn(
  cwd: string,
  command: string,
  args: readonly string[],
  options: RunOptions & { running?: Set<number>; baseEnv?: NodeJS.ProcessEnv } = {},
): { child: ChildProcess; done: Promise<CommandResult> } {
  const timeoutMs = options.timeoutMs ?? 120_000;
  const started = Date.now();
  const child = spawn(command, [...args], {
    cwd,
    env: { ...(options.baseEnv ?? process.env), ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk));
  const pid = child.pid;
  if (pid !== undefined) options.running?.add(pid);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(pid);
  }, timeoutMs);
  const finished = () => {
    clearTimeout(timer);
    if (pid !== undefined) options.running?.delete(pid);
  };
  const done = new Promise<CommandResult>((resolvePromise, reject) => {
    child.on('error', (error) => {
      finished();
      reject(error);
    });
    child.on('close', (status, signal) => {
      finished();
      resolvePromise({
        status,
        signal,
        timedOut,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: Buffer.concat(stderr).toString('utf8'),
        durationMs: Date.now() - started,
      });
    });
  });
  return { child, done };
}

/** Runs a command in its own process group (spawnIn) to its end; never rejects on a failed command: the result says. */
export function runIn(
  cwd: string,
  command: string,
  args: readonly string[],
  options: RunOptions & { running?: Set<number> } = {},
): Promise<CommandResult> {
  return spawnIn(cwd, command, args, options).done;
}

/** A command's result as one readable block, for a failed expectation's message. */
export function describeResult(what: string, result: CommandResult): string {
  const tail = (text: string) => (text.length > 6000 ? `...${text.slice(-6000)}` : text);
  const ended = result.timedOut
    ? 'timed out'
    : result.signal
      ? `was killed by ${result.signal}`
      : `exited ${result.status}`;
  return `${what} ${ended} after ${result.durationMs} ms\n--- stdout\n${tail(result.stdout)}\n--- stderr\n${tail(result.stderr)}`;
}

/** Fails (with the command's output in the message) unless it exited 0; jest's diff of a status alone says nothing. */
export function assertSucceeded(what: string, result: CommandResult): void {
  if (result.status !== 0 || result.timedOut) throw new Error(describeResult(what, result));
}
