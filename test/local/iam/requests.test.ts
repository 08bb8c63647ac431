// Each request is described with the IAM actions and resource ARNs AWS authorizes it on.
import {
  describeRequest,
  RequestDescriptionError,
  requestNeedsBody,
  type AwsService,
  type HttpRequestParts,
} from '../../../local/iam/requests';
import { ACCOUNT, functionArn, keyArn, plan, queueArn, tableArn } from './fixtures';

const stack = plan(
  { roles: [], resourcePolicies: [] },
  {
    queues: [
      {
        logicalId: 'Work',
        name: 'work',
        url: `http://127.0.0.1:9/${ACCOUNT}/work`,
        arn: queueArn('work'),
        attributes: {},
        deadLetterTargetArn: queueArn('dlq'),
        maxReceiveCount: 3,
      },
      { logicalId: 'Dlq', name: 'dlq', url: `http://127.0.0.1:9/${ACCOUNT}/dlq`, arn: queueArn('dlq'), attributes: {} },
      {
        logicalId: 'Sealed',
        name: 'sealed',
        url: `http://127.0.0.1:9/${ACCOUNT}/sealed`,
        arn: queueArn('sealed'),
        attributes: {},
        kmsKeyArn: keyArn('k1'),
      },
    ],
    secrets: [
      {
        logicalId: 'Key',
        name: 'provider/api-key',
        arn: `arn:aws:secretsmanager:us-east-1:${ACCOUNT}:secret:provider/api-key-local0`,
        properties: {},
      },
    ],
    mappings: [
      {
        logicalId: 'ConsumerMapping',
        uuid: 'local-ConsumerMapping',
        functionName: 'consumer',
        eventSourceArn: queueArn('work'),
        batchSize: 10,
        maximumBatchingWindowSeconds: 0,
        reportBatchItemFailures: true,
        enabled: true,
      },
    ],
    // Key schemas, for dynamodb:LeadingKeys: a table with a partition key only, and one with a sort key and an index.
    tables: [
      {
        logicalId: 'Idem',
        name: 'idem',
        arn: tableArn('idem'),
        properties: { KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }] },
      },
      {
        logicalId: 'Ledger',
        name: 'ledger',
        arn: tableArn('ledger'),
        properties: {
          KeySchema: [
            { AttributeName: 'sk', KeyType: 'RANGE' },
            { AttributeName: 'pk', KeyType: 'HASH' },
          ],
          GlobalSecondaryIndexes: [{ IndexName: 'byJob', KeySchema: [{ AttributeName: 'job', KeyType: 'HASH' }] }],
        },
      },
    ],
  },
);

const json = (target: string, body: unknown): HttpRequestParts => ({
  method: 'POST',
  url: '/',
  headers: { 'x-amz-target': target },
  body: JSON.stringify(body),
});
const permissions = (service: AwsService, request: HttpRequestParts) =>
  describeRequest(service, request, stack).permissions;

describe('Function: describeRequest', () => {
  describe('DynamoDB', () => {
    const ddb = (op: string, body: unknown) => permissions('dynamodb', json(`DynamoDB_20120810.${op}`, body));

    it('authorizes single-item and table operations on the table named (by name or ARN)', () => {
      expect(ddb('PutItem', { TableName: 'T', Item: {} })).toEqual([
        { action: 'dynamodb:PutItem', resource: tableArn('T') },
      ]);
      expect(ddb('DescribeTable', { TableName: tableArn('U') })).toEqual([
        { action: 'dynamodb:DescribeTable', resource: tableArn('U') },
      ]);
    });

    it('authorizes a Query or Scan of an index on the index', () => {
      expect(ddb('Query', { TableName: 'T', IndexName: 'byDate' })).toEqual([
        { action: 'dynamodb:Query', resource: `${tableArn('T')}/index/byDate` },
      ]);
      expect(ddb('Scan', { TableName: 'T' })).toEqual([{ action: 'dynamodb:Scan', resource: tableArn('T') }]);
    });

    it('authorizes batch operations on each table they touch', () => {
      expect(ddb('BatchGetItem', { RequestItems: { A: { Keys: [] }, B: { Keys: [] } } })).toEqual([
        { action: 'dynamodb:BatchGetItem', resource: tableArn('A') },
        { action: 'dynamodb:BatchGetItem', resource: tableArn('B') },
      ]);
      expect(ddb('BatchWriteItem', { RequestItems: { A: [] } })).toEqual([
        { action: 'dynamodb:BatchWriteItem', resource: tableArn('A') },
      ]);
    });

    it('authorizes each transaction item as the single-item operation it is', () => {
      const items = [
        { Put: { TableName: 'A' } },
        { Update: { TableName: 'B' } },
        { Delete: { TableName: 'A' } },
        { ConditionCheck: { TableName: 'C' } },
        { Put: { TableName: 'A' } },
      ];
      expect(ddb('TransactWriteItems', { TransactItems: items })).toEqual([
        { action: 'dynamodb:PutItem', resource: tableArn('A') },
        { action: 'dynamodb:UpdateItem', resource: tableArn('B') },
        { action: 'dynamodb:DeleteItem', resource: tableArn('A') },
        { action: 'dynamodb:ConditionCheckItem', resource: tableArn('C') },
      ]);
      expect(
        ddb('TransactGetItems', { TransactItems: [{ Get: { TableName: 'A' } }, { Get: { TableName: 'B' } }] }),
      ).toEqual([
        { action: 'dynamodb:GetItem', resource: tableArn('A') },
        { action: 'dynamodb:GetItem', resource: tableArn('B') },
      ]);
    });

    describe('dynamodb:LeadingKeys', () => {
      const leading = (...keys: string[]) => ({ 'dynamodb:LeadingKeys': keys });

      it("sets the partition key's value of a single-item request: its Key, or a PutItem's Item", () => {
        expect(ddb('GetItem', { TableName: 'idem', Key: { id: { S: 'job-a#1' } } })).toEqual([
          { action: 'dynamodb:GetItem', resource: tableArn('idem'), context: leading('job-a#1') },
        ]);
        expect(
          ddb('PutItem', { TableName: 'idem', Item: { id: { S: 'job-a#2' }, status: { S: 'x' } } })[0].context,
        ).toEqual(leading('job-a#2'));
        expect(
          ddb('UpdateItem', { TableName: tableArn('ledger'), Key: { pk: { S: 'BATCH#job-a' }, sk: { S: 'b1' } } })[0]
            .context,
        ).toEqual(leading('BATCH#job-a'));
        expect(ddb('DeleteItem', { TableName: 'idem', Key: { id: { N: '7' } } })[0].context).toEqual(leading('7'));
      });

      it("sets a Query's partition value from KeyConditionExpression (names and all) or KeyConditions, an index's by its own key", () => {
        const query = {
          TableName: 'ledger',
          KeyConditionExpression: 'begins_with(sk, :d) AND #p = :pk',
          ExpressionAttributeNames: { '#p': 'pk' },
          ExpressionAttributeValues: { ':pk': { S: 'BATCH#job-b' }, ':d': { S: '2026' } },
        };
        expect(ddb('Query', query)).toEqual([
          { action: 'dynamodb:Query', resource: tableArn('ledger'), context: leading('BATCH#job-b') },
        ]);
        expect(
          ddb('Query', {
            TableName: 'ledger',
            KeyConditions: { pk: { ComparisonOperator: 'EQ', AttributeValueList: [{ S: 'PAGES#job-b#x' }] } },
          })[0].context,
        ).toEqual(leading('PAGES#job-b#x'));
        expect(
          ddb('Query', {
            TableName: 'ledger',
            IndexName: 'byJob',
            KeyConditionExpression: 'job = :j',
            ExpressionAttributeValues: { ':j': { S: 'job-c' } },
          })[0].context,
        ).toEqual(leading('job-c'));
      });

      it("sets every key of a batch, per table, and each transaction item's own", () => {
        expect(
          ddb('BatchGetItem', {
            RequestItems: {
              idem: { Keys: [{ id: { S: 'job-a#1' } }, { id: { S: 'job-b#1' } }, { id: { S: 'job-a#1' } }] },
            },
          }),
        ).toEqual([
          { action: 'dynamodb:BatchGetItem', resource: tableArn('idem'), context: leading('job-a#1', 'job-b#1') },
        ]);
        const writes = [
          { PutRequest: { Item: { id: { S: 'job-a#1' } } } },
          { DeleteRequest: { Key: { id: { S: 'job-b#2' } } } },
        ];
        expect(ddb('BatchWriteItem', { RequestItems: { idem: writes } })[0].context).toEqual(
          leading('job-a#1', 'job-b#2'),
        );
        const items = [
          { Put: { TableName: 'idem', Item: { id: { S: 'job-a#1' } } } },
          { ConditionCheck: { TableName: 'ledger', Key: { pk: { S: 'BATCH#job-a' }, sk: { S: 'b' } } } },
        ];
        expect(ddb('TransactWriteItems', { TransactItems: items }).map((p) => p.context)).toEqual([
          leading('job-a#1'),
          leading('BATCH#job-a'),
        ]);
        expect(
          ddb('TransactGetItems', { TransactItems: [{ Get: { TableName: 'idem', Key: { id: { S: 'job-a#3' } } } }] })[0]
            .context,
        ).toEqual(leading('job-a#3'));
      });

      it('sets none for a Scan (it names no partition) or a table whose key schema the plan does not hold', () => {
        expect(ddb('Scan', { TableName: 'idem' })).toEqual([{ action: 'dynamodb:Scan', resource: tableArn('idem') }]);
        expect(ddb('GetItem', { TableName: 'T', Key: { id: { S: 'x' } } })).toEqual([
          { action: 'dynamodb:GetItem', resource: tableArn('T') },
        ]);
      });
    });

    it('authorizes account-wide operations on "*" and PartiQL on the table the statement names', () => {
      expect(ddb('ListTables', {})).toEqual([{ action: 'dynamodb:ListTables', resource: '*' }]);
      expect(ddb('ExecuteStatement', { Statement: 'SELECT * FROM "T"."byDate" WHERE pk = ?' })).toEqual([
        { action: 'dynamodb:PartiQLSelect', resource: `${tableArn('T')}/index/byDate` },
      ]);
      expect(ddb('ExecuteStatement', { Statement: "UPDATE T SET a = 1 WHERE pk = 'x'" })).toEqual([
        { action: 'dynamodb:PartiQLUpdate', resource: tableArn('T') },
      ]);
      expect(
        ddb('ExecuteTransaction', {
          TransactStatements: [{ Statement: 'INSERT INTO "A" VALUE {}' }, { Statement: 'DELETE FROM B WHERE pk = 1' }],
        }),
      ).toEqual([
        { action: 'dynamodb:PartiQLInsert', resource: tableArn('A') },
        { action: 'dynamodb:PartiQLDelete', resource: tableArn('B') },
      ]);
    });

    it('refuses a request without its operation or with a body that is not JSON', () => {
      expect(() => permissions('dynamodb', { method: 'POST', url: '/', headers: {}, body: '{}' })).toThrow(
        new RequestDescriptionError(
          'the dynamodb request has no X-Amz-Target DynamoDB_20120810.<Operation> (got "")',
          'dynamodb',
        ),
      );
      expect(() =>
        permissions('dynamodb', {
          method: 'POST',
          url: '/',
          headers: { 'x-amz-target': 'DynamoDB_20120810.GetItem' },
          body: 'nope',
        }),
      ).toThrow('the dynamodb request body is not a JSON object');
    });
  });

  describe('SQS', () => {
    const sqs = (op: string, body: Record<string, unknown>) => permissions('sqs', json(`AmazonSQS.${op}`, body));
    const work = `http://127.0.0.1:9/${ACCOUNT}/work`;

    it('authorizes on the queue of the QueueUrl, batch operations as their single-message action', () => {
      expect(sqs('SendMessageBatch', { QueueUrl: work, Entries: [] })).toEqual([
        { action: 'sqs:SendMessage', resource: queueArn('work') },
      ]);
      expect(sqs('DeleteMessageBatch', { QueueUrl: work })).toEqual([
        { action: 'sqs:DeleteMessage', resource: queueArn('work') },
      ]);
      expect(sqs('ChangeMessageVisibilityBatch', { QueueUrl: work })).toEqual([
        { action: 'sqs:ChangeMessageVisibility', resource: queueArn('work') },
      ]);
      expect(sqs('GetQueueAttributes', { QueueUrl: work })).toEqual([
        { action: 'sqs:GetQueueAttributes', resource: queueArn('work') },
      ]);
    });

    it('reads the query protocol too: Action and QueueUrl in a form body, or the queue URL as the path', () => {
      const form = {
        method: 'POST',
        url: '/',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `Action=ReceiveMessage&QueueUrl=${encodeURIComponent(work)}`,
      };
      expect(describeRequest('sqs', form, stack)).toEqual({
        service: 'sqs',
        operation: 'ReceiveMessage',
        permissions: [{ action: 'sqs:ReceiveMessage', resource: queueArn('work') }],
      });
      expect(
        permissions('sqs', { method: 'POST', url: `/${ACCOUNT}/dlq`, headers: {}, body: 'Action=PurgeQueue' }),
      ).toEqual([{ action: 'sqs:PurgeQueue', resource: queueArn('dlq') }]);
      expect(() => permissions('sqs', { method: 'POST', url: '/', headers: {}, body: 'QueueUrl=x' })).toThrow(
        'the SQS request names no operation (neither X-Amz-Target nor Action=)',
      );
    });

    it('authorizes GetQueueUrl by QueueName and ListQueues on "*"', () => {
      expect(sqs('GetQueueUrl', { QueueName: 'work' })).toEqual([
        { action: 'sqs:GetQueueUrl', resource: queueArn('work') },
      ]);
      expect(sqs('ListQueues', {})).toEqual([{ action: 'sqs:ListQueues', resource: '*' }]);
    });

    it('authorizes a redrive on the DLQ and on where its messages go (the queues that dead-letter into it, by default)', () => {
      const dlqSide = ['StartMessageMoveTask', 'ReceiveMessage', 'DeleteMessage', 'GetQueueAttributes'].map((a) => ({
        action: `sqs:${a}`,
        resource: queueArn('dlq'),
      }));
      expect(sqs('StartMessageMoveTask', { SourceArn: queueArn('dlq') })).toEqual([
        ...dlqSide,
        { action: 'sqs:SendMessage', resource: queueArn('work') },
      ]);
      expect(sqs('StartMessageMoveTask', { SourceArn: queueArn('dlq'), DestinationArn: queueArn('other') })).toEqual([
        ...dlqSide,
        { action: 'sqs:SendMessage', resource: queueArn('other') },
      ]);
      const handle = Buffer.from(JSON.stringify({ taskId: 't', sourceArn: queueArn('dlq') })).toString('base64');
      expect(sqs('CancelMessageMoveTask', { TaskHandle: handle })).toEqual([
        { action: 'sqs:CancelMessageMoveTask', resource: queueArn('dlq') },
      ]);
    });

    it('adds the KMS permissions SQS uses for the caller on a queue encrypted with a key', () => {
      const sealed = `http://127.0.0.1:9/${ACCOUNT}/sealed`;
      const context = { 'kms:ViaService': 'sqs.us-east-1.amazonaws.com', 'kms:CallerAccount': ACCOUNT };
      expect(sqs('SendMessage', { QueueUrl: sealed })).toEqual([
        { action: 'sqs:SendMessage', resource: queueArn('sealed') },
        { action: 'kms:GenerateDataKey', resource: keyArn('k1'), context },
      ]);
      expect(sqs('ReceiveMessage', { QueueUrl: sealed })).toEqual([
        { action: 'sqs:ReceiveMessage', resource: queueArn('sealed') },
        { action: 'kms:Decrypt', resource: keyArn('k1'), context },
      ]);
      expect(sqs('DeleteMessage', { QueueUrl: sealed })).toEqual([
        { action: 'sqs:DeleteMessage', resource: queueArn('sealed') },
      ]);
    });
  });

  describe('S3', () => {
    const s3 = (method: string, url: string, headers: Record<string, string> = {}, body?: string) =>
      describeRequest('s3', { method, url, headers, body }, stack);

    it('authorizes object reads, writes and deletes on the object ARN, ignoring the SDK x-id', () => {
      expect(s3('GET', '/b/dir/a%20b.json?x-id=GetObject').permissions).toEqual([
        { action: 's3:GetObject', resource: 'arn:aws:s3:::b/dir/a b.json' },
      ]);
      expect(s3('HEAD', '/b/k').permissions).toEqual([{ action: 's3:GetObject', resource: 'arn:aws:s3:::b/k' }]);
      expect(s3('PUT', '/b/k?x-id=PutObject').permissions).toEqual([
        { action: 's3:PutObject', resource: 'arn:aws:s3:::b/k' },
      ]);
      expect(s3('DELETE', '/b/k?x-id=DeleteObject').permissions).toEqual([
        { action: 's3:DeleteObject', resource: 'arn:aws:s3:::b/k' },
      ]);
      expect(s3('GET', '/b/k?versionId=v1').permissions).toEqual([
        { action: 's3:GetObjectVersion', resource: 'arn:aws:s3:::b/k' },
      ]);
      expect(s3('PUT', '/b/k?tagging').permissions).toEqual([
        { action: 's3:PutObjectTagging', resource: 'arn:aws:s3:::b/k' },
      ]);
    });

    it('authorizes a copy on the target, and a read of its source', () => {
      const copy = s3('PUT', '/b/to?x-id=CopyObject', { 'x-amz-copy-source': 'src/from%20here' });
      expect(copy).toEqual({
        service: 's3',
        operation: 'CopyObject',
        permissions: [
          { action: 's3:PutObject', resource: 'arn:aws:s3:::b/to' },
          { action: 's3:GetObject', resource: 'arn:aws:s3:::src/from here' },
        ],
      });
    });

    it('authorizes a multi-object delete as a DeleteObject of each key', () => {
      const body =
        '<Delete><Object><Key>a&amp;b</Key></Object><Object><Key>c</Key><VersionId>v</VersionId></Object></Delete>';
      expect(s3('POST', '/b?delete', {}, body).permissions).toEqual([
        { action: 's3:DeleteObject', resource: 'arn:aws:s3:::b/a&b' },
        { action: 's3:DeleteObjectVersion', resource: 'arn:aws:s3:::b/c' },
      ]);
    });

    it('authorizes bucket operations on the bucket ARN', () => {
      expect(s3('GET', '/b?list-type=2&prefix=x').permissions).toEqual([
        { action: 's3:ListBucket', resource: 'arn:aws:s3:::b' },
      ]);
      expect(s3('HEAD', '/b').permissions).toEqual([{ action: 's3:ListBucket', resource: 'arn:aws:s3:::b' }]);
      expect(s3('PUT', '/b').permissions).toEqual([{ action: 's3:CreateBucket', resource: 'arn:aws:s3:::b' }]);
      expect(s3('GET', '/b?policy').permissions).toEqual([
        { action: 's3:GetBucketPolicy', resource: 'arn:aws:s3:::b' },
      ]);
      expect(s3('GET', '/').permissions).toEqual([{ action: 's3:ListAllMyBuckets', resource: '*' }]);
    });
  });

  describe('Secrets Manager, Lambda, Scheduler', () => {
    const secret = `arn:aws:secretsmanager:us-east-1:${ACCOUNT}:secret:provider/api-key-local0`;

    it("authorizes a secret by name, ARN or partial ARN on the secret's ARN", () => {
      for (const id of [
        'provider/api-key',
        secret,
        `arn:aws:secretsmanager:us-east-1:${ACCOUNT}:secret:provider/api-key`,
      ]) {
        expect(permissions('secretsmanager', json('secretsmanager.GetSecretValue', { SecretId: id }))).toEqual([
          { action: 'secretsmanager:GetSecretValue', resource: secret },
        ]);
      }
      expect(permissions('secretsmanager', json('secretsmanager.ListSecrets', {}))).toEqual([
        { action: 'secretsmanager:ListSecrets', resource: '*' },
      ]);
    });

    it('authorizes Invoke on the function (qualified when asked) and mapping calls on the mapping, naming its function', () => {
      expect(
        permissions('lambda', { method: 'POST', url: '/2015-03-31/functions/producer/invocations', headers: {} }),
      ).toEqual([{ action: 'lambda:InvokeFunction', resource: functionArn('producer') }]);
      expect(
        permissions('lambda', {
          method: 'POST',
          url: `/2015-03-31/functions/${encodeURIComponent(functionArn('producer'))}/invocations?Qualifier=live`,
          headers: {},
        }),
      ).toEqual([{ action: 'lambda:InvokeFunction', resource: `${functionArn('producer')}:live` }]);
      expect(
        permissions('lambda', {
          method: 'GET',
          url: '/2015-03-31/event-source-mappings/?FunctionName=consumer',
          headers: {},
        }),
      ).toEqual([{ action: 'lambda:ListEventSourceMappings', resource: '*' }]);
      expect(
        permissions('lambda', {
          method: 'PUT',
          url: '/2015-03-31/event-source-mappings/local-ConsumerMapping',
          headers: {},
        }),
      ).toEqual([
        {
          action: 'lambda:UpdateEventSourceMapping',
          resource: `arn:aws:lambda:us-east-1:${ACCOUNT}:event-source-mapping:local-ConsumerMapping`,
          context: { 'lambda:FunctionArn': functionArn('consumer') },
        },
      ]);
      expect(() => permissions('lambda', { method: 'GET', url: '/2015-03-31/layers', headers: {} })).toThrow(
        'GET /2015-03-31/layers is no Lambda operation the local gateway knows',
      );
    });

    it('authorizes schedule calls on the schedule in its group, and the role an update passes', () => {
      const arn = `arn:aws:scheduler:us-east-1:${ACCOUNT}:schedule/jobs/nightly`;
      expect(
        permissions('scheduler', { method: 'GET', url: '/schedules/nightly?groupName=jobs', headers: {} }),
      ).toEqual([{ action: 'scheduler:GetSchedule', resource: arn }]);
      expect(permissions('scheduler', { method: 'GET', url: '/schedules?NamePrefix=n', headers: {} })).toEqual([
        { action: 'scheduler:ListSchedules', resource: '*' },
      ]);
      const update = {
        GroupName: 'jobs',
        State: 'DISABLED',
        Target: { Arn: functionArn('producer'), RoleArn: `arn:aws:iam::${ACCOUNT}:role/sched` },
      };
      expect(
        permissions('scheduler', {
          method: 'PUT',
          url: '/schedules/nightly',
          headers: {},
          body: JSON.stringify(update),
        }),
      ).toEqual([
        { action: 'scheduler:UpdateSchedule', resource: arn },
        {
          action: 'iam:PassRole',
          resource: `arn:aws:iam::${ACCOUNT}:role/sched`,
          context: { 'iam:PassedToService': 'scheduler.amazonaws.com' },
        },
      ]);
    });
  });
});

describe('Function: requestNeedsBody', () => {
  it('reads bodies only where the description looks into them', () => {
    expect(requestNeedsBody('s3', 'PUT', '/b/k')).toBe(false);
    expect(requestNeedsBody('s3', 'POST', '/b?delete')).toBe(true);
    expect(requestNeedsBody('lambda', 'POST', '/2015-03-31/functions/f/invocations')).toBe(false);
    expect(requestNeedsBody('dynamodb', 'POST', '/')).toBe(true);
    expect(requestNeedsBody('scheduler', 'GET', '/schedules/x')).toBe(false);
  });
});
