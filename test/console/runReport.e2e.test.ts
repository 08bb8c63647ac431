// End to end: a plain `npm start` (one demo cycle of every job, small data) leaves its HTML report with the charts of
// the run, prints where (on stderr with --json, so stdout stays one document), and the report draws every job's
// charts in the browser, offline from file://.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { launchBrowser, type Browser } from '../support/browser';

const ROOT = join(__dirname, '..', '..');

function npmStart(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'local/cli.ts'), ...args], { cwd: ROOT, env: { ...process.env, FORCE_COLOR: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c) => (stdout += c));
  child.stderr!.on('data', (c) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('Command: npm start, its HTML report', () => {
  let dir: string;
  let browser: Browser | undefined;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'paced-jobs-run-report-'));
  });
  afterAll(async () => {
    await browser?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes the charts of the run to <local-dir>/report.html, names it on stderr with --json, and the report draws them', async () => {
    const result = await npmStart(['--json', '--payments', '3', '--uploads', '3', '--tenants', '2', '--local-dir', dir, '--timeout', '90']);

    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as { jobs: Record<string, unknown> };
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
  }, 200_000);
});
