// The auth gateway in front of the real local servers, called with real SDK v3 clients: what a role may do passes
// through unchanged; what it may not fails with the service's own access-denied error, as the SDK raises it on AWS.
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { CreateQueueCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DescribeSecretCommand, GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { createServer } from 'node:http';
import { Authorizer } from '../../../local/iam/authorizer';
import { CredentialDirectory } from '../../../local/iam/credentials';
import { startAuthGateway, TRANSPORT_HEADER } from '../../../local/iam/gateway';
import type { AwsService } from '../../../local/iam/requests';
import type { PlannedIam, StackPlan } from '../../../local/plan';
import { LocalSecretsManager } from '../../../local/secretsManager';
import {
  listenOnLoopback,
  LOCAL_CREDENTIALS,
  startDynamoDb,
  startS3,
  startSqs,
  type ObservedRequest,
  type RunningServer,
} from '../../../local/servers';
import { waitFor } from '../../../local/waitFor';
import { ACCOUNT, enforceSsl, functionArn, plan, queueArn, REGION, role, roleArn, tableArn } from './fixtures';

const TABLE = tableArn('items');
const QUEUE = queueArn('work');
const BUCKET = 'uploads';
const SECRET = `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:api-key-local0`;

const iam: PlannedIam = {
  roles: [
    role('consumer', [
      { Effect: 'Allow', Action: 'dynamodb:GetItem', Resource: TABLE },
      { Effect: 'Allow', Action: ['sqs:SendMessage', 'sqs:GetQueueUrl'], Resource: QUEUE },
      { Effect: 'Allow', Action: 's3:PutObject', Resource: `arn:aws:s3:::${BUCKET}/incoming/*` },
      { Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: SECRET },
      { Effect: 'Allow', Action: 'lambda:InvokeFunction', Resource: functionArn('allowed') },
    ]),
  ],
  resourcePolicies: [
    {
      logicalIds: ['QueuePolicy'],
      service: 'sqs',
      resourceArn: QUEUE,
      document: { Version: '2012-10-17', Statement: [enforceSsl('sqs', QUEUE)] },
    },
    {
      logicalIds: ['BucketPolicy'],
      service: 's3',
      resourceArn: `arn:aws:s3:::${BUCKET}`,
      document: {
        Version: '2012-10-17',
        Statement: [enforceSsl('s3', [`arn:aws:s3:::${BUCKET}`, `arn:aws:s3:::${BUCKET}/*`])],
      },
    },
  ],
};

const UNKNOWN = { accessKeyId: 'ASIAUNKNOWNUNKNOWN00', secretAccessKey: 'x', sessionToken: 'y' };

/** The name, message and HTTP status an SDK call failed with. */
async function failure(call: Promise<unknown>): Promise<{ name: string; message: string; status?: number }> {
  try {
    await call;
  } catch (error) {
    const e = error as Error & { $metadata?: { httpStatusCode?: number } };
    return { name: e.name, message: e.message, status: e.$metadata?.httpStatusCode };
  }
  throw new Error('the call succeeded');
}

/** Marks every request of a client as plain HTTP (before signing, as a real header would be). */
function overPlainHttp<C extends { middlewareStack: { add: (...args: never[]) => void } }>(client: C): C {
  (client.middlewareStack.add as (m: unknown, o: unknown) => void)(
    (next: (args: unknown) => Promise<unknown>) => async (args: { request: { headers: Record<string, string> } }) => {
      args.request.headers[TRANSPORT_HEADER] = 'http';
      return next(args);
    },
    { step: 'build', name: 'plainHttp' },
  );
  return client;
}

describe('Function: startAuthGateway', () => {
  const credentials = new CredentialDirectory();
  const consumer = credentials.forRole(roleArn('consumer'), 'consumer-fn');
  let authorizer: Authorizer;
  let stackPlan: StackPlan;
  const servers: RunningServer[] = [];
  const gateways: Partial<Record<AwsService, RunningServer>> = {};
  let s3Backend: RunningServer;

  const gate = async (service: AwsService, backend: RunningServer) => {
    servers.push(backend);
    gateways[service] = await startAuthGateway({
      service,
      backendEndpoint: backend.endpoint,
      plan: () => stackPlan,
      authorizer: () => authorizer,
      credentials,
    });
    servers.push(gateways[service]!);
  };
  const client = <T>(
    Client: new (config: object) => T,
    service: AwsService,
    creds: object = consumer,
    extra: object = {},
  ): T =>
    new Client({ endpoint: gateways[service]!.endpoint, region: REGION, credentials: creds, maxAttempts: 1, ...extra });

  beforeAll(async () => {
    stackPlan = plan(iam);
    await gate('dynamodb', await startDynamoDb());
    await gate('sqs', await startSqs({ accountId: ACCOUNT }));
    s3Backend = await startS3({ buckets: [BUCKET] });
    await gate('s3', s3Backend);
    const secrets = new LocalSecretsManager();
    secrets.add({ name: 'api-key', arn: SECRET, value: 's3cret' });
    await gate('secretsmanager', await secrets.start());
    // A stand-in for the Lambda API: the gateway's decision is what is tested, not the invocation.
    await gate(
      'lambda',
      await listenOnLoopback(
        createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')),
      ),
    );
    stackPlan = plan(iam, { secrets: [{ logicalId: 'ApiKey', name: 'api-key', arn: SECRET, properties: {} }] });
  });

  beforeEach(() => {
    authorizer = new Authorizer({ iam, accountId: ACCOUNT, region: REGION });
  });

  afterAll(async () => {
    for (const s of servers.reverse()) await s.close();
  });

  describe('DynamoDB', () => {
    it('passes GetItem, and refuses PutItem with AccessDeniedException naming the action and the table', async () => {
      const admin = client(DynamoDBClient, 'dynamodb', LOCAL_CREDENTIALS);
      await admin.send(
        new CreateTableCommand({
          TableName: 'items',
          KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
          AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
      await admin.send(new PutItemCommand({ TableName: 'items', Item: { pk: { S: 'a' }, v: { S: 'seeded' } } }));

      const ddb = client(DynamoDBClient, 'dynamodb');
      const { Item } = await ddb.send(new GetItemCommand({ TableName: 'items', Key: { pk: { S: 'a' } } }));
      expect(Item?.v).toEqual({ S: 'seeded' });

      const denied = await failure(ddb.send(new PutItemCommand({ TableName: 'items', Item: { pk: { S: 'b' } } })));
      expect(denied).toEqual({
        name: 'AccessDeniedException',
        status: 400,
        message:
          `User: arn:aws:sts::${ACCOUNT}:assumed-role/consumer/consumer-fn is not authorized to perform: dynamodb:PutItem on resource: ${TABLE} ` +
          'because no identity-based policy allows the dynamodb:PutItem action',
      });
      expect(authorizer.denials).toEqual([
        expect.objectContaining({
          roleArn: roleArn('consumer'),
          sessionName: 'consumer-fn',
          action: 'dynamodb:PutItem',
          resource: TABLE,
          enforced: true,
        }),
      ]);
      // Refused before it reached dynalite.
      expect(
        (await admin.send(new GetItemCommand({ TableName: 'items', Key: { pk: { S: 'b' } } }))).Item,
      ).toBeUndefined();
    });
  });

  describe('DynamoDB in a process of its own, over its channel', () => {
    it('forwards what the role may over the channel, answered and observed as over HTTP, and refuses the rest before it', async () => {
      const observed: ObservedRequest[] = [];
      const backend = await startDynamoDb({
        childProcess: true,
        returnConsumedCapacity: true,
        onRequest: (r) => observed.push(r),
      });
      servers.push(backend);
      expect(backend.forward).toBeDefined();
      // No server listens at backendEndpoint: every answer below came over the channel.
      const gateway = await startAuthGateway({
        service: 'dynamodb',
        backendEndpoint: 'http://127.0.0.1:9',
        backendChannel: backend.forward,
        plan: () => stackPlan,
        authorizer: () => authorizer,
        credentials,
      });
      servers.push(gateway);
      const at = (creds: { accessKeyId: string; secretAccessKey: string; sessionToken?: string }) =>
        new DynamoDBClient({ endpoint: gateway.endpoint, region: REGION, credentials: creds, maxAttempts: 1 });
      const admin = at(LOCAL_CREDENTIALS);
      const ddb = at(consumer);
      try {
        await admin.send(
          new CreateTableCommand({
            TableName: 'items',
            KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
            AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
            BillingMode: 'PAY_PER_REQUEST',
          }),
        );
        // CREATING until dynalite's next turn, as a table on AWS is for a while: a request that quick would be refused.
        await waitFor(
          'the table',
          async () =>
            (await admin.send(new DescribeTableCommand({ TableName: 'items' }))).Table?.TableStatus === 'ACTIVE',
          { intervalMs: 5 },
        );
        expect(
          (await admin.send(new PutItemCommand({ TableName: 'items', Item: { pk: { S: 'a' }, v: { S: 'seeded' } } })))
            .ConsumedCapacity,
        ).toEqual({ TableName: 'items', CapacityUnits: 1 });
        // dynalite's own refusal comes back with its status and error.
        expect(
          await failure(
            admin.send(
              new PutItemCommand({
                TableName: 'items',
                Item: { pk: { S: 'a' } },
                ConditionExpression: 'attribute_not_exists(pk)',
              }),
            ),
          ),
        ).toMatchObject({
          name: 'ConditionalCheckFailedException',
          status: 400,
        });
        const got = await ddb.send(new GetItemCommand({ TableName: 'items', Key: { pk: { S: 'a' } } }));
        expect(got.Item?.v).toEqual({ S: 'seeded' });
        expect(
          await failure(ddb.send(new PutItemCommand({ TableName: 'items', Item: { pk: { S: 'b' } } }))),
        ).toMatchObject({ name: 'AccessDeniedException', status: 400 });
        // A last request that does reach dynalite, sent after the refused one was answered: dynalite's observations come
        // over its one channel in order, so once this one is observed, the refused PutItem would have been too.
        expect(
          (await admin.send(new GetItemCommand({ TableName: 'items', Key: { pk: { S: 'b' } } }))).Item,
        ).toBeUndefined();
        const answered = await waitFor(
          'the last GetItem observed',
          () => {
            const found = observed.filter((r) => !String(r.headers['x-amz-target']).endsWith('.DescribeTable'));
            return found.filter((r) => String(r.headers['x-amz-target']).endsWith('.GetItem')).length === 2 && found;
          },
          { timeoutMs: 5_000, intervalMs: 5 },
        );
        // The refused PutItem never reached dynalite; the rest did, each with its body, status and answer.
        expect(answered.map((r) => [String(r.headers['x-amz-target']).split('.').pop(), r.status])).toEqual([
          ['CreateTable', 200],
          ['PutItem', 200],
          ['PutItem', 400],
          ['GetItem', 200],
          ['GetItem', 200],
        ]);
        expect(JSON.parse(answered[1].body)).toEqual({
          TableName: 'items',
          Item: { pk: { S: 'a' }, v: { S: 'seeded' } },
        });
        expect(JSON.parse(answered[3].responseBody!)).toMatchObject({ Item: { pk: { S: 'a' }, v: { S: 'seeded' } } });
      } finally {
        admin.destroy();
        ddb.destroy();
      }
    });
  });

  describe('SQS', () => {
    it("does not let enforceSSL's deny fire on a function's SendMessage, and fires it on a plain-HTTP one", async () => {
      const admin = client(SQSClient, 'sqs', LOCAL_CREDENTIALS);
      const { QueueUrl } = await admin.send(new CreateQueueCommand({ QueueName: 'work' }));

      const sqs = client(SQSClient, 'sqs');
      expect((await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: 'hello' }))).MessageId).toEqual(
        expect.any(String),
      );

      const denied = await failure(
        overPlainHttp(client(SQSClient, 'sqs')).send(new SendMessageCommand({ QueueUrl, MessageBody: 'hello' })),
      );
      expect(denied).toEqual({
        name: 'AccessDeniedException',
        status: 403,
        message: `User: arn:aws:sts::${ACCOUNT}:assumed-role/consumer/consumer-fn is not authorized to perform: sqs:SendMessage on resource: ${QUEUE} with an explicit deny in a resource-based policy`,
      });
      expect(authorizer.denials.map((d) => d.reason)).toEqual(['explicit-deny-resource']);
    });

    it('answers a query-protocol request in XML, with the query code AccessDenied', async () => {
      const res = await fetch(`${gateways.sqs!.endpoint}/`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `AWS4-HMAC-SHA256 Credential=${consumer.accessKeyId}/20260101/${REGION}/sqs/aws4_request, SignedHeaders=host, Signature=0`,
        },
        body: `Action=DeleteQueue&QueueUrl=${encodeURIComponent(`http://127.0.0.1/${ACCOUNT}/work`)}`,
      });
      expect(res.status).toBe(403);
      const xml = await res.text();
      expect(xml).toContain('<Code>AccessDenied</Code>');
      expect(xml).toContain(
        `is not authorized to perform: sqs:DeleteQueue on resource: ${QUEUE} because no identity-based policy allows the sqs:DeleteQueue action</Message>`,
      );
    });
  });

  describe('S3', () => {
    it('refuses a PutObject outside the grant with AccessDenied naming s3:PutObject and the object, and lets an allowed one reach s3rver', async () => {
      const s3 = client(S3Client, 's3', consumer, { forcePathStyle: true });
      const denied = await failure(
        s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'private/report.csv', Body: 'x' })),
      );
      expect(denied).toEqual({
        name: 'AccessDenied',
        status: 403,
        message: `User: arn:aws:sts::${ACCOUNT}:assumed-role/consumer/consumer-fn is not authorized to perform: s3:PutObject on resource: arn:aws:s3:::${BUCKET}/private/report.csv because no identity-based policy allows the s3:PutObject action`,
      });

      await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'incoming/a.csv', Body: 'id\n1\n' }));
      const direct = new S3Client({
        endpoint: s3Backend.endpoint,
        region: REGION,
        credentials: LOCAL_CREDENTIALS,
        forcePathStyle: true,
      });
      expect((await direct.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'incoming/a.csv' }))).ContentLength).toBe(
        5,
      );
      await expect(
        direct.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'private/report.csv' })),
      ).rejects.toMatchObject({ name: 'NotFound' });

      const plain = await failure(
        overPlainHttp(client(S3Client, 's3', consumer, { forcePathStyle: true })).send(
          new PutObjectCommand({ Bucket: BUCKET, Key: 'incoming/b.csv', Body: 'x' }),
        ),
      );
      expect(plain).toMatchObject({
        name: 'AccessDenied',
        message: expect.stringMatching(/with an explicit deny in a resource-based policy$/),
      });
    });
  });

  describe('Secrets Manager and Lambda', () => {
    it('passes what the role may, and refuses the rest with AccessDeniedException', async () => {
      const sm = client(SecretsManagerClient, 'secretsmanager');
      expect((await sm.send(new GetSecretValueCommand({ SecretId: 'api-key' }))).SecretString).toBe('s3cret');
      expect(await failure(sm.send(new DescribeSecretCommand({ SecretId: 'api-key' })))).toMatchObject({
        name: 'AccessDeniedException',
        message: expect.stringContaining(`secretsmanager:DescribeSecret on resource: ${SECRET} because`),
      });

      const lambda = client(LambdaClient, 'lambda');
      expect((await lambda.send(new InvokeCommand({ FunctionName: 'allowed' }))).StatusCode).toBe(200);
      expect(await failure(lambda.send(new InvokeCommand({ FunctionName: 'other' })))).toEqual({
        name: 'AccessDeniedException',
        status: 403,
        message: expect.stringContaining(
          `lambda:InvokeFunction on resource: ${functionArn('other')} because no identity-based policy allows`,
        ),
      });
    });
  });

  describe('credentials', () => {
    it('always passes the administrator, records nothing for it, and refuses an unknown key with each service’s invalid-token error', async () => {
      const admin = client(DynamoDBClient, 'dynamodb', LOCAL_CREDENTIALS);
      await admin.send(new PutItemCommand({ TableName: 'items', Item: { pk: { S: 'admin' } } }));
      expect(authorizer.denialCount).toBe(0);

      expect(
        await failure(
          client(DynamoDBClient, 'dynamodb', UNKNOWN).send(
            new GetItemCommand({ TableName: 'items', Key: { pk: { S: 'a' } } }),
          ),
        ),
      ).toEqual({
        name: 'UnrecognizedClientException',
        status: 400,
        message: 'The security token included in the request is invalid.',
      });
      const { QueueUrl } = await client(SQSClient, 'sqs', LOCAL_CREDENTIALS).send(
        new CreateQueueCommand({ QueueName: 'work' }),
      );
      expect(
        await failure(client(SQSClient, 'sqs', UNKNOWN).send(new SendMessageCommand({ QueueUrl, MessageBody: 'x' }))),
      ).toMatchObject({
        name: 'InvalidClientTokenId',
        status: 403,
      });
      expect(
        await failure(
          client(S3Client, 's3', UNKNOWN, { forcePathStyle: true }).send(
            new PutObjectCommand({ Bucket: BUCKET, Key: 'incoming/x', Body: 'x' }),
          ),
        ),
      ).toEqual({
        name: 'InvalidAccessKeyId',
        status: 403,
        message: 'The AWS Access Key Id you provided does not exist in our records.',
      });
      expect(authorizer.denialCount).toBe(0);
    });
  });

  describe('enforcement off', () => {
    it('forwards what AWS would deny, recording it as not enforced', async () => {
      authorizer = new Authorizer({ iam, accountId: ACCOUNT, region: REGION, enforce: false });
      await client(DynamoDBClient, 'dynamodb').send(
        new PutItemCommand({ TableName: 'items', Item: { pk: { S: 'lenient' } } }),
      );
      const admin = client(DynamoDBClient, 'dynamodb', LOCAL_CREDENTIALS);
      expect(
        (await admin.send(new GetItemCommand({ TableName: 'items', Key: { pk: { S: 'lenient' } } }))).Item,
      ).toBeDefined();
      expect(authorizer.denials).toEqual([expect.objectContaining({ action: 'dynamodb:PutItem', enforced: false })]);
    });
  });
});
