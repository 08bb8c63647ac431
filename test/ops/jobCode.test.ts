import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { JobLoadError } from '../../lambda/core/jobModule';
import { jobCode } from '../../ops/jobCode';

const ROOT = resolve(__dirname, '..', '..');

describe('Function: jobCode', () => {
  it("loads the job from the entry the template names, relative to the app's folder", () => {
    const job = jobCode('fake-job', 'test/fixtures/jobs/fake-job/index.ts', ROOT);
    expect(job.name).toBe('fake-job');
    expect(typeof job.discover).toBe('function');
  });

  it("looks in this repository's lambda/jobs/<name> when the template names no entry (a stack from before the Metadata)", () => {
    expect(() => jobCode('no-such-job')).toThrow(
      /^cannot load job "no-such-job": .*Cannot find module '\.\.\/lambda\/jobs\/no-such-job\/index\.ts'/,
    );
  });

  it('throws JobLoadError naming the job when the entry exports no `job`', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ops-job-code-'));
    try {
      writeFileSync(join(dir, 'index.js'), 'exports.notAJob = 1;\n');
      const error = (() => {
        try {
          jobCode('usage-report', 'index.js', dir);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error).toBeInstanceOf(JobLoadError);
      expect((error as JobLoadError).jobName).toBe('usage-report');
      expect((error as Error).message).toMatch(/^cannot load job "usage-report": .* \(found no `job` export\)$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
