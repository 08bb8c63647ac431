// End to end, in a real browser: the web console of a serving local stack (`npm start -- --serve`, its own process,
// the engine's test app (test/fixtures/app) synthesized, on the embedded servers), driven in Debian's chromium. The page shows every job, a
// catch-up run from the page draws the starts chart, the page's pause pauses the job (its event source mapping
// disabled, as the ops commands then read it), and a change without the token is refused.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { GetEventSourceMappingCommand, GetFunctionConfigurationCommand } from '@aws-sdk/client-lambda';
import type { Page } from 'playwright-core';
import type { JobRuntimeSettings } from '../../lambda/core/constants';
import { waitFor } from '../../local/waitFor';
import { admission } from '../../ops/commands/admission';
import { status } from '../../ops/commands/status';
import { createClients, type OpsClients } from '../../ops/clients';
import type { CommandContext } from '../../ops/context';
import { LocalEndpointsSource } from '../../ops/resources';
import { processIo } from '../../ops/io';
import { launchBrowser, type Browser } from '../support/browser';
// A type only: loading the job's modules (the job API, the SDK clients) would cost this file seconds for three rows.
import type { Item } from '../fixtures/app/jobs/record-writer/index';
import { OBJECT_SWEEPER, QUOTA_CALLER, RECORD_WRITER, TEST_APP, TEST_APP_ASSEMBLY } from '../support/testApp';

const ROOT = join(__dirname, '..', '..');
/** The job the page drives: it discovers a date's items and writes one result per item. */
const JOB = RECORD_WRITER;
const DATE = '2026-10-07';
const ITEMS = 3;

interface Served {
  child: ChildProcess;
  stderr: () => string;
  done: Promise<number | null>;
}

/** `npm start -- --serve` as its own Node process (tsx loaded by Node itself, so SIGINT reaches it directly). */
function serve(localDir: string): Served {
  // Two execution environments a function: the one run here is three items.
  const cli = join(ROOT, 'cli/start.ts');
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      cli,
      '--app',
      TEST_APP,
      '--cdk-out',
      TEST_APP_ASSEMBLY,
      '--serve',
      '--prewarm',
      '2',
      '--local-dir',
      localDir,
    ],
    {
      cwd: ROOT,
      env: { ...process.env, FORCE_COLOR: '0' },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr!.on('data', (c) => (stderr += c));
  return { child, stderr: () => stderr, done: new Promise((resolve) => child.on('close', resolve)) };
}

describe('Console: npm start -- --serve in a browser', () => {
  let dir: string;
  let served: Served;
  let browser: Browser;
  let page: Page;
  let tokenUrl: string;
  let endpointsFile: string;
  let doc: {
    region: string;
    credentials: { accessKeyId: string; secretAccessKey: string };
    endpoints: Record<string, string>;
    jobs: Record<string, unknown>;
    console?: { url: string };
  };
  let ctx: CommandContext;
  let clients: OpsClients;
  const problems: string[] = [];

  const section = () => page.locator(`section.job[data-job="${JOB}"]`);
  const confirm = async () => {
    await page.locator('#confirm[open]').waitFor();
    await page.locator('#confirm-ok').click();
  };
  const consumerMapping = async () =>
    (
      await clients.lambda.send(
        new GetEventSourceMappingCommand({
          UUID: ctx.resources.jobs.find((j) => j.job === JOB)!.eventSourceMappingUuid,
        }),
      )
    ).State;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'paced-jobs-console-e2e-'));
    endpointsFile = join(dir, 'endpoints.json');
    served = serve(dir);
    tokenUrl = await waitFor(
      'the serving stack to print its console URL and write its endpoints',
      () => {
        const url = /^console: (http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]+)$/m.exec(served.stderr())?.[1];
        return url && existsSync(endpointsFile) ? url : undefined;
      },
      { timeoutMs: 150_000, intervalMs: 100 },
    );
    doc = JSON.parse(readFileSync(endpointsFile, 'utf8'));
    const resources = await new LocalEndpointsSource(endpointsFile).load();
    clients = createClients(resources.clients);
    ctx = {
      resources,
      clients,
      io: {
        stdout: () => undefined,
        stderr: () => undefined,
        interactive: false,
        ask: async () => '',
        now: () => new Date(),
        sleep: (ms) => processIo().sleep(ms),
      },
    };
    // The date's items, for the page's catch-up to find, in the table the job's producer was given.
    const producer = ctx.resources.jobs.find((j) => j.job === JOB)!.producerFunctionName;
    const deployed = await clients.lambda.send(new GetFunctionConfigurationCommand({ FunctionName: producer }));
    const settings = JSON.parse(deployed.Environment!.Variables!.JOB_SETTINGS) as JobRuntimeSettings;
    const documents = DynamoDBDocumentClient.from(
      new DynamoDBClient({ endpoint: doc.endpoints.dynamodb, region: doc.region, credentials: doc.credentials }),
    );
    for (let i = 1; i <= ITEMS; i++) {
      const item: Item = { itemId: `item-console-${i}`, businessDate: DATE, dueAt: `${DATE}T0${i}:00:00.000Z` };
      await documents.send(new PutCommand({ TableName: settings.tables.items, Item: item }));
    }
    documents.destroy();
    browser = await launchBrowser();
    page = await browser.context.newPage();
    // A CSP violation or a script error is a failure of the page, whatever it then shows.
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    await page.setViewportSize({ width: 1400, height: 1000 });
  }, 200_000);

  afterAll(async () => {
    await browser?.close();
    clients?.destroy();
    served?.child.kill('SIGINT');
    await served?.done;
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('lists the console in endpoints.json without its token', () => {
    const base = tokenUrl.slice(0, tokenUrl.indexOf('?'));
    expect(doc.console).toEqual({ url: base });
    expect(readFileSync(endpointsFile, 'utf8')).not.toContain(tokenUrl.slice(tokenUrl.indexOf('=') + 1));
  });

  it('shows every job, draws the starts chart after a catch-up from the page, and pauses the job from the page', async () => {
    await page.goto(tokenUrl);
    await page.locator('body[data-ready="true"]').waitFor({ timeout: 30_000 });
    // The token left the address bar (and the DOM); the page keeps it for its tab.
    expect(page.url()).toBe(doc.console!.url);
    expect(await page.locator('meta[name="console-token"]').getAttribute('content')).toBe('');
    // A reload (no token in the URL now) still works: the tab kept the token.
    await page.reload();
    await page.locator('body[data-ready="true"]').waitFor({ timeout: 30_000 });
    expect(await page.locator('#no-token').isHidden()).toBe(true);

    const jobs = await page.locator('section.job').evaluateAll((els) => els.map((e) => e.getAttribute('data-job')));
    expect(jobs.sort()).toEqual(Object.keys(doc.jobs).sort());
    expect(jobs.sort()).toEqual([OBJECT_SWEEPER, QUOTA_CALLER, RECORD_WRITER]);
    for (const job of jobs) await page.locator(`[data-chart-id="${job}:starts"]`).waitFor();
    await expect(section().locator('[data-field="schedule-state"]').textContent()).resolves.toBe('ENABLED');
    await expect(section().locator('[data-mapping="consumer"]').textContent()).resolves.toBe('Enabled');

    // A cycle, fired from the page: the date's catch-up, confirmed in the dialog.
    await section().locator('input[data-field="from"]').fill(DATE);
    await section().locator('input[data-field="to"]').fill(DATE);
    await section().locator('button[data-action="catch-up"]').click();
    await expect(page.locator('#confirm-command').textContent()).resolves.toBe(
      `same as: ops catch-up --job ${JOB} --from ${DATE} --to ${DATE}`,
    );
    await confirm();
    await section().locator('.result td', { hasText: 'published' }).waitFor({ timeout: 30_000 });
    const starts = page.locator(`[data-chart-id="${JOB}:starts"]`);
    await waitFor(
      'the starts chart to have data points',
      async () => Number(await starts.getAttribute('data-points')) > 0,
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    // The canvas uPlot drew in.
    expect(await starts.locator('canvas').count()).toBeGreaterThan(0);

    // The page's batch table: the run reconciles once every item is done (before the pause, so nothing is held).
    await section()
      .locator('.batches tr', { hasText: DATE })
      .locator('span.ok', { hasText: 'yes' })
      .waitFor({ timeout: 60_000 });
    await expect(section().locator('.batches tr', { hasText: DATE }).locator('td').nth(3).textContent()).resolves.toBe(
      String(ITEMS),
    );

    await section().locator('button[data-action="pause"]').click();
    await confirm();
    await section().locator('.badge[data-state="paused"]').waitFor({ timeout: 30_000 });
    await expect(section().locator('[data-mapping="consumer"]').textContent()).resolves.toBe('Disabled');

    // As the ops commands read the stack: every pause step is already taken (a dry run has nothing left to change),
    // the consumer's mapping reports Disabled, and `ops status` shows the page's catch-up batch reconciled.
    const again = await admission(ctx, 'pause', { job: JOB, dryRun: true });
    expect(again.steps.map((s) => [s.kind, s.before, s.needed])).toEqual([
      ['schedule', 'DISABLED', false],
      ['admission-mapping', 'Disabled', false],
      ['event-source-mapping', 'Disabled', false],
    ]);
    expect(await consumerMapping()).toBe('Disabled');
    const job = (await status(ctx, { job: JOB })).jobs[0];
    expect(job.admission).toEqual({
      schedule: 'DISABLED',
      admissionMapping: 'Disabled',
      consumerMapping: 'Disabled',
      summary: 'paused',
    });
    const batch = job.batches.find((b) => b.businessDate === DATE);
    expect(batch).toMatchObject({ discovered: ITEMS, completed: ITEMS, reconciles: true, backfill: true });
    expect(problems).toEqual([]);
  }, 150_000);

  it('refuses a change without the token, even from the page itself, and changes nothing', async () => {
    const refused = await page.evaluate(async (job) => {
      const res = await fetch('/api/resume', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ job }),
      });
      return { status: res.status, body: (await res.json()) as unknown };
    }, JOB);

    expect(refused).toEqual({
      status: 403,
      body: {
        ok: false,
        error: {
          name: 'ConsoleForbiddenError',
          message: "the console's token is missing or wrong: open the URL the terminal printed",
        },
      },
    });
    expect(await consumerMapping()).toBe('Disabled');
    expect(served.stderr()).toContain('console: refused POST /api/resume: token');
  });
});
