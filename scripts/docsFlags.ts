// The guides' flag tables, generated from the commands' own commander programs (what `--help` prints), so a guide
// cannot list a flag the command lacks or miss one it has. A guide marks where a command's table goes:
//   <!-- flags: ops status -->
//   <!-- /flags -->
// (the command's words as typed after the tool), and `npm run docs:generate` fills the table in between. Every command
// and subcommand has exactly one marker across README.md and docs/*.md; test/docs/flags.test.ts checks both.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Argument, Command, Option } from 'commander';
import { fairnessProgram } from '../bench/fairness';
import { fixtureUnits } from '../bench/counts';
import { buildProgram as benchProgram } from '../bench/index';
import { pacingCommand } from '../bench/pacing';
import { buildProgram as chaosProgram } from '../chaos/cli';
import { buildProgram as pacedJobsProgram } from '../cli/paced-jobs';
import { consoleCommand } from '../console/opsCommand';
import { buildProgram as startProgram } from '../local/cli';
import type { OpsIo } from '../ops/io';
import { buildOpsProgram } from '../ops/program';
import { buildProgram as newJobProgram } from '../scaffold/cli';
import { fillMarkers, guideFiles, type MarkerPair, markerPairs, ROOT } from './markdown';

/** The marker's name: `<!-- flags: WORDS -->` ... `<!-- /flags -->`. */
export const MARKER = 'flags';

/** A command a guide documents: the words a marker names it by, and its program. */
export interface DocumentedCommand {
  words: string;
  /** Other words for the same command (a group's default subcommand: `ops redrive` is `ops redrive start`). */
  aliases: string[];
  program: Command;
}

const quiet = { out: () => undefined, err: () => undefined };
const never = async () => 0;
/** Nothing runs: the programs are built for their flags only. */
const opsIo: OpsIo = {
  stdout: () => undefined,
  stderr: () => undefined,
  interactive: false,
  ask: async () => '',
  now: () => new Date(0),
  sleep: async () => undefined,
};

/**
 * The commands and subcommands of `program` under `prefix`: each one with an action, a group only when it has options
 * of its own; a group's default subcommand is named by the group's words too.
 */
function commandsOf(prefix: string, program: Command): DocumentedCommand[] {
  const found: DocumentedCommand[] = [];
  for (const sub of program.commands) {
    const words = `${prefix} ${sub.name()}`;
    if (sub.commands.length === 0) {
      found.push({ words, aliases: [], program: sub });
      continue;
    }
    if (sub.options.length > 0) found.push({ words, aliases: [], program: sub });
    const defaultName = (sub as unknown as { _defaultCommandName?: string })._defaultCommandName;
    for (const child of commandsOf(words, sub)) {
      const isDefault = child.words === `${words} ${defaultName}`;
      found.push(isDefault ? { ...child, words, aliases: [child.words] } : child);
    }
  }
  return found;
}

/**
 * Every command the guides document, built as each tool builds it in this repository (`npm start`, the benches: with
 * the reference jobs' fixture units) or in a team's app (`paced-jobs start`, `paced-jobs bench`: an app's own fixtures
 * add their unit flags, so the table shows the flags every app has).
 */
export function documentedCommands(root = ROOT): DocumentedCommand[] {
  // A folder with no app in it: the flags of `paced-jobs start` any app has.
  const noApp = join(root, '.no-app');
  const ops = buildOpsProgram(opsIo, () => async () => undefined, { commands: [consoleCommand()] });
  const one = (words: string, program: Command, aliases: string[] = []): DocumentedCommand => ({
    words,
    aliases,
    program,
  });
  return [
    one('npm start', startProgram(never, root)),
    one('paced-jobs', pacedJobsProgram(quiet, async () => undefined)),
    one('paced-jobs start', startProgram(never, noApp, { name: 'paced-jobs start' })),
    // The ops program's own flags (--stack, --env, --local, ...), which its subcommands take too.
    one('paced-jobs ops', ops, ['ops', 'npm run ops']),
    one('paced-jobs new-job', newJobProgram(quiet)),
    one('paced-jobs chaos', chaosProgram(never, root)),
    one('paced-jobs bench', benchProgram()),
    ...commandsOf('ops', ops),
    one('chaos', chaosProgram(never, root), ['npm run chaos']),
    one('new-job', newJobProgram(quiet), ['npm run new-job']),
    one('npm run bench', benchProgram(fixtureUnits(root))),
    one('npm run bench:pacing', pacingCommand()),
    one('npm run bench:fairness', fairnessProgram()),
  ];
}

/** A table cell: one line, pipes escaped. */
const cell = (text: string) => text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');

/** A default as --help shows it (commander's Help.optionDescription): a value's JSON, or the flag's own words. */
function defaultOf(option: Option): string {
  if (option.mandatory) return 'required';
  const shown = option.required || option.optional || (option.isBoolean() && typeof option.defaultValue === 'boolean');
  if (option.defaultValue === undefined || !shown) return '';
  // A default that is where the command runs (new-job's --root) is that, not this machine's path.
  if (option.defaultValue === process.cwd()) return 'the current folder';
  return `\`${option.defaultValueDescription || JSON.stringify(option.defaultValue)}\``;
}

/** An argument as the usage line shows it: `<name>` when required, `[name]` when not, `...` when it repeats. */
const argumentTerm = (a: Argument): string =>
  a.required ? `<${a.name()}${a.variadic ? '...' : ''}>` : `[${a.name()}${a.variadic ? '...' : ''}]`;

const argumentDefault = (argument: Argument): string =>
  argument.required ? 'required' : argument.defaultValue === undefined ? '' : `\`${JSON.stringify(argument.defaultValue)}\``;

/** The table of a command's arguments and flags (but --help, which every command has), as its --help lists them. */
export function flagsTable(program: Command): string {
  const choices = (option: Option) =>
    option.argChoices ? ` (choices: ${option.argChoices.map((c) => `\`${c}\``).join(', ')})` : '';
  const rows = [
    ...program.registeredArguments.map(
      (a) => `| \`${argumentTerm(a)}\` | ${cell(a.description)} | ${argumentDefault(a)} |`,
    ),
    ...program.options
      .filter((o) => !o.hidden)
      .map((o) => `| \`${o.flags}\` | ${cell(o.description + choices(o))} | ${defaultOf(o)} |`),
  ];
  if (rows.length === 0) return 'No flags besides `--help`.';
  return ['| flag | meaning | default |', '| --- | --- | --- |', ...rows].join('\n');
}

/** The commands by every word that names one. */
export function commandsByWords(commands: readonly DocumentedCommand[]): Map<string, DocumentedCommand> {
  return new Map(commands.flatMap((c) => [c.words, ...c.aliases].map((w) => [w, c] as const)));
}

/** `text` (the guide `file`) with each flags marker's table regenerated. @throws Error naming a marker's unknown command */
export function withFlagTables(text: string, file: string, byWords: ReadonlyMap<string, DocumentedCommand>): string {
  return fillMarkers(
    text,
    MARKER,
    (pair: MarkerPair) => {
      const command = byWords.get(pair.words);
      if (!command) throw new Error(`${file}:${pair.line}: ${unknownCommand(pair.words, byWords)}`);
      return flagsTable(command.program);
    },
    file,
  );
}

const unknownCommand = (words: string, byWords: ReadonlyMap<string, DocumentedCommand>) =>
  `<!-- flags: ${words} --> names no command (the commands: ${[...new Set([...byWords.values()].map((c) => c.words))].join(', ')})`;

/** A guide's marker: where it is and what it names. */
export interface FlagMarker {
  file: string;
  line: number;
  words: string;
}

/** Every flags marker of the guides (README.md and docs/*.md), in order. */
export function flagMarkers(root = ROOT, files = guideFiles(root)): FlagMarker[] {
  return files.flatMap((file) =>
    markerPairs(readFileSync(join(root, file), 'utf8'), MARKER, file).map((p) => ({ file, line: p.line, words: p.words })),
  );
}

/**
 * What is wrong with the guides' markers: a marker naming no command, a command with no marker or with more than one
 * (each named, with where its markers are).
 */
export function markerProblems(markers: readonly FlagMarker[], commands: readonly DocumentedCommand[]): string[] {
  const byWords = commandsByWords(commands);
  const problems: string[] = [];
  const placed = new Map<DocumentedCommand, FlagMarker[]>();
  for (const marker of markers) {
    const command = byWords.get(marker.words);
    if (!command) problems.push(`${marker.file}:${marker.line}: ${unknownCommand(marker.words, byWords)}`);
    else placed.set(command, [...(placed.get(command) ?? []), marker]);
  }
  for (const command of commands) {
    const at = placed.get(command) ?? [];
    if (at.length === 0)
      problems.push(`\`${command.words}\` has no <!-- flags: ${command.words} --> marker in README.md or docs/*.md`);
    if (at.length > 1)
      problems.push(
        `\`${command.words}\` has ${at.length} flags markers (one only): ${at.map((m) => `${m.file}:${m.line}`).join(', ')}`,
      );
  }
  return problems;
}
