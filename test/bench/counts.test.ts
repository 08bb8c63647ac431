// How many demo records each job's bench run seeds: `--count <job>=<n>`, the `--<unit> n` aliases resolved through the
// fixtures' units, the default for a job not named, and which job the backlog part runs.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CommanderError } from 'commander';
import { backlogJobOf } from '../../bench/backlog';
import {
  collectCount,
  CountError,
  defaultCountOf,
  fixtureUnits,
  resolveCounts,
  warmUpCountOf,
} from '../../bench/counts';
import { buildProgram, countsFromFlags, unitAliases } from '../../bench/index';
import { jobFolders, loadFixture } from '../../local/fixture';

/** Commander's error output kept off the test log; the thrown error carries the message. */
const quiet = { writeErr: () => undefined };

/** Jobs' units, as their fixtures would give them. */
const UNITS = new Map([
  ['payments', ['payments-job']],
  ['uploads', ['uploads-job']],
  ['tenants', ['sessions-job']],
]);

describe('Function: collectCount', () => {
  it('adds one job per occurrence, keeping the earlier ones', () => {
    expect(collectCount('uploads-job=40', collectCount('payments-job=12'))).toEqual({
      'payments-job': 12,
      'uploads-job': 40,
    });
  });

  it('takes 0 (the job is left out of the run)', () => {
    expect(collectCount('sessions-job=0')).toEqual({ 'sessions-job': 0 });
  });

  it('refuses a value that is not <job>=<n>, and a job named twice', () => {
    expect(() => collectCount('payments-job')).toThrow(
      '--count takes <job>=<n> (a job name, then a whole number), got "payments-job"',
    );
    expect(() => collectCount('payments-job=-1')).toThrow(
      '--count takes <job>=<n> (a job name, then a whole number), got "payments-job=-1"',
    );
    expect(() => collectCount('payments-job=2', { 'payments-job': 1 })).toThrow('--count names payments-job twice');
  });
});

describe('Function: resolveCounts', () => {
  it('resolves each unit alias to the job whose fixture counts in it, next to the counts by job', () => {
    expect(resolveCounts({ 'uploads-job': 7 }, { payments: 12, tenants: 3 }, UNITS)).toEqual({
      'uploads-job': 7,
      'payments-job': 12,
      'sessions-job': 3,
    });
  });

  it('accepts the same count given both ways', () => {
    expect(resolveCounts({ 'payments-job': 12 }, { payments: 12 }, UNITS)).toEqual({ 'payments-job': 12 });
  });

  it('refuses two different counts for one job, a unit no fixture has, and a unit two fixtures share', () => {
    expect(() => resolveCounts({ 'payments-job': 12 }, { payments: 5 }, UNITS)).toThrow(
      new CountError('payments-job is given 12 by --count and 5 by --payments'),
    );
    expect(() => resolveCounts({}, { widgets: 5 }, UNITS)).toThrow(
      "--widgets: no job's fixture counts in widgets (units: payments, uploads, tenants)",
    );
    expect(() => resolveCounts({}, { items: 5 }, new Map([['items', ['job-a', 'job-b']]]))).toThrow(
      '--items: the fixtures of job-a and job-b both count in items; use --count <job>=<n>',
    );
  });
});

describe('Function: fixtureUnits', () => {
  it("finds each job folder's fixture and its unit", () => {
    // Whichever jobs the project keeps: every one with a fixture (local.ts) is found once, under its fixture's unit.
    const root = process.cwd();
    const found = fixtureUnits(root);
    const withFixture = jobFolders(root).filter((job) => existsSync(join(root, 'lambda', 'jobs', job, 'local.ts')));
    expect([...found.values()].flat().sort()).toEqual(withFixture.sort());
    for (const [unit, jobs] of found) for (const job of jobs) expect(loadFixture(root, job)?.unit).toBe(unit);
  });

  it('is empty for a project without jobs', () => {
    expect(fixtureUnits('/nonexistent-project').size).toBe(0);
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
  const parse = (...args: string[]) =>
    buildProgram(UNITS)
      .exitOverride()
      .configureOutput(quiet)
      .parse(['node', 'bench', ...args])
      .opts();

  it('takes --count repeatedly and each unit alias, resolved through the fixtures', () => {
    const flags = parse('--count', 'uploads-job=7', '--payments', '12', '--count', 'sessions-job=0');
    expect(countsFromFlags(flags, UNITS)).toEqual({ 'uploads-job': 7, 'payments-job': 12, 'sessions-job': 0 });
  });

  it('names no count when none is given (every job at its default)', () => {
    expect(countsFromFlags(parse(), UNITS)).toEqual({});
  });

  it('refuses a unit alias that is not a whole number', () => {
    expect(() => parse('--tenants', 'many')).toThrow(CommanderError);
    expect(() => parse('--tenants', 'many')).toThrow('--tenants must be a whole number, got "many"');
  });

  it('says which job each alias counts for', () => {
    expect(buildProgram(UNITS).options.find((o) => o.long === '--tenants')?.description).toBe(
      'alias of --count sessions-job=<n> (its fixture counts in tenants)',
    );
  });

  it('has no alias for a unit the fixtures do not bring, nor for one that is already a bench option', () => {
    expect(() =>
      buildProgram(new Map([['payments', ['payments-job']]]))
        .exitOverride()
        .configureOutput(quiet)
        .parse(['node', 'bench', '--tenants', '3']),
    ).toThrow("error: unknown option '--tenants'");
    expect(unitAliases(['payments', 'ops', 'backlog', 'Bad Unit'])).toEqual([
      { unit: 'payments', attribute: 'payments' },
    ]);
  });

  it('keeps a unit with a dash as an option, read back by its attribute', () => {
    const units = new Map([['log-lines', ['job-a']]]);
    const flags = buildProgram(units).exitOverride().parse(['node', 'bench', '--log-lines', '5']).opts();
    expect(countsFromFlags(flags, units)).toEqual({ 'job-a': 5 });
  });
});

describe('Function: backlogJobOf', () => {
  const withDownstream = { downstream: () => ({}) as never };
  const fixtures: Record<string, { downstream?: unknown } | undefined> = {
    'job-a': {},
    'job-b': withDownstream,
    'job-c': withDownstream,
    'job-d': undefined,
  };
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
    expect(() => backlogJobOf(['job-a'], fixtureOf, 'job-x')).toThrow(
      '--backlog-job job-x: the stack has no such job (jobs: job-a)',
    );
    expect(() => backlogJobOf(['job-d'], fixtureOf, 'job-d')).toThrow(
      '--backlog-job job-d: the job has no local fixture (lambda/jobs/job-d/local.ts) to seed its backlog with',
    );
  });
});
