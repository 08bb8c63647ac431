// A team's stack as aws-cdk-lib synthesizes it: a `dynamodb.TableV2` (AWS::DynamoDB::GlobalTable, its key schema and
// index on the resource, its read capacity and resource policy on the replica) with a function granted write access on
// it, and resources of the team's the local runtime cannot run (an event bus, a function with its code in a bucket).
// The table is provisioned like a Table, the function's write goes through the IAM gateway on the table's ARN, a read
// it was not granted and a delete the replica's policy denies are refused, and the other resources are left out.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, CfnResource, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { DescribeTableCommand, DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { chooseStack } from '../../local/assembly';
import { LocalStack } from '../../local/stack';
import { loadTemplate } from '../../local/template';

/**
 * Writes one report, tries to read it back (the function is granted the writes only), and to delete another (granted,
 * but the table's resource policy denies it).
 */
const HANDLER = `
const { DynamoDBClient, PutItemCommand, GetItemCommand, DeleteItemCommand } = require('@aws-sdk/client-dynamodb');
const ddb = new DynamoDBClient({});
const outcome = (promise) => promise.then(() => 'ok', (e) => e.name);
exports.handler = async () => ({
  put: await outcome(ddb.send(new PutItemCommand({ TableName: process.env.TABLE, Item: { reportId: { S: 'r-1' }, owner: { S: 'acme' } } }))),
  get: await outcome(ddb.send(new GetItemCommand({ TableName: process.env.TABLE, Key: { reportId: { S: 'r-1' } } }))),
  delete: await outcome(ddb.send(new DeleteItemCommand({ TableName: process.env.TABLE, Key: { reportId: { S: 'r-0' } } }))),
});
`;

describe('AWS::DynamoDB::GlobalTable (dynamodb.TableV2) on the local stack', () => {
  let dir: string;
  let stack: LocalStack;
  let tableArn: string;
  const lines: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'team-stack-'));
    mkdirSync(join(dir, 'writer'));
    writeFileSync(join(dir, 'writer', 'index.js'), HANDLER);
    const app = new App({ outdir: join(dir, 'cdk.out') });
    // Pinned, as a team's stack often is: its template names its account and region, and the local stack runs there.
    const team = new Stack(app, 'TeamStack', { env: { account: '123456789012', region: 'eu-west-1' } });
    const reports = new dynamodb.TableV2(team, 'Reports', {
      partitionKey: { name: 'reportId', type: dynamodb.AttributeType.STRING },
      billing: dynamodb.Billing.provisioned({
        readCapacity: dynamodb.Capacity.fixed(7),
        writeCapacity: dynamodb.Capacity.autoscaled({ minCapacity: 3, maxCapacity: 9 }),
      }),
      globalSecondaryIndexes: [
        {
          indexName: 'byOwner',
          partitionKey: { name: 'owner', type: dynamodb.AttributeType.STRING },
          readCapacity: dynamodb.Capacity.fixed(4),
          writeCapacity: dynamodb.Capacity.autoscaled({ minCapacity: 2, maxCapacity: 6 }),
        },
      ],
      timeToLiveAttribute: 'expiresAt',
      // On the replica, as TableV2 puts it: the local replica's policy is the table's.
      resourcePolicy: new iam.PolicyDocument({
        statements: [
          new iam.PolicyStatement({
            effect: iam.Effect.DENY,
            principals: [new iam.AnyPrincipal()],
            actions: ['dynamodb:DeleteItem'],
            resources: ['*'],
          }),
        ],
      }),
    });
    const writer = new lambda.Function(team, 'Writer', {
      runtime: lambda.Runtime.NODEJS_22_X,
      handler: 'index.handler',
      code: lambda.Code.fromAsset(join(dir, 'writer')),
      environment: { TABLE: reports.tableName, JOB_NAME: 'usage-report' },
    });
    reports.grantWriteData(writer);
    new CfnResource(team, 'Bus', { type: 'AWS::Events::EventBus', properties: { Name: 'team-bus' } });
    // A team's function whose code is in its own bucket, not an asset of the assembly: nothing here can run it.
    new lambda.Function(team, 'Legacy', {
      runtime: lambda.Runtime.NODEJS_22_X,
      handler: 'index.handler',
      code: lambda.Code.fromBucket(s3.Bucket.fromBucketName(team, 'Artifacts', 'team-artifacts'), 'legacy.zip'),
    });
    app.synth();

    const artifact = chooseStack(join(dir, 'cdk.out'));
    expect(artifact.environment).toEqual({ account: '123456789012', region: 'eu-west-1' });
    stack = new LocalStack({
      template: loadTemplate(artifact.templateFile),
      stackName: artifact.stackName,
      assemblyDir: artifact.assemblyDir,
      region: artifact.environment?.region,
      accountId: artifact.environment?.account,
      log: (source, line) => lines.push(`${source}: ${line}`),
    });
    await stack.start();
    tableArn = stack.plan.tables[0].arn;
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("provisions it like a Table: its key schema and index, its name and ARN, its write settings' and local replica's capacity", async () => {
    expect(stack.plan.tables.map((t) => t.logicalId)).toEqual([expect.stringMatching(/^Reports/)]);
    const ddb = new DynamoDBClient(stack.clientConfig('dynamodb'));
    const { Table } = await ddb.send(new DescribeTableCommand({ TableName: stack.plan.tables[0].name }));
    ddb.destroy();
    expect(Table).toMatchObject({ TableStatus: 'ACTIVE', KeySchema: [{ AttributeName: 'reportId', KeyType: 'HASH' }] });
    expect(Table!.ProvisionedThroughput).toMatchObject({ ReadCapacityUnits: 7, WriteCapacityUnits: 3 });
    expect(
      Table!.GlobalSecondaryIndexes!.map((g) => [
        g.IndexName,
        g.ProvisionedThroughput?.ReadCapacityUnits,
        g.ProvisionedThroughput?.WriteCapacityUnits,
      ]),
    ).toEqual([['byOwner', 4, 2]]);
    expect(tableArn).toBe(`arn:aws:dynamodb:eu-west-1:123456789012:table/${stack.plan.tables[0].name}`);
  });

  it("lets the granted function write it through the IAM gateway, and denies, on its ARN, the read it was not granted and the delete its replica's resource policy denies", async () => {
    const writer = stack.plan.functions.find((f) => f.logicalId.startsWith('Writer'))!;
    await expect(stack.runtime.get(writer.name).invoke({})).resolves.toEqual({
      put: 'ok',
      get: 'AccessDeniedException',
      delete: 'AccessDeniedException',
    });
    expect(stack.denials()).toEqual([
      expect.objectContaining({
        action: 'dynamodb:GetItem',
        resource: tableArn,
        roleArn: writer.roleArn,
        enforced: true,
      }),
      expect.objectContaining({
        action: 'dynamodb:DeleteItem',
        resource: tableArn,
        roleArn: writer.roleArn,
        enforced: true,
      }),
    ]);
    const ddb = new DynamoDBClient(stack.clientConfig('dynamodb'));
    const { Item } = await ddb.send(
      new GetItemCommand({ TableName: stack.plan.tables[0].name, Key: { reportId: { S: 'r-1' } } }),
    );
    ddb.destroy();
    expect(Item).toEqual({ reportId: { S: 'r-1' }, owner: { S: 'acme' } });
  });

  it("leaves out the team's resources it cannot run, which no job needs, instead of failing", () => {
    expect(stack.plan.notEmulated).toEqual([
      { logicalId: 'Bus', type: 'AWS::Events::EventBus', reason: 'a type the local runtime does not emulate' },
      {
        logicalId: expect.stringMatching(/^Legacy/),
        type: 'AWS::Lambda::Function',
        reason: 'its code is not a bundled asset in the cloud assembly',
      },
    ]);
    expect(stack.plan.functions.map((f) => f.logicalId)).toEqual([expect.stringMatching(/^Writer/)]);
  });
});
