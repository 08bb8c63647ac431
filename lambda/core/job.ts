// The job plug-in contract: how a job discovers one bounded page of work, and how it applies one operation.
import type * as z from 'zod/mini';
import type { JobRuntimeSettings } from './constants';

/** What discovery is asked for: one bounded page of the business date's work. */
export interface DiscoverRequest {
  businessDate: string;
  /** Opaque cursor from the previous page; absent on the first page. */
  cursor?: string;
  pageSize: number;
  /** The run's clock, so discovery is reproducible in tests. */
  now: Date;
}

/** One unit of work discovery found: its idempotency key and the resource apply acts on. */
export interface DiscoveredOperation<R> {
  /** Stable across re-runs of the same business date. */
  operationId: string;
  resource: R;
}

/**
 * A source row discovery could not turn into an operation (an ID that cannot be part of an operation ID, a field its
 * resource schema refuses). The producer records it in the run ledger for review, counts it and skips it: one bad row
 * never halts the page or the run.
 */
export interface InvalidRow {
  /** The row's primary key, as text (never its data: the record is kept for review). */
  key: string;
  /** What is wrong with it. */
  reason: string;
}

/** One page of discovery: its operations, its rows that cannot become one, and where the next page starts. */
export interface DiscoverPage<R> {
  operations: DiscoveredOperation<R>[];
  /** The page's rows that cannot become operations; absent or empty when every row could. */
  invalid?: InvalidRow[];
  /** Present when more work remains. */
  nextCursor?: string;
}

/**
 * A page's rows as operations, and the rows that cannot become one: `toOperation` returns the row's operation, or a
 * string saying why the row is invalid. An error it throws still fails the page: that is a fault, not a bad row.
 */
export function operationsOf<T, R>(
  rows: readonly T[],
  keyOf: (row: T) => string,
  toOperation: (row: T) => DiscoveredOperation<R> | string,
): Required<Pick<DiscoverPage<R>, 'operations' | 'invalid'>> {
  const operations: DiscoveredOperation<R>[] = [];
  const invalid: InvalidRow[] = [];
  for (const row of rows) {
    const result = toOperation(row);
    if (typeof result === 'string') invalid.push({ key: keyOf(row), reason: result });
    else operations.push(result);
  }
  return { operations, invalid };
}

/** One operation for apply, as its message carries it: the resource has passed the job's resource schema. */
export interface ApplyRequest<R> {
  operationId: string;
  batchId: string;
  businessDate: string;
  resource: R;
  /** Milliseconds left in this invocation. */
  remainingTimeMs: () => number;
}

/** What apply records as the operation's result (persisted by idempotency and replayed to duplicates). */
export interface ApplyResult {
  /** 'applied': this call made the change; 'already-done': the target was already in the desired state. */
  outcome: 'applied' | 'already-done';
  detail?: Record<string, string | number | boolean>;
}

/**
 * A zod 4 schema of the resource one message carries. Write it with zod/mini (`import * as z from 'zod/mini'`), as
 * the jobs here do: a classic zod schema (`from 'zod'`) is accepted as well, but it brings classic zod's methods and
 * JSON Schema code into the job's bundles (about 60 KB of a consumer's 250 KB). The runtime calls `safeParse`.
 */
export type ResourceSchema<R> = z.core.$ZodType<R> & { safeParse(data: unknown): z.core.util.SafeParseResult<R> };

/**
 * One job. `D` is whatever the job needs at run time (clients, table names), built once per container by
 * `createDeps` from the settings the stack provided.
 */
export interface JobDefinition<R extends Record<string, string | number | boolean>, D> {
  name: string;
  resourceSchema: ResourceSchema<R>;
  /**
   * The secondary indexes discovery queries, by the table alias of the job's `uses.tables`: `ops preflight` checks each
   * exists and is active on the deployed table (an imported table may lack it). Absent: discovery needs none.
   */
  discoveryIndexes?: { table: string; index: string }[];
  createDeps(settings: JobRuntimeSettings): D;
  discover(deps: D, request: DiscoverRequest): Promise<DiscoverPage<R>>;
  /**
   * Optional: how many records are eligible for the business date, counted once when a run starts, so the operator
   * sees what is discovered but not yet admitted and when the run should finish. A job that cannot count cheaply
   * leaves it out.
   */
  countEligible?(deps: D, request: Omit<DiscoverRequest, 'cursor' | 'pageSize'>): Promise<number>;
  apply(deps: D, request: ApplyRequest<R>): Promise<ApplyResult>;
}

/** A job whose resource and dependency types are erased, as the runtime holds it. */
// biome-ignore lint/suspicious/noExplicitAny: the runtime holds any job; `unknown` would not accept a typed job's apply.
export type AnyJob = JobDefinition<any, any>;

/** Declares a job with its types checked; the identity function keeps call sites typed. */
export function defineJob<R extends Record<string, string | number | boolean>, D>(
  job: JobDefinition<R, D>,
): JobDefinition<R, D> {
  return job;
}
