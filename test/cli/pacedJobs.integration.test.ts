// The command's subcommands reach the real tools: each tool prints its own help, and a tool's exit code is the
// command's. The tools that run in a child process (start, chaos, bench) are started as this repository's npm scripts
// start them, from source under tsx.
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');
const pacedJobs = (...args: string[]) =>
  spawnSync(
    process.execPath,
    [join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs'), join(ROOT, 'cli', 'paced-jobs.ts'), ...args],
    {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, FORCE_COLOR: '0' },
    },
  );

describe('Command: paced-jobs', () => {
  it.each([
    ['start', /^Usage: npm start -- \[options\]/],
    ['ops', /^Usage: ops \[options\] \[command\]/],
    ['new-job', /^Usage: new-job \[options\] <name>/],
    ['chaos', /^Usage: chaos \[options\]/],
    ['bench', /^Usage: npm run bench -- \[options\]/],
  ])(
    "`%s --help` prints the tool's own usage and exits 0",
    (name, usage) => {
      const result = pacedJobs(name, '--help');
      expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
      expect(result.stdout).toMatch(usage);
    },
    130_000,
  );

  it("exits with the tool's code and its message when the tool refuses its arguments", () => {
    const result = pacedJobs('start', '--timeout', 'soon');
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/--timeout must be a whole number, got "soon"/);
  }, 130_000);
});
