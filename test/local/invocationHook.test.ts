import { join } from 'node:path';
import { FunctionError, LocalFunction, type InvocationHandle } from '../../local/lambdaRuntime';

// The local runtime's onInvoke hook, which the chaos harness kills the producer through (the fixture of the runtime's
// own tests: a tiny bundled handler whose record bodies say what to do).
const CODE = join(__dirname, 'fixtures', 'assembly', 'asset.0123abcd');
const spec = {
  name: 'victim',
  arn: 'arn:aws:lambda:us-east-1:000000000000:function:victim',
  handler: 'index.handler',
  codeDir: CODE,
  environment: {},
  timeoutSeconds: 5,
};
const killed = new FunctionError(
  'victim: Runtime.ExitError: execution environment killed by fault injection',
  'victim',
  'Runtime.ExitError',
);

describe('Class: LocalFunction', () => {
  describe('Method: invoke (onInvoke fault hook)', () => {
    it('kills the invocation when the caller says so, and the next one starts cold', async () => {
      const handles: InvocationHandle[] = [];
      const events: unknown[] = [];
      const fn = new LocalFunction(spec, {
        log: () => undefined,
        onInvoke: (_name, event, h) => {
          events.push(event);
          handles.push(h);
        },
      });
      try {
        const running = fn.invoke({ Records: [{ body: 'sleep:3000', messageId: 'm' }] });
        // Under way (the event is on its way to the handler): the caller kills it at a moment of its choosing.
        expect(handles).toHaveLength(1);
        expect(handles[0].ended).toBe(false);
        expect(fn.inFlight).toBe(1);
        expect(handles[0].kill()).toBe(true);
        await expect(running).rejects.toThrow(killed);
        // The kill, not the handler (which sleeps 3 s) nor the function's 5 s timeout, ended it.
        expect(fn.timeoutCount).toBe(0);
        expect(fn.inFlight).toBe(0);
        expect(handles[0].ended).toBe(true);
        expect(handles[0].kill()).toBe(false);
        expect(await fn.invoke({ Records: [{ body: 'ok', messageId: 'm2' }] })).toEqual({ batchItemFailures: [] });
        // Over: a late kill does nothing.
        expect(handles[1].ended).toBe(true);
        expect(handles[1].kill()).toBe(false);
        expect(events).toEqual([
          { Records: [{ body: 'sleep:3000', messageId: 'm' }] },
          { Records: [{ body: 'ok', messageId: 'm2' }] },
        ]);
      } finally {
        await fn.close();
      }
    });

    it('kills an invocation as it starts (a step failed on every receive), and serves the next one', async () => {
      let killNext = true;
      const fn = new LocalFunction(spec, {
        log: () => undefined,
        onInvoke: (_name, _event, h) => void (killNext && h.kill()),
      });
      try {
        await expect(fn.invoke({ Records: [{ body: 'ok', messageId: 'm' }] })).rejects.toThrow(killed);
        expect(fn.inFlight).toBe(0);
        killNext = false;
        expect(await fn.invoke({ Records: [{ body: 'ok', messageId: 'm2' }] })).toEqual({ batchItemFailures: [] });
      } finally {
        await fn.close();
      }
    });
  });
});
