import type { DownstreamFault } from '../../../../local/fixture';
import { waitFor } from '../../../../local/waitFor';
import { PaymentProvider } from '../localProvider';

const post = (endpoint: string, paymentId: string, key: string, signal?: AbortSignal) =>
  fetch(`${endpoint}/v1/payments/${paymentId}/reconcile`, {
    method: 'POST',
    headers: { authorization: 'Bearer k1', 'idempotency-key': key },
    body: '{}',
    signal,
  });

describe('Class: PaymentProvider', () => {
  let provider: PaymentProvider;
  let next: DownstreamFault | undefined;
  const asked: { operationKey: string; idempotencyKey: string }[] = [];
  beforeEach(async () => {
    next = undefined;
    asked.length = 0;
    provider = new PaymentProvider({ startsPerWindow: 100, maxConcurrent: 5, apiKeys: ['k1'], latencyMs: 1 });
    provider.setFaults(({ operationKey, idempotencyKey }) => {
      asked.push({ operationKey, idempotencyKey });
      return next;
    });
    await provider.start();
  });
  afterEach(async () => {
    await provider.close();
  });

  describe('Method: setFaults', () => {
    it('asks the policy once per request with the payment ID as operation key, and stops asking when cleared', async () => {
      expect((await post(provider.endpoint, 'p1', 'op-1')).status).toBe(200);
      expect(asked).toEqual([{ operationKey: 'p1', idempotencyKey: 'op-1' }]);
      next = { kind: 'error', status: 503 };
      provider.setFaults(undefined);
      expect((await post(provider.endpoint, 'p2', 'op-2')).status).toBe(200);
      expect(asked).toHaveLength(1);
    });

    it('answers an injected throttle with 429 and Retry-After, without a start or an effect', async () => {
      next = { kind: 'throttle', retryAfterSeconds: 2 };
      const res = await post(provider.endpoint, 'p1', 'op-1');
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(await res.json()).toEqual({ message: 'injected throttle' });
      expect(provider.effects).toHaveLength(0);
      expect(provider.throttled).toBe(1);
      expect(provider.arrivals).toEqual([
        expect.objectContaining({ operationKey: 'p1', status: 429, fault: 'throttle' }),
      ]);
    });

    it('answers an injected 5xx before the effect, so a retry applies once', async () => {
      next = { kind: 'error', status: 502 };
      expect((await post(provider.endpoint, 'p1', 'op-1')).status).toBe(502);
      next = undefined;
      expect((await post(provider.endpoint, 'p1', 'op-1')).status).toBe(200);
      expect(provider.effects).toHaveLength(1);
      expect(provider.replays).toBe(0);
    });

    it('applies the effect then holds the answer, and replays it to a retry meanwhile', async () => {
      next = { kind: 'hangAfterEffect', delayMs: 5000 };
      const abort = new AbortController();
      const first = post(provider.endpoint, 'p1', 'op-1');
      void first.catch(() => undefined);
      const hung = post(provider.endpoint, 'p1', 'op-2', abort.signal).catch((e: Error) => e.name);
      await waitFor('both effects applied', () => provider.effects.length === 2, { timeoutMs: 2_000, intervalMs: 5 });
      expect(provider.effects.map((e) => e.idempotencyKey).sort()).toEqual(['op-1', 'op-2']);
      abort.abort();
      expect(await hung).toBe('AbortError');
      next = undefined;
      const retry = await post(provider.endpoint, 'p1', 'op-2');
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(provider.effects).toHaveLength(2);
      expect(provider.arrivals.filter((a) => a.replayed)).toHaveLength(1);
    });

    it('drops a request before the effect by closing the connection', async () => {
      next = { kind: 'dropBeforeEffect', delayMs: 10 };
      await expect(post(provider.endpoint, 'p1', 'op-1')).rejects.toThrow('fetch failed');
      expect(provider.effects).toHaveLength(0);
      expect(provider.arrivals).toEqual([expect.objectContaining({ status: 0, fault: 'dropBeforeEffect' })]);
    });

    it('adds latency before the effect for a slow answer', async () => {
      // Seen by order, not by a stopwatch: the request has arrived and is not answered, and its effect is not there
      // yet; then the answer comes, with the effect. The delay is long beside the arrival's poll (5 ms) so the look in
      // between lands inside it even on a loaded machine.
      next = { kind: 'slow', delayMs: 1_000 };
      let answered = false;
      const answer = post(provider.endpoint, 'p1', 'op-1').then((res) => {
        answered = true;
        return res;
      });
      await waitFor('the slow request arrived', () => provider.arrivals.length === 1, {
        timeoutMs: 2_000,
        intervalMs: 5,
      });
      expect(provider.arrivals[0]).toEqual(expect.objectContaining({ status: 200, fault: 'slow' }));
      expect(answered).toBe(false);
      expect(provider.effects).toHaveLength(0);
      expect((await answer).status).toBe(200);
      expect(provider.effects).toHaveLength(1);
    });
  });
});
