import { bindJob, logger, metrics, withLogKeys } from '../../../lambda/adapters/observability';

describe('Function: withLogKeys', () => {
  it('adds the keys for the duration of the call and removes them even when it throws', async () => {
    const lines: Record<string, unknown>[] = [];
    const out = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(JSON.parse(String(chunk)));
      return true;
    });
    try {
      await expect(
        withLogKeys({ operationId: 'op:1', batchId: 'b:1', messageId: undefined }, async () => {
          logger.info('inside');
          throw new Error('apply failed');
        }),
      ).rejects.toThrow('apply failed');
      logger.info('after');
    } finally {
      out.mockRestore();
    }
    expect(lines[0]).toMatchObject({ message: 'inside', operationId: 'op:1', batchId: 'b:1' });
    expect(lines[0]).not.toHaveProperty('messageId');
    expect(lines[1].message).toBe('after');
    expect(lines[1]).not.toHaveProperty('operationId');
    expect(lines[1]).not.toHaveProperty('batchId');
  });
});

describe('Function: bindJob', () => {
  it('sets the job dimension once, however often it is called', () => {
    const setDefaults = jest.spyOn(metrics, 'setDefaultDimensions');
    bindJob('some-job');
    bindJob('some-job');
    expect(setDefaults).toHaveBeenCalledTimes(1);
    expect(setDefaults).toHaveBeenCalledWith({ job: 'some-job' });
  });
});
