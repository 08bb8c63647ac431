import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Delegates } from '../../cli/delegates';
import { packageVersion, runPacedJobs } from '../../cli/paced-jobs';

/** Delegates that record their calls and answer with the exit code `codes` gives their name. */
function recording(codes: Partial<Record<keyof Delegates, number>> = {}) {
  const calls: { delegate: keyof Delegates; argv: string[]; cwd: string }[] = [];
  const make = (delegate: keyof Delegates) => async (argv: string[], cwd: string) => {
    calls.push({ delegate, argv, cwd });
    return codes[delegate] ?? 0;
  };
  const delegates: Delegates = {
    start: make('start'),
    ops: make('ops'),
    newJob: make('newJob'),
    chaos: make('chaos'),
    bench: make('bench'),
  };
  return { calls, delegates };
}

function capture() {
  const io = { text: '', out: (t: string) => void (io.text += t), err: (t: string) => void (io.text += t) };
  return io;
}

describe('Function: runPacedJobs', () => {
  it.each([
    ['start', 'start', ['--json', '--count', 'usage-report=30']],
    ['ops', 'ops', ['status', '--stack', 'TeamStack', '--json']],
    ['new-job', 'newJob', ['export-expiry', '--dry-run']],
    ['chaos', 'chaos', ['--job', 'usage-report', '--ops', '40', '--seed', '5']],
    ['bench', 'bench', ['--e2e', '--json']],
  ] as const)(
    'hands `%s` its arguments unparsed, in the app folder, and exits with its code',
    async (name, delegate, args) => {
      const { calls, delegates } = recording({ [delegate]: 3 });
      const io = capture();
      await expect(runPacedJobs([name, ...args], { cwd: '/apps/team', io, delegates })).resolves.toBe(3);
      expect(calls).toEqual([{ delegate, argv: [...args], cwd: '/apps/team' }]);
      expect(io.text).toBe('');
    },
  );

  it("leaves each subcommand's --help to its tool", async () => {
    const { calls, delegates } = recording();
    for (const name of ['start', 'ops', 'new-job', 'chaos', 'bench'])
      await runPacedJobs([name, '--help'], { cwd: '/app', io: capture(), delegates });
    expect(calls.map((c) => [c.delegate, c.argv])).toEqual([
      ['start', ['--help']],
      ['ops', ['--help']],
      ['newJob', ['--help']],
      ['chaos', ['--help']],
      ['bench', ['--help']],
    ]);
  });

  it('lists the five subcommands in its own --help, running none', async () => {
    const { calls, delegates } = recording();
    const io = capture();
    await expect(runPacedJobs(['--help'], { io, delegates })).resolves.toBe(0);
    expect(calls).toEqual([]);
    expect(io.text).toMatch(/^Usage: paced-jobs \[options\] \[command\]/);
    expect([...io.text.matchAll(/^ {2}([a-z-]+) \[args\.\.\.\]/gm)].map((m) => m[1])).toEqual([
      'start',
      'ops',
      'new-job',
      'chaos',
      'bench',
    ]);
  });

  it('exits 2 naming an unknown subcommand, and 2 with usage when none is given', async () => {
    const { calls, delegates } = recording();
    const io = capture();
    await expect(runPacedJobs(['deploy'], { io, delegates })).resolves.toBe(2);
    expect(io.text).toMatch(/^error: unknown command 'deploy'\n/);
    const none = capture();
    await expect(runPacedJobs([], { io: none, delegates })).resolves.toBe(2);
    expect(none.text).toMatch(/^Usage: paced-jobs \[options\] \[command\]/);
    expect(calls).toEqual([]);
  });

  it("prints the package's version", async () => {
    const io = capture();
    await expect(runPacedJobs(['--version'], { io, delegates: recording().delegates })).resolves.toBe(0);
    expect(io.text).toBe(`${packageVersion()}\n`);
    expect(packageVersion()).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe('Function: packageVersion', () => {
  it('is the version of the nearest package.json named paced-jobs, above any other', () => {
    const root = mkdtempSync(join(tmpdir(), 'paced-jobs-version-'));
    try {
      writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'paced-jobs', version: '1.2.3' }));
      mkdirSync(join(root, 'dist', 'cli'), { recursive: true });
      writeFileSync(join(root, 'dist', 'package.json'), JSON.stringify({ name: 'something-else', version: '9.9.9' }));
      expect(packageVersion(join(root, 'dist', 'cli'))).toBe('1.2.3');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
