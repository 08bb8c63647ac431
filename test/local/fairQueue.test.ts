// The embedded SQS server delivers a standard queue whose messages carry MessageGroupId as an SQS fair queue does
// (local/fairQueue.ts): a noisy tenant's messages wait while quiet tenants' are available, and nothing else changes:
// receive counts, depths, delays, redrives and move tasks, FIFO queues and messages without a group.
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ListMessageMoveTasksCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  SendMessageCommand,
  SQSClient,
  StartMessageMoveTaskCommand,
} from '@aws-sdk/client-sqs';
import { LOCAL_CREDENTIALS, startSqs, type RunningSqs } from '../../local/servers';
import { waitFor } from '../../local/waitFor';

const ACCOUNT = '000000000000';
const arn = (name: string) => `arn:aws:sqs:us-east-1:${ACCOUNT}:${name}`;

/** Bodies `${group}-${i}`, i from `from`; no group for `group` undefined (body `u-${i}`). */
const bodies = (group: string | undefined, count: number, from = 0) =>
  Array.from({ length: count }, (_, i) => `${group ?? 'u'}-${from + i}`);
const groupOf = (body: string) => body.slice(0, body.lastIndexOf('-'));

describe('Fair queues in the embedded SQS server', () => {
  let server: RunningSqs;
  let sqs: SQSClient;
  /** How far the emulation's clock runs ahead of the real one: a test moves it on rather than waiting. */
  let ahead = 0;

  beforeAll(async () => {
    server = await startSqs({ accountId: ACCOUNT, fairQueues: { now: () => Date.now() + ahead } });
    sqs = new SQSClient({ endpoint: server.endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
  });

  afterAll(async () => {
    sqs?.destroy();
    await server?.close();
  });

  const create = async (name: string, attributes: Record<string, string> = {}) =>
    (await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }))).QueueUrl!;

  /** Sends in batches of 10, in order; each body's group is its prefix (none for "u-"). */
  const send = async (url: string, list: string[], extra: Partial<SendMessageBatchRequestEntry> = {}) => {
    for (let i = 0; i < list.length; i += 10) {
      const entries = list.slice(i, i + 10).map((body, j) => ({
        Id: String(j),
        MessageBody: body,
        ...(groupOf(body) === 'u' ? {} : { MessageGroupId: groupOf(body) }),
        ...extra,
      }));
      const { Failed } = await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries }));
      expect(Failed ?? []).toEqual([]);
    }
  };

  const receive = async (url: string, max = 10, visibility = 60): Promise<Message[]> =>
    (
      await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: max,
          WaitTimeSeconds: 0,
          VisibilityTimeout: visibility,
          AttributeNames: ['All'],
        }),
      )
    ).Messages ?? [];

  const remove = async (url: string, messages: Message[]) => {
    for (let i = 0; i < messages.length; i += 10) {
      const chunk = messages.slice(i, i + 10);
      const { Failed } = await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: chunk.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle })),
        }),
      );
      expect(Failed ?? []).toEqual([]);
    }
  };

  const depth = async (url: string) => {
    const { Attributes: a = {} } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    return {
      visible: Number(a.ApproximateNumberOfMessages),
      notVisible: Number(a.ApproximateNumberOfMessagesNotVisible),
      delayed: Number(a.ApproximateNumberOfMessagesDelayed),
    };
  };

  const figures = (name: string) => server.fairQueues().find((q) => q.queueName === name)!;
  const texts = (messages: Message[]) => messages.map((m) => m.Body!);

  it('serves quiet tenants first once a tenant holds 30 in flight, then the noisy one again, each in its order', async () => {
    const url = await create('fair-noisy');
    const quiet = ['q1', 'q2', 'q3', 'q4', 'q5'].flatMap((g) => bodies(g, 10));
    await send(url, [...bodies('noisy', 200), ...quiet]);

    // Nobody is noisy yet: first in, first out, until "noisy" has 30 in flight.
    const first: Message[] = [];
    for (let i = 0; i < 3; i++) first.push(...(await receive(url)));
    expect(texts(first)).toEqual(bodies('noisy', 30));
    expect(figures('fair-noisy')).toMatchObject({ noisy: ['noisy'], inFlight: 30 });
    expect(figures('fair-noisy').tenants.find((t) => t.group === 'noisy')).toMatchObject({
      inFlight: 30,
      available: 170,
      concurrencyShare: 1,
    });

    // Quiet tenants' messages, deleted as they come, until none is visible; then the noisy backlog again.
    const after: string[] = [];
    for (let i = 0; i < 6; i++) {
      const got = await receive(url);
      after.push(...texts(got));
      await remove(
        url,
        got.filter((m) => groupOf(m.Body!) !== 'noisy'),
      );
    }
    expect(after.slice(0, 50)).toEqual(quiet);
    expect(after.slice(50)).toEqual(bodies('noisy', after.length - 50, 30));
    expect(after.length).toBeGreaterThan(50);
    expect(figures('fair-noisy').countMismatches).toBe(0);
  });

  it('changes nothing while no tenant is noisy (fewer than 30 in flight, few deliveries), nor for messages without a group', async () => {
    const url = await create('fair-calm');
    // "a" holds 25 in flight: under 30, so its next messages still come before b's.
    await send(url, [...bodies('a', 25), ...bodies('u', 3), ...bodies('a', 5, 25), ...bodies('b', 5)]);
    const held: Message[] = [];
    for (let i = 0; i < 3; i++) held.push(...(await receive(url)));
    const rest = [...(await receive(url)), ...(await receive(url))];
    expect([...texts(held), ...texts(rest)]).toEqual([
      ...bodies('a', 25),
      ...bodies('u', 3),
      ...bodies('a', 5, 25),
      ...bodies('b', 5),
    ]);
    expect(figures('fair-calm').noisy).toEqual([]);

    // Only messages without a group: each is a tenant of its own, never noisy however many are in flight.
    const plain = await create('fair-plain');
    await send(plain, bodies(undefined, 50));
    const all: Message[] = [];
    for (let i = 0; i < 5; i++) all.push(...(await receive(plain)));
    expect(texts(all)).toEqual(bodies(undefined, 50));
    expect(figures('fair-plain')).toMatchObject({ noisy: [], tenants: [], ungrouped: { inFlight: 50, available: 0 } });
  });

  it('keeps every ApproximateReceiveCount at the number of deliveries, and depths that add up, while it reorders', async () => {
    const url = await create('fair-counts');
    await send(url, [...bodies('noisy', 60), ...bodies('u', 5), ...bodies('q', 15)]);
    // A single SendMessage with a group on a standard queue is accepted too.
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'q-15', MessageGroupId: 'q' }));
    const sent = 81;
    const deliveries = new Map<string, number>();
    const counted = (got: Message[]) => {
      for (const m of got) {
        const n = (deliveries.get(m.Body!) ?? 0) + 1;
        deliveries.set(m.Body!, n);
        expect({ body: m.Body, count: m.Attributes?.ApproximateReceiveCount }).toEqual({
          body: m.Body,
          count: String(n),
        });
        expect(m.Attributes?.MessageGroupId).toBe(groupOf(m.Body!) === 'u' ? undefined : groupOf(m.Body!));
      }
      return got;
    };
    let deleted = 0;
    let held = 0;
    const check = async () =>
      expect(await depth(url)).toEqual({ visible: sent - deleted - held, notVisible: held, delayed: 0 });
    const isNoisy = (m: Message) => groupOf(m.Body!) === 'noisy';

    for (let i = 0; i < 3; i++) held += counted(await receive(url)).length;
    await check();
    // Four quiet ones left to time out (visibility 1 s), to come back as second deliveries.
    expect(texts(counted(await receive(url, 4, 1)))).toEqual(bodies('u', 4));
    held += 4;
    await check();
    const order: string[] = [];
    for (;;) {
      const got = counted(await receive(url));
      order.push(...texts(got));
      const quiet = got.filter((m) => !isNoisy(m));
      await remove(url, quiet);
      deleted += quiet.length;
      held += got.length - quiet.length;
      await check();
      if (got.some(isNoisy)) break;
    }
    expect(order.slice(0, 17)).toEqual(['u-4', ...bodies('q', 16)]);
    expect(order.slice(17)).toEqual(bodies('noisy', order.length - 17, 30));

    await waitFor(
      'the timed-out messages to be visible again',
      async () => (await depth(url)).notVisible === held - 4 || undefined,
      { timeoutMs: 5_000, intervalMs: 50 },
    );
    held -= 4;
    // Quiet again (the noisy tenant still holds over 30): they come before its backlog.
    const again = counted(await receive(url, 4));
    expect(texts(again).sort()).toEqual(bodies('u', 4));
    expect(again.every((m) => m.Attributes?.ApproximateReceiveCount === '2')).toBe(true);
    await remove(url, again);
    deleted += 4;
    await check();

    // The rest of the noisy backlog, skipped by many walks, was never counted as received.
    for (let got = await receive(url); got.length; got = await receive(url)) held += counted(got).length;
    expect(deliveries.size).toBe(sent);
    expect([...deliveries.values()].reduce((a, b) => a + b, 0)).toBe(sent + 4);
    expect({ deleted, held }).toEqual({ deleted: 21, held: 60 });
    await check();
    expect(figures('fair-counts').countMismatches).toBe(0);
  });

  it("never returns a quiet message before its delay (per message or the queue's), and serves it first once due", async () => {
    const url = await create('fair-delay', { DelaySeconds: '1' });
    // Due at once (a message's own DelaySeconds 0 overrides the queue's): only the quiet ones below wait out delays.
    await send(url, bodies('noisy', 60), { DelaySeconds: 0 });
    expect(await depth(url)).toMatchObject({ delayed: 0 });
    for (let i = 0; i < 3; i++) await receive(url);
    expect(figures('fair-delay').noisy).toEqual(['noisy']);

    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'q-0', MessageGroupId: 'q' })); // the queue's 1 s
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'r-0', MessageGroupId: 'r', DelaySeconds: 2 }));
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 's-0', MessageGroupId: 's', DelaySeconds: 0 }));
    expect(await depth(url)).toMatchObject({ delayed: 2 }); // s is due at once
    // Only s is due: it comes first; q and r are not there, and the noisy backlog is not held back for them (the rest
    // of the batch is noisy, when the library's receive walks its messages again before it answers).
    const now = texts(await receive(url));
    expect(now[0]).toBe('s-0');
    expect(now.slice(1)).toEqual(bodies('noisy', now.length - 1, 30));
    expect(texts(await receive(url, 1))).toEqual([`noisy-${30 + now.length - 1}`]);

    await waitFor('q to be due', async () => (await depth(url)).delayed === 1 || undefined, {
      timeoutMs: 5_000,
      intervalMs: 20,
    });
    expect(texts(await receive(url, 1))).toEqual(['q-0']);
    await waitFor('r to be due', async () => (await depth(url)).delayed === 0 || undefined, {
      timeoutMs: 5_000,
      intervalMs: 20,
    });
    expect(texts(await receive(url, 1))).toEqual(['r-0']);
  });

  it('serves the noisy tenant with the fewest in flight first when several are noisy', async () => {
    const url = await create('fair-several');
    await send(url, bodies('a', 60));
    for (let i = 0; i < 4; i++) await receive(url); // a: 40 in flight (noisy from 30, but no one else waits)
    await send(url, [...bodies('b', 60), ...bodies('q', 5)]);
    for (let i = 0; i < 3; i++) expect(texts(await receive(url)).every((b) => groupOf(b) === 'b')).toBe(true);
    expect(figures('fair-several').noisy).toEqual(['b', 'a']); // b 30 in flight, a 40

    expect(texts(await receive(url, 5))).toEqual(bodies('q', 5));
    // No quiet message left: b (30 in flight) before a (40), until b has as many.
    const next = [...(await receive(url, 5)), ...(await receive(url, 5))];
    expect(texts(next)).toEqual(bodies('b', 10, 30));
    expect(figures('fair-several').countMismatches).toBe(0);
  });

  it('counts processing time: a tenant holding few messages long is noisy once the queue has had 30 deliveries', async () => {
    const url = await create('fair-slow');
    await send(url, [
      ...bodies('slow', 5),
      ...bodies('f1', 15),
      ...bodies('f2', 15),
      ...bodies('slow', 5, 5),
      ...['f3', 'f4', 'f5'].flatMap((g) => bodies(g, 4)),
    ]);
    expect(texts(await receive(url, 5))).toEqual(bodies('slow', 5)); // held: a slow consumer
    ahead += 800; // 0.8 s of it holding them
    for (let i = 0; i < 3; i++) {
      const got = await receive(url);
      expect(got.every((m) => /^f[12]$/.test(groupOf(m.Body!)))).toBe(true);
      await remove(url, got);
    }
    const slow = figures('fair-slow').tenants.find((t) => t.group === 'slow')!;
    expect(slow.inFlight).toBe(5);
    expect(slow.processingShare).toBeGreaterThan(0.5);
    expect(figures('fair-slow').noisy).toEqual(['slow']);
    // slow-5..9 come before f3..f5 in the queue, yet wait.
    expect(texts(await receive(url))).toEqual(['f3', 'f4', 'f5'].flatMap((g) => bodies(g, 4)).slice(0, 10));
  });

  it('leaves FIFO queues alone: their MessageGroupId is ordering, not tenancy', async () => {
    const url = await create('fair-order.fifo', { FifoQueue: 'true', ContentBasedDeduplication: 'true' });
    await send(url, [...bodies('noisy', 40), ...bodies('q', 5)]);
    const got: Message[] = [];
    for (let i = 0; i < 4; i++) got.push(...(await receive(url)));
    expect(texts(got)).toEqual(bodies('noisy', 40));
    expect(server.fairQueues().map((q) => q.queueName)).not.toContain('fair-order.fifo');
  });

  it('redrives to the DLQ and moves everything back with a message move task, groups intact', async () => {
    const dlq = await create('fair-dlq');
    const source = await create('fair-source', {
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: arn('fair-dlq'), maxReceiveCount: 1 }),
    });
    const list = [...bodies('noisy', 35), ...bodies('u', 2), ...bodies('q', 5)];
    await send(source, list);
    const taken: Message[] = [];
    for (let i = 0; i < 6; i++) taken.push(...(await receive(source, 10, 1)));
    expect(taken).toHaveLength(42);
    // Each times out once: maxReceiveCount 1 sends it to the DLQ, and the emulation sees it leave.
    await waitFor('the redrive to the DLQ', async () => (await depth(dlq)).visible === 42 || undefined, {
      timeoutMs: 5_000,
      intervalMs: 50,
    });
    expect(await depth(source)).toEqual({ visible: 0, notVisible: 0, delayed: 0 });
    expect(figures('fair-source')).toMatchObject({ inFlight: 0, noisy: [] });
    expect(figures('fair-source').tenants.every((t) => t.available + t.inFlight + t.delayed === 0)).toBe(true);

    await sqs.send(new StartMessageMoveTaskCommand({ SourceArn: arn('fair-dlq') }));
    await waitFor(
      'the move task to finish',
      async () =>
        (await sqs.send(new ListMessageMoveTasksCommand({ SourceArn: arn('fair-dlq') }))).Results?.[0]?.Status ===
          'COMPLETED' || undefined,
      {
        timeoutMs: 20_000,
        intervalMs: 100,
      },
    );
    expect(
      (await sqs.send(new ListMessageMoveTasksCommand({ SourceArn: arn('fair-dlq') }))).Results?.[0],
    ).toMatchObject({ ApproximateNumberOfMessagesMoved: 42 });
    expect(await depth(dlq)).toEqual({ visible: 0, notVisible: 0, delayed: 0 });
    expect(await depth(source)).toEqual({ visible: 42, notVisible: 0, delayed: 0 });
    expect(figures('fair-dlq')).toMatchObject({ inFlight: 0, ungrouped: { available: 0, delayed: 0, inFlight: 0 } });
    expect(figures('fair-dlq').tenants.every((t) => t.available + t.inFlight + t.delayed === 0)).toBe(true);

    const back: Message[] = [];
    for (let i = 0; i < 6; i++) back.push(...(await receive(source)));
    expect(texts(back).sort()).toEqual([...list].sort());
    expect(
      back.every((m) => m.Attributes?.MessageGroupId === (groupOf(m.Body!) === 'u' ? undefined : groupOf(m.Body!))),
    ).toBe(true);
  });
});

describe('Fair queues: a tenant that stops sending', () => {
  it('is quiet again after the idle time (AWS: 5 minutes; 1 s here), and the queue is first in, first out again', async () => {
    // The emulation's clock stands still until the test moves it: the noisy tenant is noisy for as long as the test
    // needs, however slow the machine, and idle exactly when the clock says so.
    let now = Date.now();
    const server = await startSqs({ accountId: ACCOUNT, fairQueues: { quietAfterIdleMs: 1_000, now: () => now } });
    const sqs = new SQSClient({ endpoint: server.endpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
    try {
      const { QueueUrl: url } = await sqs.send(new CreateQueueCommand({ QueueName: 'idle' }));
      const entries = (list: string[]) =>
        list.map((b, i) => ({ Id: String(i), MessageBody: b, MessageGroupId: groupOf(b) }));
      for (let i = 0; i < 5; i++)
        await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries(bodies('noisy', 10, i * 10)) }));
      await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries(bodies('q', 10)) }));
      const get = async (max: number) =>
        (
          (
            await sqs.send(
              new ReceiveMessageCommand({
                QueueUrl: url,
                MaxNumberOfMessages: max,
                WaitTimeSeconds: 0,
                VisibilityTimeout: 60,
              }),
            )
          ).Messages ?? []
        ).map((m) => m.Body!);
      for (let i = 0; i < 3; i++) await get(10);
      // Within the idle time of its last send: noisiness, not the idle rule, decides what follows.
      now += 999;
      expect(server.fairQueues()[0].noisy).toEqual(['noisy']);
      expect(await get(5)).toEqual(bodies('q', 5));
      now += 101;
      expect(server.fairQueues()[0].noisy).toEqual([]);
      expect(await get(5)).toEqual(bodies('noisy', 5, 30));
    } finally {
      sqs.destroy();
      await server.close();
    }
  });
});
