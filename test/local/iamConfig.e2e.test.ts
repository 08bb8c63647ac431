// The IAM a job's `uses` asks for is the IAM it runs with locally: in a throwaway copy of the project, the engine's
// test app's (test/fixtures/app) object-sweeper declares only `get` for its apply on the bucket it deletes from, and
// `npm start --app test/fixtures/app` fails naming the S3 delete it was denied; with `delete` restored the same run
// passes with nothing denied. The restored app is the test app's own, byte for byte, so that run uses the test app's
// cloud assembly (jest's globalSetup synthesized it from the same sources) rather than synthesize it a second time.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import {
  copyProject,
  describeResult,
  PROJECT_ROOT,
  type CommandResult,
  type ProjectCopy,
} from '../support/projectCopy';
import { OBJECT_SWEEPER, QUOTA_CALLER, RECORD_WRITER, TEST_APP, TEST_APP_ASSEMBLY } from '../support/testApp';
import { waitFor } from '../../local/waitFor';
import type { JobReport, RunReport } from '../../local/report';

const JOB = OBJECT_SWEEPER;
const OBJECTS = 3;
const WRITES = ['s3:PutObject', 's3:DeleteObject', 's3:DeleteObjects', 's3:AbortMultipartUpload'];
/** The job's use of the bucket it deletes from, as the test app's bin/app.ts declares it. */
const DELETE = "objects: { bucket: objects, discover: 'list', apply: 'delete' }";
const GET = "objects: { bucket: objects, discover: 'list', apply: 'get' }";

/** The part of npm start's --json report this test reads. */
type Report = Pick<RunReport, 'ok' | 'settled' | 'checks'> & {
  jobs: Record<string, Pick<JobReport, 'discovered' | 'completed' | 'dlq' | 'denials'>>;
};

describe('npm start with a job whose uses declare get on a bucket it deletes from', () => {
  /** The test app's folder, relative to the project (and so to its copy). */
  const APP = relative(PROJECT_ROOT, TEST_APP);
  let copy: ProjectCopy;
  let config: string;

  beforeAll(() => {
    copy = copyProject({ prefix: 'paced-jobs-iam-config-' });
    config = join(copy.dir, APP, 'bin', 'app.ts');
  });

  afterAll(() => copy?.remove());

  const setAccess = (from: string, to: string) => {
    const source = readFileSync(config, 'utf8');
    const at = source.indexOf(from);
    if (at < 0 || source.indexOf(from, at + 1) >= 0)
      throw new Error(`the test app's bin/app.ts has not exactly one "${from}"`);
    writeFileSync(config, source.replace(from, to));
  };

  /** A run stopped by the test (Ctrl-C), until it has ended; killed with what it started if the test failed first. */
  let running: ChildProcess | undefined;
  afterEach(() => {
    if (running?.pid !== undefined && running.exitCode === null && running.signalCode === null)
      process.kill(-running.pid, 'SIGKILL');
  });

  /**
   * One demo cycle of the job alone (the other jobs seed nothing): synthesized from the copy's config, or run on the
   * cloud assembly `cdkOut` (already synthesized from a config identical to the copy's). With `stopWhen`, stopped with
   * Ctrl-C once it holds (the run then reports what it saw, as not settled), else when the run has settled.
   */
  const start = async (options: {
    cdkOut?: string;
    stopWhen?: () => boolean;
  }): Promise<{ result: CommandResult; report: Report }> => {
    const others = [RECORD_WRITER, QUOTA_CALLER].flatMap((name) => ['--count', `${name}=0`]);
    const assembly = options.cdkOut ? ['--cdk-out', options.cdkOut] : ['--synth'];
    const args = [
      '--app',
      APP,
      ...assembly,
      '--json',
      '--count',
      `${JOB}=${OBJECTS}`,
      ...others,
      '--timeout',
      '180',
      '--async-duplicate-rate',
      '0',
      '--prewarm',
      '1',
    ];
    // Node itself loads tsx, so the Ctrl-C reaches the CLI directly; a process group of its own, for the cleanup.
    const started = Date.now();
    const child = spawn(process.execPath, ['--import', 'tsx', 'cli/start.ts', ...args], {
      cwd: copy.dir,
      env: { ...process.env, FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    running = child;
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c) => (stdout += c));
    child.stderr!.on('data', (c) => (stderr += c));
    let ended = false;
    const closed = new Promise<{ status: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('close', (status, signal) => {
        ended = true;
        resolve({ status, signal });
      }),
    );
    if (options.stopWhen) {
      const stopWhen = options.stopWhen;
      // A run that ends first (it failed) is judged as it is.
      await waitFor('the condition to stop the run at', () => ended || stopWhen() || false, {
        timeoutMs: 240_000,
        intervalMs: 100,
      });
      if (!ended) child.kill('SIGINT');
    }
    const { status, signal } = await closed;
    const result: CommandResult = { status, signal, timedOut: false, stdout, stderr, durationMs: Date.now() - started };
    try {
      return { result, report: JSON.parse(result.stdout) as Report };
    } catch {
      throw new Error(`no JSON report on stdout: ${describeResult('npm start in the copy', result)}`);
    }
  };

  /** The copy's IAM log (local/run.ts writes each source's lines to the app's .local/logs), where npm start records each denial. */
  const iamLog = () => {
    const file = join(copy.dir, APP, '.local', 'logs', 'iam.log');
    return existsSync(file) ? readFileSync(file, 'utf8') : '';
  };

  it('fails naming the s3: delete it was denied, and passes once delete is restored', async () => {
    setAccess(DELETE, GET);
    // The denied deletes fail their records, which SQS redelivers only after the queue's visibility timeout (minutes):
    // the run cannot settle, and need not, to be judged on its denials. It is stopped (Ctrl-C) once the first denied
    // delete is logged, and reports what it saw.
    const denied = await start({ stopWhen: () => /DENIED: .*s3:DeleteObject/.test(iamLog()) });
    const job = denied.report.jobs[JOB];
    if (denied.result.status !== 1) process.stderr.write(`${describeResult('npm start (get)', denied.result)}\n`);
    expect(denied.result.status).toBe(1);
    expect(denied.report.ok).toBe(false);
    expect(job.denials.length).toBeGreaterThan(0);
    // One denial per object (each is its own resource), as many as were tried before the stop: every one a delete of a
    // seeded object of the date, by the job's consumer.
    const writes = job.denials.filter((d) => d.action.startsWith('s3:') && WRITES.includes(d.action));
    expect(writes.length).toBeGreaterThan(0);
    for (const write of writes) {
      expect(write).toMatchObject({
        action: 's3:DeleteObject',
        resource: expect.stringMatching(/^arn:aws:s3:::[^/]+\/due\/\d{4}-\d{2}-\d{2}\/object-\d{4}$/),
        role: expect.stringContaining('ObjectSweeperConsumer'),
      });
    }
    // Only the delete the uses left out is denied: the listing `list` grants went through.
    expect(job.denials).toEqual(writes);
    const check = denied.report.checks.find((c) => c.job === JOB && c.name === 'iam-allowed');
    expect(check).toMatchObject({ ok: false });
    for (const write of writes)
      expect(check!.detail).toContain(`s3:DeleteObject on ${write.resource} by ${write.role}`);
    // The other jobs' grants are untouched.
    for (const other of denied.report.checks.filter((c) => c.job !== JOB && c.name === 'iam-allowed'))
      expect(other.ok).toBe(true);
    expect(job.completed).toBe(0);

    setAccess(GET, DELETE);
    expect(readFileSync(config, 'utf8')).toBe(readFileSync(join(TEST_APP, 'bin', 'app.ts'), 'utf8'));
    const restored = await start({ cdkOut: join(TEST_APP, TEST_APP_ASSEMBLY) });
    if (restored.result.status !== 0)
      process.stderr.write(`${describeResult('npm start (delete)', restored.result)}\n`);
    expect({ status: restored.result.status, ok: restored.report.ok, settled: restored.report.settled }).toEqual({
      status: 0,
      ok: true,
      settled: true,
    });
    expect(restored.report.jobs[JOB]).toMatchObject({ discovered: OBJECTS, completed: OBJECTS, dlq: 0, denials: [] });
    expect(restored.report.checks.find((c) => c.job === JOB && c.name === 'iam-allowed')).toMatchObject({ ok: true });
  }, 360_000);
});
