// Operator CLI: where output goes and how a change is confirmed. Commands print through this, so tests can capture
// stdout and stderr and answer prompts, and `--json` keeps stdout to one document.
import { createInterface } from 'node:readline/promises';
import { setTimeout as delay } from 'node:timers/promises';
import Table from 'cli-table3';
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

export interface ConfirmOptions {
  /** What will happen, as a phrase: `pause 3 jobs`. */
  action: string;
  /** --yes */
  yes: boolean;
}

/**
 * Asks before a change. Without a terminal nobody can answer, and a script that forgot --yes must not change
 * production, so it refuses rather than proceeding.
 * @throws ConfirmationError when declined, or when there is no terminal and no --yes.
 */
export async function confirm(io: OpsIo, options: ConfirmOptions): Promise<void> {
  if (options.yes) return;
  if (!io.interactive) {
    throw new ConfirmationError(
      `refusing to ${options.action} without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview`,
      options.action,
    );
  }
  const answer = await io.ask(`${options.action}? [y/N] `);
  if (!/^y(es)?$/i.test(answer.trim())) throw new ConfirmationError(`not confirmed: did not ${options.action}; nothing was changed`, options.action);
}

export type Cell = string | number | boolean | null | undefined;

/** A plain table (no colours: the output is often piped or pasted into an incident channel). */
export function renderTable(head: string[], rows: Cell[][]): string {
  const table = new Table({ head, style: { head: [], border: [] } });
  for (const row of rows) table.push(row.map((c) => (c === undefined || c === null ? '-' : c)));
  return table.toString();
}
