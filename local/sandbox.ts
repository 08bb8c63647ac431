// Lambda's file layout for the local runtime: each function's asset and layers run from a folder outside the repo,
// laid out as /var/task, /opt and /var/runtime are, so a bare require() the bundle left external reaches only what
// Lambda would give it (the asset, its layers, the runtime's AWS SDK) and never this project's node_modules.
import { randomBytes } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, delimiter, dirname, join, resolve as resolvePath } from 'node:path';

export class SandboxError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SandboxError';
  }
}

/** The folders one function's execution environments see. */
export interface SandboxEnvironment {
  /** Lambda's /var/task: a copy of the asset. */
  taskDir: string;
  /** Lambda's /opt: the function's layers, extracted one over the other in order. */
  optDir: string;
  /** Lambda's /var/runtime: the bootstrap and node_modules with the stand-in AWS SDK. */
  runtimeDir: string;
  /** The CommonJS bootstrap each execution environment runs (the runtime interface's local counterpart). */
  bootstrapPath: string;
  /** NODE_PATH in Lambda's order for this Node major. */
  nodePath: string;
}

/** The package the stand-in SDK's version is read from (any client would do; this one every function here uses). */
export const RUNTIME_SDK_REFERENCE = '@aws-sdk/client-sqs';

/** This project's node_modules, where the stand-in SDK comes from. */
const PROJECT_MODULES = resolvePath(dirname(require.resolve(`${RUNTIME_SDK_REFERENCE}/package.json`)), '..', '..');

/**
 * The version of the AWS SDK v3 that stands in for the one Lambda's Node.js runtime provides. It is this project's
 * pinned SDK: Lambda's nodejs22.x runtime bundles a 3.x SDK whose exact version AWS changes over time (and does not
 * announce), so no fixed version would be "Lambda's"; the pinned one is at least the one the code was tested with.
 * A bundle that needs a particular version should bundle it rather than rely on either.
 */
export function runtimeSdkVersion(): string {
  return (
    JSON.parse(readFileSync(join(PROJECT_MODULES, RUNTIME_SDK_REFERENCE, 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;
}

interface PackageJson {
  name?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** Node's lookup for a bare name from inside a package folder: its node_modules, then each parent's, up to the project. */
function resolvePackage(name: string, fromDir: string, root: string): string | undefined {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    if (basename(dir) !== 'node_modules') {
      const candidate = join(dir, 'node_modules', name);
      if (existsSync(join(candidate, 'package.json'))) return candidate;
    }
    if (dir === root || dirname(dir) === dir) return undefined;
  }
}

/**
 * The AWS SDK v3 packages this project installs (every @aws-sdk/* at the top of its node_modules) and their transitive
 * dependency closure (@smithy/*, @aws-crypto/*, tslib, fast-xml-parser, ...), each name mapped to the installed folder
 * a require() from its dependant would load. Where one name is installed at several versions, the top-level (hoisted)
 * one wins: it is the one a bare require() from the runtime's flat node_modules would see.
 */
export function runtimeSdkClosure(projectModules: string = PROJECT_MODULES): Map<string, string> {
  const root = dirname(projectModules);
  const scope = join(projectModules, '@aws-sdk');
  const seeds = existsSync(scope)
    ? readdirSync(scope)
        .map((n) => join(scope, n))
        .filter((d) => existsSync(join(d, 'package.json')))
    : [];
  const byName = new Map<string, string>();
  const seen = new Set<string>();
  const queue = [...seeds];
  for (let dir = queue.shift(); dir !== undefined; dir = queue.shift()) {
    if (seen.has(dir)) continue;
    seen.add(dir);
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as PackageJson;
    const name = pkg.name ?? basename(dir);
    const hoisted = join(projectModules, name);
    if (!byName.has(name) || dir === hoisted) byName.set(name, dir);
    // Peers count: the SDK's packages declare some of their siblings as peers and expect them next to themselves.
    for (const dep of Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies, ...pkg.peerDependencies })) {
      const found = resolvePackage(dep, dir, root);
      if (found) queue.push(found);
    }
  }
  return byName;
}

/*
 * The bootstrap each execution environment runs, as plain CommonJS (it starts before any loader and must run on every
 * Node major): it loads the handler at init the way Lambda's runtime interface client does (the same error types),
 * then answers invoke messages over the IPC channel, one at a time, as an execution environment does.
 */
const BOOTSTRAP_SOURCE = String.raw`'use strict';
// Local stand-in for Lambda's runtime interface client (see local/sandbox.ts in the paced-jobs repo).
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');

const TASK_ROOT = process.env.LAMBDA_TASK_ROOT;
const HANDLER = process.env._HANDLER;
let handler;

function runtimeError(name, message, cause) {
  const e = new Error(message, cause ? { cause } : undefined);
  e.name = name;
  return e;
}

/*
 * Lambda's nodejs18.x and later let an ES module import a package from the layers and the runtime's SDK too, but
 * Node's ES module resolver ignores NODE_PATH (it is CommonJS-only). A resolve hook gives an ES module the same
 * fallback: a bare specifier not found from the importing file is looked up from each NODE_PATH folder, in order.
 */
const ESM_PATH_HOOKS = [
  "import { pathToFileURL } from 'node:url';",
  "import { join } from 'node:path';",
  'let folders = [];',
  'export function initialize(data) { folders = data.folders; }',
  'export async function resolve(specifier, context, next) {',
  '  try { return await next(specifier, context); } catch (e) {',
  "    if (!e || e.code !== 'ERR_MODULE_NOT_FOUND' || /^([./]|[a-zA-Z][a-zA-Z0-9+.-]*:)/.test(specifier)) throw e;",
  "    for (const folder of folders) { try { return await next(specifier, { ...context, parentURL: pathToFileURL(join(folder, 'index.mjs')).href }); } catch {} }",
  '    throw e;',
  '  }',
  '}',
].join('\n');
let esmPathsRegistered = false;
function importModule(file) {
  const mod = require('node:module');
  if (!esmPathsRegistered && typeof mod.register === 'function') {
    esmPathsRegistered = true;
    const folders = (process.env.NODE_PATH || '').split(require('node:path').delimiter).filter(Boolean);
    mod.register('data:text/javascript,' + encodeURIComponent(ESM_PATH_HOOKS), { data: { folders } });
  }
  return import(pathToFileURL(file).href);
}

/** The "type" of the package.json nearest to a file inside the task root (Node's rule for what a .js file is). */
function packageType(file) {
  const { dirname } = require('node:path');
  for (let dir = dirname(file); dir.startsWith(TASK_ROOT); dir = dirname(dir)) {
    const pj = join(dir, 'package.json');
    if (existsSync(pj)) {
      try { return JSON.parse(require('node:fs').readFileSync(pj, 'utf8')).type; } catch { return undefined; }
    }
    if (dir === TASK_ROOT) break;
  }
  return undefined;
}

async function loadModule(base) {
  // Lambda's order: .js, then .mjs, then .cjs; with none of them, a bare require that fails as Lambda's does.
  const file = ['.js', '.mjs', '.cjs'].map((ext) => base + ext).find((p) => existsSync(p));
  if (file === undefined) return require(base);
  if (file.endsWith('.mjs') || (file.endsWith('.js') && packageType(file) === 'module')) return importModule(file);
  try {
    return require(file);
  } catch (e) {
    // A .js file in a "type": "module" package is an ES module: Lambda imports it.
    if (e && (e.code === 'ERR_REQUIRE_ESM' || e.code === 'ERR_REQUIRE_ASYNC_MODULE')) return importModule(file);
    throw e;
  }
}

async function load() {
  if (handler) return handler;
  const dot = HANDLER.lastIndexOf('.');
  if (dot <= 0) throw runtimeError('Runtime.MalformedHandlerName', 'Bad handler');
  const modulePart = HANDLER.slice(0, dot);
  const path = HANDLER.slice(dot + 1).split('.');
  let mod;
  try {
    mod = await loadModule(join(TASK_ROOT, modulePart));
  } catch (e) {
    // Lambda's init errors: a syntax error is the user's code; a missing module is an import error (its message keeps
    // the original "Error: Cannot find module ..."); anything else the module threw is reported as itself.
    if (e instanceof SyntaxError) throw runtimeError('Runtime.UserCodeSyntaxError', String(e), e);
    if (e && (e.code === 'MODULE_NOT_FOUND' || e.code === 'ERR_MODULE_NOT_FOUND')) throw runtimeError('Runtime.ImportModuleError', String(e), e);
    throw e;
  }
  let fn = mod;
  for (const key of path) fn = fn == null ? undefined : fn[key];
  if (fn === undefined && mod && mod.default && path.length === 1) fn = mod.default[path[0]];
  if (fn === undefined || fn === null) throw runtimeError('Runtime.HandlerNotFound', HANDLER + ' is undefined or not exported');
  if (typeof fn !== 'function') throw runtimeError('Runtime.HandlerNotFound', HANDLER + ' is not a function');
  return (handler = fn);
}

const serializeError = (e) => ({
  errorType: (e && e.name) || 'Error',
  errorMessage: e instanceof Error ? e.message : String(e),
  stack: e && e.stack ? String(e.stack).split('\n') : [],
});

let current;
function crash(type, error) {
  // An uncaught error ends the execution environment, as in Lambda; the parent reports it and starts the next one cold.
  const e = serializeError(error);
  process.stderr.write((e.stack.length ? e.stack.join('\n') : e.errorType + ': ' + e.errorMessage) + '\n');
  const done = () => process.exit(129);
  try {
    process.send({ type: 'crash', id: current, crashType: type, error: e }, done);
  } catch {
    done();
  }
}
process.on('uncaughtException', (e) => crash('Runtime.UncaughtException', e));
process.on('unhandledRejection', (e) => crash('Runtime.UnhandledPromiseRejection', e));
// The parent is gone (closed, or killed itself): nothing will ever invoke this environment again.
process.on('disconnect', () => process.exit(0));

process.on('message', async (msg) => {
  current = msg.id;
  if (msg.type === 'load') {
    try {
      await load();
      process.send({ id: msg.id, ok: true, value: null });
    } catch (e) {
      process.send({ id: msg.id, ok: false, init: true, error: serializeError(e) });
    }
    return;
  }
  let fn;
  try {
    fn = await load();
  } catch (e) {
    process.send({ id: msg.id, ok: false, init: true, error: serializeError(e) });
    return;
  }
  const context = {
    functionName: msg.functionName,
    functionVersion: process.env.AWS_LAMBDA_FUNCTION_VERSION || '$LATEST',
    invokedFunctionArn: msg.functionArn,
    memoryLimitInMB: String(msg.memoryMb),
    awsRequestId: msg.requestId,
    logGroupName: '/aws/lambda/' + msg.functionName,
    logStreamName: 'local/' + msg.functionName,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, msg.deadline - Date.now()),
    done() {}, fail() {}, succeed() {},
  };
  try {
    const value = fn.length >= 3
      ? await new Promise((resolve, reject) => {
          const r = fn(msg.event, context, (err, v) => (err ? reject(err) : resolve(v)));
          if (r && typeof r.then === 'function') r.then(resolve, reject);
        })
      : await fn(msg.event, context);
    process.send({ id: msg.id, ok: true, value: value === undefined ? null : JSON.parse(JSON.stringify(value)) });
  } catch (e) {
    process.send({ id: msg.id, ok: false, error: serializeError(e) });
  }
});
`;

/** Sandbox folders not yet closed: removed when the host exits without closing them (a crash, process.exit()). */
const open = new Set<string>();
let exitHookInstalled = false;
function removeOnExit(root: string): void {
  open.add(root);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => open.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
}

/**
 * One local runtime's sandbox folder (<tmp>/paced-jobs-lambda-<pid>-<random>/): a copy of each distinct asset, one
 * /opt per distinct list of layers, and the runtime folder with the bootstrap and the stand-in SDK. Removed on close().
 */
export class LambdaSandbox {
  public readonly root: string;
  /** node_modules folders above the sandbox (a /tmp/node_modules): Node would look there, and Lambda has none. */
  public readonly leaks: string[];
  private readonly runtimeDir: string;
  private readonly bootstrapPath: string;
  private readonly tasks = new Map<string, string>();
  private readonly opts = new Map<string, string>();
  private closed = false;

  constructor(parent: string = tmpdir()) {
    this.root = mkdtempSync(join(parent, `paced-jobs-lambda-${process.pid}-${randomBytes(3).toString('hex')}-`));
    removeOnExit(this.root);
    this.leaks = [];
    for (let dir = dirname(this.root); ; dir = dirname(dir)) {
      if (existsSync(join(dir, 'node_modules'))) this.leaks.push(join(dir, 'node_modules'));
      if (dirname(dir) === dir) break;
    }
    try {
      this.runtimeDir = join(this.root, 'runtime');
      this.bootstrapPath = join(this.runtimeDir, 'bootstrap.cjs');
      mkdirSync(join(this.runtimeDir, 'node_modules'), { recursive: true });
      writeFileSync(this.bootstrapPath, BOOTSTRAP_SOURCE);
      /*
       * Symlinks to the project's installed copies, not copies: the closure is some 60 MB in thousands of files that a
       * copy would cost seconds for on every start. Node resolves a symlinked package to its real path (it does not
       * preserve symlinks by default), so the SDK's own require()s resolve next to where npm installed it, exactly as
       * in the project; the bundle itself sees only these names, through NODE_PATH.
       */
      for (const [name, dir] of runtimeSdkClosure()) {
        const link = join(this.runtimeDir, 'node_modules', name);
        mkdirSync(dirname(link), { recursive: true });
        symlinkSync(dir, link, 'dir');
      }
    } catch (error) {
      this.close();
      throw new SandboxError(
        `could not lay out the local Lambda sandbox in ${this.root}: ${(error as Error).message}`,
        { cause: error },
      );
    }
  }

  /**
   * The folders for a function: its asset copied once per sandbox (functions sharing an asset share the copy), and its
   * layers extracted in order into one /opt per distinct list (a later layer's file replaces an earlier one's, as in
   * Lambda).
   * @throws SandboxError when the asset or a layer folder does not exist.
   */
  prepare(functionName: string, codeDir: string, layerDirs: string[], nodeMajor: number): SandboxEnvironment {
    if (this.closed) throw new SandboxError(`${functionName}: the local Lambda sandbox ${this.root} is closed`);
    for (const dir of [codeDir, ...layerDirs]) {
      if (!existsSync(dir))
        throw new SandboxError(`${functionName}: ${dir === codeDir ? 'asset' : 'layer'} folder ${dir} does not exist`);
    }
    const taskKey = resolvePath(codeDir);
    let taskDir = this.tasks.get(taskKey);
    if (!taskDir) {
      taskDir = join(this.root, 'task', `${this.tasks.size + 1}-${basename(taskKey)}`);
      cpSync(taskKey, taskDir, { recursive: true, dereference: true });
      this.tasks.set(taskKey, taskDir);
    }
    const optKey = layerDirs.map((d) => resolvePath(d)).join(delimiter);
    let optDir = this.opts.get(optKey);
    if (!optDir) {
      optDir = join(this.root, 'opt', String(this.opts.size + 1));
      mkdirSync(optDir, { recursive: true });
      for (const layer of layerDirs) cpSync(layer, optDir, { recursive: true, dereference: true, force: true });
      this.opts.set(optKey, optDir);
    }
    // Lambda's bootstrap: /opt/nodejs/node<major>/node_modules, /opt/nodejs/node_modules, /var/runtime/node_modules,
    // then /var/runtime and /var/task.
    const nodePath = [
      join(optDir, 'nodejs', `node${nodeMajor}`, 'node_modules'),
      join(optDir, 'nodejs', 'node_modules'),
      join(this.runtimeDir, 'node_modules'),
      this.runtimeDir,
      taskDir,
    ].join(delimiter);
    return { taskDir, optDir, runtimeDir: this.runtimeDir, bootstrapPath: this.bootstrapPath, nodePath };
  }

  close(): void {
    this.closed = true;
    rmSync(this.root, { recursive: true, force: true });
    open.delete(this.root);
  }
}
