import { join } from 'node:path';
import { CreateQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { failedMessageIds, SqsEventSourceMapping } from '../../local/eventSourceMapping';
import { LocalFunction } from '../../local/lambdaRuntime';
import { RunningServer, startSqs } from '../../local/servers';
import { waitFor } from '../../local/waitFor';

const CODE = join(__dirname, 'fixtures', 'assembly', 'asset.0123abcd');

describe('Function: failedMessageIds', () => {
  const batch = ['a', 'b', 'c'];
  it('fails the whole batch when the invocation failed', () => {
    expect([...failedMessageIds({ ok: false }, batch, true)]).toEqual(batch);
  });
  it('fails only the listed items with ReportBatchItemFailures', () => {
    expect([...failedMessageIds({ ok: true, value: { batchItemFailures: [{ itemIdentifier: 'b' }] } }, batch, true)]).toEqual(['b']);
  });
  it('ignores the response without ReportBatchItemFailures', () => {
    expect([...failedMessageIds({ ok: true, value: { batchItemFailures: [{ itemIdentifier: 'b' }] } }, batch, false)]).toEqual([]);
  });
  it('fails the whole batch on an identifier that is not in the batch', () => {
    expect([...failedMessageIds({ ok: true, value: { batchItemFailures: [{ itemIdentifier: 'z' }] } }, batch, true)]).toEqual(batch);
  });
  it('succeeds the whole batch on an empty or null response', () => {
    expect([...failedMessageIds({ ok: true, value: null }, batch, true)]).toEqual([]);
    expect([...failedMessageIds({ ok: true, value: { batchItemFailures: [] } }, batch, true)]).toEqual([]);
  });
});

describe('Class: SqsEventSourceMapping', () => {
  let server: RunningServer;
  let sqs: SQSClient;
  let queueCount = 0;
  const logs: string[] = [];
  const fns: LocalFunction[] = [];
  const mappings: SqsEventSourceMapping[] = [];

  beforeAll(async () => {
    server = await startSqs();
    sqs = new SQSClient({ endpoint: server.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
  });
  afterEach(async () => {
    await Promise.all(mappings.splice(0).map((m) => m.stop()));
    await Promise.all(fns.splice(0).map((f) => f.close()));
  });
  afterAll(async () => {
    sqs.destroy();
    await server.close();
  });

  async function setup(opts: { maxReceiveCount: number; visibility: number; timeoutSeconds?: number; reserved?: number; batchSize?: number; maximumConcurrency?: number; window?: number }) {
    const n = ++queueCount;
    const dlq = await sqs.send(new CreateQueueCommand({ QueueName: `dlq-${n}` }));
    const dlqArn = `arn:aws:sqs:us-east-1:000000000000:dlq-${n}`;
    const queue = await sqs.send(
      new CreateQueueCommand({
        QueueName: `q-${n}`,
        Attributes: { VisibilityTimeout: String(opts.visibility), RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: opts.maxReceiveCount }) },
      }),
    );
    const fn = new LocalFunction(
      { name: `fn-${n}`, arn: `arn:aws:lambda:us-east-1:000000000000:function:fn-${n}`, handler: 'index.handler', codeDir: CODE, environment: {}, timeoutSeconds: opts.timeoutSeconds ?? 5, reservedConcurrency: opts.reserved ?? 2 },
      { log: (_f, line) => logs.push(line) },
    );
    fns.push(fn);
    const mapping = new SqsEventSourceMapping(
      {
        functionName: fn.spec.name,
        queueUrl: queue.QueueUrl!,
        queueArn: `arn:aws:sqs:us-east-1:000000000000:q-${n}`,
        batchSize: opts.batchSize ?? 10,
        maximumBatchingWindowSeconds: opts.window ?? 0,
        maximumConcurrency: opts.maximumConcurrency,
        reportBatchItemFailures: true,
        region: 'us-east-1',
      },
      { sqs, invoke: (event) => fn.invoke(event), functionConcurrency: fn.concurrencyLimit, log: (l) => logs.push(l), idlePollMs: [20, 100] },
    );
    mappings.push(mapping);
    const send = (bodies: string[]) =>
      sqs.send(new SendMessageBatchCommand({ QueueUrl: queue.QueueUrl!, Entries: bodies.map((b, i) => ({ Id: String(i), MessageBody: b })) }));
    const depth = async (url: string) => {
      const a = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }));
      return Number(a.Attributes!.ApproximateNumberOfMessages) + Number(a.Attributes!.ApproximateNumberOfMessagesNotVisible);
    };
    const dlqBodies = async () => {
      const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq.QueueUrl!, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }));
      return (got.Messages ?? []).map((m) => m.Body).sort();
    };
    return { fn, mapping, send, queueUrl: queue.QueueUrl!, dlqUrl: dlq.QueueUrl!, depth, dlqBodies };
  }

  describe('Method: start', () => {
    it('deletes the successes of a partial batch and redelivers the failure into the DLQ after maxReceiveCount', async () => {
      const t = await setup({ maxReceiveCount: 2, visibility: 1 });
      await t.send(['ok', 'fail', 'ok']);
      t.mapping.start();
      await waitFor('the successes deleted and the failure in the DLQ', async () => (await t.depth(t.queueUrl)) === 0 && (await t.depth(t.dlqUrl)) === 1, { timeoutMs: 10_000, intervalMs: 100 });
      expect(await t.dlqBodies()).toEqual(['fail']);
      const stats = t.mapping.statistics;
      expect(stats.acknowledged).toBe(2);
      // Received once per allowed receive: the first batch, then one redelivery.
      expect(stats.failed).toBe(2);
    });

    it('leaves the whole batch on the queue when the handler throws', async () => {
      const t = await setup({ maxReceiveCount: 1, visibility: 1 });
      await t.send(['ok', 'throw']);
      t.mapping.start();
      await waitFor('the whole batch in the DLQ', async () => (await t.depth(t.dlqUrl)) === 2, { timeoutMs: 10_000, intervalMs: 100 });
      expect(await t.dlqBodies()).toEqual(['ok', 'throw']);
      expect(t.mapping.statistics).toMatchObject({ acknowledged: 0, invocationErrors: 1 });
      expect(logs.some((l) => l.includes('fixture handler threw on purpose'))).toBe(true);
    });

    it('stops an invocation at the function timeout and lets the message become visible again', async () => {
      const t = await setup({ maxReceiveCount: 2, visibility: 1, timeoutSeconds: 1, batchSize: 1 });
      await t.send(['sleep:5000']);
      const started = Date.now();
      t.mapping.start();
      // The move to the DLQ happens on the third receive, which can come before the second invocation's timeout is
      // counted (visibility and timeout are both 1 s), so wait for both.
      await waitFor('the message in the DLQ after two timed-out invocations', async () => (await t.depth(t.dlqUrl)) === 1 && t.mapping.statistics.invocationErrors === 2, {
        timeoutMs: 10_000,
        intervalMs: 100,
      });
      // Two receives, each cut at 1 s: far less than the 10 s the two invocations would have slept.
      expect(Date.now() - started).toBeLessThan(9000);
      expect(t.mapping.statistics.invocationErrors).toBe(2);
      expect(logs.some((l) => l.includes('Task timed out after 1.00 seconds'))).toBe(true);
    });

    it('never runs more than the maximum concurrency at once', async () => {
      const t = await setup({ maxReceiveCount: 5, visibility: 30, reserved: 5, maximumConcurrency: 2, batchSize: 1 });
      for (let i = 0; i < 2; i++) await t.send(Array.from({ length: 6 }, () => 'hold:200'));
      t.mapping.start();
      await waitFor('the queue drained', async () => (await t.depth(t.queueUrl)) === 0, { timeoutMs: 15_000, intervalMs: 100 });
      expect(t.mapping.concurrency).toBe(2);
      expect(t.fn.peakConcurrency).toBe(2);
      expect(t.mapping.statistics.acknowledged).toBe(12);
    });

    it('fills a batch within the batching window', async () => {
      const t = await setup({ maxReceiveCount: 5, visibility: 30, batchSize: 15, window: 1, reserved: 1 });
      await t.send(Array.from({ length: 10 }, () => 'ok'));
      await t.send(Array.from({ length: 5 }, () => 'ok'));
      t.mapping.start();
      await waitFor('the queue drained', async () => (await t.depth(t.queueUrl)) === 0, { timeoutMs: 10_000, intervalMs: 100 });
      expect(t.mapping.statistics).toMatchObject({ invocations: 1, acknowledged: 15 });
    });
  });
});

describe('Class: SqsEventSourceMapping (receive quirks)', () => {
  describe('Method: start', () => {
    it('drops a message that one receive response returns twice', async () => {
      const message = { MessageId: 'm1', ReceiptHandle: 'r1', Body: 'ok', Attributes: { ApproximateReceiveCount: '1', SentTimestamp: '1' } };
      let receives = 0;
      const deleted: string[] = [];
      const sqs = {
        send: async (command: { constructor: { name: string }; input: { Entries?: { ReceiptHandle: string }[] } }) => {
          if (command.constructor.name === 'ReceiveMessageCommand') return { Messages: receives++ === 0 ? [message, { ...message }] : [] };
          deleted.push(...(command.input.Entries ?? []).map((e) => e.ReceiptHandle));
          return { Successful: command.input.Entries };
        },
      } as unknown as SQSClient;
      const batches: number[] = [];
      const mapping = new SqsEventSourceMapping(
        { functionName: 'f', queueUrl: 'http://q', queueArn: 'arn:aws:sqs:us-east-1:000000000000:q', region: 'us-east-1', reportBatchItemFailures: true },
        { sqs, invoke: async (event) => void batches.push(event.Records.length), functionConcurrency: 1, idlePollMs: [10, 20] },
      );
      mapping.start();
      await waitFor('the message deleted', () => deleted.length > 0, { timeoutMs: 2000 });
      await mapping.stop();
      expect(batches).toEqual([1]);
      expect(deleted).toEqual(['r1']);
      expect(mapping.statistics).toMatchObject({ duplicatesDropped: 1, acknowledged: 1 });
    });
  });
});
