import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { chartAsset, chartAssets, CHART_ASSET_ROUTES } from '../../console/assets';
import type { ChartSpec } from '../../console/chartSpec';
import {
  escapeHtml,
  HtmlReportError,
  inlineSource,
  renderHtmlReport,
  scriptJson,
  writeHtmlReport,
  type HtmlReport,
} from '../../console/report';

const chart = (id: string, title = 'Starts in any 60 s window'): ChartSpec => ({
  id,
  title,
  unit: 'starts per 60 s',
  x: [1_768_442_400, 1_768_442_410, 1_768_442_420],
  lines: [
    { label: 'starts', values: [1, null, 3] },
    { label: 'allowance', kind: 'limit', values: [4, 4, 4] },
  ],
});

const report: HtmlReport = {
  title: 'Local run',
  subtitle: 'dev, 2026-01-15',
  generatedAt: new Date('2026-01-15T02:00:00Z'),
  sections: [
    {
      heading: 'payments-job',
      charts: [chart('payments-job:starts')],
      facts: [
        ['completed', '60'],
        ['max starts in any window', '4 of 4'],
      ],
    },
    { heading: 'uploads-job', charts: [] },
  ],
};

/** The data the page parses: the JSON script element's text, as the browser hands it to JSON.parse. */
const embeddedData = (html: string): unknown => {
  const match = /<script type="application\/json" id="paced-report-data">([\s\S]*?)<\/script>/.exec(html);
  if (!match) throw new Error('no data script in the report');
  return JSON.parse(match[1]);
};

describe('Function: renderHtmlReport', () => {
  const html = renderHtmlReport(report);

  it('is self-contained: uPlot, charts.js and both stylesheets inline, no URL and no src or href anywhere', () => {
    const { uplotCss, chartsJs } = chartAssets();
    expect(html).toContain(chartsJs.trim().split('\n').slice(-3).join('\n'));
    expect(html).toContain('var uPlot=function(){');
    expect(html).toContain(uplotCss.slice(0, 60));
    expect(html).not.toMatch(/https?:\/\//i);
    expect(html).not.toMatch(/\b(src|href)\s*=/i);
    expect(html).not.toMatch(/url\(|@import/i);
    // And the page itself forbids any fetch.
    expect(html).toContain(
      `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">`,
    );
  });

  it("keeps uPlot's banner, without the scheme of its URL", () => {
    expect(chartAssets().uplotJs.startsWith('/*! https://github.com/leeoniya/uPlot (v1.6.32) */')).toBe(true);
    expect(html).toContain('/*! github.com/leeoniya/uPlot (v1.6.32) */');
  });

  it('holds each section: its heading, its facts and a container for its charts; a section without charts says so', () => {
    expect(html).toContain('<title>Local run</title>');
    expect(html).toContain('<p>dev, 2026-01-15</p>');
    expect(html).toContain('<p>Generated 2026-01-15T02:00:00.000Z</p>');
    expect(html).toContain(
      '<section><h2>payments-job</h2><dl class="facts"><dt>completed</dt><dd>60</dd><dt>max starts in any window</dt><dd>4 of 4</dd></dl><div class="paced-charts" data-report-section="0"></div></section>',
    );
    expect(html).toContain(
      '<section><h2>uploads-job</h2><p class="no-charts">No charts for this section.</p></section>',
    );
    expect(embeddedData(html)).toEqual([[chart('payments-job:starts')], []]);
  });

  it('embeds the data safely: a title with </script> and <!-- neither ends nor alters the element, and reads back unchanged', () => {
    const hostile = 'x</script><script>alert(1)</script><!-- \u2028 & "q"';
    const out = renderHtmlReport({
      title: hostile,
      sections: [{ heading: hostile, charts: [chart('a:b', hostile)], facts: [[hostile, hostile]] }],
    });
    // Only the report's own script elements end: 4 (data, uPlot, charts.js, the bootstrap).
    expect(out.match(/<\/script>/g)).toHaveLength(4);
    expect(out).not.toContain('<script>alert(1)');
    expect(out).toContain(`<title>${escapeHtml(hostile)}</title>`);
    expect((embeddedData(out) as ChartSpec[][])[0][0].title).toBe(hostile);
  });

  it('throws naming every problem: a chart id used twice, a line whose values do not match its x', () => {
    const bad = chart('a:starts');
    bad.lines[0].values = [1];
    expect(() =>
      renderHtmlReport({
        title: 'R',
        sections: [
          { heading: 'one', charts: [bad] },
          { heading: 'two', charts: [chart('a:starts')] },
        ],
      }),
    ).toThrow(
      new HtmlReportError(
        'cannot render the HTML report "R": chart a:starts: line "starts" has 1 values for 3 x; sections[1]: chart id "a:starts" is used twice in the report',
      ),
    );
  });
});

describe('Function: scriptJson', () => {
  it('escapes what could end or alter a script element, and parses back to the same value', () => {
    const value = { s: '</script><!--&\u2028\u2029>' };
    const text = scriptJson(value);
    expect(text).toBe('{"s":"\\u003c/script\\u003e\\u003c!--\\u0026\\u2028\\u2029\\u003e"}');
    expect(JSON.parse(text)).toEqual(value);
  });
});

describe('Function: inlineSource', () => {
  it("breaks a closing tag of its element and an HTML comment opener, keeping the code's meaning", () => {
    expect(inlineSource('var s = "</script>"; // <!-- x', 'script')).toBe('var s = "<\\/script>"; // <\\!-- x');
    // Evaluated, the broken string is the same string.
    expect(new Function(`return ${inlineSource('"</SCRIPT>"', 'script')}`)()).toBe('</SCRIPT>');
    expect(inlineSource('a::after { content: "</style>"; }', 'style')).toBe('a::after { content: "<\\/style>"; }');
  });
});

describe('Function: writeHtmlReport', () => {
  it('creates the folder, writes the page and returns its absolute path', () => {
    const dir = mkdtempSync(join(tmpdir(), 'paced-report-'));
    try {
      const path = writeHtmlReport(join(dir, 'nested', 'deeper', 'report.html'), report);
      expect(isAbsolute(path)).toBe(true);
      expect(path).toBe(join(dir, 'nested', 'deeper', 'report.html'));
      expect(readFileSync(path, 'utf8')).toBe(renderHtmlReport(report));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Function: chartAsset', () => {
  it('serves the four assets at /assets/... with their content types, and nothing else', () => {
    expect(Object.keys(CHART_ASSET_ROUTES).sort()).toEqual([
      '/assets/charts.css',
      '/assets/charts.js',
      '/assets/uPlot.iife.min.js',
      '/assets/uPlot.min.css',
    ]);
    expect(chartAsset('/assets/charts.js')).toEqual({
      contentType: 'text/javascript; charset=utf-8',
      body: chartAssets().chartsJs,
    });
    expect(chartAsset('/assets/uPlot.min.css')?.contentType).toBe('text/css; charset=utf-8');
    expect(chartAsset('/assets/../package.json')).toBeUndefined();
    expect(chartAsset('/assets/toString')).toBeUndefined();
  });
});
