// The order jest starts test files in: the longest first, so that no worker is left running a long file alone at the
// end of the run. jest's own sequencer does that from the durations it cached on the last run, but a file it has no
// duration for (every file on a fresh clone, which is what CI runs) it orders by file size, and size says little here:
// a 50-line bench file waits two minutes on its quotas' windows, a 600-line unit file runs in a second. So a file
// without a cached duration takes the one test/support/durations.json records for it (the files of 20 s or more, from
// one measured run: `node scripts/test-durations.mjs <npm test -- --json output>`), else its tier's typical duration
// (the e2e files take 15 to 150 s, the integration ones 2 to 40 s, component and unit ones mostly under 3 s and 1 s),
// and files of one tier keep jest's size order. A stale figure costs only order, never a result.
// CommonJS, like jest.config.js: jest loads the sequencer without a TypeScript transform.
const { readFileSync } = require('node:fs');
const { join, relative, sep } = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

/** A file's duration when jest has none cached, by its tier (the jest project's displayName), in ms. */
const TYPICAL_MS = { e2e: 60_000, integration: 10_000, component: 3_000, unit: 500 };

const ROOT = join(__dirname, '..', '..');
/** Recorded durations by path relative to the project, in ms (test/support/durations.json). */
const RECORDED_MS = new Map(
  Object.entries(JSON.parse(readFileSync(join(__dirname, 'durations.json'), 'utf8')).seconds).map(([path, s]) => [
    path,
    s * 1000,
  ]),
);
const recorded = (path) => RECORDED_MS.get(relative(ROOT, path).split(sep).join('/'));

/** The tier a test file belongs to: its jest project's displayName (jest.config.js). */
const tierOf = (test) => {
  const name = test.context.config.displayName;
  return typeof name === 'string' ? name : name?.name;
};

class TierSequencer extends Sequencer {
  sort(tests) {
    const size = new Map(tests.map((t) => [t.path, t.context.hasteFS.getSize(t.path) ?? 0]));
    const expected = new Map(
      tests.map((t) => [t.path, this.time(t) ?? recorded(t.path) ?? TYPICAL_MS[tierOf(t)] ?? TYPICAL_MS.unit]),
    );
    for (const t of tests) t.duration = this.time(t); // as jest's own sort leaves it: its scheduler reads it
    const failed = new Map(tests.map((t) => [t.path, this.hasFailed(t)]));
    return [...tests].sort(
      (a, b) =>
        // A file that failed last time first, as jest does: its result is the one the developer is waiting for.
        Number(failed.get(b.path)) - Number(failed.get(a.path)) ||
        expected.get(b.path) - expected.get(a.path) ||
        size.get(b.path) - size.get(a.path),
    );
  }
}

module.exports = TierSequencer;
module.exports.TYPICAL_MS = TYPICAL_MS;
module.exports.RECORDED_MS = RECORDED_MS;
