// What the docs' generators and tests read of the Markdown: the guides (README.md and docs/*.md), their fenced blocks
// with the HTML comment on the line before each, their headings as GitHub anchors them, their links, and the marker
// pairs a generator fills. A line scanner, not a full CommonMark parser: it knows fences, ATX and setext headings,
// inline and reference links, and code spans, which is what the guides use.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(__dirname, '..');

/** The guides, relative to the project: README.md, then docs/*.md by name. @throws Error when docs/ is missing */
export function guideFiles(root = ROOT): string[] {
  const docs = join(root, 'docs');
  if (!existsSync(docs))
    throw new Error(`${docs} is missing: the guides (docs/*.md, #37) must exist beside README.md for this check`);
  const guides = readdirSync(docs)
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...guides];
}

/** A fenced code block. */
export interface FencedBlock {
  /** 1-based line of the opening fence. */
  line: number;
  /** The info string's first word (`sh`, `mermaid`, `text`), lower-cased; '' for none. */
  lang: string;
  /** The block's text, its fence's indentation removed from each line, ending without a newline. */
  body: string;
  /** The line right before the opening fence, trimmed ('' for none). */
  before: string;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^`]*?)\s*$/;

/** The lines of `text`, each with whether it is inside (or is a fence of) a fenced block. */
function scan(text: string): { lines: string[]; inCode: boolean[]; blocks: FencedBlock[] } {
  const lines = text.split('\n');
  const inCode = lines.map(() => false);
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, info] = open;
    // A backtick fence's info string may not hold a backtick (it would be a code span): the regex refuses it.
    const close = new RegExp(`^\\s*${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`);
    let end = i + 1;
    while (end < lines.length && !close.test(lines[end])) end++;
    const body = lines
      .slice(i + 1, end)
      .map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l.trimStart()))
      .join('\n');
    blocks.push({
      line: i + 1,
      lang: (info.split(/\s+/)[0] ?? '').toLowerCase(),
      body,
      before: i > 0 ? lines[i - 1].trim() : '',
    });
    for (let j = i; j <= Math.min(end, lines.length - 1); j++) inCode[j] = true;
    i = end;
  }
  return { lines, inCode, blocks };
}

/** Every fenced block of `text`, in order. */
export function fencedBlocks(text: string): FencedBlock[] {
  return scan(text).blocks;
}

/** A heading. */
export interface Heading {
  line: number;
  level: number;
  text: string;
  /** Its anchor as GitHub makes it (duplicates numbered -1, -2, ...). */
  slug: string;
}

/** A heading's text as rendered: links as their text, emphasis and HTML tags as their content, code spans verbatim. */
function plainText(markdown: string): string {
  // Odd parts are code spans' contents: `<name>` in one is text, not a tag.
  return markdown
    .split(/`+([^`]*)`+/)
    .map((part, i) =>
      i % 2 === 1
        ? part
        : part
            .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
            .replace(/!?\[([^\]]*)\]\[[^\]]*\]/g, '$1')
            .replace(/<[^>]+>/g, '')
            .replace(/(\*\*|__|\*)/g, ''),
    )
    .join('')
    .trim();
}

/** GitHub's anchor of a heading's text (github-slugger): lower-cased, punctuation dropped, each space a hyphen. */
export function slugOf(text: string): string {
  return plainText(text)
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every heading of `text` outside code, with its GitHub anchor. */
export function headings(text: string): Heading[] {
  const { lines, inCode } = scan(text);
  const found: Heading[] = [];
  const seen = new Map<string, number>();
  const add = (line: number, level: number, raw: string) => {
    const base = slugOf(raw);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    found.push({ line, level, text: plainText(raw), slug: count === 0 ? base : `${base}-${count}` });
  };
  lines.forEach((line, i) => {
    if (inCode[i]) return;
    const atx = /^ {0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$/.exec(line);
    if (atx) return add(i + 1, atx[1].length, atx[2] ?? '');
    const setext = /^ {0,3}(=+|-+)\s*$/.exec(line);
    const previous = lines[i - 1];
    if (setext && i > 0 && !inCode[i - 1] && previous.trim() !== '' && !/^\s*([-*+>|#<]|\d+[.)])/.test(previous))
      add(i, setext[1][0] === '=' ? 1 : 2, previous.trim());
  });
  return found;
}

/** The anchors of `text`: its headings' slugs and the ids and names of its HTML anchors (`<a id="x">`). */
export function anchors(text: string): Set<string> {
  const html = [...text.matchAll(/<a\s+(?:[^>]*\s)?(?:id|name)="([^"]+)"/g)].map((m) => m[1]);
  return new Set([...headings(text).map((h) => h.slug), ...html]);
}

/** The 1-based lines [start, end) of the section under the heading `title` (up to the next heading of its level or above). */
export function sectionLines(text: string, title: string): { start: number; end: number } | undefined {
  const all = headings(text);
  const at = all.findIndex((h) => h.text === title);
  if (at < 0) return undefined;
  const next = all.slice(at + 1).find((h) => h.level <= all[at].level);
  return { start: all[at].line, end: next ? next.line : text.split('\n').length + 1 };
}

/** A link in the text. */
export interface Link {
  line: number;
  target: string;
}

/** Every link target of `text` outside code: inline links and images, reference definitions, HTML href and src. */
export function links(text: string): Link[] {
  const { lines, inCode } = scan(text);
  const found: Link[] = [];
  lines.forEach((raw, i) => {
    if (inCode[i]) return;
    // Code spans hold no links: blank them out, keeping the columns.
    const line = raw.replace(/(`+)(?:(?!\1).)*?\1/g, (span) => ' '.repeat(span.length));
    const push = (target: string) => found.push({ line: i + 1, target: target.trim() });
    for (const m of line.matchAll(/!?\[(?:[^[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)/g))
      push(m[1].replace(/^<|>$/g, ''));
    const definition = /^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/.exec(line);
    if (definition) push(definition[1].replace(/^<|>$/g, ''));
    for (const m of line.matchAll(/<(?:a|img)\s[^>]*?(?:href|src)="([^"]*)"/g)) push(m[1]);
  });
  return found;
}

/** Whether a link target leaves the repository: a scheme (https:, mailto:) or a protocol-relative address. */
export const isExternal = (target: string): boolean => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//');

/** A marker pair `<!-- NAME: WORDS -->` ... `<!-- /NAME -->` outside code, and what is between them. */
export interface MarkerPair {
  /** 1-based line of the opening marker. */
  line: number;
  /** The words after `NAME:`, spaces collapsed. */
  words: string;
  /** Line indexes (0-based) of the opening and the closing marker. */
  open: number;
  close: number;
}

/**
 * Every `<!-- name: words -->` ... `<!-- /name -->` pair of `text`, each marker alone on its line.
 * @throws Error naming the line of an opening marker without its closing one, or a closing one without an opening one
 */
export function markerPairs(text: string, name: string, file = 'the text'): MarkerPair[] {
  const { lines, inCode } = scan(text);
  const openRe = new RegExp(`^\\s*<!--\\s*${name}:\\s*(.*?)\\s*-->\\s*$`);
  const closeRe = new RegExp(`^\\s*<!--\\s*/${name}\\s*-->\\s*$`);
  const pairs: MarkerPair[] = [];
  let open: { index: number; words: string } | undefined;
  lines.forEach((line, i) => {
    if (inCode[i]) return;
    const opening = openRe.exec(line);
    if (opening) {
      if (open) throw new Error(`${file}:${open.index + 1}: <!-- ${name}: ${open.words} --> has no <!-- /${name} -->`);
      open = { index: i, words: opening[1].replace(/\s+/g, ' ') };
    } else if (closeRe.test(line)) {
      if (!open) throw new Error(`${file}:${i + 1}: <!-- /${name} --> closes no <!-- ${name}: ... -->`);
      pairs.push({ line: open.index + 1, words: open.words, open: open.index, close: i });
      open = undefined;
    }
  });
  if (open) throw new Error(`${file}:${open.index + 1}: <!-- ${name}: ${open.words} --> has no <!-- /${name} -->`);
  return pairs;
}

/** `text` with what is between each marker pair replaced by `fill(pair)` (a line or lines, no trailing newline). */
export function fillMarkers(text: string, name: string, fill: (pair: MarkerPair) => string, file?: string): string {
  const lines = text.split('\n');
  const pairs = markerPairs(text, name, file);
  // From the last pair back, so the earlier pairs' line indexes stay right.
  for (const pair of [...pairs].reverse())
    lines.splice(pair.open + 1, pair.close - pair.open - 1, ...fill(pair).split('\n'));
  return lines.join('\n');
}
