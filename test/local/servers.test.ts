// The embedded SQS server answers queue depths as AWS does: a message in flight counts once (not visible), and its own
// message move task (a DLQ redrive) still moves every visible message.
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
import { LOCAL_CREDENTIALS, startSqs, type RunningServer } from '../../local/servers';
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
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'] }),
    );
    return { visible: Number(a.ApproximateNumberOfMessages), notVisible: Number(a.ApproximateNumberOfMessagesNotVisible), delayed: Number(a.ApproximateNumberOfMessagesDelayed) };
  };

  const fill = async (name: string, bodies: string[]) => {
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name }));
    await sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries: bodies.map((b, i) => ({ Id: String(i), MessageBody: b })) }));
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
    const one = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages'] }));
    expect({ all: all.Attributes?.ApproximateNumberOfMessages, one: one.Attributes }).toEqual({ all: '1', one: { ApproximateNumberOfMessages: '1' } });
  });

  it('starts a move task that moves every visible message while another is in flight', async () => {
    const source = await fill('dead-letters', ['a', 'b', 'c', 'd']);
    const { QueueUrl: target } = await sqs.send(
      new CreateQueueCommand({ QueueName: 'redriven', Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: arn('dead-letters'), maxReceiveCount: 5 }) } }),
    );
    // A peek at the DLQ (ops dlq peek) leaves one message in flight.
    await sqs.send(new ReceiveMessageCommand({ QueueUrl: source, MaxNumberOfMessages: 1, VisibilityTimeout: 60 }));
    await sqs.send(new StartMessageMoveTaskCommand({ SourceArn: arn('dead-letters'), DestinationArn: arn('redriven') }));
    const { Results } = await sqs.send(new ListMessageMoveTasksCommand({ SourceArn: arn('dead-letters') }));
    expect(Results?.[0]).toMatchObject({ ApproximateNumberOfMessagesToMove: 3 });
    // The task moves once a second.
    await waitFor('the move task to finish', async () => (await sqs.send(new ListMessageMoveTasksCommand({ SourceArn: arn('dead-letters') }))).Results?.[0]?.Status === 'COMPLETED', { timeoutMs: 20_000, intervalMs: 100 });
    expect(await depth(target!)).toEqual({ visible: 3, notVisible: 0, delayed: 0 });
    expect(await depth(source)).toEqual({ visible: 0, notVisible: 1, delayed: 0 });
  });
});
