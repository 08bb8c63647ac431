// The HTML report in a real browser (Debian's chromium through playwright-core, test/support/browser.ts): opened from
// file:// with no network, it draws every chart with uPlot, fetches nothing, and logs no error; and PacedCharts.update
// redraws a chart in place, as the console's polling does.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Page } from 'playwright-core';
import type { ChartSpec } from '../../console/chartSpec';
import { dataPoints, jobCharts } from '../../console/charts';
import { writeHtmlReport } from '../../console/report';
import type { MetricSample } from '../../local/metricsTap';
import { launchBrowser, type Browser } from '../support/browser';

const T0 = Date.UTC(2026, 0, 15, 2, 0, 0);
const JOB = 'payments-job';

/** A minute and a half of a paced job: a start every 15 s (4 per 60 s), a 429 deferred once, ages rising, the queue draining. */
function samples(): MetricSample[] {
  const out: MetricSample[] = [];
  const at = (s: number) => T0 + s * 1000;
  const pipeline = (metricName: string, s: number, value = 1) =>
    out.push({ namespace: 'PacedJobs', metricName, dimensions: { service: JOB, job: JOB }, timestamp: at(s), value });
  for (let s = 0; s < 90; s += 15) {
    pipeline('Applied', s);
    pipeline('AgeSinceFirstEnqueue', s, 20_000 + s * 1000);
  }
  pipeline('Throttled', 40);
  pipeline('Deferred', 40);
  for (let s = 0; s < 90; s += 5)
    out.push({
      namespace: 'AWS/SQS',
      metricName: 'ApproximateNumberOfMessagesVisible',
      dimensions: { QueueName: 'q' },
      timestamp: at(s),
      value: 90 - s,
    });
  return out;
}

const charts = jobCharts(
  samples(),
  { job: JOB, allowance: { starts: 4, intervalMs: 60_000 }, sloMinutes: 2, queueName: 'q' },
  { fromMs: T0, toMs: T0 + 90_000, stepMs: 5000 },
);
const empty: ChartSpec = {
  id: 'other-job:starts',
  title: 'Starts in any 60 s window',
  unit: 'starts per 60 s',
  x: charts[0].x,
  lines: [{ label: 'starts', values: charts[0].x.map(() => null) }],
};

/**
 * The page's globals inside page.evaluate: the project compiles without the DOM library (it is Node code), so the
 * browser side of these tests reaches them untyped.
 */
type Dom = any;

let browser: Browser;
let dir: string;

beforeAll(async () => {
  browser = await launchBrowser();
  dir = mkdtempSync(join(tmpdir(), 'paced-report-browser-'));
});

afterAll(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Opens the report, recording every request, failed request, console error and page error. */
async function open(file: string): Promise<{ page: Page; requests: string[]; failed: string[]; errors: string[] }> {
  const page = await browser.context.newPage();
  const requests: string[] = [];
  const failed: string[] = [];
  const errors: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('requestfailed', (r) => failed.push(`${r.url()}: ${r.failure()?.errorText}`));
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') errors.push(`console.${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  return { page, requests, failed, errors };
}

/** What the page drew for one chart: its data-points, its canvas size and how many of its pixels are painted. */
function drawn(page: Page, id: string) {
  return page.evaluate((chartId) => {
    const { document } = globalThis as Dom;
    const root = document.querySelector(`[data-chart-id="${chartId}"]`);
    if (!root) return undefined;
    const canvas = root.querySelector('canvas');
    let painted = 0;
    if (canvas && canvas.width > 0 && canvas.height > 0) {
      const pixels = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
      for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted++;
    }
    const note = root.querySelector('.paced-chart-empty');
    return {
      points: root.getAttribute('data-points') as string | null,
      width: (canvas?.width ?? 0) as number,
      painted,
      legend: [...root.querySelectorAll('.u-legend .u-series .u-label')].map((l: Dom) => l.textContent as string),
      title: root.querySelector('.paced-chart-title')?.textContent as string | undefined,
      noDataNote: note ? !note.hidden : false,
    };
  }, id);
}

describe('The HTML report in a browser', () => {
  it('opens offline from file://, draws every chart with its data points, fetches nothing and logs no error', async () => {
    const file = writeHtmlReport(join(dir, 'report.html'), {
      title: 'Local run',
      generatedAt: new Date(T0),
      sections: [
        { heading: JOB, charts, facts: [['completed', '6']] },
        { heading: 'other-job', charts: [empty] },
      ],
    });
    const { page, requests, failed, errors } = await open(file);
    await page.waitForFunction(
      (n) => (globalThis as Dom).document.querySelectorAll('[data-chart-id][data-points]').length === n,
      charts.length + 1,
      { timeout: 10_000 },
    );
    expect(charts.map((c) => c.id)).toEqual([`${JOB}:starts`, `${JOB}:outcomes`, `${JOB}:age`, `${JOB}:queue`]);
    for (const chart of charts) {
      const seen = await drawn(page, chart.id);
      expect(seen).toBeDefined();
      expect(Number(seen!.points)).toBe(dataPoints(chart));
      expect(Number(seen!.points)).toBeGreaterThan(0);
      expect(seen!.width).toBeGreaterThan(0);
      expect(seen!.painted).toBeGreaterThan(100);
      expect(seen!.title).toBe(chart.title);
      // The legend names every line, the limit lines too.
      expect(seen!.legend).toEqual(expect.arrayContaining(chart.lines.map((l) => l.label)));
      expect(seen!.noDataNote).toBe(false);
    }
    // A chart with nothing to draw says so, and has no canvas.
    expect(await drawn(page, empty.id)).toMatchObject({ points: '0', width: 0, noDataNote: true });
    expect(requests).toEqual([pathToFileURL(file).href]);
    expect(failed).toEqual([]);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('redraws in place on update: the same chart element and canvas, the new data, a chart added and one removed', async () => {
    const file = writeHtmlReport(join(dir, 'update.html'), {
      title: 'Update',
      sections: [{ heading: JOB, charts: charts.slice(0, 2) }],
    });
    const { page, errors } = await open(file);
    await page.waitForFunction(
      () => (globalThis as Dom).document.querySelectorAll('[data-chart-id][data-points]').length === 2,
    );
    const starts = charts[0];
    const more: ChartSpec = {
      ...starts,
      lines: starts.lines.map((l) =>
        l.kind === 'limit' ? l : { ...l, values: l.values.map((v, i) => (i % 2 === 0 ? v : null)) },
      ),
    };
    const result = await page.evaluate(
      ([next, third]) => {
        const { document, PacedCharts, requestAnimationFrame } = globalThis as Dom;
        const container = document.querySelector('[data-report-section="0"]');
        const root = container.querySelector(`[data-chart-id="${next.id}"]`);
        const canvas = root.querySelector('canvas');
        PacedCharts.update(container, [next, third]);
        return new Promise<{ sameRoot: boolean; sameCanvas: boolean; points: string | null; ids: (string | null)[] }>(
          (done) =>
            requestAnimationFrame(() =>
              done({
                sameRoot: container.querySelector(`[data-chart-id="${next.id}"]`) === root,
                sameCanvas: root.querySelector('canvas') === canvas,
                points: root.getAttribute('data-points'),
                ids: [...container.querySelectorAll('[data-chart-id]')].map(
                  (e: Dom) => e.getAttribute('data-chart-id') as string | null,
                ),
              }),
            ),
        );
      },
      [more, charts[2]] as const,
    );
    expect(result).toEqual({
      sameRoot: true,
      sameCanvas: true,
      points: String(dataPoints(more)),
      ids: [starts.id, charts[2].id],
    });
    expect(dataPoints(more)).toBeLessThan(dataPoints(starts));
    expect(errors).toEqual([]);
    await page.close();
  });
});
