// Job plug-in expired-session-cleanup: one operation per tenant and business date, deleting that tenant's sessions
// last seen before the cutoff, in bounded chunks, each delete conditional so a session refreshed meanwhile survives.
//
// Tables `tenants` (alias tables.tenants, read) and `sessions` (alias tables.sessions, index `by-last-seen`); item
// shapes in items.ts. Settings: sessionMaxAgeDays, deleteChunkSize.
// Choices:
// - Cutoff = the start of the business date (UTC midnight) minus sessionMaxAgeDays: fixed per date, so a retry or a
//   re-run of the date deletes by the same rule whatever the clock says.
// - But never later than now minus sessionMaxAgeDays (apply's own clock, deps.now): a business date in the future (a
//   typo of a year) would otherwise delete every active session. Refused as a PermanentError, whatever the caller
//   checked, so a session younger than sessionMaxAgeDays as of now is never deleted whatever the message says.
// - Apply pages forward through the index rather than re-querying from the start after each chunk: the index is
//   eventually consistent, so a restart could see the same just-deleted or refreshed sessions again and never end.
// - When the invocation runs short of time, apply throws RetryableError; the deletes so far stand (each is
//   idempotent) and the retry continues with what remains. `deleted` counts this attempt's deletes.
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, type DynamoDBDocumentClient, QueryCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import * as z from 'zod/mini';
import {
  assertOperationId,
  buildOperationId,
  decodeCursor,
  defineJob,
  documentClient,
  encodeCursor,
  idPartProblem,
  idPartSchema,
  InvalidOperationIdError,
  JobSettingsReader,
  operationsOf,
  PermanentError,
  RetryableError,
  type ApplyResult,
  type JobRuntimeSettings,
} from '../../job';

export const JOB_NAME = 'expired-session-cleanup';
export const LAST_SEEN_INDEX = 'by-last-seen';
/** Apply stops and asks for a retry when less time than this remains, leaving room for one more chunk to finish. */
export const DEFAULT_MIN_REMAINING_MS = 3_000;
const DAY_MS = 86_400_000;

/**
 * `<tenantId>:expired-sessions:<businessDate>`: one cleanup per tenant and date, so a re-run of the date is absorbed
 * by idempotency.
 * @throws InvalidOperationIdError naming the part that cannot be used.
 */
export function expiredSessionsOperationId(parts: { tenantId: string; businessDate: string }): string {
  return buildOperationId([
    { label: 'tenant ID', id: parts.tenantId },
    'expired-sessions',
    { businessDate: parts.businessDate },
  ]);
}

export const resourceSchema = z.strictObject({
  tenantId: idPartSchema,
});
export type TenantResource = z.infer<typeof resourceSchema>;

export interface ExpiredSessionDeps {
  documents: DynamoDBDocumentClient;
  tenantsTable: string;
  sessionsTable: string;
  maxAgeDays: number;
  /** Sessions queried and deleted per round (DeleteItem calls in flight at once). */
  chunkSize: number;
  minRemainingMs: number;
  /** Apply's clock: no cutoff later than now minus maxAgeDays is ever acted on. */
  now: () => Date;
}

export function createDeps(settings: JobRuntimeSettings): ExpiredSessionDeps {
  const read = new JobSettingsReader(settings);
  const tenantsTable = read.name('tables', 'tenants');
  const sessionsTable = read.name('tables', 'sessions');
  const maxAgeDays = read.integer('sessionMaxAgeDays', { min: 1, max: 3650 });
  const chunkSize = read.integer('deleteChunkSize', { min: 1, max: 100 });
  read.done();
  return {
    documents: documentClient(),
    tenantsTable,
    sessionsTable,
    maxAgeDays,
    chunkSize,
    minRemainingMs: DEFAULT_MIN_REMAINING_MS,
    now: () => new Date(),
  };
}

/** Sessions last seen strictly before this instant are expired for `businessDate`. */
export function sessionCutoff(businessDate: string, maxAgeDays: number): string {
  return new Date(Date.parse(`${businessDate}T00:00:00.000Z`) - maxAgeDays * DAY_MS).toISOString();
}

export const job = defineJob<TenantResource, ExpiredSessionDeps>({
  name: JOB_NAME,
  discoveryIndexes: [{ table: 'sessions', index: LAST_SEEN_INDEX }],
  resourceSchema,
  createDeps,

  async discover(deps, { businessDate, cursor, pageSize }) {
    const startKey = cursor === undefined ? undefined : decodeCursor(cursor, ['tenantId']);
    const page = await deps.documents.send(
      new ScanCommand({
        TableName: deps.tenantsTable,
        ProjectionExpression: 'tenantId',
        Limit: pageSize,
        ExclusiveStartKey: startKey,
      }),
    );
    // A tenant whose ID cannot be part of an operation ID is handed back for review; the page's other tenants go on.
    const { operations, invalid } = operationsOf(
      page.Items ?? [],
      (item) => String(item.tenantId),
      (item) => {
        const tenantId = String(item.tenantId);
        const problem = idPartProblem('tenant ID', tenantId);
        if (problem !== undefined) return problem;
        return { operationId: expiredSessionsOperationId({ tenantId, businessDate }), resource: { tenantId } };
      },
    );
    return { operations, invalid, nextCursor: encodeCursor(page.LastEvaluatedKey) };
  },

  async apply(deps, { operationId, businessDate, resource, remainingTimeMs }): Promise<ApplyResult> {
    const { tenantId } = resource;
    try {
      assertOperationId(operationId, () => expiredSessionsOperationId({ tenantId, businessDate }));
    } catch (error) {
      if (error instanceof InvalidOperationIdError)
        throw new PermanentError(error.message, { operationId, tenantId }, { cause: error });
      throw error;
    }
    const cutoff = sessionCutoff(businessDate, deps.maxAgeDays);
    const now = deps.now();
    const latestCutoff = new Date(now.getTime() - deps.maxAgeDays * DAY_MS).toISOString();
    if (cutoff > latestCutoff) {
      throw new PermanentError(
        `tenant ${tenantId}: business date ${businessDate} is in the future: its cutoff ${cutoff} is later than ` +
          `now minus ${deps.maxAgeDays} days (${latestCutoff}); nothing deleted`,
        { tenantId, businessDate, cutoff, now: now.toISOString() },
      );
    }
    let deleted = 0;
    let kept = 0;
    let startKey: Record<string, unknown> | undefined;
    do {
      const left = remainingTimeMs();
      if (left < deps.minRemainingMs) {
        throw new RetryableError(
          `tenant ${tenantId}: stopped after deleting ${deleted} expired sessions with ${Math.max(0, left)} ms left; a retry continues with the rest`,
        );
      }
      const page = await deps.documents.send(
        new QueryCommand({
          TableName: deps.sessionsTable,
          IndexName: LAST_SEEN_INDEX,
          KeyConditionExpression: 'tenantId = :tenant AND lastSeenAt < :cutoff',
          ExpressionAttributeValues: { ':tenant': tenantId, ':cutoff': cutoff },
          ProjectionExpression: 'sessionId',
          Limit: deps.chunkSize,
          ExclusiveStartKey: startKey,
        }),
      );
      const outcomes = await Promise.all(
        (page.Items ?? []).map(async (item) => {
          try {
            await deps.documents.send(
              new DeleteCommand({
                TableName: deps.sessionsTable,
                Key: { tenantId, sessionId: item.sessionId },
                // Re-checked on the item itself: the index may be stale, and a session seen again since must survive.
                ConditionExpression: 'lastSeenAt < :cutoff',
                ExpressionAttributeValues: { ':cutoff': cutoff },
              }),
            );
            return true;
          } catch (error) {
            // Refreshed since the index was read, or deleted by a duplicate delivery: either way not ours to delete.
            if (error instanceof ConditionalCheckFailedException) return false;
            throw error;
          }
        }),
      );
      for (const ok of outcomes) {
        if (ok) deleted += 1;
        else kept += 1;
      }
      startKey = page.LastEvaluatedKey;
    } while (startKey !== undefined);
    return { outcome: deleted > 0 ? 'applied' : 'already-done', detail: { deleted, kept, cutoff } };
  },
});
