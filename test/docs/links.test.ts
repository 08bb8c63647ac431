// Every relative link of the guides (README.md and docs/*.md) resolves: its file exists, and its #anchor is a heading
// of that file by GitHub's rules (or an HTML anchor), so a guide renamed or a heading reworded cannot leave a dead link.
import { join } from 'node:path';
import { guideFiles, ROOT, slugOf } from '../../scripts/markdown';
import { linkProblems } from './checks';

const FIXTURE = join(__dirname, 'fixtures', 'guides');

describe('Function: slugOf (GitHub anchors)', () => {
  it.each([
    ['Quick start', 'quick-start'],
    ['A section: with `code`, and punctuation!', 'a-section-with-code-and-punctuation'],
    ['Per job (`jobs.<name>`)', 'per-job-jobsname'],
    [
      'Pacing: the shared limiter against a per-process ticker',
      'pacing-the-shared-limiter-against-a-per-process-ticker',
    ],
    ['Before the first nightly run (go / no-go)', 'before-the-first-nightly-run-go--no-go'],
    ['[Linked](docs/x.md) *and* **bold** snake_case', 'linked-and-bold-snake_case'],
  ])('anchors %j as #%s', (heading, slug) => {
    expect(slugOf(heading)).toBe(slug);
  });
});

describe('Function: linkProblems (on test/docs/fixtures/guides)', () => {
  it('names each link whose file or anchor is missing, or that leaves the repository, with its file:line', () => {
    expect(linkProblems(FIXTURE, guideFiles(FIXTURE))).toEqual([
      'README.md:5: docs/missing.png: no such file (docs/missing.png)',
      'README.md:6: docs/nowhere.md: no such file (docs/nowhere.md)',
      'README.md:6: docs/guide.md#no-such-heading: docs/guide.md has no heading or anchor "#no-such-heading"',
      'README.md:7: ../../outside.md: leaves the repository',
    ]);
  });
});

describe('Files: README.md and docs/*.md', () => {
  it('link only to files and anchors that exist', () => {
    expect(linkProblems(ROOT, guideFiles(ROOT))).toEqual([]);
  });
});
