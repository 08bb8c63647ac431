// The jest projects in jest.config.js are the suite's tiers: every test file must be in exactly one, or `npm test`
// would run it twice or never. Matched as jest matches them: a path is in a project when one of its testRegex
// patterns matches it and none of its testPathIgnorePatterns does. And the unit tier is the fast loop it says it is: no
// unit file (nor a test-support module it imports) starts a server or a child process, or waits on the real clock.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import * as ts from 'typescript';

interface Project {
  displayName: string;
  testRegex: string[];
  testPathIgnorePatterns: string[];
  globalSetup?: string;
  setupFiles: string[];
  testEnvironment: string;
}

const ROOT = join(__dirname, '..', '..');
type Config = { testTimeout?: number; maxWorkers?: number; testSequencer?: string; projects: Project[] };
/** test/support/durations.json as the sequencer reads it: ms by path relative to the project. */
const recordedMs = () => (require('./sequencer.js') as { RECORDED_MS: Map<string, number> }).RECORDED_MS;
/** What the test sequencer reads of a test file. */
interface FakeTest {
  path: string;
  context: { config: Record<string, unknown>; hasteFS: { getSize(path: string): number } };
  duration?: number;
}

/** jest.config.js as it loads with JEST_TIER set to `tier` (unset: every tier), in a fresh module registry. */
function configWith(tier: string | undefined): Config {
  const saved = process.env.JEST_TIER;
  if (tier === undefined) delete process.env.JEST_TIER;
  else process.env.JEST_TIER = tier;
  try {
    let config: Config | undefined;
    jest.isolateModules(() => {
      config = require('../../jest.config.js') as Config;
    });
    return config!;
  } finally {
    if (saved === undefined) delete process.env.JEST_TIER;
    else process.env.JEST_TIER = saved;
  }
}

// The whole suite's config, whichever tier this test itself runs in (`npm run test:unit` sets JEST_TIER).
const config = configWith(undefined);
const { projects } = config;

const tiersOf = (relative: string) => {
  const path = join(ROOT, relative);
  return projects
    .filter(
      (p) =>
        p.testRegex.some((r) => new RegExp(r).test(path)) &&
        !p.testPathIgnorePatterns.some((r) => new RegExp(r).test(path)),
    )
    .map((p) => p.displayName);
};

/** The test files under a folder of the project, by their paths relative to it. */
const testsUnder = (folder: string) =>
  (readdirSync(join(ROOT, folder), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => join(folder, f));

// test/ and the jobs' own test folders (lambda/jobs/<job>/test/), the two roots jest.config.js gives jest.
const testFiles = [...testsUnder('test'), ...testsUnder('lambda/jobs')].sort();

describe('Config: the jest projects (unit, component, integration, e2e)', () => {
  it('are the four tiers', () => {
    expect(projects.map((p) => p.displayName)).toEqual(['unit', 'component', 'integration', 'e2e']);
  });

  it('narrow to one tier with JEST_TIER (npm run test:unit), and refuse a tier that does not exist', () => {
    expect(configWith('unit').projects.map((p) => p.displayName)).toEqual(['unit']);
    expect(configWith('component').projects.map((p) => p.displayName)).toEqual(['component']);
    expect(configWith('e2e').projects.map((p) => p.displayName)).toEqual(['e2e']);
    expect(() => configWith('fast')).toThrow(
      'JEST_TIER=fast names no test tier (tiers: unit, component, integration, e2e)',
    );
  });

  it('put every test file in exactly one tier', () => {
    expect(testFiles.length).toBeGreaterThan(50);
    expect(testFiles.map((f) => [f, tiersOf(f)]).filter(([, tiers]) => tiers.length !== 1)).toEqual([]);
  });

  it.each([
    ['test/ops/serve.e2e.test.ts', 'e2e'],
    ['lambda/jobs/some-job/test/run.e2e.test.ts', 'e2e'],
    ['test/scaffold/newJob.test.ts', 'e2e'],
    ['test/local/backlog.test.ts', 'e2e'],
    ['test/chaos/chaos.test.ts', 'e2e'],
    ['test/local/stack.test.ts', 'integration'],
    ['test/local/a-new-runtime.test.ts', 'integration'],
    ['test/ops/commands/redrive.test.ts', 'integration'],
    ['test/lambda/adapters/queue.integration.test.ts', 'integration'],
    ['test/lib/bundles.test.ts', 'integration'],
    ['test/lib/stack.test.ts', 'integration'],
    ['test/lib/a-new-construct.test.ts', 'integration'],
    ['test/security/template.test.ts', 'integration'],
    ['test/bin/app.test.ts', 'integration'],
    ['test/bench/e2eCpu.test.ts', 'integration'],
    ['test/local/servers.component.test.ts', 'integration'],
    ['test/lambda/handlers/consumer.component.test.ts', 'component'],
    ['test/lambda/adapters/a-new-adapter.component.test.ts', 'component'],
    ['lambda/jobs/some-job/test/index.test.ts', 'component'],
    ['lambda/jobs/a-new-job/test/local.test.ts', 'component'],
    ['lambda/jobs/a-new-job/test/nested/parts.test.ts', 'component'],
    ['test/bench/countingProxy.test.ts', 'component'],
    ['test/chaos/dynamoProxy.test.ts', 'component'],
    ['test/chaos/s3Proxy.test.ts', 'component'],
    ['test/console/server.test.ts', 'component'],
    ['test/local/cloudWatchApi.test.ts', 'component'],
    ['test/bench/pacing.test.ts', 'integration'],
    ['test/lambda/jobs/jobs.test.ts', 'unit'],
    ['test/lambda/jobs/some-job/index.test.ts', 'unit'],
    ['test/local/waitFor.test.ts', 'unit'],
    ['test/local/cron.test.ts', 'unit'],
    ['test/ops/io.test.ts', 'unit'],
    ['test/lib/config/schema.test.ts', 'unit'],
    ['test/lib/outputs.test.ts', 'unit'],
    ['test/lambda/handlers/jobLoader.test.ts', 'unit'],
    ['test/chaos/prng.test.ts', 'unit'],
    ['test/support/tiers.test.ts', 'unit'],
  ])('put %s in %s', (file, tier) => {
    expect(tiersOf(file)).toEqual([tier]);
  });

  it('do not take a file under an except-listed name in a subfolder for the pure test it names', () => {
    expect(tiersOf('test/local/nested/cron.test.ts')).toEqual(['integration']);
  });

  it("keep the 60 s test timeout where jest reads it, at the top level (jest ignores a project's own)", () => {
    expect(config.testTimeout).toBe(60_000);
  });

  it('run more workers than cores, so that files waiting on the local stack overlap (jest alone would run one on 2)', () => {
    expect(config.maxWorkers).toBeGreaterThan(availableParallelism());
  });

  it('start the longest files first: by cached duration, else by tier, e2e first, so none is left running alone', () => {
    const Sequencer = require('./sequencer.js') as new (options: {
      contexts: unknown[];
      globalConfig: unknown;
    }) => {
      sort(tests: FakeTest[]): FakeTest[];
    };
    const sizes: Record<string, number> = {
      '/a/unit-big.test.ts': 9_000,
      '/a/unit.test.ts': 100,
      '/a/e2e.test.ts': 50,
      '/a/int.test.ts': 10,
      '/a/cached.test.ts': 1,
    };
    const context = {
      config: { cacheDirectory: '/nonexistent', name: 'x' },
      hasteFS: { getSize: (p: string) => sizes[p] },
    };
    const test = (path: string, tier: string): FakeTest => ({
      path,
      context: { ...context, config: { ...context.config, displayName: { name: tier } } },
    });
    const tests = [
      test('/a/unit-big.test.ts', 'unit'),
      test('/a/unit.test.ts', 'unit'),
      test('/a/int.test.ts', 'integration'),
      test('/a/e2e.test.ts', 'e2e'),
      test('/a/cached.test.ts', 'unit'),
    ];
    const sequencer = new Sequencer({ contexts: [], globalConfig: {} });
    // What jest cached from the last run ([0 failed or 1 passed, ms]): a unit file that took 90 s (a duration beats a tier's typical one), and one
    // that failed (first, whatever its time).
    const cache: Record<string, [number, number]> = { '/a/cached.test.ts': [1, 90_000], '/a/unit.test.ts': [0, 5] };
    Object.assign(sequencer, { _getCache: () => cache });
    expect(sequencer.sort(tests).map((t) => t.path)).toEqual([
      '/a/unit.test.ts',
      '/a/cached.test.ts',
      '/a/e2e.test.ts',
      '/a/int.test.ts',
      '/a/unit-big.test.ts',
    ]);

    // Uncached, a file test/support/durations.json records takes its recorded duration: a long integration file
    // ahead of an e2e file it outlasts, though its tier's typical duration is shorter.
    const [longest, seconds] = [...recordedMs()].sort(([, a], [, b]) => b - a)[0];
    const recordedFile = test(join(ROOT, longest), 'integration');
    sizes[recordedFile.path] = 1;
    expect(seconds).toBeGreaterThan(60_000);
    expect(sequencer.sort([test('/a/e2e.test.ts', 'e2e'), recordedFile]).map((t) => t.path)).toEqual([
      recordedFile.path,
      '/a/e2e.test.ts',
    ]);
  });

  it('record durations only for test files that exist (a renamed file would silently lose its place)', () => {
    const missing = [...recordedMs().keys()].filter((path) => !existsSync(join(ROOT, path)));
    expect(missing).toEqual([]);
    expect(recordedMs().size).toBeGreaterThan(0);
  });

  it('synthesize cdk.out (globalSetup) only for the tiers that run it, and set up the environment for all', () => {
    expect(projects.map((p) => [p.displayName, p.globalSetup])).toEqual([
      ['unit', undefined],
      ['component', undefined],
      ['integration', '<rootDir>/test/support/globalSetup.ts'],
      ['e2e', '<rootDir>/test/support/globalSetup.ts'],
    ]);
    expect(projects.every((p) => p.setupFiles.includes('<rootDir>/test/support/setupEnv.ts'))).toBe(true);
  });

  it('give the component tier, alone, the environment that shares one pair of local AWS servers per worker', () => {
    expect(projects.map((p) => [p.displayName, p.testEnvironment])).toEqual([
      ['unit', 'node'],
      ['component', '<rootDir>/test/support/componentEnvironment.ts'],
      ['integration', 'node'],
      ['e2e', 'node'],
    ]);
  });
});

// By the project's naming: what starts a server is a start...Server, start...Api or start...Stub (startConsoleServer,
// startCloudWatchApi, startHttpStub), or one of the local AWS servers; called bare or as a method (http.createServer).
const SERVER =
  /^(?:startLocalAws|startDynamoDb|startSqs|startS3|start\w*(?:Server|Api|Stub)|listenOnLoopback|createServer|listen)$/;
// Called bare: `new Prng(5).fork('kills')` is a method of the same name, not a process.
const CHILD_PROCESS = /^(?:spawn|spawnSync|execFile|execFileSync|execSync|fork|start\w*Process)$/;
const CHILD_PROCESS_MODULE = /^(?:node:)?child_process$/;
const REAL_TIMER = /^(?:setTimeout|setInterval|sleep|waitFor|holdsFor)$/;

/**
 * What in a unit-tier source makes it not pure: a server or a child process started, or a real timer (a wait on the
 * real clock: setTimeout, setInterval, sleep, waitFor, holdsFor) in a file that does not set up jest's fake timers. A
 * file with an injected clock hands its code a fake `sleep`/`now` as an option, which this does not flag: it flags a
 * call of a timer by its global or shared name. Read with TypeScript's parser, as timing.test.ts reads test files, so
 * a comment or a string that names a timer is not a call of it; an import or require of child_process counts.
 */
function impurities(source: string): string[] {
  const file = ts.createSourceFile('test.ts', source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  let server: string | undefined;
  let child: string | undefined;
  let timer: string | undefined;
  let fakeTimers = false;
  const visit = (node: ts.Node): void => {
    if (
      ts.isImportDeclaration(node) &&
      ts.isStringLiteral(node.moduleSpecifier) &&
      CHILD_PROCESS_MODULE.test(node.moduleSpecifier.text)
    ) {
      child ??= `'${node.moduleSpecifier.text}'`;
    }
    if (ts.isCallExpression(node)) {
      const callee = node.expression;
      const bare = ts.isIdentifier(callee) ? callee.text : undefined;
      const name = bare ?? (ts.isPropertyAccessExpression(callee) ? callee.name.text : undefined);
      const [first] = node.arguments;
      const moduleName = first && ts.isStringLiteralLike(first) ? first.text : undefined;
      if (name !== undefined && SERVER.test(name)) server ??= bare === undefined ? `.${name}` : name;
      if (bare !== undefined && CHILD_PROCESS.test(bare)) child ??= bare;
      if (
        (bare === 'require' || callee.kind === ts.SyntaxKind.ImportKeyword) &&
        moduleName !== undefined &&
        CHILD_PROCESS_MODULE.test(moduleName)
      ) {
        child ??= `'${moduleName}'`;
      }
      if (bare !== undefined && REAL_TIMER.test(bare)) timer ??= bare;
      if (callee.getText(file).replace(/\s/g, '') === 'jest.useFakeTimers') fakeTimers = true;
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  const found: string[] = [];
  if (server) found.push(`starts a server (${server})`);
  if (child) found.push(`starts a child process (${child})`);
  if (timer && !fakeTimers) found.push(`waits on the real clock (${timer}) without jest.useFakeTimers`);
  return found;
}

/** The test-support modules (non-test .ts files under test/) a file imports, and theirs, as paths relative to ROOT. */
function supportModules(file: string, seen = new Set<string>()): string[] {
  const source = readFileSync(join(ROOT, file), 'utf8');
  for (const [, specifier] of source.matchAll(/from\s+'(\.[^']+)'/g)) {
    const target = ['.ts', '/index.ts']
      .map((ext) => resolve(dirname(join(ROOT, file)), specifier) + ext)
      .find((p) => existsSync(p));
    if (!target) continue;
    const rel = relative(ROOT, target);
    if (!rel.startsWith(`test${'/'}`) || rel.endsWith('.test.ts') || seen.has(rel)) continue;
    seen.add(rel);
    supportModules(rel, seen);
  }
  return [...seen];
}

describe('The unit tier: pure and in-process', () => {
  describe('Function: impurities (the scan, on seeded sources)', () => {
    it.each([
      [
        'a shared local AWS',
        'beforeAll(async () => { aws = await startLocalAws(); });',
        'starts a server (startLocalAws)',
      ],
      ['an HTTP stub', 'const stub = await startHttpStub(handler);', 'starts a server (startHttpStub)'],
      [
        'a server of its own',
        "const server = createServer(handle);\nserver.listen(0, '127.0.0.1');",
        'starts a server (createServer)',
      ],
      ['dynalite', 'const db = await startDynamoDb();', 'starts a server (startDynamoDb)'],
      [
        "the project's own server",
        'server = await startConsoleServer({ source });',
        'starts a server (startConsoleServer)',
      ],
      ['a local API', 'server = await startCloudWatchApi({ samples });', 'starts a server (startCloudWatchApi)'],
      [
        'a server process',
        'const provider = await startQuotaProviderProcess(options);',
        'starts a child process (startQuotaProviderProcess)',
      ],
      ['a child process', "import { spawn } from 'node:child_process';", 'starts a child process'],
      ['a child process by require', "const cp = require('child_process');", 'starts a child process'],
      [
        'a sleep on the real clock',
        'await new Promise((r) => setTimeout(r, 50));',
        'waits on the real clock (setTimeout)',
      ],
      ['an interval', 'const timer = setInterval(tick, 10);', 'waits on the real clock (setInterval)'],
      ['a shared sleep', 'await sleep(100);', 'waits on the real clock (sleep)'],
      ['a wait for a condition', "await waitFor('done', () => done);", 'waits on the real clock (waitFor)'],
    ])('flags %s', (_name, source, expected) => {
      expect(impurities(source).join('; ')).toContain(expected);
    });

    it.each([
      ['fake timers', 'jest.useFakeTimers();\nconst p = sleep(1000);\njest.advanceTimersByTime(1000);'],
      ['an injected sleep', 'const publisher = new SqsPublisher({ sleep: async () => undefined });'],
      ['an injected clock', 'const limiter = new Limiter({ now: () => clock.now });\nclock.advance(1000);'],
      [
        'a timer named in a comment or a string',
        "// no setTimeout( here\nexpect(log).toContain('waitFor(x) timed out; spawn(');",
      ],
      ['a method of the same name', "const x = new Prng(5).fork('kills').next();\nconst y = emitter.waitFor;"],
    ])('passes %s', (_name, source) => {
      expect(impurities(source)).toEqual([]);
    });
  });

  const unitFiles = testFiles.filter((f) => tiersOf(f).includes('unit'));

  it('holds no file that starts a server or a child process, or waits on the real clock without fake timers', () => {
    expect(unitFiles.length).toBeGreaterThan(50);
    const impure = unitFiles.flatMap((file) =>
      [file, ...supportModules(file)].flatMap((source) => {
        const found = impurities(readFileSync(join(ROOT, source), 'utf8'));
        return found.length ? [`${file}${source === file ? '' : ` (via ${source})`}: ${found.join('; ')}`] : [];
      }),
    );
    expect(impure).toEqual([]);
  });

  it('follows the test-support modules a file imports', () => {
    expect(supportModules('test/lambda/handlers/consumer.component.test.ts')).toEqual(
      expect.arrayContaining(['test/support/aws.ts', 'test/support/httpStub.ts']),
    );
  });
});
