// Operator CLI: where output goes and how a change is confirmed. Commands print through this, so tests can capture
// stdout and stderr and answer prompts, and `--json` keeps stdout to one document.
import { createInterface } from 'node:readline/promises';
import { setTimeout as delay } from 'node:timers/promises';
import Table from 'cli-table3';
import { escapeUnprintable } from '../lambda/core/message';
import { ConfirmationError } from './errors';

export interface OpsIo {
  stdout(text: string): void;
  /** Progress, warnings and prompts: never on stdout, which may carry the JSON document. */
  stderr(text: string): void;
  /** Whether there is a terminal to ask on. */
  readonly interactive: boolean;
  ask(question: string): Promise<string>;
  now(): Date;
  sleep(ms: number): Promise<void>;
}

/**
 * `io` with everything it prints or asks escaped (escapeUnprintable), line breaks kept: commands print data (keys,
 * batch IDs, reasons, bodies) in tables, progress lines, errors and the JSON document, and a bidi override or a line
 * separator in it must not make the terminal show something else. In the JSON document the escapes are JSON's own.
 */
export function escapingIo(io: OpsIo): OpsIo {
  const clean = (text: string) => escapeUnprintable(text, '\n');
  return {
    stdout: (text) => io.stdout(clean(text)),
    stderr: (text) => io.stderr(clean(text)),
    get interactive() {
      return io.interactive;
    },
    ask: (question) => io.ask(clean(question)),
    now: () => io.now(),
    sleep: (ms) => io.sleep(ms),
  };
}

export function processIo(): OpsIo {
  return {
    stdout: (text) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`),
    stderr: (text) => process.stderr.write(text.endsWith('\n') ? text : `${text}\n`),
    interactive: Boolean(process.stdin.isTTY),
    async ask(question) {
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      try {
        return await rl.question(question);
      } finally {
        rl.close();
      }
    },
    now: () => new Date(),
    sleep: (ms) => delay(ms),
  };
}

/** Where a change lands: what its prompt, its --yes line and its refusals name. */
export interface ChangeTarget {
  stackName: string;
  /** The `--env` name; absent for the local stack and for a stack named by `--stack`. */
  environment?: string;
  /** The local stack (`--local`). @default true when `environment` is absent, false otherwise */
  local?: boolean;
  /** Absent when unknown (a local endpoints file without it). */
  account?: string;
  region?: string;
  /** The environment's config marks it protected (prod): a change needs `--confirm <env>` or the name typed. */
  protected: boolean;
}

export interface ConfirmOptions {
  /** What will happen, as a phrase: `pause 3 jobs`. */
  action: string;
  /** --yes */
  yes: boolean;
  /** --confirm <env>: must name the target's environment; required with --yes when it is protected. */
  confirm?: string;
  target: ChangeTarget;
}

/** `stack PacedJobs-prod, account 123456789012, region eu-west-1` (the local stack says so). */
export function describeTarget(target: ChangeTarget): string {
  const local = target.local ?? target.environment === undefined;
  const stack = local ? `local stack ${target.stackName}` : `stack ${target.stackName}`;
  return `${stack}, account ${target.account ?? 'unknown'}, region ${target.region ?? 'unknown'}`;
}

/**
 * Asks before a change, naming the stack, account and region it lands on. Without a terminal nobody can answer, and
 * a script that forgot --yes must not change production, so it refuses rather than proceeding. A protected
 * environment also needs its own name, as `--confirm <env>` or typed at the prompt: a `--yes` in a command meant for
 * another environment, or recalled from the shell's history, cannot change it.
 * @throws ConfirmationError when declined, when there is no terminal and no --yes, when --confirm names another
 * environment, or when a protected environment's name is missing.
 */
export async function confirm(io: OpsIo, options: ConfirmOptions): Promise<void> {
  const { target } = options;
  const what = `${options.action} on ${describeTarget(target)}`;
  const env = target.environment;
  if (options.confirm !== undefined && options.confirm !== env) {
    const local = target.local ?? env === undefined;
    const actual =
      env !== undefined
        ? `environment ${env}`
        : local
          ? 'the local stack, which has no environment name'
          : `stack ${target.stackName}, which has no environment name`;
    throw new ConfirmationError(
      `--confirm ${options.confirm} does not match ${actual}: did not ${what}; nothing was changed`,
      options.action,
    );
  }
  const named = !target.protected || options.confirm === env;
  if (options.yes) {
    if (!named) {
      throw new ConfirmationError(
        `refusing to ${what}: environment ${env} is protected; pass --confirm ${env} as well as --yes`,
        options.action,
      );
    }
    io.stderr(`${what} (confirmed by --yes${target.protected ? ` --confirm ${env}` : ''})`);
    return;
  }
  if (!io.interactive) {
    const pass = named ? '--yes' : `--yes --confirm ${env}`;
    throw new ConfirmationError(
      `refusing to ${what} without confirmation: stdin is not a TTY; pass ${pass} to confirm, or --dry-run to preview`,
      options.action,
    );
  }
  if (!named) {
    const answer = await io.ask(`${what}? Environment ${env} is protected: type its name to confirm: `);
    if (answer.trim() !== env)
      throw new ConfirmationError(`not confirmed: did not ${what}; nothing was changed`, options.action);
    return;
  }
  const answer = await io.ask(`${what}? [y/N] `);
  if (!/^y(es)?$/i.test(answer.trim()))
    throw new ConfirmationError(`not confirmed: did not ${what}; nothing was changed`, options.action);
}

export type Cell = string | number | boolean | null | undefined;

/**
 * A plain table (no colours: the output is often piped or pasted into an incident channel). Every cell is data, so
 * its control, bidi and invisible characters are escaped, a line break among them: it would start a row of its own.
 */
export function renderTable(head: string[], rows: Cell[][]): string {
  const table = new Table({ head, style: { head: [], border: [] } });
  for (const row of rows)
    table.push(
      row.map((c) => (c === undefined || c === null ? '-' : typeof c === 'string' ? escapeUnprintable(c) : c)),
    );
  return table.toString();
}
