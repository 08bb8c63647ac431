// Which examples the docs test runs, and how (test/docs/examples.e2e.test.ts runs them): the ```sh blocks of the
// README's quick start and of docs/local-runtime.md, each as its comment says. Tried on test/docs/fixtures/guides,
// then the real guides' comments checked: every skip says why.
import { join } from 'node:path';
import { guideFiles, ROOT } from '../../scripts/markdown';
import { examples } from './checks';

const FIXTURE = join(__dirname, 'fixtures', 'guides');

describe('Function: examples (on test/docs/fixtures/guides)', () => {
  const found = examples(FIXTURE, guideFiles(FIXTURE));

  it("takes the quick start's and the local-runtime guide's sh blocks, each with its mode", () => {
    expect(found.examples.map((e) => [`${e.file}:${e.line}`, e.mode, e.reason, e.body])).toEqual([
      ['README.md:12', 'skip', 'npm ci: the test runs in an installed clone', 'npm ci'],
      ['README.md:16', 'run', undefined, 'echo plain'],
      ['README.md:21', 'serve', undefined, 'echo served'],
      ['docs/local-runtime.md:3', 'run', undefined, 'echo one'],
      ['docs/local-runtime.md:8', 'serve', undefined, '. .local/env.sh && echo "$AWS_REGION"'],
    ]);
  });

  it('names a skip without its reason, an unknown mode and a shell block fenced so that it never runs', () => {
    expect(found.problems).toEqual([
      'docs/guide.md:16: <!-- example: skip --> needs its reason: <!-- example: skip (<reason>) -->',
      'docs/guide.md:21: <!-- example: later -->: the modes are serve and skip (<reason>)',
      'README.md:29: a ```bash block here is never run: fence it ```sh (or ```text)',
    ]);
  });

  it('names a runnable file or section that is missing', () => {
    expect(examples(FIXTURE, ['README.md']).problems).toEqual([
      'README.md:29: a ```bash block here is never run: fence it ```sh (or ```text)',
    ]);
    expect(examples(join(FIXTURE, 'docs'), ['guide.md']).problems).toEqual(
      expect.arrayContaining([
        'README.md is missing: its examples are run by this test',
        'docs/local-runtime.md is missing: its examples are run by this test',
      ]),
    );
  });
});

describe('Files: README.md and docs/*.md', () => {
  it('mark each example as run, serve or skip (<reason>), and the runnable sections exist', () => {
    const { examples: found, problems } = examples(ROOT, guideFiles(ROOT));
    expect(problems).toEqual([]);
    expect(found.filter((e) => e.mode !== 'skip').length).toBeGreaterThan(0);
  });
});
