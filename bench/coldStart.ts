// Benchmark (`npm run bench`), cold start: each handler bundle's minified size as `cdk deploy` uploads it (from the
// cloud assembly), and the module-init time of a fresh `node` process loading it, against the same handler compiled
// file by file (esbuild, no bundling) so only module resolution and loading differ, not TypeScript transpilation.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, extname, join, relative, resolve } from 'node:path';
import { loadTemplate } from '../local/template';
import { appEnv, ensureAppStack } from '../local/assembly';

/** Handler bundles above this size miss the goal. */
export const BUNDLE_BYTES_GOAL = 250 * 1024;
/** Module init above this misses the goal ("well under 100 ms"). */
export const INIT_MS_GOAL = 100;

export interface BundleFigures {
  /**
   * The largest of the kind's bundles (each function bundles its own job alone): its index.js, minified, without its
   * source map. The init times are measured on that bundle.
   */
  bytes: number;
  /** Every function of the kind with its bundle's bytes. */
  bundleBytes: Record<string, number>;
  initMsMedian: number;
  unbundledInitMsMedian: number;
  /** unbundled / bundled init time. */
  unbundledRatio: number;
  /**
   * The external modules the bundle loads at init (the sdk-slim layer, any @aws-sdk/* package required at top level;
   * not those it requires lazily on first use), loaded alone: the part of init the bundle itself does not own.
   */
  sdkInitMsMedian: number;
  /** The minified size of the layers' modules the function loads (sdk-slim), deployed once per stack. */
  layerBytes: number;
  sdkPackages: string[];
  functions: string[];
  /** The largest bundle's asset folder. */
  asset: string;
}

export interface ColdStartOptions {
  /** The CDK app's folder (cdk.json; its cloud assembly is synthesized when missing). */
  cwd: string;
  /** @default "cdk.out" */
  assemblyDir?: string;
  /** @default "dev" in this repository, none in a team's app */
  env?: string;
  /** The stack holding the jobs, where several of the app's stacks do. @default the one that does */
  stack?: string;
  /** Fresh processes per measurement; the median is reported. @default 7 */
  runs?: number;
  progress?: (line: string) => void;
}

export class ColdStartError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ColdStartError';
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/**
 * Runs `script` in a fresh node process and returns its stdout. NODE_PATH makes the function's layers (their
 * nodejs/node_modules, as Lambda mounts them under /opt) and then the project's @aws-sdk/* resolvable, the way the Lambda
 * runtime provides them to a bundle that leaves them external; last the engine's own, where the handlers compiled from
 * this repository's sources find their dependencies when the app is another folder (the engine's test app).
 */
function runFresh(script: string, cwd: string, layerModulePaths: string[]): string {
  const paths = [...layerModulePaths, resolve(cwd, 'node_modules'), resolve(__dirname, '..', 'node_modules')];
  return execFileSync(process.execPath, ['-e', script], {
    cwd,
    env: {
      PATH: process.env.PATH,
      NODE_PATH: [...new Set(paths)].join(delimiter),
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    encoding: 'utf8',
  });
}

/** Milliseconds a fresh process spends in `require(file)`, median of `runs` processes. */
export function measureInitMs(file: string, cwd: string, runs: number, layerModulePaths: string[] = []): number {
  const script = `const t=process.hrtime.bigint();require(${JSON.stringify(file)});process.stdout.write(String(Number(process.hrtime.bigint()-t)/1e6))`;
  return median(Array.from({ length: runs }, () => Number(runFresh(script, cwd, layerModulePaths))));
}

/** The external packages (sdk-slim, @aws-sdk/*) that requiring `file` in a fresh process loads, read off its module cache. */
export function externalsLoadedAtInit(file: string, cwd: string, layerModulePaths: string[] = []): string[] {
  const script =
    `require(${JSON.stringify(file)});const names=new Set();` +
    "for(const k of Object.keys(require.cache)){const p=k.split(require('path').sep);const i=p.lastIndexOf('node_modules');" +
    "if(i<0)continue;if(p[i+1]==='sdk-slim')names.add('sdk-slim');else if(p[i+1]==='@aws-sdk')names.add('@aws-sdk/'+p[i+2]);}" +
    'process.stdout.write(JSON.stringify([...names]))';
  return JSON.parse(runFresh(script, cwd, layerModulePaths)) as string[];
}

/** Handler kind by the environment the stack gives it: consumers have an idempotency table, producers do not. */
function handlerKind(environment: Record<string, unknown>): 'producer' | 'consumer' {
  return environment.IDEMPOTENCY_TABLE_NAME !== undefined ? 'consumer' : 'producer';
}

/**
 * The engine's handlers unbundled, for the comparison: the package's compiled dist/lambda as shipped when this module
 * runs compiled (a team's app), else lambda/ beside it compiled file by file into `out` (this repository's sources).
 */
function unbundledHandler(out: string, kind: 'producer' | 'consumer'): string {
  const engine = resolve(__dirname, '..');
  if (extname(__filename) === '.js') return join(engine, 'lambda', 'handlers', `${kind}.js`);
  if (!existsSync(join(out, 'lambda'))) compileUnbundled(engine, out);
  return join(out, 'lambda', 'handlers', `${kind}.js`);
}

/** Compiles `cwd`'s lambda/ file by file to CommonJS into `out` (no bundling), for the unbundled comparison. */
function compileUnbundled(cwd: string, out: string): void {
  // esbuild is the bundler the stack already uses (a devDependency); required lazily so the import stays cheap.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const esbuild = require('esbuild') as typeof import('esbuild');
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) files.push(path);
    }
  };
  walk(join(cwd, 'lambda'));
  esbuild.buildSync({
    entryPoints: files,
    outdir: join(out, 'lambda'),
    outbase: join(cwd, 'lambda'),
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    bundle: false,
    logLevel: 'error',
  });
}

/** One kind's bundles in the assembly: the largest (its asset, its size), every function's, and its layers' modules. */
interface KindBundles {
  asset: string;
  bytes: number;
  functions: string[];
  bundleBytes: Record<string, number>;
  layers: string[];
}

type Template = ReturnType<typeof loadTemplate>;

/** A layer's nodejs/node_modules inside the assembly, from the function's Layers: [{ Ref }]. */
function layerModules(template: Template, assemblyDir: string, layers: unknown): string[] {
  return ((layers as { Ref?: string }[] | undefined) ?? []).flatMap((l) => {
    const path = (template.Resources[l.Ref ?? '']?.Metadata as Record<string, unknown> | undefined)?.['aws:asset:path'];
    return typeof path === 'string' ? [join(assemblyDir, path, 'nodejs', 'node_modules')] : [];
  });
}

/** The job functions' bundles in the template, by handler kind. */
function bundlesByKind(template: Template, assemblyDir: string): Map<'producer' | 'consumer', KindBundles> {
  const byKind = new Map<'producer' | 'consumer', KindBundles>();
  for (const [logicalId, resource] of Object.entries(template.Resources)) {
    if (resource.Type !== 'AWS::Lambda::Function') continue;
    const assetPath = (resource.Metadata as Record<string, unknown> | undefined)?.['aws:asset:path'];
    const environment = ((resource.Properties as { Environment?: { Variables?: Record<string, unknown> } }).Environment
      ?.Variables ?? {}) as Record<string, unknown>;
    if (typeof assetPath !== 'string' || environment.JOB_NAME === undefined) continue;
    const kind = handlerKind(environment);
    const asset = join(assemblyDir, assetPath);
    const bytes = statSync(join(asset, 'index.js')).size;
    const entry = byKind.get(kind) ?? {
      asset,
      bytes,
      functions: [],
      bundleBytes: {},
      layers: layerModules(template, assemblyDir, (resource.Properties as { Layers?: unknown }).Layers),
    };
    // Each function bundles its own job: the largest bundle of a kind is the one its goals are measured on.
    if (bytes > entry.bytes) Object.assign(entry, { asset, bytes });
    entry.functions.push(logicalId);
    entry.bundleBytes[logicalId] = bytes;
    byKind.set(kind, entry);
  }
  return byKind;
}

/** The SDK packages a bundle loads at init, and their init alone (median of `runs` fresh processes). */
function measureSdkInit(
  bundle: string,
  kind: 'producer' | 'consumer',
  layers: string[],
  at: { cwd: string; runs: number; unbundledDir: string },
): { sdkPackages: string[]; sdkInitMsMedian: number } {
  // Only what init really loads: a package the bundle requires lazily (S3, Lambda) is not part of the cold init.
  const required = new Set(
    [...readFileSync(bundle, 'utf8').matchAll(/require\("(@aws-sdk\/[a-z0-9-]+|sdk-slim)"\)/g)].map((m) => m[1]),
  );
  const sdkPackages = externalsLoadedAtInit(bundle, at.cwd, layers)
    .filter((p) => required.has(p))
    .sort();
  const sdkOnly = join(at.unbundledDir, `${kind}-sdk-only.js`);
  writeFileSync(sdkOnly, sdkPackages.map((p) => `require(${JSON.stringify(p)});`).join('\n'));
  return { sdkPackages, sdkInitMsMedian: measureInitMs(sdkOnly, at.cwd, at.runs, layers) };
}

/** The minified size of the layers' modules (each module's index.js). */
function layerBytesOf(layers: string[]): number {
  return layers
    .flatMap((dir) => (existsSync(dir) ? readdirSync(dir).map((m) => join(dir, m, 'index.js')) : []))
    .filter((f) => existsSync(f))
    .reduce((n, f) => n + statSync(f).size, 0);
}

/** One kind's figures: its largest bundle's size and init, bundled, unbundled and the SDK alone. */
function measureKind(
  kind: 'producer' | 'consumer',
  entry: KindBundles,
  at: { cwd: string; runs: number; unbundledDir: string; progress: (line: string) => void },
): BundleFigures {
  const { cwd, runs } = at;
  const bundle = join(entry.asset, 'index.js');
  at.progress(
    `cold start: ${kind} bundle ${relative(cwd, bundle)}, ${runs} fresh processes each, bundled and unbundled`,
  );
  const initMsMedian = measureInitMs(bundle, cwd, runs, entry.layers);
  const unbundledInitMsMedian = measureInitMs(unbundledHandler(at.unbundledDir, kind), cwd, runs);
  const { sdkPackages, sdkInitMsMedian } = measureSdkInit(bundle, kind, entry.layers, at);
  return {
    bytes: statSync(bundle).size,
    bundleBytes: entry.bundleBytes,
    initMsMedian,
    unbundledInitMsMedian,
    unbundledRatio: unbundledInitMsMedian / initMsMedian,
    sdkInitMsMedian,
    layerBytes: layerBytesOf(entry.layers),
    sdkPackages,
    functions: entry.functions,
    asset: relative(cwd, entry.asset),
  };
}

export function runColdStartBench(options: ColdStartOptions): Record<'producer' | 'consumer', BundleFigures> {
  const cwd = options.cwd;
  const runs = options.runs ?? 7;
  const progress = options.progress ?? (() => undefined);
  const assemblyDir = resolve(cwd, options.assemblyDir ?? 'cdk.out');
  const env = appEnv(resolve(cwd), options.env);
  const artifact = ensureAppStack({
    env,
    stack: options.stack,
    assemblyDir,
    cwd,
    log: (line) => progress(`cold start: ${line}`),
  });
  const byKind = bundlesByKind(loadTemplate(artifact.templateFile), assemblyDir);
  const unbundledDir = mkdtempSync(join(tmpdir(), 'paced-jobs-unbundled-'));
  try {
    const result = {} as Record<'producer' | 'consumer', BundleFigures>;
    for (const kind of ['producer', 'consumer'] as const) {
      const entry = byKind.get(kind);
      if (!entry) throw new ColdStartError(`no ${kind} function in the template`);
      result[kind] = measureKind(kind, entry, { cwd, runs, unbundledDir, progress });
    }
    return result;
  } finally {
    rmSync(unbundledDir, { recursive: true, force: true });
  }
}
