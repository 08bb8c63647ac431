// Finds the synthesized stack of an environment in the cloud assembly (cdk.out), synthesizing first when it is missing.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';

export class AssemblyError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AssemblyError';
  }
}

export interface StackArtifact {
  stackName: string;
  templateFile: string;
  assemblyDir: string;
}

interface Manifest {
  artifacts?: Record<string, { type: string; displayName?: string; properties?: { templateFile?: string; stackName?: string } }>;
}

/** The stack name bin/app.ts gives an environment. */
export const stackNameFor = (env: string): string => `PacedJobs-${env}`;

/** Reads manifest.json and picks the environment's stack. */
export function findStack(assemblyDir: string, env: string): StackArtifact | undefined {
  const manifestFile = join(assemblyDir, 'manifest.json');
  if (!existsSync(manifestFile)) return undefined;
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest;
  const stacks = Object.entries(manifest.artifacts ?? {}).filter(([, a]) => a.type === 'aws:cloudformation:stack');
  const wanted = stackNameFor(env);
  const match = stacks.find(([id, a]) => id === wanted || a.properties?.stackName === wanted || a.displayName === wanted);
  if (!match) return undefined;
  const [id, artifact] = match;
  const templateFile = join(assemblyDir, artifact.properties?.templateFile ?? `${id}.template.json`);
  if (!existsSync(templateFile)) return undefined;
  return { stackName: artifact.properties?.stackName ?? id, templateFile, assemblyDir };
}

/** Folders whose changes a synthesized template and its bundles must reflect. */
export const SOURCE_DIRS = ['bin', 'lib', 'lambda'];

/** The newest modification time of a .ts file under the project's source folders (0 when there is none). */
export function newestSourceMtime(cwd: string, dirs: string[] = SOURCE_DIRS): number {
  let newest = 0;
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  for (const dir of dirs) walk(join(cwd, dir));
  return newest;
}

/**
 * The environment's synthesized stack; runs `npx cdk synth -c env=<env> --quiet` when the assembly lacks it (or with
 * --synth), and warns when a source file changed after it was synthesized (its bundles would be stale).
 * @throws AssemblyError when synthesis fails or still yields no such stack.
 */
export function ensureStack(options: { env: string; assemblyDir: string; cwd: string; log: (line: string) => void; synth?: boolean }): StackArtifact {
  const assemblyDir = resolve(options.cwd, options.assemblyDir);
  const found = options.synth ? undefined : findStack(assemblyDir, options.env);
  if (found) {
    // Only a warning: a synth takes minutes on a small machine, and the user may be running a known assembly on purpose.
    if (newestSourceMtime(options.cwd) > statSync(found.templateFile).mtimeMs) {
      options.log(`warning: ${found.templateFile} is older than the sources in ${SOURCE_DIRS.join(', ')}; pass --synth to rebuild it`);
    }
    return found;
  }
  options.log(`${options.synth ? '--synth given' : `no synthesized ${stackNameFor(options.env)} in ${assemblyDir}`}; running npx cdk synth -c env=${options.env} --quiet`);
  const result = spawnSync('npx', ['cdk', 'synth', '-c', `env=${options.env}`, '--quiet', '--output', assemblyDir], {
    cwd: options.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
  });
  if (result.status !== 0) {
    throw new AssemblyError(`cdk synth for environment "${options.env}" failed (exit ${result.status}):\n${(result.stderr || result.stdout || '').trim()}`);
  }
  const synthesized = findStack(assemblyDir, options.env);
  if (!synthesized) throw new AssemblyError(`cdk synth succeeded but ${assemblyDir} holds no stack named ${stackNameFor(options.env)}`);
  return synthesized;
}
