// The docs' Markdown reader (scripts/markdown.ts): fences, headings and their GitHub anchors, sections, links and
// marker pairs, on small texts.
import { anchors, fencedBlocks, fillMarkers, headings, links, markerPairs, sectionLines } from '../../scripts/markdown';

describe('Function: fencedBlocks', () => {
  it('reads backtick and tilde fences, a longer fence around a shorter one, and a fence indented in a list', () => {
    const text = [
      '<!-- example: serve -->', // 1
      '```sh', // 2
      'echo a', // 3
      '```', // 4
      '~~~ Text extra words', // 5
      '````md', // 6
      '```', // 7
      '~~~', // 8
      '- a step:', // 9
      '  ````sh', // 10
      '  echo b', // 11
      '  ```', // 12
      '    indented more', // 13
      '  ````', // 14
    ].join('\n');
    expect(fencedBlocks(text)).toEqual([
      { line: 2, lang: 'sh', body: 'echo a', before: '<!-- example: serve -->' },
      { line: 5, lang: 'text', body: '````md\n```', before: '```' },
      { line: 10, lang: 'sh', body: 'echo b\n```\n  indented more', before: '- a step:' },
    ]);
  });

  it('runs an unclosed fence to the end of the text', () => {
    expect(fencedBlocks('```sh\necho a\n')).toEqual([{ line: 1, lang: 'sh', body: 'echo a\n', before: '' }]);
  });
});

describe('Function: headings', () => {
  it('reads ATX and setext headings outside code, numbering repeated anchors as GitHub does', () => {
    const text = [
      '# Title #',
      'Intro',
      '',
      'Setext two',
      '---',
      '```',
      '# not a heading',
      '```',
      '## Title',
      '#tag',
    ].join('\n');
    expect(headings(text).map((h) => [h.line, h.level, h.slug])).toEqual([
      [1, 1, 'title'],
      [4, 2, 'setext-two'],
      [9, 2, 'title-1'],
    ]);
  });

  it('takes HTML anchors as anchors too', () => {
    expect([...anchors('# A\n<a id="here"></a>\n<a name="there">x</a>')]).toEqual(['a', 'here', 'there']);
  });
});

describe('Function: sectionLines', () => {
  it("spans a section's heading to the next heading of its level or above", () => {
    const text = ['# Top', '## Quick start', 'a', '### Deeper', 'b', '## Next', 'c'].join('\n');
    expect(sectionLines(text, 'Quick start')).toEqual({ start: 2, end: 6 });
    expect(sectionLines(text, 'Next')).toEqual({ start: 6, end: 8 });
    expect(sectionLines(text, 'Missing')).toBeUndefined();
  });
});

describe('Function: links', () => {
  it('finds inline links and images, reference definitions and HTML links, but none in code', () => {
    const text = [
      'See [a](docs/a.md#x "title"), ![b](img/b.png) and [`c`](<docs/c d.md>).',
      '`[not](code.md)` and <a href="docs/e.md">e</a>',
      '[ref]: ../f.md#g',
      '```',
      '[not](block.md)',
      '```',
    ].join('\n');
    expect(links(text)).toEqual([
      { line: 1, target: 'docs/a.md#x' },
      { line: 1, target: 'img/b.png' },
      { line: 1, target: 'docs/c d.md' },
      { line: 2, target: 'docs/e.md' },
      { line: 3, target: '../f.md#g' },
    ]);
  });
});

describe('Functions: markerPairs, fillMarkers', () => {
  const text = [
    'a',
    '<!-- flags: ops status -->',
    'old',
    'table',
    '<!-- /flags -->',
    '```',
    '<!-- flags: x -->',
    '```',
  ].join('\n');

  it('find each pair outside code, and fill what is between', () => {
    expect(markerPairs(text, 'flags')).toEqual([{ line: 2, words: 'ops status', open: 1, close: 4 }]);
    expect(fillMarkers(text, 'flags', (p) => `| ${p.words} |`)).toBe(
      ['a', '<!-- flags: ops status -->', '| ops status |', '<!-- /flags -->', '```', '<!-- flags: x -->', '```'].join(
        '\n',
      ),
    );
  });

  it('refuse a closing marker without its opening one', () => {
    expect(() => markerPairs('<!-- /flags -->', 'flags', 'g.md')).toThrow(
      'g.md:1: <!-- /flags --> closes no <!-- flags: ... -->',
    );
  });
});
