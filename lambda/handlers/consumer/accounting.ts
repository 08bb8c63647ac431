// What each record came to, counted: the metrics, the log line and the invocation's tally for the run ledger, and the
// ledger flush at the invocation's end. Every outcome of the consumer is settled through here.
import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';
import { deadLetterEntry, ledgerEntry, type CompletedBy } from '../../core/ledgerContract';
import type { ApplyResult } from '../../core/job';
import { idSchema, type JobMessage } from '../../core/message';
import type { BatchTally, Ledger } from '../../adapters/ledger';
import { count, logger, MetricName, milliseconds } from '../../adapters/observability';
import { RECORD_FAILURE_KEY, recordFailure } from './recordFailure';

/** What one record came to; the batch response only sees whether the record handler threw. */
export type RecordOutcome = 'applied' | 'already-done' | 'duplicate' | 'rejected' | 'deferred' | 'dead-lettered';

/** The IDs a rejected body still carries, for the review record; only values that are valid IDs. */
export function salvageIds(body: string): { batchId?: string; operationId?: string } {
  try {
    const raw = JSON.parse(body) as Record<string, unknown>;
    const pick = (v: unknown) => (idSchema.safeParse(v).success ? (v as string) : undefined);
    return raw && typeof raw === 'object' ? { batchId: pick(raw.batchId), operationId: pick(raw.operationId) } : {};
  } catch {
    return {};
  }
}

export interface AccountingOptions {
  jobName: string;
  ledger: Ledger;
  /** The queue's maxReceiveCount: a record failed on its last receive is dead-lettered (by SQS), not retried. */
  maxReceiveCount?: number;
  now: () => Date;
}

export class Accounting {
  constructor(private readonly options: AccountingOptions) {}

  /**
   * A delivery answered by a completion: which batch and invocation completed it decides how the ledger reads it. Its
   * own batch's: a duplicate, or the completion itself if that invocation never wrote its counts (resolveBatch decides,
   * at read time). Another batch's: completedElsewhere, once. A completion that names no batch (written before they
   * did) is a duplicate, as it always was.
   */
  duplicate(
    message: JobMessage,
    tally: BatchTally,
    by: CompletedBy | undefined,
    outcome?: ApplyResult['outcome'],
  ): RecordOutcome {
    count(MetricName.DuplicatesSuppressed);
    logger.info('duplicate suppressed: operation already completed', { outcome, completedBy: by });
    if (by === undefined) tally.add(message.batchId, { duplicates: 1 });
    else if (by.batchId === message.batchId)
      tally.note(message.batchId, 'replays', ledgerEntry(by.invocationId, message.operationId));
    else tally.note(message.batchId, 'elsewhere', ledgerEntry(by.batchId, message.operationId));
    return 'duplicate';
  }

  /** An invalid message, kept for review. Not caught: without the review record the message would vanish. */
  async reject(record: SQSRecord, reasons: string[], tally: BatchTally): Promise<RecordOutcome> {
    const ids = salvageIds(record.body);
    await this.options.ledger.recordRejection({
      job: this.options.jobName,
      messageId: record.messageId,
      reasons,
      body: record.body,
      ...ids,
    });
    count(MetricName.Rejected);
    logger.warn('message rejected and kept for review', { reasons, ...ids });
    if (ids.batchId) tally.note(ids.batchId, 'rejectedMessages', record.messageId);
    return 'rejected';
  }

  /** The accounting after a message reached the DLQ. */
  deadLettered(message: JobMessage, reason: string, detail: Record<string, unknown>, tally: BatchTally): RecordOutcome {
    count(MetricName.DeadLettered);
    logger.error('permanent failure: message sent to the DLQ', { reason, detail });
    if (message.dueBy !== undefined) count(MetricName.SloFailed);
    tally.note(message.batchId, 'deadLetteredOperations', deadLetterEntry(message.operationId, reason));
    return 'dead-lettered';
  }

  /** A message re-published to wait (a slot, a throttle, its notBefore). */
  deferred(message: JobMessage, detail: Record<string, unknown>, tally: BatchTally): RecordOutcome {
    count(MetricName.Deferred);
    logger.info('message deferred', detail);
    tally.add(message.batchId, { deferred: 1 });
    return 'deferred';
  }

  /** A 429 or 503 from the downstream (the record is deferred as well). */
  throttled(message: JobMessage, tally: BatchTally): void {
    tally.add(message.batchId, { throttled: 1 });
    count(MetricName.Throttled);
  }

  /** The job's apply finished: its outcome, the operation's true age and the SLO it met or missed. */
  completed(
    message: JobMessage,
    outcome: ApplyResult['outcome'],
    applyStartedMs: number,
    tally: BatchTally,
  ): RecordOutcome {
    count(outcome === 'applied' ? MetricName.Applied : MetricName.AlreadyDone);
    const nowMs = this.options.now().getTime();
    const ageMs = Math.max(0, nowMs - Date.parse(message.firstEnqueuedAt ?? message.enqueuedAt));
    milliseconds(MetricName.AgeSinceFirstEnqueue, ageMs);
    tally.age(message.batchId, ageMs);
    // applyStartedAt: when the downstream call began, so a job's starts can be read from the logs alone.
    logger.info('operation completed', { outcome, applyStartedAt: applyStartedMs });
    if (message.dueBy !== undefined)
      count(nowMs <= Date.parse(message.dueBy) ? MetricName.SloMet : MetricName.SloMissed);
    tally.add(message.batchId, { completed: 1 });
    return outcome;
  }

  /**
   * Fails the record so SQS redelivers it: every valid record handed back (batchItemFailures) passes here once, and the
   * batch counts it as a retry, in the invocation's one flush. On its last allowed receive SQS moves it to the DLQ
   * instead; the ledger counts that here as dead-lettered (not a retry), since nothing else sees the move.
   * Logs the failure as one line: the error in full, and under `recordFailure` its type, message, the place in the
   * job's own code that threw it and the receive (recordFailure.ts), which the local report aggregates per job.
   * `applyStartedAt` (epoch ms) is when the record's apply began, when it did: a job's starts are read from the logs.
   */
  fail(record: SQSRecord, message: JobMessage, error: unknown, tally: BatchTally, applyStartedAt?: number): never {
    count(MetricName.Failed);
    const receives = Number(record.attributes?.ApproximateReceiveCount ?? 0);
    const { maxReceiveCount } = this.options;
    const last = maxReceiveCount !== undefined && receives >= maxReceiveCount;
    const line = {
      error: error as Error,
      [RECORD_FAILURE_KEY]: recordFailure(error, receives),
      ...(applyStartedAt === undefined ? {} : { applyStartedAt }),
    };
    if (last) {
      tally.note(
        message.batchId,
        'deadLetteredOperations',
        deadLetterEntry(
          message.operationId,
          `failed on its last allowed receive (${receives}); SQS moves it to the DLQ: ${(error as Error)?.message ?? String(error)}`,
        ),
      );
      count(MetricName.DeadLettered);
      if (message.dueBy !== undefined) count(MetricName.SloFailed);
      logger.error('failed on its last allowed receive: SQS moves the message to the DLQ', {
        receives,
        maxReceiveCount,
        ...line,
      });
    } else {
      tally.add(message.batchId, { retries: 1 });
      logger.error('record failed; SQS redelivers it after the visibility timeout', { receives, ...line });
    }
    throw error;
  }

  /**
   * Counters are accounting, not the operation: gathered per invocation and written once per batch ID at its end, as
   * the invocation's own item (one write per batch of records, not per record). An invocation killed before it lands
   * loses nothing: its completions are adopted by their next delivery (resolveBatch in lambda/core/ledgerContract.ts).
   * @returns the batch IDs whose write failed: their records are handed back to SQS, so that delivery comes.
   */
  async flush(tally: BatchTally, invocationId: string): Promise<Set<string>> {
    const failed = new Set<string>();
    await Promise.all(
      tally.entries().map(async ([batchId, record]) => {
        try {
          await this.options.ledger.recordInvocation(this.options.jobName, batchId, invocationId, record);
        } catch (error) {
          failed.add(batchId);
          count(MetricName.LedgerWriteFailed);
          logger.error("ledger write failed; the batch's records go back to SQS, and their next delivery counts them", {
            batchId,
            record,
            error: error as Error,
          });
        }
      }),
    );
    return failed;
  }
}

/**
 * The batch response with every record of a batch whose ledger write failed handed back to SQS as well: its next
 * delivery is answered by its completion and counts it (an adoption), so no count is lost to the failed write. A
 * record that carried no batch ID (a rejection of unreadable input) is kept as it was.
 */
export function withUnwrittenBatches(
  response: SQSBatchResponse,
  records: SQSRecord[],
  batchIdOf: (record: SQSRecord) => string | undefined,
  unwritten: ReadonlySet<string>,
): SQSBatchResponse {
  if (unwritten.size === 0) return response;
  const failures = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  for (const record of records) {
    const batchId = batchIdOf(record) ?? salvageIds(record.body).batchId;
    if (batchId !== undefined && unwritten.has(batchId)) failures.add(record.messageId);
  }
  return { batchItemFailures: [...failures].map((itemIdentifier) => ({ itemIdentifier })) };
}
