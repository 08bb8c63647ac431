// Sends a record's message back to wait (its queue, delayed) or on to the DLQ: one message from a running record, or
// every deferral the plan decided at once, in batches of ten. Re-publishing instead of failing the record keeps
// ApproximateReceiveCount, and so the DLQ, out of pacing and throttling; a duplicate from the re-publish (the original
// redelivered after all) is absorbed by idempotency, as the operation ID is unchanged.
import type { SQSRecord } from 'aws-lambda';
import { fairnessGroup } from '../../core/fairness';
import { escapeUnprintable, serializeMessage, type JobMessage } from '../../core/message';
import type { DeferralCause, DeferralPolicy } from '../../core/deferral';
import { DLQ_REASON_CHARS } from '../../core/reasonCaps';
import type { BatchTally } from '../../adapters/ledger';
import { withLogKeys } from '../../adapters/observability';
import { PublishError, type OutgoingMessage, type Publisher } from '../../adapters/sqsPublisher';
import type { Accounting, RecordOutcome } from './accounting';

/** A deferral decided but not yet sent: where it goes, and the accounting to run once it is there. */
export interface PreparedDeferral {
  queueUrl: string;
  outgoing: OutgoingMessage;
  settle: () => RecordOutcome;
}

export interface DeferrerOptions {
  /** This job's queue: deferred messages are re-published here. */
  queueUrl: string;
  /** Permanent failures are sent here with their reason. */
  dlqUrl: string;
  maxMessageBytes: number;
  publisher: Publisher;
  policy: DeferralPolicy;
  accounting: Accounting;
  now: () => Date;
  /** The resource field whose value is the message's tenant (SQS fair queues' MessageGroupId), when the job has keys. */
  groupField?: string;
}

/** A message's tenant for fair queues; a DLQ copy is backfill's (it comes back only by a redrive). */
function groupOf(message: JobMessage, field: string | undefined, toDlq = false): { groupId?: string } {
  const groupId = fairnessGroup(message.resource, field, toDlq || message.backfill === true);
  return groupId === undefined ? {} : { groupId };
}

/** The log keys of one record's lines. */
export const logKeys = (record: SQSRecord, message: JobMessage) => ({
  operationId: message.operationId,
  batchId: message.batchId,
  messageId: record.messageId,
});

export class Deferrer {
  constructor(private readonly options: DeferrerOptions) {}

  /** The DLQ copy of a message, with its reason and IDs as attributes. */
  toDlq(message: JobMessage, reason: string, body: string): OutgoingMessage {
    return {
      operationId: message.operationId,
      body,
      attributes: {
        // A reason can quote the job's data (an error message naming a key); whoever reads the DLQ sees it escaped.
        failureReason: escapeUnprintable(reason).slice(0, DLQ_REASON_CHARS),
        operationId: message.operationId,
        jobType: message.jobType,
        batchId: message.batchId,
        failedAt: this.options.now().toISOString(),
      },
      // A redrive moves it back as backfill's: the fair queue lets live work pass it.
      ...groupOf(message, this.options.groupField, true),
    };
  }

  /** A permanent failure: the message goes to the DLQ as it came, with its reason. */
  async deadLetter(
    record: SQSRecord,
    message: JobMessage,
    reason: string,
    tally: BatchTally,
    detail: Record<string, unknown> = {},
  ): Promise<RecordOutcome> {
    // The ledger's review list and the log line carry the reason too: escaped once, as the DLQ's attribute is.
    const shown = escapeUnprintable(reason);
    await this.options.publisher.publish(this.options.dlqUrl, [this.toDlq(message, shown, record.body)]);
    return this.options.accounting.deadLettered(message, shown, detail, tally);
  }

  /**
   * Decides a deferral (or, past the budget, a dead-letter) without sending it: where the message goes, and the
   * accounting to run once it is there.
   * @throws InvalidMessageError when the re-published message would no longer fit maxMessageBytes
   */
  prepare(message: JobMessage, cause: DeferralCause, tally: BatchTally): PreparedDeferral {
    const { now, maxMessageBytes, accounting } = this.options;
    const attempt = message.attempt ?? 0;
    // The first enqueue survives every deferral, so AgeSinceFirstEnqueue and the age budget see the operation's true age.
    const firstEnqueuedAt = message.firstEnqueuedAt ?? message.enqueuedAt;
    const pacedDeferrals = message.pacedDeferrals ?? 0;
    const decision = this.options.policy({
      cause,
      attempt,
      pacedDeferrals,
      firstEnqueuedAtMs: Date.parse(firstEnqueuedAt),
      nowMs: now().getTime(),
    });
    const { notBefore: _previous, ...rest } = message;
    if (decision.action === 'dead-letter') {
      // The count starts again at 0 in the DLQ copy, so an operator's redrive gets a fresh deferral budget.
      const rearmed = serializeMessage({ ...rest, firstEnqueuedAt, attempt: 0, pacedDeferrals: 0 }, maxMessageBytes);
      return {
        queueUrl: this.options.dlqUrl,
        outgoing: this.toDlq(message, decision.reason, rearmed),
        settle: () => accounting.deadLettered(message, decision.reason, { cause: cause.kind, attempt }, tally),
      };
    }
    const next: JobMessage = {
      ...rest,
      enqueuedAt: now().toISOString(),
      firstEnqueuedAt,
      // Only a throttle spends the deferral budget; waiting for a slot is counted apart, and a chain's continuation is
      // the same deferral, not a new one.
      attempt: cause.kind === 'throttled' ? attempt + 1 : attempt,
      ...(cause.kind === 'paced' ? { pacedDeferrals: pacedDeferrals + 1 } : {}),
      ...(decision.notBeforeMs !== undefined ? { notBefore: new Date(decision.notBeforeMs).toISOString() } : {}),
    };
    return {
      queueUrl: this.options.queueUrl,
      outgoing: {
        operationId: message.operationId,
        body: serializeMessage(next, maxMessageBytes),
        delaySeconds: decision.delaySeconds,
        // Still its tenant's message: a fair queue keeps delivering quiet tenants' messages ahead of this one's backlog.
        ...groupOf(message, this.options.groupField),
      },
      settle: () =>
        accounting.deferred(
          message,
          {
            cause: cause.kind,
            delaySeconds: decision.delaySeconds,
            attempt: next.attempt,
            pacedDeferrals: next.pacedDeferrals,
            notBefore: next.notBefore,
          },
          tally,
        ),
    };
  }

  /** One deferral decided while its record ran (a throttle, a missed slot). */
  async defer(message: JobMessage, cause: DeferralCause, tally: BatchTally): Promise<RecordOutcome> {
    const prepared = this.prepare(message, cause, tally);
    await this.options.publisher.publish(prepared.queueUrl, [prepared.outgoing]);
    return prepared.settle();
  }

  /**
   * Every deferral decided before any record ran (no slot, notBefore ahead), sent together: one SendMessageBatch per
   * ten records rather than one each. A record whose message SQS did not take fails, and SQS redelivers it.
   * @returns each record's outcome, or the error its handler must throw, by message ID
   */
  async deferBlock(
    items: { record: SQSRecord; message: JobMessage; cause: DeferralCause }[],
    tally: BatchTally,
  ): Promise<Map<string, RecordOutcome | Error>> {
    const sent = await this.sendBlock(items, tally);
    const results = new Map<string, RecordOutcome | Error>();
    for (const { record, message } of items) {
      const settle = sent.get(record.messageId) as (() => RecordOutcome) | Error;
      results.set(
        record.messageId,
        settle instanceof Error ? settle : await withLogKeys(logKeys(record, message), async () => settle()),
      );
    }
    return results;
  }

  /**
   * Sends deferrals together as deferBlock does, but settles none: each record's own turn settles its deferral (its
   * accounting and log line), under its own log keys. For a block sent while another record runs (the logger's
   * per-record keys are that record's then).
   * @returns each record's settle, or the error its handler must throw, by message ID
   */
  async sendBlock(
    items: { record: SQSRecord; message: JobMessage; cause: DeferralCause }[],
    tally: BatchTally,
  ): Promise<Map<string, (() => RecordOutcome) | Error>> {
    const results = new Map<string, (() => RecordOutcome) | Error>();
    const byQueue = new Map<string, { record: SQSRecord; message: JobMessage; prepared: PreparedDeferral }[]>();
    for (const { record, message, cause } of items) {
      try {
        const prepared = this.prepare(message, cause, tally);
        byQueue.set(prepared.queueUrl, [...(byQueue.get(prepared.queueUrl) ?? []), { record, message, prepared }]);
      } catch (error) {
        results.set(record.messageId, error as Error);
      }
    }
    for (const [queueUrl, group] of byQueue) {
      let failed: (operationId: string) => Error | undefined = () => undefined;
      try {
        await this.options.publisher.publish(
          queueUrl,
          group.map((g) => g.prepared.outgoing),
        );
      } catch (error) {
        const ids = error instanceof PublishError ? new Set(error.failedOperationIds) : undefined;
        failed = (operationId) => (ids === undefined || ids.has(operationId) ? (error as Error) : undefined);
      }
      for (const { record, message, prepared } of group)
        results.set(record.messageId, failed(message.operationId) ?? prepared.settle);
    }
    return results;
  }
}
