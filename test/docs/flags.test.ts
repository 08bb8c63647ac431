// The guides' flag tables are the commands' own: each table between `<!-- flags: WORDS -->` and `<!-- /flags -->` is
// what scripts/docsFlags.ts generates from that command's commander program (what its --help lists), and every
// command and subcommand has exactly one such marker across README.md and docs/*.md.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import {
  commandsByWords,
  type DocumentedCommand,
  documentedCommands,
  flagMarkers,
  flagsTable,
  MARKER,
  markerProblems,
  withFlagTables,
} from '../../scripts/docsFlags';
import { guideFiles, markerPairs, ROOT } from '../../scripts/markdown';

const FIXTURE = join(__dirname, 'fixtures', 'guides');

/** A small program with each kind of flag and an argument. */
const fixtureProgram = () =>
  new Command('run')
    .argument('<job>', 'the job to run')
    .option('--json', 'one JSON document on stdout', false)
    .option('--rate <n>', 'messages per second | at most 500', '10')
    .requiredOption('--date <date>', 'the business date')
    .option('--no-console', 'serve no console')
    .addOption(new Option('--mode <mode>', 'how').choices(['fast', 'slow']).default('fast'))
    .addOption(new Option('--secret <s>', 'hidden').hideHelp());
const fixtureCommands = (): DocumentedCommand[] => [
  { words: 'fixture run', aliases: [], program: fixtureProgram() },
  { words: 'fixture stop', aliases: ['fixture stop now'], program: new Command('stop') },
];

describe('Function: flagsTable', () => {
  it('lists the arguments and the flags --help shows, each with its meaning and its default as --help shows it', () => {
    expect(flagsTable(fixtureProgram())).toBe(
      [
        '| flag | meaning | default |',
        '| --- | --- | --- |',
        '| `<job>` | the job to run | required |',
        '| `--json` | one JSON document on stdout | `false` |',
        '| `--rate <n>` | messages per second \\| at most 500 | `"10"` |',
        '| `--date <date>` | the business date | required |',
        '| `--no-console` | serve no console |  |',
        '| `--mode <mode>` | how (choices: `fast`, `slow`) | `"fast"` |',
      ].join('\n'),
    );
  });

  it('says so for a command without flags', () => {
    expect(flagsTable(new Command('stop'))).toBe('No flags besides `--help`.');
  });
});

describe('Function: withFlagTables (on test/docs/fixtures/guides)', () => {
  const guide = readFileSync(join(FIXTURE, 'docs', 'guide.md'), 'utf8');

  it("fills each marker pair with its command's table", () => {
    const byWords = commandsByWords(fixtureCommands());
    const filled = withFlagTables(guide.replace('fixture run now', 'fixture stop now'), 'docs/guide.md', byWords);
    expect(filled).toContain(`<!-- flags: fixture run -->\n${flagsTable(fixtureProgram())}\n<!-- /flags -->`);
    expect(filled).toContain('<!-- flags: fixture stop now -->\nNo flags besides `--help`.\n<!-- /flags -->');
    expect(filled).not.toContain('a stale table');
    // Filled again, it stays as it is.
    expect(withFlagTables(filled, 'docs/guide.md', byWords)).toBe(filled);
  });

  it('refuses a marker that names no command, naming its file:line and the commands', () => {
    expect(() => withFlagTables(guide, 'docs/guide.md', commandsByWords(fixtureCommands()))).toThrow(
      'docs/guide.md:29: <!-- flags: fixture run now --> names no command (the commands: fixture run, fixture stop)',
    );
  });

  it('refuses a marker without its closing one', () => {
    expect(() => markerPairs('a\n<!-- flags: fixture run -->\nb\n', MARKER, 'x.md')).toThrow(
      'x.md:2: <!-- flags: fixture run --> has no <!-- /flags -->',
    );
  });
});

describe('Function: markerProblems', () => {
  it('names a command without a marker, one with two, and a marker that names no command', () => {
    const markers = [
      { file: 'docs/a.md', line: 3, words: 'fixture run' },
      { file: 'docs/b.md', line: 9, words: 'fixture run' },
      { file: 'docs/b.md', line: 12, words: 'fixture jump' },
    ];
    expect(markerProblems(markers, fixtureCommands())).toEqual([
      'docs/b.md:12: <!-- flags: fixture jump --> names no command (the commands: fixture run, fixture stop)',
      '`fixture run` has 2 flags markers (one only): docs/a.md:3, docs/b.md:9',
      '`fixture stop` has no <!-- flags: fixture stop --> marker in README.md or docs/*.md',
    ]);
  });

  it("counts a group's default subcommand under either name", () => {
    const markers = [
      { file: 'docs/a.md', line: 3, words: 'fixture run' },
      { file: 'docs/a.md', line: 9, words: 'fixture stop now' },
    ];
    expect(markerProblems(markers, fixtureCommands())).toEqual([]);
  });
});

describe('Function: documentedCommands', () => {
  const commands = documentedCommands();
  const words = commands.map((c) => c.words);

  it('holds every tool, every ops subcommand and every paced-jobs subcommand', () => {
    expect(words).toEqual(
      expect.arrayContaining([
        'npm start',
        'paced-jobs',
        'paced-jobs start',
        'paced-jobs ops',
        'paced-jobs new-job',
        'paced-jobs chaos',
        'paced-jobs bench',
        'ops status',
        'ops pause',
        'ops resume',
        'ops redrive',
        'ops redrive status',
        'ops redrive cancel',
        'ops catch-up',
        'ops continue',
        'ops limits list',
        'ops limits set',
        'ops limits clear',
        'ops dlq peek',
        'ops op',
        'ops audit',
        'ops console',
        'ops preflight',
        'chaos',
        'new-job',
        'npm run bench',
        'npm run bench:pacing',
        'npm run bench:fairness',
      ]),
    );
    expect(new Set(words).size).toBe(words.length);
  });

  it('lists in each table exactly the flags its --help lists (but --help itself)', () => {
    const mismatches = commands.flatMap(({ words: w, program }) => {
      const help = program.helpInformation();
      const inHelp = program.options.filter((o) => !o.hidden).map((o) => o.flags);
      const inTable = [...flagsTable(program).matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]);
      const args = program.registeredArguments.length;
      return [
        ...inHelp.filter((f) => !help.includes(f)).map((f) => `${w}: ${f} is not in --help`),
        ...(JSON.stringify(inTable.slice(args)) === JSON.stringify(inHelp)
          ? []
          : [`${w}: table ${inTable} != ${inHelp}`]),
      ];
    });
    expect(mismatches).toEqual([]);
  });

  it("shows a default that is where the command runs as that, not this machine's path", () => {
    const newJob = commands.find((c) => c.words === 'new-job')!;
    expect(flagsTable(newJob.program)).toContain(
      '| `--root <dir>` | the app (or this repository) to add the job to | the current folder |',
    );
  });
});

describe('Files: README.md and docs/*.md', () => {
  const commands = documentedCommands();

  it('hold exactly one flags marker for every command and subcommand', () => {
    expect(markerProblems(flagMarkers(ROOT), commands)).toEqual([]);
  });

  it('hold for each marker the table its command generates (run `npm run docs:generate` after changing a flag)', () => {
    const byWords = commandsByWords(commands);
    const stale = guideFiles(ROOT).flatMap((file) => {
      const text = readFileSync(join(ROOT, file), 'utf8');
      const lines = text.split('\n');
      return markerPairs(text, MARKER, file)
        .filter((pair) => byWords.has(pair.words))
        .filter(
          (pair) => lines.slice(pair.open + 1, pair.close).join('\n') !== flagsTable(byWords.get(pair.words)!.program),
        )
        .map((pair) => `${file}:${pair.line}: the flags table of \`${pair.words}\` is not what its --help lists`);
    });
    expect(stale).toEqual([]);
  });
});
