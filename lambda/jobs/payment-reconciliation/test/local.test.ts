import type { BatchWriteCommand, DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { createDeps, job } from '..';
import { fixture } from '../local';
import { FixtureError, loadFixture, type FakeDownstream } from '../../../../local/fixture';
import { waitFor } from '../../../../local/waitFor';
import { discoverAll, runtimeSettings, scanAll, useFixtureServers } from '../../../../test/support/jobs';
import { TABLES } from './tables';

const DATE = '2026-11-28';
const TABLE = TABLES.payments.name;
const settings = (over: Parameters<typeof runtimeSettings>[0] = {}) =>
  runtimeSettings({
    jobName: 'payment-reconciliation',
    tables: { payments: TABLE },
    secrets: { apiKey: 'paced-jobs/test/provider-api-key' },
    settings: { provider: 'acme', providerBaseUrl: 'https://api.payments.example.com' },
    ...over,
  });

const post = (endpoint: string, paymentId: string, key: string) =>
  fetch(`${endpoint}/v1/payments/${paymentId}/reconcile`, {
    method: 'POST',
    headers: { authorization: 'Bearer k1', 'idempotency-key': key },
    body: '{}',
  });

describe('Fixture: payment-reconciliation', () => {
  const servers = useFixtureServers({
    jobName: 'payment-reconciliation',
    settings: () => settings(),
    businessDate: DATE,
    tables: [TABLES.payments],
  });
  const context = servers.context;

  it("loads through the local tools' loader by the job's folder name", () => {
    expect(loadFixture(process.cwd(), 'payment-reconciliation')).toBe(fixture);
    expect(fixture).toMatchObject({ unit: 'payments', defaultCount: 40 });
  });

  describe('Method: seed', () => {
    it('writes unsettled payments the job discovers on the business date, one expected operation each', async () => {
      const seeded = await fixture.seed(context(), 60);
      expect(seeded.summary).toBe('60 payments');
      expect(seeded.expectedOperations).toHaveLength(60);
      expect(new Set(seeded.expectedOperations).size).toBe(60);
      const items = await scanAll(servers.documents(), TABLE);
      expect(items.map((i) => i.paymentId).sort()).toEqual([...seeded.expectedOperations].sort());
      expect(items.every((i) => i.unsettledDate === DATE)).toBe(true);
      const { operations } = await discoverAll(job, createDeps(settings()), {
        businessDate: DATE,
        pageSize: 25,
        now: new Date('2026-11-29T02:00:00.000Z'),
      });
      expect(operations.map((o) => fixture.operationKeyOf(o.resource)).sort()).toEqual(
        [...seeded.expectedOperations].sort(),
      );
    });

    it('throws naming the missing table alias', async () => {
      await expect(fixture.seed(context({ settings: settings({ tables: {} }) }), 1)).rejects.toThrow(
        new FixtureError(
          'job payment-reconciliation has no tables.payments in its JOB_SETTINGS; cannot seed it',
          'payment-reconciliation',
        ),
      );
    });

    it('resends the items BatchWrite hands back as unprocessed', async () => {
      const sent: BatchWriteCommand['input'][] = [];
      const flaky = {
        send: async (command: BatchWriteCommand) => {
          sent.push(structuredClone(command.input));
          if (sent.length > 1) return {};
          return { UnprocessedItems: { [TABLE]: command.input.RequestItems![TABLE].slice(0, 2) } };
        },
      } as unknown as DynamoDBDocumentClient;
      await fixture.seed(context({ documents: flaky }), 3);
      expect(sent).toHaveLength(2);
      expect(sent[1].RequestItems![TABLE].map((r) => r.PutRequest?.Item?.paymentId)).toEqual([
        `pay-${DATE}-0001`,
        `pay-${DATE}-0002`,
      ]);
    });

    it('gives up when items stay unprocessed', async () => {
      let calls = 0;
      const stuck = {
        send: async (command: BatchWriteCommand) => {
          calls += 1;
          return { UnprocessedItems: command.input.RequestItems };
        },
      } as unknown as DynamoDBDocumentClient;
      await expect(fixture.seed(context({ documents: stuck }), 1)).rejects.toThrow(
        `table ${TABLE}: items still unprocessed after 10 retries`,
      );
      expect(calls).toBe(11);
    });
  });

  describe('Method: downstream', () => {
    let provider: FakeDownstream | undefined;
    afterEach(async () => {
      await provider?.close();
      provider = undefined;
    });

    it("takes its quota from the job's effective rate limit and concurrency", async () => {
      provider = fixture.downstream!(
        settings({ rateLimit: { startsPerInterval: 2, intervalSeconds: 30, burst: 2 }, concurrency: 5 }),
        { latencyMs: 1 },
      );
      await provider.start();
      expect((await post(provider.endpoint, 'a', 'a')).status).toBe(200);
      expect((await post(provider.endpoint, 'b', 'b')).status).toBe(200);
      const third = await post(provider.endpoint, 'c', 'c');
      expect(third.status).toBe(429);
      expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(29);
      expect(Number(third.headers.get('retry-after'))).toBeLessThanOrEqual(30);
    });

    it("limits requests in progress to the job's concurrency", async () => {
      provider = fixture.downstream!(settings({ concurrency: 1 }), { latencyMs: 300 });
      await provider.start();
      const slow = post(provider.endpoint, 'a', 'a');
      const started = provider;
      await waitFor('the first request in progress', () => started.arrivals.length === 1, {
        timeoutMs: 2_000,
        intervalMs: 5,
      });
      expect((await post(provider.endpoint, 'b', 'b')).status).toBe(429);
      expect((await slow).status).toBe(200);
    });

    it('takes the quota the run names instead, and the port', async () => {
      const probe = fixture.downstream!(settings(), {});
      await probe.start();
      const port = Number(new URL(probe.endpoint).port);
      await probe.close();
      provider = fixture.downstream!(settings({ rateLimit: { startsPerInterval: 1, intervalSeconds: 60, burst: 1 } }), {
        quota: { startsPerWindow: 3 },
        latencyMs: 1,
        port,
      });
      await provider.start();
      expect(provider.endpoint).toBe(`http://127.0.0.1:${port}`);
      const statuses = [];
      for (const id of ['a', 'b', 'c', 'd']) statuses.push((await post(provider.endpoint, id, id)).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
    });
  });

  describe('Method: effects', () => {
    let provider: FakeDownstream;
    beforeEach(async () => {
      provider = fixture.downstream!(settings(), { latencyMs: 1 });
      await provider.start();
      provider.allowSecret('k1');
    });
    afterEach(async () => {
      await provider.close();
    });

    it("counts the provider's settlements per payment, every request as a start, and flags payments not seeded", async () => {
      const seeded = { expectedOperations: ['pay-1', 'pay-2', 'pay-3'], summary: '3 payments' };
      provider.setFaults(({ operationKey }) =>
        operationKey === 'pay-3' ? { kind: 'throttle', retryAfterSeconds: 1 } : undefined,
      );
      expect((await post(provider.endpoint, 'pay-1', 'op-1')).status).toBe(200);
      expect((await post(provider.endpoint, 'pay-1', 'op-1')).headers.get('idempotent-replayed')).toBe('true');
      expect((await post(provider.endpoint, 'pay-2', 'op-2')).status).toBe(200);
      expect((await post(provider.endpoint, 'pay-2', 'op-2-again')).status).toBe(200);
      expect((await post(provider.endpoint, 'pay-3', 'op-3')).status).toBe(429);
      expect((await post(provider.endpoint, 'pay-x', 'op-x')).status).toBe(200);

      const reading = fixture.effects({ settings: settings(), seeded, writes: [], downstream: provider });
      expect(reading.effectsByOperation).toEqual(
        new Map([
          ['pay-1', 1],
          ['pay-2', 2],
          ['pay-x', 1],
        ]),
      );
      expect(reading.starts).toEqual(provider.arrivals.map((a) => a.at));
      expect(reading.starts).toHaveLength(6);
      expect(reading.throttled).toBe(1);
      expect(reading.unexpectedEffects).toEqual(['pay-x']);
      expect(reading.effectsByItem).toBeUndefined();
    });

    it('throws when no provider is handed in', () => {
      expect(() =>
        fixture.effects({ settings: settings(), seeded: { expectedOperations: [], summary: '' }, writes: [] }),
      ).toThrow(
        'job payment-reconciliation: its effects are read off its fake payment provider, and none was handed in',
      );
    });
  });

  describe('Method: operationKeyOf', () => {
    it('is the payment ID of a valid resource, and undefined otherwise', () => {
      expect(fixture.operationKeyOf({ paymentId: `pay-${DATE}-0001` })).toBe(`pay-${DATE}-0001`);
      expect(fixture.operationKeyOf({})).toBeUndefined();
      expect(fixture.operationKeyOf({ paymentId: 'p1', extra: 'x' })).toBeUndefined();
    });
  });
});
