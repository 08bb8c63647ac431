// The files and config text `npm run new-job` writes for one job: the templates in scaffold/templates/*.tmpl (kept as
// plain files, so the generated code reads as code here too) with the job's names filled in, and the two config
// snippets inserted into lib/config/environments.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pascalCase } from '../lib/outputs';

/** The names one job's files use, all derived from its kebab-case name. */
export interface JobNames {
  /** kebab-case: the folder, the config key, JOB_NAME. */
  name: string;
  /** PascalCase: type names (`<Pascal>Item`); also the stack's construct ID of the job (lib/stack.ts). */
  pascal: string;
  /** camelCase: function names (`<camel>OperationId`). */
  camel: string;
  /** The job's table under appResources.tables (its logical key). */
  tableKey: string;
  /** Physical table name without the environment suffix: `<name>-items`. */
  tableBaseName: string;
}

/** The alias the job's code reads its table by (`settings.tables.items`). */
export const TABLE_ALIAS = 'items';
/** The table's key and the sparse index discovery reads (`pendingDate` exists only while an item is pending). */
export const TABLE_KEY_ATTRIBUTE = 'itemId';
export const PENDING_INDEX = 'pending-by-date';
export const PENDING_ATTRIBUTE = 'pendingDate';

export function jobNames(name: string): JobNames {
  const pascal = pascalCase(name);
  const camel = pascal.slice(0, 1).toLowerCase() + pascal.slice(1);
  return { name, pascal, camel, tableKey: `${camel}Items`, tableBaseName: `${name}-${TABLE_ALIAS}` };
}

/** Template file (under scaffold/templates) -> path it is written to, relative to the project root. */
export function templateTargets(name: string): { template: string; path: string }[] {
  return [
    { template: 'index.ts.tmpl', path: `lambda/jobs/${name}/index.ts` },
    { template: 'items.ts.tmpl', path: `lambda/jobs/${name}/items.ts` },
    { template: 'local.ts.tmpl', path: `lambda/jobs/${name}/local.ts` },
    { template: 'index.test.ts.tmpl', path: `test/lambda/jobs/${name}/index.test.ts` },
    { template: 'local.test.ts.tmpl', path: `test/lambda/jobs/${name}/local.test.ts` },
  ];
}

export const TEMPLATES_DIR = join(__dirname, 'templates');

/** Every placeholder a template may hold; a rendered file must hold none (a typo in a template fails loudly). */
const PLACEHOLDER = /__[A-Za-z_]+__/g;

export class TemplateError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TemplateError';
  }
}

/** Fills in `__JOB_NAME__`, `__Job__`, `__job__` and `__TABLE_KEY__`. @throws TemplateError on a placeholder left over. */
export function render(template: string, names: JobNames, label = 'template'): string {
  const values: Record<string, string> = { __JOB_NAME__: names.name, __Job__: names.pascal, __job__: names.camel, __TABLE_KEY__: names.tableKey };
  const out = template.replace(PLACEHOLDER, (token) => values[token] ?? token);
  const left = [...new Set(out.match(PLACEHOLDER) ?? [])];
  if (left.length > 0) throw new TemplateError(`${label}: unknown placeholder(s) ${left.join(', ')}`);
  return out;
}

/** The job's files, rendered, by their path relative to the project root. */
export function renderFiles(names: JobNames, templatesDir = TEMPLATES_DIR): { path: string; content: string }[] {
  return templateTargets(names.name).map(({ template, path }) => ({
    path,
    content: render(readFileSync(join(templatesDir, template), 'utf8'), names, template),
  }));
}

/**
 * The job's configuration, as the data lib/config/environments.ts will hold once the snippets are inserted; the
 * scaffold compares what it evaluates after the insertion with these, so the text and the data cannot drift.
 */
export function expectedConfig(names: JobNames): {
  table: { partitionKey: { name: string }; globalSecondaryIndexes: { indexName: string; partitionKey: { name: string }; sortKey: { name: string } }[] };
  job: Record<string, unknown>;
} {
  return {
    table: {
      partitionKey: { name: TABLE_KEY_ATTRIBUTE },
      globalSecondaryIndexes: [{ indexName: PENDING_INDEX, partitionKey: { name: PENDING_ATTRIBUTE }, sortKey: { name: TABLE_KEY_ATTRIBUTE } }],
    },
    job: {
      schedule: { cron: '0 4 * * ? *', timeZone: 'UTC' },
      rateLimit: { starts: 300, intervalSeconds: 60 },
      batchSize: 20,
      uses: { tables: { [TABLE_ALIAS]: { ref: names.tableKey, discover: 'query', apply: ['get', 'update'] } } },
    },
  };
}

const indent = (text: string, by: string): string =>
  text
    .split('\n')
    .map((line) => (line.length > 0 ? by + line : line))
    .join('\n');

/**
 * The table entry for appResources.tables, at the marker's indentation. `suffix` is the parameter of
 * environments.ts's appResources function (the environment's name in every table name).
 */
export function tableSnippet(names: JobNames, by: string): string {
  return indent(
    [
      `// ${names.name} (written by npm run new-job): an item carries ${PENDING_ATTRIBUTE} (its business date) only while it`,
      `// is pending, so the index holds exactly the job's work.`,
      `${names.tableKey}: {`,
      `  tableName: \`${names.tableBaseName}-\${suffix}\`,`,
      `  partitionKey: { name: '${TABLE_KEY_ATTRIBUTE}' },`,
      `  globalSecondaryIndexes: [`,
      `    { indexName: '${PENDING_INDEX}', partitionKey: { name: '${PENDING_ATTRIBUTE}' }, sortKey: { name: '${TABLE_KEY_ATTRIBUTE}' } },`,
      `  ],`,
      `},`,
    ].join('\n'),
    by,
  );
}

/** The job's entry for jobs(), at the marker's indentation. */
export function jobSnippet(names: JobNames, by: string): string {
  return indent(
    [
      `// Written by npm run new-job. EDIT: the schedule, the downstream's documented quota and the batch size. 300 starts`,
      `// a minute is 240 after the default 0.8 headroom, so a batch of 20 takes 5 s of slots, inside the 10 s short wait.`,
      `'${names.name}': {`,
      `  schedule: { cron: '0 4 * * ? *', timeZone: 'UTC' },`,
      `  rateLimit: { starts: 300, intervalSeconds: 60 },`,
      `  batchSize: 20,`,
      `  // EDIT with the code: discovery queries the pending index; apply reads an item and updates it (nothing else).`,
      `  uses: {`,
      `    tables: { ${TABLE_ALIAS}: { ref: '${names.tableKey}', discover: 'query', apply: ['get', 'update'] } },`,
      `  },`,
      `},`,
    ].join('\n'),
    by,
  );
}
