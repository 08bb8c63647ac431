// Shared setup for the handler and adapter tests: the tables and queues the stack would create, on the local servers.
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { CreateQueueCommand, DeleteMessageCommand, ReceiveMessageCommand, SQSClient, type Message } from '@aws-sdk/client-sqs';
import type { JobRuntimeSettings } from '../../../lambda/core/constants';
import { job as fakeJob } from '../../fixtures/jobs/fake-job';

export async function createIdempotencyTable(name: string): Promise<void> {
  const ddb = new DynamoDBClient({});
  await ddb.send(
    new CreateTableCommand({
      TableName: name,
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  ddb.destroy();
}

export async function createLedgerTable(name: string): Promise<void> {
  const ddb = new DynamoDBClient({});
  await ddb.send(
    new CreateTableCommand({
      TableName: name,
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'S' },
      ],
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  ddb.destroy();
}

export async function createQueue(name: string): Promise<string> {
  const sqs = new SQSClient({});
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name }));
  sqs.destroy();
  return QueueUrl as string;
}

/**
 * Every visible message, deleted as read. WaitTimeSeconds 0 because local-aws-sqs waits the full long-poll time, and
 * de-duplicated by message ID because it may return one message twice in a response.
 */
export async function drainQueue(queueUrl: string): Promise<Message[]> {
  const sqs = new SQSClient({});
  const seen = new Map<string, Message>();
  try {
    for (;;) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, MessageAttributeNames: ['All'] }),
      );
      const fresh = Messages.filter((m) => !seen.has(m.MessageId as string));
      if (fresh.length === 0) return [...seen.values()];
      for (const m of fresh) {
        seen.set(m.MessageId as string, m);
        await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
      }
    }
  } finally {
    sqs.destroy();
  }
}

export function fakeSettings(overrides: Partial<JobRuntimeSettings> = {}): JobRuntimeSettings {
  return {
    jobName: fakeJob.name,
    pageSize: 25,
    maxPagesPerRun: 100,
    maxMessageBytes: 8192,
    businessDateOffsetDays: -1,
    timeZone: 'Europe/Berlin',
    rateLimit: { startsPerInterval: 100, intervalSeconds: 60, burst: 1 },
    concurrency: 2,
    tables: {},
    buckets: {},
    secrets: {},
    settings: { items: 0 },
    ...overrides,
  };
}
