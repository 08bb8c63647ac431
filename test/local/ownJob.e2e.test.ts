// A job added to a team's CDK app as docs/getting-started.md says (a module jobs/<name>/index.ts
// exporting `job = defineJob(...)` from the job API, one entry in the app's PacedJobs, no local fixture), here to the
// engine's test app (test/fixtures/app) in a throwaway copy of the project: `npm start` on that app synthesizes it,
// runs it with the app's own jobs, and judges the new job on the pipeline's own counts.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import {
  copyProject,
  describeResult,
  PROJECT_ROOT,
  type CommandResult,
  type ProjectCopy,
} from '../support/projectCopy';
import { OBJECT_SWEEPER, QUOTA_CALLER, RECORD_WRITER, TEST_APP } from '../support/testApp';

const NAME = 'own-counter';
const OPERATIONS = 30;
const PAGE_SIZE = 7;
/** The test app's folder, relative to the project (and so to its copy). */
const APP = relative(PROJECT_ROOT, TEST_APP);

/**
 * No tables, no downstream: it discovers 30 numbered operations, 7 a page, and applies each by doing nothing. It imports
 * the job API where the app's other jobs do (a team's app imports `paced-jobs/job`).
 */
const JOB_SOURCE = `// Job ${NAME}: ${OPERATIONS} numbered operations a business date, applied by doing nothing (a test's job).
import * as z from 'zod/mini';
import { defineJob, idPartSchema } from '../../../../../lambda/job';

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

/** Its entry in the app's PacedJobs, as docs/getting-started.md writes one (`entry` a path beside the app's bin/). */
const JOB_PROPS = `    '${NAME}': {
      entry: join(__dirname, '..', 'jobs', '${NAME}', 'index.ts'),
      schedule: { cron: '0 5 * * ? *', timeZone: 'UTC' },
      pacing: { starts: 600, intervalSeconds: 60 },
      pageSize: ${PAGE_SIZE},
    },
`;
/** Where the app's PacedJobs lists its jobs (bin/app.ts): the new job's props go first in it. */
const JOBS_PROP = '  jobs: {\n';

interface Report {
  ok: boolean;
  settled: boolean;
  jobs: Record<
    string,
    { discovered: number; completed: number; effects: number; dlq: number; effectsSource: string; note?: string }
  >;
  checks: { job: string; name: string; ok: boolean; detail: string }[];
}

describe('npm start on an app with a job added as the getting-started guide says, without a fixture', () => {
  let copy: ProjectCopy;
  let result: CommandResult;
  let report: Report;

  beforeAll(async () => {
    copy = copyProject({ prefix: 'paced-jobs-own-job-' });
    const app = join(copy.dir, APP);
    // The job's module, beside the app's other jobs.
    mkdirSync(join(app, 'jobs', NAME));
    writeFileSync(join(app, 'jobs', NAME, 'index.ts'), JOB_SOURCE);
    // Its entry in the app's PacedJobs.
    const stackFile = join(app, 'bin', 'app.ts');
    const source = readFileSync(stackFile, 'utf8');
    const at = source.indexOf(JOBS_PROP);
    if (at < 0) throw new Error(`${APP}/bin/app.ts has no "${JOBS_PROP.trim()}" line to add the job in`);
    writeFileSync(stackFile, source.slice(0, at + JOBS_PROP.length) + JOB_PROPS + source.slice(at + JOBS_PROP.length));
    // --silent: npm's own banner would otherwise come first on stdout. The app's own jobs at a few records each, one
    // execution environment warmed a function (more start as a run needs them). The copy has no assembly: the run
    // synthesizes the app, the new job in it.
    const small = [`${RECORD_WRITER}=2`, `${OBJECT_SWEEPER}=3`, `${QUOTA_CALLER}=3`].flatMap((c) => ['--count', c]);
    result = await copy.run(
      'npm',
      ['start', '--silent', '--', '--app', APP, '--json', ...small, '--prewarm', '1', '--timeout', '240'],
      { timeoutMs: 540_000 },
    );
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
    expect({ status: result.status, ok: report.ok, settled: report.settled }).toEqual({
      status: 0,
      ok: true,
      settled: true,
    });
    const own = report.checks.filter((c) => c.job === NAME);
    expect(own.map((c) => [c.name, c.ok])).toEqual([
      ['nothing-lost', true],
      ['one-effect-per-operation', true],
      ['rate-respected', true],
      ['no-unexplained-dead-letters', true],
      // IAM is enforced: the construct's grants cover what the job does.
      ['iam-allowed', true],
    ]);
  });

  it("completes each of the 30 operations once, and labels those counts as the pipeline's own", () => {
    expect(report.jobs[NAME]).toMatchObject({
      discovered: OPERATIONS,
      completed: OPERATIONS,
      effects: OPERATIONS,
      dlq: 0,
      effectsSource: 'pipeline',
    });
    // The fixture it could add is named where the app keeps the job: beside its entry.
    expect(report.jobs[NAME].note).toBe(
      `counts are the pipeline's own (idempotency store and consumer logs), not the downstream's: add jobs/${NAME}/local.ts to check the downstream`,
    );
    expect(result.stderr).toContain(`${NAME} no fixture`);
  });

  it('still judges the jobs that have a fixture on their downstream', () => {
    const others = Object.entries(report.jobs).filter(([name]) => name !== NAME);
    expect(others.map(([name]) => name).sort()).toEqual([OBJECT_SWEEPER, QUOTA_CALLER, RECORD_WRITER]);
    for (const [, job] of others) expect(job.effectsSource).toBe('fixture');
  });
});
