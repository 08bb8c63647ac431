// Writes test/support/durations.json, the test files' typical durations the sequencer (test/support/sequencer.js)
// orders a fresh clone's run by, from one `npm test -- --json --outputFile=<file>` run:
//   node scripts/test-durations.mjs <jest json>
// Only the files of 20 s or more: the others' order matters little, and their tier's typical duration places them.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const MIN_SECONDS = 20;
const root = join(import.meta.dirname, '..');
const [input] = process.argv.slice(2);
if (!input) {
  process.stderr.write('usage: node scripts/test-durations.mjs <jest --json output>\n');
  process.exit(2);
}
const run = JSON.parse(readFileSync(input, 'utf8'));
const seconds = Object.fromEntries(
  run.testResults
    // Relative to the project the run was in (a clone's path differs): from its test/ or lambda/ folder on.
    .map((r) => [
      r.name
        .slice(r.name.search(/[\\/](test|lambda)[\\/]/) + 1)
        .split('\\')
        .join('/'),
      Math.round((r.endTime - r.startTime) / 1000),
    ])
    .filter(([, s]) => s >= MIN_SECONDS)
    .sort(([a], [b]) => (a < b ? -1 : 1)),
);
const file = join(root, 'test', 'support', 'durations.json');
writeFileSync(file, `${JSON.stringify({ seconds }, null, 2)}\n`);
process.stdout.write(
  `${Object.keys(seconds).length} files of ${MIN_SECONDS} s or more in ${relative(process.cwd(), file)}\n`,
);
