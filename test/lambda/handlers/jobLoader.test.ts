import { loadJob as loadJobModule } from '../../../lambda/core/jobModule';
import { JobLoadError, loadJob } from '../../../lambda/handlers/jobLoader';
import { job as fakeJob } from '../../fixtures/jobs/fake-job';

const fromFixtures = (name: string) => require(`../../fixtures/jobs/${name}/index.ts`);

describe('Function: loadJob', () => {
  it('returns the job a folder exports', () => {
    expect(loadJob('fake-job', fromFixtures)).toBe(fakeJob);
  });

  it('loads a real job folder through the default loader', () => {
    // The pattern esbuild bundles: lambda/jobs/<name>/index.ts. A job that is not there is named in the error.
    const call = () => loadJob('no-such-job');
    expect(call).toThrow(JobLoadError);
    expect(call).toThrow(
      /^cannot load job "no-such-job": lambda\/jobs\/no-such-job\/index\.ts must export `job` \(Cannot find module/,
    );
  });

  it('rejects a name that is not kebab-case before touching the file system', () => {
    const loader = jest.fn();
    expect(() => loadJob('../secrets', loader)).toThrow(
      'invalid job name "../secrets": use kebab-case (a-z, 0-9, -), 3 to 32 characters',
    );
    expect(loader).not.toHaveBeenCalled();
  });

  it('names what a module without a `job` export lacks', () => {
    expect(() => loadJob('empty-job', () => ({}))).toThrow(
      'cannot load job "empty-job": lambda/jobs/empty-job/index.ts must export `job` (found no `job` export)',
    );
    expect(() =>
      loadJob('half-job', () => ({ job: { name: 'half-job', discover: async () => ({ operations: [] }) } })),
    ).toThrow(
      'cannot load job "half-job": lambda/jobs/half-job/index.ts must export `job` (found `job` lacks createDeps, apply, resourceSchema)',
    );
  });

  it('rejects a job whose name does not match its folder', () => {
    expect(() => loadJob('other-job', () => ({ job: fakeJob }))).toThrow(
      'cannot load job "other-job": the `job` exported by lambda/jobs/other-job/index.ts is named "fake-job"',
    );
  });

  it('wraps an error thrown while the job module initialises', () => {
    const cause = new Error('config missing');
    const call = () =>
      loadJob('fake-job', () => {
        throw cause;
      });
    expect(call).toThrow(
      'cannot load job "fake-job": lambda/jobs/fake-job/index.ts must export `job` (config missing)',
    );
    try {
      call();
    } catch (error) {
      expect((error as JobLoadError).cause).toBe(cause);
      expect((error as JobLoadError).jobName).toBe('fake-job');
    }
  });

  it("names the entry it was given (a bundled job's, as its function's Metadata names it) instead of the job's folder", () => {
    const entry = 'jobs/usage-report/index.ts';
    expect(() => loadJobModule('usage-report', () => ({}), entry)).toThrow(
      'cannot load job "usage-report": jobs/usage-report/index.ts must export `job` (found no `job` export)',
    );
    expect(() => loadJobModule('usage-report', () => ({ job: fakeJob }), entry)).toThrow(
      'cannot load job "usage-report": the `job` exported by jobs/usage-report/index.ts is named "fake-job"',
    );
  });
});
