import { PaymentProvider } from '../localProvider';
import { runtimeSettings } from '../../../../test/support/jobs';
import { waitFor } from '../../../../local/waitFor';

const post = (endpoint: string, paymentId: string, headers: Record<string, string>) =>
  fetch(`${endpoint}/v1/payments/${paymentId}/reconcile`, {
    method: 'POST',
    headers: { authorization: 'Bearer k1', ...headers },
    body: '{}',
  });

describe('Class: PaymentProvider', () => {
  let provider: PaymentProvider;
  afterEach(async () => {
    await provider.close();
  });

  describe('Method: start', () => {
    it('settles a payment once and replays the first result for the same Idempotency-Key', async () => {
      provider = new PaymentProvider({ startsPerWindow: 10, maxConcurrent: 5, apiKeys: ['k1'], latencyMs: 1 });
      await provider.start();
      const first = await post(provider.endpoint, 'p1', { 'idempotency-key': 'op-1' });
      const firstBody = (await first.json()) as Record<string, unknown>;
      expect(first.status).toBe(200);
      expect(firstBody).toEqual({
        paymentId: 'p1',
        status: 'settled',
        providerReference: expect.stringMatching(/^prov_/),
      });
      const again = await post(provider.endpoint, 'p1', { 'idempotency-key': 'op-1' });
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.json()).toEqual(firstBody);
      expect(provider.effects).toEqual([
        {
          at: expect.any(Number),
          operationKey: 'p1',
          idempotencyKey: 'op-1',
          providerReference: firstBody.providerReference,
        },
      ]);
      expect(provider.replays).toBe(1);
      expect(provider.arrivals.map((a) => [a.operationKey, a.status, a.replayed])).toEqual([
        ['p1', 200, undefined],
        ['p1', 200, true],
      ]);
    });

    it('answers 400 without an Idempotency-Key and 401 with a wrong token', async () => {
      provider = new PaymentProvider({ startsPerWindow: 10, maxConcurrent: 5, apiKeys: ['k1'], latencyMs: 1 });
      await provider.start();
      const missing = await post(provider.endpoint, 'p1', {});
      expect(missing.status).toBe(400);
      expect(await missing.json()).toEqual({ message: 'Idempotency-Key header is required' });
      const wrong = await post(provider.endpoint, 'p1', { authorization: 'Bearer nope', 'idempotency-key': 'x' });
      expect(wrong.status).toBe(401);
      expect(provider.effects).toHaveLength(0);
    });

    it('answers 404 for another route', async () => {
      provider = new PaymentProvider({ startsPerWindow: 10, maxConcurrent: 5, latencyMs: 1 });
      await provider.start();
      const res = await fetch(`${provider.endpoint}/v1/payments/p1`, { method: 'GET' });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ message: 'no route for GET /v1/payments/p1' });
      expect(provider.arrivals).toHaveLength(0);
    });

    it('answers 429 with Retry-After beyond R starts per window', async () => {
      provider = new PaymentProvider({
        startsPerWindow: 2,
        windowSeconds: 30,
        maxConcurrent: 5,
        apiKeys: ['k1'],
        latencyMs: 1,
      });
      await provider.start();
      expect((await post(provider.endpoint, 'a', { 'idempotency-key': 'a' })).status).toBe(200);
      expect((await post(provider.endpoint, 'b', { 'idempotency-key': 'b' })).status).toBe(200);
      const third = await post(provider.endpoint, 'c', { 'idempotency-key': 'c' });
      expect(third.status).toBe(429);
      expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(29);
      expect(Number(third.headers.get('retry-after'))).toBeLessThanOrEqual(30);
      expect(provider.throttled).toBe(1);
      expect(provider.maxStartsInAnyWindow()).toBe(3);
    });

    it('answers 429 beyond C concurrent requests', async () => {
      provider = new PaymentProvider({ startsPerWindow: 100, maxConcurrent: 1, apiKeys: ['k1'], latencyMs: 300 });
      await provider.start();
      const slow = post(provider.endpoint, 'a', { 'idempotency-key': 'a' });
      await waitFor('the first request in progress', () => provider.arrivals.length === 1, {
        timeoutMs: 2_000,
        intervalMs: 5,
      });
      const second = await post(provider.endpoint, 'b', { 'idempotency-key': 'b' });
      expect(second.status).toBe(429);
      expect(second.headers.get('retry-after')).toBe('1');
      expect((await slow).status).toBe(200);
    });

    it('answers 409 to a request whose Idempotency-Key is still in progress, without a second effect', async () => {
      provider = new PaymentProvider({ startsPerWindow: 100, maxConcurrent: 5, apiKeys: ['k1'], latencyMs: 300 });
      await provider.start();
      const slow = post(provider.endpoint, 'a', { 'idempotency-key': 'op-a' });
      await waitFor('the first request in progress', () => provider.arrivals.length === 1, {
        timeoutMs: 2_000,
        intervalMs: 5,
      });
      const retry = await post(provider.endpoint, 'a', { 'idempotency-key': 'op-a' });
      expect(retry.status).toBe(409);
      expect(await retry.json()).toEqual({ message: 'a request with Idempotency-Key op-a is in progress' });
      expect((await slow).status).toBe(200);
      expect(provider.effects).toHaveLength(1);
    });

    it('fails naming the port when it is taken', async () => {
      const holder = new PaymentProvider({ startsPerWindow: 1, maxConcurrent: 1 });
      await holder.start();
      const port = Number(new URL(holder.endpoint).port);
      provider = new PaymentProvider({ startsPerWindow: 1, maxConcurrent: 1, port });
      try {
        await expect(provider.start()).rejects.toThrow(
          `port ${port} on 127.0.0.1 is already in use (payment provider)`,
        );
      } finally {
        await holder.close();
      }
    });
  });

  describe('Method: allowSecret', () => {
    it('accepts any non-empty token until a secret is allowed, then only the allowed ones', async () => {
      provider = new PaymentProvider({ startsPerWindow: 10, maxConcurrent: 5, latencyMs: 1 });
      await provider.start();
      expect(
        (await post(provider.endpoint, 'p1', { authorization: 'Bearer anything', 'idempotency-key': 'a' })).status,
      ).toBe(200);
      expect((await post(provider.endpoint, 'p1', { authorization: 'Bearer ', 'idempotency-key': 'b' })).status).toBe(
        401,
      );
      provider.allowSecret('generated-secret');
      expect(
        (await post(provider.endpoint, 'p1', { authorization: 'Bearer anything', 'idempotency-key': 'c' })).status,
      ).toBe(401);
      expect(
        (await post(provider.endpoint, 'p1', { authorization: 'Bearer generated-secret', 'idempotency-key': 'd' }))
          .status,
      ).toBe(200);
    });
  });

  describe('Method: configure', () => {
    it('points a copy of the settings at its endpoint and leaves the original as it was', async () => {
      provider = new PaymentProvider({ startsPerWindow: 10, maxConcurrent: 5 });
      await provider.start();
      const settings = runtimeSettings({
        jobName: 'payment-reconciliation',
        settings: { provider: 'acme', providerBaseUrl: 'https://api.payments.example.com' },
      });
      const configured = provider.configure(settings);
      expect(configured).toEqual({ ...settings, settings: { provider: 'acme', providerBaseUrl: provider.endpoint } });
      expect(settings.settings.providerBaseUrl).toBe('https://api.payments.example.com');
    });

    it('throws before the provider is started', () => {
      provider = new PaymentProvider({ startsPerWindow: 10, maxConcurrent: 5 });
      expect(() => provider.configure(runtimeSettings({}))).toThrow('the payment provider is not started');
    });
  });
});
