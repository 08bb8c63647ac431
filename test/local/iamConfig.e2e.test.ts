// The IAM a job's config asks for is the IAM it runs with locally: in a throwaway copy of the project, the
// expired-session-cleanup job's apply declares only `query` on the sessions table it deletes from, and `npm start` fails
// naming the DynamoDB write it was denied; with `['query', 'delete']` restored the same run passes with nothing denied.
// The restored config is the project's own, byte for byte, so that run uses the project's cloud assembly (jest's
// globalSetup synthesized it from the same sources) rather than synthesize it a second time.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { copyProject, describeResult, PROJECT_ROOT, type CommandResult, type ProjectCopy } from '../support/projectCopy';
import { waitFor } from '../../local/waitFor';
import type { JobReport, RunReport } from '../../local/report';

const JOB = 'expired-session-cleanup';
const TENANTS = 3;
const WRITES = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:BatchWriteItem'];
/** The job's use of the table it writes, as lib/config/environments.ts declares it (in every environment's jobs). */
const QUERY_DELETE = "sessions: { ref: 'sessions', apply: ['query', 'delete'] }";
const QUERY = "sessions: { ref: 'sessions', apply: 'query' }";

/** The part of npm start's --json report this test reads. */
type Report = Pick<RunReport, 'ok' | 'settled' | 'checks'> & { jobs: Record<string, Pick<JobReport, 'discovered' | 'completed' | 'dlq' | 'denials'>> };

describe('npm start with a job whose config declares query on a table it deletes from', () => {
  let copy: ProjectCopy;
  let environments: string;

  beforeAll(() => {
    copy = copyProject({ prefix: 'paced-jobs-iam-config-' });
    environments = join(copy.dir, 'lib', 'config', 'environments.ts');
  });

  afterAll(() => copy?.remove());

  const setAccess = (from: string, to: string) => {
    const source = readFileSync(environments, 'utf8');
    const at = source.indexOf(from);
    if (at < 0 || source.indexOf(from, at + 1) >= 0) throw new Error(`lib/config/environments.ts has not exactly one "${from}"`);
    writeFileSync(environments, source.replace(from, to));
  };

  /** A run stopped by the test (Ctrl-C), until it has ended; killed with what it started if the test failed first. */
  let running: ChildProcess | undefined;
  afterEach(() => {
    if (running?.pid !== undefined && running.exitCode === null && running.signalCode === null) process.kill(-running.pid, 'SIGKILL');
  });

  /**
   * One demo cycle of the job alone (the other jobs seed nothing): synthesized from the copy's config, or run on the
   * cloud assembly `cdkOut` (already synthesized from a config identical to the copy's). With `stopWhen`, stopped with
   * Ctrl-C once it holds (the run then reports what it saw, as not settled), else when the run has settled.
   */
  const start = async (options: { cdkOut?: string; stopWhen?: () => boolean }): Promise<{ result: CommandResult; report: Report }> => {
    const others = ['payment-reconciliation', 'stale-upload-cleanup'].flatMap((name) => ['--count', `${name}=0`]);
    const assembly = options.cdkOut ? ['--cdk-out', options.cdkOut] : ['--synth'];
    const args = [...assembly, '--json', '--count', `${JOB}=${TENANTS}`, ...others, '--timeout', '180', '--async-duplicate-rate', '0', '--prewarm', String(TENANTS)];
    // Node itself loads tsx, so the Ctrl-C reaches the CLI directly; a process group of its own, for the cleanup.
    const started = Date.now();
    const child = spawn(process.execPath, ['--import', 'tsx', 'local/cli.ts', ...args], { cwd: copy.dir, env: { ...process.env, FORCE_COLOR: '0' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
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
      await waitFor('the condition to stop the run at', () => ended || stopWhen() || false, { timeoutMs: 240_000, intervalMs: 100 });
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

  /** The copy's IAM log (local/run.ts writes each source's lines to .local/logs), where npm start records each denial. */
  const iamLog = () => {
    const file = join(copy.dir, '.local', 'logs', 'iam.log');
    return existsSync(file) ? readFileSync(file, 'utf8') : '';
  };

  it('fails naming the dynamodb: write it was denied, and passes once delete is restored', async () => {
    setAccess(QUERY_DELETE, QUERY);
    // The denied deletes fail their records, which SQS redelivers only after the queue's visibility timeout (minutes):
    // the run cannot settle, and need not, to be judged on its denials. It is stopped (Ctrl-C) once the first denied
    // delete is logged, and reports what it saw.
    const denied = await start({ stopWhen: () => /DENIED: .*dynamodb:DeleteItem/.test(iamLog()) });
    const job = denied.report.jobs[JOB];
    if (denied.result.status !== 1) process.stderr.write(`${describeResult('npm start (query)', denied.result)}\n`);
    expect(denied.result.status).toBe(1);
    expect(denied.report.ok).toBe(false);
    expect(job.denials.length).toBeGreaterThan(0);
    const writes = job.denials.filter((d) => d.action.startsWith('dynamodb:') && WRITES.includes(d.action));
    expect(writes).toEqual([
      expect.objectContaining({ action: 'dynamodb:DeleteItem', resource: expect.stringMatching(/:table\/sessions-dev$/), role: expect.stringContaining('ExpiredSessionCleanupConsumer') }),
    ]);
    // Only the write the config left out is denied: the index query `query` grants went through.
    expect(job.denials.map((d) => d.action)).toEqual(['dynamodb:DeleteItem']);
    const check = denied.report.checks.find((c) => c.job === JOB && c.name === 'iam-allowed');
    expect(check).toMatchObject({ ok: false, detail: expect.stringContaining(`dynamodb:DeleteItem on ${writes[0].resource} by ${writes[0].role}`) });
    // The other jobs' grants are untouched.
    for (const other of denied.report.checks.filter((c) => c.job !== JOB && c.name === 'iam-allowed')) expect(other.ok).toBe(true);
    expect(job.completed).toBe(0);

    setAccess(QUERY, QUERY_DELETE);
    expect(readFileSync(environments, 'utf8')).toBe(readFileSync(join(PROJECT_ROOT, 'lib', 'config', 'environments.ts'), 'utf8'));
    const restored = await start({ cdkOut: join(PROJECT_ROOT, 'cdk.out') });
    if (restored.result.status !== 0) process.stderr.write(`${describeResult("npm start (['query', 'delete'])", restored.result)}\n`);
    expect({ status: restored.result.status, ok: restored.report.ok, settled: restored.report.settled }).toEqual({ status: 0, ok: true, settled: true });
    expect(restored.report.jobs[JOB]).toMatchObject({ discovered: TENANTS, completed: TENANTS, dlq: 0, denials: [] });
    expect(restored.report.checks.find((c) => c.job === JOB && c.name === 'iam-allowed')).toMatchObject({ ok: true });
  }, 360_000);
});
