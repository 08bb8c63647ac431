import type {
  SendMessageBatchCommand,
  SendMessageBatchCommandOutput,
  SendMessageBatchRequestEntry,
} from '@aws-sdk/client-sqs';
import { resetClients } from '../../../lambda/adapters/clients';
import {
  chunkForBatch,
  mapBounded,
  PublishError,
  SqsPublisher,
  type OutgoingMessage,
} from '../../../lambda/adapters/sqsPublisher';
import { startLocalAws } from '../../support/aws';
import { createQueue, drainQueue } from '../handlers/harness';

const QUEUE = 'http://127.0.0.1/000000000000/jobs';

const messages = (n: number, prefix = 'op'): OutgoingMessage[] =>
  Array.from({ length: n }, (_, i) => ({ operationId: `${prefix}:${i}:2026-11-28`, body: JSON.stringify({ i }) }));

type Reply = (
  entries: SendMessageBatchRequestEntry[],
  call: number,
) => Partial<SendMessageBatchCommandOutput> | Promise<never>;

/** A stand-in SQS client: records each call's entries and answers with `reply`. */
function stubClient(
  reply: Reply = (entries) => ({
    Successful: entries.map((e) => ({ Id: e.Id!, MessageId: `m-${e.Id}`, MD5OfMessageBody: '' })),
  }),
) {
  const calls: SendMessageBatchRequestEntry[][] = [];
  return {
    calls,
    client: {
      send: jest.fn(async (command: SendMessageBatchCommand) => {
        const entries = command.input.Entries ?? [];
        calls.push(entries);
        return reply(entries, calls.length);
      }),
    } as never,
  };
}

const ok = (entries: SendMessageBatchRequestEntry[]) =>
  entries.map((e) => ({ Id: e.Id!, MessageId: `m-${e.Id}`, MD5OfMessageBody: '' }));

describe('Class: SqsPublisher', () => {
  describe('Method: publish', () => {
    it('sends calls of at most 10 entries with index-based entry IDs', async () => {
      const { client, calls } = stubClient();
      const summary = await new SqsPublisher({ client }).publish(QUEUE, messages(23));

      expect(summary).toEqual({ published: 23, calls: 3, retried: 0 });
      expect(calls.map((c) => c.length)).toEqual([10, 10, 3]);
      expect(calls[0].map((e) => e.Id)).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']);
      expect(calls.flat().map((e) => JSON.parse(e.MessageBody!).i)).toEqual(Array.from({ length: 23 }, (_, i) => i));
    });

    it('keeps no more calls in flight than parallelCalls', async () => {
      let inFlight = 0;
      let peak = 0;
      const { client } = stubClient(async (entries) => {
        peak = Math.max(peak, ++inFlight);
        // Not a wait: a call that takes a moment, so calls sent together overlap and peak counts them.
        await new Promise((r) => setTimeout(r, 5));
        inFlight--;
        return { Successful: ok(entries) } as never;
      });
      await new SqsPublisher({ client, parallelCalls: 3 }).publish(QUEUE, messages(95));
      expect(peak).toBe(3);
    });

    it('retries only the entries SQS reports as Failed, after a jittered backoff', async () => {
      const sleeps: number[] = [];
      const { client, calls } = stubClient((entries, call) =>
        call === 1
          ? {
              Successful: ok(entries.filter((e) => e.Id !== '2' && e.Id !== '5')),
              Failed: ['2', '5'].map((Id) => ({ Id, Code: 'InternalError', SenderFault: false })),
            }
          : { Successful: ok(entries) },
      );
      const publisher = new SqsPublisher({
        client,
        sleep: async (ms) => void sleeps.push(ms),
        random: () => 0.5,
        baseDelayMs: 100,
      });

      const summary = await publisher.publish(QUEUE, messages(8));

      expect(summary).toEqual({ published: 8, calls: 2, retried: 2 });
      expect(calls[1].map((e) => JSON.parse(e.MessageBody!).i)).toEqual([2, 5]);
      expect(sleeps).toEqual([50]);
    });

    it('caps the exponential backoff', async () => {
      const sleeps: number[] = [];
      const { client } = stubClient((entries) => ({
        Failed: entries.map((e) => ({ Id: e.Id!, Code: 'InternalError', SenderFault: false })),
      }));
      const publisher = new SqsPublisher({
        client,
        maxAttempts: 6,
        baseDelayMs: 100,
        maxDelayMs: 500,
        sleep: async (ms) => void sleeps.push(ms),
        random: () => 0.999,
      });
      await expect(publisher.publish(QUEUE, messages(1))).rejects.toThrow(PublishError);
      expect(sleeps).toEqual([99, 199, 399, 499, 499]);
    });

    it('throws a PublishError listing the failed operation IDs after the attempt limit', async () => {
      const { client, calls } = stubClient((entries) => ({
        Successful: ok(entries.filter((e) => e.Id !== '1')),
        Failed: entries
          .filter((e) => e.Id === '1')
          .map((e) => ({ Id: e.Id!, Code: 'ServiceUnavailable', Message: 'try later', SenderFault: false })),
      }));
      const publisher = new SqsPublisher({ client, maxAttempts: 3, sleep: async () => undefined });

      const error = await publisher.publish(QUEUE, messages(3)).catch((e: unknown) => e);

      expect(error).toBeInstanceOf(PublishError);
      expect((error as PublishError).message).toBe(`failed to publish 1 of 3 messages to ${QUEUE}: op:1:2026-11-28`);
      expect((error as PublishError).failedOperationIds).toEqual(['op:1:2026-11-28']);
      expect((error as PublishError).failures).toEqual({ 'op:1:2026-11-28': 'ServiceUnavailable: try later' });
      expect((error as PublishError).published).toBe(2);
      expect(calls.map((c) => c.length)).toEqual([3, 1, 1]);
    });

    it('does not retry a sender fault, which would fail the same way again', async () => {
      const { client, calls } = stubClient((entries) => ({
        Failed: entries.map((e) => ({
          Id: e.Id!,
          Code: 'InvalidMessageContents',
          Message: 'bad body',
          SenderFault: true,
        })),
      }));
      await expect(new SqsPublisher({ client }).publish(QUEUE, messages(1))).rejects.toThrow(
        `failed to publish 1 of 1 messages to ${QUEUE}: op:0:2026-11-28`,
      );
      expect(calls).toHaveLength(1);
    });

    it('reports every entry of a call that failed outright as unpublished', async () => {
      const { client } = stubClient(() => Promise.reject(new Error('socket hang up')));
      const error = (await new SqsPublisher({ client })
        .publish(QUEUE, messages(2))
        .catch((e: unknown) => e)) as PublishError;
      expect(error.failures).toEqual({
        'op:0:2026-11-28': 'SendMessageBatch failed: socket hang up',
        'op:1:2026-11-28': 'SendMessageBatch failed: socket hang up',
      });
    });

    it('passes DelaySeconds and string attributes, dropping empty attribute values', async () => {
      const { client, calls } = stubClient();
      await new SqsPublisher({ client }).publish(QUEUE, [
        { operationId: 'op:a', body: '{}', delaySeconds: 900, attributes: { failureReason: 'gone', batchId: '' } },
      ]);
      expect(calls[0][0]).toEqual({
        Id: '0',
        MessageBody: '{}',
        DelaySeconds: 900,
        MessageAttributes: { failureReason: { DataType: 'String', StringValue: 'gone' } },
      });
    });

    it('rejects a delay SQS cannot honour before sending anything', async () => {
      const { client, calls } = stubClient();
      await expect(
        new SqsPublisher({ client }).publish(QUEUE, [{ operationId: 'op:a', body: '{}', delaySeconds: 901 }]),
      ).rejects.toThrow('delaySeconds for op:a must be an integer from 0 to 900, got 901');
      expect(calls).toHaveLength(0);
    });

    it('sends nothing for an empty list', async () => {
      const { client, calls } = stubClient();
      expect(await new SqsPublisher({ client }).publish(QUEUE, [])).toEqual({ published: 0, calls: 0, retried: 0 });
      expect(calls).toHaveLength(0);
    });

    it('publishes to local-aws-sqs through the shared client', async () => {
      const aws = await startLocalAws();
      resetClients();
      try {
        const url = await createQueue('publisher-test');
        const summary = await new SqsPublisher().publish(url, messages(12, 'reconcile:acme'));
        expect(summary.published).toBe(12);
        const received = await drainQueue(url);
        expect(received.map((m) => JSON.parse(m.Body as string).i).sort((a, b) => a - b)).toEqual(
          Array.from({ length: 12 }, (_, i) => i),
        );
      } finally {
        resetClients();
        await aws.stop();
      }
    });
  });

  describe('Method: constructor', () => {
    it('rejects a non-positive attempt limit', () => {
      expect(() => new SqsPublisher({ maxAttempts: 0 })).toThrow('maxAttempts must be a positive integer, got 0');
    });

    it('rejects a backoff ceiling below its first wait before anything is sent, not at the first retry', () => {
      expect(() => new SqsPublisher({ baseDelayMs: 100, maxDelayMs: 50 })).toThrow(
        'invalid backoff: capMs must be at least baseMs (got 50)',
      );
    });
  });
});

describe('Function: chunkForBatch', () => {
  it('also splits when the bodies of one call would exceed the payload ceiling', () => {
    const big = (id: string): OutgoingMessage => ({ operationId: id, body: 'x'.repeat(100) });
    expect(chunkForBatch([big('a'), big('b'), big('c')], 250).map((c) => c.map((m) => m.operationId))).toEqual([
      ['a', 'b'],
      ['c'],
    ]);
  });
});

describe('Function: mapBounded', () => {
  it('keeps the order of the results', async () => {
    expect(
      await mapBounded([30, 10, 20], 2, async (ms) => new Promise<number>((r) => setTimeout(() => r(ms), ms))),
    ).toEqual([30, 10, 20]);
  });
});
