// `ops audit --job J --date D`: one business date of one job, joined over every batch (run) of it: did every operation
// the date's runs discovered end exactly once, and where is each one that did not. Each batch's figures say how its
// own deliveries ended; only the operations themselves say whether the date as a whole is done, so this lists every
// operation of the date from the admitted pages and asks each one's idempotency record. Reads the run ledger and the
// idempotency records only, never the application's tables.
import { IdempotencyRecordStatus } from '@aws-lambda-powertools/idempotency';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import {
  AdmissionStatus,
  batchExact,
  batchIdOf,
  deadLetterEntriesOf,
  decodePageOperations,
  invalidRowsOf,
  ledgerKeys,
  resolveBatch,
  type BatchFigures,
} from '../../lambda/core/ledgerContract';
import { businessDateSchema } from '../../lambda/core/message';
import { type CommandContext, selectJobs } from '../context';
import { OpsError, UsageError } from '../errors';
import { renderTable } from '../io';
import {
  completionsIn,
  idempotencyStatesOf,
  invocationItems,
  queryAll,
  type IdempotencyState,
} from '../../local/ledgerFigures';

type Dynamo = Pick<DynamoDBDocumentClient, 'send'>;

export interface AuditOptions {
  job: string;
  /** The business date, YYYY-MM-DD. */
  date: string;
  /** List the operations that are not completed. @default false */
  operations?: boolean;
}

/** How an operation of the date ended, or that it has not: `in-flight` and `waiting` are still open. */
export type OperationState = 'completed' | 'rejected' | 'dead-lettered' | 'in-flight' | 'waiting';

/** An operation of the date that is not completed. */
export interface AuditOperation {
  operationId: string;
  state: Exclude<OperationState, 'completed'>;
  /** Why it was rejected (its reasons, joined) or dead-lettered. */
  reason?: string;
  /** The batches of the date whose admitted pages list it. */
  batchIds: string[];
}

/** One batch of the date: its figures (resolveBatch), and whether they reconcile. */
export interface AuditBatch {
  batchId: string;
  discovered: number;
  completed: number;
  completedElsewhere: number;
  adopted: number;
  rejected: number;
  deadLettered: number;
  duplicates: number;
  retries: number;
  /** Source rows its discovery could not turn into messages (the batch's count; not in `discovered`). */
  invalidRows: number;
  /** `admitting`, `complete`, `page-limit`, or absent on a batch from before admission. */
  admission?: string;
  /** discovered = completed + completedElsewhere + rejected + deadLettered (batchExact). */
  exact: boolean;
}

/** A source row discovery could not turn into a valid message: recorded for review and skipped, never published. */
export interface AuditInvalidRow {
  batchId: string;
  /** The page of the batch it was found on. */
  page?: number;
  /** The row's key (an operation ID when the producer, not the job, found the problem). */
  key: string;
  reasons: string[];
  rejectedAt?: string;
}

export interface AuditResult {
  ok: true;
  command: 'audit';
  job: string;
  businessDate: string;
  /** Every operation of the date ended exactly once, and the ledger's counts agree with the operations (`missing` is empty). */
  exact: boolean;
  /** What keeps the date from being exact, one line each. */
  missing: string[];
  /** Unique operations over the admitted pages of every batch of the date. */
  discovered: number;
  completed: number;
  rejected: number;
  deadLettered: number;
  open: { inFlight: number; waiting: number };
  batches: AuditBatch[];
  /**
   * The source rows the date's runs recorded and skipped (kept INVALID_ROW_RETENTION_DAYS), by batch, page and key.
   * They are not operations, so they never make a date inexact: they are data to fix at the source, after which the
   * next run discovers them.
   */
  invalidRows: AuditInvalidRow[];
  /** With --operations: every operation that is not completed, by operation ID. */
  operations?: AuditOperation[];
}

/** No batch of the job has this business date: nothing to audit (an unknown date, or its runs' items expired). */
export class NoBatchForDateError extends OpsError {
  constructor(
    message: string,
    public readonly job: string,
    public readonly businessDate: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'NoBatchForDateError';
  }
}

/** A batch of the date as the ledger holds it. */
interface DateBatch {
  batchId: string;
  item: Record<string, unknown>;
  invocations: Record<string, unknown>[];
  /** The operation IDs its pages list (every attempt at each page, so an ID may repeat), in page order. */
  pageOperations: string[];
  /** Its invalid source rows' items (INVALID_ROW#<job>#<batchId>). */
  invalidRows: Record<string, unknown>[];
}

/** An operation's end as the audit finds it. */
interface OperationEnd {
  state: OperationState;
  reason?: string;
  /** For a completed one: the batch its completion names (undefined for a record written before completions did). */
  completedBy?: string;
}

const format = (n: number): string => n.toLocaleString('en-US');
const plural = (n: number, word: string): string => `${format(n)} ${word}${n === 1 ? '' : 's'}`;

/**
 * @throws UsageError for a malformed or unreal date, or an unknown job.
 * @throws NoBatchForDateError when the run ledger holds no batch of the job for the date.
 */
export async function audit(ctx: CommandContext, options: AuditOptions): Promise<AuditResult> {
  if (!businessDateSchema.safeParse(options.date).success)
    throw new UsageError(`--date "${options.date}" is not a real date in the form YYYY-MM-DD`);
  const [{ job }] = selectJobs(ctx.resources, options.job);
  return auditDate(ctx.clients.dynamo, ctx.resources.tables, { ...options, job }, ctx.io.sleep);
}

/**
 * The audit itself, on the two tables: what `ops audit` answers, and what the chaos harness checks its runs with.
 * @throws NoBatchForDateError when the run ledger holds no batch of the job for the date.
 */
export async function auditDate(
  dynamo: Dynamo,
  tables: { ledger: string; idempotency: string },
  options: AuditOptions,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
): Promise<AuditResult> {
  const { ledger, idempotency } = tables;
  const { job, date } = options;

  // The ledger first, then the records (as batchFigures reads them): a completion landing in between is in the records
  // but not yet in the ledger's counts, so a date still moving shows a gap instead of being called exact.
  const [batches, rejections] = await Promise.all([
    dateBatches(dynamo, ledger, job, date),
    dateRejections(dynamo, ledger, job, date),
  ]);
  if (batches.length === 0) {
    throw new NoBatchForDateError(
      `no batch of ${job} for business date ${date} in the run ledger (${ledger}); list the job's batches with \`ops status --job ${job} --batches 50\``,
      job,
      date,
    );
  }
  const discoveredBy = discoveringBatches(batches);
  const operationIds = [...discoveredBy.keys()];
  const records = await idempotencyStatesOf(dynamo, idempotency, job, operationIds, sleep);
  const completions = completionsIn(records);
  const figures = batches.map((b) => resolveBatch(b.batchId, b.item, b.invocations, completions));
  const ends = operationEnds(operationIds, records, rejectionReasons(rejections, batches), deadLetterReasons(batches));

  const states = [...ends.values()].map((e) => e.state);
  const tally = (state: OperationState) => states.filter((s) => s === state).length;
  const open = { inFlight: tally('in-flight'), waiting: tally('waiting') };
  const namedBy = completionsNaming(ends);
  const missing = [
    ...openGap(open),
    ...batches.flatMap((b, i) => batchGaps(b, figures[i], namedBy.get(b.batchId) ?? 0)),
    ...admissionGap(batches),
    ...unnamedCompletionGap(ends),
  ];
  return {
    ok: true,
    command: 'audit',
    job,
    businessDate: date,
    exact: missing.length === 0,
    missing,
    discovered: operationIds.length,
    completed: tally('completed'),
    rejected: tally('rejected'),
    deadLettered: tally('dead-lettered'),
    open,
    batches: batches.map((b, i) => auditBatch(b, figures[i])),
    invalidRows: batches.flatMap(invalidRowsOfBatch),
    ...(options.operations ? { operations: notCompleted(ends, discoveredBy) } : {}),
  };
}

/** Every batch of the date (batch IDs of a date start `<job>:<date>:`), each with its invocation items and its pages. */
async function dateBatches(dynamo: Dynamo, table: string, job: string, date: string): Promise<DateBatch[]> {
  const items = await queryAll(dynamo, {
    TableName: table,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': ledgerKeys.batchPartition(job), ':prefix': datePrefix(job, date) },
    ConsistentRead: true,
  });
  return Promise.all(
    items.map(async (item) => {
      const batchId = batchIdOf(item);
      const [invocations, pageOperations, invalidRows] = await Promise.all([
        invocationItems(dynamo, table, job, batchId),
        pagesOf(dynamo, table, job, batchId),
        partitionItems(dynamo, table, ledgerKeys.invalidRowPartition(job, batchId)),
      ]);
      return { batchId, item, invocations, pageOperations, invalidRows };
    }),
  );
}

function datePrefix(job: string, date: string): string {
  return `${job}:${date}:`;
}

/** Every item of one ledger partition, read consistently. */
function partitionItems(dynamo: Dynamo, table: string, pk: string): Promise<Record<string, unknown>[]> {
  return queryAll(dynamo, {
    TableName: table,
    KeyConditionExpression: 'pk = :pk',
    ExpressionAttributeValues: { ':pk': pk },
    ConsistentRead: true,
  });
}

/** The operation IDs a batch's admitted pages list (PAGES#<job>#<batchId>), in page order. */
async function pagesOf(dynamo: Dynamo, table: string, job: string, batchId: string): Promise<string[]> {
  const pages = await partitionItems(dynamo, table, ledgerKeys.pagePartition(job, batchId));
  return pages.flatMap((page) => (page.operations instanceof Uint8Array ? decodePageOperations(page.operations) : []));
}

/** The job's rejections that name a batch of the date (filtered server-side: the partition holds every date's). */
function dateRejections(dynamo: Dynamo, table: string, job: string, date: string): Promise<Record<string, unknown>[]> {
  return queryAll(dynamo, {
    TableName: table,
    KeyConditionExpression: 'pk = :pk',
    FilterExpression: 'begins_with(batchId, :prefix)',
    ExpressionAttributeValues: { ':pk': ledgerKeys.rejectionPartition(job), ':prefix': datePrefix(job, date) },
    ConsistentRead: true,
  });
}

/** Each operation of the date, with the batches whose pages list it, sorted. */
function discoveringBatches(batches: readonly DateBatch[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const b of batches) {
    for (const op of new Set(b.pageOperations)) out.set(op, [...(out.get(op) ?? []), b.batchId]);
  }
  for (const ids of out.values()) ids.sort();
  return out;
}

/** The reasons of each operation a rejection of one of the date's batches names. */
function rejectionReasons(
  rejections: readonly Record<string, unknown>[],
  batches: readonly DateBatch[],
): Map<string, string[]> {
  const batchIds = new Set(batches.map((b) => b.batchId));
  const out = new Map<string, string[]>();
  for (const r of rejections) {
    if (typeof r.operationId !== 'string' || !batchIds.has(String(r.batchId))) continue;
    const reasons = Array.isArray(r.reasons) ? r.reasons.map(String) : [];
    // A message delivered twice is rejected twice, for the same reasons.
    out.set(r.operationId, [...new Set([...(out.get(r.operationId) ?? []), ...reasons])]);
  }
  return out;
}

/** The reason of each operation an invocation of one of the date's batches dead-lettered (its first, if several). */
function deadLetterReasons(batches: readonly DateBatch[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const { operationId, reason } of deadLetterEntriesOf(batches.flatMap((b) => b.invocations))) {
    if (!out.has(operationId)) out.set(operationId, reason);
  }
  return out;
}

/**
 * Each operation's end. A completion outranks everything (a redrive or another batch may complete an operation after
 * it was dead-lettered or rejected); then a rejection, then a dead-letter; otherwise it is open: in flight while its
 * record is claimed (Powertools writes INPROGRESS or COMPLETED), waiting (queued, delayed or deferred) while it has none.
 */
function operationEnds(
  operationIds: readonly string[],
  records: ReadonlyMap<string, IdempotencyState>,
  rejections: ReadonlyMap<string, string[]>,
  deadLetters: ReadonlyMap<string, string>,
): Map<string, OperationEnd> {
  return new Map(
    operationIds.map((op): [string, OperationEnd] => {
      const record = records.get(op);
      if (record?.status === IdempotencyRecordStatus.COMPLETED)
        return [op, { state: 'completed', completedBy: record.completedBy?.batchId }];
      const rejected = rejections.get(op);
      if (rejected) return [op, { state: 'rejected', reason: rejected.join('; ') }];
      const deadLettered = deadLetters.get(op);
      if (deadLettered !== undefined) return [op, { state: 'dead-lettered', reason: deadLettered }];
      return [op, { state: record ? 'in-flight' : 'waiting' }];
    }),
  );
}

/** How many of the date's operations each batch completed, by the batch their completion record names. */
function completionsNaming(ends: ReadonlyMap<string, OperationEnd>): Map<string, number> {
  const out = new Map<string, number>();
  for (const { completedBy } of ends.values())
    if (completedBy !== undefined) out.set(completedBy, (out.get(completedBy) ?? 0) + 1);
  return out;
}

function openGap(open: AuditResult['open']): string[] {
  const count = open.inFlight + open.waiting;
  return count === 0
    ? []
    : [
        `${plural(count, 'operation')} still open (${format(open.inFlight)} in flight, ${format(open.waiting)} waiting)`,
      ];
}

/**
 * What keeps one batch from being exact: its equation; its pages against its discovered counter (a batch from before
 * the ledger kept pages lists none, so the audit cannot see its operations); and its completions against the
 * completion records that name it, which idempotency makes one per operation, so a batch counting more or fewer
 * counted one twice or missed one.
 */
function batchGaps(batch: DateBatch, figures: BatchFigures, named: number): string[] {
  const gaps: string[] = [];
  const { discovered, completed, completedElsewhere, rejected, deadLettered } = figures;
  // Every attempt at a page keeps what it discovered (a killed one's orphans included): the union is the batch's.
  const listed = new Set(batch.pageOperations).size;
  if (listed !== discovered) {
    gaps.push(
      `batch ${batch.batchId}: its pages in the ledger list ${plural(listed, 'operation')}, its counter says ${format(discovered)} discovered`,
    );
  }
  if (!batchExact(figures)) {
    gaps.push(
      `batch ${batch.batchId}: discovered ${format(discovered)} != completed ${format(completed)} + completedElsewhere ${format(completedElsewhere)} + ` +
        `rejected ${format(rejected)} + deadLettered ${format(deadLettered)}`,
    );
  }
  if (named !== completed) {
    gaps.push(
      `batch ${batch.batchId}: ledger counts ${plural(completed, 'completion')}, the idempotency records show ${format(named)}`,
    );
  }
  return gaps;
}

/**
 * A batch still admitting may discover more; when none is (every batch stopped at its page limit), the date's
 * operations past it were never discovered. A batch without admission state (from before admission) counts as finished.
 */
function admissionGap(batches: readonly DateBatch[]): string[] {
  const admission = (b: DateBatch) => (typeof b.item.admission === 'string' ? b.item.admission : undefined);
  const admitting = batches.filter((b) => admission(b) === AdmissionStatus.admitting);
  if (admitting.length > 0)
    return admitting.map(
      (b) => `batch ${b.batchId}: still admitting, so the date may have operations not discovered yet`,
    );
  if (batches.some((b) => admission(b) === AdmissionStatus.complete || admission(b) === undefined)) return [];
  return [
    `no batch of the date finished admission (${batches.map((b) => `${b.batchId}: ${admission(b)}`).join(', ')}): operations past the page limit ` +
      'were never discovered; raise maxPagesPerRun and catch the date up',
  ];
}

/** Completions written before they named their batch cannot be matched to any batch's count. */
function unnamedCompletionGap(ends: ReadonlyMap<string, OperationEnd>): string[] {
  const unnamed = [...ends.values()].filter((e) => e.state === 'completed' && e.completedBy === undefined).length;
  return unnamed === 0
    ? []
    : [
        `the completion records of ${plural(unnamed, 'operation')} name no batch (written before completions named theirs), so no batch's count can be checked against them`,
      ];
}

/** A batch's invalid source rows, by page, then key. */
function invalidRowsOfBatch(batch: DateBatch): AuditInvalidRow[] {
  return batch.invalidRows
    .map((item) => ({
      batchId: batch.batchId,
      ...(typeof item.page === 'number' ? { page: item.page } : {}),
      key: String(item.key),
      reasons: Array.isArray(item.reasons) ? item.reasons.map(String) : [],
      ...(typeof item.rejectedAt === 'string' ? { rejectedAt: item.rejectedAt } : {}),
    }))
    .sort((a, b) => (a.page ?? 0) - (b.page ?? 0) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

function auditBatch(batch: DateBatch, figures: BatchFigures): AuditBatch {
  return {
    batchId: batch.batchId,
    discovered: figures.discovered,
    completed: figures.completed,
    completedElsewhere: figures.completedElsewhere,
    adopted: figures.adopted,
    rejected: figures.rejected,
    deadLettered: figures.deadLettered,
    duplicates: figures.duplicates,
    retries: figures.retries,
    invalidRows: invalidRowsOf(batch.item),
    admission: typeof batch.item.admission === 'string' ? batch.item.admission : undefined,
    exact: batchExact(figures),
  };
}

function notCompleted(
  ends: ReadonlyMap<string, OperationEnd>,
  discoveredBy: ReadonlyMap<string, string[]>,
): AuditOperation[] {
  return [...ends]
    .filter(([, e]) => e.state !== 'completed')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([operationId, e]) => ({
      operationId,
      state: e.state as AuditOperation['state'],
      ...(e.reason !== undefined ? { reason: e.reason } : {}),
      batchIds: discoveredBy.get(operationId) ?? [],
    }));
}

export function renderAudit(result: AuditResult): string {
  const open = result.open.inFlight + result.open.waiting;
  const counts =
    `${plural(result.discovered, 'operation')}: ${format(result.completed)} completed, ${format(result.rejected)} rejected, ` +
    `${format(result.deadLettered)} dead-lettered, ${format(open)} open${open > 0 ? ` (${format(result.open.inFlight)} in flight, ${format(result.open.waiting)} waiting)` : ''}`;
  const skipped =
    result.invalidRows.length > 0
      ? `; ${plural(result.invalidRows.length, 'invalid source row')} recorded and skipped`
      : '';
  const verdict = `${result.businessDate} of ${result.job}: ${result.exact ? 'exact' : 'NOT exact'}, ${counts}${skipped}`;
  const parts = [[verdict, ...result.missing.map((m) => `- ${m}`)].join('\n')];
  parts.push(
    `Batches\n${renderTable(
      [
        'batch',
        'admission',
        'discovered',
        'completed',
        'elsewhere',
        'adopted',
        'rejected',
        'DLQ',
        'dupes',
        'retries',
        'invalid rows',
        'exact',
      ],
      result.batches.map((b) => [
        b.batchId,
        b.admission ?? 'none',
        b.discovered,
        b.completed,
        b.completedElsewhere,
        b.adopted,
        b.rejected,
        b.deadLettered,
        b.duplicates,
        b.retries,
        b.invalidRows,
        b.exact ? 'yes' : 'NO',
      ]),
    )}`,
  );
  if (result.invalidRows.length > 0) {
    parts.push(
      `Invalid source rows (recorded and skipped: fix them at the source, and the next run discovers them)\n${renderTable(
        ['batch', 'page', 'key', 'reasons'],
        result.invalidRows.map((r) => [r.batchId, r.page, r.key, r.reasons.join('; ')]),
      )}`,
    );
  }
  if (result.operations) {
    parts.push(
      result.operations.length === 0
        ? 'Not completed: none'
        : `Not completed\n${renderTable(
            ['operation', 'state', 'batches', 'reason'],
            result.operations.map((o) => [o.operationId, o.state, o.batchIds.join(' '), o.reason]),
          )}`,
    );
  }
  return parts.join('\n\n');
}
