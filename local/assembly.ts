// Finds the stack holding the jobs in a CDK app's cloud assembly (cdk.out), synthesizing first when it is missing. The
// app is this repository (its environments picked with -c env=<name>) or a team's own app using PacedJobs (its stack
// found by its jobs: functions with JOB_NAME, or named with --stack).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';

export class AssemblyError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AssemblyError';
  }
}

/**
 * The assembly does not say which stack to run: `several` stacks hold jobs (--stack picks one), `none` does, or the
 * stack asked for is not in it (`unknown`). A synth can change the last two; not the first.
 */
export class StackChoiceError extends AssemblyError {
  constructor(
    message: string,
    public readonly reason: 'several' | 'none' | 'unknown',
  ) {
    super(message);
    this.name = 'StackChoiceError';
  }
}

export interface StackArtifact {
  stackName: string;
  templateFile: string;
  assemblyDir: string;
  /**
   * The account and region the stack is pinned to (`env` on the Stack), where the manifest names them; absent for an
   * environment-agnostic stack. A pinned stack's template names its ARNs with them, so the local stack runs there too.
   */
  environment?: { account?: string; region?: string };
}

/** A stack of the assembly, with the names a user may call it by. */
export interface AssemblyStack extends StackArtifact {
  /** The artifact ID (a stack in a Stage: in its nested assembly). */
  id: string;
  /** What `cdk ls` shows: the construct path, `Stage/Stack` for a stack in a Stage. */
  displayName: string;
}

interface Manifest {
  artifacts?: Record<
    string,
    {
      type: string;
      environment?: string;
      displayName?: string;
      properties?: { templateFile?: string; stackName?: string; directoryName?: string };
    }
  >;
}

/** `aws://<account>/<region>` as the manifest writes it, without the parts CDK left unknown. */
function environmentOf(text: string | undefined): StackArtifact['environment'] {
  const match = /^aws:\/\/([^/]+)\/(.+)$/.exec(text ?? '');
  const account = match && /^\d{12}$/.test(match[1]) ? match[1] : undefined;
  const region = match && match[2] !== 'unknown-region' ? match[2] : undefined;
  return account || region ? { ...(account ? { account } : {}), ...(region ? { region } : {}) } : undefined;
}

/** The stack name bin/app.ts gives an environment. */
export const stackNameFor = (env: string): string => `PacedJobs-${env}`;

/**
 * Every stack of an assembly whose template is there, the stacks of its Stages (nested assemblies) included, in the
 * manifest's order. An assembly that does not exist has none.
 */
export function assemblyStacks(assemblyDir: string): AssemblyStack[] {
  const manifestFile = join(assemblyDir, 'manifest.json');
  if (!existsSync(manifestFile)) return [];
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest;
  const stacks: AssemblyStack[] = [];
  for (const [id, artifact] of Object.entries(manifest.artifacts ?? {})) {
    if (artifact.type === 'cdk:cloud-assembly' && artifact.properties?.directoryName) {
      stacks.push(...assemblyStacks(join(assemblyDir, artifact.properties.directoryName)));
      continue;
    }
    if (artifact.type !== 'aws:cloudformation:stack') continue;
    const templateFile = join(assemblyDir, artifact.properties?.templateFile ?? `${id}.template.json`);
    if (!existsSync(templateFile)) continue;
    const environment = environmentOf(artifact.environment);
    stacks.push({
      id,
      displayName: artifact.displayName ?? id,
      stackName: artifact.properties?.stackName ?? id,
      templateFile,
      assemblyDir,
      ...(environment ? { environment } : {}),
    });
  }
  return stacks;
}

const artifactOf = ({ stackName, templateFile, assemblyDir, environment }: AssemblyStack): StackArtifact => ({
  stackName,
  templateFile,
  assemblyDir,
  ...(environment ? { environment } : {}),
});

/** A stack the user may call `name`: its stack name, artifact ID or display name (`Stage/Stack`). */
const called = (name: string) => (s: AssemblyStack) => s.stackName === name || s.id === name || s.displayName === name;

/** Reads manifest.json and picks the environment's stack. */
export function findStack(assemblyDir: string, env: string): StackArtifact | undefined {
  const match = assemblyStacks(assemblyDir).find(called(stackNameFor(env)));
  return match && artifactOf(match);
}

/** True when a synthesized template has a job: a Lambda function with JOB_NAME (both of a job's functions have it). */
export function holdsJobs(templateFile: string): boolean {
  const template = JSON.parse(readFileSync(templateFile, 'utf8')) as {
    Resources?: Record<
      string,
      { Type?: string; Properties?: { Environment?: { Variables?: Record<string, unknown> } } }
    >;
  };
  return Object.values(template.Resources ?? {}).some(
    (r) => r.Type === 'AWS::Lambda::Function' && r.Properties?.Environment?.Variables?.JOB_NAME !== undefined,
  );
}

/** Which stack to run: the one named, else this repository's environment stack, else the one stack holding jobs. */
export interface StackChoice {
  /** --stack: a stack name, artifact ID or `Stage/Stack`. */
  stack?: string;
  /** --env: the environment whose stack (`PacedJobs-<env>`) is taken when the assembly has it. */
  env?: string;
}

/**
 * The stack to run from an assembly. `stack` names it (it must hold jobs); else `PacedJobs-<env>` when `env` is given
 * and the assembly has it (this repository's environments); else the one stack with jobs.
 * @throws StackChoiceError when the named stack is missing or holds no jobs, when several stacks hold jobs, or none
 */
export function chooseStack(assemblyDir: string, choice: StackChoice = {}): StackArtifact {
  const stacks = assemblyStacks(assemblyDir);
  const withJobs = stacks.filter((s) => holdsJobs(s.templateFile));
  const names = (list: AssemblyStack[]) => list.map((s) => s.displayName).join(', ');
  if (choice.stack !== undefined) {
    const match = stacks.find(called(choice.stack));
    if (!match) {
      throw new StackChoiceError(
        `--stack ${choice.stack}: no such stack in ${assemblyDir} (${withJobs.length > 0 ? `stacks with PacedJobs: ${names(withJobs)}` : `stacks: ${names(stacks) || 'none'}`})`,
        'unknown',
      );
    }
    if (!withJobs.includes(match)) {
      throw new StackChoiceError(
        `--stack ${choice.stack}: the stack holds no PacedJobs (no Lambda function with JOB_NAME)${withJobs.length > 0 ? `; stacks with PacedJobs: ${names(withJobs)}` : ''}`,
        'unknown',
      );
    }
    return artifactOf(match);
  }
  const envStack = choice.env === undefined ? undefined : stacks.find(called(stackNameFor(choice.env)));
  if (envStack) return artifactOf(envStack);
  if (withJobs.length > 1) {
    throw new StackChoiceError(
      `several stacks hold PacedJobs: ${names(withJobs)}; pick one with --stack <name>`,
      'several',
    );
  }
  if (withJobs.length === 0) {
    throw new StackChoiceError(
      `no PacedJobs found in ${assemblyDir}: no stack has a Lambda function with JOB_NAME (stacks: ${names(stacks) || 'none'}); add \`new PacedJobs(stack, 'Jobs', { jobs: { ... } })\` to a stack of the app`,
      'none',
    );
  }
  return artifactOf(withJobs[0]);
}

/**
 * True for this repository, the reference app: its package.json names the package itself (a team's app cannot, since
 * npm refuses to install a package into a project of the same name). Its app takes `-c env=<name>` (bin/app.ts),
 * `dev` by default.
 */
export function isReferenceApp(cwd: string): boolean {
  const file = join(cwd, 'package.json');
  // A folder without package.json is no npm project, so not this one either.
  return existsSync(file) && (JSON.parse(readFileSync(file, 'utf8')) as { name?: string }).name === 'paced-jobs';
}

/** The environment an app's run synthesizes: the one given, else the reference app's default `dev`, else none. */
export function appEnv(cwd: string, env: string | undefined): string | undefined {
  return env ?? (isReferenceApp(cwd) ? 'dev' : undefined);
}

/** Folders whose changes a synthesized template and its bundles must reflect, in this repository. */
export const SOURCE_DIRS = ['bin', 'lib', 'lambda'];

/**
 * The newest modification time of a .ts file under the project's source folders (0 when there is none). A `test`
 * folder (a job's own tests, lambda/jobs/<job>/test/) is left out: no bundle holds it.
 */
export function newestSourceMtime(cwd: string, dirs: string[] = SOURCE_DIRS): number {
  let newest = 0;
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'test') walk(path);
      } else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  for (const dir of dirs) walk(join(cwd, dir));
  return newest;
}

/** What else in this repository changes what a synth writes: the feature flags, the SDK and esbuild versions. */
export const REFERENCE_INPUT_FILES = ['cdk.json', 'package-lock.json'];

/** The newest modification time of what this repository's synth is built from: its sources and REFERENCE_INPUT_FILES. */
export function newestReferenceInputMtime(cwd: string): number {
  return Math.max(
    newestSourceMtime(cwd),
    ...REFERENCE_INPUT_FILES.map((file) => (existsSync(join(cwd, file)) ? statSync(join(cwd, file)).mtimeMs : 0)),
  );
}

/** The CDK CLI's own cache of lookups: the synth writes it, after the template, so it would always look newer. */
const CDK_CONTEXT_FILE = 'cdk.context.json';

/** What in a team's app can change what a synth writes: its code in any of Node's languages, its JSON (cdk.json). */
const APP_SOURCE = /\.(?:[cm]?[jt]sx?|json)$/;

/**
 * The newest modification time of a source file anywhere in a team's app folder, but in node_modules, the cloud
 * assembly, dot folders (.git, .local), cdk.context.json and the folders `skip` names (0 when there is none). A team's
 * code has no fixed layout (bin/, lib/, jobs/ or src/), so every folder counts.
 */
export function newestAppSourceMtime(cwd: string, skip: string[] = []): number {
  const skipped = new Set(['node_modules', 'cdk.out', ...skip].map((dir) => resolve(cwd, dir)));
  let newest = 0;
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!entry.name.startsWith('.') && !skipped.has(path)) walk(path);
      } else if (entry.isFile() && APP_SOURCE.test(entry.name) && entry.name !== CDK_CONTEXT_FILE) {
        newest = Math.max(newest, statSync(path).mtimeMs);
      }
    }
  };
  if (existsSync(cwd)) walk(resolve(cwd));
  return newest;
}

export interface AppStackOptions extends StackChoice {
  /** The CDK app's folder: where its cdk.json is and `cdk synth` runs. */
  cwd: string;
  /** The cloud assembly folder, relative to `cwd`. */
  assemblyDir: string;
  log: (line: string) => void;
  /** Synthesize even when the assembly has the stack. */
  synth?: boolean;
  /**
   * The app is this repository: `env` must find its own stack, `PacedJobs-<env>` (an assembly of another environment is
   * synthesized anew), and its staleness is judged on bin, lib and lambda. @default isReferenceApp(cwd)
   */
  referenceApp?: boolean;
}

/**
 * The stack of the app to run (chooseStack); runs `npx cdk synth --quiet --output <assembly>` in the app's folder (with
 * `-c env=<env>` when an environment is given) when the assembly lacks it (or with `synth`), and warns when a source
 * file changed after it was synthesized (its bundles would be stale): in this repository its bin, lib and lambda
 * folders, in a team's app every folder but node_modules and the assembly.
 * @throws AssemblyError when synthesis fails; StackChoiceError when the synthesized assembly still does not say which
 * stack (several hold jobs, none does, or the one named is missing)
 */
export function ensureAppStack(options: AppStackOptions): StackArtifact {
  const cwd = resolve(options.cwd);
  const assemblyDir = resolve(cwd, options.assemblyDir);
  const choice: StackChoice = { stack: options.stack, env: options.env };
  const reference = options.referenceApp ?? isReferenceApp(cwd);
  let found: StackArtifact | undefined;
  let missing = '--synth given';
  if (!options.synth) {
    try {
      found = chooseStack(assemblyDir, choice);
      // An assembly of another environment is not the one asked for, even if its one stack holds jobs.
      if (
        choice.stack === undefined &&
        choice.env !== undefined &&
        found.stackName !== stackNameFor(choice.env) &&
        reference
      )
        found = undefined;
    } catch (error) {
      // Several stacks with jobs is the app's shape, not a stale assembly: a synth would not choose either.
      if (!(error instanceof StackChoiceError) || error.reason === 'several') throw error;
    }
    missing =
      choice.env !== undefined && choice.stack === undefined
        ? `no synthesized ${stackNameFor(choice.env)} in ${assemblyDir}`
        : `no stack to run in ${assemblyDir}`;
  }
  if (found) {
    warnIfStale(cwd, assemblyDir, found, reference, options.log);
    return found;
  }
  const args = [
    'cdk',
    'synth',
    ...(options.env !== undefined ? ['-c', `env=${options.env}`] : []),
    '--quiet',
    '--output',
    assemblyDir,
  ];
  options.log(`${missing}; running npx ${args.slice(0, -2).join(' ')}`);
  if (!existsSync(join(cwd, 'cdk.json'))) {
    throw new AssemblyError(
      `${cwd} has no cdk.json: run this in your CDK app's folder (the one with cdk.json), or name it with --app <dir>`,
    );
  }
  const result = spawnSync('npx', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  if (result.status !== 0) {
    const what = options.env !== undefined ? `cdk synth for environment "${options.env}"` : `cdk synth in ${cwd}`;
    throw new AssemblyError(
      `${what} failed (exit ${result.status}):\n${(result.stderr || result.stdout || '').trim()}`,
    );
  }
  if (choice.env !== undefined && choice.stack === undefined && reference) {
    const synthesized = findStack(assemblyDir, choice.env);
    if (!synthesized)
      throw new AssemblyError(
        `cdk synth succeeded but ${assemblyDir} holds no stack named ${stackNameFor(choice.env)}`,
      );
    return synthesized;
  }
  return chooseStack(assemblyDir, choice);
}

/** Only a warning: a synth takes minutes on a small machine, and the user may run a known assembly on purpose. */
function warnIfStale(
  cwd: string,
  assemblyDir: string,
  found: StackArtifact,
  reference: boolean,
  log: (line: string) => void,
): void {
  const inApp = relative(cwd, assemblyDir);
  // The assembly is not a source, wherever --cdk-out puts it.
  const newest = reference
    ? newestSourceMtime(cwd)
    : newestAppSourceMtime(cwd, inApp && !inApp.startsWith('..') ? [inApp] : []);
  if (newest > statSync(found.templateFile).mtimeMs) {
    const sources = reference ? `the sources in ${SOURCE_DIRS.join(', ')}` : `the app's sources in ${cwd}`;
    log(`warning: ${found.templateFile} is older than ${sources}; pass --synth to rebuild it`);
  }
}

/**
 * The environment's synthesized stack in this repository; runs `npx cdk synth -c env=<env> --quiet` when the assembly
 * lacks it (or with --synth), and warns when a source file changed after it was synthesized.
 * @throws AssemblyError when synthesis fails or still yields no such stack.
 */
export function ensureStack(options: {
  env: string;
  assemblyDir: string;
  cwd: string;
  log: (line: string) => void;
  synth?: boolean;
}): StackArtifact {
  return ensureAppStack({ ...options, referenceApp: true });
}
