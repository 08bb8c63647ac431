// The producer projection: calls per operation at a stated latency and parallelism, against Lambda's 900 s ceiling.
import { projectPublish } from '../../bench/producer';

describe('Function: projectPublish', () => {
  it('projects batched publishing of a million operations into one invocation', () => {
    expect(projectPublish(0.1, 1_000_000, 20, 5)).toEqual({
      callsPerOperation: 0.1,
      seconds: 400,
      fitsOneInvocation: true,
      invocations: 1,
    });
  });

  it('projects one call per operation past the usable 630 s of an invocation', () => {
    expect(projectPublish(1, 1_000_000, 20, 5)).toEqual({
      callsPerOperation: 1,
      seconds: 4000,
      fitsOneInvocation: false,
      invocations: 7,
    });
  });
});
