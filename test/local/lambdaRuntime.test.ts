import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FunctionTimeoutError, LocalFunction } from '../../local/lambdaRuntime';
import { waitFor } from '../../local/waitFor';

const CODE = join(__dirname, 'fixtures', 'assembly', 'asset.0123abcd');

describe('Class: LocalFunction', () => {
  describe('Method: invoke', () => {
    it('gives the handler its environment and a context with the time remaining', async () => {
      const lines: string[] = [];
      const fn = new LocalFunction(
        { name: 'ctx-fn', arn: 'arn:aws:lambda:us-east-1:000000000000:function:ctx-fn', handler: 'index.handler', codeDir: CODE, environment: { FIXTURE_LOG_REMAINING: '1', AWS_LAMBDA_FUNCTION_NAME: 'ctx-fn' }, timeoutSeconds: 3 },
        { log: (_f, line) => lines.push(line) },
      );
      try {
        expect(await fn.invoke({ Records: [] })).toEqual({ batchItemFailures: [] });
        await waitFor('the handler\'s log line', () => lines.length > 0, { timeoutMs: 2000 });
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
        { name: 'sdk', arn: 'arn:aws:lambda:us-east-1:000000000000:function:sdk', handler: 'index.handler', codeDir: dir, environment: {}, timeoutSeconds: 5 },
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
        { name: 'warm', arn: 'arn:aws:lambda:us-east-1:000000000000:function:warm', handler: 'index.handler', codeDir: CODE, environment: {}, timeoutSeconds: 3, reservedConcurrency: 2 },
        { log: (_f, line) => lines.push(line) },
      );
      const broken = new LocalFunction(
        { name: 'broken', arn: 'arn:aws:lambda:us-east-1:000000000000:function:broken', handler: 'index.missing', codeDir: CODE, environment: {}, timeoutSeconds: 3 },
        { log: (_f, line) => lines.push(line) },
      );
      try {
        await fn.prewarm(5);
        expect(fn.warmCount).toBe(2);
        await broken.prewarm(1);
        expect(broken.warmCount).toBe(0);
        expect(lines).toEqual([`prewarm: Runtime.HandlerNotFound: Handler missing is not a function in ${join(CODE, 'index.js')}`]);
        await expect(broken.invoke({})).rejects.toThrow(`broken: Runtime.HandlerNotFound: Handler missing is not a function in ${join(CODE, 'index.js')}`);
      } finally {
        await fn.close();
        await broken.close();
      }
    });

    it('throws TooManyRequests beyond its reserved concurrency', async () => {
      const fn = new LocalFunction(
        { name: 'one', arn: 'arn:aws:lambda:us-east-1:000000000000:function:one', handler: 'index.handler', codeDir: CODE, environment: {}, timeoutSeconds: 3, reservedConcurrency: 1 },
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
        { name: 'slow', arn: 'arn:aws:lambda:us-east-1:000000000000:function:slow', handler: 'index.handler', codeDir: CODE, environment: {}, timeoutSeconds: 1 },
        { log: () => undefined },
      );
      try {
        const started = Date.now();
        await expect(fn.invoke({ Records: [{ body: 'sleep:5000', messageId: 'm' }] })).rejects.toThrow(new FunctionTimeoutError('slow', 1));
        // Well short of the 5 s the handler would sleep (a generous bound for a busy machine).
        expect(Date.now() - started).toBeLessThan(4500);
        expect(fn.inFlight).toBe(0);
        expect(await fn.invoke({ Records: [] })).toEqual({ batchItemFailures: [] });
      } finally {
        await fn.close();
      }
    });
  });

  describe('Method: invokeAsync', () => {
    it('retries a failing event twice, then hands it to onAsyncFailure', async () => {
      const failures: string[] = [];
      const fn = new LocalFunction(
        { name: 'async', arn: 'arn:aws:lambda:us-east-1:000000000000:function:async', handler: 'index.handler', codeDir: CODE, environment: {}, timeoutSeconds: 3 },
        { log: () => undefined, asyncRetryDelaysMs: [10, 10], onAsyncFailure: (name, _event, error) => failures.push(`${name}: ${error.message}`) },
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
  });
});
