// `ops op <operationId>`: what happened to one operation: its idempotency record (status, expiry, stored result) and
// the run-ledger entries that name it (rejections) or may hold it (the batches of the business date in its ID).
import { PERSISTENCE_ATTRIBUTE_KEY_MAPPINGS as ATTR } from '@aws-lambda-powertools/idempotency';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { idempotencyRecordId } from '../../lambda/core/idempotencyKey';
import { businessDateSchema } from '../../lambda/core/message';
import { type CommandContext, selectJobs } from '../context';
import { UsageError } from '../errors';
import { renderTable } from '../io';
import { type BatchView, batchesWithPrefix, type RejectionView, rejectionsOf } from '../ledger';

export interface IdempotencyRecordView {
  id: string;
  /** INPROGRESS, COMPLETED or EXPIRED, as Powertools writes it. */
  status?: string;
  /** When DynamoDB's TTL may remove the record; after it, a redelivery would apply the operation again. */
  expiresAt?: string;
  /** Past expiresAt: Powertools treats the record as absent even before TTL deletes it. */
  expired: boolean;
  /** While INPROGRESS: when another invocation may take the claim over. */
  inProgressExpiresAt?: string;
  /** The stored result of the completed operation. */
  result?: unknown;
}

export interface OperationJobView {
  job: string;
  idempotencyRecord: IdempotencyRecordView | null;
  rejections: RejectionView[];
  /** Batches of the business date(s) named in the operation ID; the ledger counts per batch, not per operation. */
  batches: BatchView[];
}

export interface OperationResult {
  ok: true;
  command: 'op';
  operationId: string;
  /** Any job holds an idempotency record or a rejection for the operation. */
  found: boolean;
  jobs: OperationJobView[];
}

/** The parts of an operation ID that are business dates (`reconcile:<provider>:<paymentId>:<date>` holds one). */
export function businessDatesIn(operationId: string): string[] {
  return [...new Set(operationId.split(':').filter((part) => businessDateSchema.safeParse(part).success))];
}

function seconds(value: unknown): string | undefined {
  return typeof value === 'number' ? new Date(value * 1000).toISOString() : undefined;
}

function storedResult(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

export async function operation(
  ctx: CommandContext,
  operationId: string,
  options: { job?: string } = {},
): Promise<OperationResult> {
  if (operationId.trim() === '') throw new UsageError('operationId must not be empty');
  const jobs = selectJobs(ctx.resources, options.job);
  const { idempotency, ledger } = ctx.resources.tables;
  const now = ctx.io.now().getTime();
  const dates = businessDatesIn(operationId);
  const views = await Promise.all(
    jobs.map(async (j): Promise<OperationJobView> => {
      // The consumer keys records on the job name and the operation ID (lambda/core/idempotencyKey.ts), so the same
      // operation ID under two jobs is two records; each job is asked.
      const id = idempotencyRecordId(j.job, operationId);
      const [record, rejections] = await Promise.all([
        ctx.clients.dynamo.send(new GetCommand({ TableName: idempotency, Key: { id } })),
        rejectionsOf(ctx.clients, ledger, j.job, operationId),
      ]);
      const item = record.Item;
      const expiration = item?.[ATTR.expiryAttr];
      const inProgress = item?.[ATTR.inProgressExpiryAttr];
      const idempotencyRecord: IdempotencyRecordView | null = item
        ? {
            id,
            status: item[ATTR.statusAttr] as string | undefined,
            expiresAt: seconds(expiration),
            expired: typeof expiration === 'number' && expiration * 1000 < now,
            // Powertools keeps the in-progress expiry in milliseconds.
            inProgressExpiresAt: typeof inProgress === 'number' ? new Date(inProgress).toISOString() : undefined,
            result: storedResult(item[ATTR.dataAttr]),
          }
        : null;
      const batches =
        idempotencyRecord || rejections.length > 0 || options.job
          ? (
              await Promise.all(
                dates.map((d) => batchesWithPrefix(ctx.clients, ctx.resources.tables, j.job, `${j.job}:${d}:`)),
              )
            ).flat()
          : [];
      return { job: j.job, idempotencyRecord, rejections, batches };
    }),
  );
  const relevant = views.filter((v) => v.idempotencyRecord || v.rejections.length > 0);
  return {
    ok: true,
    command: 'op',
    operationId,
    found: relevant.length > 0,
    jobs: options.job ? views : relevant,
  };
}

export function renderOperation(result: OperationResult): string {
  if (!result.found && result.jobs.every((j) => j.batches.length === 0)) {
    return `operation ${result.operationId}: no idempotency record or rejection in any job (never consumed, still queued, or its record expired)`;
  }
  const parts = [`operation ${result.operationId}`];
  parts.push(
    renderTable(
      ['job', 'record', 'status', 'expires', 'result'],
      result.jobs.map((j) => [
        j.job,
        j.idempotencyRecord?.id ?? 'none',
        j.idempotencyRecord
          ? `${j.idempotencyRecord.status}${j.idempotencyRecord.expired ? ' (expired)' : ''}`
          : undefined,
        j.idempotencyRecord?.expiresAt,
        j.idempotencyRecord?.result === undefined ? undefined : JSON.stringify(j.idempotencyRecord.result),
      ]),
    ),
  );
  const rejections = result.jobs.flatMap((j) =>
    j.rejections.map((r) => [j.job, r.rejectedAt, r.batchId, r.reasons.join('; ')]),
  );
  if (rejections.length)
    parts.push(`Rejections\n${renderTable(['job', 'rejected at', 'batch', 'reasons'], rejections)}`);
  const batches = result.jobs.flatMap((j) =>
    j.batches.map((b) => [
      j.job,
      b.batchId,
      b.discovered,
      b.completed,
      b.rejected,
      b.deadLettered,
      b.reconciles ? 'yes' : 'NO',
    ]),
  );
  if (batches.length) {
    parts.push(
      `Batches of its business date\n${renderTable(['job', 'batch', 'discovered', 'completed', 'rejected', 'DLQ', 'reconciles'], batches)}`,
    );
  }
  return parts.join('\n\n');
}
