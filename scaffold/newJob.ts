// `new-job <name>`, the part that decides: checks the name against every rule, renders the job's files (and, in this
// repository, its config, checked as synthesis will check it), all before anything is written; then writes the plan,
// removing what it wrote if a write fails. In a team's app (a package.json that depends on paced-jobs) it writes the
// job into jobs/<name> and hands back the PacedJobs lines to add. scaffold/cli.ts is the command around it.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import * as vm from 'node:vm';
import { transformSync } from 'esbuild';
import { environmentSchema, type EnvironmentInput } from '../lib/config/schema';
import { alarmName, JobAlarm } from '../lib/monitoring';
import { JobOutput, jobOutputName, StackOutput, stackName, type JobOutputKind } from '../lib/outputs';
import { MAX_FUNCTION_NAME_LENGTH } from '../lib/paced-function';
import { producerFunctionName } from '../lib/paced-job';
import {
  appSnippet,
  expectedConfig,
  jobFolder,
  jobNames,
  jobSnippet,
  renderFiles,
  tableSnippet,
  type JobNames,
  type ProjectKind,
} from './templates';

/** kebab-case: lower-case words of letters and digits joined by single hyphens, starting with a letter. */
export const KEBAB_CASE = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;
/** The lengths the `jobs` key of lib/config/schema.ts accepts (and lambda/handlers/jobLoader.ts loads). */
export const MIN_NAME_LENGTH = 3;
export const MAX_NAME_LENGTH = 32;
/** Folders under lambda/ (read from the project too; these are the ones it has today). */
export const LAMBDA_FOLDERS = ['adapters', 'core', 'handlers', 'jobs', 'sdk-slim'];
/**
 * Construct IDs the stack gives its own children at its top level (lib/stack.ts, its schedule group among them,
 * lib/sdk-layer.ts, and the CDK's metadata); a job's construct ID is its name in PascalCase, and two children with one
 * ID fail synthesis.
 */
export const STACK_CONSTRUCT_IDS = [
  'AppResources',
  'State',
  'Monitoring',
  'SdkSlimLayer',
  'ScheduleGroup',
  'CDKMetadata',
];
/** Alarm subjects of schedule groups are `schedule-group-<group>` (lib/monitoring.ts), in the same name space as jobs. */
export const RESERVED_PREFIX = 'schedule-group';
export const ENVIRONMENTS_FILE = 'lib/config/environments.ts';
export const TABLES_MARKER = '// new-job: tables above';
export const JOBS_MARKER = '// new-job: jobs above';

export type NameRule = 'kebab-case' | 'length' | 'reserved' | 'taken';

/** Why nothing was written: a broken name rule (`rule` says which), or a project the scaffold cannot extend safely. */
export class ScaffoldError extends Error {
  constructor(
    message: string,
    public readonly rule?: NameRule,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ScaffoldError';
  }
}

/** What the planner knows of the project; read from disk by readProjectState, built by hand in tests. */
export interface ProjectState {
  /** Folder names under lambda/. */
  lambdaFolders: string[];
  /** Folder names under lambda/jobs/. */
  jobFolders: string[];
  /** Whether a path relative to the project root exists. */
  exists(path: string): boolean;
  /** Absolute path of lib/config/environments.ts (its imports resolve from there). */
  environmentsPath: string;
  /** Its text. */
  environmentsSource: string;
  /** Its `environments` export, evaluated. */
  environments: Record<string, EnvironmentInput>;
}

export interface PlannedFile {
  path: string;
  content: string;
}

export interface PlannedEdit {
  path: string;
  before: string;
  after: string;
}

export interface Plan {
  /** Where the job goes: this repository, or a team's app. @default 'repository' */
  kind?: ProjectKind;
  names: JobNames;
  /** New files, relative to the root; none exists yet. */
  files: PlannedFile[];
  /** lib/config/environments.ts, before and after the insertions. */
  edits: PlannedEdit[];
  /** The environments that get the job (all of them); none in a team's app. */
  environments: string[];
  /** In a team's app: the lines to add to its PacedJobs (the job's table and its entry), printed, not written. */
  snippet?: string;
}

const subfolders = (dir: string): string[] =>
  existsSync(dir)
    ? readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name)
    : [];

/**
 * Evaluates a version of lib/config/environments.ts held in memory (esbuild strips the types, as tsx does), so the
 * scaffold sees what synthesis would see without writing the file first. Imports resolve from the real file's folder.
 * @throws ScaffoldError when the text does not compile or run, or exports no `environments`.
 */
export function evaluateEnvironments(source: string, filename: string): Record<string, EnvironmentInput> {
  let environments: unknown;
  try {
    const { code } = transformSync(source, { loader: 'ts', format: 'cjs', sourcefile: filename, target: 'node20' });
    const module = { exports: {} as Record<string, unknown> };
    const wrapper = vm.runInThisContext(`(function (exports, require, module, __filename, __dirname) {${code}\n})`, {
      filename,
    }) as (...args: unknown[]) => void;
    wrapper(module.exports, createRequire(filename), module, filename, dirname(filename));
    environments = module.exports.environments;
  } catch (error) {
    throw new ScaffoldError(`${ENVIRONMENTS_FILE}: cannot evaluate it: ${(error as Error).message}`, undefined, {
      cause: error,
    });
  }
  if (typeof environments !== 'object' || environments === null) {
    throw new ScaffoldError(`${ENVIRONMENTS_FILE}: it exports no \`environments\` object`);
  }
  // Configuration is plain data (strings, numbers, booleans); a JSON copy brings it into the caller's realm, since
  // objects made by vm.runInThisContext are never deep-equal to a test's own (jest runs tests in a vm context).
  return JSON.parse(JSON.stringify(environments)) as Record<string, EnvironmentInput>;
}

export function readProjectState(root: string): ProjectState {
  const environmentsPath = join(root, ENVIRONMENTS_FILE);
  let environmentsSource: string;
  try {
    environmentsSource = readFileSync(environmentsPath, 'utf8');
  } catch (error) {
    throw new ScaffoldError(
      `${root} does not look like this project: cannot read ${ENVIRONMENTS_FILE} (${(error as Error).message})`,
      undefined,
      { cause: error },
    );
  }
  return {
    lambdaFolders: subfolders(join(root, 'lambda')),
    jobFolders: subfolders(join(root, 'lambda', 'jobs')),
    exists: (path) => existsSync(join(root, path)),
    environmentsPath: resolve(environmentsPath),
    environmentsSource,
    environments: evaluateEnvironments(environmentsSource, resolve(environmentsPath)),
  };
}

const problem = (name: string, rule: NameRule, detail: string): { rule: NameRule; message: string } => ({
  rule,
  message: `job name "${name}" breaks the ${rule} rule: ${detail}`,
});

/** Job names in the project: configured in any environment, or a folder under lambda/jobs/. */
const existingJobs = (state: ProjectState): string[] =>
  [
    ...new Set([
      ...Object.values(state.environments).flatMap((env) => Object.keys(env.jobs ?? {})),
      ...state.jobFolders,
    ]),
  ].sort();

const outputNames = (jobName: string): string[] =>
  (Object.keys(JobOutput) as JobOutputKind[]).map((kind) => jobOutputName(jobName, kind));

/**
 * The first rule `name` breaks, in the order kebab-case, length, reserved, taken; undefined when it breaks none.
 * (A table name already in use is found later, by planNewJob, once the environment suffixes are known.)
 */
export function validateName(name: string, state: ProjectState): { rule: NameRule; message: string } | undefined {
  const common = commonNameProblem(name);
  if (common) return common;
  for (const env of Object.keys(state.environments)) {
    const fn = producerFunctionName(stackName(env), name);
    if (fn.length > MAX_FUNCTION_NAME_LENGTH) {
      return problem(
        name,
        'length',
        `its producer function name in environment ${env}, "${fn}", would have ${fn.length} characters; Lambda allows ${MAX_FUNCTION_NAME_LENGTH}`,
      );
    }
  }

  const lambdaFolders = [...new Set([...LAMBDA_FOLDERS, ...state.lambdaFolders])].sort();
  if (lambdaFolders.includes(name)) {
    return problem(
      name,
      'reserved',
      `"${name}" is a folder under lambda/ (${lambdaFolders.join(', ')}); a job of that name would read as part of the runtime in imports, logs and metrics`,
    );
  }
  const reserved = reservedIdProblem(name);
  if (reserved) return reserved;

  const names = jobNames(name);
  const taken = (detail: string) => problem(name, 'taken', detail);
  if (state.exists(`lambda/jobs/${name}`)) return taken(`lambda/jobs/${name} already exists`);
  const configuredIn = Object.entries(state.environments)
    .filter(([, env]) => name in (env.jobs ?? {}))
    .map(([env]) => env);
  if (configuredIn.length > 0)
    return taken(`jobs.${name} is already configured in ${ENVIRONMENTS_FILE} (${configuredIn.join(', ')})`);
  const tableIn = Object.entries(state.environments)
    .filter(([, env]) => names.tableKey in (env.appResources?.tables ?? {}))
    .map(([env]) => env);
  if (tableIn.length > 0) {
    return taken(
      `appResources.tables.${names.tableKey}, the job's table, is already configured in ${ENVIRONMENTS_FILE} (${tableIn.join(', ')})`,
    );
  }
  return clashProblem(name, existingJobs(state));
}

/** The rules of a job name wherever it is written: kebab-case, and a length the jobs key of the config takes. */
function commonNameProblem(name: string): { rule: NameRule; message: string } | undefined {
  if (!KEBAB_CASE.test(name)) {
    return problem(
      name,
      'kebab-case',
      `it must match ${KEBAB_CASE} (lower-case letters and digits in words joined by single hyphens, starting with a letter)`,
    );
  }
  if (name.length < MIN_NAME_LENGTH || name.length > MAX_NAME_LENGTH) {
    return problem(
      name,
      'length',
      `a job name has ${MIN_NAME_LENGTH} to ${MAX_NAME_LENGTH} characters (the jobs key in lib/config/schema.ts); this one has ${name.length}`,
    );
  }
  const keyCheck = environmentSchema.shape.jobs.keyType.safeParse(name);
  if (!keyCheck.success) {
    return problem(
      name,
      'length',
      `lib/config/schema.ts does not accept it as a jobs key: ${keyCheck.error.issues.map((i) => i.message).join('; ')}`,
    );
  }
  return undefined;
}

/** Names the stack's own alarms, construct IDs and outputs take. */
function reservedIdProblem(name: string): { rule: NameRule; message: string } | undefined {
  if (name === RESERVED_PREFIX || name.startsWith(`${RESERVED_PREFIX}-`)) {
    return problem(
      name,
      'reserved',
      `names starting with "${RESERVED_PREFIX}" are reserved: the alarms of a schedule group are named <stack>-${RESERVED_PREFIX}-<group>-<what>, a job's <stack>-<job>-<what>`,
    );
  }
  const names = jobNames(name);
  if (STACK_CONSTRUCT_IDS.includes(names.pascal)) {
    return problem(
      name,
      'reserved',
      `its construct ID "${names.pascal}" (the name in PascalCase) is one the stack uses for itself (${STACK_CONSTRUCT_IDS.join(', ')})`,
    );
  }
  const stackOutputs: string[] = Object.values(StackOutput);
  const clashingOutput = outputNames(name).find((o) => stackOutputs.includes(o));
  if (clashingOutput)
    return problem(name, 'reserved', `its output ${clashingOutput} would be one of the stack's own outputs`);
  return undefined;
}

/** A job among `others` whose construct ID, output or alarm names `name`'s would repeat. */
function clashProblem(name: string, others: string[]): { rule: NameRule; message: string } | undefined {
  const names = jobNames(name);
  const taken = (detail: string) => problem(name, 'taken', detail);
  const mine = new Set(outputNames(name));
  for (const other of others) {
    const otherNames = jobNames(other);
    if (otherNames.pascal === names.pascal)
      return taken(`the job "${other}" has the same construct ID "${names.pascal}"`);
    const output = outputNames(other).find((o) => mine.has(o));
    if (output) return taken(`the job "${other}" already has an output named ${output}`);
    const alarms = new Set(Object.values(JobAlarm).map((what) => alarmName('<stack>', other, what)));
    const alarm = Object.values(JobAlarm)
      .map((what) => alarmName('<stack>', name, what))
      .find((a) => alarms.has(a));
    if (alarm) return taken(`the job "${other}" already has an alarm named ${alarm}`);
  }
  return undefined;
}

/** Inserts `snippet` (given the marker's indentation) on the lines above the one marker line. */
function insertAbove(source: string, marker: string, snippet: (indentation: string) => string): string {
  const lines = source.split('\n');
  const at = lines.map((line, i) => (line.trim().startsWith(marker) ? i : -1)).filter((i) => i >= 0);
  if (at.length !== 1) {
    throw new ScaffoldError(
      `${ENVIRONMENTS_FILE}: the marker line "${marker}" must appear exactly once (found ${at.length}); it shows the scaffold where to insert the new job`,
    );
  }
  const indentation = /^\s*/.exec(lines[at[0]])?.[0] ?? '';
  lines.splice(at[0], 0, ...snippet(indentation).split('\n'));
  return lines.join('\n');
}

/** The configuration the scaffold inserts for a job: its table's shape and its job entry. */
type ExpectedConfig = ReturnType<typeof expectedConfig>;

/**
 * What is wrong with the table the insertion left in one environment: missing, or not the one inserted.
 * @throws ScaffoldError (rule `taken`) when another of the environment's tables has the job's table name.
 */
function tableProblems(
  name: string,
  names: JobNames,
  env: string,
  now: EnvironmentInput,
  expected: ExpectedConfig,
): string[] {
  const tables = now.appResources?.tables ?? {};
  const table = tables[names.tableKey];
  if (table === undefined) {
    return [
      `${env} lacks appResources.tables.${names.tableKey} (its tables do not come from the function holding "${TABLES_MARKER}")`,
    ];
  }
  const problems: string[] = [];
  const { tableName, ...shape } = table;
  if (!isDeepStrictEqual(shape, expected.table) || !tableName.startsWith(`${names.tableBaseName}-`)) {
    problems.push(`${env}: appResources.tables.${names.tableKey} is not the table the scaffold inserted`);
  }
  const clash = Object.entries(tables).find(([key, t]) => key !== names.tableKey && t.tableName === tableName);
  if (clash)
    throw new ScaffoldError(
      problem(
        name,
        'taken',
        `the job's table name "${tableName}" is already used by appResources.tables.${clash[0]} in ${env}`,
      ).message,
      'taken',
    );
  return problems;
}

/**
 * What is wrong with one environment after the insertion: its new table and job as inserted, everything else as it
 * was, and the whole passing the config schema.
 */
function environmentProblems(
  name: string,
  names: JobNames,
  env: string,
  environments: { before: EnvironmentInput; now: EnvironmentInput },
  expected: ExpectedConfig,
): string[] {
  const { before, now } = environments;
  const problems = tableProblems(name, names, env, now, expected);
  const job = now.jobs?.[name];
  if (job === undefined)
    problems.push(`${env} lacks jobs.${name} (its jobs do not come from the function holding "${JOBS_MARKER}")`);
  else if (!isDeepStrictEqual(job, expected.job))
    problems.push(`${env}: jobs.${name} is not the configuration the scaffold inserted`);
  // Everything else must be exactly as it was: the insertion only adds.
  const { [names.tableKey]: _table, ...otherTables } = now.appResources?.tables ?? {};
  const { [name]: _job, ...otherJobs } = now.jobs ?? {};
  if (
    !isDeepStrictEqual(otherTables, before.appResources?.tables ?? {}) ||
    !isDeepStrictEqual(otherJobs, before.jobs ?? {})
  ) {
    problems.push(`${env}: the insertion changed other tables or jobs`);
  }
  try {
    configLoader().parseEnvironment(env, now);
  } catch (error) {
    problems.push((error as Error).message);
  }
  return problems;
}

/** What is wrong with the edited configuration: the same environments, each configuring the job as intended. */
function insertionProblems(
  name: string,
  names: JobNames,
  state: ProjectState,
  candidate: Record<string, EnvironmentInput>,
): string[] {
  const expected = expectedConfig(names);
  const problems: string[] = [];
  const envs = Object.keys(state.environments);
  if (!isDeepStrictEqual(Object.keys(candidate), envs))
    problems.push(`the environments changed from ${envs.join(', ')} to ${Object.keys(candidate).join(', ')}`);
  for (const env of envs) {
    const now = candidate[env];
    if (now === undefined) continue;
    problems.push(...environmentProblems(name, names, env, { before: state.environments[env], now }, expected));
  }
  return problems;
}

/**
 * Everything `new-job <name>` would write, checked: the name's rules, the markers, and the edited configuration of
 * every environment (it evaluates, holds the new table and job, leaves every other entry as it was, and passes the
 * config schema), so a plan that is returned can be written.
 * @throws ScaffoldError with one message; its `rule` is set when the name broke a rule.
 */
export function planNewJob(name: string, state: ProjectState): Plan {
  const broken = validateName(name, state);
  if (broken) throw new ScaffoldError(broken.message, broken.rule);
  const names = jobNames(name);
  const files = renderFiles(names);
  for (const file of files) {
    if (state.exists(file.path))
      throw new ScaffoldError(problem(name, 'taken', `${file.path} already exists`).message, 'taken');
  }

  const after = insertAbove(
    insertAbove(state.environmentsSource, TABLES_MARKER, (by) => tableSnippet(names, by)),
    JOBS_MARKER,
    (by) => jobSnippet(names, by),
  );
  const candidate = evaluateEnvironments(after, state.environmentsPath);
  const problems = insertionProblems(name, names, state, candidate);
  if (problems.length > 0) {
    throw new ScaffoldError(
      `${ENVIRONMENTS_FILE}: inserting job "${name}" at the markers would not configure it as intended, so nothing was written:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
  return {
    kind: 'repository',
    names,
    files,
    edits: [{ path: ENVIRONMENTS_FILE, before: state.environmentsSource, after }],
    environments: Object.keys(state.environments),
  };
}

/**
 * The repository's config loader, loaded when a plan in this repository needs it: it imports the reference app's own
 * environments (lib/config/environments.ts), which the package does not ship, so a team's app never loads it.
 */
function configLoader(): typeof import('../lib/config/load') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('../lib/config/load') as typeof import('../lib/config/load');
}

/** What the planner knows of a team's app: its jobs/ folder. Read from disk by readAppState, built by hand in tests. */
export interface AppState {
  /** Folder names under jobs/. */
  jobFolders: string[];
  /** Whether a path relative to the app's root exists. */
  exists(path: string): boolean;
}

/** The package's name, as a team's app depends on it. */
export const PACKAGE_NAME = 'paced-jobs';

/**
 * Which kind of project `root` is: this repository (its package.json is the package itself), or a team's app (its
 * package.json depends on the package).
 * @throws ScaffoldError when it is neither, or has no readable package.json.
 */
export function projectKind(root: string): ProjectKind {
  let manifest: { name?: unknown; dependencies?: Record<string, unknown>; devDependencies?: Record<string, unknown> };
  try {
    manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as typeof manifest;
  } catch (error) {
    throw new ScaffoldError(
      `${root} is not a project new-job can add a job to: cannot read its package.json (${(error as Error).message})`,
      undefined,
      { cause: error },
    );
  }
  if (manifest.name === PACKAGE_NAME) return 'repository';
  if (manifest.dependencies?.[PACKAGE_NAME] !== undefined || manifest.devDependencies?.[PACKAGE_NAME] !== undefined)
    return 'app';
  throw new ScaffoldError(
    `${root} is not a project new-job can add a job to: its package.json does not depend on ${PACKAGE_NAME} (run npm install ${PACKAGE_NAME} there first)`,
  );
}

export function readAppState(root: string): AppState {
  return { jobFolders: subfolders(join(root, 'jobs')), exists: (path) => existsSync(join(root, path)) };
}

/**
 * The first rule `name` breaks in a team's app, in the order kebab-case, length, reserved, taken: the rules of a job
 * name anywhere, the stack's own construct IDs, outputs and alarm names, and a folder jobs/<name> or a job in jobs/
 * whose names it would repeat. (The app's stack is not read: PacedJobs checks its own props at synthesis.)
 */
export function validateAppName(name: string, state: AppState): { rule: NameRule; message: string } | undefined {
  const broken = commonNameProblem(name) ?? reservedIdProblem(name);
  if (broken) return broken;
  if (state.exists(jobFolder(name, 'app'))) return problem(name, 'taken', `${jobFolder(name, 'app')} already exists`);
  return clashProblem(name, state.jobFolders);
}

/**
 * Everything `new-job <name>` writes in a team's app: the job's code, fixture and tests in jobs/<name>, and the
 * PacedJobs lines it prints (the app's stack is the team's own code, so it is not edited).
 * @throws ScaffoldError with one message; its `rule` is set when the name broke a rule.
 */
export function planAppJob(name: string, state: AppState): Plan {
  const broken = validateAppName(name, state);
  if (broken) throw new ScaffoldError(broken.message, broken.rule);
  const names = jobNames(name);
  const files = renderFiles(names, undefined, 'app');
  for (const file of files) {
    if (state.exists(file.path))
      throw new ScaffoldError(problem(name, 'taken', `${file.path} already exists`).message, 'taken');
  }
  return { kind: 'app', names, files, edits: [], environments: [], snippet: appSnippet(names) };
}

/** The file operations writePlan uses; tests substitute one that fails part-way. */
export interface PlanWriter {
  mkdir(path: string): void;
  /** Creates a file that must not exist yet. */
  create(path: string, content: string): void;
  read(path: string): string;
  overwrite(path: string, content: string): void;
  remove(path: string): void;
  removeEmptyDir(path: string): void;
}

export const fsWriter: PlanWriter = {
  mkdir: (path) => mkdirSync(path),
  create: (path, content) => writeFileSync(path, content, { flag: 'wx' }),
  read: (path) => readFileSync(path, 'utf8'),
  overwrite: (path, content) => writeFileSync(path, content),
  remove: (path) => rmSync(path, { force: true }),
  removeEmptyDir: (path) => rmdirSync(path),
};

/**
 * Writes the plan under `root`: the new files (with their folders), then the config edit. If any step fails, undoes
 * the steps before it (config restored, files and the folders it made removed) and throws.
 * @throws ScaffoldError naming the failed step; its cause is the file system's error.
 */
export function writePlan(root: string, plan: Plan, writer: PlanWriter = fsWriter): void {
  const madeDirs: string[] = [];
  const madeFiles: string[] = [];
  const edited: { path: string; before: string }[] = [];
  let step = '';
  try {
    for (const file of plan.files) {
      const path = join(root, file.path);
      const missing: string[] = [];
      for (let dir = dirname(path); !existsSync(dir); dir = dirname(dir)) missing.unshift(dir);
      for (const dir of missing) {
        step = `creating ${dir}`;
        writer.mkdir(dir);
        madeDirs.push(dir);
      }
      step = `writing ${file.path}`;
      writer.create(path, file.content);
      madeFiles.push(path);
    }
    for (const edit of plan.edits) {
      const path = join(root, edit.path);
      step = `editing ${edit.path}`;
      if (writer.read(path) !== edit.before) throw new Error(`${edit.path} changed since the scaffold read it`);
      edited.push({ path, before: edit.before });
      writer.overwrite(path, edit.after);
    }
  } catch (error) {
    const leftovers: string[] = [];
    const undo = (what: string, action: () => void) => {
      try {
        action();
      } catch {
        leftovers.push(what);
      }
    };
    for (const e of edited.reverse()) undo(e.path, () => writer.overwrite(e.path, e.before));
    for (const f of madeFiles.reverse()) undo(f, () => writer.remove(f));
    for (const d of madeDirs.reverse()) undo(d, () => writer.removeEmptyDir(d));
    const cleanup = leftovers.length === 0 ? 'removed what it had written' : `could not undo: ${leftovers.join(', ')}`;
    throw new ScaffoldError(
      `new-job ${plan.names.name}: ${step} failed (${(error as Error).message}); ${cleanup}`,
      undefined,
      { cause: error },
    );
  }
}
