import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildProgram, htmlReportFile, lastRunFile, main } from '../../chaos/cli';
import { defaultHorizonSeconds, defaultTimeoutSeconds, type ChaosOptions, type ChaosResult } from '../../chaos/run';

async function parse(
  args: string[],
  cwd?: string,
): Promise<{ options?: ChaosOptions | undefined; flags?: { json: boolean; report?: string }; error?: string }> {
  const out: { options?: ChaosOptions | undefined; flags?: { json: boolean; report?: string }; error?: string } = {};
  const program = buildProgram(async (options, flags) => {
    out.options = options;
    out.flags = flags;
    return 0;
  }, cwd)
    .exitOverride()
    .configureOutput({ writeErr: (s) => (out.error = s.trim()), writeOut: () => undefined });
  try {
    await program.parseAsync(['node', 'chaos', ...args]);
  } catch {
    // exitOverride throws after writeErr captured the message.
  }
  return out;
}

describe('Function: buildProgram', () => {
  it('applies the documented defaults', async () => {
    const { options, flags } = await parse(['--ops', '50', '--seed', '7']);
    expect(flags).toEqual({ json: false, report: undefined });
    expect(options).toEqual({
      ops: 50,
      seed: 7,
      cwd: process.cwd(),
      job: undefined,
      stack: undefined,
      ratePerMinute: 1200,
      rejectRate: 0.003,
      consumerTimeoutSeconds: 20,
      duplicateRate: 0.05,
      producerReruns: 1,
      killRate: 0.03,
      downstreamErrorRate: 0.03,
      slowRate: 0.05,
      hangAfterEffectRate: 0.02,
      dropBeforeEffectRate: 0.01,
      stormShare: 0.1,
      dynamoFaultRate: 0.02,
      dynamoStallRate: 0.002,
      s3FaultRate: 0.05,
      poisonRate: 0.01,
      producerKillRate: 0.2,
      producerDeadLetters: 1,
      duplicateSchedules: 1,
      producerTimeoutSeconds: 30,
      admissionHorizonSeconds: undefined,
      admissionVisibilitySeconds: undefined,
      admissionMaxReceiveCount: undefined,
      timeoutSeconds: undefined,
    });
  });

  it('passes --json, --report and the fault rates through', async () => {
    const { options, flags } = await parse([
      '--ops',
      '5',
      '--seed',
      '0',
      '--json',
      '--report',
      'out.md',
      '--kill-rate',
      '0',
      '--storm-share',
      '0.5',
      '--downstream-error-rate',
      '0.2',
      '--s3-fault-rate',
      '0.5',
    ]);
    expect(flags).toEqual({ json: true, report: 'out.md' });
    expect(options).toMatchObject({ killRate: 0, stormShare: 0.5, downstreamErrorRate: 0.2, s3FaultRate: 0.5 });
  });

  it('runs on the app in the folder it is given (where the command runs), and passes --stack and --cdk-out through', async () => {
    expect(
      (await parse(['--ops', '5', '--seed', '0', '--stack', 'BillingStack'], '/apps/billing')).options,
    ).toMatchObject({ cwd: '/apps/billing', stack: 'BillingStack' });
    expect((await parse(['--ops', '5', '--seed', '0'])).options?.assemblyDir).toBeUndefined();
    expect((await parse(['--ops', '5', '--seed', '0', '--cdk-out', 'out/assembly'])).options).toMatchObject({
      assemblyDir: 'out/assembly',
    });
  });

  it('passes --job through as named: the run checks it against the stack', async () => {
    expect((await parse(['--ops', '5', '--seed', '0', '--job', 'some-job'])).options).toMatchObject({
      job: 'some-job',
      ops: 5,
    });
  });

  it('passes the producer faults and the admission timing through', async () => {
    const { options } = await parse([
      '--ops',
      '5',
      '--seed',
      '0',
      '--producer-kill-rate',
      '0.5',
      '--producer-dead-letters',
      '2',
      '--duplicate-schedules',
      '0',
      '--producer-timeout',
      '25',
      '--admission-horizon',
      '3',
      '--admission-visibility',
      '28',
      '--admission-max-receives',
      '2',
    ]);
    expect(options).toMatchObject({
      producerKillRate: 0.5,
      producerDeadLetters: 2,
      duplicateSchedules: 0,
      producerTimeoutSeconds: 25,
      admissionHorizonSeconds: 3,
      admissionVisibilitySeconds: 28,
      admissionMaxReceiveCount: 2,
    });
  });

  it('rejects a producer timeout under which the producer would publish nothing', async () => {
    const { error, options } = await parse(['--ops', '5', '--seed', '1', '--producer-timeout', '20']);
    expect(options).toBeUndefined();
    expect(error).toBe(
      "error: option '--producer-timeout <s>' argument '20' is invalid. --producer-timeout must be an integer >= 25, got \"20\"",
    );
  });

  it('rejects a rate outside [0, 1] with a message naming the flag', async () => {
    const { error, options } = await parse(['--ops', '5', '--seed', '1', '--kill-rate', '2']);
    expect(options).toBeUndefined();
    expect(error).toBe(
      "error: option '--kill-rate <p>' argument '2' is invalid. --kill-rate must be a probability between 0 and 1, got \"2\"",
    );
  });

  it('scales the default settle timeout with the operations (900 s, or 4x the paced minimum) and the step receives', () => {
    const stack = { visibilitySeconds: 90, maxReceiveCount: 5 };
    expect(defaultTimeoutSeconds(300, 1200, stack)).toBe(900 + 7 * 90);
    expect(defaultTimeoutSeconds(5000, 1200, stack)).toBe(1000 + 7 * 90);
    expect(defaultTimeoutSeconds(5000, 600, stack)).toBe(2000 + 7 * 90);
    expect(defaultTimeoutSeconds(300, 1200, { visibilitySeconds: 28, maxReceiveCount: 2 })).toBe(900 + 4 * 28);
  });

  it('sizes the default admission horizon to a quarter of the paced minimum, 2 to 300 s', () => {
    expect(defaultHorizonSeconds(300, 1200)).toBe(4);
    expect(defaultHorizonSeconds(5000, 1200)).toBe(63);
    expect(defaultHorizonSeconds(60, 3000)).toBe(2);
    expect(defaultHorizonSeconds(100_000, 600)).toBe(300);
  });

  it('writes the default report file when --report names none', async () => {
    expect((await parse(['--ops', '5', '--seed', '0', '--report'])).flags).toEqual({
      json: false,
      report: 'chaos-report.md',
    });
  });

  it('asks for no run with --report alone: the summary of the last run', async () => {
    const out = await parse(['--report', 'last.md']);
    expect(out.error).toBeUndefined();
    expect(out.flags).toEqual({ json: false, report: 'last.md' });
    expect(out.options).toBeUndefined();
    expect('options' in out).toBe(true);
  });

  it('requires --ops and --seed to run', async () => {
    expect((await parse(['--seed', '1'])).error).toBe(
      "error: --ops is required to run (--ops N --seed S); --report alone writes the last run's summary",
    );
    expect((await parse(['--ops', '3'])).error).toBe(
      "error: --seed is required to run (--ops N --seed S); --report alone writes the last run's summary",
    );
    expect((await parse(['--ops', '0', '--seed', '1'])).error).toBe(
      "error: option '--ops <n>' argument '0' is invalid. --ops must be an integer >= 1, got \"0\"",
    );
  });
});

describe('Function: main, with --report alone', () => {
  const last: ChaosResult = {
    ok: true,
    job: 'some-job',
    ops: 2,
    seed: 1,
    settled: true,
    durationMs: 1000,
    faultsInjected: {},
    invariants: {
      effectsEqualUniqueOperations: { ok: true, effects: 2, uniqueOperations: 2, repeatedOperations: [] },
      nothingLost: { ok: true, missing: 0, batches: [] },
      rateRespected: { ok: true, maxStartsInAnyWindow: 2, limit: 10 },
      onlyTerminalFailuresInDlq: { ok: true, reasons: [] },
      ledgerExact: { ok: true, batchesExact: 1, inexactBatches: [], ledgerCompleted: 2, completedOperations: 2 },
    },
  };
  let app: string;
  beforeEach(() => {
    app = mkdtempSync(join(tmpdir(), 'chaos-cli-'));
    jest.spyOn(process.stdout, 'write').mockReturnValue(true);
    jest.spyOn(process.stderr, 'write').mockReturnValue(true);
  });
  afterEach(() => {
    jest.restoreAllMocks();
    rmSync(app, { recursive: true, force: true });
  });

  it("reads the last run and writes its reports in the app's folder, not beside the tool (dist/ in the package)", async () => {
    mkdirSync(join(app, '.local', 'chaos'), { recursive: true });
    writeFileSync(lastRunFile(app), JSON.stringify(last));
    await expect(main(['node', 'chaos', '--report', 'summary.md'], app)).resolves.toBe(0);
    expect(lastRunFile(app)).toBe(join(app, '.local', 'chaos', 'last-run.json'));
    expect(readFileSync(join(app, 'summary.md'), 'utf8')).toContain('some-job');
    expect(htmlReportFile(app)).toBe(join(app, '.local', 'chaos-report.html'));
    expect(existsSync(htmlReportFile(app))).toBe(true);
  });

  it("names the app's record file when there is no last run", async () => {
    await expect(main(['node', 'chaos', '--report'], app)).rejects.toThrow(
      `no chaos run on record (${join(app, '.local', 'chaos', 'last-run.json')})`,
    );
  });
});
