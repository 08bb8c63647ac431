// A team's stack as aws-cdk-lib synthesizes it: a `dynamodb.TableV2` (AWS::DynamoDB::GlobalTable, its key schema and
// index on the resource, its settings on the replica) with a function granted write access on it, and a resource of the
// team's the local runtime does not emulate. The table is provisioned like a Table, the function's write goes through
// the IAM gateway on the table's ARN, a read it was not granted is denied, and the other resource is left out.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, CfnResource, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DescribeTableCommand, DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { chooseStack } from '../../local/assembly';
import { LocalStack } from '../../local/stack';
import { loadTemplate } from '../../local/template';

/** Writes one report, then tries to read it back: the function is granted the write only. */
const HANDLER = `
const { DynamoDBClient, PutItemCommand, GetItemCommand } = require('@aws-sdk/client-dynamodb');
const ddb = new DynamoDBClient({});
const outcome = (promise) => promise.then(() => 'ok', (e) => e.name);
exports.handler = async () => ({
  put: await outcome(ddb.send(new PutItemCommand({ TableName: process.env.TABLE, Item: { reportId: { S: 'r-1' }, owner: { S: 'acme' } } }))),
  get: await outcome(ddb.send(new GetItemCommand({ TableName: process.env.TABLE, Key: { reportId: { S: 'r-1' } } }))),
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
    const team = new Stack(app, 'TeamStack');
    const reports = new dynamodb.TableV2(team, 'Reports', {
      partitionKey: { name: 'reportId', type: dynamodb.AttributeType.STRING },
      globalSecondaryIndexes: [{ indexName: 'byOwner', partitionKey: { name: 'owner', type: dynamodb.AttributeType.STRING } }],
      timeToLiveAttribute: 'expiresAt',
    });
    const writer = new lambda.Function(team, 'Writer', {
      runtime: lambda.Runtime.NODEJS_22_X,
      handler: 'index.handler',
      code: lambda.Code.fromAsset(join(dir, 'writer')),
      environment: { TABLE: reports.tableName, JOB_NAME: 'usage-report' },
    });
    reports.grantWriteData(writer);
    new CfnResource(team, 'Bus', { type: 'AWS::Events::EventBus', properties: { Name: 'team-bus' } });
    app.synth();

    const artifact = chooseStack(join(dir, 'cdk.out'));
    stack = new LocalStack({ template: loadTemplate(artifact.templateFile), stackName: artifact.stackName, assemblyDir: artifact.assemblyDir, log: (source, line) => lines.push(`${source}: ${line}`) });
    await stack.start();
    tableArn = stack.plan.tables[0].arn;
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('provisions it like a Table: its key schema and index, its name and ARN', async () => {
    expect(stack.plan.tables.map((t) => t.logicalId)).toEqual([expect.stringMatching(/^Reports/)]);
    const ddb = new DynamoDBClient(stack.clientConfig('dynamodb'));
    const { Table } = await ddb.send(new DescribeTableCommand({ TableName: stack.plan.tables[0].name }));
    ddb.destroy();
    expect(Table).toMatchObject({ TableStatus: 'ACTIVE', KeySchema: [{ AttributeName: 'reportId', KeyType: 'HASH' }] });
    expect(Table!.GlobalSecondaryIndexes!.map((g) => g.IndexName)).toEqual(['byOwner']);
    expect(tableArn).toBe(`arn:aws:dynamodb:us-east-1:000000000000:table/${stack.plan.tables[0].name}`);
  });

  it('lets the granted function write it through the IAM gateway, and denies the read it was not granted, on the ARN', async () => {
    const writer = stack.plan.functions.find((f) => f.logicalId.startsWith('Writer'))!;
    await expect(stack.runtime.get(writer.name).invoke({})).resolves.toEqual({ put: 'ok', get: 'AccessDeniedException' });
    expect(stack.denials()).toEqual([expect.objectContaining({ action: 'dynamodb:GetItem', resource: tableArn, roleArn: writer.roleArn, enforced: true })]);
    const ddb = new DynamoDBClient(stack.clientConfig('dynamodb'));
    const { Item } = await ddb.send(new GetItemCommand({ TableName: stack.plan.tables[0].name, Key: { reportId: { S: 'r-1' } } }));
    ddb.destroy();
    expect(Item).toEqual({ reportId: { S: 'r-1' }, owner: { S: 'acme' } });
  });

  it("leaves out the team's resource it does not emulate, which no job needs, instead of failing", () => {
    expect(stack.plan.notEmulated).toEqual([{ logicalId: 'Bus', type: 'AWS::Events::EventBus', reason: 'a type the local runtime does not emulate' }]);
  });
});
