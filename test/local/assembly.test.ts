import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AssemblyError,
  assemblyStacks,
  chooseStack,
  ensureAppStack,
  ensureStack,
  findStack,
  appEnv,
  isReferenceApp,
  newestAppSourceMtime,
  newestReferenceInputMtime,
  newestSourceMtime,
  StackChoiceError,
} from '../../local/assembly';

describe('Function: findStack', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'assembly-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const writeAssembly = () => {
    mkdirSync(join(dir, 'cdk.out'));
    writeFileSync(
      join(dir, 'cdk.out', 'manifest.json'),
      JSON.stringify({
        artifacts: {
          'PacedJobs-dev': {
            type: 'aws:cloudformation:stack',
            properties: { templateFile: 'PacedJobs-dev.template.json' },
          },
        },
      }),
    );
    writeFileSync(join(dir, 'cdk.out', 'PacedJobs-dev.template.json'), '{"Resources":{}}');
  };

  it('picks the environment stack from the manifest', () => {
    writeAssembly();
    expect(findStack(join(dir, 'cdk.out'), 'dev')).toEqual({
      stackName: 'PacedJobs-dev',
      templateFile: join(dir, 'cdk.out', 'PacedJobs-dev.template.json'),
      assemblyDir: join(dir, 'cdk.out'),
    });
    expect(findStack(join(dir, 'cdk.out'), 'prod')).toBeUndefined();
  });

  it('uses an up-to-date assembly without synthesizing', () => {
    writeAssembly();
    mkdirSync(join(dir, 'lib'));
    writeFileSync(join(dir, 'lib', 'stack.ts'), '');
    const old = new Date(Date.now() - 60_000);
    utimesSync(join(dir, 'lib', 'stack.ts'), old, old);
    const logs: string[] = [];
    expect(ensureStack({ env: 'dev', assemblyDir: 'cdk.out', cwd: dir, log: (l) => logs.push(l) }).stackName).toBe(
      'PacedJobs-dev',
    );
    expect(logs).toEqual([]);
    expect(Math.abs(newestSourceMtime(dir) - old.getTime())).toBeLessThan(1000);
  });

  it("leaves a job's own tests out of the sources, and counts cdk.json and package-lock.json as the synth's inputs", () => {
    const at = (seconds: number) => new Date(seconds * 1000);
    const write = (path: string, when: Date) => {
      mkdirSync(join(dir, path, '..'), { recursive: true });
      writeFileSync(join(dir, path), '');
      utimesSync(join(dir, path), when, when);
    };
    write('lambda/jobs/a-job/index.ts', at(1_700_000_000));
    // No bundle holds a job's tests: a newer one does not make the assembly stale.
    write('lambda/jobs/a-job/test/index.test.ts', at(1_700_000_100));
    expect(newestSourceMtime(dir)).toBe(1_700_000_000_000);
    write('cdk.json', at(1_700_000_200));
    write('package-lock.json', at(1_700_000_300));
    expect(newestReferenceInputMtime(dir)).toBe(1_700_000_300_000);
  });

  it('warns, without synthesizing, when a source changed after the assembly was written', () => {
    writeAssembly();
    mkdirSync(join(dir, 'lambda'));
    writeFileSync(join(dir, 'lambda', 'handler.ts'), '');
    const old = new Date(Date.now() - 60_000);
    utimesSync(join(dir, 'cdk.out', 'PacedJobs-dev.template.json'), old, old);
    const logs: string[] = [];
    ensureStack({ env: 'dev', assemblyDir: 'cdk.out', cwd: dir, log: (l) => logs.push(l) });
    expect(logs).toEqual([
      `warning: ${join(dir, 'cdk.out', 'PacedJobs-dev.template.json')} is older than the sources in bin, lib, lambda; pass --synth to rebuild it`,
    ]);
  });
});

/** A template whose functions carry JOB_NAME when `jobs` names any (what PacedJobs synthesizes, reduced to that). */
const templateWith = (...jobs: string[]) =>
  JSON.stringify({
    Resources: {
      Other: { Type: 'AWS::Lambda::Function', Properties: { Environment: { Variables: { TABLE: 'reports' } } } },
      ...Object.fromEntries(
        jobs.map((job) => [
          `${job}Consumer`,
          { Type: 'AWS::Lambda::Function', Properties: { Environment: { Variables: { JOB_NAME: job } } } },
        ]),
      ),
    },
  });

/** Writes a cloud assembly: each stack with its template; a name with a slash is a stack in a Stage (a nested one). */
function writeAppAssembly(dir: string, stacks: Record<string, string>): void {
  const artifacts: Record<string, object> = {};
  for (const [name, template] of Object.entries(stacks)) {
    const [stage, stack] = name.includes('/') ? name.split('/') : [undefined, name];
    const at = stage ? join(dir, `assembly-${stage}`) : dir;
    mkdirSync(at, { recursive: true });
    writeFileSync(join(at, `${stage ? `${stage}${stack}` : stack}.template.json`), template);
    const artifact = {
      type: 'aws:cloudformation:stack',
      displayName: name,
      properties: {
        templateFile: `${stage ? `${stage}${stack}` : stack}.template.json`,
        stackName: stage ? `${stage}-${stack}` : stack,
      },
    };
    if (stage) {
      const manifestFile = join(at, 'manifest.json');
      const nested = existsSync(manifestFile)
        ? (JSON.parse(readFileSync(manifestFile, 'utf8')) as { artifacts: Record<string, object> })
        : { artifacts: {} };
      nested.artifacts[`${stage}${stack}`] = artifact;
      writeFileSync(manifestFile, JSON.stringify(nested));
      artifacts[`assembly-${stage}`] = {
        type: 'cdk:cloud-assembly',
        properties: { directoryName: `assembly-${stage}`, displayName: stage },
      };
    } else {
      artifacts[stack] = artifact;
    }
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify({ version: '55.0.0', artifacts }));
}

describe("Function: chooseStack, the stack of a team's app that holds its jobs", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'assembly-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('takes the one stack with jobs, whatever it is called, leaving out the stacks without', () => {
    writeAppAssembly(dir, { Network: templateWith(), Reporting: templateWith('usage-report') });
    expect(chooseStack(dir)).toEqual({
      stackName: 'Reporting',
      templateFile: join(dir, 'Reporting.template.json'),
      assemblyDir: dir,
    });
  });

  it('needs --stack when two stacks hold jobs, naming both, and takes the one named', () => {
    writeAppAssembly(dir, {
      Billing: templateWith('invoice-export'),
      Reporting: templateWith('usage-report'),
      Web: templateWith(),
    });
    expect(() => chooseStack(dir)).toThrow(
      new StackChoiceError(
        'several stacks hold PacedJobs: Billing, Reporting; pick one with --stack <name>',
        'several',
      ),
    );
    expect(chooseStack(dir, { stack: 'Billing' }).templateFile).toBe(join(dir, 'Billing.template.json'));
  });

  it('refuses a --stack the assembly lacks, or one without jobs, naming the stacks that have them', () => {
    writeAppAssembly(dir, { Billing: templateWith('invoice-export'), Web: templateWith() });
    expect(() => chooseStack(dir, { stack: 'Biling' })).toThrow(
      new StackChoiceError(`--stack Biling: no such stack in ${dir} (stacks with PacedJobs: Billing)`, 'unknown'),
    );
    expect(() => chooseStack(dir, { stack: 'Web' })).toThrow(
      new StackChoiceError(
        '--stack Web: the stack holds no PacedJobs (no Lambda function with JOB_NAME); stacks with PacedJobs: Billing',
        'unknown',
      ),
    );
  });

  it('says no PacedJobs were found when no stack has a job', () => {
    writeAppAssembly(dir, { Web: templateWith() });
    expect(() => chooseStack(dir)).toThrow(
      new StackChoiceError(
        `no PacedJobs found in ${dir}: no stack has a Lambda function with JOB_NAME (stacks: Web); add \`new PacedJobs(stack, 'Jobs', { jobs: { ... } })\` to a stack of the app`,
        'none',
      ),
    );
  });

  it('finds a stack in a Stage (a nested assembly) by its path or its stack name', () => {
    writeAppAssembly(dir, {
      'Prod/Jobs': templateWith('usage-report'),
      'Prod/Web': templateWith(),
      'Beta/Jobs': templateWith('usage-report'),
    });
    expect(() => chooseStack(dir)).toThrow(
      'several stacks hold PacedJobs: Prod/Jobs, Beta/Jobs; pick one with --stack <name>',
    );
    const expected = {
      stackName: 'Prod-Jobs',
      templateFile: join(dir, 'assembly-Prod', 'ProdJobs.template.json'),
      assemblyDir: join(dir, 'assembly-Prod'),
    };
    expect(chooseStack(dir, { stack: 'Prod/Jobs' })).toEqual(expected);
    expect(chooseStack(dir, { stack: 'Prod-Jobs' })).toEqual(expected);
  });

  it('carries the account and region a stack is pinned to, and leaves out what CDK left unknown', () => {
    writeAppAssembly(dir, { Pinned: templateWith('a'), Agnostic: templateWith() });
    const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as {
      artifacts: Record<string, { environment?: string }>;
    };
    manifest.artifacts.Pinned.environment = 'aws://123456789012/eu-west-1';
    manifest.artifacts.Agnostic.environment = 'aws://unknown-account/unknown-region';
    writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest));
    expect(chooseStack(dir).environment).toEqual({ account: '123456789012', region: 'eu-west-1' });
    expect(assemblyStacks(dir).map((s) => [s.stackName, s.environment])).toEqual([
      ['Pinned', { account: '123456789012', region: 'eu-west-1' }],
      ['Agnostic', undefined],
    ]);
  });

  it("takes this repository's environment stack by --env when the assembly has it", () => {
    writeAppAssembly(dir, { 'PacedJobs-dev': templateWith('a'), 'PacedJobs-prod': templateWith('a') });
    expect(chooseStack(dir, { env: 'prod' }).stackName).toBe('PacedJobs-prod');
  });
});

describe("Function: ensureAppStack, in a team's app", () => {
  let app: string;
  beforeEach(() => {
    app = mkdtempSync(join(tmpdir(), 'team-app-'));
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'team-app' }));
  });
  afterEach(() => rmSync(app, { recursive: true, force: true }));

  const aged = (path: string) => {
    const old = new Date(Date.now() - 60_000);
    utimesSync(path, old, old);
  };

  it("warns when a file of the app's own (any folder but node_modules and the assembly) is newer than the template", () => {
    writeAppAssembly(join(app, 'cdk.out'), { Reporting: templateWith('usage-report') });
    mkdirSync(join(app, 'jobs', 'usage-report'), { recursive: true });
    mkdirSync(join(app, 'node_modules', 'paced-jobs'), { recursive: true });
    for (const file of ['package.json', 'cdk.out/Reporting.template.json']) aged(join(app, file));
    writeFileSync(join(app, 'node_modules', 'paced-jobs', 'index.js'), '');
    writeFileSync(join(app, 'cdk.context.json'), '{}');
    const logs: string[] = [];
    expect(ensureAppStack({ cwd: app, assemblyDir: 'cdk.out', log: (l) => logs.push(l) }).stackName).toBe('Reporting');
    expect(logs).toEqual([]);

    writeFileSync(join(app, 'jobs', 'usage-report', 'index.ts'), '');
    ensureAppStack({ cwd: app, assemblyDir: 'cdk.out', log: (l) => logs.push(l) });
    expect(logs).toEqual([
      `warning: ${join(app, 'cdk.out', 'Reporting.template.json')} is older than the app's sources in ${app}; pass --synth to rebuild it`,
    ]);
    expect(newestAppSourceMtime(app)).toBe(statSync(join(app, 'jobs', 'usage-report', 'index.ts')).mtimeMs);
  });

  it('refuses at once, without synthesizing, when several stacks hold jobs and none is named', () => {
    writeAppAssembly(join(app, 'cdk.out'), { A: templateWith('x'), B: templateWith('y') });
    const logs: string[] = [];
    expect(() => ensureAppStack({ cwd: app, assemblyDir: 'cdk.out', log: (l) => logs.push(l) })).toThrow(
      'several stacks hold PacedJobs: A, B; pick one with --stack <name>',
    );
    expect(logs).toEqual([]);
  });

  it('says the folder has no cdk.json when there is nothing to run and nothing to synthesize', () => {
    const logs: string[] = [];
    expect(() => ensureAppStack({ cwd: app, assemblyDir: 'cdk.out', log: (l) => logs.push(l) })).toThrow(
      new AssemblyError(
        `${app} has no cdk.json: run this in your CDK app's folder (the one with cdk.json), or name it with --app <dir>`,
      ),
    );
    expect(logs).toEqual([`no stack to run in ${join(app, 'cdk.out')}; running npx cdk synth --quiet`]);
  });
});

describe('Function: isReferenceApp', () => {
  it('recognizes this repository by its package name, and not a team app', () => {
    expect(isReferenceApp(join(__dirname, '..', '..'))).toBe(true);
    const app = mkdtempSync(join(tmpdir(), 'team-app-'));
    try {
      expect(isReferenceApp(app)).toBe(false);
      writeFileSync(
        join(app, 'package.json'),
        JSON.stringify({ name: 'team-app', dependencies: { 'paced-jobs': '^0.1.0' } }),
      );
      expect(isReferenceApp(app)).toBe(false);
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  });
});

describe('Function: appEnv', () => {
  it("is the environment given, else the reference app's dev, else none for a team's app", () => {
    const repository = join(__dirname, '..', '..');
    expect(appEnv(repository, 'prod')).toBe('prod');
    expect(appEnv(repository, undefined)).toBe('dev');
    const app = mkdtempSync(join(tmpdir(), 'team-app-'));
    try {
      expect(appEnv(app, undefined)).toBeUndefined();
      expect(appEnv(app, 'staging')).toBe('staging');
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  });
});
