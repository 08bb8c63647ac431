import { join } from 'node:path';
import { loadTemplate, resolveValue, ResolveContext, TemplateError } from '../../local/template';
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
    ).toEqual({ a: 'ref:Queue', b: 'Queue.Arn', c: 'x/eu-west-1', d: '000000000000-ref:Queue-Queue.Arn-${Literal}', e: 'ref:Table!', f: 'c' });
  });

  it('throws naming the path of an unsupported intrinsic', () => {
    expect(() => resolveValue({ x: [{ 'Fn::ImportValue': 'Shared' }] }, ctx)).toThrow(
      new TemplateError('$.x[0].Fn::ImportValue: intrinsic function Fn::ImportValue is not supported by the local runtime', '$.x[0].Fn::ImportValue'),
    );
  });
});

describe('Function: planStack', () => {
  const template = loadTemplate(join(__dirname, 'fixtures', 'template.json'));
  const options = { stackName: 'Fixture', region: 'eu-west-1', accountId: '000000000000', sqsEndpoint: 'http://127.0.0.1:9' };

  it('plans queues with their redrive policy resolved to the DLQ ARN', () => {
    const plan = planStack(template, options);
    const work = plan.queues.find((q) => q.logicalId === 'WorkQueue')!;
    expect(work).toEqual({
      logicalId: 'WorkQueue',
      name: 'Fixture-WorkQueue',
      url: 'http://127.0.0.1:9/000000000000/Fixture-WorkQueue',
      arn: 'arn:aws:sqs:eu-west-1:000000000000:Fixture-WorkQueue',
      attributes: { VisibilityTimeout: '2', RedrivePolicy: '{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:000000000000:Fixture-WorkDlq","maxReceiveCount":2}' },
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
    expect(consumer).toMatchObject({ name: 'Fixture-Consumer', assetPath: 'asset.0123abcd', timeoutSeconds: 1, reservedConcurrency: 2 });
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
    expect(plan.outputs).toEqual({ QueueUrl: 'http://127.0.0.1:9/000000000000/Fixture-WorkQueue', TableName: 'items-Fixture' });
  });

  it('plans a layer with its asset and gives each function the ARNs of the layers it lists', () => {
    const withLayer = JSON.parse(JSON.stringify(template)) as typeof template;
    withLayer.Resources.Slim = { Type: 'AWS::Lambda::LayerVersion', Properties: { Content: { S3Key: 'abc.zip' } }, Metadata: { 'aws:asset:path': 'asset.abc' } };
    const consumer = withLayer.Resources.Consumer as { Properties: Record<string, unknown> };
    consumer.Properties.Layers = [{ Ref: 'Slim' }];
    const plan = planStack(withLayer, options);
    expect(plan.layers).toEqual([{ logicalId: 'Slim', arn: 'arn:aws:lambda:eu-west-1:000000000000:layer:Fixture-Slim:1', assetPath: 'asset.abc' }]);
    expect(plan.functions.find((f) => f.logicalId === 'Consumer')!.layerArns).toEqual(['arn:aws:lambda:eu-west-1:000000000000:layer:Fixture-Slim:1']);
  });

  it('lists ignored resources without resolving their properties', () => {
    const plan = planStack(template, options);
    expect(plan.ignored.map((i) => `${i.logicalId}:${i.type}`).sort()).toEqual(['Alarm:AWS::CloudWatch::Alarm', 'ConsumerPolicy:AWS::IAM::Policy', 'ConsumerRole:AWS::IAM::Role']);
  });

  it('fails naming every resource it cannot emulate', () => {
    const bad = { Resources: { ...template.Resources, Bus: { Type: 'AWS::Events::EventBus' }, Api: { Type: 'AWS::ApiGateway::RestApi' } } };
    expect(() => planStack(bad, options)).toThrow(UnsupportedResourceError);
    expect(() => planStack(bad, options)).toThrow(/^the local runtime cannot emulate Bus \(AWS::Events::EventBus\), Api \(AWS::ApiGateway::RestApi\); emulated types: AWS::SQS::Queue, /);
  });
});
