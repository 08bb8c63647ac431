// A job whose apply throws, run as Lambda runs it: the consumer bundled with the job as the stack bundles it (esbuild,
// minified, with source maps), in a Node process of its own with --enable-source-maps, on the local DynamoDB and SQS.
// Its real failed-record lines are read by the local report's RecordFailureLog: the report names each error, its
// count and the job file and line it came from.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import type { SQSBatchResponse } from 'aws-lambda';
import { resetClients } from '../../../../lambda/adapters/clients';
import { BUNDLE_TARGET } from '../../../../lib/paced-function';
import { buildRunReport, formatReport, RecordFailureLog } from '../../../../local/report';
import { startLocalAws, type LocalAws } from '../../../support/aws';
import { sqsRecord } from '../../../support/lambdaEvents';
import { createIdempotencyTable, createLedgerTable, createLimiterTable, createQueue, fakeSettings } from '../harness';

const ROOT = resolve(__dirname, '..', '..', '..', '..');
const JOB_FILE = 'test/fixtures/jobs/failing-job/index.ts';
const JOB = 'failing-job';
const FUNCTION = 'failing-job-consumer';

/** The line of the fixture job that throws `kind` (marked in its source), so the test names no line number itself. */
const throwingLine = (kind: string): number =>
  readFileSync(join(ROOT, JOB_FILE), 'utf8')
    .split('\n')
    .findIndex((line) => line.includes(`// throws: ${kind}`)) + 1;

const body = (id: string, failure: string) =>
  JSON.stringify({
    version: 1,
    jobType: JOB,
    operationId: `failing:${id}:2026-11-28`,
    batchId: `${JOB}:2026-11-28:20261129T020000Z`,
    businessDate: '2026-11-28',
    resource: { id, failure },
    enqueuedAt: '2026-11-29T02:00:00.000Z',
  });

describe("Function: handler (a bundled consumer whose job's apply throws)", () => {
  let aws: LocalAws;
  let dir: string;
  let lines: string[];
  let response: SQSBatchResponse;

  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    const [queueUrl, dlqUrl] = await Promise.all([
      createQueue(JOB),
      createQueue(`${JOB}-dlq`),
      createIdempotencyTable('idempotency'),
      createLedgerTable('ledger'),
      createLimiterTable('limiter'),
    ]);

    // As lib/paced-function.ts bundles a consumer: the job's code chosen at build time, the SDK left to the runtime.
    dir = mkdtempSync(join(tmpdir(), 'paced-jobs-failing-job-'));
    const fixture = join(ROOT, JOB_FILE);
    await build({
      entryPoints: [join(ROOT, 'lambda/handlers/consumer.ts')],
      outfile: join(dir, 'asset', 'index.js'),
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: BUNDLE_TARGET,
      minify: true,
      sourcemap: true,
      sourcesContent: false,
      external: ['@aws-sdk/*'],
      logLevel: 'error',
      // The job by its name (the loader's `../jobs/<name>/index.ts`) or by its entry (`paced-jobs-job-entry`),
      // whichever the loader asks for: both lead to the fixture job.
      define: { PACED_JOB_NAME: JSON.stringify(JOB), PACED_JOB_ENTRY: 'true' },
      alias: { 'paced-jobs-job-entry': fixture },
      plugins: [
        {
          name: 'fixture-job',
          setup(b) {
            b.onResolve({ filter: /\/jobs\/failing-job\/index\.ts$/ }, () => ({ path: fixture }));
          },
        },
      ],
    });

    const runner = join(dir, 'run.js');
    writeFileSync(
      runner,
      `const { handler } = require(${JSON.stringify(join(dir, 'asset', 'index.js'))});
const context = { functionName: ${JSON.stringify(FUNCTION)}, awsRequestId: 'request-1', getRemainingTimeInMillis: () => 60000 };
handler(JSON.parse(process.argv[2]), context).then((r) => console.log('RESULT ' + JSON.stringify(r)), (e) => { console.error(e); process.exitCode = 1; });
`,
    );
    const event = {
      Records: [
        sqsRecord(body('a-1', 'type-error'), {
          messageId: 'm-type-error',
          attributes: { ...sqsRecord('').attributes, ApproximateReceiveCount: '2' },
        }),
        sqsRecord(body('a-2', 'missing-module'), { messageId: 'm-missing-module' }),
      ],
    };
    const env = {
      PATH: process.env.PATH,
      // The runtime's SDK: the project's, as the local runtime's sandbox gives it.
      NODE_PATH: join(ROOT, 'node_modules'),
      NODE_OPTIONS: '--enable-source-maps',
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      AWS_ENDPOINT_URL_DYNAMODB: aws.dynamodb.endpoint,
      AWS_ENDPOINT_URL_SQS: aws.sqs.endpoint,
      POWERTOOLS_SERVICE_NAME: JOB,
      JOB_NAME: JOB,
      JOB_SETTINGS: JSON.stringify(fakeSettings({ jobName: JOB, pacing: { enabled: false }, maxReceiveCount: 5 })),
      QUEUE_URL: queueUrl,
      DLQ_URL: dlqUrl,
      IDEMPOTENCY_TABLE_NAME: 'idempotency',
      LEDGER_TABLE_NAME: 'ledger',
      LIMITER_TABLE_NAME: 'limiter',
      IDEMPOTENCY_TTL_SECONDS: String(30 * 86_400),
    };
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [runner, JSON.stringify(event)], {
      env,
      cwd: dir,
    });
    lines = `${stdout}\n${stderr}`.split('\n').filter((l) => l !== '');
    response = JSON.parse(lines.find((l) => l.startsWith('RESULT '))!.slice('RESULT '.length));
  });

  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    resetClients();
    await aws.stop();
  });

  it('hands both records back to SQS (the batch processor caught the errors: the invocation succeeded)', () => {
    expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual([
      'm-missing-module',
      'm-type-error',
    ]);
  });

  it('logs each failure as one line: the error, the job file and line that threw it, the operation and the receive', () => {
    const failed = lines.filter((l) => l.includes('"recordFailure"')).map((l) => JSON.parse(l));
    expect(failed).toHaveLength(2);
    const typeError = failed.find((l) => l.operationId === 'failing:a-1:2026-11-28');
    expect(typeError).toMatchObject({
      level: 'ERROR',
      message: 'record failed; SQS redelivers it after the visibility timeout',
      job: JOB,
      recordFailure: {
        errorName: 'TypeError',
        errorMessage: "Cannot read properties of undefined (reading 'balance')",
        jobLocation: expect.stringMatching(new RegExp(`^${JOB_FILE}:${throwingLine('type-error')}:\\d+$`)),
        attempt: 2,
      },
      applyStartedAt: expect.any(Number),
    });
  });

  it('gives the local report each error with its count and the job file it came from', () => {
    const log = new RecordFailureLog();
    for (const line of lines) log.observe(FUNCTION, line);
    const recordFailures = log.summary(FUNCTION);
    expect(recordFailures).toEqual([
      {
        errorName: 'Error',
        message: "Cannot find module '@aws-sdk/client-that-lambda-lacks'",
        location: expect.stringMatching(new RegExp(`^${JOB_FILE}:${throwingLine('missing-module')}:\\d+$`)),
        records: 1,
        attempts: 1,
      },
      {
        errorName: 'TypeError',
        message: "Cannot read properties of undefined (reading 'balance')",
        location: expect.stringMatching(new RegExp(`^${JOB_FILE}:${throwingLine('type-error')}:\\d+$`)),
        records: 1,
        attempts: 1,
      },
    ]);
    const observation = {
      discovered: 2,
      published: 2,
      completed: 0,
      rejected: 0,
      duplicates: 0,
      deferred: 0,
      dlq: 0,
      throttled: 0,
      effectsByOperation: new Map<string, number>(),
      starts: [],
      rateLimit: { startsPerInterval: 10, intervalSeconds: 1 },
      recordFailures,
    };
    const text = formatReport(
      buildRunReport({
        env: 'dev',
        businessDate: '2026-11-28',
        settled: true,
        durationMs: 1000,
        jobs: new Map([[JOB, observation]]),
      }),
    );
    expect(text).toContain(
      `RECORD-ERROR  ${JOB}  TypeError: Cannot read properties of undefined (reading 'balance') at ${recordFailures[1].location} (1 record, 1 attempt)`,
    );
    expect(text).toContain(
      `FAIL  ${JOB}  nothing-lost: completed 0 + rejected 0 + dlq 0 = 0, discovered 2; records failing: Error: Cannot find module`,
    );
  });
});
