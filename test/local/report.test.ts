import {
  buildJobReport,
  buildRunReport,
  formatReport,
  type JobObservation,
  RecordFailureLog,
  type RecordFailureSummary,
} from '../../local/report';

const observation = (overrides: Partial<JobObservation> = {}): JobObservation => ({
  discovered: 3,
  published: 3,
  completed: 3,
  rejected: 0,
  duplicates: 0,
  deferred: 0,
  dlq: 0,
  effectsByOperation: new Map([
    ['a', 1],
    ['b', 1],
    ['c', 1],
  ]),
  starts: [0, 10, 20],
  throttled: 0,
  rateLimit: { startsPerInterval: 2, intervalSeconds: 1 },
  ...overrides,
});

describe('Function: buildJobReport', () => {
  it('passes the five checks when every operation is accounted for, changed once, paced, none dead-lettered and nothing denied', () => {
    const { report, checks } = buildJobReport('job', observation({ starts: [0, 500, 1000, 1500] }));
    expect(report).toEqual({
      discovered: 3,
      completed: 3,
      rejected: 0,
      dlq: 0,
      effects: 3,
      duplicatesSuppressed: 0,
      deferred: 0,
      throttled: 0,
      maxStartsPerWindow: 2,
      rateLimitPerWindow: 2,
      windowSeconds: 1,
      maxJobAgeSeconds: null,
      effectsSource: 'fixture',
      denials: [],
      functionErrors: [],
      recordFailures: [],
    });
    expect(checks).toEqual([
      { job: 'job', name: 'nothing-lost', ok: true, detail: 'completed 3 + rejected 0 + dlq 0 = 3, discovered 3' },
      {
        job: 'job',
        name: 'one-effect-per-operation',
        ok: true,
        detail: '3 operations with one effect each, 3 completed',
      },
      { job: 'job', name: 'rate-respected', ok: true, detail: 'at most 2 starts in any 1s window, limit 2' },
      { job: 'job', name: 'no-unexplained-dead-letters', ok: true, detail: '0 in the DLQ' },
      { job: 'job', name: 'iam-allowed', ok: true, detail: "every request allowed by the template's IAM" },
    ]);
  });

  const denial = {
    action: 'dynamodb:PutItem',
    resource: 'arn:aws:dynamodb:us-east-1:000000000000:table/payments-dev',
    role: 'arn:aws:iam::000000000000:role/Consumer',
    caller: 'consumer-fn',
    count: 3,
    message:
      'User: arn:aws:sts::000000000000:assumed-role/Consumer/consumer-fn is not authorized to perform: dynamodb:PutItem on resource: arn:aws:dynamodb:us-east-1:000000000000:table/payments-dev because no identity-based policy allows the dynamodb:PutItem action',
  };

  it('fails iam-allowed naming action, resource and role when a request was denied, and lists the denial', () => {
    const { report, checks } = buildJobReport('job', observation({ starts: [0], denials: [denial] }));
    expect(report.denials).toEqual([denial]);
    expect(checks.find((c) => c.name === 'iam-allowed')).toEqual({
      job: 'job',
      name: 'iam-allowed',
      ok: false,
      detail:
        '3 requests denied: dynamodb:PutItem on arn:aws:dynamodb:us-east-1:000000000000:table/payments-dev by arn:aws:iam::000000000000:role/Consumer',
    });
  });

  it('still fails iam-allowed with --no-iam, saying AWS would deny what passed here', () => {
    const { checks } = buildJobReport('job', observation({ starts: [0], denials: [denial], iamEnforced: false }));
    expect(checks.find((c) => c.name === 'iam-allowed')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/^3 requests AWS would deny \(--no-iam\): dynamodb:PutItem/),
    });
  });

  it('reports the true job age since first enqueue in seconds', () => {
    expect(buildJobReport('job', observation({ maxJobAgeMs: 61_449 })).report.maxJobAgeSeconds).toBe(61.4);
  });

  it('fails nothing-lost when an operation is unaccounted for', () => {
    const { checks } = buildJobReport('job', observation({ completed: 1, dlq: 1 }));
    expect(checks[0]).toEqual({
      job: 'job',
      name: 'nothing-lost',
      ok: false,
      detail: 'completed 1 + rejected 0 + dlq 1 = 2, discovered 3',
    });
  });

  it('counts operations an earlier run completed (completedElsewhere) as done, and never a duplicate', () => {
    const kept = buildJobReport(
      'job',
      observation({
        completed: 1,
        completedElsewhere: 2,
        duplicates: 1,
        keptData: true,
        effectsByOperation: new Map([['a', 1]]),
      }),
    );
    expect(kept.checks[0]).toEqual({
      job: 'job',
      name: 'nothing-lost',
      ok: true,
      detail: 'completed 1 + done by earlier runs 2 + rejected 0 + dlq 0 = 3, discovered 3',
    });
    const fresh = buildJobReport(
      'job',
      observation({ completed: 1, duplicates: 2, effectsByOperation: new Map([['a', 1]]) }),
    );
    expect(fresh.checks[0].ok).toBe(false);
  });

  it('fails one-effect-per-operation when a target changed twice', () => {
    const { checks } = buildJobReport(
      'job',
      observation({
        effectsByOperation: new Map([
          ['a', 2],
          ['b', 1],
          ['c', 1],
        ]),
      }),
    );
    expect(checks[1]).toEqual({
      job: 'job',
      name: 'one-effect-per-operation',
      ok: false,
      detail: '1 targets changed other than once, e.g. a x2',
    });
  });

  it('fails one-effect-per-operation when a target that was not due changed', () => {
    const { checks } = buildJobReport('job', observation({ unexpectedEffects: ['sessions/t/s-new-0001'] }));
    expect(checks[1]).toEqual({
      job: 'job',
      name: 'one-effect-per-operation',
      ok: false,
      detail: '1 targets changed that were not due, e.g. sessions/t/s-new-0001',
    });
  });

  it('checks per item when one operation changes several items', () => {
    const { report, checks } = buildJobReport(
      'job',
      observation({
        effectsByItem: new Map([
          ['t/s1', 1],
          ['t/s2', 2],
        ]),
      }),
    );
    expect(report.itemEffects).toBe(3);
    expect(checks[1].detail).toBe('1 targets changed other than once, e.g. t/s2 x2');
  });

  it('fails one-effect-per-operation when an item due was never changed, though its operation counts one effect', () => {
    const { checks } = buildJobReport(
      'job',
      observation({
        effectsByItem: new Map([['t/s1', 1]]),
        expectedItems: new Map([
          ['t/s1', 't'],
          ['t/s2', 't'],
        ]),
      }),
    );
    expect(checks[1]).toMatchObject({ ok: false, detail: '1 items due were never changed, e.g. t/s2' });
  });

  it('fails on a dead letter no injected fault explains, even when nothing is lost', () => {
    const { checks } = buildJobReport(
      'job',
      observation({
        completed: 2,
        dlq: 1,
        dlqReasons: ['deferral budget exhausted: 5 deferrals, the limit is 5 (throttled: 429)'],
      }),
    );
    expect(checks[0].ok).toBe(true);
    expect(checks[3]).toEqual({
      job: 'job',
      name: 'no-unexplained-dead-letters',
      ok: false,
      detail:
        '1 operations in the DLQ, 0 expected: a dead letter with no injected fault is a bug (reasons: deferral budget exhausted: 5 deferrals, the limit is 5 (throttled: 429))',
    });
    const run = buildRunReport({
      env: 'dev',
      businessDate: '2026-11-28',
      settled: true,
      durationMs: 1000,
      jobs: new Map([['job', observation({ completed: 2, dlq: 1 })]]),
    });
    expect(run.ok).toBe(false);
    expect(formatReport(run)).toContain('FAIL  job  no-unexplained-dead-letters');
  });

  it('accepts the dead letters a run injected on purpose', () => {
    const { checks } = buildJobReport('job', observation({ completed: 2, dlq: 1, expectedDeadLetters: 1 }));
    expect(checks[3]).toEqual({
      job: 'job',
      name: 'no-unexplained-dead-letters',
      ok: true,
      detail: '1 in the DLQ, 1 expected from injected faults',
    });
  });

  it('fails rate-respected when any sliding window holds more starts than the limit', () => {
    const { checks } = buildJobReport('job', observation({ starts: [0, 900, 950, 2000] }));
    expect(checks[2]).toEqual({
      job: 'job',
      name: 'rate-respected',
      ok: false,
      detail: 'at most 3 starts in any 1s window, limit 2',
    });
  });
});

describe('Function: buildJobReport, a job without a fixture (source: pipeline)', () => {
  const pipeline = (overrides: Partial<JobObservation> = {}) =>
    observation({ effectsSource: 'pipeline', throttled: 0, starts: [0, 500, 1000], ...overrides });
  const NOTE =
    "counts are the pipeline's own (idempotency store and consumer logs), not the downstream's: add lambda/jobs/own-job/local.ts to check the downstream";

  it("passes when every operation completed once in the pipeline's own record, and says whose counts they are", () => {
    const { report, checks } = buildJobReport('own-job', pipeline());
    expect(report).toMatchObject({
      effects: 3,
      completed: 3,
      effectsSource: 'pipeline',
      note: NOTE,
      maxStartsPerWindow: 2,
    });
    expect(checks.map((c) => [c.name, c.ok])).toEqual([
      ['nothing-lost', true],
      ['one-effect-per-operation', true],
      ['rate-respected', true],
      ['no-unexplained-dead-letters', true],
      ['iam-allowed', true],
    ]);
    expect(checks[1].detail).toBe(
      "3 operations completed once each in the pipeline's own record, 3 completed in the ledger (no fixture: the downstream's effects are not seen)",
    );
    expect(checks[2].detail).toBe("at most 2 apply starts (the consumer's) in any 1s window, limit 2");
  });

  it('fails one-effect-per-operation when the consumer completed one operation twice', () => {
    const { checks } = buildJobReport(
      'own-job',
      pipeline({
        effectsByOperation: new Map([
          ['a', 2],
          ['b', 1],
          ['c', 1],
        ]),
      }),
    );
    expect(checks[1]).toEqual({
      job: 'own-job',
      name: 'one-effect-per-operation',
      ok: false,
      detail: '1 targets changed other than once, e.g. a x2',
    });
  });

  it("fails one-effect-per-operation when the pipeline's record and the ledger disagree on how many completed", () => {
    const { checks } = buildJobReport(
      'own-job',
      pipeline({
        effectsByOperation: new Map([
          ['a', 1],
          ['b', 1],
        ]),
      }),
    );
    expect(checks[1].ok).toBe(false);
  });

  it("fails rate-respected on the consumer's apply starts", () => {
    const { checks } = buildJobReport('own-job', pipeline({ starts: [0, 100, 200] }));
    expect(checks[2]).toEqual({
      job: 'own-job',
      name: 'rate-respected',
      ok: false,
      detail: "at most 3 apply starts (the consumer's) in any 1s window, limit 2",
    });
  });

  it('says so in the text report, and a fixture job gets no note', () => {
    const run = buildRunReport({
      env: 'dev',
      businessDate: '2026-11-28',
      settled: true,
      durationMs: 1000,
      jobs: new Map([
        ['own-job', pipeline()],
        ['job', observation({ starts: [0, 500, 1000, 1500] })],
      ]),
    });
    expect(run.ok).toBe(true);
    expect(run.jobs.job).not.toHaveProperty('note');
    expect(run.jobs.job.effectsSource).toBe('fixture');
    const text = formatReport(run);
    expect(text).toContain(`NOTE  own-job: ${NOTE}`);
    expect(text).not.toContain('NOTE  job:');
    expect(text.trimEnd().endsWith('OK')).toBe(true);
  });
});

describe('Function: buildRunReport', () => {
  it('is not ok when the run did not settle, even if every check passed', () => {
    const report = buildRunReport({
      env: 'dev',
      businessDate: '2026-11-28',
      settled: false,
      durationMs: 1000,
      jobs: new Map([['job', observation()]]),
    });
    expect(report.ok).toBe(false);
    expect(formatReport(report)).toContain('did NOT settle within 1.0 s');
  });

  const base = { businessDate: '2026-11-30', settled: true, durationMs: 1000, jobs: new Map([['job', observation()]]) };

  it("names the stack in a team's app, which has no environment", () => {
    const report = buildRunReport({ ...base, stack: 'Reporting' });
    expect(report).toEqual(expect.objectContaining({ env: 'Reporting', stack: 'Reporting' }));
    expect(formatReport(report).split('\n')[0]).toBe(
      'Local run, stack Reporting, business date 2026-11-30: settled in 1.0 s',
    );
  });

  it("names this repository's environment", () => {
    expect(formatReport(buildRunReport({ ...base, env: 'dev', stack: 'PacedJobs-dev' })).split('\n')[0]).toBe(
      'Local run, env dev, business date 2026-11-30: settled in 1.0 s',
    );
  });

  it('refuses a run that names neither', () => {
    expect(() => buildRunReport(base)).toThrow('buildRunReport: the run names neither its environment nor its stack');
  });
});

describe('Function: buildJobReport, where a job without a fixture should get one', () => {
  it('names the fixture file beside its entry, where the session found it', () => {
    const { report } = buildJobReport(
      'usage-report',
      observation({ effectsSource: 'pipeline', fixtureFile: 'jobs/usage-report/local.ts' }),
    );
    expect(report.note).toBe(
      "counts are the pipeline's own (idempotency store and consumer logs), not the downstream's: add jobs/usage-report/local.ts to check the downstream",
    );
  });
});

describe('Function: formatReport, denials, function errors and warnings', () => {
  it('prints each denial and each kind of function error under its job, and every warning at the top', () => {
    const jobs = new Map([
      [
        'job',
        observation({
          starts: [0],
          denials: [
            {
              action: 'sqs:SendMessage',
              resource: 'arn:aws:sqs:us-east-1:000000000000:q',
              role: 'arn:aws:iam::000000000000:role/R',
              caller: 'fn',
              count: 1,
              message: 'User: x is not authorized',
            },
          ],
          functionErrors: [
            {
              functionName: 'fn',
              errorType: 'Runtime.ImportModuleError',
              message: "Error: Cannot find module 'left-pad'",
              count: 2,
              examples: ["Error: Cannot find module 'left-pad'\nRequire stack: ..."],
            },
          ],
        }),
      ],
    ]);
    const text = formatReport(
      buildRunReport({
        env: 'dev',
        businessDate: '2026-11-30',
        settled: true,
        durationMs: 1000,
        jobs,
        warnings: ['IAM is not enforced (--no-iam)'],
      }),
    );
    expect(text).toContain('WARNING  IAM is not enforced (--no-iam)');
    expect(text).toContain(
      'DENIED  job  sqs:SendMessage on arn:aws:sqs:us-east-1:000000000000:q by arn:aws:iam::000000000000:role/R (fn) x1: User: x is not authorized',
    );
    expect(text).toContain("ERROR  job  fn: Runtime.ImportModuleError: Error: Cannot find module 'left-pad' x2");
    expect(text.split('\n').indexOf('WARNING  IAM is not enforced (--no-iam)')).toBeLessThan(text.indexOf('DENIED'));
    expect(text.trimEnd().endsWith('FAILED')).toBe(true);
  });
});

describe('Class: RecordFailureLog', () => {
  /** A failed record's line as the consumer writes it (Accounting.fail), with the fields the log reads. */
  const failedLine = (
    operationId: string,
    attempt: number,
    errorName: string,
    errorMessage: string,
    jobLocation?: string,
  ) =>
    JSON.stringify({
      level: 'ERROR',
      message: 'record failed; SQS redelivers it after the visibility timeout',
      service: 'failing-job',
      timestamp: '2026-11-30T02:00:00.000Z',
      job: 'failing-job',
      operationId,
      batchId: 'failing-job:2026-11-30:x',
      messageId: `m-${operationId}-${attempt}`,
      receives: attempt,
      error: {
        name: errorName,
        message: errorMessage,
        stack: `${errorName}: ${errorMessage}\n    at apply (/tmp/x/index.ts:1:1)`,
      },
      recordFailure: { errorName, errorMessage, ...(jobLocation ? { jobLocation } : {}), attempt },
    });
  const TYPE_ERROR = "Cannot read properties of undefined (reading 'balance')";
  const AT = 'jobs/failing-job/index.ts:31:43';

  describe('Method: observe', () => {
    it('counts each distinct error (type, message, place in the job) by the records and attempts it failed', () => {
      const log = new RecordFailureLog();
      log.observe('consumer-fn', failedLine('op-1', 1, 'TypeError', TYPE_ERROR, AT));
      log.observe('consumer-fn', failedLine('op-1', 2, 'TypeError', TYPE_ERROR, AT));
      log.observe('consumer-fn', failedLine('op-2', 1, 'TypeError', TYPE_ERROR, AT));
      log.observe(
        'consumer-fn',
        failedLine('op-3', 1, 'Error', "Cannot find module 'left-pad'", 'jobs/failing-job/index.ts:12:5'),
      );
      // The same type and message thrown elsewhere in the job is another kind; an engine failure has no place.
      log.observe('consumer-fn', failedLine('op-4', 1, 'TypeError', TYPE_ERROR, 'jobs/failing-job/lib.ts:3:1'));
      log.observe('consumer-fn', failedLine('op-5', 1, 'IdempotencyPersistenceLayerError', 'Failed to update record'));
      expect(log.summary('consumer-fn')).toEqual([
        { errorName: 'TypeError', message: TYPE_ERROR, location: AT, records: 2, attempts: 3 },
        {
          errorName: 'Error',
          message: "Cannot find module 'left-pad'",
          location: 'jobs/failing-job/index.ts:12:5',
          records: 1,
          attempts: 1,
        },
        { errorName: 'IdempotencyPersistenceLayerError', message: 'Failed to update record', records: 1, attempts: 1 },
        {
          errorName: 'TypeError',
          message: TYPE_ERROR,
          location: 'jobs/failing-job/lib.ts:3:1',
          records: 1,
          attempts: 1,
        },
      ]);
    });

    it('keeps each function apart, and ignores every other line', () => {
      const log = new RecordFailureLog();
      log.observe('consumer-a', failedLine('op-1', 1, 'TypeError', TYPE_ERROR, AT));
      log.observe(
        'consumer-b',
        `2026-11-30T02:00:00.000Z ${failedLine('op-9', 1, 'RangeError', 'Invalid time value', AT)}`,
      );
      log.observe(
        'consumer-a',
        JSON.stringify({ level: 'INFO', message: 'operation completed', operationId: 'op-2', applyStartedAt: 1 }),
      );
      log.observe('consumer-a', 'START RequestId: 1 "recordFailure" in plain text');
      log.observe('consumer-a', JSON.stringify({ level: 'ERROR', message: 'x', recordFailure: 'not an object' }));
      expect(log.summary('consumer-a')).toEqual([
        { errorName: 'TypeError', message: TYPE_ERROR, location: AT, records: 1, attempts: 1 },
      ]);
      expect(log.summary('consumer-b')).toEqual([
        { errorName: 'RangeError', message: 'Invalid time value', location: AT, records: 1, attempts: 1 },
      ]);
      expect(log.summary('producer-a')).toEqual([]);
      expect(log.summary(undefined)).toEqual([]);
    });
  });

  describe('in the report', () => {
    const failures: RecordFailureSummary[] = [
      { errorName: 'TypeError', message: TYPE_ERROR, location: AT, records: 3, attempts: 9 },
      { errorName: 'Error', message: "Cannot find module 'left-pad'", records: 1, attempts: 1 },
    ];
    const failing = observation({
      discovered: 3,
      completed: 0,
      effectsByOperation: new Map(),
      starts: [],
      recordFailures: failures,
    });

    it('lists them per job in --json, and names the first where nothing-lost fails', () => {
      const { report, checks } = buildJobReport('failing-job', failing);
      expect(report.recordFailures).toEqual(failures);
      expect(checks.find((c) => c.name === 'nothing-lost')).toEqual({
        job: 'failing-job',
        name: 'nothing-lost',
        ok: false,
        detail: `completed 0 + rejected 0 + dlq 0 = 0, discovered 3; records failing: TypeError: ${TYPE_ERROR} at ${AT} (3 records, 9 attempts)`,
      });
    });

    it('prints each under its job, before the checks, with its counts and the job file it came from', () => {
      const text = formatReport(
        buildRunReport({
          env: 'dev',
          businessDate: '2026-11-30',
          settled: true,
          durationMs: 1000,
          jobs: new Map([['failing-job', failing]]),
        }),
      );
      const lines = text.split('\n');
      expect(lines).toContain(`RECORD-ERROR  failing-job  TypeError: ${TYPE_ERROR} at ${AT} (3 records, 9 attempts)`);
      expect(lines).toContain("RECORD-ERROR  failing-job  Error: Cannot find module 'left-pad' (1 record, 1 attempt)");
      expect(lines.findIndex((l) => l.startsWith('RECORD-ERROR'))).toBeLessThan(
        lines.findIndex((l) => l.startsWith('FAIL ')),
      );
    });

    it('shows the five with the most attempts and says how many more --json lists', () => {
      const many = Array.from(
        { length: 7 },
        (_, i): RecordFailureSummary => ({ errorName: 'Error', message: `boom ${i}`, records: 1, attempts: 7 - i }),
      );
      const text = formatReport(
        buildRunReport({
          env: 'dev',
          businessDate: '2026-11-30',
          settled: true,
          durationMs: 1000,
          jobs: new Map([['failing-job', observation({ recordFailures: many })]]),
        }),
      );
      expect(text.split('\n').filter((l) => l.startsWith('RECORD-ERROR'))).toEqual([
        ...[0, 1, 2, 3, 4].map((i) => `RECORD-ERROR  failing-job  Error: boom ${i} (1 record, ${7 - i} attempts)`),
        'RECORD-ERROR  failing-job  and 2 more kinds of error (--json lists them all)',
      ]);
    });
  });
});
