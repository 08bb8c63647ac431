// `ops console` through the CLI's own program, against the operator CLI's small local stack (test/ops/fixture.ts): the
// console's data is the ops commands' (status, the schedule, the mappings, the deployed settings), its pause and resume
// are `ops pause`/`ops resume`, and against a deployed environment its changes are off unless --allow-changes.
import { dataPoints } from '../../console/charts';
import type { ChartSpec } from '../../console/chartSpec';
import type { ConsoleServer } from '../../console/server';
import type { ConsoleOverview } from '../../console/source';
import type { MetricSample } from '../../local/metricsTap';
import { runOpsCli } from '../../cli/ops';
import { processIo, type OpsIo } from '../../ops/io';
import type { OpsDependencies } from '../../ops/program';
import { LocalEndpointsSource, type ResourceSource } from '../../ops/resources';
import { type OpsFixture, startOpsFixture } from '../ops/fixture';

interface Session {
  server: ConsoleServer;
  get(path: string): Promise<{ status: number; body: Record<string, unknown> }>;
  post(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }>;
  stop(): Promise<{ code: number; stdout: string; stderr: string }>;
}

describe('Command: ops console', () => {
  let f: OpsFixture;
  const samples: MetricSample[] = [];

  beforeAll(async () => {
    f = await startOpsFixture(['alpha', 'beta'], { running: true });
  });
  afterAll(async () => {
    await f.stop();
  });

  /** Runs `ops console <args>` until the test stops it, and talks to it as the page would (its token, its origin). */
  async function open(
    args: string[],
    deps: Pick<OpsDependencies, 'source'> = {},
    clock: () => Date = () => new Date(),
  ): Promise<Session> {
    let stdout = '';
    let stderr = '';
    const io: OpsIo = {
      stdout: (t) => (stdout += `${t}\n`),
      stderr: (t) => (stderr += `${t}\n`),
      interactive: false,
      ask: async () => '',
      now: clock,
      sleep: (ms) => processIo().sleep(ms),
    };
    let stop!: () => void;
    const stopped = new Promise<void>((r) => (stop = r));
    let listening!: (server: ConsoleServer) => void;
    const started = new Promise<ConsoleServer>((r) => (listening = r));
    const done = runOpsCli(['console', ...args, '--json'], {
      io,
      ...deps,
      mappingWait: { timeoutMs: 10_000, pollMs: 50 },
      console: {
        stop: () => stopped,
        onListening: listening,
        samples: (job) => samples.filter((s) => s.dimensions.job === job),
      },
    });
    const server = await Promise.race([
      started,
      done.then((code) => Promise.reject(new Error(`ops console ended with ${code}: ${stdout}${stderr}`))),
    ]);
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(new URL(path, server.url), {
        method,
        headers: {
          'X-Console-Token': server.token,
          ...(body === undefined ? {} : { 'Content-Type': 'application/json', Origin: server.url.replace(/\/$/, '') }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    return {
      server,
      get: (path) => call('GET', path),
      post: (path, body) => call('POST', path, body),
      async stop() {
        stop();
        const code = await done;
        return { code, stdout, stderr };
      },
    };
  }

  it('serves every job as the ops commands see it, with changes on against the local stack, until stopped', async () => {
    const now = Date.now();
    samples.push(
      {
        namespace: 'PacedJobs',
        metricName: 'Applied',
        dimensions: { service: 'alpha', job: 'alpha' },
        timestamp: now - 30_000,
        value: 4,
      },
      {
        namespace: 'PacedJobs',
        metricName: 'Deferred',
        dimensions: { service: 'alpha', job: 'alpha' },
        timestamp: now - 20_000,
        value: 1,
      },
    );
    const c = await open(['--local', '--endpoints', f.endpointsFile]);

    const config = await c.get('/api/config');
    const overview = (await c.get('/api/overview')).body as unknown as ConsoleOverview;
    const charts = await c.get('/api/charts?job=alpha&minutes=5');

    expect(config.body).toMatchObject({
      description: 'stack PacedJobs-test (local)',
      jobs: ['alpha', 'beta'],
      changesAllowed: true,
    });
    expect(overview.jobs.map((j) => j.job)).toEqual(['alpha', 'beta']);
    const alpha = overview.jobs[0];
    // The schedule as deployed (02:00 Berlin), its next fire and the business date it processes (the day before).
    expect(alpha.schedule).toMatchObject({
      name: 'alpha-schedule',
      state: 'ENABLED',
      expression: 'cron(0 2 * * ? *)',
      timeZone: 'Europe/Berlin',
    });
    const next = new Date(alpha.schedule.nextFire!);
    expect(next.getTime()).toBeGreaterThan(now);
    expect(next.getTime() - now).toBeLessThanOrEqual(25 * 3_600_000);
    const berlinDay = new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Berlin' }).format(next);
    expect(alpha.schedule.businessDate).toBe(
      new Date(Date.parse(`${berlinDay}T00:00:00Z`) - 86_400_000).toISOString().slice(0, 10),
    );
    expect(alpha).toMatchObject({
      mappings: { consumer: 'Enabled', admission: 'Enabled' },
      paused: false,
      queue: { visible: 0, inFlight: 0, delayed: 0 },
      batches: [],
    });
    // The deployed JOB_SETTINGS: the allowance after headroom, and the SLO.
    expect(alpha.limits).toEqual({ allowance: { starts: 60, intervalMs: 60_000 }, sloMinutes: 120 });
    const specs = (charts.body as { charts: ChartSpec[] }).charts;
    expect(specs.map((s) => s.id)).toEqual(['alpha:starts', 'alpha:outcomes', 'alpha:age']);
    expect(dataPoints(specs[0])).toBeGreaterThan(0);
    expect(specs[0].lines.find((l) => l.kind === 'limit')?.values[0]).toBe(60);

    const paused = await c.post('/api/pause', { job: 'alpha' });
    expect(paused.status).toBe(200);
    expect((paused.body.steps as { kind: string; applied: boolean }[]).map((s) => [s.kind, s.applied])).toEqual([
      ['schedule', true],
      ['admission-mapping', true],
      ['event-source-mapping', true],
    ]);
    expect(f.jobs.alpha.mapping.state).toBe('Disabled');
    expect(f.jobs.beta.mapping.state).toBe('Enabled');
    expect(((await c.get('/api/overview')).body as unknown as ConsoleOverview).jobs[0]).toMatchObject({
      paused: true,
      mappings: { consumer: 'Disabled', admission: 'Disabled' },
      schedule: { state: 'DISABLED' },
    });
    const resumed = await c.post('/api/resume', { job: 'alpha' });
    expect(resumed.status).toBe(200);
    expect(f.jobs.alpha.mapping.state).toBe('Enabled');

    const caughtUp = await c.post('/api/catch-up', { job: 'beta', from: '2026-05-01', to: '2026-05-02' });
    expect(caughtUp.status).toBe(200);
    expect(
      (caughtUp.body.runs as { businessDate: string; status: string }[]).map((r) => [r.businessDate, r.status]),
    ).toEqual([
      ['2026-05-01', 'published'],
      ['2026-05-02', 'published'],
    ]);
    expect(
      f.producerCalls.slice(-2).map((call) => [call.functionName, call.event.businessDate, call.event.backfill]),
    ).toEqual([
      ['beta-producer', '2026-05-01', true],
      ['beta-producer', '2026-05-02', true],
    ]);
    const peek = await c.post('/api/dlq-peek', { job: 'beta' });
    expect(peek.body).toMatchObject({
      command: 'dlq peek',
      warning: expect.stringContaining('receive'),
      jobs: [{ job: 'beta', messages: [] }],
    });
    const op = await c.get('/api/operation?id=op-none&job=alpha');
    expect(op.body).toMatchObject({ command: 'op', operationId: 'op-none', found: false });

    const out = await c.stop();
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({
      ok: true,
      command: 'console',
      stackName: 'PacedJobs-test',
      source: 'local',
      url: c.server.url,
      changesAllowed: true,
    });
    // The token only on the terminal (stderr), never in the JSON document.
    expect(out.stderr).toContain(`open ${c.server.tokenUrl}`);
    expect(out.stdout).not.toContain(c.server.token);
    await expect(fetch(c.server.url)).rejects.toThrow();
  }, 60_000);

  it('against a deployed environment: changes are off (refused, the page told why) unless --allow-changes', async () => {
    // The fixture's stack, described as a deployed environment's would be.
    const deployed: ResourceSource = {
      description: 'stack PacedJobs-test',
      load: async () => ({
        ...(await new LocalEndpointsSource(f.endpointsFile).load()),
        source: 'cloudformation',
        environment: 'test',
      }),
    };
    const off = await open(['--env', 'test'], { source: () => deployed });
    const config = await off.get('/api/config');
    const refused = await off.post('/api/pause', { job: 'alpha' });
    const peek = await off.post('/api/dlq-peek', { job: 'alpha' });
    const offOut = await off.stop();

    expect(config.body).toMatchObject({
      changesAllowed: false,
      changesNote:
        'PacedJobs-test is a deployed environment: restart with --allow-changes to pause, resume, redrive or catch up from the page',
    });
    expect(refused.status).toBe(403);
    expect(f.jobs.alpha.mapping.state).toBe('Enabled');
    expect(peek.status).toBe(200);
    expect(offOut.stderr).toContain(
      'changes are off (pause, resume, redrive, catch-up): start with --allow-changes to turn them on',
    );
    expect(JSON.parse(offOut.stdout)).toMatchObject({ source: 'cloudformation', changesAllowed: false });

    const on = await open(['--env', 'test', '--allow-changes'], { source: () => deployed });
    const paused = await on.post('/api/pause', { job: 'alpha' });
    expect(paused.status).toBe(200);
    expect(f.jobs.alpha.mapping.state).toBe('Disabled');
    expect((await on.post('/api/resume', { job: 'alpha' })).status).toBe(200);
    expect((await on.stop()).code).toBe(0);
  }, 60_000);

  it('against a protected environment: changes need --confirm <env> as well as --allow-changes, and then run confirmed by it', async () => {
    const guarded: ResourceSource = {
      description: 'stack PacedJobs-test',
      load: async () => ({
        ...(await new LocalEndpointsSource(f.endpointsFile).load()),
        source: 'cloudformation',
        environment: 'test',
        protected: true,
      }),
    };
    const where = 'stack PacedJobs-test, account 000000000000, region us-east-1';
    const refusedWith = async (args: string[]) => {
      let stdout = '';
      const io: OpsIo = {
        stdout: (t) => (stdout += t),
        stderr: () => undefined,
        interactive: false,
        ask: async () => '',
        now: () => new Date(),
        sleep: async () => undefined,
      };
      const code = await runOpsCli(['console', '--env', 'test', ...args, '--json'], {
        io,
        source: () => guarded,
        console: { stop: () => Promise.resolve() },
      });
      return { code, error: (JSON.parse(stdout) as { error: { message: string } }).error.message };
    };

    expect(await refusedWith(['--allow-changes'])).toEqual({
      code: 1,
      error: `refusing to allow changes from the console on ${where}: environment test is protected; pass --confirm test as well as --allow-changes`,
    });
    expect(await refusedWith(['--allow-changes', '--confirm', 'prod'])).toEqual({
      code: 1,
      error: '--confirm prod does not match environment test: the console did not start',
    });

    const on = await open(['--env', 'test', '--allow-changes', '--confirm', 'test'], { source: () => guarded });
    expect((await on.post('/api/pause', { job: 'alpha' })).status).toBe(200);
    expect(f.jobs.alpha.mapping.state).toBe('Disabled');
    expect((await on.post('/api/resume', { job: 'alpha' })).status).toBe(200);
    const out = await on.stop();
    expect(out.stderr).toContain(`pause alpha (3 changes) on ${where} (confirmed by --yes --confirm test)\n`);
  }, 60_000);

  it("refuses a catch-up of a date after the job's latest business date with a 400 that names it, invoking nothing", async () => {
    const c = await open(['--local', '--endpoints', f.endpointsFile], {}, () => new Date('2026-12-05T01:10:00Z'));
    const calls = f.producerCalls.length;

    const refused = await c.post('/api/catch-up', { job: 'alpha', from: '2027-12-04', to: '2027-12-04' });
    expect((await c.stop()).code).toBe(0);

    expect(refused).toEqual({
      status: 400,
      body: {
        ok: false,
        error: {
          name: 'UsageError',
          message:
            'business date 2027-12-04 is in the future: the latest for alpha now is 2026-12-04 (Europe/Berlin, offset -1)',
        },
      },
    });
    expect(f.producerCalls).toHaveLength(calls);
  }, 60_000);

  it('refuses a port that is not one', async () => {
    let stdout = '';
    const io: OpsIo = {
      stdout: (t) => (stdout += t),
      stderr: () => undefined,
      interactive: false,
      ask: async () => '',
      now: () => new Date(),
      sleep: async () => undefined,
    };

    const code = await runOpsCli(['console', '--local', '--endpoints', f.endpointsFile, '--port', '70000', '--json'], {
      io,
      console: { stop: () => Promise.resolve() },
    });

    expect(code).toBe(2);
    expect(JSON.parse(stdout)).toEqual({
      ok: false,
      error: { name: 'UsageError', message: '--port must be a whole number from 1 to 65535, got "70000"', exitCode: 2 },
    });
  });
});
