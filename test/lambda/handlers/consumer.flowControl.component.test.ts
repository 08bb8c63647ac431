// Per-key flow control in the consumer beyond the per-key rate: per-key concurrency (leases), live work ahead of
// backfill (rateLimit.backfillShare), a busy key's records queued behind each other, keys taking turns in a batch, and
// every re-published message keeping its tenant (MessageGroupId). On local DynamoDB (dynalite) and SQS, paced on a
// virtual clock: starts, applies and leases are on virtual time, exact under any load, and waits take no real time.
import * as z from 'zod';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { KeyConcurrencyLimiter } from '../../../lambda/adapters/keyConcurrency';
import { KeyRateLimiter } from '../../../lambda/adapters/keyRateLimiter';
import { DynamoDbRateLimiter, type AcquireOptions } from '../../../lambda/adapters/rateLimiter';
import { SqsPublisher, type OutgoingMessage, type Publisher } from '../../../lambda/adapters/sqsPublisher';
import { backfillItemKey, backfillLimits } from '../../../lambda/core/backfill';
import { defineJob } from '../../../lambda/core/job';
import { createConsumer, type ConsumerOptions } from '../../../lambda/handlers/consumer';
import { maxInAnyWindow } from '../../../lambda/core/pacing/slidingWindow';
import { lambdaContext, sqsEvent, sqsRecord } from '../../support/lambdaEvents';
import { createQueue, useConsumerAws, withPacer, type TestPacing } from './harness';
import { POLL_GAP_MS, VirtualClock } from './virtualClock';

const IDEMPOTENCY_TABLE = 'idempotency-flow';
const LEDGER_TABLE = 'ledger-flow';
const LIMITER_TABLE = 'limiter-flow';

/** What the job saw: each apply's tenant, start and end, and whether its record was backfill. */
const applies: { tenant: string; startMs: number; endMs: number; backfill: boolean }[] = [];
let applyMs = 0;
/** The time each test's consumers, limiters, leases and the job run on. */
let clock = new VirtualClock();

const flowJob = defineJob<{ id: string; tenant: string; backfill?: boolean }, Record<string, never>>({
  name: 'flow-job',
  resourceSchema: z.strictObject({ id: z.string(), tenant: z.string(), backfill: z.boolean().optional() }),
  createDeps: () => ({}),
  async discover() {
    return { operations: [], nextCursor: undefined };
  },
  async apply(_deps, request) {
    const startMs = clock.now();
    await clock.sleep(applyMs);
    applies.push({
      tenant: request.resource.tenant,
      startMs,
      endMs: clock.now(),
      backfill: request.resource.backfill === true,
    });
    return { outcome: 'applied' };
  },
});

let seq = 0;

/** A message for `tenant`; `backfill` marks it as a catch-up's (and tells the job, so the test can count it). */
function body(tenant: string, options: { backfill?: boolean } = {}): string {
  const id = `op-${++seq}`;
  return JSON.stringify({
    version: 1,
    jobType: 'flow-job',
    operationId: `flow:${id}:2026-11-28`,
    batchId: 'flow-job:2026-11-28:test',
    businessDate: '2026-11-28',
    resource: { id, tenant, ...(options.backfill ? { backfill: true } : {}) },
    enqueuedAt: new Date(clock.now()).toISOString(),
    ...(options.backfill ? { backfill: true } : {}),
  });
}

/** Every message the consumer re-published (deferrals), as sent. */
function recordingPublisher(): Publisher & { sent: OutgoingMessage[] } {
  const real = new SqsPublisher({ sleep: async () => undefined });
  const sent: OutgoingMessage[] = [];
  return {
    sent,
    async publish(queueUrl, messages) {
      sent.push(...messages);
      return real.publish(queueUrl, messages);
    },
  };
}

async function consumerFor(name: string, overrides: Partial<Omit<ConsumerOptions, 'pacer'>> & TestPacing = {}) {
  const [queueUrl, dlqUrl] = await Promise.all([createQueue(`flow-${name}`), createQueue(`flow-${name}-dlq`)]);
  const publisher = recordingPublisher();
  const handler = createConsumer(
    withPacer({
      job: flowJob,
      jobDeps: {},
      queueUrl,
      dlqUrl,
      idempotencyTableName: IDEMPOTENCY_TABLE,
      idempotencyTtlSeconds: 86_400,
      maxMessageBytes: 4096,
      ledger: new DynamoLedger({ tableName: LEDGER_TABLE }),
      limiter: new DynamoDbRateLimiter({
        tableName: LIMITER_TABLE,
        limits: { startsPerInterval: 1000, intervalMs: 1000 },
        clock: clock.now,
      }),
      publisher,
      now: () => new Date(clock.now()),
      ...overrides,
      // Lateness only matters where a test measures windows (on the virtual clock no record wakes late anyway).
      pacing: {
        key: name,
        lateToleranceMs: 60_000,
        shortWaitMs: 2_000,
        ...overrides.pacing,
        clock: clock.now,
        sleep: clock.sleep,
      },
    }),
  );
  return { handler, publisher, queueUrl };
}

/** The most applies of `tenant` in progress at once. */
function mostInProgress(tenant: string): number {
  const edges = applies
    .filter((a) => a.tenant === tenant)
    .flatMap((a) => [
      { at: a.startMs, d: 1 },
      { at: a.endMs, d: -1 },
    ]);
  // An apply that ends at the moment another starts is not in progress with it.
  edges.sort((x, y) => x.at - y.at || x.d - y.d);
  let now = 0;
  let most = 0;
  for (const e of edges) {
    now += e.d;
    most = Math.max(most, now);
  }
  return most;
}

describe('Consumer: per-key flow control', () => {
  useConsumerAws({ idempotency: IDEMPOTENCY_TABLE, ledger: LEDGER_TABLE, limiter: LIMITER_TABLE });

  beforeEach(() => {
    applies.length = 0;
    applyMs = 0;
    clock = new VirtualClock();
  });

  describe('concurrency.perKey', () => {
    const leases = (limiterKey: string, max: number) =>
      new KeyConcurrencyLimiter({
        tableName: LIMITER_TABLE,
        limiterKey,
        field: 'tenant',
        maxConcurrent: max,
        clock: clock.now,
      });

    it('keeps at most the limit of a key in progress across three concurrent consumers, and defers the rest, not the other keys', async () => {
      applyMs = 120;
      const consumers = await Promise.all(
        [0, 1, 2].map(() => consumerFor('conc-three', { keyConcurrency: leases('conc-three', 1) })),
      );
      // Each container's other two records are of keys only it has: nothing holds them up.
      await clock.concurrently(
        consumers.map(
          ({ handler }, i) =>
            () =>
              handler(sqsEvent(...['m', `x${i}`, 'm', `y${i}`, 'm'].map((t) => sqsRecord(body(t)))), lambdaContext()),
        ),
      );

      // Three containers ran "m" records at once; only one was ever in progress.
      expect(mostInProgress('m')).toBe(1);
      expect(applies.filter((a) => a.tenant === 'm').length).toBeGreaterThanOrEqual(1);
      // The others' records all ran, in their own invocations, while "m" waited.
      expect(applies.filter((a) => a.tenant !== 'm')).toHaveLength(6);
      const deferred = consumers.flatMap(({ publisher }) => publisher.sent);
      expect(deferred.length).toBe(9 - applies.filter((a) => a.tenant === 'm').length);
      expect(
        deferred.every((m) => (JSON.parse(m.body) as { resource: { tenant: string } }).resource.tenant === 'm'),
      ).toBe(true);
      // Every lease was given back: the key is free again.
      const answer = await leases('conc-three', 1).acquire('m', clock.now() + 60_000);
      expect(answer.granted).toBe(true);
    });

    it('frees a key whose worker died once its lease expires', async () => {
      const dead = await leases('conc-dead', 1).acquire('m', clock.now() + 400);
      expect(dead.granted).toBe(true);
      const { handler, publisher } = await consumerFor('conc-dead', { keyConcurrency: leases('conc-dead', 1) });

      await handler(sqsEvent(sqsRecord(body('m'))), lambdaContext());
      expect(applies).toHaveLength(0);
      expect(publisher.sent).toHaveLength(1);

      clock.advance(500);
      await handler(sqsEvent(sqsRecord(body('m'))), lambdaContext());
      expect(applies.map((a) => a.tenant)).toEqual(['m']);
    });
  });

  describe('backfill behind live work (rateLimit.backfillShare)', () => {
    // Job-wide 20 starts a second; backfill's cap while live work waits is half of it.
    const LIMITS = { startsPerInterval: 20, intervalMs: 1000, safetyMarginMs: 50 };
    const CAP = backfillLimits(LIMITS, 0.5)!;

    /** Consumers on one job-wide limiter key; the backfill cap's grants are recorded at the moments they are for. */
    async function fleet(name: string, count: number) {
      const capGrants: number[] = [];
      return {
        capGrants,
        consumers: await Promise.all(
          Array.from({ length: count }, () => {
            const capLimiter = new DynamoDbRateLimiter({ tableName: LIMITER_TABLE, limits: CAP, clock: clock.now });
            const acquire = capLimiter.acquire.bind(capLimiter);
            jest
              .spyOn(capLimiter, 'acquire')
              .mockImplementation(async (key: string, n: number, options?: AcquireOptions) => {
                const answer = await acquire(key, n, options);
                capGrants.push(...answer.startAtMs.slice(0, answer.granted));
                return answer;
              });
            return consumerFor(name, {
              limiter: new DynamoDbRateLimiter({ tableName: LIMITER_TABLE, limits: LIMITS, clock: clock.now }),
              backfill: { limiter: capLimiter, key: backfillItemKey(name) },
              pacing: { key: name, shortWaitMs: 1_000 },
            });
          }),
        ),
      };
    }

    it('while live work waits, holds backfill to its share in every window, and lets every live record run', async () => {
      const { consumers, capGrants } = await fleet('bf-share', 4);
      const [live, ...backfill] = consumers;
      let liveRecords = 2;
      const liveDeferred = () => live.publisher.sent.length;
      // Live work has started (its first start stamped the limiter item) before the catch-up's records arrive.
      await live.handler(sqsEvent(sqsRecord(body('live-a')), sqsRecord(body('live-b'))), lambdaContext());
      const until = clock.now() + 3_000;
      await clock.concurrently([
        // Live work at about 8 a second, below the allowance: there is room beside it, which backfill may take up to its cap.
        async () => {
          while (clock.now() < until) {
            await clock.sleep(250);
            liveRecords += 2;
            await live.handler(sqsEvent(sqsRecord(body('live-a')), sqsRecord(body('live-b'))), lambdaContext());
          }
        },
        // The catch-up's containers poll at their own paces (40, 53 and 66 ms), so between them backfill asks for a slot
        // every few milliseconds and would take what live work left, 13 in some window, if its cap did not hold it
        // (checked: with the cap at 1,000 a second this test fails).
        ...backfill.map(({ handler }, i) => async () => {
          while (clock.now() < until) {
            await handler(
              sqsEvent(...['b1', 'b2'].map((t) => sqsRecord(body(t, { backfill: true })))),
              lambdaContext(),
            );
            await clock.sleep(40 + 13 * i);
          }
        }),
      ]);

      const backfillApplies = applies.filter((a) => a.backfill);
      // Backfill ran beside live work, more than one window's cap in all (so a cap not held would show)...
      expect(backfillApplies.length).toBeGreaterThan(CAP.startsPerInterval);
      // ...never more than its share of the allowance in any window, by the cap's own grants...
      expect(maxInAnyWindow(capGrants, 1000)).toBeLessThanOrEqual(CAP.startsPerInterval);
      // ...and no backfill record ran without one.
      expect(backfillApplies.length).toBeLessThanOrEqual(capGrants.length);
      // Live work went first: every live record ran in its own invocation, none was deferred for a slot.
      expect(liveDeferred()).toBe(0);
      expect(applies.filter((a) => !a.backfill)).toHaveLength(liveRecords);
    }, 30_000);

    it('with no live work waiting, lets backfill use the whole allowance', async () => {
      const { consumers, capGrants } = await fleet('bf-alone', 2);
      const started = clock.now();
      const until = started + 2_500;
      await clock.concurrently(
        consumers.map(({ handler }) => async () => {
          while (clock.now() < until) {
            await handler(
              sqsEvent(...['b1', 'b2', 'b3', 'b4', 'b5'].map((t) => sqsRecord(body(t, { backfill: true })))),
              lambdaContext(),
            );
            await clock.sleep(POLL_GAP_MS);
          }
        }),
      );
      // Past the cap in some window: the cap is not asked while no live start is stamped.
      expect(capGrants).toHaveLength(0);
      expect(
        maxInAnyWindow(
          applies.filter((a) => a.backfill && a.startMs > started + 500).map((a) => a.startMs),
          1000,
        ),
      ).toBeGreaterThan(CAP.startsPerInterval);
    }, 30_000);

    it('treats a message redriven from the DLQ (it carries the failure reason) as backfill, and keeps the mark when it defers it', async () => {
      const { consumers } = await fleet('bf-redrive', 1);
      const [{ handler, publisher }] = consumers;
      // A live start a moment ago: backfill goes behind it, and this one finds no slot free within the cap's window.
      await new DynamoDbRateLimiter({ tableName: LIMITER_TABLE, limits: LIMITS, clock: clock.now }).acquire(
        'bf-redrive',
        20,
        { maxWaitMs: 5_000 },
      );
      const redriven = sqsRecord(body('r'), {
        messageAttributes: {
          failureReason: {
            stringValue: 'downstream refused',
            dataType: 'String',
            stringListValues: [],
            binaryListValues: [],
          },
        },
      });

      await handler(sqsEvent(redriven), lambdaContext());

      expect(applies).toHaveLength(0);
      expect(publisher.sent).toHaveLength(1);
      expect(JSON.parse(publisher.sent[0].body)).toMatchObject({ backfill: true });
    });
  });

  describe('a busy key, and keys taking turns', () => {
    const keyLimiter = (limiterKey: string, startsPerInterval: number, intervalSeconds: number) =>
      new KeyRateLimiter({
        tableName: LIMITER_TABLE,
        job: limiterKey,
        limiterKey,
        perKey: { field: 'tenant', startsPerInterval, intervalSeconds, burst: 1, headroom: 1 },
        adaptive: false,
        overridesRefreshMs: 0,
        clock: clock.now,
      });

    it('waits inside the function for a key whose next token is close, each record at its own token', async () => {
      // Two starts a second for the key: four records of it all run in this invocation, each at its token, half a second
      // apart (exactly, on the virtual clock: a record starts at its token's moment).
      const { handler, publisher } = await consumerFor('near-token', { keys: keyLimiter('near-token', 2, 1) });

      await handler(sqsEvent(...Array.from({ length: 4 }, () => sqsRecord(body('steady')))), lambdaContext());

      expect(publisher.sent).toHaveLength(0);
      const starts = applies.map((a) => a.startMs).sort((a, b) => a - b);
      expect(starts).toHaveLength(4);
      expect(starts.map((s) => s - starts[0])).toEqual([0, 500, 1_000, 1_500]);
    });

    it("queues a busy key's records one behind the other at the key's rate, each with its tenant as MessageGroupId", async () => {
      // One start every 3 s for the key, beyond the in-function wait: seven records of it come back about 3 s apart,
      // not all at its next token.
      const { handler, publisher } = await consumerFor('busy-queue', { keys: keyLimiter('busy-queue', 1, 3) });

      await handler(sqsEvent(...Array.from({ length: 8 }, () => sqsRecord(body('noisy')))), lambdaContext());

      expect(applies).toHaveLength(1);
      // Each waits for its place in the key's queue plus the paced spread of up to 2 s: the first two at the key's next
      // token (3 s), each one after 3 s behind the one before, so the seventh 6 * 3 s. Without the queue, all seven
      // would wait for the key's next token plus the spread, so 5 s at most. The invocation takes no virtual time, so
      // nothing comes off the places: the bounds are the places themselves.
      const delays = publisher.sent.map((m) => m.delaySeconds ?? 0).sort((a, b) => a - b);
      expect(delays).toHaveLength(7);
      expect(delays[6]).toBeGreaterThanOrEqual(6 * 3);
      expect(delays[3]).toBeGreaterThanOrEqual(3 * 3);
      expect(publisher.sent.every((m) => m.groupId === 'noisy')).toBe(true);
    });

    it('gives the slots of a batch to its keys in turn, not to the key at its head', async () => {
      // Two job-wide slots for a batch whose first four records are one tenant's.
      const { handler } = await consumerFor('turns', {
        limiter: new DynamoDbRateLimiter({
          tableName: LIMITER_TABLE,
          limits: { startsPerInterval: 2, intervalMs: 60_000, burst: 2 },
          clock: clock.now,
        }),
        keys: keyLimiter('turns', 100, 60),
      });

      await handler(
        sqsEvent(...['head', 'head', 'head', 'head', 'tail'].map((t) => sqsRecord(body(t)))),
        lambdaContext(),
      );

      expect(applies.map((a) => a.tenant).sort()).toEqual(['head', 'tail']);
    });
  });
});
