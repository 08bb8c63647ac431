import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EMULATED_TYPES, IGNORED_TYPES, RESOURCE_TYPES, resourceTypesMarkdown } from '../../local/plan';

describe('RESOURCE_TYPES: the one table of what the local runtime does with each resource type', () => {
  it('is the table docs/local-runtime.md shows, row for row', () => {
    const readme = readFileSync(join(__dirname, '..', '..', 'docs', 'local-runtime.md'), 'utf8');
    const shown = /<!-- resource types:[^\n]*-->\n([\s\S]*?)\n<!-- end of resource types -->/.exec(readme)?.[1];
    expect(shown).toBe(resourceTypesMarkdown());
  });

  it('derives the emulated list and the not-created list from it, with nothing in both', () => {
    expect([...EMULATED_TYPES, ...Object.keys(IGNORED_TYPES)].sort()).toEqual(Object.keys(RESOURCE_TYPES).sort());
    expect(EMULATED_TYPES.filter((t) => t in IGNORED_TYPES)).toEqual([]);
    expect(IGNORED_TYPES['AWS::IAM::Policy']).toMatch(/^not created; enforced: /);
  });
});
