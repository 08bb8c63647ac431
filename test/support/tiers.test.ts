// The jest projects in jest.config.js are the suite's tiers: every test file must be in exactly one, or `npm test`
// would run it twice or never. Matched as jest matches them: a path is in a project when one of its testRegex
// patterns matches it and none of its testPathIgnorePatterns does.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

interface Project {
  displayName: string;
  testRegex: string[];
  testPathIgnorePatterns: string[];
  globalSetup?: string;
  setupFiles: string[];
}

const ROOT = join(__dirname, '..', '..');
type Config = { testTimeout?: number; projects: Project[] };

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
    .filter((p) => p.testRegex.some((r) => new RegExp(r).test(path)) && !p.testPathIgnorePatterns.some((r) => new RegExp(r).test(path)))
    .map((p) => p.displayName);
};

const testFiles = (readdirSync(join(ROOT, 'test'), { recursive: true }) as string[])
  .filter((f) => f.endsWith('.test.ts'))
  .map((f) => join('test', f))
  .sort();

describe('Config: the jest projects (unit, integration, e2e)', () => {
  it('are the three tiers', () => {
    expect(projects.map((p) => p.displayName)).toEqual(['unit', 'integration', 'e2e']);
  });

  it('narrow to one tier with JEST_TIER (npm run test:unit), and refuse a tier that does not exist', () => {
    expect(configWith('unit').projects.map((p) => p.displayName)).toEqual(['unit']);
    expect(configWith('e2e').projects.map((p) => p.displayName)).toEqual(['e2e']);
    expect(() => configWith('fast')).toThrow('JEST_TIER=fast names no test tier (tiers: unit, integration, e2e)');
  });

  it('put every test file in exactly one tier', () => {
    expect(testFiles.length).toBeGreaterThan(50);
    expect(testFiles.map((f) => [f, tiersOf(f)]).filter(([, tiers]) => tiers.length !== 1)).toEqual([]);
  });

  it.each([
    ['test/ops/serve.e2e.test.ts', 'e2e'],
    ['test/lambda/jobs/some-job/run.e2e.test.ts', 'e2e'],
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
    ['test/local/waitFor.test.ts', 'unit'],
    ['test/local/cron.test.ts', 'unit'],
    ['test/ops/io.test.ts', 'unit'],
    ['test/lib/config/schema.test.ts', 'unit'],
    ['test/lib/outputs.test.ts', 'unit'],
    ['test/lambda/handlers/consumer.test.ts', 'unit'],
    ['test/chaos/prng.test.ts', 'unit'],
    ['test/support/tiers.test.ts', 'unit'],
  ])('put %s in %s', (file, tier) => {
    expect(tiersOf(file)).toEqual([tier]);
  });

  it('do not take a file under an except-listed name in a subfolder for the pure test it names', () => {
    expect(tiersOf('test/local/nested/cron.test.ts')).toEqual(['integration']);
  });

  it('keep the 60 s test timeout where jest reads it, at the top level (jest ignores a project\'s own)', () => {
    expect(config.testTimeout).toBe(60_000);
  });

  it('synthesize cdk.out (globalSetup) only for the tiers that run it, and set up the environment for all', () => {
    expect(projects.map((p) => [p.displayName, p.globalSetup])).toEqual([
      ['unit', undefined],
      ['integration', '<rootDir>/test/support/globalSetup.ts'],
      ['e2e', '<rootDir>/test/support/globalSetup.ts'],
    ]);
    expect(projects.every((p) => p.setupFiles.includes('<rootDir>/test/support/setupEnv.ts'))).toBe(true);
  });
});
