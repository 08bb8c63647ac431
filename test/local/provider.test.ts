import { maxInAnyWindow, PaymentProvider } from '../../local/provider';

const post = (endpoint: string, paymentId: string, headers: Record<string, string>) =>
  fetch(`${endpoint}/v1/payments/${paymentId}/reconcile`, { method: 'POST', headers: { authorization: 'Bearer k1', ...headers }, body: '{}' });

describe('Class: PaymentProvider', () => {
  let provider: PaymentProvider;
  afterEach(async () => {
    await provider.close();
  });

  describe('Method: start', () => {
    it('settles a payment once and replays the first result for the same Idempotency-Key', async () => {
      provider = new PaymentProvider({ startsPerWindow: 10, maxConcurrent: 5, apiKeys: ['k1'], latencyMs: 1 });
      const endpoint = await provider.start();
      const first = await post(endpoint, 'p1', { 'idempotency-key': 'op-1' });
      const firstBody = await first.json();
      expect(first.status).toBe(200);
      expect(firstBody).toEqual({ paymentId: 'p1', status: 'settled', providerReference: expect.stringMatching(/^prov_/) });
      const again = await post(endpoint, 'p1', { 'idempotency-key': 'op-1' });
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.json()).toEqual(firstBody);
      expect(provider.effects).toHaveLength(1);
      expect(provider.replays).toBe(1);
      expect(provider.effectsByPayment().get('p1')).toBe(1);
    });

    it('answers 400 without an Idempotency-Key and 401 with a wrong token', async () => {
      provider = new PaymentProvider({ startsPerWindow: 10, maxConcurrent: 5, apiKeys: ['k1'], latencyMs: 1 });
      const endpoint = await provider.start();
      const missing = await post(endpoint, 'p1', {});
      expect(missing.status).toBe(400);
      expect(await missing.json()).toEqual({ message: 'Idempotency-Key header is required' });
      const wrong = await post(endpoint, 'p1', { authorization: 'Bearer nope', 'idempotency-key': 'x' });
      expect(wrong.status).toBe(401);
      expect(provider.effects).toHaveLength(0);
    });

    it('answers 429 with Retry-After beyond R starts per window', async () => {
      provider = new PaymentProvider({ startsPerWindow: 2, windowSeconds: 30, maxConcurrent: 5, apiKeys: ['k1'], latencyMs: 1 });
      const endpoint = await provider.start();
      expect((await post(endpoint, 'a', { 'idempotency-key': 'a' })).status).toBe(200);
      expect((await post(endpoint, 'b', { 'idempotency-key': 'b' })).status).toBe(200);
      const third = await post(endpoint, 'c', { 'idempotency-key': 'c' });
      expect(third.status).toBe(429);
      expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(29);
      expect(Number(third.headers.get('retry-after'))).toBeLessThanOrEqual(30);
      expect(provider.throttled).toBe(1);
      expect(provider.maxStartsInAnyWindow()).toBe(3);
    });

    it('answers 429 beyond C concurrent requests', async () => {
      provider = new PaymentProvider({ startsPerWindow: 100, maxConcurrent: 1, apiKeys: ['k1'], latencyMs: 300 });
      const endpoint = await provider.start();
      const slow = post(endpoint, 'a', { 'idempotency-key': 'a' });
      await new Promise((r) => setTimeout(r, 100));
      const second = await post(endpoint, 'b', { 'idempotency-key': 'b' });
      expect(second.status).toBe(429);
      expect(second.headers.get('retry-after')).toBe('1');
      expect((await slow).status).toBe(200);
    });
  });
});

describe('Function: maxInAnyWindow', () => {
  it('counts the busiest window, not fixed buckets', () => {
    // Fixed 1000 ms buckets would see 2 and 2; the window [900, 1900) holds 4.
    expect(maxInAnyWindow([0, 900, 950, 1000, 1100, 2500], 1000)).toBe(4);
  });
});
