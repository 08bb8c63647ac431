import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { environmentSchema, jobSchema } from '../../lib/config/schema';
import { run } from '../../scaffold/cli';
import {
  ENVIRONMENTS_FILE,
  JOBS_MARKER,
  MAX_NAME_LENGTH,
  type ProjectState,
  ScaffoldError,
  TABLES_MARKER,
  evaluateEnvironments,
  fsWriter,
  planAppJob,
  planNewJob,
  projectKind,
  readAppState,
  readProjectState,
  validateName,
  writePlan,
} from '../../scaffold/newJob';
import { appSnippet, expectedConfig, jobNames, render } from '../../scaffold/templates';
import { PROJECT_ROOT } from '../support/projectCopy';

const real = readProjectState(PROJECT_ROOT);

/** The project's state with its environments.ts text replaced (and evaluated again). */
const withSource = (source: string, over: Partial<ProjectState> = {}): ProjectState => ({
  ...real,
  environmentsSource: source,
  environments: evaluateEnvironments(source, real.environmentsPath),
  ...over,
});

const planError = (name: string, state: ProjectState = real): ScaffoldError => {
  try {
    planNewJob(name, state);
  } catch (error) {
    if (error instanceof ScaffoldError) return error;
    throw error;
  }
  throw new Error(`planNewJob accepted "${name}"`);
};

describe('Function: validateName', () => {
  const KEBAB =
    'it must match /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/ (lower-case letters and digits in words joined by single hyphens, starting with a letter)';

  it.each([
    'Invoice-Sync',
    'invoice_sync',
    'invoice--sync',
    'invoice-sync-',
    '-invoice',
    '9-lives',
    'invoice sync',
    '',
  ])('refuses %j as not kebab-case', (name) => {
    expect(validateName(name, real)).toEqual({
      rule: 'kebab-case',
      message: `job name "${name}" breaks the kebab-case rule: ${KEBAB}`,
    });
  });

  it.each([
    ['ab', 2],
    ['a'.repeat(33), 33],
  ])('refuses %j as too short or too long', (name, length) => {
    expect(validateName(name, real)).toEqual({
      rule: 'length',
      message: `job name "${name}" breaks the length rule: a job name has 3 to 32 characters (the jobs key in lib/config/schema.ts); this one has ${length}`,
    });
  });

  it('allows exactly the lengths the config schema allows for a jobs key', () => {
    const keys = environmentSchema.shape.jobs.keyType;
    expect(validateName('a'.repeat(MAX_NAME_LENGTH), real)).toBeUndefined();
    expect(keys.safeParse('a'.repeat(MAX_NAME_LENGTH)).success).toBe(true);
    expect(keys.safeParse('a'.repeat(MAX_NAME_LENGTH + 1)).success).toBe(false);
    expect(validateName('abc', real)).toBeUndefined();
    expect(keys.safeParse('ab').success).toBe(false);
  });

  it('refuses a name whose producer function name would be too long in some environment', () => {
    const state = {
      ...real,
      environments: { ...real.environments, 'qa-environment-with-a-long-name': real.environments.dev },
    };
    const fn = 'PacedJobs-qa-environment-with-a-long-name-invoice-sync-items-producer';
    expect(validateName('invoice-sync-items', state)).toEqual({
      rule: 'length',
      message: `job name "invoice-sync-items" breaks the length rule: its producer function name in environment qa-environment-with-a-long-name, "${fn}", would have ${fn.length} characters; Lambda allows 64`,
    });
  });

  it.each(['adapters', 'core', 'handlers', 'jobs', 'sdk-slim'])('refuses %j, a folder under lambda/', (name) => {
    expect(validateName(name, real)).toEqual({
      rule: 'reserved',
      message: `job name "${name}" breaks the reserved rule: "${name}" is a folder under lambda/ (adapters, core, handlers, jobs, sdk-slim); a job of that name would read as part of the runtime in imports, logs and metrics`,
    });
  });

  it.each(['schedule-group', 'schedule-group-nightly'])('refuses %j, the alarm subject of schedule groups', (name) => {
    expect(validateName(name, real)).toEqual({
      rule: 'reserved',
      message: `job name "${name}" breaks the reserved rule: names starting with "schedule-group" are reserved: the alarms of a schedule group are named <stack>-schedule-group-<group>-<what>, a job's <stack>-<job>-<what>`,
    });
  });

  it.each([
    ['app-resources', 'AppResources'],
    ['state', 'State'],
    ['monitoring', 'Monitoring'],
    ['sdk-slim-layer', 'SdkSlimLayer'],
  ])("refuses %j, whose construct ID is one of the stack's own", (name, id) => {
    expect(validateName(name, real)).toEqual({
      rule: 'reserved',
      message: `job name "${name}" breaks the reserved rule: its construct ID "${id}" (the name in PascalCase) is one the stack uses for itself (AppResources, State, Monitoring, SdkSlimLayer, ScheduleGroup, CDKMetadata)`,
    });
  });

  it("refuses an existing job folder (which holds the job's tests too)", () => {
    const state = { ...real, exists: (path: string) => path === 'lambda/jobs/invoice-sync' || real.exists(path) };
    expect(validateName('invoice-sync', state)).toEqual({
      rule: 'taken',
      message: 'job name "invoice-sync" breaks the taken rule: lambda/jobs/invoice-sync already exists',
    });
  });

  it('refuses a name configured in some environment, though it has no folder', () => {
    const dev = real.environments.dev;
    const state = {
      ...real,
      environments: {
        ...real.environments,
        dev: { ...dev, jobs: { ...dev.jobs, 'ghost-job': jobSchema.parse(expectedConfig(jobNames('ghost-job')).job) } },
      },
    };
    expect(validateName('ghost-job', state)).toEqual({
      rule: 'taken',
      message:
        'job name "ghost-job" breaks the taken rule: jobs.ghost-job is already configured in lib/config/environments.ts (dev)',
    });
  });

  it('refuses a name whose table key is configured already', () => {
    const prod = real.environments.prod;
    const appResources = {
      ...prod.appResources,
      tables: { ...prod.appResources?.tables, ghostJobItems: { tableName: 'ghost', partitionKey: { name: 'id' } } },
    };
    const state = { ...real, environments: { ...real.environments, prod: { ...prod, appResources } } };
    expect(validateName('ghost-job', state)?.message).toBe(
      'job name "ghost-job" breaks the taken rule: appResources.tables.ghostJobItems, the job\'s table, is already configured in lib/config/environments.ts (prod)',
    );
  });

  it('refuses a name with the construct ID of an existing job', () => {
    const state = { ...real, jobFolders: [...real.jobFolders, 'job-2x'] };
    expect(validateName('job2x', state)?.message).toBe(
      'job name "job2x" breaks the taken rule: the job "job-2x" has the same construct ID "Job2x"',
    );
  });

  it.each([
    ['invoice-sync-admission', 'invoice-sync', 'InvoiceSyncAdmissionQueueUrl'],
    ['invoice-sync-producer', 'invoice-sync', 'InvoiceSyncProducerDlqUrl'],
  ])('refuses %j, whose stack outputs would be named like those of %s', (name, other, output) => {
    const state = { ...real, jobFolders: [...real.jobFolders, other] };
    expect(validateName(name, state)).toEqual({
      rule: 'taken',
      message: `job name "${name}" breaks the taken rule: the job "${other}" already has an output named ${output}`,
    });
  });

  it('accepts a new kebab-case name', () => {
    expect(validateName('invoice-sync', real)).toBeUndefined();
  });
});

describe('Function: planNewJob', () => {
  it("throws the name's broken rule as a ScaffoldError", () => {
    const error = planError('Invoice');
    expect(error.rule).toBe('kebab-case');
    expect(error.message).toMatch(/^job name "Invoice" breaks the kebab-case rule: /);
  });

  it("plans the job's code, fixture and tests, and one edit of the config", () => {
    const plan = planNewJob('invoice-sync', real);
    expect(plan.files.map((f) => f.path)).toEqual([
      'lambda/jobs/invoice-sync/index.ts',
      'lambda/jobs/invoice-sync/items.ts',
      'lambda/jobs/invoice-sync/local.ts',
      'lambda/jobs/invoice-sync/test/index.test.ts',
      'lambda/jobs/invoice-sync/test/local.test.ts',
    ]);
    expect(plan.files.every((f) => !/__[A-Za-z_]+__/.test(f.content))).toBe(true);
    expect(plan.files[0].content).toContain("export const JOB_NAME = 'invoice-sync';");
    expect(plan.files[0].content).toContain('export function invoiceSyncOperationId(');
    expect(plan.edits.map((e) => e.path)).toEqual([ENVIRONMENTS_FILE]);
    expect(plan.environments).toEqual(Object.keys(real.environments));
  });

  it('configures the job and its table in every environment, changing nothing else', () => {
    const { edits } = planNewJob('invoice-sync', real);
    const after = evaluateEnvironments(edits[0].after, real.environmentsPath);
    for (const [env, before] of Object.entries(real.environments)) {
      const { 'invoice-sync': job, ...otherJobs } = after[env].jobs;
      expect(job).toEqual({
        schedule: { cron: '0 4 * * ? *', timeZone: 'UTC' },
        pacing: { starts: 300, intervalSeconds: 60 },
        uses: { tables: { items: { ref: 'invoiceSyncItems', discover: 'query', apply: ['get', 'update'] } } },
      });
      expect(otherJobs).toEqual(before.jobs);
      const { invoiceSyncItems: table, ...otherTables } = after[env].appResources?.tables ?? {};
      expect(table).toEqual({
        tableName: `invoice-sync-items-${env}`,
        partitionKey: { name: 'itemId' },
        globalSecondaryIndexes: [
          { indexName: 'pending-by-date', partitionKey: { name: 'pendingDate' }, sortKey: { name: 'itemId' } },
        ],
      });
      expect(otherTables).toEqual(before.appResources?.tables);
    }
    // Inserted above each marker, which stays for the next job.
    expect(edits[0].after.split(TABLES_MARKER)).toHaveLength(2);
    expect(edits[0].after.indexOf('invoiceSyncItems: {')).toBeLessThan(edits[0].after.indexOf(TABLES_MARKER));
    expect(edits[0].after.indexOf("'invoice-sync': {")).toBeLessThan(edits[0].after.indexOf(JOBS_MARKER));
  });

  it('refuses to guess where to insert when a marker is missing', () => {
    const error = planError(
      'invoice-sync',
      withSource(real.environmentsSource.replace(JOBS_MARKER, '// (marker removed)')),
    );
    expect(error.message).toBe(
      'lib/config/environments.ts: the marker line "// new-job: jobs above" must appear exactly once (found 0); it shows the scaffold where to insert the new job',
    );
    expect(error.rule).toBeUndefined();
  });

  it('refuses when an environment does not take its jobs from the function holding the marker', () => {
    // staging's jobs: the first of those the function returns, picked out of them (whichever jobs it configures).
    const source = real.environmentsSource.replace(
      /jobs: jobs\(([^)]*)\),\n {2}\},\n {2}prod/,
      'jobs: Object.fromEntries(Object.entries(jobs($1)).slice(0, 1)),\n  },\n  prod',
    );
    expect(source).not.toBe(real.environmentsSource);
    expect(planError('invoice-sync', withSource(source)).message).toBe(
      'lib/config/environments.ts: inserting job "invoice-sync" at the markers would not configure it as intended, so nothing was written:\n' +
        '  - staging lacks jobs.invoice-sync (its jobs do not come from the function holding "// new-job: jobs above")',
    );
  });

  it('refuses a job whose table name is already in use, as taken', () => {
    const source = real.environmentsSource.replace(
      `    ${TABLES_MARKER}`,
      `    legacy: { tableName: \`invoice-sync-items-\${suffix}\`, partitionKey: { name: 'id' } },\n    ${TABLES_MARKER}`,
    );
    const error = planError('invoice-sync', withSource(source));
    expect(error.rule).toBe('taken');
    expect(error.message).toBe(
      'job name "invoice-sync" breaks the taken rule: the job\'s table name "invoice-sync-items-dev" is already used by appResources.tables.legacy in dev',
    );
  });
});

describe('Function: render', () => {
  it('fills in every placeholder and refuses one it does not know', () => {
    const names = jobNames('invoice-sync');
    expect(render("__JOB_NAME__ __Job__Item __job__OperationId '__TABLE_KEY__'", names)).toBe(
      "invoice-sync InvoiceSyncItem invoiceSyncOperationId 'invoiceSyncItems'",
    );
    expect(() => render('__JOB_NAME__ __Typo__', names, 'index.ts.tmpl')).toThrow(
      'index.ts.tmpl: unknown placeholder(s) __Typo__',
    );
  });

  it("imports the engine through the package's entry points in an app, by relative path to the same modules here", () => {
    const names = jobNames('invoice-sync');
    const imports =
      "'__JOB_API__' '__FIXTURE_API__' '__TEST_JOB_API__' '__TEST_FIXTURE_API__' '__TESTING_API__' '__JOB_DIR__/index'";
    expect(render(imports, names, 'imports', 'app')).toBe(
      "'paced-jobs/job' 'paced-jobs/fixture' 'paced-jobs/job' 'paced-jobs/fixture' 'paced-jobs/testing' './index'",
    );
    expect(render(imports, names, 'imports', 'repository')).toBe(
      "'../../job' '../../../local/fixture' '../../../job' '../../../../local/fixture' '../../../../local/testing' '../index'",
    );
  });
});

/** A minimal project: the real environments.ts and the folders the rules look at. */
function fakeProject(): string {
  const root = mkdtempSync(join(tmpdir(), 'new-job-unit-'));
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'paced-jobs' }));
  mkdirSync(join(root, 'lib', 'config'), { recursive: true });
  cpSync(join(PROJECT_ROOT, ENVIRONMENTS_FILE), join(root, ENVIRONMENTS_FILE));
  for (const dir of ['adapters', 'core', 'handlers', 'sdk-slim', ...real.jobFolders.map((job) => `jobs/${job}`)]) {
    mkdirSync(join(root, 'lambda', dir), { recursive: true });
  }
  return root;
}

const listTree = (root: string): string[] =>
  readdirSync(root, { recursive: true, withFileTypes: true })
    .map((e) => `${join(e.parentPath, e.name).slice(root.length + 1)}${e.isDirectory() ? '/' : ''}`)
    .sort();

describe('Function: writePlan', () => {
  let root: string;
  beforeEach(() => {
    root = fakeProject();
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('writes every planned file and the config edit', () => {
    const plan = planNewJob('invoice-sync', readProjectState(root));
    writePlan(root, plan);
    for (const file of plan.files) expect(readFileSync(join(root, file.path), 'utf8')).toBe(file.content);
    expect(readFileSync(join(root, ENVIRONMENTS_FILE), 'utf8')).toBe(plan.edits[0].after);
  });

  it('removes what it wrote when the config edit fails', () => {
    const before = listTree(root);
    const original = readFileSync(join(root, ENVIRONMENTS_FILE), 'utf8');
    const plan = planNewJob('invoice-sync', readProjectState(root));
    const failing = {
      ...fsWriter,
      overwrite: (path: string, content: string) =>
        content === original ? fsWriter.overwrite(path, content) : failWith('disk full'),
    };
    let error: unknown;
    try {
      writePlan(root, plan, failing);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ScaffoldError);
    expect((error as ScaffoldError).message).toBe(
      'new-job invoice-sync: editing lib/config/environments.ts failed (disk full); removed what it had written',
    );
    expect(((error as ScaffoldError).cause as Error).message).toBe('disk full');
    expect(listTree(root)).toEqual(before);
    expect(readFileSync(join(root, ENVIRONMENTS_FILE), 'utf8')).toBe(original);
  });

  it('removes what it wrote when a file cannot be created part-way', () => {
    const before = listTree(root);
    const plan = planNewJob('invoice-sync', readProjectState(root));
    let created = 0;
    const failing = {
      ...fsWriter,
      create: (path: string, content: string) =>
        ++created === 4 ? failWith('no space') : fsWriter.create(path, content),
    };
    expect(() => writePlan(root, plan, failing)).toThrow(
      'new-job invoice-sync: writing lambda/jobs/invoice-sync/test/index.test.ts failed (no space); removed what it had written',
    );
    expect(listTree(root)).toEqual(before);
  });

  it('refuses to overwrite a config changed since it was planned, and removes the new files', () => {
    const before = listTree(root);
    const plan = planNewJob('invoice-sync', readProjectState(root));
    const changed = `${plan.edits[0].before}\n// someone else's edit\n`;
    fsWriter.overwrite(join(root, ENVIRONMENTS_FILE), changed);
    expect(() => writePlan(root, plan)).toThrow(
      'new-job invoice-sync: editing lib/config/environments.ts failed (lib/config/environments.ts changed since the scaffold read it); removed what it had written',
    );
    expect(listTree(root)).toEqual(before);
    expect(readFileSync(join(root, ENVIRONMENTS_FILE), 'utf8')).toBe(changed);
  });
});

function failWith(message: string): never {
  throw new Error(message);
}

describe('Function: run (the new-job command)', () => {
  let root: string;
  let out: string;
  let err: string;
  const io = { out: (t: string) => void (out += t), err: (t: string) => void (err += t) };
  beforeEach(() => {
    root = fakeProject();
    out = '';
    err = '';
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("exits 1 with the rule's message and writes nothing for a bad name", async () => {
    const before = listTree(root);
    await expect(run(['Invoice_Sync', '--root', root], io)).resolves.toBe(1);
    expect(err).toBe(
      'new-job: job name "Invoice_Sync" breaks the kebab-case rule: it must match /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/ (lower-case letters and digits in words joined by single hyphens, starting with a letter)\n',
    );
    expect(out).toBe('');
    expect(listTree(root)).toEqual(before);
  });

  it('exits 1 for a name that is taken', async () => {
    mkdirSync(join(root, 'lambda/jobs/invoice-sync'));
    await expect(run(['invoice-sync', '--root', root], io)).resolves.toBe(1);
    expect(err).toBe(
      'new-job: job name "invoice-sync" breaks the taken rule: lambda/jobs/invoice-sync already exists\n',
    );
  });

  it('exits 1 naming the file it needs when --root is this repository without its config', async () => {
    rmSync(join(root, ENVIRONMENTS_FILE));
    const before = listTree(root);
    await expect(run(['invoice-sync', '--root', root], io)).resolves.toBe(1);
    expect(err).toMatch(
      new RegExp(`^new-job: ${root} does not look like this project: cannot read lib/config/environments.ts \\(ENOENT`),
    );
    expect(listTree(root)).toEqual(before);
  });

  it('exits 1 naming what it needs when --root is neither this repository nor an app', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'new-job-empty-'));
    try {
      await expect(run(['invoice-sync', '--root', empty], io)).resolves.toBe(1);
      expect(err).toMatch(
        new RegExp(
          `^new-job: ${empty} is not a project new-job can add a job to: cannot read its package.json \\(ENOENT`,
        ),
      );
      expect(readdirSync(empty)).toEqual([]);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('exits 2 with usage when the name is missing', async () => {
    await expect(run(['--root', root], io)).resolves.toBe(2);
    expect(err).toContain("error: missing required argument 'name'");
  });

  it('with --dry-run, lists what it would write and writes nothing', async () => {
    const before = listTree(root);
    await expect(run(['invoice-sync', '--root', root, '--dry-run'], io)).resolves.toBe(0);
    expect(out).toContain('Would write job "invoice-sync":\n  lambda/jobs/invoice-sync/index.ts\n');
    expect(listTree(root)).toEqual(before);
  });

  it('writes the job and lists the files, then refuses the same name again', async () => {
    await expect(run(['invoice-sync', '--root', root], io)).resolves.toBe(0);
    expect(out.split('\n').slice(0, 7)).toEqual([
      'Wrote job "invoice-sync":',
      '  lambda/jobs/invoice-sync/index.ts',
      '  lambda/jobs/invoice-sync/items.ts',
      '  lambda/jobs/invoice-sync/local.ts',
      '  lambda/jobs/invoice-sync/test/index.test.ts',
      '  lambda/jobs/invoice-sync/test/local.test.ts',
      '  lib/config/environments.ts (appResources.tables.invoiceSyncItems and jobs.invoice-sync, in dev, staging, prod)',
    ]);
    expect(existsSync(join(root, 'lambda/jobs/invoice-sync/local.ts'))).toBe(true);
    const after = listTree(root);
    await expect(run(['invoice-sync', '--root', root], io)).resolves.toBe(1);
    expect(err).toBe(
      'new-job: job name "invoice-sync" breaks the taken rule: lambda/jobs/invoice-sync already exists\n',
    );
    expect(listTree(root)).toEqual(after);
  });
});

/** A team's CDK app: a package.json that depends on the package, and a jobs/ folder with one job. */
function fakeApp(manifest: object = { name: 'team-app', dependencies: { 'paced-jobs': '^0.1.0' } }): string {
  const root = mkdtempSync(join(tmpdir(), 'new-job-app-'));
  writeFileSync(join(root, 'package.json'), JSON.stringify(manifest));
  mkdirSync(join(root, 'jobs', 'usage-report'), { recursive: true });
  return root;
}

describe('Function: projectKind', () => {
  const roots: string[] = [];
  afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));
  const app = (manifest: object) => {
    const root = fakeApp(manifest);
    roots.push(root);
    return root;
  };

  it('is this repository for the package itself, and an app for a package.json depending on it', () => {
    expect(projectKind(PROJECT_ROOT)).toBe('repository');
    expect(projectKind(app({ name: 'team-app', dependencies: { 'paced-jobs': 'file:../paced-jobs-0.1.0.tgz' } }))).toBe(
      'app',
    );
    expect(projectKind(app({ name: 'team-app', devDependencies: { 'paced-jobs': '^0.1.0' } }))).toBe('app');
  });

  it('throws naming the missing dependency for any other project', () => {
    const other = app({ name: 'team-app', dependencies: { 'aws-cdk-lib': '^2.0.0' } });
    expect(() => projectKind(other)).toThrow(
      new ScaffoldError(
        `${other} is not a project new-job can add a job to: its package.json does not depend on paced-jobs (run npm install paced-jobs there first)`,
      ),
    );
  });
});

describe('Function: planAppJob', () => {
  let root: string;
  beforeEach(() => {
    root = fakeApp();
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('plans the job, its fixture and its tests in jobs/<name>, importing the engine only through the package', () => {
    const plan = planAppJob('export-expiry', readAppState(root));
    expect(plan.files.map((f) => f.path)).toEqual([
      'jobs/export-expiry/index.ts',
      'jobs/export-expiry/items.ts',
      'jobs/export-expiry/local.ts',
      'jobs/export-expiry/index.test.ts',
      'jobs/export-expiry/local.test.ts',
    ]);
    expect(plan.edits).toEqual([]);
    const imported = plan.files.flatMap((f) => [...f.content.matchAll(/from '([^']+)'/g)].map((m) => m[1]));
    const outside = imported.filter(
      (i) => !/^(paced-jobs\/(job|fixture|testing)|@aws-sdk\/[a-z0-9-]+|zod\/mini|\.\/(index|items|local))$/.test(i),
    );
    expect(outside).toEqual([]);
    expect(new Set(imported.filter((i) => i.startsWith('paced-jobs')))).toEqual(
      new Set(['paced-jobs/job', 'paced-jobs/fixture', 'paced-jobs/testing']),
    );
    // Nothing points the reader at this repository's files.
    expect(
      plan.files.filter((f) => /lib\/config|lambda\/|test\/lambda|npm run new-job/.test(f.content)).map((f) => f.path),
    ).toEqual([]);
  });

  it('refuses a name whose folder exists, or whose construct ID another job in jobs/ has', () => {
    expect(() => planAppJob('usage-report', readAppState(root))).toThrow(
      new ScaffoldError('job name "usage-report" breaks the taken rule: jobs/usage-report already exists', 'taken'),
    );
    mkdirSync(join(root, 'jobs', 'export-expiry2'));
    expect(() => planAppJob('export-expiry-2', readAppState(root))).toThrow(
      new ScaffoldError(
        'job name "export-expiry-2" breaks the taken rule: the job "export-expiry2" has the same construct ID "ExportExpiry2"',
        'taken',
      ),
    );
  });

  it('holds the name to the rules a job name has anywhere', () => {
    expect(() => planAppJob('Export_Expiry', readAppState(root))).toThrow(/breaks the kebab-case rule/);
    expect(() => planAppJob('schedule-group-x', readAppState(root))).toThrow(
      /breaks the reserved rule: names starting with "schedule-group" are reserved/,
    );
    expect(() => planAppJob('state', readAppState(root))).toThrow(/breaks the reserved rule: its construct ID "State"/);
  });
});

describe('Function: appSnippet', () => {
  it("is a table and a PacedJobs entry that read as the repository's config of the same job, the table a construct", () => {
    const names = jobNames('export-expiry');
    const [tablePart, jobPart] = appSnippet(names).split('\n\n');
    const created: { id: string; props: unknown }[] = [];
    const dynamodb = {
      AttributeType: { STRING: 'S' },
      TableV2: class {
        constructor(_scope: unknown, id: string, props: unknown) {
          created.push({ id, props });
        }
      },
    };
    const path = { join: (...parts: string[]) => join(...parts) };
    // eslint-disable-next-line @typescript-eslint/no-implied-eval
    const evaluate = new Function(
      'dynamodb',
      'path',
      '__dirname',
      `${tablePart}\nreturn { table: exportExpiryItems, jobs: {${jobPart}} };`,
    ) as (...args: unknown[]) => { table: unknown; jobs: Record<string, Record<string, unknown>> };
    const { table, jobs } = evaluate.call({}, dynamodb, path, '/app/bin');

    const expected = expectedConfig(names);
    expect(created).toEqual([
      {
        id: 'ExportExpiryItems',
        props: {
          partitionKey: { name: expected.table.partitionKey.name, type: 'S' },
          globalSecondaryIndexes: expected.table.globalSecondaryIndexes.map((i) => ({
            indexName: i.indexName,
            partitionKey: { ...i.partitionKey, type: 'S' },
            sortKey: { ...i.sortKey, type: 'S' },
          })),
        },
      },
    ]);
    const { uses, ...settings } = expected.job as { uses: { tables: { items: { ref: string } } } };
    const { ref: _ref, ...modes } = uses.tables.items;
    expect(jobs).toEqual({
      'export-expiry': {
        entry: '/app/jobs/export-expiry/index.ts',
        ...settings,
        uses: { tables: { items: { table, ...modes, indexes: ['pending-by-date'] } } },
      },
    });
  });
});

describe("Function: run (the new-job command), in a team's app", () => {
  let root: string;
  let out: string;
  let err: string;
  const io = { out: (t: string) => void (out += t), err: (t: string) => void (err += t) };
  beforeEach(() => {
    root = fakeApp();
    out = '';
    err = '';
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('writes the job into jobs/<name>, prints the PacedJobs lines, and edits nothing else', async () => {
    const before = listTree(root);
    const manifest = readFileSync(join(root, 'package.json'), 'utf8');
    await expect(run(['export-expiry', '--root', root], io)).resolves.toBe(0);
    expect(err).toBe('');
    expect(out.split('\n').slice(0, 9)).toEqual([
      'Wrote job "export-expiry":',
      '  jobs/export-expiry/index.ts',
      '  jobs/export-expiry/items.ts',
      '  jobs/export-expiry/local.ts',
      '  jobs/export-expiry/index.test.ts',
      '  jobs/export-expiry/local.test.ts',
      '',
      "Add it to your stack's PacedJobs (the table and the job's entry; edit both to fit):",
      '',
    ]);
    expect(out).toContain(
      appSnippet(jobNames('export-expiry'))
        .split('\n')
        .map((l) => (l ? `  ${l}` : l))
        .join('\n'),
    );
    expect(listTree(root)).toEqual(
      [
        ...before,
        'jobs/export-expiry/',
        ...['index.ts', 'items.ts', 'local.ts', 'index.test.ts', 'local.test.ts'].map((f) => `jobs/export-expiry/${f}`),
      ].sort(),
    );
    expect(readFileSync(join(root, 'package.json'), 'utf8')).toBe(manifest);

    await expect(run(['export-expiry', '--root', root], io)).resolves.toBe(1);
    expect(err).toBe('new-job: job name "export-expiry" breaks the taken rule: jobs/export-expiry already exists\n');
  });
});
