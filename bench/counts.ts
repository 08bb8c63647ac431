// Benchmark (`npm run bench`), how many demo records each job's run seeds: `--count <job>=<n>` per job, `--<unit> <n>`
// as an alias resolved through the job fixtures' `unit` (local/fixture.ts), and the default for a job the run names no
// count for. Names no job: the jobs and their units come from the fixtures found in the app.
import { resolve } from 'node:path';
import { InvalidArgumentError } from 'commander';
import { appJobs } from '../local/cli';
import { loadFixture, type JobFixture } from '../local/fixture';

/**
 * A job the run names no count for seeds this many times its fixture's `defaultCount` (the demo size of `npm start`):
 * enough that the per-run and per-invocation costs are shared out as on a real night, and the run still a few minutes.
 */
export const DEFAULT_COUNT_MULTIPLE = 10;

/** The warm-up cycle before the measured one seeds this share of a job's fixture `defaultCount` (at least 1). */
export const WARM_UP_SHARE = 0.25;

export class CountError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CountError';
  }
}

/** The count a job's run seeds when none is named: DEFAULT_COUNT_MULTIPLE times its fixture's default; 0 without one. */
export function defaultCountOf(fixture: Pick<JobFixture, 'defaultCount'> | undefined): number {
  return fixture ? DEFAULT_COUNT_MULTIPLE * fixture.defaultCount : 0;
}

/** The warm-up cycle's count for a job that seeds `count` in the measured run. */
export function warmUpCountOf(fixture: Pick<JobFixture, 'defaultCount'> | undefined, count: number): number {
  return fixture && count > 0 ? Math.max(1, Math.ceil(WARM_UP_SHARE * fixture.defaultCount)) : 0;
}

/** Commander's parser for a repeatable `--count <job>=<n>`: each occurrence adds one job; a job named twice is an error. */
export function collectCount(value: string, previous: Record<string, number> = {}): Record<string, number> {
  const match = /^([a-z][a-z0-9-]*)=(\d+)$/.exec(value);
  if (!match)
    throw new InvalidArgumentError(`--count takes <job>=<n> (a job name, then a whole number), got "${value}"`);
  const [, job, n] = match;
  if (job in previous) throw new InvalidArgumentError(`--count names ${job} twice`);
  return { ...previous, [job]: Number(n) };
}

/** The option a unit is an alias under, when it is a usable option name and not one the bench already has. */
export function unitOptionName(unit: string, reserved: ReadonlySet<string>): string | undefined {
  return /^[a-z][a-z0-9-]*$/.test(unit) && !reserved.has(unit) ? unit : undefined;
}

/**
 * Each fixture unit and the jobs whose fixture has it, before anything is synthesized (the units are flags): in this
 * repository the fixtures of lambda/jobs; in a team's app those beside the entries of the jobs its existing cloud
 * assembly holds (`--stack` in `argv` picks the stack), none before its first synth (`--count` works regardless).
 */
export function fixtureUnits(cwd: string, argv: readonly string[] = []): Map<string, string[]> {
  const units = new Map<string, string[]>();
  const root = resolve(cwd);
  const jobs = appJobs(root, argv);
  for (const job of jobs?.names ?? []) {
    const fixture = loadFixture(root, job, jobs?.entries.get(job));
    if (fixture) units.set(fixture.unit, [...(units.get(fixture.unit) ?? []), job]);
  }
  return units;
}

/**
 * The counts by job name from `--count` and the unit aliases: `--<unit> n` is the job whose fixture's unit that is.
 * A unit two jobs share, or a job given two different counts, is an error that says which.
 */
export function resolveCounts(
  byJob: Record<string, number>,
  byUnit: Record<string, number>,
  units: ReadonlyMap<string, readonly string[]>,
): Record<string, number> {
  const counts = { ...byJob };
  for (const [unit, n] of Object.entries(byUnit)) {
    const jobs = units.get(unit) ?? [];
    if (jobs.length === 0)
      throw new CountError(
        `--${unit}: no job's fixture counts in ${unit} (units: ${[...units.keys()].join(', ') || 'none'})`,
      );
    if (jobs.length > 1)
      throw new CountError(
        `--${unit}: the fixtures of ${jobs.join(' and ')} both count in ${unit}; use --count <job>=<n>`,
      );
    const [job] = jobs;
    if (job in counts && counts[job] !== n)
      throw new CountError(`${job} is given ${counts[job]} by --count and ${n} by --${unit}`);
    counts[job] = n;
  }
  return counts;
}
