// The units npm start's run and session are built from that need no server: the run's log files (RunLogs) and a
// function's JOB_SETTINGS for the run (runJobSettings).
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobRuntimeSettings } from '../../lambda/core/constants';
import { RunLogs } from '../../local/run';
import { runJobSettings } from '../../local/session';

describe('Class: RunLogs', () => {
  let dir: string;
  beforeEach(() => {
    dir = join(mkdtempSync(join(tmpdir(), 'paced-jobs-run-logs-')), 'logs');
  });
  afterEach(() => rmSync(join(dir, '..'), { recursive: true, force: true }));

  it('writes each source to a file of its own, named safely, each line timestamped, and echoes every line', async () => {
    const echoed: string[] = [];
    const logs = new RunLogs(dir, (source, line) => echoed.push(`${source}: ${line}`));
    logs.write('PacedJobs-dev-Consumer', 'first');
    logs.write('iam', 'denied');
    logs.write('PacedJobs-dev-Consumer', 'second');
    logs.write('a/b c', 'odd name');
    await logs.close();
    expect(readdirSync(dir).sort()).toEqual(['PacedJobs-dev-Consumer.log', 'a_b_c.log', 'iam.log']);
    const lines = readFileSync(join(dir, 'PacedJobs-dev-Consumer.log'), 'utf8').trimEnd().split('\n');
    expect(lines.map((l) => l.replace(/^\S+ /, ''))).toEqual(['first', 'second']);
    expect(lines.every((l) => !Number.isNaN(Date.parse(l.split(' ')[0])))).toBe(true);
    expect(echoed).toEqual([
      'PacedJobs-dev-Consumer: first',
      'iam: denied',
      'PacedJobs-dev-Consumer: second',
      'a/b c: odd name',
    ]);
  });

  it("keeps a consumer's failed-record lines for the report", async () => {
    const logs = new RunLogs(dir);
    logs.write(
      'consumer-fn',
      JSON.stringify({
        operationId: 'op-1',
        messageId: 'm-1',
        recordFailure: { errorName: 'TypeError', errorMessage: 'boom' },
      }),
    );
    logs.write('consumer-fn', 'an ordinary line');
    await logs.close();
    expect(logs.recordFailures.summary('consumer-fn')).toEqual([
      { errorName: 'TypeError', message: 'boom', attempts: 1, records: 1 },
    ]);
  });
});

describe('Function: runJobSettings', () => {
  const synthesized = {
    jobName: 'usage-report',
    rateLimit: { startsPerInterval: 10, intervalSeconds: 1 },
  } as unknown as JobRuntimeSettings;
  const scaled = { ...synthesized, rateLimit: { startsPerInterval: 2, intervalSeconds: 1 } } as JobRuntimeSettings;

  it("replaces the synthesized settings with the job's run settings", () => {
    expect(
      JSON.parse(runJobSettings(JSON.stringify(synthesized), new Map([['usage-report', scaled]]), new Map())),
    ).toEqual(scaled);
  });

  it("points them at the job's fake downstream when it has one", () => {
    const downstream = { configure: (s: JobRuntimeSettings) => ({ ...s, endpoint: 'http://127.0.0.1:1234' }) };
    const json = runJobSettings(
      JSON.stringify(synthesized),
      new Map([['usage-report', scaled]]),
      new Map([['usage-report', downstream]]),
    );
    expect(JSON.parse(json)).toEqual({ ...scaled, endpoint: 'http://127.0.0.1:1234' });
  });

  it('keeps the synthesized settings of a job the run has none for', () => {
    expect(JSON.parse(runJobSettings(JSON.stringify(synthesized), new Map(), new Map()))).toEqual(synthesized);
  });
});
