import { join } from 'node:path';
import { GetQueueAttributesCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DescribeTableCommand, DescribeTimeToLiveCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { HeadBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import {
  InvokeCommand,
  LambdaClient,
  ListEventSourceMappingsCommand,
  UpdateEventSourceMappingCommand,
} from '@aws-sdk/client-lambda';
import {
  GetScheduleCommand,
  ListSchedulesCommand,
  SchedulerClient,
  UpdateScheduleCommand,
} from '@aws-sdk/client-scheduler';
import { SendMessageCommand, StartMessageMoveTaskCommand } from '@aws-sdk/client-sqs';
import { loadTemplate } from '../../local/template';
import { assetDirectory, generateSecretValue, LocalStack, ProvisioningError } from '../../local/stack';
import { waitFor } from '../../local/waitFor';

const FIXTURES = join(__dirname, 'fixtures');

describe('Class: LocalStack', () => {
  let stack: LocalStack;
  const lines: string[] = [];
  beforeAll(async () => {
    stack = new LocalStack({
      template: loadTemplate(join(FIXTURES, 'template.json')),
      stackName: 'Fixture',
      assemblyDir: join(FIXTURES, 'assembly'),
      log: (source, line) => lines.push(`${source}: ${line}`),
      secretValue: () => 'fixture-secret',
    });
    await stack.start();
  });
  afterAll(async () => {
    await stack.stop();
  });

  describe('Method: start', () => {
    it('creates the queues with their attributes and redrive policy', async () => {
      const sqs = new SQSClient(stack.clientConfig('sqs'));
      const work = stack.plan.queues.find((q) => q.logicalId === 'WorkQueue')!;
      const attrs = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: work.url, AttributeNames: ['All'] }));
      expect(attrs.Attributes).toMatchObject({
        VisibilityTimeout: '2',
        QueueArn: 'arn:aws:sqs:us-east-1:000000000000:Fixture-WorkQueue',
        RedrivePolicy:
          '{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:Fixture-WorkDlq","maxReceiveCount":2}',
      });
      sqs.destroy();
    });

    it('creates the tables with keys, indexes and TTL', async () => {
      const ddb = new DynamoDBClient(stack.clientConfig('dynamodb'));
      const { Table } = await ddb.send(new DescribeTableCommand({ TableName: 'items-Fixture' }));
      expect(Table!.KeySchema).toEqual([{ AttributeName: 'pk', KeyType: 'HASH' }]);
      expect(Table!.GlobalSecondaryIndexes!.map((g) => g.IndexName)).toEqual(['by-state']);
      // dynalite has no UpdateTimeToLive: the runtime says so instead of pretending items expire.
      const ttl = await ddb.send(new DescribeTimeToLiveCommand({ TableName: 'items-Fixture' }));
      expect(ttl.TimeToLiveDescription?.TimeToLiveStatus).toBe('DISABLED');
      expect(
        lines.some((l) => l.startsWith('provision: table items-Fixture: TTL on expiresAt not applied locally')),
      ).toBe(true);
      ddb.destroy();
    });

    it('creates the buckets and serves the secrets', async () => {
      const s3 = new S3Client(stack.clientConfig('s3'));
      await expect(s3.send(new HeadBucketCommand({ Bucket: 'fixture-uploads' }))).resolves.toBeDefined();
      s3.destroy();
      const sm = new SecretsManagerClient(stack.clientConfig('secretsManager'));
      const secret = await sm.send(new GetSecretValueCommand({ SecretId: 'fixture/api-key' }));
      expect(secret.SecretString).toBe('fixture-secret');
      expect(secret.ARN).toBe('arn:aws:secretsmanager:us-east-1:000000000000:secret:fixture/api-key-local0');
      sm.destroy();
    });

    it('runs a schedule end to end: producer asset -> queue -> consumer asset via the event source mapping', async () => {
      stack.startConsumers();
      const result = await stack.scheduler.fire('Fixture-Nightly', {
        scheduledTime: new Date('2026-11-29T02:00:00Z'),
        businessDate: '2026-11-28',
      });
      expect(result.delivered).toBe(true);
      const mapping = stack.mappings[0];
      await waitFor('the consumer to acknowledge the produced message', () => mapping.statistics.acknowledged >= 1, {
        timeoutMs: 5000,
      });
      expect(mapping.statistics).toMatchObject({ invocations: 1, acknowledged: 1, failed: 0 });
      expect(stack.runtime.isIdle()).toBe(true);
    });

    it('serves Invoke and the event source mapping API to the AWS SDK', async () => {
      const lambda = new LambdaClient(stack.clientConfig('lambda'));
      const out = await lambda.send(
        new InvokeCommand({
          FunctionName: 'Fixture-Consumer',
          Payload: Buffer.from(JSON.stringify({ Records: [{ messageId: 'm1', body: 'fail' }] })),
        }),
      );
      expect(JSON.parse(Buffer.from(out.Payload!).toString())).toEqual({
        batchItemFailures: [{ itemIdentifier: 'm1' }],
      });
      const thrown = await lambda.send(
        new InvokeCommand({
          FunctionName: 'Fixture-Consumer',
          Payload: Buffer.from(JSON.stringify({ Records: [{ messageId: 'm1', body: 'throw' }] })),
        }),
      );
      expect(thrown.FunctionError).toBe('Unhandled');
      await expect(lambda.send(new InvokeCommand({ FunctionName: 'nope' }))).rejects.toThrow(
        'Function not found: nope',
      );
      // The producer's continuation: an Event invocation of itself, accepted at once and run in the background.
      stack.startConsumers();
      const before = stack.mappings[0].statistics.acknowledged;
      const event = await lambda.send(
        new InvokeCommand({
          FunctionName: 'fixture-producer',
          InvocationType: 'Event',
          Payload: Buffer.from('{"page":2}'),
        }),
      );
      expect(event.StatusCode).toBe(202);
      await waitFor(
        "the consumer to acknowledge the continuation's message",
        () => stack.mappings[0].statistics.acknowledged !== before,
        { timeoutMs: 5000 },
      );
      expect(stack.mappings[0].statistics.acknowledged).toBe(before + 1);
      const list = await lambda.send(new ListEventSourceMappingsCommand({ FunctionName: 'Fixture-Consumer' }));
      expect(list.EventSourceMappings!.map((m) => [m.UUID, m.State, m.BatchSize])).toEqual([
        ['local-ConsumerMapping', 'Enabled', 5],
      ]);
      const paused = await lambda.send(
        new UpdateEventSourceMappingCommand({ UUID: 'local-ConsumerMapping', Enabled: false }),
      );
      expect(paused.State).toBe('Disabled');
      await lambda.send(new UpdateEventSourceMappingCommand({ UUID: 'local-ConsumerMapping', Enabled: true }));
      expect(stack.mappings[0].state).toBe('Enabled');
      lambda.destroy();
    });

    it('serves GetSchedule, ListSchedules and UpdateSchedule so an operator can pause and resume a schedule', async () => {
      const client = new SchedulerClient(stack.clientConfig('scheduler'));
      const got = await client.send(new GetScheduleCommand({ Name: 'Fixture-Nightly' }));
      expect(got).toMatchObject({
        State: 'ENABLED',
        ScheduleExpression: 'cron(0 2 * * ? *)',
        ScheduleExpressionTimezone: 'Europe/London',
      });
      await client.send(
        new UpdateScheduleCommand({
          Name: 'Fixture-Nightly',
          State: 'DISABLED',
          ScheduleExpression: got.ScheduleExpression,
          ScheduleExpressionTimezone: got.ScheduleExpressionTimezone,
          FlexibleTimeWindow: { Mode: 'OFF' },
          Target: got.Target,
        }),
      );
      expect(stack.scheduler.list().find((s) => s.schedule.name === 'Fixture-Nightly')!.state).toBe('DISABLED');
      const disabled = await client.send(new ListSchedulesCommand({ State: 'DISABLED' }));
      expect(disabled.Schedules!.map((s) => s.Name)).toEqual(['Fixture-Nightly']);
      await client.send(
        new UpdateScheduleCommand({
          ...got,
          Name: 'Fixture-Nightly',
          State: 'ENABLED',
          FlexibleTimeWindow: { Mode: 'OFF' },
          ScheduleExpression: got.ScheduleExpression!,
          Target: got.Target!,
        }),
      );
      expect((await client.send(new GetScheduleCommand({ Name: 'Fixture-Nightly' }))).State).toBe('ENABLED');
      await expect(client.send(new GetScheduleCommand({ Name: 'missing' }))).rejects.toThrow(
        'Schedule missing does not exist.',
      );
      client.destroy();
    });

    it('moves DLQ messages back to their source with StartMessageMoveTask (local-aws-sqs does the move)', async () => {
      const sqs = new SQSClient(stack.clientConfig('sqs'));
      const dlq = stack.plan.queues.find((q) => q.logicalId === 'WorkDlq')!;
      const work = stack.plan.queues.find((q) => q.logicalId === 'WorkQueue')!;
      await Promise.all(stack.mappings.map((m) => m.stop()));
      /** The bodies one receive returns (undefined when it returns none), leaving them visible again at once. */
      const receive = async (url: string, visibilityTimeout?: number) => {
        const { Messages = [] } = await sqs.send(
          new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 0, VisibilityTimeout: visibilityTimeout }),
        );
        return Messages.length > 0 ? Messages.map((m) => m.Body!) : undefined;
      };
      // A real dead-letter: received maxReceiveCount (2) times without being deleted.
      await sqs.send(new SendMessageCommand({ QueueUrl: work.url, MessageBody: 'redriven' }));
      for (let i = 1; i <= 2; i++)
        await waitFor(`receive ${i} of the message`, () => receive(work.url, 0), { timeoutMs: 3000 });
      expect(await waitFor('the message in the DLQ', () => receive(dlq.url, 0), { timeoutMs: 3000 })).toEqual([
        'redriven',
      ]);
      await sqs.send(new StartMessageMoveTaskCommand({ SourceArn: dlq.arn, MaxNumberOfMessagesPerSecond: 10 }));
      expect(
        await waitFor('the message moved back to the work queue', () => receive(work.url), {
          timeoutMs: 3000,
          intervalMs: 100,
        }),
      ).toEqual(['redriven']);
      sqs.destroy();
    });

    it('dead-letters a schedule whose target cannot be delivered', async () => {
      const fixtureSchedule = stack.scheduler.get('Fixture-Nightly');
      stack.scheduler.add({
        ...fixtureSchedule,
        name: 'broken',
        targetArn: 'arn:aws:lambda:us-east-1:000000000000:function:gone',
        maximumRetryAttempts: 1,
      });
      const result = await stack.scheduler.fire('broken');
      expect(result).toMatchObject({
        delivered: false,
        attempts: 2,
        error: 'Function not found: arn:aws:lambda:us-east-1:000000000000:function:gone',
      });
      const sqs = new SQSClient(stack.clientConfig('sqs'));
      const got = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: stack.queueUrl(fixtureSchedule.deadLetterArn!),
          WaitTimeSeconds: 0,
          MessageAttributeNames: ['All'],
        }),
      );
      expect(got.Messages![0].MessageAttributes!.ERROR_CODE.StringValue).toBe('TargetDeliveryFailed');
      sqs.destroy();
    });
  });
});

describe('Function: assetDirectory', () => {
  it('finds the asset by its S3 key when metadata is absent', () => {
    expect(
      assetDirectory(join(FIXTURES, 'assembly'), {
        logicalId: 'P',
        name: 'p',
        arn: '',
        handler: 'index.handler',
        s3Key: 'producer01.zip',
        environment: {},
        timeoutSeconds: 3,
        memoryMb: 128,
        runtime: 'nodejs22.x',
      }),
    ).toBe(join(FIXTURES, 'assembly', 'asset.producer01'));
  });

  it('throws naming the function when the asset is missing', () => {
    expect(() =>
      assetDirectory('/nonexistent', {
        logicalId: 'P',
        name: 'p',
        arn: '',
        handler: 'index.handler',
        s3Key: 'ff.zip',
        environment: {},
        timeoutSeconds: 3,
        memoryMb: 128,
        runtime: 'nodejs22.x',
      }),
    ).toThrow(
      new ProvisioningError(
        'function P (p): bundled asset not found in /nonexistent (looked for /nonexistent/asset.ff); run `npx cdk synth`',
        'P',
      ),
    );
  });
});

describe('Function: generateSecretValue', () => {
  it('generates per GenerateSecretString, into a JSON template when asked', () => {
    expect(generateSecretValue({ GenerateSecretString: { PasswordLength: 20, ExcludePunctuation: true } })).toMatch(
      /^[A-Za-z0-9]{20}$/,
    );
    const json = JSON.parse(
      generateSecretValue({
        GenerateSecretString: { SecretStringTemplate: '{"user":"a"}', GenerateStringKey: 'password' },
      }),
    );
    expect(json).toEqual({ user: 'a', password: expect.stringMatching(/^.{32}$/) });
  });
});
