// The configuration reference (docs/configuration.md) is the schema's own documentation: regenerated, it must be what
// the file holds, and every key must be documented with a @default that matches the schema's.
import { existsSync, readFileSync } from 'node:fs';
import {
  CONFIG_DOC_FILE,
  configurationReference,
  environmentReference,
  jobReference,
  renderModes,
  SCHEMA_FILE,
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
});

describe('Function: environmentReference', () => {
  it('documents every key of an environment, with no @default that disagrees with the schema', () => {
    expect(environmentReference().problems).toEqual([]);
  });

  it("lists the environment's keys, its app resources by key and its jobs by name", () => {
    const byKey = new Map(environmentReference().rows.map((r) => [r.key, r]));
    expect([...byKey.keys()]).toEqual(
      expect.arrayContaining([
        'account',
        'region',
        'protected',
        'appResources.create',
        'appResources.tables.<key>',
        'operatorRoles',
        'jobs.<name>',
      ]),
    );
    expect(byKey.get('region')?.default).toBe('required');
    expect(byKey.get('protected')?.default).toBe('`false`');
    expect(byKey.get('logRetentionDays')?.default).toBe('`30`');
    expect(byKey.get('operatorRoles')?.default).toBe('none (no one else may send)');
  });

  it("takes a key's meaning from the schema it is built from when the key has no JSDoc of its own, with its keys", () => {
    const tables = environmentReference().rows.find((r) => r.key === 'appResources.tables.<key>');
    expect(tables?.meaning).toMatch(/^A table the jobs read or write\. .* Its keys: `tableName`, `partitionKey`, /);
  });
});

describe('Function: renderModes', () => {
  it('lists each access mode with its table and bucket actions, as lib/config/access.ts grants them', () => {
    const lines = renderModes().split('\n');
    expect(lines.slice(0, 2)).toEqual(['| mode | table actions | bucket actions |', '| --- | --- | --- |']);
    expect(lines).toContain('| `get` | `dynamodb:GetItem`, `dynamodb:BatchGetItem` | `s3:GetObject` |');
    expect(lines).toContain('| `list` |  | `s3:ListBucket` |');
  });
});

describe('File: docs/configuration.md', () => {
  it('is what the schema generates (run `npm run docs:generate` after changing lib/config/schema.ts)', () => {
    if (!existsSync(CONFIG_DOC_FILE))
      throw new Error(`${CONFIG_DOC_FILE} is missing: run \`npm run docs:generate\` to write it`);
    const { text, problems } = configurationReference();
    expect(problems).toEqual([]);
    const file = readFileSync(CONFIG_DOC_FILE, 'utf8');
    if (file !== text) {
      const [want, have] = [text.split('\n'), file.split('\n')];
      const differs = want.findIndex((line, i) => line !== have[i]);
      const at = differs < 0 ? want.length : differs;
      throw new Error(
        'docs/configuration.md differs from what lib/config/schema.ts generates: run `npm run docs:generate`\n' +
          `first difference, line ${at + 1}:\n  generated: ${want[at]}\n  file:      ${have[at]}`,
      );
    }
  });
});
