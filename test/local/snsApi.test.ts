import {
  GetTopicAttributesCommand,
  ListSubscriptionsByTopicCommand,
  ListTopicsCommand,
  NotFoundException,
  InvalidParameterException,
  paginateListTopics,
  PublishCommand,
  SNSClient,
} from '@aws-sdk/client-sns';
import { join } from 'node:path';
import { planStack, type StackPlan } from '../../local/plan';
import { startSnsApi } from '../../local/snsApi';
import { LocalStack } from '../../local/stack';
import { LOCAL_CREDENTIALS, type RunningServer } from '../../local/servers';
import { TemplateError, type CloudFormationTemplate } from '../../local/template';

const ACCOUNT = '000000000000';
const OPTIONS = { stackName: 'Alarms', region: 'us-east-1', accountId: ACCOUNT, sqsEndpoint: 'http://127.0.0.1:9' };
const TOPIC_ARN = `arn:aws:sns:us-east-1:${ACCOUNT}:Alarms-AlarmTopic`;
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}';

/** The alarm topic as lib/monitoring.ts synthesizes it, with the email subscription `alarmEmail` adds when given. */
function template(options: { subscribed: boolean }): CloudFormationTemplate {
  return {
    Resources: {
      AlarmTopicKey: { Type: 'AWS::KMS::Key', Properties: { KeyPolicy: { Version: '2012-10-17', Statement: [] } } },
      AlarmTopic: {
        Type: 'AWS::SNS::Topic',
        Properties: {
          DisplayName: 'Paced jobs dev alarms',
          KmsMasterKeyId: { 'Fn::GetAtt': ['AlarmTopicKey', 'Arn'] },
        },
      },
      AlarmTopicPolicy: {
        Type: 'AWS::SNS::TopicPolicy',
        Properties: {
          Topics: [{ Ref: 'AlarmTopic' }],
          PolicyDocument: {
            Version: '2012-10-17',
            Statement: [
              {
                Effect: 'Allow',
                Principal: { Service: 'cloudwatch.amazonaws.com' },
                Action: 'sns:Publish',
                Resource: { Ref: 'AlarmTopic' },
              },
            ],
          },
        },
      },
      ...(options.subscribed
        ? {
            AlarmTopicOnCall: {
              Type: 'AWS::SNS::Subscription',
              Properties: { TopicArn: { Ref: 'AlarmTopic' }, Protocol: 'email', Endpoint: 'on-call@example.com' },
            },
          }
        : {}),
    },
    Outputs: {
      AlarmTopicArn: { Value: { Ref: 'AlarmTopic' } },
      ...(options.subscribed ? { SubscriptionArn: { Value: { Ref: 'AlarmTopicOnCall' } } } : {}),
    },
  };
}

/** The SNS API over a plan, and the real SDK client pointed at it with the endpoints file's credentials. */
async function serve(
  plan: Pick<StackPlan, 'accountId' | 'topics' | 'subscriptions'>,
): Promise<{ server: RunningServer; sns: SNSClient; close(): Promise<void> }> {
  const server = await startSnsApi({ plan: () => plan });
  const sns = new SNSClient({
    endpoint: server.endpoint,
    region: 'us-east-1',
    credentials: LOCAL_CREDENTIALS,
    maxAttempts: 1,
  });
  return {
    server,
    sns,
    async close() {
      sns.destroy();
      await server.close();
    },
  };
}

describe('Function: planStack (SNS)', () => {
  it('plans the topic and its subscription, the subscription ARN the topic ARN and a stable UUID', () => {
    const plan = planStack(template({ subscribed: true }), OPTIONS);
    expect(plan.topics).toEqual([
      {
        logicalId: 'AlarmTopic',
        name: 'Alarms-AlarmTopic',
        arn: TOPIC_ARN,
        displayName: 'Paced jobs dev alarms',
        kmsMasterKeyId: `arn:aws:kms:us-east-1:${ACCOUNT}:key/local-AlarmTopicKey`,
        fifo: false,
      },
    ]);
    expect(plan.subscriptions).toEqual([
      {
        logicalId: 'AlarmTopicOnCall',
        arn: expect.stringMatching(new RegExp(`^${TOPIC_ARN}:${UUID}$`)),
        topicArn: TOPIC_ARN,
        protocol: 'email',
        endpoint: 'on-call@example.com',
      },
    ]);
    // The Ref of a subscription is its ARN, and the same on every run.
    expect(plan.outputs.SubscriptionArn).toBe(plan.subscriptions[0].arn);
    expect(planStack(template({ subscribed: true }), OPTIONS).subscriptions[0].arn).toBe(plan.subscriptions[0].arn);
    expect(plan.ignored.map((i) => i.type).sort()).toEqual(['AWS::KMS::Key', 'AWS::SNS::TopicPolicy']);
  });

  it('refuses a subscription without a Protocol, as CloudFormation does', () => {
    const bad = template({ subscribed: true });
    delete (bad.Resources.AlarmTopicOnCall.Properties as Record<string, unknown>).Protocol;
    expect(() => planStack(bad, OPTIONS)).toThrow(
      new TemplateError(
        'Properties validation failed for resource AlarmTopicOnCall with message: #: required key [Protocol] not found',
        'AlarmTopicOnCall',
      ),
    );
  });
});

describe('Function: startSnsApi', () => {
  describe('a topic with one email subscription', () => {
    const plan = planStack(template({ subscribed: true }), OPTIONS);
    let api: Awaited<ReturnType<typeof serve>>;
    beforeAll(async () => {
      api = await serve(plan);
    });
    afterAll(async () => {
      await api.close();
    });

    it('lists the topic (ListTopics)', async () => {
      const out = await api.sns.send(new ListTopicsCommand({}));
      expect(out.Topics).toEqual([{ TopicArn: TOPIC_ARN }]);
      expect(out.NextToken).toBeUndefined();
    });

    it('lists its one subscription, confirmed: an ARN, not PendingConfirmation (ListSubscriptionsByTopic)', async () => {
      const out = await api.sns.send(new ListSubscriptionsByTopicCommand({ TopicArn: TOPIC_ARN }));
      expect(out.Subscriptions).toEqual([
        {
          SubscriptionArn: plan.subscriptions[0].arn,
          Owner: ACCOUNT,
          Protocol: 'email',
          Endpoint: 'on-call@example.com',
          TopicArn: TOPIC_ARN,
        },
      ]);
      expect(out.Subscriptions![0].SubscriptionArn).toMatch(new RegExp(`^${TOPIC_ARN}:${UUID}$`));
    });

    it('counts it confirmed and none pending, with the display name (GetTopicAttributes)', async () => {
      const out = await api.sns.send(new GetTopicAttributesCommand({ TopicArn: TOPIC_ARN }));
      expect(out.Attributes).toEqual({
        TopicArn: TOPIC_ARN,
        Owner: ACCOUNT,
        DisplayName: 'Paced jobs dev alarms',
        SubscriptionsConfirmed: '1',
        SubscriptionsPending: '0',
        SubscriptionsDeleted: '0',
        KmsMasterKeyId: `arn:aws:kms:us-east-1:${ACCOUNT}:key/local-AlarmTopicKey`,
      });
    });

    it('answers NotFound with HTTP 404 for a topic the stack does not have, as SNS does', async () => {
      const other = `arn:aws:sns:us-east-1:${ACCOUNT}:not-a-topic-here`;
      for (const command of [
        new GetTopicAttributesCommand({ TopicArn: other }),
        new ListSubscriptionsByTopicCommand({ TopicArn: other }),
      ]) {
        const error = await api.sns.send(command as GetTopicAttributesCommand).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(NotFoundException);
        expect(error).toMatchObject({
          name: 'NotFoundException',
          message: 'Topic does not exist',
          $metadata: { httpStatusCode: 404 },
        });
      }
    });

    it('answers InvalidParameter for a TopicArn that is no topic ARN', async () => {
      const error = await api.sns
        .send(new GetTopicAttributesCommand({ TopicArn: 'AlarmTopic' }))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidParameterException);
      expect(error).toMatchObject({ message: 'Invalid parameter: TopicArn', $metadata: { httpStatusCode: 400 } });
    });

    it('answers InvalidAction with HTTP 400 for an action it does not emulate (nothing is published)', async () => {
      const error = await api.sns
        .send(new PublishCommand({ TopicArn: TOPIC_ARN, Message: 'page' }))
        .catch((e: unknown) => e);
      expect(error).toMatchObject({
        name: 'InvalidAction',
        message:
          'Could not find operation Publish for version 2010-03-31 (the local SNS API answers ListTopics, GetTopicAttributes, ListSubscriptionsByTopic only)',
        $metadata: { httpStatusCode: 400 },
      });
    });

    it('answers a raw query-protocol request with XML in the SNS namespace', async () => {
      const res = await fetch(api.server.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `Action=GetTopicAttributes&Version=2010-03-31&TopicArn=${encodeURIComponent(TOPIC_ARN)}`,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/xml');
      expect(await res.text()).toMatch(
        /^<GetTopicAttributesResponse xmlns="http:\/\/sns\.amazonaws\.com\/doc\/2010-03-31\/"><GetTopicAttributesResult><Attributes><entry><key>TopicArn<\/key>/,
      );
      const missing = await fetch(api.server.endpoint, { method: 'POST', body: 'Version=2010-03-31' });
      expect(missing.status).toBe(400);
      expect(await missing.text()).toContain('<Code>InvalidAction</Code>');
    });
  });

  describe('a topic without a subscription', () => {
    const plan = planStack(template({ subscribed: false }), OPTIONS);
    let api: Awaited<ReturnType<typeof serve>>;
    beforeAll(async () => {
      api = await serve(plan);
    });
    afterAll(async () => {
      await api.close();
    });

    it('lists the topic and no subscription', async () => {
      expect((await api.sns.send(new ListTopicsCommand({}))).Topics).toEqual([{ TopicArn: TOPIC_ARN }]);
      expect((await api.sns.send(new ListSubscriptionsByTopicCommand({ TopicArn: TOPIC_ARN }))).Subscriptions).toEqual(
        [],
      );
    });

    it('counts none confirmed and none pending', async () => {
      const out = await api.sns.send(new GetTopicAttributesCommand({ TopicArn: TOPIC_ARN }));
      expect(out.Attributes).toMatchObject({
        TopicArn: TOPIC_ARN,
        SubscriptionsConfirmed: '0',
        SubscriptionsPending: '0',
      });
    });
  });

  it('pages ListTopics by 100 with NextToken, as SNS does', async () => {
    const topics = Array.from({ length: 150 }, (_, i) => ({
      logicalId: `T${i}`,
      name: `t${i}`,
      arn: `arn:aws:sns:us-east-1:${ACCOUNT}:t${i}`,
      fifo: false,
    }));
    const api = await serve({ accountId: ACCOUNT, topics, subscriptions: [] });
    try {
      const pages: number[] = [];
      const seen: string[] = [];
      for await (const page of paginateListTopics({ client: api.sns }, {})) {
        pages.push(page.Topics!.length);
        seen.push(...page.Topics!.map((t) => t.TopicArn!));
      }
      expect(pages).toEqual([100, 50]);
      expect(seen).toEqual(topics.map((t) => t.arn));
    } finally {
      await api.close();
    }
  });
});

describe('Class: LocalStack (SNS)', () => {
  it("serves the template's topics at endpoints.sns to the SDK with the administrator credentials", async () => {
    const stack = new LocalStack({
      template: template({ subscribed: true }),
      stackName: 'Alarms',
      assemblyDir: join(__dirname, 'fixtures', 'assembly'),
      log: () => undefined,
    });
    await stack.start();
    const sns = new SNSClient(stack.clientConfig('sns'));
    try {
      expect(stack.endpoints.sns).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const topics = (await sns.send(new ListTopicsCommand({}))).Topics!;
      expect(topics).toEqual([{ TopicArn: TOPIC_ARN }]);
      const subscriptions = (await sns.send(new ListSubscriptionsByTopicCommand({ TopicArn: TOPIC_ARN })))
        .Subscriptions!;
      expect(subscriptions.map((s) => [s.Protocol, s.Endpoint, s.SubscriptionArn])).toEqual([
        ['email', 'on-call@example.com', stack.plan.subscriptions[0].arn],
      ]);
    } finally {
      sns.destroy();
      await stack.stop();
    }
  });
});
