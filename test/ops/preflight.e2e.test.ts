// `ops preflight --local` against the engine's synthesized test app (test/support/testApp.ts) run locally (in this
// process), each preflight its own `npm run ops` process in the app's folder reading .local/endpoints.json: the demo stack passes, and each broken case fails naming its
// check: a message in a DLQ, a headroom too small under the documented quota, an alarm topic with no subscription.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { nextFireTime, parseCron, zonedDate } from '../../lambda/core/cron';
import { writeEndpoints } from '../../local/run';
import type { LocalSession, SessionOptions } from '../../local/session';
import type { CheckResult, PreflightResult } from '../../ops/commands/preflight';
import { openTestAppSession, QUOTA_CALLER, RECORD_WRITER, TEST_APP, testAppTemplate } from '../support/testApp';

const ROOT = join(__dirname, '..', '..');
const SEEDED = 5;
/** A job calling an API whose documented quota is 100 starts a minute. */
const CALLS = QUOTA_CALLER;
/** A job discovering page by page (a scan of its table). */
const ITEMS = RECORD_WRITER;

/** `npm run ops -- preflight --local --json` as its own process; stdout must be one JSON document. */
function preflight(endpointsFile: string): Promise<{ code: number | null; result: PreflightResult; stderr: string }> {
  return new Promise((resolve, reject) => {
    // In the app's folder: the jobs' code is found from their entries, relative to it.
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'cli/ops.ts'), 'preflight', '--local', '--endpoints', endpointsFile, '--json'],
      {
        cwd: TEST_APP,
        env: { ...process.env, FORCE_COLOR: '0' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        resolve({ code, result: JSON.parse(stdout) as PreflightResult, stderr });
      } catch {
        reject(new Error(`preflight printed no JSON document (exit ${code}):\n${stdout}\n${stderr}`));
      }
    });
  });
}

/** The business date each job's next scheduled run will process, from the schedule the stack deployed. */
function nextBusinessDate(session: LocalSession, job: string): string {
  const schedule = session.stack.plan.schedules.find((s) => s.name === session.job(job).scheduleName)!;
  const { settings } = session.job(job);
  const at = nextFireTime(parseCron(schedule.expression), schedule.timeZone, new Date())!;
  return zonedDate(at, schedule.timeZone, settings.businessDateOffsetDays);
}

const checksOf = (result: PreflightResult, check: string) => result.checks.filter((c) => c.check === check);

async function open(
  dir: string,
  options: Partial<Omit<SessionOptions, 'cwd'>> = {},
): Promise<{ session: LocalSession; endpoints: string }> {
  // Two execution environments a function: nothing here runs more than a few records at once.
  const session = await openTestAppSession({ log: () => undefined, prewarm: 2, ...options });
  const endpoints = writeEndpoints(dir, session);
  // The template the run used, which ops reads the jobs' entries from: writeEndpoints leaves it out, and ops then looks
  // for cdk.out beside the local folder, which is not where the test app's assembly is.
  const doc = JSON.parse(readFileSync(endpoints, 'utf8')) as Record<string, unknown>;
  writeFileSync(endpoints, JSON.stringify({ ...doc, templateFile: testAppTemplate() }));
  return { session, endpoints };
}

describe('Command: ops preflight --local', () => {
  describe('on the demo stack', () => {
    let dir: string;
    let session: LocalSession;
    let endpoints: string;
    let passed: Awaited<ReturnType<typeof preflight>>;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'preflight-demo-'));
      ({ session, endpoints } = await open(dir));
      // Tonight's records, for discovery to find twice; nothing is fired, so no run is recorded yet.
      for (const job of session.jobs.keys()) await session.seed(job, SEEDED, nextBusinessDate(session, job));
      passed = await preflight(endpoints);
    }, 180_000);

    afterAll(async () => {
      await session?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('passes: exit 0 and no failed check', () => {
      if (passed.code !== 0)
        process.stderr.write(
          `${JSON.stringify(
            passed.result.checks.filter((c) => c.status === 'fail'),
            null,
            2,
          )}\n${passed.stderr}\n`,
        );
      expect(passed.code).toBe(0);
      expect(passed.result).toMatchObject({ ok: true, command: 'preflight', source: 'local', failed: [] });
    });

    it('runs every check for every job, and the stack-wide ones once', () => {
      const perJob = [
        'producer-time',
        'discovery-stable',
        'rate-headroom',
        'concurrency-limit',
        'idempotency-lifetime',
        'schedule',
        'secrets',
        'discovery-indexes',
        'dlq-empty',
      ];
      for (const job of session.jobs.keys()) {
        expect(passed.result.checks.filter((c) => c.job === job).map((c) => c.check)).toEqual(perJob);
      }
      expect(passed.result.checks.filter((c) => c.job === undefined).map((c) => [c.check, c.status])).toEqual([
        ['operator-permissions', 'skip'],
        ['alarm-subscriptions', 'pass'],
        ['account-concurrency', 'pass'],
      ]);
    });

    it("discovers tonight's date twice and finds the same seeded operations", () => {
      for (const job of session.jobs.keys()) {
        const [check] = checksOf(passed.result, 'discovery-stable').filter((c) => c.job === job);
        expect(check).toMatchObject({ status: 'pass', detail: { businessDate: nextBusinessDate(session, job) } });
        expect((check.detail as { operations: number }).operations).toBeGreaterThan(0);
      }
    });

    it("projects the producer from measured discovery when no run is recorded, and gives each schedule's next fire", () => {
      for (const c of checksOf(passed.result, 'producer-time'))
        expect(c.reason).toContain('no recorded run: discovery measured now');
      for (const c of checksOf(passed.result, 'schedule')) {
        expect(c.status).toBe('pass');
        expect((c.detail as { businessDate: string }).businessDate).toBe(nextBusinessDate(session, c.job!));
        expect(c.reason).toMatch(/^enabled; next fires \S+ \(cron\(.+\) .+\) for business date \d{4}-\d{2}-\d{2}$/);
      }
    });

    it('fails naming dlq-empty once a DLQ holds a message, and only that check', async () => {
      await session
        .sqs()
        .send(new SendMessageCommand({ QueueUrl: session.job(CALLS).dlqUrl, MessageBody: '{"left":"over"}' }));

      const failed = await preflight(endpoints);

      expect(failed.code).toBe(1);
      expect(failed.result.ok).toBe(false);
      expect(failed.result.failed).toEqual([`dlq-empty (${CALLS})`]);
      const [dlq] = checksOf(failed.result, 'dlq-empty').filter((c) => c.job === CALLS);
      expect(dlq.reason).toBe(
        `the DLQ holds 1 message(s): read them (dlq peek --job ${CALLS}), fix the cause, then redrive or purge`,
      );
    }, 60_000);
  });

  describe('on a stack with no alarm subscription and a headroom too small', () => {
    let dir: string;
    let session: LocalSession;
    let result: Awaited<ReturnType<typeof preflight>>;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'preflight-broken-'));
      let endpoints: string;
      ({ session, endpoints } = await open(dir, {
        template: (t) => ({
          ...t,
          Resources: Object.fromEntries(
            Object.entries(t.Resources).filter(([, r]) => r.Type !== 'AWS::SNS::Subscription'),
          ),
        }),
        jobSettings: (s) => {
          // The calling job deployed with headroom 0.99: 99 of the documented 100 starts a minute.
          if (s.jobName === CALLS)
            return {
              ...s,
              quota: { ...s.quota!, headroom: 0.99 },
              rateLimit: { ...s.rateLimit, startsPerInterval: 99 },
            };
          // The writing job in pages of 2, so one run records several pages in one invocation.
          if (s.jobName === ITEMS) return { ...s, pageSize: 2 };
          return s;
        },
      }));
      const date = session.businessDateFor(ITEMS);
      await session.seed(ITEMS, SEEDED, date);
      session.startConsumers();
      await session.fire(ITEMS, { scheduledTime: new Date(), businessDate: date });
      if (!(await session.settle({ deadline: Date.now() + 60_000, jobs: [ITEMS] })))
        throw new Error(`the ${ITEMS} run did not settle in 60 s`);
      result = await preflight(endpoints);
    }, 240_000);

    afterAll(async () => {
      await session?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('fails with exit 1, naming exactly the two broken checks', () => {
      expect(result.code).toBe(1);
      expect(result.result.failed).toEqual([`rate-headroom (${CALLS})`, 'alarm-subscriptions']);
    });

    it('says why: the headroom leaves 1% of the quota, and nobody receives the alarms', () => {
      const [headroom] = checksOf(result.result, 'rate-headroom').filter((c) => c.job === CALLS);
      expect(headroom.reason).toBe(
        'headroom 0.99 leaves 1% of the documented 100 starts per 60 s unused; keep at least 5% (pacing.headroom at most 0.95) for clock skew, retries and other clients of the quota',
      );
      const [alarms] = checksOf(result.result, 'alarm-subscriptions') as CheckResult[];
      expect(alarms.reason).toMatch(
        /^no one receives the alarms of arn:aws:sns:.+: it has no subscription: set alarmEmail in the environment's config/,
      );
    });

    it('projects the producer from the recorded run once one exists', () => {
      const [items] = checksOf(result.result, 'producer-time').filter((c) => c.job === ITEMS);
      expect(items.status).toBe('pass');
      expect(items.reason).toMatch(/the slowest of \d+ recorded page\(s\)/);
    });
  });
});
