// Job plug-in payment-reconciliation: discovers a business date's unsettled payments, reconciles each with the
// provider (Idempotency-Key = operation ID) and records the outcome on the payment conditionally.
//
// Table `payments` (alias tables.payments): see items.ts for the item shape. Discovery reads the sparse index
// `unsettled-by-date`; apply reads and updates the item by `paymentId`. Apply refuses a business date after the job's
// latest by its own clock (deps.now), whatever its caller checked: a day not yet over is not the provider's to settle.
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import * as z from 'zod/mini';
import {
  apiKeyGetter,
  assertOperationId,
  buildOperationId,
  countQuery,
  decodeCursor,
  defineJob,
  documentClient,
  encodeCursor,
  futureBusinessDate,
  idPartProblem,
  idPartSchema,
  InvalidOperationIdError,
  JobSettingsReader,
  operationsOf,
  PermanentError,
  RetryableError,
  type BusinessDateRule,
  type JobRuntimeSettings,
} from '../../job';
import type { PaymentItem } from './items';
import { HttpProviderClient, type ProviderClient } from './providerClient';

export const JOB_NAME = 'payment-reconciliation';
export const UNSETTLED_INDEX = 'unsettled-by-date';
/** Provider request timeout unless settings.providerTimeoutMs says otherwise. @default 10000 */
export const DEFAULT_PROVIDER_TIMEOUT_MS = 10_000;
/** Time kept back from the provider call to record its outcome before the invocation ends. */
export const PERSIST_RESERVE_MS = 2_000;
/** A provider call with less time than this is not started: it would time out and only cost the provider a request. */
export const MIN_PROVIDER_TIMEOUT_MS = 500;

const PROVIDER = /^[a-z][a-z0-9-]{0,31}$/;

/**
 * `reconcile:<provider>:<paymentId>:<businessDate>`: one reconciliation per payment and date, so a re-run of the date
 * is absorbed by idempotency, and the provider's name keeps two providers' payment IDs apart.
 * @throws InvalidOperationIdError naming the part that cannot be used.
 */
export function reconcileOperationId(parts: { provider: string; paymentId: string; businessDate: string }): string {
  if (!PROVIDER.test(parts.provider)) {
    throw new InvalidOperationIdError(
      `provider ${JSON.stringify(parts.provider.slice(0, 40))} must be 1 to 32 lower-case letters, digits or - starting with a letter`,
    );
  }
  return buildOperationId([
    'reconcile',
    parts.provider,
    { label: 'payment ID', id: parts.paymentId },
    { businessDate: parts.businessDate },
  ]);
}

export const resourceSchema = z.strictObject({
  paymentId: idPartSchema,
});
export type PaymentResource = z.infer<typeof resourceSchema>;

export interface PaymentReconciliationDeps {
  documents: DynamoDBDocumentClient;
  paymentsTable: string;
  /** The provider's name in operation IDs, e.g. 'acme'. */
  provider: string;
  client: ProviderClient;
  /** Upper bound on one provider request; the remaining invocation time may shorten it. */
  providerTimeoutMs: number;
  /** The job's schedule rule (time zone, offset): no date after its latest by `now` is reconciled. */
  businessDates: BusinessDateRule;
  now: () => Date;
}

export function createDeps(settings: JobRuntimeSettings): PaymentReconciliationDeps {
  const read = new JobSettingsReader(settings);
  const paymentsTable = read.name('tables', 'payments');
  const apiKeySecret = read.name('secrets', 'apiKey');
  const provider = read.string('provider');
  const providerBaseUrl = read.string('providerBaseUrl');
  const providerTimeoutMs = read.integer('providerTimeoutMs', {
    min: 100,
    max: 900_000,
    fallback: DEFAULT_PROVIDER_TIMEOUT_MS,
  });
  read.done();
  return {
    documents: documentClient(),
    paymentsTable,
    provider,
    // The key is read through Powertools Parameters at call time (cached), never from the environment, and refused
    // unless it can go in a header as it is (apiKeyGetter).
    client: new HttpProviderClient({ baseUrl: providerBaseUrl, apiKey: apiKeyGetter(apiKeySecret) }),
    providerTimeoutMs,
    businessDates: { timeZone: settings.timeZone, businessDateOffsetDays: settings.businessDateOffsetDays },
    now: () => new Date(),
  };
}

const readPayment = async (deps: PaymentReconciliationDeps, paymentId: string): Promise<PaymentItem | undefined> => {
  const got = await deps.documents.send(
    new GetCommand({ TableName: deps.paymentsTable, Key: { paymentId }, ConsistentRead: true }),
  );
  return got.Item as PaymentItem | undefined;
};

const definedOnly = (
  detail: Record<string, string | number | boolean | undefined>,
): Record<string, string | number | boolean> =>
  Object.fromEntries(Object.entries(detail).filter(([, v]) => v !== undefined)) as Record<
    string,
    string | number | boolean
  >;

export const job = defineJob<PaymentResource, PaymentReconciliationDeps>({
  name: JOB_NAME,
  discoveryIndexes: [{ table: 'payments', index: UNSETTLED_INDEX }],
  resourceSchema,
  createDeps,

  async discover(deps, { businessDate, cursor, pageSize }) {
    const startKey =
      cursor === undefined
        ? undefined
        : decodeCursor(cursor, ['unsettledDate', 'paymentId'], { unsettledDate: businessDate });
    const page = await deps.documents.send(
      new QueryCommand({
        TableName: deps.paymentsTable,
        IndexName: UNSETTLED_INDEX,
        KeyConditionExpression: 'unsettledDate = :date',
        ExpressionAttributeValues: { ':date': businessDate },
        ProjectionExpression: 'paymentId',
        Limit: pageSize,
        ExclusiveStartKey: startKey,
      }),
    );
    // A payment whose ID cannot be part of an operation ID is handed back for review; the page's other payments go
    // on. A bad provider setting still fails the page: it is the job's configuration, not a row.
    const { operations, invalid } = operationsOf(
      page.Items ?? [],
      (item) => String(item.paymentId),
      (item) => {
        const paymentId = String(item.paymentId);
        const problem = idPartProblem('payment ID', paymentId);
        if (problem !== undefined) return problem;
        return {
          operationId: reconcileOperationId({ provider: deps.provider, paymentId, businessDate }),
          resource: { paymentId },
        };
      },
    );
    return { operations, invalid, nextCursor: encodeCursor(page.LastEvaluatedKey) };
  },

  /** The same sparse index, counted: what the run will discover in all (a lower bound past MAX_COUNT_PAGES pages). */
  async countEligible(deps, { businessDate }) {
    const { count } = await countQuery(deps.documents, {
      TableName: deps.paymentsTable,
      IndexName: UNSETTLED_INDEX,
      KeyConditionExpression: 'unsettledDate = :date',
      ExpressionAttributeValues: { ':date': businessDate },
    });
    return count;
  },

  async apply(deps, { operationId, businessDate, resource, remainingTimeMs }) {
    const { paymentId } = resource;
    try {
      assertOperationId(operationId, () => reconcileOperationId({ provider: deps.provider, paymentId, businessDate }));
    } catch (error) {
      if (error instanceof InvalidOperationIdError)
        throw new PermanentError(error.message, { operationId, paymentId }, { cause: error });
      throw error;
    }
    const future = futureBusinessDate(JOB_NAME, businessDate, deps.businessDates, deps.now());
    if (future) {
      const detail = { paymentId, businessDate, latest: future.latest };
      throw new PermanentError(`payment ${paymentId}: ${future.message}; not reconciled`, detail, { cause: future });
    }

    // Read first: a payment already reconciled (by us or by another date's run) must not cost a provider call.
    const before = await readPayment(deps, paymentId);
    if (before === undefined)
      throw new PermanentError(`payment ${paymentId} does not exist`, { paymentId, businessDate });
    if (before.reconciledBy === operationId) {
      return { outcome: 'already-done', detail: definedOnly({ status: before.reconciliationStatus }) };
    }
    if (before.unsettledDate !== businessDate) {
      // Reconciled already, or moved to another date whose own run will handle it: nothing to do for this date.
      const skipped = before.unsettledDate === undefined ? 'already-reconciled' : 'unsettled-for-another-date';
      return { outcome: 'already-done', detail: { skipped } };
    }

    const timeoutMs = Math.min(deps.providerTimeoutMs, remainingTimeMs() - PERSIST_RESERVE_MS);
    if (timeoutMs < MIN_PROVIDER_TIMEOUT_MS) {
      throw new RetryableError(
        `payment ${paymentId}: only ${Math.max(0, remainingTimeMs())} ms left, too little to call the provider and record the outcome`,
      );
    }
    const result = await deps.client.reconcile({ paymentId, businessDate, idempotencyKey: operationId, timeoutMs });

    try {
      await deps.documents.send(
        new UpdateCommand({
          TableName: deps.paymentsTable,
          Key: { paymentId },
          UpdateExpression:
            'SET reconciliationStatus = :status, providerReference = :ref, reconciledAt = :at, reconciledBy = :op REMOVE unsettledDate',
          ConditionExpression: 'attribute_exists(paymentId) AND unsettledDate = :date',
          ExpressionAttributeValues: {
            ':status': result.status,
            ':ref': result.providerReference,
            ':at': deps.now().toISOString(),
            ':op': operationId,
            ':date': businessDate,
          },
        }),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      // dynalite does not return the old item on a failed condition, so read it back to see who got there first.
      const after = await readPayment(deps, paymentId);
      if (after?.reconciledBy === operationId) {
        return { outcome: 'already-done', detail: definedOnly({ status: after.reconciliationStatus }) };
      }
      throw new PermanentError(
        `payment ${paymentId} changed while it was being reconciled; the provider answered ${result.status} (${result.providerReference}) but the outcome was not recorded`,
        {
          paymentId,
          businessDate,
          providerStatus: result.status,
          providerReference: result.providerReference,
          unsettledDate: after?.unsettledDate,
          reconciledBy: after?.reconciledBy,
          exists: after !== undefined,
        },
        { cause: error },
      );
    }
    return {
      outcome: 'applied',
      detail: { status: result.status, providerReference: result.providerReference, replayed: result.replayed },
    };
  },
});
