import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { resetClients } from '../../../adapters/clients';
import {
  encodeCursor,
  InvalidCursorError,
  InvalidOperationIdError,
  PermanentError,
  RetryableError,
  SettingsError,
  ThrottledError,
} from '../../../job';
import { type PaymentReconciliationDeps, createDeps, job, reconcileOperationId } from '..';
import { HttpProviderClient } from '../providerClient';
import { type PaymentItem, demoPayments, unsettledPayment } from '../items';
import { type LocalAws, startLocalAws } from '../../../../test/support/aws';
import { type HttpStub, startHttpStub } from '../../../../test/support/httpStub';
import { createTable, discoverAll, putAll, runtimeSettings } from '../../../../test/support/jobs';
import { TABLES } from './tables';

const DATE = '2026-11-28';
const NOW = new Date('2026-11-29T02:00:00.000Z');
const API_KEY = 'sk_live_do_not_log';
const TABLE = TABLES.payments.name;

const settings = (baseUrl: string) =>
  runtimeSettings({
    jobName: 'payment-reconciliation',
    tables: { payments: TABLE },
    secrets: { apiKey: 'paced-jobs/test/provider-api-key' },
    settings: { provider: 'acme', providerBaseUrl: baseUrl },
  });

describe('Function: reconcileOperationId', () => {
  it('builds reconcile:<provider>:<paymentId>:<businessDate>', () => {
    expect(reconcileOperationId({ provider: 'acme', paymentId: 'pay-1', businessDate: '2026-11-28' })).toBe(
      'reconcile:acme:pay-1:2026-11-28',
    );
  });

  it('throws when the payment ID holds the separator', () => {
    expect(() => reconcileOperationId({ provider: 'acme', paymentId: 'a:b', businessDate: '2026-11-28' })).toThrow(
      new InvalidOperationIdError(
        'payment ID "a:b" cannot be part of an operation ID: it must be 1 to 128 characters of letters, digits and _ . @ # / + = - starting with a letter or digit',
      ),
    );
  });

  it('throws on a bad provider', () => {
    expect(() => reconcileOperationId({ provider: 'Acme Pay', paymentId: 'p', businessDate: '2026-11-28' })).toThrow(
      new InvalidOperationIdError(
        'provider "Acme Pay" must be 1 to 32 lower-case letters, digits or - starting with a letter',
      ),
    );
  });

  it('throws on an impossible business date', () => {
    expect(() => reconcileOperationId({ provider: 'acme', paymentId: 'p', businessDate: '2026-02-30' })).toThrow(
      new InvalidOperationIdError('business date "2026-02-30" is not a real date in the form YYYY-MM-DD'),
    );
  });
});

describe('Job: payment-reconciliation', () => {
  let aws: LocalAws;
  let stub: HttpStub;
  let deps: PaymentReconciliationDeps;
  let seq = 0;

  const getPayment = async (paymentId: string) =>
    (await deps.documents.send(new GetCommand({ TableName: TABLE, Key: { paymentId }, ConsistentRead: true }))).Item as
      | PaymentItem
      | undefined;

  /** A fresh payment per test, so tests do not share state. */
  const freshPayment = async (over: Partial<PaymentItem> = {}): Promise<PaymentItem> => {
    seq += 1;
    const item = { ...unsettledPayment({ paymentId: `apply-${seq}`, businessDate: DATE }), ...over };
    await putAll(deps.documents, TABLE, [item]);
    return item;
  };
  const opFor = (paymentId: string, date = DATE) => `reconcile:acme:${paymentId}:${date}`;
  const applyFor = (paymentId: string, remainingMs = 60_000) =>
    job.apply(deps, {
      operationId: opFor(paymentId),
      batchId: 'batch-1',
      businessDate: DATE,
      resource: { paymentId },
      remainingTimeMs: () => remainingMs,
    });
  const settled = (paymentId: string) =>
    stub.reply(200, { paymentId, status: 'settled', providerReference: `prov-${paymentId}` });

  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    const raw = new DynamoDBClient({});
    await createTable(raw, TABLES.payments);
    raw.destroy();
    stub = await startHttpStub();
    deps = {
      ...createDeps(settings(stub.url)),
      client: new HttpProviderClient({ baseUrl: stub.url, apiKey: async () => API_KEY }),
      now: () => NOW,
    };
    await putAll(deps.documents, TABLE, [
      ...demoPayments(DATE, 7),
      ...demoPayments('2026-11-27', 3),
      { ...unsettledPayment({ paymentId: 'done-1', businessDate: DATE }), unsettledDate: undefined, reconciledBy: 'x' },
    ]);
  });
  afterAll(async () => {
    resetClients();
    await stub.close();
    await aws.stop();
  });
  beforeEach(() => {
    stub.requests.length = 0;
  });

  describe('Method: createDeps', () => {
    it('throws one SettingsError naming every missing alias and setting', () => {
      expect(() =>
        createDeps(runtimeSettings({ jobName: 'payment-reconciliation', settings: { provider: 'acme' } })),
      ).toThrow(
        new SettingsError(
          'payment-reconciliation: job settings are incomplete: tables.payments is missing (it has: none); secrets.apiKey is missing (it has: none); settings.providerBaseUrl must be a non-empty string (got nothing)',
        ),
      );
    });

    it('throws on a provider base URL that is not a URL', () => {
      expect(() => createDeps({ ...settings('nope') })).toThrow('provider base URL "nope" is not a URL');
    });

    it('reads the settings it needs without fetching the secret', () => {
      const built = createDeps(settings('https://api.example.com'));
      expect({ table: built.paymentsTable, provider: built.provider, timeout: built.providerTimeoutMs }).toEqual({
        table: TABLE,
        provider: 'acme',
        timeout: 10_000,
      });
    });
  });

  describe('Method: discover', () => {
    it("pages through exactly the business date's unsettled payments, at most pageSize at a time", async () => {
      const { operations, pageSizes } = await discoverAll(job, deps, { businessDate: DATE, pageSize: 3, now: NOW });
      const ids = demoPayments(DATE, 7).map((p) => p.paymentId);
      expect(operations.map((o) => o.resource.paymentId).sort()).toEqual(ids);
      expect(operations.map((o) => o.operationId).sort()).toEqual(ids.map((id) => opFor(id)));
      expect(Math.max(...pageSizes)).toBeLessThanOrEqual(3);
      expect(pageSizes.length).toBeLessThanOrEqual(4);
    });

    it('hands back a payment whose ID cannot be part of an operation ID, with its key and reason, and discovers the rest', async () => {
      const date = '2026-11-26';
      await putAll(deps.documents, TABLE, [
        unsettledPayment({ paymentId: 'pay 1', businessDate: date }),
        unsettledPayment({ paymentId: 'pay-2', businessDate: date }),
      ]);

      const page = await job.discover(deps, { businessDate: date, pageSize: 10, now: NOW });

      expect(page.operations).toEqual([{ operationId: opFor('pay-2', date), resource: { paymentId: 'pay-2' } }]);
      expect(page.invalid).toEqual([
        {
          key: 'pay 1',
          reason:
            'payment ID "pay 1" cannot be part of an operation ID: it must be 1 to 128 characters of letters, digits and _ . @ # / + = - starting with a letter or digit',
        },
      ]);
    });

    it('yields the same operation IDs on a re-run', async () => {
      const first = await discoverAll(job, deps, { businessDate: '2026-11-27', pageSize: 2, now: NOW });
      const second = await discoverAll(job, deps, { businessDate: '2026-11-27', pageSize: 10, now: NOW });
      expect(second.operations).toEqual(first.operations);
      expect(first.operations.map((o) => o.operationId)).toEqual([
        'reconcile:acme:pay-2026-11-27-0001:2026-11-27',
        'reconcile:acme:pay-2026-11-27-0002:2026-11-27',
        'reconcile:acme:pay-2026-11-27-0003:2026-11-27',
      ]);
    });

    it('finds nothing for a date without unsettled payments', async () => {
      await expect(job.discover(deps, { businessDate: '2020-01-01', pageSize: 5, now: NOW })).resolves.toEqual({
        operations: [],
        invalid: [],
        nextCursor: undefined,
      });
    });

    it('throws InvalidCursorError on a garbled cursor', async () => {
      await expect(
        job.discover(deps, { businessDate: DATE, cursor: 'not*base64', pageSize: 5, now: NOW }),
      ).rejects.toThrow(new InvalidCursorError('invalid cursor: not base64url'));
    });

    it('refuses a cursor from another business date', async () => {
      const cursor = encodeCursor({ unsettledDate: '2026-11-27', paymentId: 'pay-2026-11-27-0001' });
      await expect(job.discover(deps, { businessDate: DATE, cursor, pageSize: 5, now: NOW })).rejects.toThrow(
        'invalid cursor: it belongs to another query (unsettledDate is not "2026-11-28")',
      );
    });
  });

  describe('Method: countEligible', () => {
    it('counts what discovery will find for the date, and nothing for a date without unsettled payments', async () => {
      const { operations } = await discoverAll(job, deps, { businessDate: DATE, pageSize: 3, now: NOW });
      await expect(job.countEligible!(deps, { businessDate: DATE, now: NOW })).resolves.toBe(operations.length);
      expect(operations.length).toBe(7);
      await expect(job.countEligible!(deps, { businessDate: '2020-01-01', now: NOW })).resolves.toBe(0);
    });
  });

  describe('Method: apply', () => {
    it('reconciles with the provider and records the outcome on the payment', async () => {
      const { paymentId } = await freshPayment();
      settled(paymentId);
      await expect(applyFor(paymentId)).resolves.toEqual({
        outcome: 'applied',
        detail: { status: 'settled', providerReference: `prov-${paymentId}`, replayed: false },
      });
      expect(stub.requests).toHaveLength(1);
      expect(stub.requests[0].headers['idempotency-key']).toBe(opFor(paymentId));
      expect(stub.requests[0].headers.authorization).toBe(`Bearer ${API_KEY}`);
      const after = await getPayment(paymentId);
      expect(after).toMatchObject({
        reconciliationStatus: 'settled',
        providerReference: `prov-${paymentId}`,
        reconciledAt: NOW.toISOString(),
        reconciledBy: opFor(paymentId),
      });
      expect(after).not.toHaveProperty('unsettledDate');
    });

    it('takes the payment out of the unsettled index', async () => {
      const { paymentId } = await freshPayment({ unsettledDate: '2026-11-21' });
      stub.reply(200, { paymentId, status: 'failed', providerReference: 'r' });
      await job.apply(deps, {
        operationId: opFor(paymentId, '2026-11-21'),
        batchId: 'b',
        businessDate: '2026-11-21',
        resource: { paymentId },
        remainingTimeMs: () => 60_000,
      });
      await expect(job.discover(deps, { businessDate: '2026-11-21', pageSize: 5, now: NOW })).resolves.toEqual({
        operations: [],
        invalid: [],
        nextCursor: undefined,
      });
    });

    it('reports a provider replay', async () => {
      const { paymentId } = await freshPayment();
      stub.reply(200, { paymentId, status: 'settled', providerReference: 'r1' }, { 'Idempotent-Replayed': 'true' });
      await expect(applyFor(paymentId)).resolves.toEqual({
        outcome: 'applied',
        detail: { status: 'settled', providerReference: 'r1', replayed: true },
      });
    });

    it('is already done, without a provider call, when this operation recorded the outcome before', async () => {
      const { paymentId } = await freshPayment();
      settled(paymentId);
      await applyFor(paymentId);
      stub.requests.length = 0;
      await expect(applyFor(paymentId)).resolves.toEqual({ outcome: 'already-done', detail: { status: 'settled' } });
      expect(stub.requests).toHaveLength(0);
    });

    it('skips a payment already reconciled by another operation', async () => {
      const { paymentId } = await freshPayment({
        unsettledDate: undefined,
        reconciledBy: 'someone-else',
        reconciliationStatus: 'settled',
      });
      await expect(applyFor(paymentId)).resolves.toEqual({
        outcome: 'already-done',
        detail: { skipped: 'already-reconciled' },
      });
      expect(stub.requests).toHaveLength(0);
    });

    it('skips a payment now unsettled for another date', async () => {
      const { paymentId } = await freshPayment({ unsettledDate: '2026-11-29' });
      await expect(applyFor(paymentId)).resolves.toEqual({
        outcome: 'already-done',
        detail: { skipped: 'unsettled-for-another-date' },
      });
      expect(stub.requests).toHaveLength(0);
    });

    it('throws PermanentError for a payment that does not exist', async () => {
      const error = await applyFor('never-existed').catch((e: unknown) => e as PermanentError);
      expect(error).toBeInstanceOf(PermanentError);
      expect((error as PermanentError).message).toBe('payment never-existed does not exist');
      expect(stub.requests).toHaveLength(0);
    });

    it("refuses a business date after the job's latest by its own clock: no provider call, the payment untouched", async () => {
      // The job's rule from its settings (UTC, offset -1): at NOW the latest business date is the 28th.
      expect(deps.businessDates).toEqual({ timeZone: 'UTC', businessDateOffsetDays: -1 });
      const future = '2026-11-29';
      const item = await freshPayment({ unsettledDate: future });
      const error = await job
        .apply(deps, {
          operationId: opFor(item.paymentId, future),
          batchId: 'b',
          businessDate: future,
          resource: { paymentId: item.paymentId },
          remainingTimeMs: () => 60_000,
        })
        .catch((e: unknown) => e as PermanentError);

      expect(error).toBeInstanceOf(PermanentError);
      expect((error as PermanentError).message).toBe(
        `payment ${item.paymentId}: business date 2026-11-29 is in the future: the latest for payment-reconciliation now is 2026-11-28 (UTC, offset -1); not reconciled`,
      );
      expect((error as PermanentError).detail).toEqual({
        paymentId: item.paymentId,
        businessDate: future,
        latest: '2026-11-28',
      });
      expect(stub.requests).toHaveLength(0);
      expect(await getPayment(item.paymentId)).toEqual(item);
    });

    it('throws PermanentError when the operation ID does not match the resource', async () => {
      const { paymentId } = await freshPayment();
      const error = await job
        .apply(deps, {
          operationId: opFor('other'),
          batchId: 'b',
          businessDate: DATE,
          resource: { paymentId },
          remainingTimeMs: () => 60_000,
        })
        .catch((e: unknown) => e as PermanentError);
      expect(error).toBeInstanceOf(PermanentError);
      expect((error as PermanentError).message).toBe(
        `operation ID "${opFor('other')}" does not match its resource (expected "${opFor(paymentId)}")`,
      );
    });

    it('is already done when a duplicate delivery records the outcome during the provider call', async () => {
      const { paymentId } = await freshPayment();
      stub.handle((_req, res) => {
        void deps.documents
          .send(
            new UpdateCommand({
              TableName: TABLE,
              Key: { paymentId },
              UpdateExpression: 'SET reconciledBy = :op, reconciliationStatus = :s REMOVE unsettledDate',
              ExpressionAttributeValues: { ':op': opFor(paymentId), ':s': 'settled' },
            }),
          )
          .then(() =>
            res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ paymentId, status: 'settled', providerReference: 'r' })),
          );
      });
      await expect(applyFor(paymentId)).resolves.toEqual({ outcome: 'already-done', detail: { status: 'settled' } });
    });

    it('throws PermanentError when the payment moves to another date during the provider call', async () => {
      const { paymentId } = await freshPayment();
      stub.handle((_req, res) => {
        void deps.documents
          .send(
            new UpdateCommand({
              TableName: TABLE,
              Key: { paymentId },
              UpdateExpression: 'SET unsettledDate = :d',
              ExpressionAttributeValues: { ':d': '2026-11-30' },
            }),
          )
          .then(() =>
            res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ paymentId, status: 'settled', providerReference: 'r9' })),
          );
      });
      const error = await applyFor(paymentId).catch((e: unknown) => e as PermanentError);
      expect(error).toBeInstanceOf(PermanentError);
      expect((error as PermanentError).message).toBe(
        `payment ${paymentId} changed while it was being reconciled; the provider answered settled (r9) but the outcome was not recorded`,
      );
      expect((error as PermanentError).detail).toEqual({
        paymentId,
        businessDate: DATE,
        providerStatus: 'settled',
        providerReference: 'r9',
        unsettledDate: '2026-11-30',
        reconciledBy: undefined,
        exists: true,
      });
    });

    it('passes a 429 on as ThrottledError and leaves the payment unsettled', async () => {
      const { paymentId } = await freshPayment();
      stub.reply(429, {}, { 'Retry-After': '3' });
      const error = await applyFor(paymentId).catch((e: unknown) => e as ThrottledError);
      expect(error).toBeInstanceOf(ThrottledError);
      expect((error as ThrottledError).retryAfterMs).toBe(3_000);
      expect((await getPayment(paymentId))?.unsettledDate).toBe(DATE);
    });

    it('passes a 404 on as PermanentError without the API key', async () => {
      const { paymentId } = await freshPayment();
      stub.reply(404, { error: 'unknown payment' });
      const error = await applyFor(paymentId).catch((e: unknown) => e as PermanentError);
      expect(error).toBeInstanceOf(PermanentError);
      expect(JSON.stringify({ m: (error as Error).message, d: (error as PermanentError).detail })).not.toContain(
        API_KEY,
      );
      expect((await getPayment(paymentId))?.unsettledDate).toBe(DATE);
    });

    it('bounds the provider call by the invocation time left', async () => {
      const { paymentId } = await freshPayment();
      // The stub never answers: without its bound the call would hang until the test's own timeout fails it.
      stub.handle(() => undefined);
      const error = await applyFor(paymentId, 2_700).catch((e: unknown) => e as RetryableError);
      expect(error).toBeInstanceOf(RetryableError);
      expect((error as RetryableError).message).toBe(`reconcile call for payment ${paymentId} timed out after 700 ms`);
      expect(stub.requests).toHaveLength(1);
    });

    it('does not call the provider when too little time is left', async () => {
      const { paymentId } = await freshPayment();
      await expect(applyFor(paymentId, 2_300)).rejects.toThrow(
        new RetryableError(
          `payment ${paymentId}: only 2300 ms left, too little to call the provider and record the outcome`,
        ),
      );
      expect(stub.requests).toHaveLength(0);
    });
  });
});
