import { join } from 'node:path';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import {
  EVENT_COUNT_METRICS,
  failedMessageIds,
  SQS_SCALING,
  SqsEventSourceMapping,
  SYNC_INVOCATION_PAYLOAD_LIMIT_BYTES,
} from '../../local/eventSourceMapping';
import type { MetricSample } from '../../local/metricsTap';
import { LocalFunction } from '../../local/lambdaRuntime';
import { type RunningServer, startSqs } from '../../local/servers';
import { holdsFor, waitFor } from '../../local/waitFor';

const CODE = join(__dirname, 'fixtures', 'assembly', 'asset.0123abcd');

describe('Function: failedMessageIds', () => {
  const batch = ['a', 'b', 'c'];
  it('fails the whole batch when the invocation failed', () => {
    expect([...failedMessageIds({ ok: false }, batch, true)]).toEqual(batch);
  });
  it('fails only the listed items with ReportBatchItemFailures', () => {
    expect([
      ...failedMessageIds({ ok: true, value: { batchItemFailures: [{ itemIdentifier: 'b' }] } }, batch, true),
    ]).toEqual(['b']);
  });
  it('ignores the response without ReportBatchItemFailures', () => {
    expect([
      ...failedMessageIds({ ok: true, value: { batchItemFailures: [{ itemIdentifier: 'b' }] } }, batch, false),
    ]).toEqual([]);
  });
  it('fails the whole batch on an identifier that is not in the batch', () => {
    expect([
      ...failedMessageIds({ ok: true, value: { batchItemFailures: [{ itemIdentifier: 'z' }] } }, batch, true),
    ]).toEqual(batch);
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
    sqs = new SQSClient({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    });
  });
  afterEach(async () => {
    await Promise.all(mappings.splice(0).map((m) => m.stop()));
    await Promise.all(fns.splice(0).map((f) => f.close()));
  });
  afterAll(async () => {
    sqs.destroy();
    await server.close();
  });

  async function setup(opts: {
    maxReceiveCount: number;
    visibility: number;
    timeoutSeconds?: number;
    reserved?: number;
    batchSize?: number;
    maximumConcurrency?: number;
    window?: number;
    onMetric?: (sample: MetricSample) => void;
  }) {
    const n = ++queueCount;
    const dlq = await sqs.send(new CreateQueueCommand({ QueueName: `dlq-${n}` }));
    const dlqArn = `arn:aws:sqs:us-east-1:000000000000:dlq-${n}`;
    const queue = await sqs.send(
      new CreateQueueCommand({
        QueueName: `q-${n}`,
        Attributes: {
          VisibilityTimeout: String(opts.visibility),
          RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: opts.maxReceiveCount }),
        },
      }),
    );
    const fn = new LocalFunction(
      {
        name: `fn-${n}`,
        arn: `arn:aws:lambda:us-east-1:000000000000:function:fn-${n}`,
        handler: 'index.handler',
        codeDir: CODE,
        environment: {},
        timeoutSeconds: opts.timeoutSeconds ?? 5,
        reservedConcurrency: opts.reserved ?? 2,
      },
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
      {
        sqs,
        invoke: (event) => fn.invoke(event),
        functionConcurrency: fn.concurrencyLimit,
        log: (l) => logs.push(l),
        idlePollMs: [20, 100],
        onMetric: opts.onMetric,
      },
    );
    mappings.push(mapping);
    const send = (bodies: string[]) =>
      sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: queue.QueueUrl!,
          Entries: bodies.map((b, i) => ({ Id: String(i), MessageBody: b })),
        }),
      );
    const depth = async (url: string) => {
      const a = await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      );
      return (
        Number(a.Attributes!.ApproximateNumberOfMessages) + Number(a.Attributes!.ApproximateNumberOfMessagesNotVisible)
      );
    };
    const dlqBodies = async () => {
      const got = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: dlq.QueueUrl!, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
      );
      return (got.Messages ?? []).map((m) => m.Body).sort();
    };
    return { fn, mapping, send, queueUrl: queue.QueueUrl!, dlqUrl: dlq.QueueUrl!, depth, dlqBodies };
  }

  describe('Method: start', () => {
    it('deletes the successes of a partial batch and redelivers the failure into the DLQ after maxReceiveCount', async () => {
      const t = await setup({ maxReceiveCount: 2, visibility: 1 });
      await t.send(['ok', 'fail', 'ok']);
      t.mapping.start();
      await waitFor(
        'the successes deleted and the failure in the DLQ',
        async () => (await t.depth(t.queueUrl)) === 0 && (await t.depth(t.dlqUrl)) === 1,
        { timeoutMs: 10_000, intervalMs: 100 },
      );
      expect(await t.dlqBodies()).toEqual(['fail']);
      const stats = t.mapping.statistics;
      expect(stats.acknowledged).toBe(2);
      // Received once per allowed receive: the first batch, then one redelivery.
      expect(stats.failed).toBe(2);
    });

    it('publishes its event counts per UUID: polled and invoked, failed to invoke (listed or thrown), deleted; never dropped', async () => {
      const samples: MetricSample[] = [];
      const t = await setup({ maxReceiveCount: 2, visibility: 1, onMetric: (s) => samples.push(s) });
      await t.send(['ok', 'fail', 'ok']);
      t.mapping.start();
      await waitFor(
        'the successes deleted and the failure in the DLQ',
        async () => (await t.depth(t.queueUrl)) === 0 && (await t.depth(t.dlqUrl)) === 1,
        { timeoutMs: 10_000, intervalMs: 100 },
      );
      const thrower = await setup({ maxReceiveCount: 1, visibility: 1, onMetric: (s) => samples.push(s) });
      await thrower.send(['ok', 'throw']);
      thrower.mapping.start();
      await waitFor('the thrown batch in the DLQ', async () => (await thrower.depth(thrower.dlqUrl)) === 2, {
        timeoutMs: 10_000,
        intervalMs: 100,
      });
      const total = (uuid: string) =>
        Object.fromEntries(
          Object.values(EVENT_COUNT_METRICS).map((name) => [
            name,
            samples
              .filter((s) => s.metricName === name && s.dimensions.EventSourceMappingUUID === uuid)
              .reduce((sum, s) => sum + s.value, 0),
          ]),
        );
      // The failure was received twice (maxReceiveCount 2): once with the batch, once alone.
      expect(total(t.mapping.uuid)).toEqual({
        PolledEventCount: 4,
        InvokedEventCount: 4,
        FailedInvokeEventCount: 2,
        DeletedEventCount: 2,
      });
      // A thrown invocation fails its whole batch, and nothing is deleted.
      expect(total(thrower.mapping.uuid)).toEqual({
        PolledEventCount: 2,
        InvokedEventCount: 2,
        FailedInvokeEventCount: 2,
        DeletedEventCount: 0,
      });
      expect(
        samples.every(
          (s) =>
            s.namespace === 'AWS/Lambda' &&
            Object.keys(s.dimensions).join() === 'EventSourceMappingUUID' &&
            s.value > 0,
        ),
      ).toBe(true);
      expect(samples.filter((s) => s.metricName === 'DroppedEventCount')).toEqual([]);
    });

    it('leaves the whole batch on the queue when the handler throws', async () => {
      const t = await setup({ maxReceiveCount: 1, visibility: 1 });
      await t.send(['ok', 'throw']);
      t.mapping.start();
      await waitFor('the whole batch in the DLQ', async () => (await t.depth(t.dlqUrl)) === 2, {
        timeoutMs: 10_000,
        intervalMs: 100,
      });
      expect(await t.dlqBodies()).toEqual(['ok', 'throw']);
      expect(t.mapping.statistics).toMatchObject({ acknowledged: 0, invocationErrors: 1 });
      expect(logs.some((l) => l.includes('fixture handler threw on purpose'))).toBe(true);
    });

    it('stops an invocation at the function timeout and lets the message become visible again', async () => {
      const t = await setup({ maxReceiveCount: 2, visibility: 1, timeoutSeconds: 1, batchSize: 1 });
      await t.send(['sleep:5000']);
      t.mapping.start();
      // The move to the DLQ happens on the third receive, which can come before the second invocation's timeout is
      // counted (visibility and timeout are both 1 s), so wait for both.
      await waitFor(
        'the message in the DLQ after two timed-out invocations',
        async () => (await t.depth(t.dlqUrl)) === 1 && t.mapping.statistics.invocationErrors === 2,
        {
          timeoutMs: 10_000,
          intervalMs: 100,
        },
      );
      // Two receives, each cut at its 1 s timeout (the function's own count), not ended by the 5 s the handler sleeps.
      expect(t.fn.timeoutCount).toBe(2);
      expect(t.mapping.statistics.invocationErrors).toBe(2);
      expect(logs.some((l) => l.includes('Task timed out after 1.00 seconds'))).toBe(true);
    });

    it('never runs more than the maximum concurrency at once', async () => {
      const t = await setup({ maxReceiveCount: 5, visibility: 30, reserved: 5, maximumConcurrency: 2, batchSize: 1 });
      for (let i = 0; i < 2; i++) await t.send(Array.from({ length: 6 }, () => 'hold:200'));
      t.mapping.start();
      await waitFor('the queue drained', async () => (await t.depth(t.queueUrl)) === 0, {
        timeoutMs: 15_000,
        intervalMs: 100,
      });
      expect(t.mapping.concurrency).toBe(2);
      expect(t.fn.peakConcurrency).toBe(2);
      expect(t.mapping.statistics.acknowledged).toBe(12);
    });

    it('fills a batch within the batching window', async () => {
      const t = await setup({ maxReceiveCount: 5, visibility: 30, batchSize: 15, window: 1, reserved: 1 });
      await t.send(Array.from({ length: 10 }, () => 'ok'));
      await t.send(Array.from({ length: 5 }, () => 'ok'));
      t.mapping.start();
      await waitFor('the queue drained', async () => (await t.depth(t.queueUrl)) === 0, {
        timeoutMs: 10_000,
        intervalMs: 100,
      });
      expect(t.mapping.statistics).toMatchObject({ invocations: 1, acknowledged: 15 });
    });
  });
});

describe('Class: SqsEventSourceMapping (receive quirks)', () => {
  describe('Method: start', () => {
    it('drops a message that one receive response returns twice', async () => {
      const message = {
        MessageId: 'm1',
        ReceiptHandle: 'r1',
        Body: 'ok',
        Attributes: { ApproximateReceiveCount: '1', SentTimestamp: '1' },
      };
      let receives = 0;
      const deleted: string[] = [];
      const sqs = {
        send: async (command: { constructor: { name: string }; input: { Entries?: { ReceiptHandle: string }[] } }) => {
          if (command.constructor.name === 'ReceiveMessageCommand')
            return { Messages: receives++ === 0 ? [message, { ...message }] : [] };
          deleted.push(...(command.input.Entries ?? []).map((e) => e.ReceiptHandle));
          return { Successful: command.input.Entries };
        },
      } as unknown as SQSClient;
      const batches: number[] = [];
      const mapping = new SqsEventSourceMapping(
        {
          functionName: 'f',
          queueUrl: 'http://q',
          queueArn: 'arn:aws:sqs:us-east-1:000000000000:q',
          region: 'us-east-1',
          reportBatchItemFailures: true,
        },
        {
          sqs,
          invoke: async (event) => void batches.push(event.Records.length),
          functionConcurrency: 1,
          idlePollMs: [10, 20],
        },
      );
      mapping.start();
      await waitFor('the message deleted', () => deleted.length > 0, { timeoutMs: 2000 });
      await mapping.stop();
      expect(batches).toEqual([1]);
      expect(deleted).toEqual(['r1']);
      expect(mapping.statistics).toMatchObject({ duplicatesDropped: 1, acknowledged: 1 });
    });

    it('counts the records of the running invocations as held, and none once they return', async () => {
      const messages = ['m1', 'm2', 'm3'].map((id) => ({
        MessageId: id,
        ReceiptHandle: `r-${id}`,
        Body: 'ok',
        Attributes: { ApproximateReceiveCount: '1', SentTimestamp: '1' },
      }));
      let receives = 0;
      const sqs = {
        send: async (command: { constructor: { name: string }; input: { Entries?: unknown[] } }) =>
          command.constructor.name === 'ReceiveMessageCommand'
            ? { Messages: receives++ === 0 ? messages : [] }
            : { Successful: command.input.Entries },
      } as unknown as SQSClient;
      let release: (() => void) | undefined;
      const mapping = new SqsEventSourceMapping(
        {
          functionName: 'f',
          queueUrl: 'http://q',
          queueArn: 'arn:aws:sqs:us-east-1:000000000000:q',
          region: 'us-east-1',
          reportBatchItemFailures: true,
        },
        {
          sqs,
          invoke: () => new Promise<void>((done) => (release = done)),
          functionConcurrency: 1,
          idlePollMs: [10, 20],
        },
      );
      expect(mapping.recordsHeld).toBe(0);
      mapping.start();
      await waitFor('the invocation to start', () => release !== undefined, { timeoutMs: 2000 });
      expect(mapping.recordsHeld).toBe(3);
      release!();
      await waitFor('the invocation to return', () => mapping.recordsHeld === 0, { timeoutMs: 2000 });
      await mapping.stop();
      expect(mapping.statistics).toMatchObject({ acknowledged: 3 });
    });
  });
});

describe('Constants: AWS limits of the SQS event source', () => {
  it("keeps AWS's scaling and the synchronous payload cap", () => {
    expect(SQS_SCALING).toEqual({ initialBatches: 5, scaleUpPerMinute: 300, floorBatches: 2, maximumBatches: 1000 });
    expect(SYNC_INVOCATION_PAYLOAD_LIMIT_BYTES).toBe(6 * 1024 * 1024);
  });
});

describe('Class: SqsEventSourceMapping (scaling, on an empty queue)', () => {
  // Every receive comes back empty: only the pollers' own decisions move their number.
  const emptySqs = { send: async () => ({ Messages: [] }) } as unknown as SQSClient;
  const mappings: SqsEventSourceMapping[] = [];
  afterEach(async () => {
    await Promise.all(mappings.splice(0).map((m) => m.stop()));
  });
  const make = (maximumConcurrency: number | undefined, functionConcurrency: number) => {
    const mapping = new SqsEventSourceMapping(
      {
        functionName: 'f',
        queueUrl: 'http://q',
        queueArn: 'arn:aws:sqs:us-east-1:000000000000:q',
        region: 'us-east-1',
        maximumConcurrency,
      },
      { sqs: emptySqs, invoke: async () => undefined, functionConcurrency, idlePollMs: [5, 20] },
    );
    mappings.push(mapping);
    return mapping;
  };

  describe('Method: start', () => {
    it('starts five pollers, not the upper bound, and optimizes down to two without a maximum concurrency', async () => {
      const mapping = make(undefined, 50);
      mapping.start();
      expect(mapping.concurrency).toBe(50);
      expect(mapping.activePollers).toBe(5);
      await waitFor('the pollers down to two', () => mapping.activePollers === 2, { timeoutMs: 2000, intervalMs: 5 });
      await holdsFor('two pollers on the empty queue', () => mapping.activePollers === 2, {
        forMs: 200,
        intervalMs: 10,
      });
      expect(mapping.statistics.peakPollers).toBe(5);
    });

    it('keeps five pollers with a maximum concurrency (the optimization to two is not available)', async () => {
      const mapping = make(8, 50);
      mapping.start();
      expect(mapping.concurrency).toBe(8);
      await holdsFor('five pollers on the empty queue', () => mapping.activePollers === 5, {
        forMs: 300,
        intervalMs: 10,
      });
    });

    it('starts no more pollers than the function concurrency or the maximum concurrency allows', async () => {
      const byFunction = make(undefined, 3);
      const byMaximum = make(2, 50);
      byFunction.start();
      byMaximum.start();
      expect([byFunction.activePollers, byMaximum.activePollers]).toEqual([3, 2]);
      // Without MaximumConcurrency the 1,000 batches an event source mapping processes at most still bound it.
      expect(make(undefined, 5000).concurrency).toBe(1000);
    });

    it('ends every poller on stop', async () => {
      const mapping = make(undefined, 10);
      mapping.start();
      await mapping.stop();
      expect(mapping.activePollers).toBe(0);
      expect(mapping.state).toBe('Disabled');
    });
  });
});

describe('Class: SqsEventSourceMapping (scaling and payload, on local SQS)', () => {
  let server: RunningServer;
  let sqs: SQSClient;
  let queueCount = 0;
  const mappings: SqsEventSourceMapping[] = [];

  beforeAll(async () => {
    server = await startSqs();
    sqs = new SQSClient({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    });
  });
  afterEach(async () => {
    await Promise.all(mappings.splice(0).map((m) => m.stop()));
  });
  afterAll(async () => {
    sqs.destroy();
    await server.close();
  });

  async function queue() {
    const name = `scale-${++queueCount}`;
    const created = await sqs.send(
      new CreateQueueCommand({ QueueName: name, Attributes: { VisibilityTimeout: '30' } }),
    );
    const url = created.QueueUrl!;
    const sendMany = async (count: number, body: (i: number) => string) => {
      for (let i = 0; i < count; i += 10) {
        const n = Math.min(10, count - i);
        await sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: url,
            Entries: Array.from({ length: n }, (_, j) => ({ Id: String(j), MessageBody: body(i + j) })),
          }),
        );
      }
    };
    const depth = async () => {
      const a = await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      );
      return (
        Number(a.Attributes!.ApproximateNumberOfMessages) + Number(a.Attributes!.ApproximateNumberOfMessagesNotVisible)
      );
    };
    return { url, arn: `arn:aws:sqs:us-east-1:000000000000:${name}`, sendMany, depth };
  }

  /** An invoker that holds each batch, and records how many batches ran at once when each began. */
  function holdingInvoker(holdMs: number) {
    let running = 0;
    let gate: Promise<void> | undefined;
    let open: (() => void) | undefined;
    const atStart: { running: number }[] = [];
    const records: string[] = [];
    const invoke = async (event: SQSEvent) => {
      running++;
      atStart.push({ running });
      records.push(...event.Records.map((r) => r.messageId));
      const held = gate;
      await new Promise((r) => setTimeout(r, holdMs));
      await held;
      running--;
    };
    return {
      invoke,
      atStart,
      records,
      running: () => running,
      /** Holds every batch started from now on until release(): how many run at once is then counted, not raced. */
      hold: () => {
        gate = new Promise((r) => (open = r));
      },
      release: () => {
        open?.();
        gate = undefined;
      },
    };
  }

  describe('Method: start', () => {
    it('raises the concurrent batches one per tick while a backlog lasts, never above the maximum concurrency, then falls back', async () => {
      const q = await queue();
      await q.sendMany(200, (i) => `m${i}`);
      const fn = holdingInvoker(100);
      const pollers: number[] = [];
      // The test ticks the ramp itself, so "one poller per tick, never a burst" is counted rather than timed.
      let tick: (() => void) | undefined;
      const ticks: number[] = [];
      const mapping = new SqsEventSourceMapping(
        {
          functionName: 'f',
          queueUrl: q.url,
          queueArn: q.arn,
          region: 'us-east-1',
          batchSize: 1,
          maximumConcurrency: 10,
        },
        {
          sqs,
          invoke: fn.invoke,
          functionConcurrency: 50,
          idlePollMs: [20, 100],
          // AWS's ramp sped up: 2 to start, one more every tick of 100 ms.
          scaling: { initialBatches: 2, scaleUpPerMinute: 600 },
          onPollersChanged: (n) => pollers.push(n),
          rampTicks: (ramp, everyMs) => {
            ticks.push(everyMs);
            tick = ramp;
            return () => (tick = undefined);
          },
        },
      );
      mappings.push(mapping);
      mapping.start();

      // Before any tick only the initial batches run, however deep the backlog.
      await waitFor('six batches started', () => fn.atStart.length >= 6, { timeoutMs: 10_000, intervalMs: 10 });
      expect(mapping.activePollers).toBe(2);
      expect(Math.max(...fn.atStart.map((s) => s.running))).toBeLessThanOrEqual(2);
      // Then one more per tick while messages are available (each batch started shows a receive found some), up to
      // the maximum concurrency, and never past it: from 2 to 10 takes eight ticks. The batches are held from here until
      // ten run at once, so that reaching the maximum does not race the machine's speed (a loaded one let each 100-ms
      // batch end before the tenth poller's started).
      fn.hold();
      let held = true;
      const afterTick: number[] = [];
      for (let n = 0; n < 10; n++) {
        const batches = fn.atStart.length;
        tick!();
        afterTick.push(mapping.activePollers);
        await waitFor('a batch to start after the tick', () => fn.atStart.length > batches, {
          timeoutMs: 10_000,
          intervalMs: 10,
        });
        if (mapping.activePollers === 10 && held) {
          await waitFor('ten batches held at once', () => fn.running() === 10, { timeoutMs: 10_000, intervalMs: 10 });
          fn.release();
          held = false;
        }
      }
      expect(afterTick).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 10, 10]);

      await waitFor(
        'the backlog processed',
        async () => mapping.statistics.acknowledged === 200 && (await q.depth()) === 0,
        { timeoutMs: 15_000, intervalMs: 50 },
      );
      expect(Math.max(...fn.atStart.map((s) => s.running))).toBe(10);
      expect(Math.max(...pollers)).toBe(10);
      expect(mapping.statistics).toMatchObject({ peakPollers: 10, acknowledged: 200 });
      expect(mapping.statistics.peakConcurrency).toBeLessThanOrEqual(10);
      // Every message once.
      expect(new Set(fn.records).size).toBe(200);
      expect(fn.records).toHaveLength(200);

      // The queue drained: back to the initial level, which a maximum concurrency keeps (no optimization to fewer).
      await waitFor('the pollers back to the initial batches', () => mapping.activePollers === 2, {
        timeoutMs: 5000,
        intervalMs: 20,
      });
      await holdsFor('the pollers staying at the initial batches', () => mapping.activePollers === 2, {
        forMs: 400,
        intervalMs: 20,
      });
      await mapping.stop();
      expect({ ticks, stopped: tick === undefined }).toEqual({ ticks: [100], stopped: true });
    });

    it('scales to the function concurrency without a maximum concurrency, falls to the floor when idle, and returns to the initial batches when messages arrive', async () => {
      const q = await queue();
      await q.sendMany(60, (i) => `m${i}`);
      const fn = holdingInvoker(50);
      const mapping = new SqsEventSourceMapping(
        { functionName: 'f', queueUrl: q.url, queueArn: q.arn, region: 'us-east-1', batchSize: 1 },
        {
          sqs,
          invoke: fn.invoke,
          functionConcurrency: 6,
          idlePollMs: [10, 40],
          scaling: { initialBatches: 3, scaleUpPerMinute: 1200, floorBatches: 1 },
        },
      );
      mappings.push(mapping);
      mapping.start();
      expect(mapping.activePollers).toBe(3);
      await waitFor(
        'the backlog processed',
        async () => mapping.statistics.acknowledged === 60 && (await q.depth()) === 0,
        { timeoutMs: 10_000, intervalMs: 50 },
      );
      expect(mapping.statistics.peakPollers).toBe(6);
      expect(Math.max(...fn.atStart.map((s) => s.running))).toBeLessThanOrEqual(6);
      await waitFor('the pollers at the floor', () => mapping.activePollers === 1, { timeoutMs: 5000, intervalMs: 10 });
      await holdsFor('one poller on the empty queue', () => mapping.activePollers === 1, {
        forMs: 300,
        intervalMs: 10,
      });

      await q.sendMany(20, (i) => `again${i}`);
      await waitFor('the initial batches polling again', () => mapping.activePollers >= 3, {
        timeoutMs: 3000,
        intervalMs: 5,
      });
      await waitFor('the new messages processed', () => mapping.statistics.acknowledged === 80, {
        timeoutMs: 10_000,
        intervalMs: 50,
      });
      expect(new Set(fn.records).size).toBe(80);
    });

    it('splits a batch whose event would exceed the payload cap, and delivers the released records later, each once', async () => {
      const q = await queue();
      // 200 KB each: four fit under a 1 MB cap, five do not. One at a time: a send batch is capped at 1 MiB.
      for (let i = 0; i < 10; i++)
        await sqs.send(new SendMessageCommand({ QueueUrl: q.url, MessageBody: `${i}`.padEnd(200_000, 'x') }));
      const cap = 1_000_000;
      const events: { ids: string[]; bytes: number }[] = [];
      const mapping = new SqsEventSourceMapping(
        { functionName: 'f', queueUrl: q.url, queueArn: q.arn, region: 'us-east-1', batchSize: 10 },
        {
          sqs,
          invoke: async (event) =>
            void events.push({
              ids: event.Records.map((r) => r.messageId),
              bytes: Buffer.byteLength(JSON.stringify(event)),
            }),
          // One poller: the first receive takes all ten, so the split is the cap's alone.
          functionConcurrency: 1,
          idlePollMs: [10, 50],
          maxPayloadBytes: cap,
        },
      );
      mappings.push(mapping);
      mapping.start();
      await waitFor(
        'all ten acknowledged',
        async () => mapping.statistics.acknowledged === 10 && (await q.depth()) === 0,
        { timeoutMs: 10_000, intervalMs: 50 },
      );
      expect(events.map((e) => e.ids.length)).toEqual([4, 4, 2]);
      for (const e of events) expect(e.bytes).toBeLessThanOrEqual(cap);
      const ids = events.flatMap((e) => e.ids);
      expect(new Set(ids).size).toBe(10);
      expect(ids).toHaveLength(10);
      // Six released after the first receive, two after the second.
      expect(mapping.statistics).toMatchObject({
        invocations: 3,
        acknowledged: 10,
        releasedOverPayloadCap: 8,
        failed: 0,
      });
    });

    it("keeps each event under Lambda's 6 MB cap by default", async () => {
      const q = await queue();
      // 900 KB each (SQS allows 1 MiB): six make 5.4 MB, seven would pass 6 MB. One at a time: a send batch is capped at 1 MiB.
      for (let i = 0; i < 10; i++)
        await sqs.send(new SendMessageCommand({ QueueUrl: q.url, MessageBody: `${i}`.padEnd(900_000, 'x') }));
      const events: { count: number; bytes: number }[] = [];
      const mapping = new SqsEventSourceMapping(
        { functionName: 'f', queueUrl: q.url, queueArn: q.arn, region: 'us-east-1', batchSize: 10 },
        {
          sqs,
          invoke: async (event) =>
            void events.push({ count: event.Records.length, bytes: Buffer.byteLength(JSON.stringify(event)) }),
          functionConcurrency: 1,
          idlePollMs: [10, 50],
        },
      );
      mappings.push(mapping);
      mapping.start();
      await waitFor(
        'all ten acknowledged',
        async () => mapping.statistics.acknowledged === 10 && (await q.depth()) === 0,
        { timeoutMs: 15_000, intervalMs: 50 },
      );
      expect(events.map((e) => e.count)).toEqual([6, 4]);
      for (const e of events) expect(e.bytes).toBeLessThanOrEqual(SYNC_INVOCATION_PAYLOAD_LIMIT_BYTES);
      expect(mapping.statistics.releasedOverPayloadCap).toBe(4);
    });
  });
});
