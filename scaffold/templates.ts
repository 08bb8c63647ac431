// The files and config text `new-job` writes for one job: the templates in scaffold/templates/*.tmpl (kept as plain
// files, so the generated code reads as code here too) with the job's names and imports filled in; in this repository
// the two config snippets inserted into lib/config/environments.ts, in a team's app the PacedJobs lines it prints.
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

/**
 * Where a job is written. `repository`: this repository, the reference app (the job in lambda/jobs/<name>, its tests in
 * its folder's test/, its config inserted into lib/config/environments.ts). `app`: a team's CDK app that depends
 * on the package (the job and its tests in jobs/<name>; the lines to add to its PacedJobs are printed, not inserted).
 */
export type ProjectKind = 'repository' | 'app';

/** The package's entry points a job imports in a team's app (package.json `exports`). */
export const PACKAGE_ENTRY = {
  job: 'paced-jobs/job',
  fixture: 'paced-jobs/fixture',
  testing: 'paced-jobs/testing',
} as const;

/** The folder a job's code is written to, relative to the project root. */
export const jobFolder = (name: string, kind: ProjectKind): string =>
  kind === 'app' ? `jobs/${name}` : `lambda/jobs/${name}`;

/** Template file (under scaffold/templates) -> path it is written to, relative to the project root. */
export function templateTargets(name: string, kind: ProjectKind = 'repository'): { template: string; path: string }[] {
  const code = jobFolder(name, kind);
  const tests = kind === 'app' ? code : `${code}/test`;
  return [
    { template: 'index.ts.tmpl', path: `${code}/index.ts` },
    { template: 'items.ts.tmpl', path: `${code}/items.ts` },
    { template: 'local.ts.tmpl', path: `${code}/local.ts` },
    { template: 'index.test.ts.tmpl', path: `${tests}/index.test.ts` },
    { template: 'local.test.ts.tmpl', path: `${tests}/local.test.ts` },
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

/**
 * What each placeholder stands for. The names: `__JOB_NAME__`, `__Job__`, `__job__`, `__TABLE_KEY__`. Where the job
 * is written (`kind`): the modules it imports (`__JOB_API__` and `__FIXTURE_API__` from the job's folder,
 * `__TEST_JOB_API__`, `__TEST_FIXTURE_API__`, `__TESTING_API__` and `__JOB_DIR__` from its tests), and the phrases
 * that say where its table, uses and tests are declared. In the repository the job imports the engine by relative
 * path, exactly the modules the package exports, so both kinds of job depend on the same surface.
 */
export function placeholderValues(names: JobNames, kind: ProjectKind = 'repository'): Record<string, string> {
  const values: Record<string, string> = {
    __JOB_NAME__: names.name,
    __Job__: names.pascal,
    __job__: names.camel,
    __TABLE_KEY__: names.tableKey,
  };
  const where: Record<string, string> =
    kind === 'app'
      ? {
          __JOB_API__: PACKAGE_ENTRY.job,
          __FIXTURE_API__: PACKAGE_ENTRY.fixture,
          __TEST_JOB_API__: PACKAGE_ENTRY.job,
          __TEST_FIXTURE_API__: PACKAGE_ENTRY.fixture,
          __TESTING_API__: PACKAGE_ENTRY.testing,
          __JOB_DIR__: '.',
          __NEW_JOB_COMMAND__: `npx paced-jobs new-job ${names.name}`,
          __TABLE_DECLARED__: `the table your stack passes to PacedJobs as the job's uses.tables.${TABLE_ALIAS}`,
          __USES_DECLARED__: "listed under the job's `uses` (or `settings`) in your stack's PacedJobs props",
          __TESTS_AT__: 'index.test.ts and local.test.ts beside it',
        }
      : {
          __JOB_API__: '../../job',
          __FIXTURE_API__: '../../../local/fixture',
          __TEST_JOB_API__: '../../../job',
          __TEST_FIXTURE_API__: '../../../../local/fixture',
          __TESTING_API__: '../../../../local/testing',
          __JOB_DIR__: '..',
          __NEW_JOB_COMMAND__: `npm run new-job -- ${names.name}`,
          __TABLE_DECLARED__: `appResources.tables.${names.tableKey} in lib/config/environments.ts`,
          __USES_DECLARED__: `listed under \`jobs.${names.name}.uses\` (or \`settings\`) in lib/config/environments.ts`,
          __TESTS_AT__: `lambda/jobs/${names.name}/test/`,
        };
  return { ...values, ...where };
}

/** Fills in every placeholder (placeholderValues). @throws TemplateError on a placeholder left over. */
export function render(
  template: string,
  names: JobNames,
  label = 'template',
  kind: ProjectKind = 'repository',
): string {
  const values = placeholderValues(names, kind);
  const out = template.replace(PLACEHOLDER, (token) => values[token] ?? token);
  const left = [...new Set(out.match(PLACEHOLDER) ?? [])];
  if (left.length > 0) throw new TemplateError(`${label}: unknown placeholder(s) ${left.join(', ')}`);
  return out;
}

/** The job's files, rendered, by their path relative to the project root. */
export function renderFiles(
  names: JobNames,
  templatesDir = TEMPLATES_DIR,
  kind: ProjectKind = 'repository',
): { path: string; content: string }[] {
  return templateTargets(names.name, kind).map(({ template, path }) => ({
    path,
    content: render(readFileSync(join(templatesDir, template), 'utf8'), names, template, kind),
  }));
}

/**
 * The job's configuration, as the data lib/config/environments.ts will hold once the snippets are inserted; the
 * scaffold compares what it evaluates after the insertion with these, so the text and the data cannot drift.
 */
export function expectedConfig(names: JobNames): {
  table: {
    partitionKey: { name: string };
    globalSecondaryIndexes: { indexName: string; partitionKey: { name: string }; sortKey: { name: string } }[];
  };
  job: Record<string, unknown>;
} {
  return {
    table: {
      partitionKey: { name: TABLE_KEY_ATTRIBUTE },
      globalSecondaryIndexes: [
        { indexName: PENDING_INDEX, partitionKey: { name: PENDING_ATTRIBUTE }, sortKey: { name: TABLE_KEY_ATTRIBUTE } },
      ],
    },
    job: {
      schedule: { cron: '0 4 * * ? *', timeZone: 'UTC' },
      pacing: { starts: 300, intervalSeconds: 60 },
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
      `// Written by npm run new-job. EDIT: the schedule and the downstream's documented quota (pacing.starts per interval;`,
      `// the batch size, batching window and short wait are derived from it: \`npm run ops -- limits\` shows them).`,
      `'${names.name}': {`,
      `  schedule: { cron: '0 4 * * ? *', timeZone: 'UTC' },`,
      `  pacing: { starts: 300, intervalSeconds: 60 },`,
      `  // EDIT with the code: discovery queries the pending index; apply reads an item and updates it (nothing else).`,
      `  uses: {`,
      `    tables: { ${TABLE_ALIAS}: { ref: '${names.tableKey}', discover: 'query', apply: ['get', 'update'] } },`,
      `  },`,
      `},`,
    ].join('\n'),
    by,
  );
}

/**
 * What `new-job` prints in a team's app: the job's table (keys and the sparse index the job's code reads) and its
 * entry for the app's PacedJobs: the schedule, rate and uses the repository's config gets (expectedConfig; a test holds
 * them equal), with the table passed as a construct. The entry path assumes the stack's file is one folder below the app's (bin/, lib/).
 */
export function appSnippet(names: JobNames): string {
  const table = `${names.camel}Items`;
  return [
    `// The job's table, in your stack (or pass a table it already has, with these keys and this index):`,
    `const ${table} = new dynamodb.TableV2(this, '${names.pascal}Items', {`,
    `  partitionKey: { name: '${TABLE_KEY_ATTRIBUTE}', type: dynamodb.AttributeType.STRING },`,
    `  globalSecondaryIndexes: [{`,
    `    indexName: '${PENDING_INDEX}',`,
    `    partitionKey: { name: '${PENDING_ATTRIBUTE}', type: dynamodb.AttributeType.STRING },`,
    `    sortKey: { name: '${TABLE_KEY_ATTRIBUTE}', type: dynamodb.AttributeType.STRING },`,
    `  }],`,
    `});`,
    ``,
    `// In new PacedJobs(this, ..., { jobs: { ... } }). EDIT: the schedule and the downstream's documented quota (pacing).`,
    `'${names.name}': {`,
    `  entry: path.join(__dirname, '..', 'jobs', '${names.name}', 'index.ts'),`,
    `  schedule: { cron: '0 4 * * ? *', timeZone: 'UTC' },`,
    `  pacing: { starts: 300, intervalSeconds: 60 },`,
    `  // Discovery queries the pending index; apply reads an item and updates it (nothing else).`,
    `  uses: { tables: { ${TABLE_ALIAS}: { table: ${table}, discover: 'query', apply: ['get', 'update'], indexes: ['${PENDING_INDEX}'] } } },`,
    `},`,
  ].join('\n');
}
