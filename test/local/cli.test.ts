// `npm start` as a user runs it (its own process), on the engine's test app (`--app test/fixtures/app`, its assembly
// synthesized by globalSetup, see test/support/testApp.ts): a demo cycle with its report and charts, a 429 storm, and
// the refusals. Serving (`--serve`) is end-to-end tested in test/ops/serve.e2e.test.ts and
// test/console/console.e2e.test.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { launchBrowser, type Browser } from '../support/browser';
import { OBJECT_SWEEPER, QUOTA_CALLER, RECORD_WRITER, TEST_APP, TEST_APP_ASSEMBLY } from '../support/testApp';

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'cli', 'start.ts');
/** The test app, and the assembly globalSetup synthesized (relative to the app, as --cdk-out takes it). */
const APP = ['--app', TEST_APP, '--cdk-out', TEST_APP_ASSEMBLY];

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `npm start` on the test app; with `app: false`, on this repository's own (the reference app, as `npm start`). */
function start(args: string[], { app = true } = {}): { child: ChildProcess; done: Promise<Result> } {
  // Node itself loads tsx, so SIGINT reaches the CLI directly rather than through tsx's relaying wrapper process.
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...(app ? APP : []), ...args], {
    cwd: ROOT,
    env: { ...process.env, FORCE_COLOR: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c) => (stdout += c));
  child.stderr!.on('data', (c) => (stderr += c));
  const done = new Promise<Result>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, done };
}

describe('Command: npm start', () => {
  let localDir: string;
  beforeEach(() => {
    localDir = mkdtempSync(join(tmpdir(), 'paced-jobs-local-'));
  });
  afterEach(() => {
    rmSync(localDir, { recursive: true, force: true });
  });

  describe('one demo cycle of every job on small data', () => {
    let dir: string;
    let result: Result;
    let report: { ok: boolean; jobs: Record<string, unknown>; checks: { ok: boolean }[]; warnings: string[] };
    let browser: Browser | undefined;

    // One run for both: what the terminal gets, and the HTML report it leaves.
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'paced-jobs-local-demo-'));
      // Each fixture's unit is a flag of its own (--items, --objects, --calls).
      result = await start([
        '--json',
        '--items',
        '2',
        '--objects',
        '3',
        '--calls',
        '3',
        '--prewarm',
        '2',
        '--local-dir',
        dir,
        '--timeout',
        '90',
      ]).done;
      report = JSON.parse(result.stdout);
    }, 300_000);

    afterAll(async () => {
      await browser?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('reports ok with the five checks of every job', () => {
      expect(result.stderr).toContain('fired');
      expect(result.code).toBe(0);
      expect(report.ok).toBe(true);
      // The app's jobs at the sizes asked.
      expect(report.jobs).toMatchObject({
        [RECORD_WRITER]: expect.objectContaining({
          discovered: 2,
          completed: 2,
          rejected: 0,
          dlq: 0,
          effects: 2,
          duplicatesSuppressed: 0,
          rateLimitPerWindow: expect.any(Number),
        }),
        [QUOTA_CALLER]: expect.objectContaining({
          discovered: 3,
          completed: 3,
          rejected: 0,
          dlq: 0,
          effects: 3,
          duplicatesSuppressed: 0,
          throttled: 0,
          maxStartsPerWindow: 3,
        }),
        [OBJECT_SWEEPER]: expect.objectContaining({
          discovered: 3,
          completed: 3,
          rejected: 0,
          dlq: 0,
          effects: 3,
          maxStartsPerWindow: 3,
        }),
      });
      expect(Object.keys(report.jobs).sort()).toEqual([OBJECT_SWEEPER, QUOTA_CALLER, RECORD_WRITER]);
      // Five checks a job: nothing lost, one effect per operation, rate, no unexplained dead letters, IAM allowed.
      expect(report.checks).toHaveLength(5 * Object.keys(report.jobs).length);
      expect(report.warnings.filter((w: string) => w.includes('IAM'))).toEqual([]);
      expect(report.checks.every((c: { ok: boolean }) => c.ok)).toBe(true);
      expect(existsSync(join(dir, 'logs'))).toBe(true);
    });

    it('writes the charts of the run to <local-dir>/report.html, names it on stderr with --json, and the report draws them offline', async () => {
      const file = join(dir, 'report.html');
      expect(result.stderr).toContain(`charts of the run: ${file}\n`);
      expect(result.stdout).not.toContain('charts of the run');
      expect(existsSync(file)).toBe(true);

      browser = await launchBrowser();
      const page = await browser.context.newPage();
      const problems: string[] = [];
      page.on('pageerror', (e) => problems.push(e.message));
      await page.goto(pathToFileURL(file).href);
      const headings = await page.locator('section h2').allTextContents();
      expect(headings.sort()).toEqual(Object.keys(report.jobs).sort());
      // Each job's starts chart has the run's starts; its facts say it reconciled.
      for (const job of Object.keys(report.jobs)) {
        const starts = page.locator(`[data-chart-id="${job}:starts"]`);
        await starts.locator('canvas').first().waitFor({ timeout: 10_000 });
        expect([job, Number(await starts.getAttribute('data-points')) > 0]).toEqual([job, true]);
        const facts = page.locator('section', { has: page.locator('h2', { hasText: job }) }).locator('dl.facts');
        await expect(facts.textContent()).resolves.toMatch(/reconcilesyes \(\d+ batch(es)?\)/);
      }
      expect(problems).toEqual([]);
    }, 60_000);
  });

  it('defers a 429 storm from a downstream and ends with every call applied once and nothing in the DLQ', async () => {
    // A fake API's quota far below the job's own rate: most first attempts get 429 with Retry-After.
    const args = [
      '--json',
      '--calls',
      '12',
      '--items',
      '1',
      '--objects',
      '1',
      '--downstream-quota',
      '2',
      '--downstream-window',
      '3',
      '--prewarm',
      '2',
    ];
    const result = await start([...args, '--local-dir', localDir, '--timeout', '120']).done;
    const report = JSON.parse(result.stdout);
    expect(result.code).toBe(0);
    expect(report.jobs[QUOTA_CALLER]).toEqual(
      expect.objectContaining({ discovered: 12, completed: 12, dlq: 0, effects: 12, rejected: 0 }),
    );
    expect(report.jobs[QUOTA_CALLER].throttled).toBeGreaterThan(0);
    expect(report.jobs[QUOTA_CALLER].maxJobAgeSeconds).toBeGreaterThan(0);
    expect(report.ok).toBe(true);
  }, 180_000);

  it('rejects a bad flag with a clear message', async () => {
    const result = await start(['--calls', 'abc']).done;
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      `error: option '--calls <n>' argument 'abc' is invalid. --calls must be a whole number, got "abc"`,
    );
  }, 30_000);

  // In the reference app, where the command calls itself `npm start` (in a team's app, `paced-jobs start`); no job runs.
  it('fails clearly when a chosen port is in use', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as { port: number }).port;
    try {
      const result = await start(['--sqs-port', String(port), '--local-dir', localDir], { app: false }).done;
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`npm start failed: Error: port ${port} on 127.0.0.1 is already in use (SQS)`);
    } finally {
      blocker.close();
    }
  }, 30_000);
});
