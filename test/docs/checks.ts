// The docs tests' readings of the guides (README.md and docs/*.md): their relative links, the runnable examples of the
// README's quick start and of the local-runtime guide, and their Mermaid diagrams. Pure: each takes the project's root
// (a fixture's under test/docs/fixtures/), so the rules are tested on small files before they judge the real ones.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { anchors, fencedBlocks, isExternal, links, sectionLines } from '../../scripts/markdown';

/** Every relative link of `files` (relative to `root`) that does not resolve: a missing file, or a missing #anchor. */
export function linkProblems(root: string, files: readonly string[]): string[] {
  const problems: string[] = [];
  const anchorsOf = new Map<string, Set<string>>();
  const anchorsIn = (path: string) => {
    if (!anchorsOf.has(path)) anchorsOf.set(path, anchors(readFileSync(path, 'utf8')));
    return anchorsOf.get(path)!;
  };
  for (const file of files) {
    const from = join(root, file);
    for (const { line, target } of links(readFileSync(from, 'utf8'))) {
      if (isExternal(target) || target === '') continue;
      const hash = target.indexOf('#');
      const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
      const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
      const to =
        pathPart === '' ? from : pathPart.startsWith('/') ? join(root, pathPart) : resolve(dirname(from), pathPart);
      const where = `${file}:${line}: ${target}`;
      if (relative(root, to).startsWith('..')) problems.push(`${where}: leaves the repository`);
      else if (!existsSync(to)) problems.push(`${where}: no such file (${relative(root, to)})`);
      else if (anchor !== undefined && statSync(to).isFile() && to.endsWith('.md') && !anchorsIn(to).has(anchor))
        problems.push(`${where}: ${relative(root, to)} has no heading or anchor "#${anchor}"`);
    }
  }
  return problems;
}

/** How the docs test runs a ```sh example: as is, against the one `npm start -- --serve` session, or not at all. */
export type ExampleMode = 'run' | 'serve' | 'skip';

export interface Example {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  mode: ExampleMode;
  /** Why a skipped example is not run. */
  reason?: string;
  body: string;
}

/** Where the runnable examples are: a file, and the section of it (its heading's text), or all of it. */
export const RUNNABLE = [
  { file: 'README.md', section: 'Quick start' },
  { file: 'docs/local-runtime.md', section: undefined },
] as const;

/** `<!-- example: serve -->`, `<!-- example: skip (reason) -->`: the comment on the line right before a fence. */
const EXAMPLE_COMMENT = /^<!--\s*example:\s*(.*?)\s*-->$/;
/** Shell fences the examples might use by mistake: only ```sh is run. */
const OTHER_SHELLS = new Set(['bash', 'shell', 'zsh', 'console']);

/** A block's mode from the comment before it, or the problem with that comment. */
function modeOf(before: string): { mode: ExampleMode; reason?: string } | { problem: string } {
  const comment = EXAMPLE_COMMENT.exec(before);
  if (!comment) return { mode: 'run' };
  const [, what] = comment;
  if (what === 'serve') return { mode: 'serve' };
  const skip = /^skip(?:\s*\((.*)\))?$/.exec(what);
  if (!skip) return { problem: `<!-- example: ${what} -->: the modes are serve and skip (<reason>)` };
  const reason = skip[1]?.trim();
  if (!reason) return { problem: '<!-- example: skip --> needs its reason: <!-- example: skip (<reason>) -->' };
  return { mode: 'skip', reason };
}

/**
 * The ```sh examples of the runnable sections, each with its mode; and the problems: a section or file that is missing,
 * an example comment (anywhere in `files`) that is malformed or a skip without its reason, and a runnable section's shell
 * block fenced as bash/shell/console (which would never run).
 */
export function examples(root: string, files: readonly string[]): { examples: Example[]; problems: string[] } {
  const found: Example[] = [];
  const problems: string[] = [];
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const block of fencedBlocks(text)) {
      const mode = modeOf(block.before);
      if ('problem' in mode) problems.push(`${file}:${block.line}: ${mode.problem}`);
    }
  }
  for (const { file, section } of RUNNABLE) {
    if (!existsSync(join(root, file))) {
      problems.push(`${file} is missing: its examples are run by this test`);
      continue;
    }
    const text = readFileSync(join(root, file), 'utf8');
    const range = section === undefined ? { start: 1, end: Number.POSITIVE_INFINITY } : sectionLines(text, section);
    if (!range) {
      problems.push(`${file} has no "${section}" section: its examples are run by this test`);
      continue;
    }
    for (const block of fencedBlocks(text).filter((b) => b.line > range.start && b.line < range.end)) {
      if (OTHER_SHELLS.has(block.lang))
        problems.push(
          `${file}:${block.line}: a \`\`\`${block.lang} block here is never run: fence it \`\`\`sh (or \`\`\`text)`,
        );
      if (block.lang !== 'sh') continue;
      const mode = modeOf(block.before);
      if ('problem' in mode) continue;
      found.push({ file, line: block.line, ...mode, body: block.body });
    }
  }
  return { examples: found, problems };
}

/** A Mermaid diagram: where it is and its text. */
export interface Diagram {
  file: string;
  line: number;
  body: string;
}

/** Every ```mermaid block of `files`. */
export function diagrams(root: string, files: readonly string[]): Diagram[] {
  return files.flatMap((file) =>
    fencedBlocks(readFileSync(join(root, file), 'utf8'))
      .filter((b) => b.lang === 'mermaid')
      .map((b) => ({ file, line: b.line, body: b.body })),
  );
}
