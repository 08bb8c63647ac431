// The start command's line in a team's app and in this repository, before any run: which environment, which stack,
// which job names --count may take. The runs themselves are in teamApp.e2e.test.ts and cli.test.ts.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildProgram, optionValue } from '../../local/cli';
import type { RunOptions } from '../../local/run';

const ROOT = join(__dirname, '..', '..');

/** The options the command line hands the run, for `args` in the app at `cwd`. */
async function parsed(cwd: string, args: string[]): Promise<RunOptions> {
  let options: RunOptions | undefined;
  const program = buildProgram(
    async (o) => {
      options = o;
      return 0;
    },
    cwd,
    { argv: args },
  )
    .exitOverride()
    .configureOutput({ writeErr: () => undefined });
  await program.parseAsync(args, { from: 'user' });
  return options!;
}

describe('Function: buildProgram', () => {
  let app: string;
  beforeAll(() => {
    app = mkdtempSync(join(tmpdir(), 'team-app-'));
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'team-app' }));
  });
  afterAll(() => rmSync(app, { recursive: true, force: true }));

  it("in a team's app: no environment unless given, --stack passed on, and any job for --count until the stack is known", async () => {
    await expect(parsed(app, ['--stack', 'Reporting', '--count', 'usage-report=30'])).resolves.toMatchObject({
      env: undefined,
      stack: 'Reporting',
      cwd: app,
      counts: { 'usage-report': 30 },
    });
    await expect(parsed(app, ['--env', 'staging'])).resolves.toMatchObject({ env: 'staging', stack: undefined });
  });

  it('in this repository: the dev environment by default, and --count only for a job of lambda/jobs', async () => {
    await expect(parsed(ROOT, [])).resolves.toMatchObject({ env: 'dev', stack: undefined });
    await expect(parsed(ROOT, ['--count', 'usage-report=3'])).rejects.toThrow(
      `--count: no job "usage-report" (lambda/jobs has: `,
    );
  });
});

describe('Function: optionValue', () => {
  it('reads a long option given as two arguments or with =, the last one winning', () => {
    expect(optionValue(['--json', '--stack', 'A'], '--stack')).toBe('A');
    expect(optionValue(['--stack=B'], '--stack')).toBe('B');
    expect(optionValue(['--stack', 'A', '--stack=B'], '--stack')).toBe('B');
    expect(optionValue(['--stacks', 'A', '--stack'], '--stack')).toBeUndefined();
  });
});
