import { join } from 'node:path';
import { FunctionError, LocalFunction } from '../../local/lambdaRuntime';

const CODE = join(__dirname, 'fixtures', 'assembly', 'asset.0123abcd');
const spec = {
  name: 'victim',
  arn: 'arn:aws:lambda:us-east-1:000000000000:function:victim',
  handler: 'index.handler',
  codeDir: CODE,
  environment: {},
  timeoutSeconds: 5,
};

// Only the runtime's setTimeout is faked (its kill and timeout timers): the child process and its IPC channel run on
// real I/O, and the test moves the runtime's clock instead of waiting for it.
const RUNTIME_TIMERS_ONLY = {
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
} as const;

describe('Class: LocalFunction', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: [...RUNTIME_TIMERS_ONLY.doNotFake] }));
  afterEach(() => jest.useRealTimers());

  describe('Method: invoke (killAfterMs fault hook)', () => {
    it('kills the execution environment mid-invocation and starts the next invocation cold', async () => {
      const asked: string[] = [];
      let kill: number | undefined = 100;
      const fn = new LocalFunction(spec, {
        log: () => undefined,
        killAfterMs: (name) => {
          asked.push(name);
          return kill;
        },
      });
      try {
        const running = fn.invoke({ Records: [{ body: 'sleep:3000', messageId: 'm' }] });
        const outcome = running.then(
          () => 'answered',
          (error: Error) => error,
        );
        // Not before its time: 99 ms into the invocation it still runs.
        jest.advanceTimersByTime(99);
        expect(fn.inFlight).toBe(1);
        jest.advanceTimersByTime(1);
        expect(await outcome).toEqual(
          new FunctionError(
            'victim: Runtime.ExitError: execution environment killed 100 ms into the invocation (fault injection)',
            'victim',
            'Runtime.ExitError',
          ),
        );
        // The kill, not the handler (which sleeps 3 s) nor the function's 5 s timeout, ended it.
        expect(fn.timeoutCount).toBe(0);
        expect(fn.inFlight).toBe(0);
        kill = undefined;
        expect(await fn.invoke({ Records: [{ body: 'ok', messageId: 'm2' }] })).toEqual({ batchItemFailures: [] });
        expect(asked).toEqual(['victim', 'victim']);
      } finally {
        await fn.close();
      }
    });

    it('leaves an invocation that finishes before the kill time alone', async () => {
      const fn = new LocalFunction(spec, { log: () => undefined, killAfterMs: () => 2000 });
      try {
        expect(await fn.invoke({ Records: [{ body: 'fail', messageId: 'm' }] })).toEqual({
          batchItemFailures: [{ itemIdentifier: 'm' }],
        });
        // The kill timer was cleared with the invocation: past the kill time, the warm worker is still there (a kill
        // destroys it at once) and serves the next one.
        expect(jest.getTimerCount()).toBe(0);
        jest.advanceTimersByTime(2100);
        expect(fn.warmCount).toBe(1);
        expect(await fn.invoke({ Records: [{ body: 'ok', messageId: 'm2' }] })).toEqual({ batchItemFailures: [] });
        expect(fn.invocationCount).toBe(2);
      } finally {
        await fn.close();
      }
    });
  });
});
