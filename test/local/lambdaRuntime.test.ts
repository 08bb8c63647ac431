import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type AsyncFailureInfo,
  FunctionConfigError,
  FunctionError,
  type FunctionSpec,
  FunctionTimeoutError,
  LambdaRuntime,
  LocalFunction,
  type RuntimeOptions,
} from '../../local/lambdaRuntime';
import { CPU_PROFILE_ENV, cpuProfileArgs } from '../../local/cpuProfile';
import { resolveNodeFor, UnsupportedRuntimeError } from '../../local/nodeRuntimes';
import { waitFor } from '../../local/waitFor';

const CODE = join(__dirname, 'fixtures', 'assembly', 'asset.0123abcd');

/*
 * A bundle written for these tests: the event says what to do. Plain CommonJS, as an esbuild bundle is.
 */
const PROBE_SOURCE = `
exports.handler = async (event, context) => {
  switch (event.do) {
    case 'version': return process.version;
    case 'time': return [new Date(0).getTimezoneOffset(), Intl.DateTimeFormat().resolvedOptions().timeZone];
    case 'env': return { ...process.env };
    case 'context': return { requestId: context.awsRequestId, arn: context.invokedFunctionArn, name: context.functionName, memory: context.memoryLimitInMB };
    case 'log-request': console.log('request=' + context.awsRequestId); return 'ok';
    case 'throw': { const e = new TypeError(event.message); throw e; }
    case 'exit': process.exit(event.code);
    case 'uncaught': setTimeout(() => { throw new RangeError('thrown from a timer'); }, 10); return new Promise(() => undefined);
    case 'sleep': return new Promise((r) => setTimeout(() => r('slept'), event.ms));
    case 'pid': return process.pid;
    default: throw new Error('unknown probe ' + event.do);
  }
};
exports.callback = (event, context, callback) => { setTimeout(() => callback(null, 'called back ' + event.n), 5); };
`;

const dirs: string[] = [];
function probeAsset(source = PROBE_SOURCE): string {
  const dir = mkdtempSync(join(tmpdir(), 'probe-asset-'));
  writeFileSync(join(dir, 'index.js'), source);
  dirs.push(dir);
  return dir;
}
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const probe = (name: string, extra: Partial<FunctionSpec> = {}): FunctionSpec => ({
  name,
  arn: `arn:aws:lambda:us-east-1:000000000000:function:${name}`,
  handler: 'index.handler',
  codeDir: probeAsset(),
  environment: {},
  timeoutSeconds: 5,
  ...extra,
});

async function using<T>(
  spec: FunctionSpec,
  options: Partial<RuntimeOptions>,
  body: (fn: LocalFunction) => Promise<T>,
): Promise<T> {
  const fn = new LocalFunction(spec, { log: () => undefined, ...options });
  try {
    return await body(fn);
  } finally {
    await fn.close();
  }
}

describe('Function: resolveNodeFor', () => {
  it('finds the installed Node 22 for nodejs22.x and checks that it runs', () => {
    const node = resolveNodeFor('nodejs22.x');
    expect(node).toEqual({
      execPath: expect.any(String),
      version: expect.stringMatching(/^v22\./),
      wanted: 'nodejs22.x',
      exact: true,
    });
  });

  it('runs a major it cannot find on the closest one it has, and says so', () => {
    const node = resolveNodeFor('nodejs18.x');
    expect(node.exact).toBe(false);
    expect(node.version).not.toMatch(/^v18\./);
    expect(node.note).toContain(`nodejs18.x wanted but no Node 18 is installed`);
    expect(node.note).toContain(`running Node ${node.version} instead`);
  });

  it("notes an architecture that is not the host's without calling the match inexact", () => {
    const other = process.arch === 'arm64' ? 'x86_64' : 'arm64';
    const node = resolveNodeFor('nodejs22.x', other);
    expect(node.exact).toBe(true);
    expect(node.note).toContain(`the template's architecture is ${other}`);
  });

  it('throws for a runtime that is not Node.js', () => {
    expect(() => resolveNodeFor('python3.12')).toThrow(new UnsupportedRuntimeError('python3.12'));
  });
});

describe('Class: LocalFunction', () => {
  describe('Method: invoke', () => {
    it('gives the handler its environment and a context with the time remaining', async () => {
      const lines: string[] = [];
      const fn = new LocalFunction(
        {
          name: 'ctx-fn',
          arn: 'arn:aws:lambda:us-east-1:000000000000:function:ctx-fn',
          handler: 'index.handler',
          codeDir: CODE,
          environment: { FIXTURE_LOG_REMAINING: '1', AWS_LAMBDA_FUNCTION_NAME: 'ctx-fn' },
          timeoutSeconds: 3,
        },
        { log: (_f, line) => lines.push(line) },
      );
      try {
        expect(await fn.invoke({ Records: [] })).toEqual({ batchItemFailures: [] });
        await waitFor("the handler's log line", () => lines.length > 0, { timeoutMs: 2000 });
        const remaining = Number(/remaining=(\d+)/.exec(lines[0])![1]);
        expect(remaining).toBeGreaterThan(2000);
        expect(remaining).toBeLessThanOrEqual(3000);
        expect(lines[0]).toContain('fn=ctx-fn env=ctx-fn');
      } finally {
        await fn.close();
      }
    });

    it('provides the AWS SDK to a bundle outside the project, as the Lambda runtime does', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'asset-'));
      cpSync(join(__dirname, 'fixtures', 'assembly', 'asset.sdk01'), dir, { recursive: true });
      const fn = new LocalFunction(
        {
          name: 'sdk',
          arn: 'arn:aws:lambda:us-east-1:000000000000:function:sdk',
          handler: 'index.handler',
          codeDir: dir,
          environment: {},
          timeoutSeconds: 5,
        },
        { log: () => undefined },
      );
      try {
        expect(await fn.invoke({})).toBe('function');
      } finally {
        await fn.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('prewarms up to its concurrency, and leaves a module that fails to load for the first invocation to report', async () => {
      const lines: string[] = [];
      const fn = new LocalFunction(
        {
          name: 'warm',
          arn: 'arn:aws:lambda:us-east-1:000000000000:function:warm',
          handler: 'index.handler',
          codeDir: CODE,
          environment: {},
          timeoutSeconds: 3,
          reservedConcurrency: 2,
        },
        { log: (_f, line) => lines.push(line) },
      );
      const broken = new LocalFunction(
        {
          name: 'broken',
          arn: 'arn:aws:lambda:us-east-1:000000000000:function:broken',
          handler: 'index.missing',
          codeDir: CODE,
          environment: {},
          timeoutSeconds: 3,
        },
        { log: (_f, line) => lines.push(line) },
      );
      try {
        await fn.prewarm(5);
        expect(fn.warmCount).toBe(2);
        await broken.prewarm(1);
        expect(broken.warmCount).toBe(0);
        // Lambda's wording for a handler the module does not export.
        expect(lines).toEqual(['prewarm: Runtime.HandlerNotFound: index.missing is undefined or not exported']);
        await expect(broken.invoke({})).rejects.toThrow(
          new FunctionError(
            'broken: Runtime.HandlerNotFound: index.missing is undefined or not exported',
            'broken',
            'Runtime.HandlerNotFound',
          ),
        );
      } finally {
        await fn.close();
        await broken.close();
      }
    });

    it('throws TooManyRequests beyond its reserved concurrency', async () => {
      const fn = new LocalFunction(
        {
          name: 'one',
          arn: 'arn:aws:lambda:us-east-1:000000000000:function:one',
          handler: 'index.handler',
          codeDir: CODE,
          environment: {},
          timeoutSeconds: 3,
          reservedConcurrency: 1,
        },
        { log: () => undefined },
      );
      try {
        const running = fn.invoke({ Records: [{ body: 'hold:300', messageId: 'm' }] });
        await expect(fn.invoke({ Records: [] })).rejects.toThrow('one: Rate Exceeded (concurrency limit 1 reached)');
        await running;
      } finally {
        await fn.close();
      }
    });

    it('stops the execution at its timeout, and the next invocation starts a fresh environment', async () => {
      const fn = new LocalFunction(
        {
          name: 'slow',
          arn: 'arn:aws:lambda:us-east-1:000000000000:function:slow',
          handler: 'index.handler',
          codeDir: CODE,
          environment: {},
          timeoutSeconds: 1,
        },
        { log: () => undefined },
      );
      // Only the runtime's setTimeout is faked (its timeout timer): the child process and its IPC run on real I/O.
      jest.useFakeTimers({
        doNotFake: [
          'Date',
          'hrtime',
          'nextTick',
          'performance',
          'queueMicrotask',
          'setImmediate',
          'clearImmediate',
          'setInterval',
          'clearInterval',
        ],
      });
      try {
        const outcome = fn.invoke({ Records: [{ body: 'sleep:5000', messageId: 'm' }] }).then(
          () => 'answered',
          (error: Error) => error,
        );
        jest.advanceTimersByTime(999);
        expect(fn.inFlight).toBe(1);
        // At its 1 s timeout, well before the 5 s the handler sleeps: the timeout, not the handler, ends it.
        jest.advanceTimersByTime(1);
        expect(await outcome).toEqual(new FunctionTimeoutError('slow', 1));
        expect(fn.timeoutCount).toBe(1);
        expect(fn.inFlight).toBe(0);
        expect(await fn.invoke({ Records: [] })).toEqual({ batchItemFailures: [] });
      } finally {
        jest.useRealTimers();
        await fn.close();
      }
    });
  });

  describe('Method: invokeAsync', () => {
    it('retries a failing event twice, then hands it to onAsyncFailure', async () => {
      const failures: string[] = [];
      const fn = new LocalFunction(
        {
          name: 'async',
          arn: 'arn:aws:lambda:us-east-1:000000000000:function:async',
          handler: 'index.handler',
          codeDir: CODE,
          environment: {},
          timeoutSeconds: 3,
        },
        {
          log: () => undefined,
          asyncRetryDelaysMs: [10, 10],
          onAsyncFailure: (name, _event, error) => failures.push(`${name}: ${error.message}`),
        },
      );
      try {
        fn.invokeAsync({ Records: [{ body: 'throw', messageId: 'm' }] });
        expect(fn.pendingAsync).toBe(1);
        await waitFor('the event handed to onAsyncFailure', () => failures.length > 0, { timeoutMs: 5000 });
        expect(fn.invocationCount).toBe(3);
        expect(failures).toEqual(['async: async: Error: fixture handler threw on purpose']);
        expect(fn.pendingAsync).toBe(0);
      } finally {
        await fn.close();
      }
    });

    it.each([
      [0, 1],
      [1, 2],
    ])(
      'with maximumRetryAttempts %i, gives up after %i attempt(s) and says why, under the accepted request ID',
      async (retries, attempts) => {
        const failures: { error: string; info: AsyncFailureInfo }[] = [];
        const lines: string[] = [];
        await using(
          probe('retries', { maximumRetryAttempts: retries }),
          {
            log: (_f, line) => lines.push(line),
            asyncRetryDelaysMs: [10, 10],
            onAsyncFailure: (_n, _e, error, info) => failures.push({ error: error.message, info }),
          },
          async (fn) => {
            const requestId = fn.invokeAsync({ do: 'throw', message: 'no luck' });
            await waitFor('the event handed to onAsyncFailure', () => failures.length > 0, { timeoutMs: 5000 });
            expect(failures).toEqual([
              { error: 'retries: TypeError: no luck', info: { requestId, attempts, condition: 'RetriesExhausted' } },
            ]);
            expect(fn.invocationCount).toBe(attempts);
            expect(lines.filter((l) => l.startsWith('async invocation failed'))).toHaveLength(retries);
          },
        );
      },
    );

    it('keeps the request ID of the accepted event on every retry, as Lambda does', async () => {
      const lines: string[] = [];
      const infos: AsyncFailureInfo[] = [];
      // The probe logs its request ID and succeeds; a kill on the first attempt makes it retry.
      let kills = 1;
      await using(
        probe('same-id'),
        {
          log: (_f, line) => lines.push(line),
          asyncRetryDelaysMs: [10],
          onAsyncFailure: (_n, _e, _err, info) => infos.push(info),
          onInvoke: (_n, _e, h) => void (kills-- > 0 && h.kill()),
        },
        async (fn) => {
          const requestId = fn.invokeAsync({ do: 'log-request' });
          await waitFor('the retry to log its request ID', () => lines.some((l) => l.startsWith('request=')), {
            timeoutMs: 5000,
          });
          expect(lines.filter((l) => l.startsWith('request='))).toEqual([`request=${requestId}`]);
          expect(fn.invocationCount).toBe(2);
          expect(infos).toEqual([]);
        },
      );
    });

    it('gives up on an event older than maximumEventAgeSeconds before its retry, with the last error', async () => {
      const failures: { error: string; info: AsyncFailureInfo }[] = [];
      await using(
        probe('aged', { maximumEventAgeSeconds: 0.2 }),
        {
          log: () => undefined,
          asyncRetryDelaysMs: [500],
          onAsyncFailure: (_n, _e, error, info) => failures.push({ error: error.message, info }),
        },
        async (fn) => {
          const requestId = fn.invokeAsync({ do: 'throw', message: 'first and only' });
          await waitFor('the expired event handed to onAsyncFailure', () => failures.length > 0, { timeoutMs: 5000 });
          expect(failures).toEqual([
            {
              error: 'aged: TypeError: first and only',
              info: { requestId, attempts: 1, condition: 'EventAgeExceeded' },
            },
          ]);
          expect(fn.invocationCount).toBe(1);
          expect(fn.pendingAsync).toBe(0);
        },
      );
    });

    it('delivers an accepted event a second time at asyncDuplicateRate, and counts it', async () => {
      const lines: string[] = [];
      const rt = new LambdaRuntime({ log: (_f, line) => lines.push(line), asyncDuplicateRate: 1, random: () => 0.999 });
      try {
        const fn = rt.add(probe('dup'));
        const requestId = fn.invokeAsync({ do: 'log-request' });
        await waitFor(
          'both deliveries',
          () => lines.filter((l) => l.startsWith('request=')).length === 2 && rt.isIdle(),
          { timeoutMs: 5000 },
        );
        expect(lines.filter((l) => l.startsWith('request='))).toEqual([`request=${requestId}`, `request=${requestId}`]);
        expect(fn.invocationCount).toBe(2);
        expect(fn.duplicateAsyncDeliveries).toBe(1);
        expect(rt.duplicateAsyncDeliveries).toBe(1);
      } finally {
        await rt.close();
      }
    });

    it('delivers once when the random draw is above asyncDuplicateRate', async () => {
      await using(probe('once'), { asyncDuplicateRate: 0.5, random: () => 0.5 }, async (fn) => {
        fn.invokeAsync({ do: 'version' });
        await waitFor('the delivery', () => fn.invocationCount === 1 && fn.pendingAsync === 0, { timeoutMs: 5000 });
        expect(fn.duplicateAsyncDeliveries).toBe(0);
      });
    });
  });

  describe('Constructor', () => {
    it('names every out-of-range setting in one error', () => {
      expect(
        () =>
          new LocalFunction(probe('bad', { maximumRetryAttempts: 3, maximumEventAgeSeconds: 0 }), {
            log: () => undefined,
            asyncDuplicateRate: 2,
          }),
      ).toThrow(
        new FunctionConfigError('bad', [
          'maximumRetryAttempts must be an integer from 0 to 2, not 3',
          'maximumEventAgeSeconds must be more than 0 and at most 21600, not 0',
          'asyncDuplicateRate must be from 0 to 1, not 2',
        ]),
      );
    });
  });

  describe('Method: invoke (execution environments)', () => {
    it("runs the template's Node major, and the host's when the function names none", async () => {
      await using(probe('node22', { runtime: 'nodejs22.x' }), {}, async (fn) => {
        expect(await fn.invoke({ do: 'version' })).toMatch(/^v22\./);
        expect(fn.node.exact).toBe(true);
      });
      await using(probe('host'), {}, async (fn) => expect(await fn.invoke({ do: 'version' })).toBe(process.version));
    });

    describe('with the host in another time zone', () => {
      const saved = process.env.TZ;
      beforeEach(() => {
        process.env.TZ = 'America/New_York';
        process.env.HOST_ONLY_VARIABLE = 'from the host';
      });
      afterEach(() => {
        if (saved === undefined) delete process.env.TZ;
        else process.env.TZ = saved;
        delete process.env.HOST_ONLY_VARIABLE;
      });

      it('runs the function in UTC, as Lambda does', async () => {
        // The premise: a process that inherited this environment would be in New York.
        expect(
          execFileSync(process.execPath, ['-p', 'new Date(0).getTimezoneOffset()'], {
            env: process.env,
            encoding: 'utf8',
          }).trim(),
        ).toBe('300');
        await using(probe('utc', { runtime: 'nodejs22.x' }), {}, async (fn) =>
          expect(await fn.invoke({ do: 'time' })).toEqual([0, 'UTC']),
        );
        await using(probe('utc-stack', { environment: { TZ: 'UTC' } }), {}, async (fn) =>
          expect(await fn.invoke({ do: 'time' })).toEqual([0, 'UTC']),
        );
      });

      it("gives the function its environment and the runtime's, none of the host's", async () => {
        await using(
          probe('env', { runtime: 'nodejs22.x', environment: { TABLE_NAME: 'jobs', LAMBDA_TASK_ROOT: '/var/task' } }),
          {},
          async (fn) => {
            const env = (await fn.invoke({ do: 'env' })) as Record<string, string>;
            expect(env.TABLE_NAME).toBe('jobs');
            expect(env.HOST_ONLY_VARIABLE).toBeUndefined();
            expect(env.TZ).toBe(':UTC');
            expect(env._HANDLER).toBe('index.handler');
            expect(env.AWS_EXECUTION_ENV).toBe('AWS_Lambda_nodejs22.x');
            // Reserved: it names the sandbox's real task folder, whatever the function's environment said.
            expect(env.LAMBDA_TASK_ROOT).not.toBe('/var/task');
            expect(env.NODE_PATH.split(':')[0]).toMatch(/nodejs\/node22\/node_modules$/);
            // Nothing of the IPC plumbing leaks into the function's environment.
            expect(
              Object.keys(env).filter((k) => k.startsWith('NODE_CHANNEL') || k.startsWith('JEST') || k === 'HOME'),
            ).toEqual([]);
          },
        );
      });
    });

    it('gives the handler a Lambda context, and supports callback-style handlers', async () => {
      await using(probe('ctx', { memoryMb: 256 }), {}, async (fn) => {
        const ctx = (await fn.invoke({ do: 'context' })) as Record<string, string>;
        expect(ctx).toEqual({
          requestId: expect.stringMatching(/^[0-9a-f-]{36}$/),
          arn: 'arn:aws:lambda:us-east-1:000000000000:function:ctx',
          name: 'ctx',
          memory: '256',
        });
      });
      await using(probe('cb', { handler: 'index.callback' }), {}, async (fn) =>
        expect(await fn.invoke({ n: 7 })).toBe('called back 7'),
      );
    });

    it('ends the environment on a crash and starts the next invocation cold', async () => {
      await using(probe('crash', { runtime: 'nodejs22.x' }), {}, async (fn) => {
        const pid = await fn.invoke({ do: 'pid' });
        await expect(fn.invoke({ do: 'exit', code: 3 })).rejects.toThrow(
          new FunctionError(
            'crash: Runtime.ExitError: Runtime exited with error: exit status 3',
            'crash',
            'Runtime.ExitError',
          ),
        );
        await expect(fn.invoke({ do: 'uncaught' })).rejects.toThrow(
          'crash: Runtime.ExitError: Runtime exited with error: exit status 129 (Runtime.UncaughtException: RangeError: thrown from a timer)',
        );
        expect(fn.warmCount).toBe(0);
        const next = await fn.invoke({ do: 'pid' });
        expect(next).not.toBe(pid);
      });
    });
  });

  describe('Method: errorSummary', () => {
    it('groups init failures, handler errors, timeouts and crashes by type and message, with the first three in full', async () => {
      const broken = probeAsset(`require(['j', 'e', 's', 't'].join(''));\nexports.handler = async () => 'never';`);
      await using(probe('errs', { timeoutSeconds: 1 }), {}, async (fn) => {
        for (let i = 0; i < 4; i++)
          await expect(fn.invoke({ do: 'throw', message: `bad input ${i}\nsecond line` })).rejects.toThrow(
            FunctionError,
          );
        await expect(fn.invoke({ do: 'throw', message: 'bad input 0' })).rejects.toThrow(FunctionError);
        await expect(fn.invoke({ do: 'sleep', ms: 3000 })).rejects.toThrow(FunctionTimeoutError);
        await expect(fn.invoke({ do: 'exit', code: 2 })).rejects.toThrow(FunctionError);
        expect(fn.errorSummary()).toEqual([
          {
            errorType: 'TypeError',
            message: 'bad input 0',
            count: 2,
            examples: ['errs: TypeError: bad input 0\nsecond line', 'errs: TypeError: bad input 0'],
          },
          {
            errorType: 'TypeError',
            message: 'bad input 1',
            count: 1,
            examples: ['errs: TypeError: bad input 1\nsecond line'],
          },
          {
            errorType: 'TypeError',
            message: 'bad input 2',
            count: 1,
            examples: ['errs: TypeError: bad input 2\nsecond line'],
          },
          {
            errorType: 'TypeError',
            message: 'bad input 3',
            count: 1,
            examples: ['errs: TypeError: bad input 3\nsecond line'],
          },
          {
            errorType: 'Sandbox.Timedout',
            message: 'Task timed out after 1.00 seconds',
            count: 1,
            examples: ['errs: Task timed out after 1.00 seconds'],
          },
          {
            errorType: 'Runtime.ExitError',
            message: 'Runtime exited with error: exit status 2',
            count: 1,
            examples: ['errs: Runtime.ExitError: Runtime exited with error: exit status 2'],
          },
        ]);
      });
      await using(probe('init', { codeDir: broken }), {}, async (fn) => {
        for (let i = 0; i < 4; i++)
          await expect(fn.invoke({})).rejects.toThrow(
            "init: Runtime.ImportModuleError: Error: Cannot find module 'jest'",
          );
        const [entry, ...rest] = fn.errorSummary();
        expect(rest).toEqual([]);
        expect(entry).toEqual({
          errorType: 'Runtime.ImportModuleError',
          message: "Error: Cannot find module 'jest'",
          count: 4,
          examples: expect.any(Array),
        });
        expect(entry.examples).toHaveLength(3);
        expect(entry.examples[0]).toMatch(
          /^init: Runtime\.ImportModuleError: Error: Cannot find module 'jest'\nRequire stack:\n- \S+index\.js/,
        );
      });
    });

    it('does not count throttles as function errors', async () => {
      await using(probe('busy', { reservedConcurrency: 1 }), {}, async (fn) => {
        const running = fn.invoke({ do: 'sleep', ms: 300 });
        await expect(fn.invoke({ do: 'version' })).rejects.toThrow('busy: Rate Exceeded (concurrency limit 1 reached)');
        await running;
        expect(fn.errorSummary()).toEqual([]);
      });
    });
  });
});

describe('Class: LambdaRuntime', () => {
  it("reports which Node each function runs on against the template's runtime", async () => {
    const rt = new LambdaRuntime({ log: () => undefined });
    try {
      rt.add(probe('on22', { runtime: 'nodejs22.x' }));
      rt.add(probe('on18', { runtime: 'nodejs18.x' }));
      const [on22, on18] = rt.nodeReport();
      expect(on22).toEqual({
        functionName: 'on22',
        wanted: 'nodejs22.x',
        running: expect.stringMatching(/^v22\./),
        exact: true,
      });
      expect(on18).toEqual({
        functionName: 'on18',
        wanted: 'nodejs18.x',
        running: expect.not.stringMatching(/^v18\./),
        exact: false,
        note: expect.stringContaining('no Node 18 is installed'),
      });
    } finally {
      await rt.close();
    }
  });

  it('prewarms functions that share an asset from one copy of it', async () => {
    const rt = new LambdaRuntime({ log: () => undefined });
    try {
      const codeDir = probeAsset();
      const a = rt.add(probe('share-a', { codeDir, runtime: 'nodejs22.x' }));
      const b = rt.add(probe('share-b', { codeDir, runtime: 'nodejs22.x' }));
      const c = rt.add(probe('own', { runtime: 'nodejs22.x' }));
      await rt.prewarm(
        new Map([
          ['share-a', 2],
          ['share-b', 1],
          ['own', 1],
        ]),
      );
      expect([a.warmCount, b.warmCount, c.warmCount]).toEqual([2, 1, 1]);
      const root = async (f: LocalFunction) =>
        ((await f.invoke({ do: 'env' })) as Record<string, string>).LAMBDA_TASK_ROOT;
      expect(await root(a)).toBe(await root(b));
      expect(await root(c)).not.toBe(await root(a));
    } finally {
      await rt.close();
    }
  });
});

describe('Option: PACED_CPU_PROF_DIR', () => {
  it('adds no flag unless the folder is named, and names each profile apart', () => {
    expect(cpuProfileArgs('fn', {})).toEqual([]);
    expect(cpuProfileArgs('fn', { [CPU_PROFILE_ENV]: '' })).toEqual([]);
    const [first, second] = [
      cpuProfileArgs('my fn/1', { [CPU_PROFILE_ENV]: '/tmp/p' }),
      cpuProfileArgs('my fn/1', { [CPU_PROFILE_ENV]: '/tmp/p' }),
    ];
    expect(first.slice(0, 2)).toEqual(['--cpu-prof', '--cpu-prof-dir=/tmp/p']);
    expect(first[2]).toMatch(/^--cpu-prof-name=my_fn_1\.\d+\.\d+\.cpuprofile$/);
    expect(second[2]).not.toBe(first[2]);
  });

  it('profiles each execution environment and writes its profile when the function closes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paced-jobs-cpu-prof-'));
    dirs.push(dir);
    const before = process.env[CPU_PROFILE_ENV];
    process.env[CPU_PROFILE_ENV] = dir;
    try {
      await using(probe('profiled-fn'), {}, async (fn) => {
        expect(await fn.invoke({ do: 'version' })).toMatch(/^v\d+/);
      });
    } finally {
      if (before === undefined) delete process.env[CPU_PROFILE_ENV];
      else process.env[CPU_PROFILE_ENV] = before;
    }
    const written = readdirSync(dir);
    expect(written).toEqual([expect.stringMatching(/^profiled-fn\..*\.cpuprofile$/)]);
    expect(JSON.parse(readFileSync(join(dir, written[0]), 'utf8'))).toEqual(
      expect.objectContaining({ nodes: expect.any(Array), samples: expect.any(Array) }),
    );
  });
});
