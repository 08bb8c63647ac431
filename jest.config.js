// The suite in four tiers, as jest projects: `npx jest` (npm test) runs all four; `JEST_TIER=unit jest` (npm run
// test:unit; or component, integration, e2e) runs one.
//
// Which tier a test file is in follows from its path alone, so a new test lands by where it is and how it is named:
//   e2e          a name ending in .e2e.test.ts, anything under test/scaffold/, and the whole local runs named in E2E
//                below (each starts a full `npm start`, a chaos run or a bench run; renamed to *.e2e.test.ts, its
//                line here can go);
//   integration  a name ending in .integration.test.ts; but for the pure tests that a folder's `except` list below
//                names: everything under test/local/ (the local runtime: its servers, child-process functions and
//                stack), test/ops/ (the operator CLI against a local stack) and test/bin/ (the CDK app run as a child
//                process), and the test files directly in test/lib/ (the constructs synthesized, a few seconds a file even
//                without bundling, which testApp() in test/lib/cdkContext.ts turns off; bundles.test.ts reads the
//                bundles in the synthesized cdk.out); and
//                test/security/template.test.ts (synthesizes every environment), test/bench/e2eCpu.test.ts (a
//                child process's CPU) and test/bench/pacing.test.ts (the pacing bench: dynalite and a quota provider
//                process);
//   component    a name ending in .component.test.ts, and the tests in a job's own folder, lambda/jobs/<job>/test/
//                (the examples' own tests, on local DynamoDB; they live in the job's folder so that deleting an
//                example deletes its tests, and no test under test/ names an example: the engine's tests run on
//                test/fixtures/jobs/), and the files named in COMPONENT (the fault proxies, the bench's counting
//                proxy, the console's HTTP server, the local CloudWatch API; test/local/cloudWatchApi.test.ts is in test/local's `except` so as not to be
//                integration): tests against in-process servers, the local AWS-protocol ones (dynalite,
//                local-aws-sqs, s3rver), an HTTP stub or the project's own. Their test
//                environment (test/support/componentEnvironment.ts) starts one dynalite and one local-aws-sqs per jest
//                worker, which `startLocalAws()` (test/support/aws.ts) hands every file, emptied between files;
//   unit         every other *.test.ts: pure and in-process, the fast loop (`npm run test:unit -- --watch`): no server,
//                no child process, no real timer without fake timers or an injected clock (test/support/tiers.test.ts
//                scans every unit file, and the test-support modules it imports, for them).
// So a new test under test/local/, test/ops/ or directly in test/lib/ is an integration test unless it is added to its
// folder's `except`; one elsewhere that starts the local runtime or a child process should be *.integration.test.ts,
// and one that starts a local AWS server or an HTTP stub *.component.test.ts.
// e2e wins over integration, integration over component, and component over unit: every file is in exactly one tier
// (test/support/tiers.test.ts checks it).
//
// Only integration and e2e run test/support/globalSetup.ts (it re-synthesizes cdk.out when the sources are newer):
// jest runs a project's globalSetup only when a test of that project is selected, and once for both, since it is
// the same file. No unit or component test reads cdk.out.
const { join } = require('node:path');
const { availableParallelism } = require('node:os');

const ROOT = __dirname;
const TEST = '\\.test\\.ts$';
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const at = (relative) => escape(join(ROOT, relative));
/** The test file at this path, relative to the project. */
const file = (relative) => `^${at(relative)}$`;
/** Every test file under this folder (directly in it, when `shallow`), but the ones directly in it that `except` names. */
const folder = (relative, { except = [], shallow = false } = {}) =>
  `^${at(relative)}/${except.length ? `(?!(?:${except.map(escape).join('|')})$)` : ''}${shallow ? '[^/]*' : '.*'}${TEST}`;

const E2E = [
  `\\.e2e${TEST}`,
  folder('test/scaffold'),
  file('test/local/backlog.test.ts'),
  file('test/local/admissionPause.test.ts'),
  file('test/local/cli.test.ts'),
  file('test/chaos/chaos.test.ts'),
  file('test/bench/bench.test.ts'),
];

const INTEGRATION = [
  `\\.integration${TEST}`,
  folder('test/local', { except: ['alarms.test.ts', 'assembly.test.ts', 'cloudWatchApi.test.ts', 'cron.test.ts', 'envFile.test.ts', 'lambdaRules.test.ts', 'metricSamples.test.ts', 'metricsTap.test.ts', 'resourceTypes.test.ts', 'report.test.ts', 'scheduler.test.ts', 'template.test.ts', 'waitFor.test.ts'] }),
  folder('test/ops', { except: ['io.test.ts', 'resources.test.ts'] }),
  folder('test/bin'),
  folder('test/lib', { shallow: true, except: ['outputs.test.ts', 'props-error.test.ts'] }),
  file('test/security/template.test.ts'),
  file('test/bench/e2eCpu.test.ts'),
  file('test/bench/pacing.test.ts'),
];

const COMPONENT = [
  `\\.component${TEST}`,
  `^${at('lambda/jobs')}/[^/]+/test/.*${TEST}`,
  file('test/bench/countingProxy.test.ts'),
  file('test/chaos/dynamoProxy.test.ts'),
  file('test/chaos/s3Proxy.test.ts'),
  file('test/console/server.test.ts'),
  file('test/local/cloudWatchApi.test.ts'),
];

/** What every tier shares: a project takes none of its own options from the top level of this file. */
const shared = {
  rootDir: ROOT,
  // lambda/jobs for the examples' own tests, in each job's test/ folder (component, above).
  roots: ['<rootDir>/test', '<rootDir>/lambda/jobs'],
  testEnvironment: 'node',
  // swc, file by file like tsc's isolatedModules: no type-check here (tsc does that, test/scaffold/newJob.e2e.test.ts
  // on the whole project); on a fresh clone, where jest has cached no transform, ts-jest took about twice the CPU.
  transform: {
    '^.+\\.tsx?$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  setupFiles: ['<rootDir>/test/support/setupEnv.ts'],
};

const globalSetup = '<rootDir>/test/support/globalSetup.ts';

/** @type {import('jest').Config} */
const projects = [
    {
      ...shared,
      displayName: 'unit',
      testRegex: [`^${at('test')}/.*${TEST}`],
      testPathIgnorePatterns: ['/node_modules/', ...COMPONENT, ...INTEGRATION, ...E2E],
    },
    {
      ...shared,
      displayName: 'component',
      testRegex: COMPONENT,
      testPathIgnorePatterns: ['/node_modules/', ...INTEGRATION, ...E2E],
      // One dynalite and one local-aws-sqs per worker, shared by its files (startLocalAws in test/support/aws.ts).
      testEnvironment: '<rootDir>/test/support/componentEnvironment.ts',
    },
    {
      ...shared,
      displayName: 'integration',
      testRegex: INTEGRATION,
      testPathIgnorePatterns: ['/node_modules/', ...E2E],
      globalSetup,
    },
    {
      ...shared,
      displayName: 'e2e',
      testRegex: E2E,
      testPathIgnorePatterns: ['/node_modules/'],
      globalSetup,
    },
];

// `npm run test:unit` sets JEST_TIER rather than passing --selectProjects: that flag takes every argument after it as a
// project name, so `npm run test:unit -- test/some/path --watch` would silently run the whole tier.
const tier = process.env.JEST_TIER;
if (tier !== undefined && !projects.some((p) => p.displayName === tier)) {
  throw new Error(`JEST_TIER=${tier} names no test tier (tiers: ${projects.map((p) => p.displayName).join(', ')})`);
}

module.exports = {
  // Here, not in `shared`: jest (30) reads the test timeout from the top level only and ignores a project's.
  testTimeout: 60000,
  // One more worker than the cores (three on this 2-core machine). jest's default is one fewer than the cores, which
  // here is one: every file in turn, in band. Much of an integration or e2e file's time is spent waiting on the paced
  // rates, visibility timeouts and the local stack's processes rather than on CPU (the fairness bench's file: 38 s of
  // CPU in 128 s), so extra workers overlap that waiting: 610 s for the suite against 777 s with two workers (quiet,
  // 179 files). Timing-sensitive tests do not depend on an idle machine: no test asserts a duration, a time-scaled run
  // keeps its windows long enough for a loaded machine's timers, and the suite is run with another process keeping a
  // core busy (README, Tests).
  maxWorkers: availableParallelism() + 1,
  // The longest files first, by tier on a fresh clone where jest has cached no durations (test/support/sequencer.js).
  testSequencer: '<rootDir>/test/support/sequencer.js',
  projects: tier === undefined ? projects : projects.filter((p) => p.displayName === tier),
};
