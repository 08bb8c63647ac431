import {
  DynamoDBClient,
  InternalServerError,
  ListTablesCommand,
  ProvisionedThroughputExceededException,
} from '@aws-sdk/client-dynamodb';
import { dynamoErrorBody, DynamoFaultProxy, type DynamoFault } from '../../chaos/dynamoProxy';
import { startDynamoDb, type RunningServer } from '../../local/servers';
import { holdsFor } from '../../local/waitFor';

describe('Class: DynamoFaultProxy', () => {
  let dynalite: RunningServer;
  let proxy: DynamoFaultProxy;
  let next: DynamoFault | undefined;
  let client: DynamoDBClient;
  beforeAll(async () => {
    dynalite = await startDynamoDb();
    proxy = new DynamoFaultProxy({ target: () => dynalite.endpoint, decide: () => next });
    await proxy.start();
    // One attempt, so each injected fault reaches the test as the SDK's own exception.
    client = new DynamoDBClient({
      endpoint: proxy.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
      maxAttempts: 1,
    });
  });
  afterAll(async () => {
    client.destroy();
    await proxy.close();
    await dynalite.close();
  });

  describe('Method: start', () => {
    it('forwards requests to dynalite when no fault is decided', async () => {
      next = undefined;
      expect((await client.send(new ListTablesCommand({}))).TableNames).toEqual([]);
      expect(proxy.forwarded).toBe(1);
    });

    it('answers a throttle in the DynamoDB JSON error format, which the SDK maps to its exception', async () => {
      next = 'ProvisionedThroughputExceededException';
      const error = await client.send(new ListTablesCommand({})).catch((e: Error) => e);
      expect(error).toBeInstanceOf(ProvisionedThroughputExceededException);
      expect((error as Error).message).toBe(
        'The level of configured provisioned throughput for the table was exceeded (injected)',
      );
    });

    it('answers an internal error with status 500', async () => {
      next = 'InternalServerError';
      const error = await client.send(new ListTablesCommand({})).catch((e: Error) => e);
      expect(error).toBeInstanceOf(InternalServerError);
      expect((error as InternalServerError).$metadata.httpStatusCode).toBe(500);
      expect(proxy.injected).toEqual([
        { fault: 'ProvisionedThroughputExceededException', operation: 'ListTables' },
        { fault: 'InternalServerError', operation: 'ListTables' },
      ]);
    });

    it('stalls a request: no answer at all, until the caller gives up (a Lambda timeout, in a run)', async () => {
      next = 'Stall';
      const abort = new AbortController();
      let settled = false;
      const pending = client
        .send(new ListTablesCommand({}), { abortSignal: abort.signal })
        .finally(() => (settled = true));
      // The wait is the claim: a stalled request stays unanswered, however long the caller waits.
      await holdsFor('the stalled request to stay unanswered', () => !settled, { forMs: 300 });
      expect(settled).toBe(false);
      abort.abort();
      await expect(pending).rejects.toThrow(/abort/i);
      expect(proxy.injected.at(-1)).toEqual({ fault: 'Stall', operation: 'ListTables' });
      next = undefined;
      expect((await client.send(new ListTablesCommand({}))).TableNames).toEqual([]);
    });
  });
});

describe('Function: dynamoErrorBody', () => {
  it('names the exception in __type as DynamoDB does', () => {
    expect(JSON.parse(dynamoErrorBody('ThrottlingException'))).toEqual({
      __type: 'com.amazonaws.dynamodb.v20120810#ThrottlingException',
      message: 'The level of configured provisioned throughput for the table was exceeded (injected)',
    });
  });
});
