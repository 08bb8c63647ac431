import { CreateTableCommand, DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { CreateQueueCommand, ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { LocalAws, startLocalAws } from './aws';

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
});
