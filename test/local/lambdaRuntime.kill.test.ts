import { join } from 'node:path';
import { FunctionError, LocalFunction } from '../../local/lambdaRuntime';
import { holdsFor } from '../../local/waitFor';

const CODE = join(__dirname, 'fixtures', 'assembly', 'asset.0123abcd');
const spec = { name: 'victim', arn: 'arn:aws:lambda:us-east-1:000000000000:function:victim', handler: 'index.handler', codeDir: CODE, environment: {}, timeoutSeconds: 5 };

describe('Class: LocalFunction', () => {
  describe('Method: invoke (killAfterMs fault hook)', () => {
    it('kills the execution environment mid-invocation and starts the next invocation cold', async () => {
      const asked: string[] = [];
      let kill: number | undefined = 100;
      const fn = new LocalFunction(spec, { log: () => undefined, killAfterMs: (name) => (asked.push(name), kill) });
      try {
        const started = Date.now();
        await expect(fn.invoke({ Records: [{ body: 'sleep:3000', messageId: 'm' }] })).rejects.toThrow(
          new FunctionError('victim: Runtime.ExitError: execution environment killed 100 ms into the invocation (fault injection)', 'victim', 'Runtime.ExitError'),
        );
        // Well short of the 3 s the handler would sleep: the kill, not the handler, ended it (a generous bound for a busy machine).
        expect(Date.now() - started).toBeLessThan(2800);
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
        expect(await fn.invoke({ Records: [{ body: 'fail', messageId: 'm' }] })).toEqual({ batchItemFailures: [{ itemIdentifier: 'm' }] });
        // The kill timer was cleared with the invocation: the warm worker outlives the kill time (the wait past it is
        // the claim) and serves the next one.
        await holdsFor('the warm worker to stay up past the kill time', () => fn.warmCount === 1, { forMs: 2100 });
        expect(fn.warmCount).toBe(1);
      } finally {
        await fn.close();
      }
    });
  });
});
