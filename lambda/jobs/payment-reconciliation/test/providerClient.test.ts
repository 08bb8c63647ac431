import { PermanentError, RetryableError, ThrottledError } from '../../../job';
import { HttpProviderClient, ProviderConfigError, type ReconcileRequest } from '../providerClient';
import { type HttpStub, startHttpStub } from '../../../../test/support/httpStub';
import { loggedError } from '../../../../test/support/capturedOutput';

const API_KEY = 'sk_test_very_secret_value';
const NOW = Date.parse('2026-11-29T09:00:00.000Z');
const request: ReconcileRequest = {
  paymentId: 'p/1',
  businessDate: '2026-11-28',
  idempotencyKey: 'reconcile:acme:p/1:2026-11-28',
  timeoutMs: 2_000,
};

const caught = async (promise: Promise<unknown>): Promise<Error> => {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
};

describe('Class: HttpProviderClient', () => {
  let stub: HttpStub;
  let client: HttpProviderClient;

  beforeAll(async () => {
    stub = await startHttpStub();
    client = new HttpProviderClient({ baseUrl: `${stub.url}/`, apiKey: async () => API_KEY, now: () => NOW });
  });
  afterAll(async () => {
    await stub.close();
  });
  beforeEach(() => {
    stub.requests.length = 0;
  });

  describe('Method: constructor', () => {
    it('throws on a base URL that is not a URL', () => {
      expect(() => new HttpProviderClient({ baseUrl: 'nope', apiKey: async () => API_KEY })).toThrow(
        ProviderConfigError,
      );
      expect(() => new HttpProviderClient({ baseUrl: 'nope', apiKey: async () => API_KEY })).toThrow(
        'provider base URL "nope" is not a URL',
      );
    });

    it('throws on a base URL that is not http(s)', () => {
      expect(() => new HttpProviderClient({ baseUrl: 'ftp://x', apiKey: async () => API_KEY })).toThrow(
        'provider base URL "ftp://x" must use http or https',
      );
    });
  });

  describe('Method: reconcile', () => {
    it('posts the business date with the idempotency key and bearer token, and returns the outcome', async () => {
      stub.reply(200, { paymentId: 'p/1', status: 'settled', providerReference: 'prov_1', extra: 'ignored' });
      await expect(client.reconcile(request)).resolves.toEqual({
        paymentId: 'p/1',
        status: 'settled',
        providerReference: 'prov_1',
        replayed: false,
      });
      expect(stub.requests).toHaveLength(1);
      const [sent] = stub.requests;
      expect(sent.method).toBe('POST');
      expect(sent.url).toBe('/v1/payments/p%2F1/reconcile');
      expect(sent.headers['idempotency-key']).toBe('reconcile:acme:p/1:2026-11-28');
      expect(sent.headers.authorization).toBe(`Bearer ${API_KEY}`);
      expect(sent.headers['content-type']).toBe('application/json');
      expect(JSON.parse(sent.body)).toEqual({ businessDate: '2026-11-28' });
    });

    it('reports a replay the provider flags with Idempotent-Replayed', async () => {
      stub.reply(
        201,
        { paymentId: 'p/1', status: 'failed', providerReference: 'prov_2' },
        { 'Idempotent-Replayed': 'true' },
      );
      await expect(client.reconcile(request)).resolves.toEqual({
        paymentId: 'p/1',
        status: 'failed',
        providerReference: 'prov_2',
        replayed: true,
      });
    });

    it('throws ThrottledError with a delta-seconds Retry-After on 429', async () => {
      stub.reply(429, { error: 'slow down' }, { 'Retry-After': '7' });
      const error = await caught(client.reconcile(request));
      expect(error).toEqual(
        new ThrottledError('reconcile call for payment p/1: provider answered 429 (retry after 7000 ms)'),
      );
      expect(error).toBeInstanceOf(ThrottledError);
      expect((error as ThrottledError).retryAfterMs).toBe(7_000);
    });

    it('throws ThrottledError with an HTTP-date Retry-After measured from the clock on 429', async () => {
      stub.reply(429, {}, { 'Retry-After': 'Sun, 29 Nov 2026 09:00:30 GMT' });
      const error = await caught(client.reconcile(request));
      expect((error as ThrottledError).retryAfterMs).toBe(30_000);
    });

    it('throws ThrottledError without a hint on 503 with a junk Retry-After', async () => {
      stub.reply(503, {}, { 'Retry-After': 'soon' });
      const error = await caught(client.reconcile(request));
      expect(error).toBeInstanceOf(ThrottledError);
      expect(error.message).toBe('reconcile call for payment p/1: provider answered 503');
      expect((error as ThrottledError).retryAfterMs).toBeUndefined();
    });

    it.each([500, 502, 504, 408])('throws RetryableError on %i', async (status) => {
      stub.reply(status, { error: 'boom' });
      const error = await caught(client.reconcile(request));
      expect(error).toBeInstanceOf(RetryableError);
      expect(error.message).toBe(`reconcile call for payment p/1: provider answered ${status}: {"error":"boom"}`);
    });

    it.each([400, 404, 409, 422, 401])(
      'throws PermanentError with the status and a body excerpt on %i',
      async (status) => {
        stub.reply(status, { error: 'no such payment' });
        const error = await caught(client.reconcile(request));
        expect(error).toBeInstanceOf(PermanentError);
        expect(error.message).toBe(
          `reconcile call for payment p/1: provider answered ${status}: {"error":"no such payment"}`,
        );
        expect((error as PermanentError).detail).toEqual({ status, body: '{"error":"no such payment"}' });
      },
    );

    it('redacts the API key from an echoed body and cuts the excerpt short', async () => {
      stub.reply(400, `bad token ${API_KEY} ${'x'.repeat(300)}`);
      const error = await caught(client.reconcile(request));
      expect(error.message).not.toContain(API_KEY);
      expect((error as PermanentError).detail.body).toBe(
        `bad token [redacted] ${'x'.repeat(200 - 'bad token [redacted] '.length)}...`,
      );
    });

    it('throws PermanentError on a redirect instead of following it with the token', async () => {
      stub.reply(302, '', { location: 'http://elsewhere.invalid/' });
      const error = await caught(client.reconcile(request));
      expect(error).toEqual(new PermanentError('reconcile call for payment p/1: provider answered 302: (empty body)'));
      expect(stub.requests).toHaveLength(1);
    });

    it('throws RetryableError on a 200 whose body is not JSON', async () => {
      stub.reply(200, 'not json');
      await expect(client.reconcile(request)).rejects.toThrow(
        new RetryableError('reconcile call for payment p/1: provider answered 200 with a body that is not JSON'),
      );
    });

    it('throws RetryableError on a 200 whose body lacks the outcome', async () => {
      stub.reply(200, { paymentId: 'p/1' });
      await expect(client.reconcile(request)).rejects.toThrow(
        'reconcile call for payment p/1: provider answered 200 with an unexpected body (status, providerReference)',
      );
    });

    it('throws PermanentError when the provider answers about another payment', async () => {
      stub.reply(200, { paymentId: 'p/2', status: 'settled', providerReference: 'r' });
      await expect(client.reconcile(request)).rejects.toThrow(
        new PermanentError('reconcile call for payment p/1: provider answered about payment p/2'),
      );
    });

    it('throws RetryableError on 202 without an outcome', async () => {
      stub.reply(202, {});
      await expect(client.reconcile(request)).rejects.toThrow(
        new RetryableError('reconcile call for payment p/1: provider answered 202 without an outcome'),
      );
    });

    it('throws RetryableError when the provider does not answer within the timeout', async () => {
      stub.handle(() => undefined);
      const error = await caught(client.reconcile({ ...request, timeoutMs: 150 }));
      expect(error).toEqual(new RetryableError('reconcile call for payment p/1 timed out after 150 ms'));
      expect(error).toBeInstanceOf(RetryableError);
    });

    it('throws RetryableError on a network error, without the API key', async () => {
      const closed = await startHttpStub();
      await closed.close();
      const offline = new HttpProviderClient({ baseUrl: closed.url, apiKey: async () => API_KEY });
      const error = await caught(offline.reconcile(request));
      expect(error).toBeInstanceOf(RetryableError);
      expect(error.message).toContain('reconcile call for payment p/1 failed: fetch failed: connect ECONNREFUSED');
      expect(error.message).not.toContain(API_KEY);
    });

    it('keeps no error in the chain that quotes a key holding a newline, as the logger prints the chain', async () => {
      // A key that escaped validation: fetch refuses the header and its error quotes the header value, key and all.
      const key = 'sk_live_NewlineHeadPart\nsk_live_NewlineTailPart';
      const broken = new HttpProviderClient({ baseUrl: stub.url, apiKey: async () => key });
      const error = await caught(broken.reconcile(request));
      expect(error).toBeInstanceOf(RetryableError);
      expect(error.message).toBe(
        'reconcile call for payment p/1 failed: Headers.append: "Bearer [redacted]" is an invalid header value.',
      );
      const cause = error.cause as Error;
      expect({ name: cause.name, message: cause.message, cause: cause.cause }).toEqual({
        name: 'TypeError',
        message: 'Headers.append: "Bearer [redacted]" is an invalid header value.',
        cause: undefined,
      });
      const logged = loggedError(error);
      expect(logged).toContain('Bearer [redacted]');
      for (const form of [key, JSON.stringify(key).slice(1, -1), ...key.split('\n')])
        expect(logged).not.toContain(form);
      expect(stub.requests).toHaveLength(0);
    });

    it("keeps the timeout's type as the cause, not the abort error itself", async () => {
      stub.handle(() => undefined);
      const error = await caught(client.reconcile({ ...request, timeoutMs: 150 }));
      const cause = error.cause as Error;
      expect({ name: cause.name, message: cause.message, cause: cause.cause }).toEqual({
        name: 'TimeoutError',
        message: 'The operation was aborted due to timeout',
        cause: undefined,
      });
    });

    it('passes a failure to read the API key through unchanged', async () => {
      const keyless = new HttpProviderClient({
        baseUrl: stub.url,
        apiKey: async () => {
          throw new Error('no key');
        },
      });
      await expect(keyless.reconcile(request)).rejects.toThrow(new Error('no key'));
      expect(stub.requests).toHaveLength(0);
    });
  });
});
