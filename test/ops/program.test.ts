import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { OpsClients } from '../../ops/clients';
import { DEFAULT_ENDPOINTS_FILE, defaultSource, type OpsCommandHook, runOps } from '../../ops/program';
import type { ResourceSource } from '../../ops/resources';
import { type OpsFixture, startOpsFixture, TARGET } from './fixture';
import { captureIo as capture } from './captureIo';

describe('Function: runOps', () => {
  it('asks which stack when none of --stack, --env and --local is given', async () => {
    const io = capture();

    const code = await runOps(['status', '--json'], { io });

    expect(code).toBe(2);
    const message =
      "say which stack: --stack <name> for a deployed stack, --env <name> for one of this repository's environments (PacedJobs-<name>), " +
      'or --local for the one `npm start -- --serve` runs';
    expect(io.err).toEqual([`error: ${message}`]);
    expect(io.out.map((o) => JSON.parse(o))).toEqual([
      { ok: false, error: { name: 'UsageError', message, exitCode: 2 } },
    ]);
  });

  it('reads a deployed stack named by --stack, and refuses it together with --env or --local', async () => {
    expect(defaultSource({ stack: 'TeamStack', endpoints: DEFAULT_ENDPOINTS_FILE }).description).toBe(
      'stack TeamStack',
    );
    for (const other of [['--env', 'prod'], ['--local']]) {
      const io = capture();
      await expect(runOps(['status', '--stack', 'TeamStack', ...other], { io })).resolves.toBe(2);
      expect(io.err[0]).toBe(
        `error: option '--stack <name>' cannot be used with option '${other[0] === '--env' ? '--env <env>' : '--local'}'\n`,
      );
    }
  });

  it('refuses --env together with --local', async () => {
    const io = capture();

    const code = await runOps(['status', '--env', 'prod', '--local'], { io });

    expect(code).toBe(2);
    expect(io.err[0]).toBe("error: option '--env <env>' cannot be used with option '--local'\n");
    expect(io.out).toEqual([]);
  });

  it('prints help on stdout and exits 0', async () => {
    const io = capture();

    const code = await runOps(['--help'], { io });

    expect(code).toBe(0);
    expect(io.out.join('')).toContain('Usage: ops [options] [command]');
  });

  it('has no console of its own: `ops console` is a usage error without the command cli/ops.ts adds', async () => {
    const io = capture();

    const code = await runOps(['console', '--local'], { io });

    expect(code).toBe(2);
    expect(io.err[0]).toBe("error: unknown command 'console'\n");
  });

  it('runs an added command on the stack it loads, prints its result, and lists it before preflight', async () => {
    const io = capture();
    const source = {
      description: 'stub',
      load: async () => ({ stackName: 'Stub', source: 'local' }),
    } as unknown as ResourceSource;
    const destroyed: boolean[] = [];
    const added: OpsCommandHook = ({ program, execute }) => {
      const cmd = program.command('hello').description('an added command');
      cmd.action(
        execute(cmd, async (ctx) => ({
          result: { stack: ctx.resources.stackName },
          text: `hello ${ctx.resources.stackName}`,
          exitCode: 3,
        })),
      );
    };
    const deps = {
      io,
      source: () => source,
      clients: () => ({ destroy: () => destroyed.push(true) }) as unknown as OpsClients,
      commands: [added],
    };

    await expect(runOps(['hello', '--local', '--json'], deps)).resolves.toBe(3);
    await expect(runOps(['--help'], { ...deps, io })).resolves.toBe(0);

    expect(JSON.parse(io.out[0])).toEqual({ stack: 'Stub' });
    expect(destroyed).toEqual([true]);
    const commands = [...io.out[1].matchAll(/^ {2}([a-z][a-z-]*)/gm)].map((m) => m[1]);
    expect(commands.slice(-3)).toEqual(['hello', 'preflight', 'help']);
  });
});

// The real entry point, as `npm run ops` runs it: a separate process whose stdin is a pipe, not a terminal.
describe('Script: cli/ops.ts', () => {
  let f: OpsFixture;
  const root = join(__dirname, '..', '..');
  // Asynchronous: the servers the child talks to run in this process and must keep answering while it runs.
  const cli = (args: string[]) =>
    new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [
          join(root, 'node_modules/tsx/dist/cli.mjs'),
          join(root, 'cli/ops.ts'),
          ...args,
          '--local',
          '--endpoints',
          f.endpointsFile,
        ],
        // Without the SDK's opt-out variable: the CLI itself keeps the SDK's Node-version notice off operators' screens.
        {
          cwd: root,
          encoding: 'utf8',
          timeout: 30_000,
          env: Object.fromEntries(
            Object.entries(process.env).filter(([k]) => k !== 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'),
          ),
        },
        (error, stdout, stderr) => resolve({ status: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      );
      // stdin is a pipe closed at once: no terminal, nobody to answer a prompt.
      child.stdin?.end();
    });

  beforeAll(async () => {
    f = await startOpsFixture(['alpha']);
    f.jobs.alpha.mapping.start();
    f.jobs.alpha.admissionMapping.start();
  });
  afterAll(async () => {
    await f.stop();
  });

  it('prints exactly one JSON document on stdout with --json', async () => {
    const run = await cli(['status', '--json']);

    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: true, command: 'status', jobs: [{ job: 'alpha' }] });
    expect(run.stderr).not.toContain('NodeVersionSupportWarning');
  });

  it('refuses a change without --yes when stdin is not a TTY, and changes nothing', async () => {
    const run = await cli(['pause']);

    expect(run.status).toBe(1);
    expect(run.stderr).toBe(
      `error: refusing to pause alpha (3 changes) on ${TARGET} without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview\n`,
    );
    expect(run.stdout).toBe('');
    expect(f.scheduler.list()[0].state).toBe('ENABLED');
    expect(f.jobs.alpha.admissionMapping.state).toBe('Enabled');
    expect(f.jobs.alpha.mapping.state).toBe('Enabled');
  });
});
