import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  jobCodeLocation,
  keepJobFrames,
  layoutOf,
  MAX_FAILURE_MESSAGE_CHARS,
  recordFailure,
  STACK_TRACE_FRAMES,
  stackFrames,
  type CodeLayout,
} from '../../../../lambda/handlers/consumer/recordFailure';

/** This repository as the bundles' source maps name it from a local sandbox: the engine and its examples in lambda/. */
const REPO = '/tmp/paced-jobs-lambda-1/';
const repo: CodeLayout = { engineDir: `${REPO}lambda`, appDir: '/tmp/paced-jobs-lambda-1' };
/** A team's app with the package installed: the engine in node_modules, the job in the app's own jobs/ folder. */
const APP = '/work/my-app';
const installed: CodeLayout = { engineDir: `${APP}/node_modules/paced-jobs/dist/lambda`, appDir: APP };

const stack = (...frames: string[]) => ['TypeError: boom', ...frames.map((f) => `    at ${f}`)].join('\n');

describe('Function: stackFrames', () => {
  it('reads file, line and column from each form of frame V8 writes, and skips frames with no position', () => {
    const text = stack(
      'Object.apply (/app/jobs/x/index.ts:12:7)',
      '/app/jobs/x/helper.ts:3:1',
      'async Promise.all (index 0)',
      'new Thing (file:///app/jobs/x/thing.mjs:4:2)',
      'process.processTicksAndRejections (node:internal/process/task_queues:95:5)',
    );
    expect(stackFrames(text)).toEqual([
      { file: '/app/jobs/x/index.ts', line: 12, column: 7 },
      { file: '/app/jobs/x/helper.ts', line: 3, column: 1 },
      { file: '/app/jobs/x/thing.mjs', line: 4, column: 2 },
      { file: 'node:internal/process/task_queues', line: 95, column: 5 },
    ]);
  });
});

describe('Function: layoutOf', () => {
  it("finds the engine and the app from this module's own file, in the repository and installed as a package", () => {
    expect(layoutOf(`${REPO}lambda/handlers/consumer/recordFailure.ts`)).toEqual(repo);
    expect(layoutOf(`${APP}/node_modules/paced-jobs/dist/lambda/handlers/consumer/recordFailure.js`)).toEqual(
      installed,
    );
  });

  it("names paths from the root on Lambda, where the source maps put the app's folder at /", () => {
    const onLambda = layoutOf('/node_modules/paced-jobs/dist/lambda/handlers/consumer/recordFailure.js');
    expect(onLambda).toEqual({ engineDir: '/node_modules/paced-jobs/dist/lambda', appDir: '/' });
    expect(jobCodeLocation(stack('apply (/jobs/usage-report/index.ts:41:22)'), onLambda)).toBe(
      'jobs/usage-report/index.ts:41:22',
    );
    expect(layoutOf('/lambda/handlers/consumer/recordFailure.ts')).toEqual({ engineDir: '/lambda', appDir: '/' });
  });

  it('gives none for a bundle run without source maps, whose frames all name the bundle', () => {
    expect(layoutOf('/var/task/index.js')).toBeUndefined();
    expect(layoutOf(undefined)).toBeUndefined();
  });
});

describe('Function: jobCodeLocation', () => {
  it("names the first frame in the job's own files, past Node, packages and the engine, relative to the app", () => {
    const thrown = stack(
      'Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)',
      'require (node:internal/modules/helpers:177:18)',
      `Object.send (${APP}/node_modules/some-client/index.js:10:3)`,
      `Object.apply (${APP}/jobs/usage-report/index.ts:41:22)`,
      `RecordRunner.applyOne (${APP}/node_modules/paced-jobs/dist/lambda/handlers/consumer/recordRunner.js:180:41)`,
    );
    expect(jobCodeLocation(thrown, installed)).toBe('jobs/usage-report/index.ts:41:22');
  });

  it("counts this repository's example jobs, under the engine's lambda/jobs/, as job code", () => {
    const thrown = stack(
      `apply (${REPO}lambda/jobs/some-job/index.ts:130:11)`,
      `applyOne (${REPO}lambda/handlers/consumer/recordRunner.ts:180:41)`,
    );
    expect(jobCodeLocation(thrown, repo)).toBe('lambda/jobs/some-job/index.ts:130:11');
  });

  it('names a helper the job calls, when that is where it threw', () => {
    const thrown = stack(`parse (${APP}/lib/parse.ts:2:9)`, `apply (${APP}/jobs/usage-report/index.ts:41:22)`);
    expect(jobCodeLocation(thrown, installed)).toBe('lib/parse.ts:2:9');
  });

  it("gives none when the engine threw (no frame is the job's), with no stack, or with no layout", () => {
    const engine = stack(
      `DynamoDbRateLimiter.acquire (${REPO}lambda/adapters/rateLimiter.ts:90:11)`,
      'process.processTicksAndRejections (node:internal/process/task_queues:95:5)',
    );
    expect(jobCodeLocation(engine, repo)).toBeUndefined();
    expect(jobCodeLocation(undefined, repo)).toBeUndefined();
    expect(jobCodeLocation(stack(`apply (${APP}/jobs/x/index.ts:1:1)`), undefined)).toBeUndefined();
  });
});

describe('Function: recordFailure', () => {
  it("states an error's type, its message's first line, where the job threw it and the receive", () => {
    const error = new Error("Cannot find module '@aws-sdk/client-textract'\nRequire stack:\n- /var/task/index.js");
    error.stack = stack(`apply (${APP}/jobs/usage-report/index.ts:7:3)`);
    expect(recordFailure(error, 3, installed)).toEqual({
      errorName: 'Error',
      errorMessage: "Cannot find module '@aws-sdk/client-textract'",
      jobLocation: 'jobs/usage-report/index.ts:7:3',
      attempt: 3,
    });
  });

  it('finds its own layout when none is given: thrown here, the place is this test file', () => {
    const failure = recordFailure(new RangeError('Invalid time value'), 1);
    expect(failure).toEqual({
      errorName: 'RangeError',
      errorMessage: 'Invalid time value',
      jobLocation: expect.stringMatching(/:\d+:\d+$/),
      attempt: 1,
    });
    expect(failure.jobLocation?.split(':')[0]).toBe(
      join('test', 'lambda', 'handlers', 'consumer', 'recordFailure.test.ts'),
    );
  });

  it('names what was thrown when it is not an error, and bounds a long message', () => {
    expect(recordFailure('plain string', 1, installed)).toEqual({
      errorName: 'string',
      errorMessage: 'plain string',
      attempt: 1,
    });
    expect(recordFailure(undefined, 1, installed)).toEqual({
      errorName: 'undefined',
      errorMessage: 'undefined',
      attempt: 1,
    });
    expect(recordFailure(null, 1, installed)).toEqual({ errorName: 'null', errorMessage: 'null', attempt: 1 });
    const long = recordFailure(new Error('x'.repeat(MAX_FAILURE_MESSAGE_CHARS + 10)), 1, installed);
    expect(long.errorMessage).toBe(`${'x'.repeat(MAX_FAILURE_MESSAGE_CHARS)}...`);
  });
});

describe('Function: keepJobFrames', () => {
  const saved = Error.stackTraceLimit;
  const scratch = mkdtempSync(join(tmpdir(), 'record-failure-'));
  afterAll(() => {
    Error.stackTraceLimit = saved;
    rmSync(scratch, { recursive: true, force: true });
  });

  it("keeps enough frames to reach the job's call below an error thrown deep inside a package", () => {
    // A package that throws 20 calls below where the job calls it, as the SDK's middleware stack does.
    const file = join(scratch, 'node_modules', 'deep', 'index.js');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(
      file,
      'exports.call = function call(n) { if (n === 0) throw new TypeError("deep"); return call(n - 1) + 1; };\n',
    );
    const deep = require(file) as { call(n: number): number };
    const failureOf = () => {
      try {
        deep.call(20);
      } catch (error) {
        return recordFailure(error, 1, { engineDir: join(process.cwd(), 'lambda'), appDir: process.cwd() });
      }
      throw new Error('the package did not throw');
    };
    Error.stackTraceLimit = 10;
    expect(failureOf().jobLocation).toBeUndefined();
    keepJobFrames();
    expect(Error.stackTraceLimit).toBe(STACK_TRACE_FRAMES);
    expect(failureOf().jobLocation?.split(':')[0]).toBe(
      join('test', 'lambda', 'handlers', 'consumer', 'recordFailure.test.ts'),
    );
    // A process that keeps more keeps them.
    Error.stackTraceLimit = 200;
    keepJobFrames();
    expect(Error.stackTraceLimit).toBe(200);
  });
});
