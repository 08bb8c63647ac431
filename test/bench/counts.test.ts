// How many demo records each job's bench run seeds: `--count <job>=<n>`, the `--<unit> n` aliases resolved through the
// fixtures' units, the default for a job not named, and which job the backlog part runs.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommanderError } from 'commander';
import { backlogJobOf } from '../../bench/backlog';
import { collectCount, CountError, defaultCountOf, fixtureUnits, resolveCounts, warmUpCountOf } from '../../bench/counts';
import { buildProgram, countsFromFlags, unitAliases } from '../../bench/index';

/** Commander's error output kept off the test log; the thrown error carries the message. */
const quiet = { writeErr: () => undefined };

/** The example jobs' units, as their fixtures give them. */
const UNITS = new Map([
  ['payments', ['payment-reconciliation']],
  ['uploads', ['stale-upload-cleanup']],
  ['tenants', ['expired-session-cleanup']],
]);

describe('Function: collectCount', () => {
  it('adds one job per occurrence, keeping the earlier ones', () => {
    expect(collectCount('stale-upload-cleanup=40', collectCount('payment-reconciliation=12'))).toEqual({ 'payment-reconciliation': 12, 'stale-upload-cleanup': 40 });
  });

  it('takes 0 (the job is left out of the run)', () => {
    expect(collectCount('expired-session-cleanup=0')).toEqual({ 'expired-session-cleanup': 0 });
  });

  it('refuses a value that is not <job>=<n>, and a job named twice', () => {
    expect(() => collectCount('payment-reconciliation')).toThrow('--count takes <job>=<n> (a job name, then a whole number), got "payment-reconciliation"');
    expect(() => collectCount('payment-reconciliation=-1')).toThrow('--count takes <job>=<n> (a job name, then a whole number), got "payment-reconciliation=-1"');
    expect(() => collectCount('payment-reconciliation=2', { 'payment-reconciliation': 1 })).toThrow('--count names payment-reconciliation twice');
  });
});

describe('Function: resolveCounts', () => {
  it('resolves each unit alias to the job whose fixture counts in it, next to the counts by job', () => {
    expect(resolveCounts({ 'stale-upload-cleanup': 7 }, { payments: 12, tenants: 3 }, UNITS)).toEqual({
      'stale-upload-cleanup': 7,
      'payment-reconciliation': 12,
      'expired-session-cleanup': 3,
    });
  });

  it('accepts the same count given both ways', () => {
    expect(resolveCounts({ 'payment-reconciliation': 12 }, { payments: 12 }, UNITS)).toEqual({ 'payment-reconciliation': 12 });
  });

  it('refuses two different counts for one job, a unit no fixture has, and a unit two fixtures share', () => {
    expect(() => resolveCounts({ 'payment-reconciliation': 12 }, { payments: 5 }, UNITS)).toThrow(
      new CountError('payment-reconciliation is given 12 by --count and 5 by --payments'),
    );
    expect(() => resolveCounts({}, { widgets: 5 }, UNITS)).toThrow("--widgets: no job's fixture counts in widgets (units: payments, uploads, tenants)");
    expect(() => resolveCounts({}, { items: 5 }, new Map([['items', ['job-a', 'job-b']]]))).toThrow(
      '--items: the fixtures of job-a and job-b both count in items; use --count <job>=<n>',
    );
  });
});

describe('Function: fixtureUnits', () => {
  it("finds each job folder's fixture and its unit", () => {
    const found = fixtureUnits(process.cwd());
    for (const [unit, jobs] of UNITS) expect(found.get(unit)).toEqual(jobs);
  });

  it('is empty for a project without jobs', () => {
    expect(fixtureUnits('/nonexistent-project').size).toBe(0);
  });

  describe("in a team's app", () => {
    let app: string;
    beforeAll(() => {
      // An app with one synthesized stack of two jobs: each function's Metadata names its job's entry; the fixture of
      // one is local.js beside its index.js (the other has none); no lambda/jobs folder at all.
      app = mkdtempSync(join(tmpdir(), 'bench-units-'));
      writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'team-app' }));
      const fn = (job: string) => ({
        Type: 'AWS::Lambda::Function',
        Properties: { Environment: { Variables: { JOB_NAME: job } } },
        Metadata: { 'paced-jobs:job-entry': `src/jobs/${job}/index.js` },
      });
      mkdirSync(join(app, 'cdk.out'));
      writeFileSync(join(app, 'cdk.out', 'manifest.json'), JSON.stringify({ artifacts: { AppStack: { type: 'aws:cloudformation:stack', properties: { templateFile: 'AppStack.template.json' } } } }));
      writeFileSync(join(app, 'cdk.out', 'AppStack.template.json'), JSON.stringify({ Resources: { A: fn('usage-report'), B: fn('plain-job') } }));
      for (const job of ['usage-report', 'plain-job']) mkdirSync(join(app, 'src', 'jobs', job), { recursive: true });
      writeFileSync(join(app, 'src', 'jobs', 'usage-report', 'index.js'), 'exports.job = {};\n');
      writeFileSync(
        join(app, 'src', 'jobs', 'usage-report', 'local.js'),
        "exports.fixture = { unit: 'accounts', defaultCount: 3, seed: async () => ({ expectedOperations: [], summary: '' }), effects: () => ({}), operationKeyOf: () => undefined };\n",
      );
    });
    afterAll(() => rmSync(app, { recursive: true, force: true }));

    it("finds the fixtures beside the entries of the jobs its cloud assembly holds", () => {
      expect(fixtureUnits(app)).toEqual(new Map([['accounts', ['usage-report']]]));
    });

    it('takes the stack --stack names, and refuses one the assembly does not have', () => {
      expect(fixtureUnits(app, ['--stack', 'AppStack'])).toEqual(new Map([['accounts', ['usage-report']]]));
      // No such stack: no units known before the run, which then fails with the assembly's own error.
      expect(fixtureUnits(app, ['--stack', 'OtherStack']).size).toBe(0);
    });
  });
});

describe('Function: defaultCountOf and warmUpCountOf', () => {
  it("seeds ten times the fixture's demo size, and a quarter of it (rounded up) to warm up", () => {
    expect(defaultCountOf({ defaultCount: 40 })).toBe(400);
    expect(defaultCountOf({ defaultCount: 10 })).toBe(100);
    expect(warmUpCountOf({ defaultCount: 40 }, 400)).toBe(10);
    expect(warmUpCountOf({ defaultCount: 10 }, 150)).toBe(3);
  });

  it('seeds nothing for a job without a fixture, and does not warm up a job left out', () => {
    expect(defaultCountOf(undefined)).toBe(0);
    expect(warmUpCountOf(undefined, 10)).toBe(0);
    expect(warmUpCountOf({ defaultCount: 40 }, 0)).toBe(0);
  });
});

describe('Function: buildProgram, counts', () => {
  const parse = (...args: string[]) => buildProgram(UNITS).exitOverride().configureOutput(quiet).parse(['node', 'bench', ...args]).opts();

  it('takes --count repeatedly and each unit alias, resolved through the fixtures', () => {
    const flags = parse('--count', 'stale-upload-cleanup=7', '--payments', '12', '--count', 'expired-session-cleanup=0');
    expect(countsFromFlags(flags, UNITS)).toEqual({ 'stale-upload-cleanup': 7, 'payment-reconciliation': 12, 'expired-session-cleanup': 0 });
  });

  it('names no count when none is given (every job at its default)', () => {
    expect(countsFromFlags(parse(), UNITS)).toEqual({});
  });

  it('refuses a unit alias that is not a whole number', () => {
    expect(() => parse('--tenants', 'many')).toThrow(CommanderError);
    expect(() => parse('--tenants', 'many')).toThrow('--tenants must be a whole number, got "many"');
  });

  it('says which job each alias counts for', () => {
    expect(buildProgram(UNITS).options.find((o) => o.long === '--tenants')?.description).toBe('alias of --count expired-session-cleanup=<n> (its fixture counts in tenants)');
  });

  it('has no alias for a unit the fixtures do not bring, nor for one that is already a bench option', () => {
    expect(() => buildProgram(new Map([['payments', ['payment-reconciliation']]])).exitOverride().configureOutput(quiet).parse(['node', 'bench', '--tenants', '3'])).toThrow("error: unknown option '--tenants'");
    expect(unitAliases(['payments', 'ops', 'backlog', 'Bad Unit'])).toEqual([{ unit: 'payments', attribute: 'payments' }]);
  });

  it('keeps a unit with a dash as an option, read back by its attribute', () => {
    const units = new Map([['log-lines', ['job-a']]]);
    const flags = buildProgram(units).exitOverride().parse(['node', 'bench', '--log-lines', '5']).opts();
    expect(countsFromFlags(flags, units)).toEqual({ 'job-a': 5 });
  });
});

describe('Function: backlogJobOf', () => {
  const withDownstream = { downstream: () => ({}) as never };
  const fixtures: Record<string, { downstream?: unknown } | undefined> = { 'job-a': {}, 'job-b': withDownstream, 'job-c': withDownstream, 'job-d': undefined };
  const fixtureOf = (job: string) => fixtures[job] as never;

  it('runs the first job whose fixture offers a fake downstream', () => {
    expect(backlogJobOf(['job-a', 'job-b', 'job-c'], fixtureOf)).toBe('job-b');
  });

  it('runs the job named, with or without a downstream', () => {
    expect(backlogJobOf(['job-a', 'job-b'], fixtureOf, 'job-a')).toBe('job-a');
  });

  it('refuses when no job has a downstream, a job not in the stack, and a job without a fixture', () => {
    expect(() => backlogJobOf(['job-a', 'job-d'], fixtureOf)).toThrow(
      'no job of the stack has a fixture with a fake downstream (a real quota) for the backlog part; name one with --backlog-job (jobs: job-a, job-d)',
    );
    expect(() => backlogJobOf(['job-a'], fixtureOf, 'job-x')).toThrow('--backlog-job job-x: the stack has no such job (jobs: job-a)');
    expect(() => backlogJobOf(['job-d'], fixtureOf, 'job-d')).toThrow('--backlog-job job-d: the job has no local fixture (lambda/jobs/job-d/local.ts) to seed its backlog with');
  });

  it("names the fixture file beside the job's entry in a team's app", () => {
    expect(() => backlogJobOf(['job-d'], fixtureOf, 'job-d', (job) => `jobs/${job}/local.ts`)).toThrow(
      '--backlog-job job-d: the job has no local fixture (jobs/job-d/local.ts) to seed its backlog with',
    );
  });
});
