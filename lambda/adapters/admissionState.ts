// A run's admission state, kept on its run-ledger item (BATCH#<job> / <batchId>): the discovery cursor, the admission
// step the chain is at, and a lease, so that a run admitted over a whole night by a chain of producer steps survives a
// killed step, a step delivered twice and a schedule delivered twice, without forking the chain or counting a page twice.
//
// Every change is one conditional UpdateItem. The producer holds a step's lease while it publishes; each published page
// moves the cursor and its counters in one write (so a re-published page is never counted again); the step's end moves
// the step number and releases the lease; a step that fails releases it too, so its retry takes the step at once; the
// continuation's sending is marked, so a step retried after a crash between its end and the send knows to send it.
//
// A lease's owner is one invocation, never a Lambda request ID: Lambda delivers an asynchronous event at least once, and
// a duplicated delivery (possibly concurrent) and a retry both keep the request ID, so two copies owning the step by it
// would both publish and both count every page.
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import {
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
} from '@aws-sdk/lib-dynamodb';
import type { DateRun } from '../core/admission';
import {
  AdmissionStatus,
  batchCountersOf,
  batchIdOf,
  decodePageOperations,
  encodePageOperations,
  INVALID_ROW_RETENTION_DAYS,
  ledgerKeys,
} from '../core/ledgerContract';

/** Pages of a job's batch partition read for its backfill figures. */
const MAX_BATCH_PAGES = 5;
/** SQS keeps a message at most 14 days. */
const SQS_MAX_RETENTION_MS = 14 * 86_400_000;
import { documentClient } from './clients';

// Admission's states are part of the ledger's contract (the reconciliation rule reads them); re-exported for the producer.
export { AdmissionStatus } from '../core/ledgerContract';

/** What the ledger item holds about admission (the counters beside it are the ledger's). */
export interface RunState {
  /** The step the chain expects next (0 before the first step finished). */
  step: number;
  status: AdmissionStatus;
  /** Discovery's cursor for the next page; absent at the start and once complete. */
  cursor?: string;
  /** Pages admitted so far. */
  pages: number;
  discovered: number;
  published: number;
  /**
   * Operations an attempt of a page discovered (and may have published) before it was killed, that the attempt which
   * committed the page did not discover again (lambda/core/ledgerContract.ts: they are in `discovered`, and resolved
   * by their completion records). Removed when a later page discovers one again.
   */
  orphans: string[];
  /** The last step for which a continuation was sent (-1: none). */
  continuationSent: number;
  /** When the run's last admitted message was planned to become visible (epoch ms). */
  plannedUntilMs?: number;
  /** When the next step is due (ISO), while admitting. */
  nextStepAt?: string;
  /** Starts per minute admission planned with; absent when admission is unlimited. */
  admissionRatePerMinute?: number;
  /** The job's count of eligible records at the run's start, when the job can count them. */
  eligible?: number;
  leaseOwner?: string;
  leaseUntilMs?: number;
  startedAt?: string;
  finishedAt?: string;
  /** A catch-up's run (RunStart.backfill), as its start wrote it. */
  backfill?: true;
  /** The earlier run of the date the last step waited for (lambda/core/admission.ts earlierRunAdmitting), while it waits. */
  waitingFor?: string;
}

export interface RunStart {
  businessDate: string;
  scheduledTime?: string;
  startedAt: string;
  admissionRatePerMinute?: number;
  eligible?: number;
  /** A catch-up's run (its work is backfill): live runs' admission does not queue behind its messages. */
  backfill?: true;
}

export interface PageCommit {
  /** The cursor after this page; undefined when discovery is finished. */
  cursor: string | undefined;
  /** Operations this page adds to the run's discovered: new ones, and the orphans of its killed attempts. */
  discovered: number;
  published: number;
  /** The run's orphans after this page (RunState.orphans); undefined: unchanged. */
  orphans?: string[];
  /** Source rows of this page that could not become messages (recorded by recordInvalidRows), apart from `discovered`. @default 0 */
  invalidRows?: number;
  plannedUntilMs?: number;
  finishedAt?: string;
}

/** One invalid source row as the ledger keeps it: its key and reasons, escaped and bounded (boundReasons). */
export interface InvalidRowRecord {
  key: string;
  reasons: string[];
}

export interface StepEnd {
  status: AdmissionStatus;
  nextStepAt?: string;
  plannedUntilMs?: number;
  /** The earlier run of the date this step waited for; kept for the operator until a step admits again. */
  waitingFor?: string;
}

/** What the producer depends on; tests may substitute it. */
export interface RunStateStore {
  /** Creates the run's admission state if absent (writing its start facts once) and returns it. */
  ensure(job: string, batchId: string, start: RunStart): Promise<RunState>;
  read(job: string, batchId: string): Promise<RunState | undefined>;
  /**
   * Takes step `step`'s lease until `untilMs`, unless another owner holds it (unexpired) or the run is not at that step.
   * `owner` must be unique to one invocation: the same owner renews its lease.
   */
  lease(job: string, batchId: string, step: number, owner: string, nowMs: number, untilMs: number): Promise<boolean>;
  /**
   * Gives step `step`'s lease up if `owner` still holds it (a failed step, so its retry need not wait for the lease to
   * expire); false when it did not (the step ended, or another owner took it over).
   */
  release(job: string, batchId: string, step: number, owner: string): Promise<boolean>;
  /**
   * Keeps the operation IDs one attempt (`owner`) of page `page` (1-based) discovered, before it publishes them: an
   * attempt killed after publishing part of its page leaves its item, so the attempt that takes the page over finds
   * what it discovered (pageAttempts).
   */
  /**
   * Keeps one page attempt's operation IDs, before it publishes; `startedMs` (when the attempt began discovering the
   * page) lets `ops preflight` measure a page's time from consecutive pages of one invocation.
   */
  recordPage(
    job: string,
    batchId: string,
    page: number,
    owner: string,
    operationIds: readonly string[],
    startedMs?: number,
  ): Promise<void>;
  /** The operation IDs each earlier attempt of page `page` recorded (read consistently). */
  pageAttempts(job: string, batchId: string, page: number): Promise<string[][]>;
  /**
   * Keeps the source rows of a page that could not become messages, each with its key and reasons, for review (one
   * item per row, keyed by its key: a retried page writes the same items again). Written before the page is
   * published; the page's commit counts them.
   */
  recordInvalidRows(job: string, batchId: string, page: number, rows: readonly InvalidRowRecord[]): Promise<void>;
  /** Records one published page; false when the lease was lost (another owner took the step over). */
  commitPage(job: string, batchId: string, step: number, owner: string, page: PageCommit): Promise<boolean>;
  /** Moves the run to step + 1 and releases the lease; false when the lease was lost. */
  endStep(job: string, batchId: string, step: number, owner: string, end: StepEnd): Promise<boolean>;
  /** Notes that step `step`'s continuation was sent. */
  markContinuation(job: string, batchId: string, step: number): Promise<void>;
  /**
   * Backfill runs' messages still in the queue, by their ledger figures (published less settled): what a live run's
   * admission leaves out of the queue's depth, since the consumers let live work go first. @default 0 when absent
   */
  backfillOutstanding?(job: string): Promise<number>;
  /**
   * The runs of the job's business date (every one, this run's too), with what admission's order between them needs:
   * one request, read consistently, so a step sees a run that ended a moment ago as ended. @default none when absent
   */
  dateRuns?(job: string, businessDate: string): Promise<DateRun[]>;
}

export interface DynamoRunStateStoreOptions {
  tableName: string;
  /** @default the container's shared document client */
  client?: Pick<DynamoDBDocumentClient, 'send'>;
  /** Ledger item lifetime (as the ledger's). @default 90 */
  retentionDays?: number;
  /** How long an invalid source row's record lives. @default INVALID_ROW_RETENTION_DAYS (14) */
  invalidRowRetentionDays?: number;
  /** @default () => new Date() */
  now?: () => Date;
}

/** Writes in flight at once when a page's invalid rows are recorded (BatchWriteItem's own limit per call). */
const INVALID_ROW_WRITES = 25;

/** An UpdateExpression's SET clauses with their names and values, built one attribute at a time. */
class Assignments {
  readonly set: string[] = [];
  constructor(
    readonly names: Record<string, string>,
    readonly values: Record<string, unknown>,
  ) {}

  /** `#key = :key` (or `if_not_exists`, to write once), skipped when the value is undefined. */
  assign(key: string, value: unknown, once = false): this {
    if (value === undefined) return this;
    this.names[`#${key}`] = key;
    this.values[`:${key}`] = value;
    this.set.push(once ? `#${key} = if_not_exists(#${key}, :${key})` : `#${key} = :${key}`);
    return this;
  }
}

const isConditionFailure = (error: unknown) =>
  error instanceof ConditionalCheckFailedException || (error as Error)?.name === 'ConditionalCheckFailedException';

function toState(item: Record<string, unknown>): RunState {
  const num = (k: string) => (typeof item[k] === 'number' ? (item[k] as number) : undefined);
  const str = (k: string) => (typeof item[k] === 'string' ? (item[k] as string) : undefined);
  return {
    step: num('step') ?? 0,
    status: (str('admission') as AdmissionStatus | undefined) ?? AdmissionStatus.admitting,
    cursor: str('cursor'),
    pages: num('pages') ?? 0,
    discovered: num('discovered') ?? 0,
    published: num('published') ?? 0,
    orphans: Array.isArray(item.orphans) ? item.orphans.filter((o): o is string => typeof o === 'string') : [],
    continuationSent: num('continuationSent') ?? -1,
    plannedUntilMs: num('plannedUntilMs'),
    nextStepAt: str('nextStepAt'),
    admissionRatePerMinute: num('admissionRatePerMinute'),
    eligible: num('eligible'),
    leaseOwner: str('leaseOwner'),
    leaseUntilMs: num('leaseUntilMs'),
    startedAt: str('startedAt'),
    finishedAt: str('finishedAt'),
    ...(item.backfill === true ? { backfill: true as const } : {}),
    ...(str('waitingFor') ? { waitingFor: str('waitingFor') } : {}),
  };
}

export class DynamoRunStateStore implements RunStateStore {
  private readonly retentionSeconds: number;
  private readonly invalidRowRetentionSeconds: number;
  private readonly now: () => Date;

  constructor(private readonly options: DynamoRunStateStoreOptions) {
    this.retentionSeconds = (options.retentionDays ?? 90) * 86_400;
    this.invalidRowRetentionSeconds = (options.invalidRowRetentionDays ?? INVALID_ROW_RETENTION_DAYS) * 86_400;
    this.now = options.now ?? (() => new Date());
  }

  async backfillOutstanding(job: string, nowMs = Date.now()): Promise<number> {
    let outstanding = 0;
    let startKey: Record<string, unknown> | undefined;
    // A job's batch partition holds one item per run of its retention (about a hundred): a few pages at most.
    for (let page = 0; page < MAX_BATCH_PAGES; page++) {
      const out = await this.client().send(
        new QueryCommand({
          TableName: this.options.tableName,
          KeyConditionExpression: 'pk = :pk',
          FilterExpression: 'backfill = :yes',
          ProjectionExpression: 'published, completed, rejected, deadLettered, startedAt',
          ExpressionAttributeValues: { ':pk': ledgerKeys.batchPartition(job), ':yes': true },
          ...(startKey ? { ExclusiveStartKey: startKey } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        // Past SQS's longest retention, whatever a run did not settle is no longer in any queue.
        if (typeof item.startedAt === 'string' && Date.parse(item.startedAt) < nowMs - SQS_MAX_RETENTION_MS) continue;
        const c = batchCountersOf(item);
        outstanding += Math.max(0, c.published - c.completed - c.rejected - c.deadLettered);
      }
      startKey = out.LastEvaluatedKey;
      if (!startKey) break;
    }
    return outstanding;
  }

  async dateRuns(job: string, businessDate: string): Promise<DateRun[]> {
    // The date's runs are one key range of the job's batch partition: a few items, one Query page (a page holds 1 MB;
    // a run's item is a few hundred bytes). Read consistently: a run that just ended its admission is seen as ended.
    const out = await this.client().send(
      new QueryCommand({
        TableName: this.options.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :date)',
        ProjectionExpression: 'sk, #admission, startedAt, backfill, nextStepAt, leaseUntilMs, plannedUntilMs',
        ExpressionAttributeNames: { '#admission': 'admission' },
        ExpressionAttributeValues: {
          ':pk': ledgerKeys.batchPartition(job),
          ':date': ledgerKeys.batchDatePrefix(job, businessDate),
        },
        ConsistentRead: true,
      }),
    );
    return (out.Items ?? []).map((item) => ({
      batchId: batchIdOf(item),
      ...(typeof item.admission === 'string' ? { admission: item.admission } : {}),
      ...(typeof item.startedAt === 'string' ? { startedAt: item.startedAt } : {}),
      ...(item.backfill === true ? { backfill: true } : {}),
      ...(typeof item.nextStepAt === 'string' ? { nextStepAt: item.nextStepAt } : {}),
      ...(typeof item.leaseUntilMs === 'number' ? { leaseUntilMs: item.leaseUntilMs } : {}),
      ...(typeof item.plannedUntilMs === 'number' ? { plannedUntilMs: item.plannedUntilMs } : {}),
    }));
  }

  async ensure(job: string, batchId: string, start: RunStart): Promise<RunState> {
    const values: Record<string, unknown> = {
      ':zero': 0,
      ':none': -1,
      ':admitting': AdmissionStatus.admitting,
      ':job': job,
      ':expiresAt': Math.floor(Date.parse(start.startedAt) / 1000) + this.retentionSeconds,
      ':businessDate': start.businessDate,
      ':startedAt': start.startedAt,
    };
    const set = [
      '#step = if_not_exists(#step, :zero)',
      '#pages = if_not_exists(#pages, :zero)',
      '#admission = if_not_exists(#admission, :admitting)',
      '#continuationSent = if_not_exists(#continuationSent, :none)',
      '#job = if_not_exists(#job, :job)',
      '#expiresAt = if_not_exists(#expiresAt, :expiresAt)',
      '#businessDate = if_not_exists(#businessDate, :businessDate)',
      '#startedAt = if_not_exists(#startedAt, :startedAt)',
    ];
    const names: Record<string, string> = {
      '#step': 'step',
      '#pages': 'pages',
      '#admission': 'admission',
      '#continuationSent': 'continuationSent',
      '#job': 'job',
      '#expiresAt': 'expiresAt',
      '#businessDate': 'businessDate',
      '#startedAt': 'startedAt',
    };
    const optional = new Assignments(names, values);
    for (const key of ['scheduledTime', 'admissionRatePerMinute', 'eligible', 'backfill'] as const)
      optional.assign(key, start[key], true);
    set.push(...optional.set);
    const out = await this.client().send(
      new UpdateCommand({
        TableName: this.options.tableName,
        Key: ledgerKeys.batch(job, batchId),
        UpdateExpression: `SET ${set.join(', ')}`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_NEW',
      }),
    );
    return toState(out.Attributes ?? {});
  }

  async read(job: string, batchId: string): Promise<RunState | undefined> {
    const out = await this.client().send(
      new GetCommand({ TableName: this.options.tableName, Key: ledgerKeys.batch(job, batchId), ConsistentRead: true }),
    );
    return out.Item && typeof out.Item.step === 'number' ? toState(out.Item) : undefined;
  }

  async lease(
    job: string,
    batchId: string,
    step: number,
    owner: string,
    nowMs: number,
    untilMs: number,
  ): Promise<boolean> {
    return this.conditional({
      Key: ledgerKeys.batch(job, batchId),
      UpdateExpression: 'SET #leaseOwner = :owner, #leaseUntilMs = :until',
      ConditionExpression:
        '#step = :step AND #admission = :admitting AND (attribute_not_exists(#leaseUntilMs) OR #leaseUntilMs < :now OR #leaseOwner = :owner)',
      ExpressionAttributeNames: {
        '#leaseOwner': 'leaseOwner',
        '#leaseUntilMs': 'leaseUntilMs',
        '#step': 'step',
        '#admission': 'admission',
      },
      ExpressionAttributeValues: {
        ':owner': owner,
        ':until': untilMs,
        ':step': step,
        ':now': nowMs,
        ':admitting': AdmissionStatus.admitting,
      },
    });
  }

  async release(job: string, batchId: string, step: number, owner: string): Promise<boolean> {
    return this.conditional({
      Key: ledgerKeys.batch(job, batchId),
      UpdateExpression: 'REMOVE #leaseOwner, #leaseUntilMs',
      ConditionExpression: '#step = :step AND #leaseOwner = :owner',
      ExpressionAttributeNames: { '#leaseOwner': 'leaseOwner', '#leaseUntilMs': 'leaseUntilMs', '#step': 'step' },
      ExpressionAttributeValues: { ':step': step, ':owner': owner },
    });
  }

  async recordPage(
    job: string,
    batchId: string,
    page: number,
    owner: string,
    operationIds: readonly string[],
    startedMs?: number,
  ): Promise<void> {
    await this.client().send(
      new PutCommand({
        TableName: this.options.tableName,
        Item: {
          ...ledgerKeys.page(job, batchId, page, owner),
          job,
          batchId,
          count: operationIds.length,
          operations: encodePageOperations(operationIds),
          ...(startedMs !== undefined ? { startedMs } : {}),
          expiresAt: Math.floor(Date.now() / 1000) + this.retentionSeconds,
        },
      }),
    );
  }

  async recordInvalidRows(
    job: string,
    batchId: string,
    page: number,
    rows: readonly InvalidRowRecord[],
  ): Promise<void> {
    const at = this.now();
    const expiresAt = Math.floor(at.getTime() / 1000) + this.invalidRowRetentionSeconds;
    // Puts, not BatchWriteItem: a batch write hands back unprocessed items to resend by hand, and bad rows are few.
    for (let i = 0; i < rows.length; i += INVALID_ROW_WRITES) {
      await Promise.all(
        rows.slice(i, i + INVALID_ROW_WRITES).map((row) =>
          this.client().send(
            new PutCommand({
              TableName: this.options.tableName,
              Item: {
                ...ledgerKeys.invalidRow(job, batchId, row.key),
                job,
                batchId,
                page,
                key: row.key,
                reasons: row.reasons,
                rejectedAt: at.toISOString(),
                expiresAt,
              },
            }),
          ),
        ),
      );
    }
  }

  async pageAttempts(job: string, batchId: string, page: number): Promise<string[][]> {
    const { pk, sk } = ledgerKeys.page(job, batchId, page, '');
    const response = await this.client().send(
      new QueryCommand({
        TableName: this.options.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :page)',
        ExpressionAttributeValues: { ':pk': pk, ':page': sk },
        ConsistentRead: true,
      }),
    );
    // A page's attempts are few (one per kill), far below a Query page.
    return (response.Items ?? []).map((item) =>
      item.operations instanceof Uint8Array ? decodePageOperations(item.operations) : [],
    );
  }

  async commitPage(job: string, batchId: string, step: number, owner: string, page: PageCommit): Promise<boolean> {
    const { set, names, values } = new Assignments(
      {
        '#step': 'step',
        '#leaseOwner': 'leaseOwner',
        '#pages': 'pages',
        '#discovered': 'discovered',
        '#published': 'published',
        '#cursor': 'cursor',
      },
      { ':step': step, ':owner': owner, ':one': 1, ':discovered': page.discovered, ':published': page.published },
    )
      .assign('cursor', page.cursor)
      .assign('orphans', page.orphans)
      .assign('plannedUntilMs', page.plannedUntilMs)
      .assign('finishedAt', page.finishedAt);
    // Only a page with invalid rows adds the counter, so a run without any keeps its item as it was.
    const invalidRows = page.invalidRows ?? 0;
    if (invalidRows > 0) {
      names['#invalidRows'] = 'invalidRows';
      values[':invalidRows'] = invalidRows;
    }
    const expression = [
      set.length ? `SET ${set.join(', ')}` : '',
      `ADD #pages :one, #discovered :discovered, #published :published${invalidRows > 0 ? ', #invalidRows :invalidRows' : ''}`,
      page.cursor === undefined ? 'REMOVE #cursor' : '',
    ]
      .filter(Boolean)
      .join(' ');
    return this.conditional({
      Key: ledgerKeys.batch(job, batchId),
      UpdateExpression: expression,
      ConditionExpression: '#step = :step AND #leaseOwner = :owner',
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    });
  }

  async endStep(job: string, batchId: string, step: number, owner: string, end: StepEnd): Promise<boolean> {
    const assignments = new Assignments(
      {
        '#step': 'step',
        '#leaseOwner': 'leaseOwner',
        '#leaseUntilMs': 'leaseUntilMs',
        '#nextStepAt': 'nextStepAt',
        '#waitingFor': 'waitingFor',
      },
      { ':step': step, ':next': step + 1, ':owner': owner },
    )
      .assign('admission', end.status)
      .assign('nextStepAt', end.nextStepAt)
      .assign('plannedUntilMs', end.plannedUntilMs)
      .assign('waitingFor', end.waitingFor);
    const { names, values } = assignments;
    const set = ['#step = :next', ...assignments.set];
    const remove = [
      '#leaseOwner',
      '#leaseUntilMs',
      ...(end.nextStepAt === undefined ? ['#nextStepAt'] : []),
      ...(end.waitingFor === undefined ? ['#waitingFor'] : []),
    ];
    return this.conditional({
      Key: ledgerKeys.batch(job, batchId),
      UpdateExpression: `SET ${set.join(', ')} REMOVE ${remove.join(', ')}`,
      ConditionExpression: '#step = :step AND #leaseOwner = :owner',
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    });
  }

  async markContinuation(job: string, batchId: string, step: number): Promise<void> {
    await this.conditional({
      Key: ledgerKeys.batch(job, batchId),
      UpdateExpression: 'SET #continuationSent = :step',
      ConditionExpression: 'attribute_not_exists(#continuationSent) OR #continuationSent < :step',
      ExpressionAttributeNames: { '#continuationSent': 'continuationSent' },
      ExpressionAttributeValues: { ':step': step },
    });
  }

  /** One conditional update; false when its condition did not hold (dynalite returns no old item, so none is asked for). */
  private async conditional(
    input: Omit<ConstructorParameters<typeof UpdateCommand>[0], 'TableName'>,
  ): Promise<boolean> {
    try {
      await this.client().send(new UpdateCommand({ TableName: this.options.tableName, ...input }));
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  private client() {
    return this.options.client ?? documentClient();
  }
}
