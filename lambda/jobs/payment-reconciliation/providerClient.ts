// The payment provider's HTTP edge: one reconcile call, with the provider's answers mapped onto the outcome rules.
import * as z from 'zod/mini';
import {
  PacedJobsError,
  parseRetryAfter,
  PermanentError,
  redactValue,
  RetryableError,
  sanitizedCause,
  ThrottledError,
  type SecretGetter,
} from '../../job';

export interface ReconcileRequest {
  paymentId: string;
  businessDate: string;
  /** Sent as Idempotency-Key, so the provider absorbs our retries: the operation ID. */
  idempotencyKey: string;
  /** The request, body included, is aborted after this long. */
  timeoutMs: number;
}

export interface ReconcileResult {
  paymentId: string;
  /** The provider's outcome for the payment, e.g. 'settled' or 'failed'. */
  status: string;
  providerReference: string;
  /** The provider said this answer replays an earlier request with the same Idempotency-Key. */
  replayed: boolean;
}

/** The slice of the provider's API the reconciliation job uses. */
export interface ProviderClient {
  /**
   * @throws ThrottledError on 429/503 (with the Retry-After hint when usable), RetryableError on other 5xx, timeouts,
   * network errors and unreadable success bodies, PermanentError on a 4xx or an answer about another payment.
   */
  reconcile(request: ReconcileRequest): Promise<ReconcileResult>;
}

export interface HttpProviderClientOptions {
  /** e.g. https://api.payments.example.com; must be http(s). */
  baseUrl: string;
  /** The API key, read at call time (never held in config or the environment). */
  apiKey: SecretGetter;
  /** @default globalThis.fetch */
  fetch?: typeof fetch;
  /** Clock for HTTP-date Retry-After values. @default Date.now */
  now?: () => number;
}

/** How much of an error body is kept for the operator; enough to read the provider's reason, not a dump. */
export const ERROR_BODY_EXCERPT_CHARS = 200;

const responseSchema = z.object({
  paymentId: z.string().check(z.minLength(1), z.maxLength(128)),
  status: z.string().check(z.regex(/^[A-Za-z][A-Za-z0-9_-]{0,31}$/)),
  providerReference: z.string().check(z.minLength(1), z.maxLength(256)),
});

export class ProviderConfigError extends PacedJobsError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ProviderConfigError';
  }
}

export class HttpProviderClient implements ProviderClient {
  private readonly baseUrl: string;
  private readonly fetchFn: typeof fetch;
  private readonly now: () => number;

  constructor(private readonly options: HttpProviderClientOptions) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch (error) {
      throw new ProviderConfigError(`provider base URL ${JSON.stringify(options.baseUrl)} is not a URL`, {
        cause: error,
      });
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw new ProviderConfigError(`provider base URL ${JSON.stringify(options.baseUrl)} must use http or https`);
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.fetchFn = options.fetch ?? globalThis.fetch;
    this.now = options.now ?? Date.now;
  }

  async reconcile(request: ReconcileRequest): Promise<ReconcileResult> {
    const { paymentId, timeoutMs } = request;
    const apiKey = await this.options.apiKey();
    const url = `${this.baseUrl}/v1/payments/${encodeURIComponent(paymentId)}/reconcile`;
    const signal = AbortSignal.timeout(timeoutMs);
    const what = `reconcile call for payment ${paymentId}`;
    try {
      const response = await this.fetchFn(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          'idempotency-key': request.idempotencyKey,
          authorization: `Bearer ${apiKey}`,
        },
        body: JSON.stringify({ businessDate: request.businessDate }),
        // A redirect would carry the bearer token to wherever it points; the provider's API has no reason to redirect.
        redirect: 'manual',
        signal,
      });
      const text = await response.text();
      return this.interpret(what, paymentId, response, text, apiKey);
    } catch (error) {
      if (error instanceof ThrottledError || error instanceof RetryableError || error instanceof PermanentError)
        throw error;
      // The client's own error is never kept as the cause: it can quote the request (undici quotes a header it
      // refuses, key and all), and the logger prints a cause in full. Its type and redacted message are kept.
      const reason = redact(causeMessage(error), apiKey);
      if (signal.aborted)
        throw new RetryableError(`${what} timed out after ${timeoutMs} ms`, { cause: sanitizedCause(error, reason) });
      throw new RetryableError(`${what} failed: ${reason}`, { cause: sanitizedCause(error, reason) });
    }
  }

  private interpret(
    what: string,
    paymentId: string,
    response: Response,
    text: string,
    apiKey: string,
  ): ReconcileResult {
    const status = response.status;
    if (status === 200 || status === 201) {
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        // A cut-off body (a proxy, a deploy) is worth another try: the Idempotency-Key makes the retry safe.
        throw new RetryableError(`${what}: provider answered ${status} with a body that is not JSON`);
      }
      const parsed = responseSchema.safeParse(body);
      if (!parsed.success) {
        throw new RetryableError(
          `${what}: provider answered ${status} with an unexpected body (${parsed.error.issues.map((i) => i.path.join('.') || 'body').join(', ')})`,
        );
      }
      if (parsed.data.paymentId !== paymentId) {
        throw new PermanentError(`${what}: provider answered about payment ${parsed.data.paymentId}`, {
          status,
          answeredFor: parsed.data.paymentId,
        });
      }
      return { ...parsed.data, replayed: (response.headers.get('idempotent-replayed') ?? '').toLowerCase() === 'true' };
    }
    const body = excerpt(redact(text, apiKey));
    if (status === 429 || status === 503) {
      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), this.now());
      throw new ThrottledError(
        `${what}: provider answered ${status}${retryAfterMs === undefined ? '' : ` (retry after ${retryAfterMs} ms)`}`,
        retryAfterMs,
      );
    }
    // 408 is the provider timing us out: as transient as our own timeout.
    if (status >= 500 || status === 408) {
      throw new RetryableError(`${what}: provider answered ${status}: ${body}`);
    }
    if (status >= 400 || (status >= 300 && status < 400)) {
      throw new PermanentError(`${what}: provider answered ${status}: ${body}`, { status, body });
    }
    // 202/204 and the like: the provider has not given an outcome yet.
    throw new RetryableError(`${what}: provider answered ${status} without an outcome`);
  }
}

// Duck-typed, not instanceof: fetch's errors may come from another realm (a test VM, a bundled undici).
function messageOf(value: unknown): string | undefined {
  const message = (value as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : undefined;
}

function causeMessage(error: unknown): string {
  const cause = messageOf((error as { cause?: unknown } | null)?.cause);
  return `${messageOf(error) ?? String(error)}${cause === undefined ? '' : `: ${cause}`}`;
}

function redact(text: string, secret: string): string {
  return redactValue(text, secret, '[redacted]');
}

function excerpt(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat === '') return '(empty body)';
  return flat.length > ERROR_BODY_EXCERPT_CHARS ? `${flat.slice(0, ERROR_BODY_EXCERPT_CHARS)}...` : flat;
}
