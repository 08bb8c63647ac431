// The README's per-job configuration table is the schema's own documentation: regenerated, it must be what the README
// holds, and every key must be documented with a @default that matches the schema's.
import { readFileSync } from 'node:fs';
import {
  jobReference,
  README_FILE,
  renderJobReference,
  SCHEMA_FILE,
  TABLE_END,
  TABLE_START,
  withTable,
} from '../../scripts/configReference';

describe('Function: jobReference', () => {
  it('documents every key of a job, with no @default that disagrees with the schema', () => {
    const { rows, problems } = jobReference();
    expect(problems).toEqual([]);
    expect(rows.map((r) => r.key)).toEqual(
      expect.arrayContaining([
        'pacing.starts',
        'pacing.perKey.concurrency',
        'pacing.batchSize',
        'pacing.admission.horizonSeconds',
        'uses.tables.<alias>',
      ]),
    );
  });

  it('is the table the README holds (run `npm run docs:config` after changing the schema)', () => {
    const readme = readFileSync(README_FILE, 'utf8');
    expect(withTable(readme, renderJobReference(jobReference().rows))).toBe(readme);
  });

  it('reports a @default that disagrees with the schema, and a key without JSDoc', () => {
    const source = readFileSync(SCHEMA_FILE, 'utf8')
      .replace("/** The quota's window. @default 60 */", "/** The quota's window. @default 90 */")
      .replace("/** The consumer's memory. @default 512 */", '');
    expect(jobReference(source).problems).toEqual([
      'pacing.intervalSeconds: its JSDoc says @default 90, its schema defaults to 60',
      'consumerMemoryMb has no JSDoc in lib/config/schema.ts',
    ]);
  });

  it('shows a required key as required, a default as its value, and a default code works out in words', () => {
    const byKey = new Map(jobReference().rows.map((r) => [r.key, r]));
    expect(byKey.get('pacing.starts')?.default).toBe('required');
    expect(byKey.get('pacing.headroom')?.default).toBe('`0.8`');
    expect(byKey.get('pacing.downstreamKey')?.default).toBe('the job name');
  });

  it('refuses a README without the markers', () => {
    expect(() => withTable('# no table', '')).toThrow(`README.md lacks the markers ${TABLE_START} ... ${TABLE_END}`);
  });
});
