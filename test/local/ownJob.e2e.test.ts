// A fourth job added exactly as the README's "Adding a job" says (one folder lambda/jobs/<name>/index.ts, one entry per
// environment in lib/config/environments.ts, no local fixture), in a throwaway copy of the project: `npm start` there
// synthesizes the stack, runs it with the three example jobs, and judges the new job on the pipeline's own counts.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { JOBS_MARKER } from '../../scaffold/newJob';
import { copyProject, describeResult, type CommandResult, type ProjectCopy } from '../support/projectCopy';

const NAME = 'own-counter';
const OPERATIONS = 30;
const PAGE_SIZE = 7;

/** No tables, no downstream: it discovers 30 numbered operations, 7 a page, and applies each by doing nothing. */
const JOB_SOURCE = `// Job plug-in ${NAME}: ${OPERATIONS} numbered operations a business date, applied by doing nothing (a test's job).
import * as z from 'zod';
import { defineJob } from '../../core/job';
import { idPartSchema } from '../../core/operationIds';

const TOTAL = ${OPERATIONS};

export const resourceSchema = z.strictObject({ n: idPartSchema });

export const job = defineJob({
  name: '${NAME}',
  resourceSchema,
  createDeps: () => ({}),
  async discover(_deps, request) {
    const from = request.cursor === undefined ? 0 : Number(request.cursor);
    const to = Math.min(TOTAL, from + request.pageSize);
    const operations = [];
    for (let i = from; i < to; i++) {
      const n = String(i).padStart(3, '0');
      operations.push({ operationId: \`${NAME}:\${n}:\${request.businessDate}\`, resource: { n } });
    }
    return { operations, nextCursor: to < TOTAL ? String(to) : undefined };
  },
  async apply() {
    return { outcome: 'applied' as const };
  },
});
`;

const JOB_CONFIG = `  '${NAME}': {
    schedule: { cron: '0 5 * * ? *', timeZone: 'UTC' },
    rateLimit: { starts: 600, intervalSeconds: 60 },
    pageSize: ${PAGE_SIZE},
  },
`;

interface Report {
  ok: boolean;
  settled: boolean;
  jobs: Record<string, { discovered: number; completed: number; effects: number; dlq: number; effectsSource: string; note?: string }>;
  checks: { job: string; name: string; ok: boolean; detail: string }[];
}

describe('npm start with a job added as the README says, without a fixture', () => {
  let copy: ProjectCopy;
  let result: CommandResult;
  let report: Report;

  beforeAll(async () => {
    copy = copyProject({ prefix: 'paced-jobs-own-job-' });
    // The README's step 1: the job's folder with its index.ts.
    mkdirSync(join(copy.dir, 'lambda', 'jobs', NAME));
    writeFileSync(join(copy.dir, 'lambda', 'jobs', NAME, 'index.ts'), JOB_SOURCE);
    // Step 2: jobs.<name> in each environment (every environment's jobs come from the one list the marker ends).
    const environments = join(copy.dir, 'lib', 'config', 'environments.ts');
    const source = readFileSync(environments, 'utf8');
    const at = source.indexOf(`  ${JOBS_MARKER}`);
    if (at < 0) throw new Error(`lib/config/environments.ts has no "${JOBS_MARKER}" line to add the job before`);
    writeFileSync(environments, source.slice(0, at) + JOB_CONFIG + source.slice(at));
    // --silent: npm's own banner would otherwise come first on stdout. The example jobs at a few records each (their
    // default counts pace the payment job alone for 30 s), two execution environments a function.
    const small = ['payment-reconciliation=3', 'stale-upload-cleanup=3', 'expired-session-cleanup=2'].flatMap((c) => ['--count', c]);
    result = await copy.run('npm', ['start', '--silent', '--', '--json', ...small, '--prewarm', '2', '--timeout', '240'], { timeoutMs: 540_000 });
    try {
      report = JSON.parse(result.stdout) as Report;
    } catch {
      throw new Error(`no JSON report on stdout: ${describeResult('npm start in the copy', result)}`);
    }
  }, 600_000);

  afterAll(() => copy?.remove());

  it('runs, settles and passes every check, the new job included', () => {
    // On a failure, the command's output is what explains it.
    if (!report.ok) process.stderr.write(`${describeResult('npm start in the copy', result)}\n`);
    expect({ status: result.status, ok: report.ok, settled: report.settled }).toEqual({ status: 0, ok: true, settled: true });
    const own = report.checks.filter((c) => c.job === NAME);
    expect(own.map((c) => [c.name, c.ok])).toEqual([
      ['nothing-lost', true],
      ['one-effect-per-operation', true],
      ['rate-respected', true],
      ['no-unexplained-dead-letters', true],
      // IAM is enforced: the scaffolded job's grants cover what it does.
      ['iam-allowed', true],
    ]);
  });

  it('completes each of the 30 operations once, and labels those counts as the pipeline\'s own', () => {
    expect(report.jobs[NAME]).toMatchObject({ discovered: OPERATIONS, completed: OPERATIONS, effects: OPERATIONS, dlq: 0, effectsSource: 'pipeline' });
    expect(report.jobs[NAME].note).toBe(
      `counts are the pipeline's own (idempotency store and consumer logs), not the downstream's: add lambda/jobs/${NAME}/local.ts to check the downstream`,
    );
    expect(result.stderr).toContain(`${NAME} no fixture`);
  });

  it('still judges the jobs that have a fixture on their downstream', () => {
    const others = Object.entries(report.jobs).filter(([name]) => name !== NAME);
    expect(others.length).toBeGreaterThan(0);
    for (const [, job] of others) expect(job.effectsSource).toBe('fixture');
  });
});
