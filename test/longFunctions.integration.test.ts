// The long-function budget of #36: at most 8 non-test functions of 80 lines or more, each with its reason in a
// `// long-function: <why>` comment directly above it. scripts/long-functions.mjs finds them with TypeScript's parser;
// this test holds the budget, and proves on seeded files that the script sees a long function and its reason.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..');
const SCRIPT = join(ROOT, 'scripts/long-functions.mjs');
const BUDGET = 8;

interface LongFunction {
  file: string;
  name: string;
  lines: number;
  line: number;
  reason?: string;
}

function longFunctions(cwd: string): LongFunction[] {
  // The script resolves TypeScript from its own place, so a seeded folder outside the repository is read the same.
  const run = spawnSync(process.execPath, [SCRIPT, '--json'], { cwd, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`long-functions.mjs failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as LongFunction[];
}

/** A function of `lines` lines (its first and last included), optionally with a reason comment above it. */
function seeded(name: string, lines: number, reason?: string): string {
  const body = Array.from({ length: lines - 2 }, (_, i) => `  const v${i} = ${i};`).join('\n');
  return `${reason ? `// long-function: ${reason}\n` : ''}export function ${name}(): void {\n${body}\n}\n`;
}

describe('Long functions (#36)', () => {
  it(`leaves at most ${BUDGET} non-test functions of 80 lines or more in the project, each with its reason`, () => {
    const found = longFunctions(ROOT);
    expect(found.filter((f) => !f.reason).map((f) => `${f.file}:${f.line} ${f.name} (${f.lines} lines)`)).toEqual([]);
    expect(found.length).toBeLessThanOrEqual(BUDGET);
  });

  it('sees a function of 80 lines and the reason above it, and passes one of 79', () => {
    const dir = mkdtempSync(join(tmpdir(), 'long-functions-'));
    try {
      mkdirSync(join(dir, 'lib'));
      writeFileSync(join(dir, 'lib/a.ts'), seeded('eighty', 80) + seeded('seventyNine', 79));
      writeFileSync(join(dir, 'lib/b.ts'), seeded('explained', 90, 'a declarative table that reads best whole'));
      writeFileSync(join(dir, 'lib/a.test.ts'), seeded('inATest', 120));
      const found = longFunctions(dir);
      expect(found.map(({ file, name, lines, reason }) => ({ file, name, lines, reason }))).toEqual([
        { file: 'lib/b.ts', name: 'explained', lines: 90, reason: 'a declarative table that reads best whole' },
        { file: 'lib/a.ts', name: 'eighty', lines: 80, reason: undefined },
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
