// The embedded SQS server answers queue depths as AWS does: a message in flight counts once (not visible), and its own
// message move task (a DLQ redrive) still moves every visible message. dynalite and s3rver run in processes of their own
// as the local stack runs them: they answer as in-process, report what they received, and keep a data folder.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  ListMessageMoveTasksCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
  StartMessageMoveTaskCommand,
} from '@aws-sdk/client-sqs';
import {
  LOCAL_CREDENTIALS,
  startDynamoDb,
  startS3,
  startSqs,
  type ObservedRequest,
  type RunningServer,
} from '../../local/servers';
import { waitFor } from '../../local/waitFor';

const ACCOUNT = '000000000000';
const arn = (name: string) => `arn:aws:sqs:us-east-1:${ACCOUNT}:${name}`;

describe('Function: startSqs', () => {
  let server: RunningServer;
  let sqs: SQSClient;

  beforeAll(async () => {
    server = await startSqs({ accountId: ACCOUNT });
    sqs = new SQSClient({ endpoint: server.endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
  });

  afterAll(async () => {
    sqs?.destroy();
    await server?.close();
  });

  const depth = async (url: string) => {
    const { Attributes: a = {} } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    return {
      visible: Number(a.ApproximateNumberOfMessages),
      notVisible: Number(a.ApproximateNumberOfMessagesNotVisible),
      delayed: Number(a.ApproximateNumberOfMessagesDelayed),
    };
  };

  const fill = async (name: string, bodies: string[]) => {
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name }));
    await sqs.send(
      new SendMessageBatchCommand({ QueueUrl, Entries: bodies.map((b, i) => ({ Id: String(i), MessageBody: b })) }),
    );
    return QueueUrl!;
  };

  it('hands out queue URLs on the port it bound', async () => {
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: 'named' }));
    expect(QueueUrl).toBe(`${server.endpoint}/${ACCOUNT}/named`);
  });

  it('counts a received message as not visible only, and a delayed one as delayed only', async () => {
    const url = await fill('depths', ['a', 'b', 'c']);
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'later', DelaySeconds: 60 }));
    expect(await depth(url)).toEqual({ visible: 3, notVisible: 0, delayed: 1 });
    await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 2, VisibilityTimeout: 60 }));
    expect(await depth(url)).toEqual({ visible: 1, notVisible: 2, delayed: 1 });
  });

  it('answers the same for every attribute list, All included', async () => {
    const url = await fill('all', ['a', 'b']);
    await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 1, VisibilityTimeout: 60 }));
    const all = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
    const one = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages'] }),
    );
    expect({ all: all.Attributes?.ApproximateNumberOfMessages, one: one.Attributes }).toEqual({
      all: '1',
      one: { ApproximateNumberOfMessages: '1' },
    });
  });

  it('starts a move task that moves every visible message while another is in flight', async () => {
    const source = await fill('dead-letters', ['a', 'b', 'c', 'd']);
    const { QueueUrl: target } = await sqs.send(
      new CreateQueueCommand({
        QueueName: 'redriven',
        Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: arn('dead-letters'), maxReceiveCount: 5 }) },
      }),
    );
    // A peek at the DLQ (ops dlq peek) leaves one message in flight.
    await sqs.send(new ReceiveMessageCommand({ QueueUrl: source, MaxNumberOfMessages: 1, VisibilityTimeout: 60 }));
    await sqs.send(
      new StartMessageMoveTaskCommand({ SourceArn: arn('dead-letters'), DestinationArn: arn('redriven') }),
    );
    const { Results } = await sqs.send(new ListMessageMoveTasksCommand({ SourceArn: arn('dead-letters') }));
    expect(Results?.[0]).toMatchObject({ ApproximateNumberOfMessagesToMove: 3 });
    // The task moves once a second.
    await waitFor(
      'the move task to finish',
      async () =>
        (await sqs.send(new ListMessageMoveTasksCommand({ SourceArn: arn('dead-letters') }))).Results?.[0]?.Status ===
        'COMPLETED',
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(await depth(target!)).toEqual({ visible: 3, notVisible: 0, delayed: 0 });
    expect(await depth(source)).toEqual({ visible: 0, notVisible: 1, delayed: 0 });
  });
});

describe('Function: startDynamoDb', () => {
  const TABLE = {
    TableName: 'tbl',
    KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' as const }],
    AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' as const }],
    BillingMode: 'PAY_PER_REQUEST' as const,
  };
  const clientOf = (server: RunningServer) =>
    new DynamoDBClient({ endpoint: server.endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
  // Observations from a server process arrive just after the answer.
  const seen = (list: ObservedRequest[], n: number) =>
    waitFor(`${n} observed requests`, () => list.length >= n, { timeoutMs: 5000, intervalMs: 10 });

  describe('in a process of its own', () => {
    it('answers as dynalite does and reports each request it answered, with its body and status', async () => {
      const observed: ObservedRequest[] = [];
      const server = await startDynamoDb({ childProcess: true, onRequest: (r) => observed.push(r) });
      const ddb = clientOf(server);
      try {
        await ddb.send(new CreateTableCommand(TABLE));
        await ddb.send(
          new PutItemCommand({
            TableName: 'tbl',
            Item: { id: { S: 'a' } },
            ConditionExpression: 'attribute_not_exists(id)',
          }),
        );
        await expect(
          ddb.send(
            new PutItemCommand({
              TableName: 'tbl',
              Item: { id: { S: 'a' } },
              ConditionExpression: 'attribute_not_exists(id)',
            }),
          ),
        ).rejects.toThrow('The conditional request failed');
        const got = await ddb.send(new GetItemCommand({ TableName: 'tbl', Key: { id: { S: 'a' } } }));
        expect(got.Item).toEqual({ id: { S: 'a' } });
        // Asked for nothing, answered nothing more.
        expect(got.ConsumedCapacity).toBeUndefined();
        await seen(observed, 4);
        expect(observed.map((r) => [String(r.headers['x-amz-target']).split('.').pop(), r.status])).toEqual([
          ['CreateTable', 200],
          ['PutItem', 200],
          ['PutItem', 400],
          ['GetItem', 200],
        ]);
        expect(JSON.parse(observed[1].body)).toMatchObject({ TableName: 'tbl', Item: { id: { S: 'a' } } });
        expect(observed[1].responseBody).toBeUndefined();
      } finally {
        ddb.destroy();
        await server.close();
      }
    });

    it('with returnConsumedCapacity, answers every read and write with its capacity and reports the answer, the request as sent', async () => {
      const observed: ObservedRequest[] = [];
      const server = await startDynamoDb({
        childProcess: true,
        returnConsumedCapacity: true,
        onRequest: (r) => observed.push(r),
      });
      const ddb = clientOf(server);
      try {
        await ddb.send(new CreateTableCommand(TABLE));
        const put = await ddb.send(new PutItemCommand({ TableName: 'tbl', Item: { id: { S: 'a' } } }));
        expect(put.ConsumedCapacity).toEqual({ TableName: 'tbl', CapacityUnits: 1 });
        const get = await ddb.send(
          new GetItemCommand({ TableName: 'tbl', Key: { id: { S: 'a' } }, ConsistentRead: true }),
        );
        expect(get.ConsumedCapacity).toEqual({ TableName: 'tbl', CapacityUnits: 1 });
        await seen(observed, 3);
        expect(JSON.parse(observed[1].body).ReturnConsumedCapacity).toBeUndefined();
        expect(JSON.parse(observed[1].responseBody!)).toEqual({
          ConsumedCapacity: { TableName: 'tbl', CapacityUnits: 1 },
        });
      } finally {
        ddb.destroy();
        await server.close();
      }
    });

    it('keeps its data folder across a restart', async () => {
      const path = mkdtempSync(join(tmpdir(), 'paced-jobs-dynalite-'));
      try {
        const first = await startDynamoDb({ childProcess: true, path });
        const a = clientOf(first);
        await a.send(new CreateTableCommand(TABLE));
        // CREATING until dynalite's next turn: a quick PutItem on a loaded machine was refused (ResourceNotFoundException).
        await waitFor(
          'the table',
          async () => (await a.send(new DescribeTableCommand({ TableName: 'tbl' }))).Table?.TableStatus === 'ACTIVE',
          { intervalMs: 5 },
        );
        await a.send(new PutItemCommand({ TableName: 'tbl', Item: { id: { S: 'kept' } } }));
        a.destroy();
        await first.close();
        const second = await startDynamoDb({ childProcess: true, path });
        const b = clientOf(second);
        try {
          expect((await b.send(new GetItemCommand({ TableName: 'tbl', Key: { id: { S: 'kept' } } }))).Item).toEqual({
            id: { S: 'kept' },
          });
        } finally {
          b.destroy();
          await second.close();
        }
      } finally {
        rmSync(path, { recursive: true, force: true });
      }
    });

    it('fails clearly when its port is taken', async () => {
      const taken = await startDynamoDb({ childProcess: true });
      try {
        await expect(startDynamoDb({ childProcess: true, port: taken.port })).rejects.toThrow(
          `port ${taken.port} on 127.0.0.1 is already in use`,
        );
      } finally {
        await taken.close();
      }
    });
  });

  it('in this process, also answers with the capacity when asked to', async () => {
    const observed: ObservedRequest[] = [];
    const server = await startDynamoDb({ returnConsumedCapacity: true, onRequest: (r) => observed.push(r) });
    const ddb = clientOf(server);
    try {
      await ddb.send(new CreateTableCommand(TABLE));
      expect(
        (await ddb.send(new PutItemCommand({ TableName: 'tbl', Item: { id: { S: 'a' } } }))).ConsumedCapacity,
      ).toEqual({ TableName: 'tbl', CapacityUnits: 1 });
      expect(JSON.parse(observed[1].responseBody!)).toEqual({
        ConsumedCapacity: { TableName: 'tbl', CapacityUnits: 1 },
      });
    } finally {
      ddb.destroy();
      await server.close();
    }
  });
});

describe('Function: startS3', () => {
  it('in a process of its own, stores objects and reports each request it answered', async () => {
    const observed: ObservedRequest[] = [];
    const server = await startS3({ childProcess: true, buckets: ['b'], onRequest: (r) => observed.push(r) });
    const s3 = new S3Client({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: LOCAL_CREDENTIALS,
      forcePathStyle: true,
    });
    try {
      await s3.send(new PutObjectCommand({ Bucket: 'b', Key: 'k/1.txt', Body: 'hello' }));
      await waitFor('the observed PutObject', () => observed.length >= 1, { timeoutMs: 5000, intervalMs: 10 });
      expect(observed[0]).toMatchObject({ method: 'PUT', status: 200 });
      expect(observed[0].url).toMatch(/^\/b\/k\/1\.txt/);
    } finally {
      s3.destroy();
      await server.close();
    }
  });

  it.each([
    ['in a process of its own', true],
    ['asked for in this process (which has no DES: it starts one anyway)', false],
  ])(
    '%s, pages a listing cut by MaxKeys (its continuation token is signed with DES, a legacy cipher)',
    async (_how, childProcess) => {
      const server = await startS3({ childProcess, buckets: ['b'] });
      const s3 = new S3Client({
        endpoint: server.endpoint,
        region: 'us-east-1',
        credentials: LOCAL_CREDENTIALS,
        forcePathStyle: true,
      });
      try {
        for (const Key of ['due/1', 'due/2', 'due/3'])
          await s3.send(new PutObjectCommand({ Bucket: 'b', Key, Body: Key }));
        const first = await s3.send(new ListObjectsV2Command({ Bucket: 'b', Prefix: 'due/', MaxKeys: 2 }));
        expect(first).toMatchObject({ KeyCount: 2, IsTruncated: true });
        const rest = await s3.send(
          new ListObjectsV2Command({
            Bucket: 'b',
            Prefix: 'due/',
            MaxKeys: 2,
            ContinuationToken: first.NextContinuationToken,
          }),
        );
        expect(rest.Contents?.map((o) => o.Key)).toEqual(['due/3']);
        expect(rest.IsTruncated).toBe(false);
      } finally {
        s3.destroy();
        await server.close();
      }
    },
  );
});
