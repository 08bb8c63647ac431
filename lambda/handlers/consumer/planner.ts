// The consumer's pre-pass over a batch, before any record is claimed: each record validated, not-yet-due ones set
// aside, those already COMPLETED found in one read, and ONE block of rate-limit slots taken for the rest that are due.
import type { SQSRecord } from 'aws-lambda';
import type { CompletedBy } from '../../core/ledgerContract';
import { futureBusinessDate, type BusinessDateRule } from '../../core/businessDate';
import { notBeforeBeyondRetention, type DeferralCause } from '../../core/deferral';
import type { AnyJob } from '../../core/job';
import { fairOrder, isBackfill, REDRIVEN_MARK_ATTRIBUTE } from '../../core/backfill';
import { keyOf } from '../../core/fairness';
import { boundReasons, parseMessage, type JobMessage } from '../../core/message';
import { describeIssues } from '../../core/issues';
import type { CompletedLookup } from '../../adapters/completedOperations';
import { logger } from '../../adapters/observability';
import { LimiterContentionError } from '../../adapters/rateLimiter';
import type { BlockPacing } from '../../core/pacing/pacer';

/** What the pre-pass decided for one record, before any record is claimed. */
export type Plan =
  | { kind: 'reject'; reasons: string[] }
  | { kind: 'defer'; message: JobMessage; cause: DeferralCause }
  /** The limiter could not be asked (DynamoDB failed): the record fails and SQS redelivers it, unclaimed. */
  | { kind: 'fail'; message: JobMessage; error: Error }
  /** Already COMPLETED (the pre-check): a duplicate, settled without a slot or a claim. */
  | { kind: 'done'; message: JobMessage; by: CompletedBy | undefined }
  /**
   * The record asks the invocation's pacing for its start when it is reached (InvocationPacing.start); `key`: its
   * per-key limits' key, when the job has one. `behindLive`: a backfill record while live work waits, which takes only
   * a slot free now and within backfill's cap.
   */
  | { kind: 'run'; message: JobMessage; resource: Record<string, unknown>; key?: string; behindLive?: true };

type Validated =
  | { ok: true; message: JobMessage; resource: Record<string, unknown> }
  | { ok: false; reasons: string[] };

/** Size cap, envelope, this job's name and the job's own resource schema; every problem is named. */
export function validateRecord(body: string, job: AnyJob, maxBytes: number): Validated {
  const parsed = parseMessage(body, maxBytes);
  if (!parsed.ok) return parsed;
  const reasons: string[] = [];
  if (parsed.message.jobType !== job.name)
    reasons.push(`jobType: expected "${job.name}", got "${parsed.message.jobType}"`);
  const resource = job.resourceSchema.safeParse(parsed.message.resource);
  if (!resource.success) {
    reasons.push(...describeIssues(resource.error, { root: 'resource', rootInPaths: true }));
  }
  return reasons.length > 0
    ? { ok: false, reasons: boundReasons(reasons) }
    : { ok: true, message: parsed.message, resource: resource.data };
}

export interface PlannerOptions {
  job: AnyJob;
  maxMessageBytes: number;
  /** Asked for the due records before they take slots: an operation already COMPLETED needs no slot. */
  completedLookup: CompletedLookup;
  /** The expected spacing between starts: deferrals past the grant are spread by it. */
  spacingMs: number;
  /** The resource field whose value is each record's key, when the job has a per-key rate limit. */
  keyField?: string;
  /** The job's business-date rule: a message of a date after its latest now is rejected, never applied. */
  businessDates: BusinessDateRule;
  /** The work queue's retention: a message whose notBefore is further than this after its enqueuedAt is rejected. */
  queueRetentionSeconds: number;
  now: () => Date;
}

/** A valid record that is due: it takes a slot, unless its operation has already completed. */
type Due = { record: SQSRecord; message: JobMessage; resource: Record<string, unknown>; key?: string };

/** A due record's plan: it runs, taking only a free slot within backfill's cap when `behindLive`. */
const runPlan = (d: Due, behindLive = false): Plan => ({
  kind: 'run',
  message: d.message,
  resource: d.resource,
  ...(d.key !== undefined ? { key: d.key } : {}),
  ...(behindLive ? { behindLive: true as const } : {}),
});

/** A copy the consumer wrote to the DLQ, moved back by a redrive (it carries the DLQ copy's attributes). */
const redriven = (record: SQSRecord): boolean =>
  record.messageAttributes !== undefined && REDRIVEN_MARK_ATTRIBUTE in record.messageAttributes;

export class Planner {
  constructor(private readonly options: PlannerOptions) {}

  /**
   * Why a valid message must never be applied, whatever its sender checked: a business date after the job's latest
   * now (its cutoffs would reach into the future), or a notBefore no queue could keep it for.
   */
  private refusal(message: JobMessage): string | undefined {
    const { job, businessDates, queueRetentionSeconds, now } = this.options;
    const future = futureBusinessDate(job.name, message.businessDate, businessDates, now());
    if (future) return `businessDate: ${future.message}`;
    return notBeforeBeyondRetention(message, queueRetentionSeconds);
  }

  /**
   * Decides every record of the batch. The block is as many slots as this container can start on time (see
   * SlotPool.usableBlock): one limiter write per invocation while applies are quicker than the slot spacing, and no
   * record is claimed before it holds a slot.
   */
  async plan(records: SQSRecord[], pacing: BlockPacing): Promise<Map<string, Plan>> {
    const plans = new Map<string, Plan>();
    const nowMs = this.options.now().getTime();
    let due: Due[] = [];
    for (const record of records) {
      const decided = this.decide(record, nowMs);
      if ('kind' in decided) plans.set(record.messageId, decided);
      else due.push(decided);
    }
    if (due.length === 0) return plans;
    due = await this.withoutCompleted(
      fairOrder(
        due,
        (d) => d.key,
        (d) => d.message.backfill === true,
      ),
      plans,
    );
    if (due.length === 0) return plans;
    if (!pacing.paced) {
      for (const d of due) plans.set(d.record.messageId, runPlan(d));
      return plans;
    }
    // Backfill while live work waits takes its slots one by one when reached (only free ones, within its cap); the
    // block is for the live records.
    if (due.some((d) => d.message.backfill) && (await pacing.backfillGated())) {
      for (const d of due) if (d.message.backfill) plans.set(d.record.messageId, runPlan(d, true));
      due = due.filter((d) => !d.message.backfill);
      if (due.length === 0) return plans;
    }
    await this.planBlock(due, pacing, plans);
    return plans;
  }

  /** One record's plan when it is settled before any slot (rejected, not yet due), else the record as due. */
  private decide(record: SQSRecord, nowMs: number): Plan | Due {
    const { job, maxMessageBytes, keyField } = this.options;
    const validated = validateRecord(record.body, job, maxMessageBytes);
    if (!validated.ok) return { kind: 'reject', reasons: validated.reasons };
    const { resource } = validated;
    const refused = this.refusal(validated.message);
    if (refused !== undefined) return { kind: 'reject', reasons: [refused] };
    // A redriven copy carries no mark in its body: marked here, so its deferrals stay backfill. Its deferral age
    // starts again now, as its deferral count did in the DLQ copy: it may have waited in the DLQ longer than the
    // age limit (lambda/core/deferral.ts), and would otherwise be dead-lettered again at its first deferral.
    const rearmed = redriven(record) ? { firstEnqueuedAt: new Date(nowMs).toISOString() } : {};
    const message = isBackfill(validated.message, record.messageAttributes)
      ? { ...validated.message, backfill: true as const, ...rearmed }
      : validated.message;
    const key = keyField === undefined ? undefined : keyOf(resource, keyField);
    if (key === null) {
      const reason =
        `resource.${keyField}: missing or empty; it is the key of the job's per-key rate limit` +
        ' (rateLimit.perKey.key)';
      return { kind: 'reject', reasons: [reason] };
    }
    const notBeforeMs = message.notBefore === undefined ? undefined : Date.parse(message.notBefore);
    if (notBeforeMs !== undefined && notBeforeMs > nowMs) {
      return { kind: 'defer', message, cause: { kind: 'not-before', notBeforeMs } };
    }
    return { record, message, resource, ...(key !== undefined ? { key } : {}) };
  }

  /** Duplicates first, so they take no slot: one read per invocation, and a failed read only skips the shortcut. */
  private async withoutCompleted(due: Due[], plans: Map<string, Plan>): Promise<Due[]> {
    const { job, completedLookup } = this.options;
    try {
      const done = await completedLookup.completed(
        job.name,
        due.map((d) => d.message.operationId),
      );
      if (done.size === 0) return due;
      for (const { record, message } of due) {
        const by = done.get(message.operationId);
        if (done.has(message.operationId)) plans.set(record.messageId, { kind: 'done', message, by });
      }
      return due.filter((d) => !done.has(d.message.operationId));
    } catch (error) {
      logger.warn('completed-operation pre-check failed; every due record takes a slot and the claim decides', {
        error: error as Error,
      });
      return due;
    }
  }

  /** The block for the due records: each runs, or is deferred (the key busy) or failed (the limiter down). */
  private async planBlock(due: Due[], pacing: BlockPacing, plans: Map<string, Plan>): Promise<void> {
    const { spacingMs, keyField } = this.options;
    // With per-key limits, one slot per key of the batch: a key's second record waits for its key, and takes its slot then.
    const keys = keyField === undefined ? due.length : new Set(due.map((d) => d.key)).size;
    const block = Math.min(due.length, pacing.usableBlock(), keys);
    let acquired;
    try {
      acquired = await pacing.acquireBlock(block, due.some((d) => !d.message.backfill) ? 'live' : 'backfill');
    } catch (error) {
      if (error instanceof LimiterContentionError) {
        // The item is hot, not down: the fleet is busy on it, so the records wait their turn like any paced record,
        // spread, rather than for the visibility timeout.
        const { attempts } = error;
        logger.warn('rate limiter item contended; deferring the due records', { key: pacing.key, attempts });
        due.forEach(({ record, message }, i) => {
          const waitMs = (i + 1) * Math.max(spacingMs, 1);
          plans.set(record.messageId, { kind: 'defer', message, cause: { kind: 'paced', waitMs } });
        });
        return;
      }
      const what = 'rate limiter unavailable; the due records will be retried by SQS, unclaimed';
      logger.error(what, { key: pacing.key, error: error as Error });
      for (const { record, message } of due)
        plans.set(record.messageId, { kind: 'fail', message, error: error as Error });
      return;
    }
    // The whole block granted: the key has room, and the records past it take their slots when they are reached. Less:
    // the key is busy, and the rest are deferred now, together, rather than each waiting for a refusal.
    const runAll = acquired.granted === block;
    due.forEach((d, i) => {
      if (i < acquired.granted || runAll) {
        plans.set(d.record.messageId, runPlan(d));
      } else {
        const waitMs = acquired.waitMs + (i - acquired.granted) * spacingMs;
        plans.set(d.record.messageId, { kind: 'defer', message: d.message, cause: { kind: 'paced', waitMs } });
      }
    });
  }
}
