// The SNS API over the template's topics and subscriptions, read-only (ListTopics, GetTopicAttributes,
// ListSubscriptionsByTopic), so an operator tool can ask whether every alarm topic has a confirmed subscription against
// the local stack as it would against AWS. Nothing is published or delivered. Hand-written: the SNS emulators on npm
// deliver messages and bring their own server stacks, and what is needed is three answers from the plan in SNS's query
// protocol (form-encoded Action=..., XML in SNS's namespace, errors as SNS sends them).
// Not behind a local IAM gateway: only operators call it (with the endpoints file's administrator credentials, which a
// gateway passes unchecked anyway), and no function is pointed at it, so no role's request goes unauthorized.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { listenOnLoopback, type RunningServer } from './servers';
import type { PlannedSubscription, PlannedTopic, StackPlan } from './plan';

export const SNS_XML_NAMESPACE = 'http://sns.amazonaws.com/doc/2010-03-31/';
const VERSION = '2010-03-31';
/** What SNS answers per page of ListTopics and ListSubscriptionsByTopic. */
const PAGE_SIZE = 100;
const TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/;
const ACTIONS = ['ListTopics', 'GetTopicAttributes', 'ListSubscriptionsByTopic'] as const;

export interface SnsApiOptions {
  /** The stack's plan, read at every request (the server starts before the template is planned). */
  plan: () => Pick<StackPlan, 'accountId' | 'topics' | 'subscriptions'> | undefined;
}

/** An answer SNS would give as an error: its code, HTTP status and message. */
class SnsError extends Error {
  constructor(
    public readonly code: string,
    public readonly status: number,
    message: string,
    public readonly type: 'Sender' | 'Receiver' = 'Sender',
  ) {
    super(message);
    this.name = code;
  }
}

export async function startSnsApi(options: SnsApiOptions, port = 0): Promise<RunningServer> {
  const server = createServer((req, res) => {
    handle(req, res).catch((error: Error) => {
      const known = error instanceof SnsError ? error : new SnsError('InternalError', 500, error.message, 'Receiver');
      replyError(res, known);
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    // The query protocol takes its parameters from the form body (the SDK's POST) or the query string (a GET).
    const params = new URLSearchParams(new URL(req.url ?? '/', 'http://local').search);
    for (const [k, v] of new URLSearchParams(raw)) params.set(k, v);
    const action = params.get('Action') ?? '';
    const plan = options.plan();
    if (!plan)
      throw new SnsError(
        'InternalError',
        500,
        'the local stack has no plan yet: nothing is deployed to answer from',
        'Receiver',
      );
    switch (action) {
      case 'ListTopics': {
        const { page, next } = paginate(plan.topics, params.get('NextToken'));
        const members = page.map((t) => `<member><TopicArn>${xml(t.arn)}</TopicArn></member>`).join('');
        return reply(res, action, `<Topics>${members}</Topics>${nextToken(next)}`);
      }
      case 'GetTopicAttributes': {
        const topic = topicOf(plan.topics, params.get('TopicArn'));
        const attributes = topicAttributes(topic, plan.accountId, subscriptionsOf(plan.subscriptions, topic));
        const entries = Object.entries(attributes).map(
          ([k, v]) => `<entry><key>${xml(k)}</key><value>${xml(v)}</value></entry>`,
        );
        return reply(res, action, `<Attributes>${entries.join('')}</Attributes>`);
      }
      case 'ListSubscriptionsByTopic': {
        const topic = topicOf(plan.topics, params.get('TopicArn'));
        const { page, next } = paginate(subscriptionsOf(plan.subscriptions, topic), params.get('NextToken'));
        const members = page.map(
          (s) =>
            `<member><TopicArn>${xml(s.topicArn)}</TopicArn><Protocol>${xml(s.protocol)}</Protocol>` +
            `<SubscriptionArn>${xml(s.arn)}</SubscriptionArn><Owner>${xml(plan.accountId)}</Owner>` +
            `${s.endpoint === undefined ? '' : `<Endpoint>${xml(s.endpoint)}</Endpoint>`}</member>`,
        );
        return reply(res, action, `<Subscriptions>${members.join('')}</Subscriptions>${nextToken(next)}`);
      }
      default:
        throw new SnsError(
          'InvalidAction',
          400,
          action
            ? `Could not find operation ${action} for version ${VERSION} (the local SNS API answers ${ACTIONS.join(', ')} only)`
            : `The request names no Action (the local SNS API answers ${ACTIONS.join(', ')})`,
        );
    }
  }

  return listenOnLoopback(server, port);
}

/**
 * A topic's attributes as GetTopicAttributes returns them, for what the template says. Every subscription counts as
 * confirmed: nothing is delivered locally, so no confirmation is ever awaited. Policy and the delivery policies are not
 * kept locally and are left out.
 */
function topicAttributes(
  topic: PlannedTopic,
  accountId: string,
  subscriptions: PlannedSubscription[],
): Record<string, string> {
  return {
    TopicArn: topic.arn,
    Owner: accountId,
    ...(topic.displayName !== undefined ? { DisplayName: topic.displayName } : {}),
    SubscriptionsConfirmed: String(subscriptions.length),
    SubscriptionsPending: '0',
    SubscriptionsDeleted: '0',
    ...(topic.kmsMasterKeyId !== undefined ? { KmsMasterKeyId: topic.kmsMasterKeyId } : {}),
    ...(topic.fifo ? { FifoTopic: 'true' } : {}),
  };
}

/** @throws SnsError InvalidParameter for a missing or malformed ARN, NotFound (404) for a topic the stack does not have */
function topicOf(topics: PlannedTopic[], arn: string | null): PlannedTopic {
  if (!arn || !TOPIC_ARN.test(arn)) throw new SnsError('InvalidParameter', 400, 'Invalid parameter: TopicArn');
  const topic = topics.find((t) => t.arn === arn);
  if (!topic) throw new SnsError('NotFound', 404, 'Topic does not exist');
  return topic;
}

const subscriptionsOf = (subscriptions: PlannedSubscription[], topic: PlannedTopic) =>
  subscriptions.filter((s) => s.topicArn === topic.arn);

/** One page from the offset a NextToken carries. @throws SnsError InvalidParameter for a token this server never gave */
function paginate<T>(items: T[], token: string | null): { page: T[]; next?: string } {
  const start = token === null ? 0 : Number(Buffer.from(token, 'base64url').toString('utf8'));
  if (!Number.isSafeInteger(start) || start < 0 || start > items.length)
    throw new SnsError('InvalidParameter', 400, 'Invalid parameter: NextToken');
  const end = start + PAGE_SIZE;
  return {
    page: items.slice(start, end),
    next: end < items.length ? Buffer.from(String(end), 'utf8').toString('base64url') : undefined,
  };
}

const nextToken = (next: string | undefined) => (next === undefined ? '' : `<NextToken>${next}</NextToken>`);

function xml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

function reply(res: ServerResponse, action: string, result: string): void {
  const requestId = randomUUID();
  res.writeHead(200, { 'content-type': 'text/xml', 'x-amzn-requestid': requestId });
  res.end(
    `<${action}Response xmlns="${SNS_XML_NAMESPACE}"><${action}Result>${result}</${action}Result>` +
      `<ResponseMetadata><RequestId>${requestId}</RequestId></ResponseMetadata></${action}Response>`,
  );
}

function replyError(res: ServerResponse, error: SnsError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const requestId = randomUUID();
  res.writeHead(error.status, { 'content-type': 'text/xml', 'x-amzn-requestid': requestId });
  res.end(
    `<ErrorResponse xmlns="${SNS_XML_NAMESPACE}"><Error><Type>${error.type}</Type><Code>${error.code}</Code>` +
      `<Message>${xml(error.message)}</Message></Error><RequestId>${requestId}</RequestId></ErrorResponse>`,
  );
}
