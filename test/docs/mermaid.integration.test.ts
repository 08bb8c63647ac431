// Every Mermaid diagram of the guides (README.md, docs/*.md) and of ARCHITECTURE.md parses and renders, as the page
// that hosts the code would draw it: the mermaid package's own browser build in headless Chromium (a browser, so an
// integration test), never a downloaded browser. A diagram that does not parse fails naming its file:line and the error.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { guideFiles, ROOT } from '../../scripts/markdown';
import { type Browser, launchBrowser } from '../support/browser';
import { type Diagram, diagrams } from './checks';

const FIXTURE = join(__dirname, 'fixtures', 'guides');
const MERMAID = join(ROOT, 'node_modules', 'mermaid', 'dist', 'mermaid.min.js');

/** The page's globals inside page.evaluate: the project compiles without the DOM library. */
type Dom = any;

let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!existsSync(MERMAID)) throw new Error(`${MERMAID} is missing: the devDependency mermaid is installed by npm ci`);
  browser = await launchBrowser();
  page = await browser.context.newPage();
  await page.setContent('<!doctype html><html><head><meta charset="utf-8"></head><body></body></html>');
  await page.addScriptTag({ path: MERMAID });
  await page.evaluate(() => (globalThis as Dom).mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' }));
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

/** Each diagram that does not parse and render, as `file:line: the error`. */
async function failures(found: readonly Diagram[]): Promise<string[]> {
  const failed: string[] = [];
  for (const [i, diagram] of found.entries()) {
    const error = await page.evaluate(
      async ({ text, id }) => {
        const { mermaid } = globalThis as Dom;
        try {
          await mermaid.parse(text);
          const { svg } = await mermaid.render(id, text);
          return typeof svg === 'string' && svg.includes('<svg') ? undefined : 'rendered no SVG';
        } catch (e) {
          return String((e as { message?: string })?.message ?? e);
        }
      },
      { text: diagram.body, id: `diagram-${i}` },
    );
    if (error !== undefined)
      failed.push(`${diagram.file}:${diagram.line}: ${error.split('\n').slice(0, 4).join(' / ')}`);
  }
  return failed;
}

describe('The Mermaid diagrams (on test/docs/fixtures/guides)', () => {
  it("renders the fixture's diagram, and names a broken one's file:line and its parse error", async () => {
    const found = diagrams(FIXTURE, guideFiles(FIXTURE));
    expect(found.map((d) => `${d.file}:${d.line}`)).toEqual(['docs/guide.md:32']);
    expect(await failures(found)).toEqual([]);
    const broken = await failures([{ file: 'docs/broken.md', line: 7, body: 'flowchart LR\n  a --> b[unclosed\n' }]);
    expect(broken).toEqual([expect.stringMatching(/^docs\/broken\.md:7: .*(Parse error|Expecting|Lexical error)/)]);
  });
});

describe('Files: README.md, docs/*.md and ARCHITECTURE.md', () => {
  it('hold only diagrams that parse and render', async () => {
    const found = diagrams(ROOT, [...guideFiles(ROOT), 'ARCHITECTURE.md']);
    expect(found.length).toBeGreaterThan(0);
    expect(await failures(found)).toEqual([]);
  }, 120_000);
});
