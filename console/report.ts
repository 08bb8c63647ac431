// A run's charts as one self-contained HTML file (npm start, npm run chaos, npm run bench:pacing each write one): uPlot,
// console/web/charts.js and the charts' data inlined, nothing fetched, so it opens offline from file:// on a machine
// with no network. The page's own Content-Security-Policy forbids any fetch, so a stray URL could not load anyway.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { chartAssets } from './assets';
import type { ChartSpec } from './chartSpec';

export interface HtmlReport {
  title: string;
  subtitle?: string;
  /** Shown in the header. @default the time of rendering */
  generatedAt?: Date;
  sections: { heading: string; charts: ChartSpec[]; facts?: [string, string][] }[];
}

export class HtmlReportError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'HtmlReportError';
  }
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for an element's content or a quoted attribute. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);

/**
 * JSON safe inside a <script> element: `<`, `>` and `&` as \u escapes (so no `</script>` or `<!--` can end or alter
 * the element), and the two line separators JavaScript once refused in strings. JSON.parse reads them back unchanged.
 */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * Code or a stylesheet inlined in its element: a `</script` or `</style` would close the element early and `<!--`
 * would change how the rest is parsed, so each is broken with a backslash (in a JS string or regex and in CSS, `\/`
 * and `\!` read as the character itself). And the URL in a vendor's banner comment loses its scheme: the report holds
 * no URL at all, which its test checks.
 */
export function inlineSource(source: string, element: 'script' | 'style'): string {
  return source
    .replace(new RegExp(`</(${element})`, 'gi'), '<\\/$1')
    .replace(/<!--/g, '<\\!--')
    .replace(/^\/\*![\s\S]*?\*\//, (banner) => banner.replace(/https?:\/\//g, ''));
}

const PAGE_CSS = `
body { margin: 0; padding: 20px 28px 40px; background: #f5f7fa; color: #1d2733; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0 0 2px; color: #4b5766; }
section { margin-top: 26px; }
section h2 { margin: 0 0 8px; font-size: 17px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0 0 10px; }
dl.facts dt { color: #5f6b7a; }
dl.facts dd { margin: 0; font-variant-numeric: tabular-nums; }
p.no-charts { color: #7a8594; font-style: italic; }
`;

// No fetch of any kind: scripts and styles only inline, images only data: (uPlot draws on canvas).
const CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:";

function checkReport(report: HtmlReport): void {
  const problems: string[] = [];
  if (typeof report.title !== 'string' || report.title.trim() === '')
    problems.push('title: must be a non-empty string');
  if (!Array.isArray(report.sections)) problems.push('sections: must be an array');
  else {
    const ids = new Set<string>();
    report.sections.forEach((section, i) => {
      if (!Array.isArray(section.charts)) problems.push(`sections[${i}].charts: must be an array`);
      for (const chart of section.charts ?? []) {
        if (ids.has(chart.id)) problems.push(`sections[${i}]: chart id "${chart.id}" is used twice in the report`);
        ids.add(chart.id);
        for (const line of chart.lines) {
          if (line.values.length !== chart.x.length)
            problems.push(
              `chart ${chart.id}: line "${line.label}" has ${line.values.length} values for ${chart.x.length} x`,
            );
        }
      }
    });
  }
  if (problems.length > 0)
    throw new HtmlReportError(`cannot render the HTML report "${report.title}": ${problems.join('; ')}`);
}

/** The report as one HTML document that needs nothing else. */
export function renderHtmlReport(report: HtmlReport): string {
  checkReport(report);
  const assets = chartAssets();
  const generatedAt = report.generatedAt ?? new Date();
  const sections = report.sections
    .map((section, i) => {
      const facts = section.facts?.length
        ? `<dl class="facts">${section.facts.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`).join('')}</dl>`
        : '';
      const charts =
        section.charts.length > 0
          ? `<div class="paced-charts" data-report-section="${i}"></div>`
          : '<p class="no-charts">No charts for this section.</p>';
      return `<section><h2>${escapeHtml(section.heading)}</h2>${facts}${charts}</section>`;
    })
    .join('\n');
  const data = scriptJson(report.sections.map((s) => s.charts));
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="${CSP}">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(report.title)}</title>`,
    `<style>${inlineSource(assets.uplotCss, 'style')}</style>`,
    `<style>${inlineSource(assets.chartsCss, 'style')}${PAGE_CSS}</style>`,
    '</head>',
    '<body>',
    '<header>',
    `<h1>${escapeHtml(report.title)}</h1>`,
    report.subtitle ? `<p>${escapeHtml(report.subtitle)}</p>` : '',
    `<p>Generated ${escapeHtml(generatedAt.toISOString())}</p>`,
    '</header>',
    sections,
    `<script type="application/json" id="paced-report-data">${data}</script>`,
    `<script>${inlineSource(assets.uplotJs, 'script')}</script>`,
    `<script type="module">${inlineSource(assets.chartsJs, 'script')}</script>`,
    // Each section's charts into its container, in order: a module too, so it runs after charts.js.
    '<script type="module">(function () {',
    "  var sections = JSON.parse(document.getElementById('paced-report-data').textContent);",
    "  Array.prototype.forEach.call(document.querySelectorAll('[data-report-section]'), function (el) {",
    "    window.PacedCharts.render(el, sections[Number(el.getAttribute('data-report-section'))]);",
    '  });',
    '})();</script>',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

/** Writes the report to `file` (its folder created as needed) and returns the file's absolute path. */
export function writeHtmlReport(file: string, report: HtmlReport): string {
  const path = resolve(file);
  const html = renderHtmlReport(report);
  try {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, html);
  } catch (error) {
    throw new HtmlReportError(`cannot write the HTML report to ${path}: ${(error as Error).message}`, { cause: error });
  }
  return path;
}
