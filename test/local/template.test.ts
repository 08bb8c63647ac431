import { join } from 'node:path';
import { loadTemplate, resolveValue, type ResolveContext, TemplateError } from '../../local/template';
import { planStack, UnsupportedResourceError } from '../../local/plan';

const ctx: ResolveContext = {
  pseudo: { 'AWS::Region': 'eu-west-1', 'AWS::AccountId': '000000000000' },
  ref: (id) => `ref:${id}`,
  getAtt: (id, attr) => `${id}.${attr}`,
  conditions: { IsProd: false },
};

describe('Function: resolveValue', () => {
  it('resolves Ref, Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select and Fn::Split', () => {
    expect(
      resolveValue(
        {
          a: { Ref: 'Queue' },
          b: { 'Fn::GetAtt': ['Queue', 'Arn'] },
          c: { 'Fn::Join': ['/', ['x', { Ref: 'AWS::Region' }]] },
          d: { 'Fn::Sub': '${AWS::AccountId}-${Queue}-${Queue.Arn}-${!Literal}' },
          e: { 'Fn::Sub': ['${X}!', { X: { Ref: 'Table' } }] },
          f: { 'Fn::Select': [2, { 'Fn::Split': [':', 'a:b:c'] }] },
          g: { 'Fn::If': ['IsProd', 'big', { Ref: 'AWS::NoValue' }] },
        },
        ctx,
      ),
    ).toEqual({
      a: 'ref:Queue',
      b: 'Queue.Arn',
      c: 'x/eu-west-1',
      d: '000000000000-ref:Queue-Queue.Arn-${Literal}',
      e: 'ref:Table!',
      f: 'c',
    });
  });

  it('throws naming the path of an unsupported intrinsic', () => {
    expect(() => resolveValue({ x: [{ 'Fn::ImportValue': 'Shared' }] }, ctx)).toThrow(
      new TemplateError(
        '$.x[0].Fn::ImportValue: intrinsic function Fn::ImportValue is not supported by the local runtime',
        '$.x[0].Fn::ImportValue',
      ),
    );
  });
});

describe('Function: planStack', () => {
  const template = loadTemplate(join(__dirname, 'fixtures', 'template.json'));
  const options = {
    stackName: 'Fixture',
    region: 'eu-west-1',
    accountId: '000000000000',
    sqsEndpoint: 'http://127.0.0.1:9',
  };

  it('plans queues with their redrive policy resolved to the DLQ ARN', () => {
    const plan = planStack(template, options);
    const work = plan.queues.find((q) => q.logicalId === 'WorkQueue')!;
    expect(work).toEqual({
      logicalId: 'WorkQueue',
      name: 'Fixture-WorkQueue',
      url: 'http://127.0.0.1:9/000000000000/Fixture-WorkQueue',
      arn: 'arn:aws:sqs:eu-west-1:000000000000:Fixture-WorkQueue',
      attributes: {
        VisibilityTimeout: '2',
        RedrivePolicy:
          '{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:000000000000:Fixture-WorkDlq","maxReceiveCount":2}',
      },
      deadLetterTargetArn: 'arn:aws:sqs:eu-west-1:000000000000:Fixture-WorkDlq',
      maxReceiveCount: 2,
    });
  });

  it('resolves function environments to local names, URLs and ARNs', () => {
    const plan = planStack(template, options);
    const consumer = plan.functions.find((f) => f.logicalId === 'Consumer')!;
    expect(consumer.environment).toEqual({
      TABLE_NAME: 'items-Fixture',
      SECRET_ARN: 'arn:aws:secretsmanager:eu-west-1:000000000000:secret:fixture/api-key-local0',
      SETTINGS: '{"bucket":"fixture-uploads","region":"eu-west-1","queue":"Fixture-WorkQueue"}',
      FIRST_PART: 'aws',
    });
    expect(consumer).toMatchObject({
      name: 'Fixture-Consumer',
      assetPath: 'asset.0123abcd',
      timeoutSeconds: 1,
      reservedConcurrency: 2,
    });
    expect(plan.mappings).toEqual([
      {
        logicalId: 'ConsumerMapping',
        // Its Ref: the UUID the local mapping runs (and publishes its event counts) under, the same on every run.
        uuid: 'local-ConsumerMapping',
        functionName: 'Fixture-Consumer',
        eventSourceArn: 'arn:aws:sqs:eu-west-1:000000000000:Fixture-WorkQueue',
        batchSize: 5,
        maximumBatchingWindowSeconds: 0,
        maximumConcurrency: 2,
        reportBatchItemFailures: true,
        enabled: true,
      },
    ]);
    expect(plan.schedules[0]).toMatchObject({
      expression: 'cron(0 2 * * ? *)',
      timeZone: 'Europe/London',
      targetArn: 'arn:aws:lambda:eu-west-1:000000000000:function:fixture-producer',
      maximumRetryAttempts: 2,
      deadLetterArn: 'arn:aws:sqs:eu-west-1:000000000000:fixture-schedule-dlq',
    });
    expect(plan.outputs).toEqual({
      QueueUrl: 'http://127.0.0.1:9/000000000000/Fixture-WorkQueue',
      TableName: 'items-Fixture',
    });
  });

  it('plans a layer with its asset and gives each function the ARNs of the layers it lists', () => {
    const withLayer = JSON.parse(JSON.stringify(template)) as typeof template;
    withLayer.Resources.Slim = {
      Type: 'AWS::Lambda::LayerVersion',
      Properties: { Content: { S3Key: 'abc.zip' } },
      Metadata: { 'aws:asset:path': 'asset.abc' },
    };
    const consumer = withLayer.Resources.Consumer as { Properties: Record<string, unknown> };
    consumer.Properties.Layers = [{ Ref: 'Slim' }];
    const plan = planStack(withLayer, options);
    expect(plan.layers).toEqual([
      { logicalId: 'Slim', arn: 'arn:aws:lambda:eu-west-1:000000000000:layer:Fixture-Slim:1', assetPath: 'asset.abc' },
    ]);
    expect(plan.functions.find((f) => f.logicalId === 'Consumer')!.layerArns).toEqual([
      'arn:aws:lambda:eu-west-1:000000000000:layer:Fixture-Slim:1',
    ]);
  });

  it('lists ignored resources without resolving their properties', () => {
    const plan = planStack(template, options);
    expect(plan.ignored.map((i) => `${i.logicalId}:${i.type}`).sort()).toEqual([
      'Alarm:AWS::CloudWatch::Alarm',
      'ConsumerPolicy:AWS::IAM::Policy',
      'ConsumerRole:AWS::IAM::Role',
    ]);
  });

  /** The fixture's Producer as a job's function (JOB_NAME), with `extra` in its environment. */
  const withJob = (extra: Record<string, unknown> = {}) => {
    const t = structuredClone(template);
    const producer = t.Resources.Producer as unknown as {
      Properties: { Environment: { Variables: Record<string, unknown> } };
    };
    Object.assign(producer.Properties.Environment.Variables, { JOB_NAME: 'fixture-job', ...extra });
    return t;
  };

  it('fails naming every resource a job needs that it cannot emulate, and what needs it', () => {
    const bad = withJob({ BUS: { Ref: 'Bus' }, API: { 'Fn::GetAtt': ['Api', 'RootResourceId'] } });
    Object.assign(bad.Resources, { Bus: { Type: 'AWS::Events::EventBus' }, Api: { Type: 'AWS::ApiGateway::RestApi' } });
    expect(() => planStack(bad, options)).toThrow(UnsupportedResourceError);
    expect(() => planStack(bad, options)).toThrow(
      /^the local runtime cannot emulate Bus \(AWS::Events::EventBus, which Producer needs\), Api \(AWS::ApiGateway::RestApi, which Producer needs\); emulated types: AWS::SQS::Queue, /,
    );
  });

  it("also fails on what a job's queue needs: a job's needs are followed from resource to resource", () => {
    const bad = withJob();
    (bad.Resources.WorkQueue.Properties as Record<string, unknown>).KmsMasterKeyId = { Ref: 'Vault' };
    bad.Resources.Vault = { Type: 'AWS::CloudHSM::Cluster' };
    expect(() => planStack(bad, options)).toThrow(
      /^the local runtime cannot emulate Vault \(AWS::CloudHSM::Cluster, which WorkQueue needs\);/,
    );
  });

  it('leaves out, listed with the reason, what it cannot emulate and no job needs, what names those, and an output naming them', () => {
    const team = withJob();
    Object.assign(team.Resources, {
      Db: { Type: 'AWS::RDS::DBCluster', Properties: { Engine: 'aurora-postgresql' } },
      ApiHandler: {
        Type: 'AWS::Lambda::Function',
        Properties: {
          Handler: 'app.handler',
          Runtime: 'nodejs22.x',
          Code: { S3Key: 'api.zip' },
          Environment: { Variables: { DB: { 'Fn::GetAtt': ['Db', 'Endpoint.Address'] } } },
        },
      },
      Report: {
        Type: 'AWS::Lambda::Function',
        Properties: { Handler: 'main.handler', Runtime: 'python3.12', Code: { S3Key: 'report.zip' } },
      },
      ReportStream: {
        Type: 'AWS::Lambda::EventSourceMapping',
        Properties: { EventSourceArn: { 'Fn::GetAtt': ['Items', 'StreamArn'] }, FunctionName: { Ref: 'Report' } },
      },
      Inline: {
        Type: 'AWS::Lambda::Function',
        Properties: {
          Handler: 'index.handler',
          Runtime: 'nodejs22.x',
          Code: { ZipFile: 'exports.handler = async () => 1' },
        },
      },
      Notifier: {
        Type: 'AWS::Lambda::Function',
        Properties: {
          Handler: 'index.handler',
          Runtime: 'nodejs22.x',
          Code: { S3Key: 'notifier.zip' },
          Environment: { Variables: { TOPIC: { 'Fn::ImportValue': 'SharedTopicArn' } } },
        },
      },
      // Granted on the database and on an imported topic: policies are resolved leniently, so neither grant is a reason
      // to leave the role out.
      ApiPolicy: {
        Type: 'AWS::IAM::Policy',
        Properties: {
          Roles: [{ Ref: 'ConsumerRole' }],
          PolicyDocument: {
            Statement: [
              { Effect: 'Allow', Action: 'rds-db:connect', Resource: { 'Fn::GetAtt': ['Db', 'DBClusterArn'] } },
              { Effect: 'Allow', Action: 'sns:Publish', Resource: { 'Fn::ImportValue': 'SharedTopicArn' } },
            ],
          },
        },
      },
    });
    team.Outputs = {
      ...team.Outputs,
      DbEndpoint: { Value: { 'Fn::GetAtt': ['Db', 'Endpoint.Address'] } },
      Zones: { Value: { 'Fn::Join': [',', { 'Fn::GetAZs': '' }] } },
    };
    const plan = planStack(team, options);
    expect(plan.notEmulated).toEqual([
      { logicalId: 'Db', type: 'AWS::RDS::DBCluster', reason: 'a type the local runtime does not emulate' },
      {
        logicalId: 'Report',
        type: 'AWS::Lambda::Function',
        reason: 'runtime python3.12: only Node.js functions run locally',
      },
      {
        logicalId: 'ReportStream',
        type: 'AWS::Lambda::EventSourceMapping',
        reason: 'source AWS::DynamoDB::Table: only SQS sources are emulated',
      },
      {
        logicalId: 'Inline',
        type: 'AWS::Lambda::Function',
        reason: 'inline code (Code.ZipFile): only bundled assets run locally',
      },
      {
        logicalId: 'Notifier',
        type: 'AWS::Lambda::Function',
        reason: 'uses Fn::ImportValue, which the local runtime cannot resolve',
      },
      { logicalId: 'ApiHandler', type: 'AWS::Lambda::Function', reason: 'names Db, which is not emulated' },
      { logicalId: 'Outputs.DbEndpoint', type: 'Output', reason: 'names Db, not emulated' },
      { logicalId: 'Outputs.Zones', type: 'Output', reason: 'uses Fn::GetAZs, which the local runtime cannot resolve' },
    ]);
    expect(plan.functions.map((f) => f.logicalId).sort()).toEqual(['Consumer', 'Producer']);
    expect(plan.mappings.map((m) => m.logicalId)).toEqual(['ConsumerMapping']);
    expect(plan.outputs).not.toHaveProperty('DbEndpoint');
    expect(plan.iam.roles.find((r) => r.logicalId === 'ConsumerRole')!.policies.map((p) => p.name)).toContain(
      'ApiPolicy',
    );
  });

  it("reads a job function's code from its paced-jobs:job-entry Metadata", () => {
    const t = withJob();
    t.Resources.Producer.Metadata = {
      'aws:asset:path': 'asset.producer01',
      'paced-jobs:job-entry': 'jobs/fixture-job/index.ts',
    };
    const plan = planStack(t, options);
    expect(plan.functions.find((f) => f.logicalId === 'Producer')!.jobEntry).toBe('jobs/fixture-job/index.ts');
    expect(plan.functions.find((f) => f.logicalId === 'Consumer')!.jobEntry).toBeUndefined();
  });
});
