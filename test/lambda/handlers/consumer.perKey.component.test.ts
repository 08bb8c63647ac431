// Per-key rate limits in the consumer (rateLimit.perKey): each key's limit holds fleet-wide beside the job-wide one,
// a busy key defers only its own records, an operator's override changes one key's limit, and a key's 429s cut that
// key's rate, not the others' nor the job's. On local DynamoDB (dynalite) and SQS, paced on a virtual clock: the
// windows are asserted on virtual time, exact under any load, and the waits for tokens take no real time.
import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { dynamoClient } from '../../../lambda/adapters/clients';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { KeyRateLimiter } from '../../../lambda/adapters/keyRateLimiter';
import { DynamoDbRateLimiter } from '../../../lambda/adapters/rateLimiter';
import { SqsPublisher } from '../../../lambda/adapters/sqsPublisher';
import type { RateFeedback } from '../../../lambda/adapters/adaptiveRateLimiter';
import { keyLimitsItemKey, perKeyItemKey } from '../../../lambda/core/keyLimits';
import { createConsumer } from '../../../lambda/handlers/consumer';
import { JOB_STORM_KEYS } from '../../../lambda/handlers/consumer/rateFeedback';
import { fakeJobCalls, job as fakeJob } from '../../fixtures/jobs/fake-job';
import { maxInAnyWindow } from '../../../lambda/core/pacing/slidingWindow';
import { lambdaContext, sqsEvent, sqsRecord } from '../../support/lambdaEvents';
import { createQueue, useConsumerAws, withPacer } from './harness';
import { POLL_GAP_MS, VirtualClock } from './virtualClock';

const IDEMPOTENCY_TABLE = 'idempotency-perkey';
const LEDGER_TABLE = 'ledger-perkey';
const LIMITER_TABLE = 'limiter-perkey';
const BATCH = 'fake-job:2026-11-28:perkey';

let seq = 0;
/** The time each test's consumers and limiters run on. */
let clock = new VirtualClock();

/** A valid message of the fake job for `tenant`, with a unique operation. */
function body(tenant: string, behaviour?: string): string {
  const id = `op-${++seq}`;
  return JSON.stringify({
    version: 1,
    jobType: 'fake-job',
    operationId: `fake:${id}:2026-11-28`,
    batchId: BATCH,
    businessDate: '2026-11-28',
    resource: { id, tenant, ...(behaviour ? { behaviour } : {}) },
    enqueuedAt: new Date(clock.now()).toISOString(),
  });
}

/** A per-key limiter on the `tenant` field; each test uses its own limiter key so keys never carry over. */
function keys(
  limiterKey: string,
  perKey: { startsPerInterval: number; intervalSeconds: number },
  options: { adaptive?: boolean } = {},
) {
  return new KeyRateLimiter({
    tableName: LIMITER_TABLE,
    job: limiterKey,
    limiterKey,
    perKey: { field: 'tenant', burst: 1, headroom: 1, ...perKey },
    adaptive: options.adaptive ?? false,
    // As deployed (lambda/core/pacingSettings.ts): the window is stretched by a margin the claim's latency between a
    // token's time and the downstream call stays within, and a record starts at most half of it late.
    safetyMarginMs: MARGIN_MS,
    overridesRefreshMs: 0,
    clock: clock.now,
  });
}

/** The largest margin pacingSettings gives (a window of 50 s or more): 250 ms. */
const MARGIN_MS = 250;

async function consumerFor(
  limiterKey: string,
  keyLimiter: KeyRateLimiter,
  overrides: { rateFeedback?: RateFeedback; lateToleranceMs?: number } = {},
) {
  const [queueUrl, dlqUrl] = await Promise.all([createQueue(`pk-${limiterKey}`), createQueue(`pk-${limiterKey}-dlq`)]);
  const handler = createConsumer(
    withPacer({
      job: fakeJob,
      jobDeps: { items: 0 },
      queueUrl,
      dlqUrl,
      idempotencyTableName: IDEMPOTENCY_TABLE,
      idempotencyTtlSeconds: 86_400,
      maxMessageBytes: 2048,
      ledger: new DynamoLedger({ tableName: LEDGER_TABLE }),
      // The job-wide limit is far above the keys': these tests are about the keys.
      limiter: new DynamoDbRateLimiter({
        tableName: LIMITER_TABLE,
        limits: { startsPerInterval: 1000, intervalMs: 1000 },
        clock: clock.now,
      }),
      // Lateness only matters where a test measures windows (on the virtual clock no record wakes late anyway).
      pacing: {
        key: limiterKey,
        lateToleranceMs: overrides.lateToleranceMs ?? 60_000,
        shortWaitMs: 2_000,
        clock: clock.now,
        sleep: clock.sleep,
      },
      now: () => new Date(clock.now()),
      publisher: new SqsPublisher({ sleep: async () => undefined }),
      keys: keyLimiter,
      ...(overrides.rateFeedback ? { rateFeedback: overrides.rateFeedback } : {}),
    }),
  );
  return { handler, queueUrl };
}

async function delayedIn(queueUrl: string): Promise<number> {
  const sqs = new SQSClient({});
  try {
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['ApproximateNumberOfMessagesDelayed', 'ApproximateNumberOfMessages'],
      }),
    );
    return (
      Number(Attributes?.ApproximateNumberOfMessagesDelayed ?? 0) + Number(Attributes?.ApproximateNumberOfMessages ?? 0)
    );
  } finally {
    sqs.destroy();
  }
}

const appliedFor = (tenant: string) => fakeJobCalls.apply.filter((a) => a.resource.tenant === tenant);

describe('Consumer: per-key rate limits (rateLimit.perKey)', () => {
  useConsumerAws({ idempotency: IDEMPOTENCY_TABLE, ledger: LEDGER_TABLE, limiter: LIMITER_TABLE });

  beforeEach(() => {
    fakeJobCalls.reset();
    clock = new VirtualClock();
  });

  it("applies the records of a key with room and defers only the over-limit key's records, by that key's wait", async () => {
    // Key "busy": 1 start a minute by default; key "roomy": 50 a minute, 5 of them back to back, by its override.
    await dynamoClient().send(
      new PutItemCommand({
        TableName: LIMITER_TABLE,
        Item: {
          pk: { S: keyLimitsItemKey('pk-one') },
          overrides: {
            M: { roomy: { M: { starts: { N: '50' }, burst: { N: '5' }, setAt: { S: '2026-11-28T00:00:00Z' } } } },
          },
        },
      }),
    );
    const keyLimiter = keys('pk-one', { startsPerInterval: 1, intervalSeconds: 60 });
    const { handler, queueUrl } = await consumerFor('pk-one', keyLimiter);
    const records = [body('busy'), body('roomy'), body('busy'), body('roomy'), body('busy'), body('roomy')].map((b) =>
      sqsRecord(b),
    );

    const response = await handler(sqsEvent(...records), lambdaContext());

    expect(response.batchItemFailures).toEqual([]);
    expect(appliedFor('roomy')).toHaveLength(3);
    expect(appliedFor('busy')).toHaveLength(1);
    // The two over-limit records went back to the queue to wait, not to the DLQ and not as failures.
    expect(await delayedIn(queueUrl)).toBe(2);
    // Their wait is the key's: its next token is a minute away (the busy key's limit, its window stretched by the
    // margin), not the job's spacing; the invocation took almost no virtual time.
    expect((await keyLimiter.acquireAt('busy', clock.now())).granted).toBe(false);
    const answer = await keyLimiter.acquireAt('busy', clock.now());
    expect(answer.granted === false && answer.waitMs > 59_000 && answer.waitMs <= 60_000 + MARGIN_MS).toBe(true);
    expect(await keyLimiter.limit('roomy')).toEqual({ startsPerInterval: 50, intervalSeconds: 60, burst: 5 });
    expect(await keyLimiter.limit('busy')).toEqual({ startsPerInterval: 1, intervalSeconds: 60, burst: 1 });
  });

  it("holds each key's limit in every sliding window across four concurrent consumers", async () => {
    // "a" may start 3 times in 2 s, "b" 6 times (its override); four containers run batches of both at once for 6 s.
    await dynamoClient().send(
      new PutItemCommand({
        TableName: LIMITER_TABLE,
        Item: {
          pk: { S: keyLimitsItemKey('pk-four') },
          overrides: {
            M: { b: { M: { starts: { N: '6' }, burst: { N: '2' }, setAt: { S: '2026-11-28T00:00:00Z' } } } },
          },
        },
      }),
    );
    // The tokens each key granted, at the moments they were granted for: the limit is about these start times (a record
    // starts at its token's moment, at most lateToleranceMs late, within the window's margin).
    const granted: Record<string, number[]> = { a: [], b: [] };
    const consumers = await Promise.all(
      [0, 1, 2, 3].map(() => {
        const keyLimiter = keys('pk-four', { startsPerInterval: 3, intervalSeconds: 2 });
        const acquireAt = keyLimiter.acquireAt.bind(keyLimiter);
        jest.spyOn(keyLimiter, 'acquireAt').mockImplementation(async (value, atMs) => {
          const answer = await acquireAt(value, atMs);
          if (answer.granted) granted[value].push(atMs);
          return answer;
        });
        return consumerFor('pk-four', keyLimiter, { lateToleranceMs: MARGIN_MS / 2 });
      }),
    );
    const until = clock.now() + 6_000;
    await clock.concurrently(
      consumers.map(({ handler }) => async () => {
        while (clock.now() < until) {
          await handler(sqsEvent(...['a', 'b', 'a', 'b', 'b', 'a'].map((t) => sqsRecord(body(t)))), lambdaContext());
          await clock.sleep(POLL_GAP_MS);
        }
      }),
    );

    // Enough tokens that a limiter letting more through would show it (more than one window's worth of each key)...
    expect(granted.a.length).toBeGreaterThan(3);
    expect(granted.b.length).toBeGreaterThan(6);
    // ...and none over either key's limit in any 2 s window, across the four containers.
    expect(maxInAnyWindow(granted.a, 2_000)).toBeLessThanOrEqual(3);
    expect(maxInAnyWindow(granted.b, 2_000)).toBeLessThanOrEqual(6);
    // No record started without its key's token, and (on the virtual clock none wakes late, so none gives its token
    // up) every token was started on: a key's applies are exactly its tokens.
    expect(appliedFor('a')).toHaveLength(granted.a.length);
    expect(appliedFor('b')).toHaveLength(granted.b.length);
  }, 30_000);

  it("cuts the rate of the key the downstream throttled, and leaves the other key's and the job-wide rate alone", async () => {
    const keyLimiter = keys('pk-storm', { startsPerInterval: 10, intervalSeconds: 60 }, { adaptive: true });
    const jobFeedback = { throttled: jest.fn(async () => undefined), succeeded: jest.fn(async () => undefined) };
    const { handler } = await consumerFor('pk-storm', keyLimiter, { rateFeedback: jobFeedback });

    await handler(
      sqsEvent(
        ...[body('noisy', 'throttled'), body('calm'), body('noisy', 'throttled'), body('calm')].map((b) =>
          sqsRecord(b),
        ),
      ),
      lambdaContext(),
    );

    const rateOf = async (tenant: string) => {
      const { Item } = await dynamoClient().send(
        new GetItemCommand({
          TableName: LIMITER_TABLE,
          Key: { pk: { S: `${perKeyItemKey('pk-storm', tenant)}#rate` } },
          ConsistentRead: true,
        }),
      );
      return Item?.rate?.N === undefined ? undefined : Number(Item.rate.N);
    };
    // The throttled key's rate is halved from its ceiling of 10; the calm key never had a rate item (at its ceiling).
    expect(await rateOf('noisy')).toBe(5);
    expect(await rateOf('calm')).toBeUndefined();
    // One key's 429s are that key's limit, not a storm: the job-wide rate is told only of the successes.
    expect(JOB_STORM_KEYS).toBe(2);
    expect(jobFeedback.throttled).not.toHaveBeenCalled();
    // With per-key limits the job-wide rate gets no counts: its starts are the keys'.
    expect(jobFeedback.succeeded).toHaveBeenCalledWith('pk-storm', undefined);
  });

  it('cuts the job-wide rate too when the downstream throttles two keys in one invocation (a storm)', async () => {
    const jobFeedback = { throttled: jest.fn(async () => undefined), succeeded: jest.fn(async () => undefined) };
    const { handler } = await consumerFor(
      'pk-storm2',
      keys('pk-storm2', { startsPerInterval: 10, intervalSeconds: 60 }, { adaptive: true }),
      { rateFeedback: jobFeedback },
    );

    await handler(
      sqsEvent(...[body('x', 'throttled'), body('y', 'throttled')].map((b) => sqsRecord(b))),
      lambdaContext(),
    );

    expect(jobFeedback.throttled).toHaveBeenCalledWith('pk-storm2', undefined);
  });

  it('rejects a record whose resource has no key, naming the field, and keeps it for review', async () => {
    const { handler } = await consumerFor('pk-nokey', keys('pk-nokey', { startsPerInterval: 10, intervalSeconds: 60 }));
    const noKey = JSON.parse(body('t')) as { resource: Record<string, unknown> };
    delete noKey.resource.tenant;

    const response = await handler(sqsEvent(sqsRecord(JSON.stringify(noKey))), lambdaContext());

    expect(response.batchItemFailures).toEqual([]);
    expect(fakeJobCalls.apply).toHaveLength(0);
  });
});
