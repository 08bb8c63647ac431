import { CreateTableCommand, DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import {
  CreateQueueCommand,
  ListQueuesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { type LocalAws, SHARED_LOCAL_AWS, startLocalAws } from './aws';

describe('Local AWS servers', () => {
  let aws: LocalAws;
  beforeAll(async () => {
    aws = await startLocalAws();
  });
  afterAll(async () => {
    await aws.stop();
  });

  it('serves DynamoDB to an SDK client configured only by AWS_ENDPOINT_URL_DYNAMODB', async () => {
    const ddb = new DynamoDBClient({});
    await ddb.send(
      new CreateTableCommand({
        TableName: 'smoke',
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    const tables = await ddb.send(new ListTablesCommand({}));
    expect(tables.TableNames).toContain('smoke');
    ddb.destroy();
  });

  it('serves SQS to an SDK client configured only by AWS_ENDPOINT_URL_SQS', async () => {
    const sqs = new SQSClient({});
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: 'smoke' }));
    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: 'hello' }));
    const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 0, MaxNumberOfMessages: 1 }));
    expect(got.Messages?.[0]?.Body).toBe('hello');
    sqs.destroy();
  });

  // Component tests share their worker's pair of servers (test/support/componentEnvironment.ts) and use fixed table and
  // queue names: what one file leaves must be gone before the next starts.
  it('hands every startLocalAws of the worker the same servers, emptied of every table and queue by stop()', async () => {
    expect((globalThis as Record<string, unknown>)[SHARED_LOCAL_AWS]).toBeDefined();
    const ddb = new DynamoDBClient({});
    const sqs = new SQSClient({});
    await ddb.send(
      new CreateTableCommand({
        TableName: 'smoke-left',
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    await sqs.send(new CreateQueueCommand({ QueueName: 'smoke-left' }));
    const endpoints = [aws.dynamodb.endpoint, aws.sqs.endpoint];
    await aws.stop();
    aws = await startLocalAws();
    expect([aws.dynamodb.endpoint, aws.sqs.endpoint]).toEqual(endpoints);
    expect((await ddb.send(new ListTablesCommand({}))).TableNames).toEqual([]);
    expect((await sqs.send(new ListQueuesCommand({}))).QueueUrls ?? []).toEqual([]);
    await expect(aws.dynamodb.close()).rejects.toThrow('a shared local AWS server is not closed by a test file');
    ddb.destroy();
    sqs.destroy();
  });
});
