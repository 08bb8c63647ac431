// What pacing costs in limiter requests: several consumer containers drain one key whose spacing is shorter than their
// applies. Each takes only the slots it can reach on time (ApplyTimeEstimator.usableBlock), so a batch costs a write
// per such block, at most one per record, and no write is a lost race: blocks are added to the busy key's queue. On
// local DynamoDB (dynalite) and SQS, paced on a virtual clock (the applies' 45 ms and the waits for slots take no real
// time, and a loaded machine cannot make a container late); the counts are asserted.
import * as z from 'zod';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { DynamoDbRateLimiter } from '../../../lambda/adapters/rateLimiter';
import { defineJob } from '../../../lambda/core/job';
import { createConsumer } from '../../../lambda/handlers/consumer';
import { lambdaContext, sqsEvent, sqsRecord } from '../../support/lambdaEvents';
import { countingLimiterClient } from '../../support/limiterRequests';
import { createQueue, useConsumerAws, withPacer } from './harness';
import { VirtualClock } from './virtualClock';

const IDEMPOTENCY_TABLE = 'idempotency-cost';
const LEDGER_TABLE = 'ledger-cost';
const LIMITER_TABLE = 'limiter-cost';

/** Each apply's start: the starts the limiter's guarantee is about. */
const starts: number[] = [];
/** The time the consumers, their limiters and the job run on. */
const clock = new VirtualClock();

const slowJob = defineJob<{ id: string }, Record<string, never>>({
  name: 'cost-job',
  resourceSchema: z.strictObject({ id: z.string() }),
  createDeps: () => ({}),
  async discover() {
    return { operations: [], nextCursor: undefined };
  },
  async apply() {
    starts.push(clock.now());
    // Slower than the key's 20 ms spacing: a block at that spacing could not be reached on time.
    await clock.sleep(45);
    return { outcome: 'applied' };
  },
});

let seq = 0;
function body(): string {
  const id = `op-${++seq}`;
  return JSON.stringify({
    version: 1,
    jobType: 'cost-job',
    operationId: `cost:${id}:2026-11-28`,
    batchId: 'cost-job:2026-11-28:test',
    businessDate: '2026-11-28',
    resource: { id },
    enqueuedAt: new Date(clock.now()).toISOString(),
  });
}

describe("Function: createConsumer (the limiter's cost per invocation)", () => {
  useConsumerAws({ idempotency: IDEMPOTENCY_TABLE, ledger: LEDGER_TABLE, limiter: LIMITER_TABLE });

  it('takes a write per reachable block and loses no race in steady state, with three containers on one key slower than its spacing', async () => {
    // 50 per second (20 ms apart) in 1 s windows; three containers at 45 ms a record. With a 100 ms margin the late
    // tolerance is 50 ms, so a container reaches 1 + floor(50 / (45 - 20)) = 3 slots of a block on time.
    const limits = { startsPerInterval: 50, intervalMs: 1_000, safetyMarginMs: 100 };
    const [queueUrl, dlqUrl] = await Promise.all([createQueue('cost'), createQueue('cost-dlq')]);
    const containers = Array.from({ length: 3 }, () => {
      // Each container's limiter on its own counting client, so every write is its invocation's.
      const { client, counts } = countingLimiterClient();
      const handler = createConsumer(
        withPacer({
          job: slowJob,
          jobDeps: {},
          queueUrl,
          dlqUrl,
          idempotencyTableName: IDEMPOTENCY_TABLE,
          idempotencyTtlSeconds: 86_400,
          maxMessageBytes: 4096,
          ledger: new DynamoLedger({ tableName: LEDGER_TABLE }),
          limiter: new DynamoDbRateLimiter({
            tableName: LIMITER_TABLE,
            limits,
            client,
            maxAttempts: 20,
            clock: clock.now,
          }),
          // The product's late tolerance (half the margin). The window guarantee is the limiter's, tested on its grants
          // (test/lambda/adapters/rateLimiter.component.test.ts).
          pacing: {
            key: 'cost-key',
            lateToleranceMs: limits.safetyMarginMs / 2,
            shortWaitMs: 10_000,
            spacingMs: 20,
            clock: clock.now,
            sleep: clock.sleep,
          },
          now: () => new Date(clock.now()),
        }),
      );
      return { handler, client, counts, perInvocation: [] as { written: number; lost: number }[] };
    });
    const invocationsEach = 4;
    const batch = 40;
    await clock.concurrently(
      containers.map((container) => async () => {
        for (let i = 0; i < invocationsEach; i++) {
          const before = { ...container.counts };
          const response = await container.handler(
            sqsEvent(...Array.from({ length: batch }, () => sqsRecord(body()))),
            lambdaContext(),
          );
          expect(response).toEqual({ batchItemFailures: [] });
          container.perInvocation.push({
            written: container.counts.written - before.written,
            lost: container.counts.lost - before.lost,
          });
        }
      }),
    );
    for (const c of containers) c.client.destroy();

    // Every record applied at its slot: on the virtual clock a container wakes exactly at its slots, so none is deferred.
    expect(starts).toHaveLength(containers.length * invocationsEach * batch);
    // A container's first invocation sizes its blocks before it has measured its applies: not steady state. After it,
    // a block of the 3 slots it reaches, each one write, and none lost (the first writes on the idle key may race).
    const steady = containers.flatMap((c) => c.perInvocation.slice(1));
    expect(steady.map((i) => i.written)).toEqual(steady.map(() => Math.ceil(batch / 3)));
    expect(steady.reduce((sum, i) => sum + i.lost, 0)).toBe(0);
  }, 120_000);
});
