// The IAM a job's config asks for is the IAM it runs with locally: in a throwaway copy of the project, the
// expired-session-cleanup job's apply declares only `query` on the sessions table it deletes from, and `npm start` fails
// naming the DynamoDB write it was denied; with `['query', 'delete']` restored the same run passes with nothing denied.
// The restored config is the project's own, byte for byte, so that run uses the project's cloud assembly (jest's
// globalSetup synthesized it from the same sources) rather than synthesize it a second time.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { copyProject, describeResult, PROJECT_ROOT, type CommandResult, type ProjectCopy } from '../support/projectCopy';
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

  /**
   * One demo cycle of the job alone (the other jobs seed nothing): synthesized from the copy's config, or run on the
   * cloud assembly `cdkOut` (already synthesized from a config identical to the copy's).
   */
  const start = async (settleSeconds: number, cdkOut?: string): Promise<{ result: CommandResult; report: Report }> => {
    const others = ['payment-reconciliation', 'stale-upload-cleanup'].flatMap((name) => ['--count', `${name}=0`]);
    const assembly = cdkOut ? ['--cdk-out', cdkOut] : ['--synth'];
    const result = await copy.run(
      'npx',
      ['tsx', 'local/cli.ts', ...assembly, '--json', '--count', `${JOB}=${TENANTS}`, ...others, '--timeout', String(settleSeconds), '--async-duplicate-rate', '0', '--prewarm', String(TENANTS)],
      { timeoutMs: 240_000, env: { FORCE_COLOR: '0' } },
    );
    try {
      return { result, report: JSON.parse(result.stdout) as Report };
    } catch {
      throw new Error(`no JSON report on stdout: ${describeResult('npm start in the copy', result)}`);
    }
  };

  it('fails naming the dynamodb: write it was denied, and passes once delete is restored', async () => {
    setAccess(QUERY_DELETE, QUERY);
    // The denied deletes fail their records, which SQS redelivers only after the queue's visibility timeout (minutes):
    // the run cannot settle, and need not, to be judged on its denials: the consumer tries its first deletes seconds
    // after the fire (its batching window is 5 s), well within the 20 s it is given.
    const denied = await start(20);
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
    const restored = await start(120, join(PROJECT_ROOT, 'cdk.out'));
    if (restored.result.status !== 0) process.stderr.write(`${describeResult("npm start (['query', 'delete'])", restored.result)}\n`);
    expect({ status: restored.result.status, ok: restored.report.ok, settled: restored.report.settled }).toEqual({ status: 0, ok: true, settled: true });
    expect(restored.report.jobs[JOB]).toMatchObject({ discovered: TENANTS, completed: TENANTS, dlq: 0, denials: [] });
    expect(restored.report.checks.find((c) => c.job === JOB && c.name === 'iam-allowed')).toMatchObject({ ok: true });
  }, 360_000);
});
