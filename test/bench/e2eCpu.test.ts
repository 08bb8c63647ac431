// The e2e bench's CPU accounting: what each process of a measured run used, read off /proc (Linux only).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cpuBetween, cpuSnapshot } from '../../bench/e2e';

describe('Function: cpuBetween', () => {
  it('sorts each process into the runtime, a function or another process, and sums what each used since before', () => {
    const before = new Map([
      ['runtime', 10],
      ['function:a', 1],
      ['dynalite', 2],
    ]);
    const after = new Map([
      ['runtime', 12.5],
      ['function:a', 4],
      ['function:b', 0.5],
      ['dynalite', 3],
    ]);
    expect(cpuBetween(before, after, 7)).toEqual({
      wallSeconds: 7,
      cores: expect.any(Number),
      runtime: 2.5,
      functions: { a: 3, b: 0.5 },
      others: { dynalite: 1 },
      total: 7,
    });
  });

  it('gives nothing where a snapshot could not be taken', () => {
    expect(cpuBetween(undefined, new Map([['runtime', 1]]), 1)).toBeUndefined();
  });
});

const linux = existsSync('/proc/self/stat');

describe('Function: cpuSnapshot', () => {
  (linux ? it : it.skip)('reads this process and names a child by the function it runs', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 5000)'], {
      env: { ...process.env, AWS_LAMBDA_FUNCTION_NAME: 'fn-under-test' },
      stdio: 'ignore',
    });
    try {
      await new Promise((resolve) => child.once('spawn', resolve));
      // The child has exec'd node (its environment is readable) once its stat names it.
      const deadline = Date.now() + 5000;
      let snapshot = cpuSnapshot();
      while (!snapshot?.has('function:fn-under-test') && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        snapshot = cpuSnapshot();
      }
      expect(snapshot?.get('runtime')).toBeGreaterThan(0);
      expect(snapshot?.has('function:fn-under-test')).toBe(true);
    } finally {
      child.kill();
    }
  });
});
