// One discovered page as the messages to publish: each operation checked and wrapped in its envelope (the run's SLO
// deadline, the backfill mark), delayed to its slot in the step's plan, in its fairness group; and the rows that cannot
// become messages, bounded for the run ledger. Pure: the admitter publishes what this returns.
import { MESSAGE_VERSION } from '../../core/constants';
import { delaySecondsUntil, visibleAtMs, type AdmissionPlan } from '../../core/admission';
import type { AdmissionStep } from '../../core/admissionStep';
import { fairnessGroup } from '../../core/fairness';
import { describeIssues } from '../../core/issues';
import type { AnyJob, DiscoverPage } from '../../core/job';
import { boundReasons, InvalidMessageError, serializeMessage, type JobMessage } from '../../core/message';
import type { InvalidRowRecord } from '../../adapters/admissionState';
import type { OutgoingMessage } from '../../adapters/sqsPublisher';

/** A page's operations ready to publish, and the rows that cannot be (InvalidRow, bounded for the ledger). */
export interface CheckedPage {
  ready: { operationId: string; resource: JobMessage['resource']; body: string }[];
  invalid: InvalidRowRecord[];
}

/** A row's key and reasons escaped and bounded as a rejection's reasons are (the key can be anything a table holds). */
const invalidRow = (key: string, reasons: string[]): InvalidRowRecord => ({
  key: boundReasons([key])[0],
  reasons: boundReasons(reasons),
});

/**
 * Each operation of a page as its message body, or as an invalid row when it cannot be one: a row the job handed
 * back, or an operation whose resource fails the job's schema, or whose message breaks the contract (its operation ID,
 * its size). The producer checks what a job returns itself, so a job that returns a bad operation instead of handing
 * its row back still cannot halt the run. An operation's row is known to the producer by its operation ID only.
 */
export function checkPage(
  job: AnyJob,
  page: DiscoverPage<JobMessage['resource']>,
  envelope: (operationId: string, resource: JobMessage['resource']) => JobMessage,
  maxBytes: number,
): CheckedPage {
  const invalid = (page.invalid ?? []).map((row) => invalidRow(String(row.key), [String(row.reason)]));
  const ready: CheckedPage['ready'] = [];
  for (const { operationId, resource } of page.operations) {
    const parsed = job.resourceSchema.safeParse(resource);
    if (!parsed.success) {
      const reasons = describeIssues(parsed.error, { root: 'resource', rootInPaths: true });
      invalid.push(invalidRow(String(operationId), reasons));
      continue;
    }
    try {
      ready.push({ operationId, resource, body: serializeMessage(envelope(operationId, resource), maxBytes) });
    } catch (error) {
      if (!(error instanceof InvalidMessageError)) throw error;
      // parseMessage has bounded these reasons already.
      invalid.push({ key: invalidRow(String(operationId), []).key, reasons: error.reasons });
    }
  }
  return { ready, invalid };
}

/**
 * The SLO's deadline for every operation of the run: its scheduled time (or its start) plus the window; undefined
 * without an SLO or a known start.
 */
export function runDeadline(
  step: AdmissionStep,
  startedAt: string | undefined,
  slo: { completeWithinMinutes: number } | undefined,
): string | undefined {
  const runStart = Date.parse(step.scheduledTime ?? startedAt ?? '');
  if (!slo || Number.isNaN(runStart)) return undefined;
  return new Date(runStart + slo.completeWithinMinutes * 60_000).toISOString();
}

/** Where a page's messages go in the step's plan. */
export interface PageSlots {
  plan: AdmissionPlan;
  /** Messages this step admitted before the page: the page's first takes the slot after theirs. */
  admitted: number;
  ratePerSecond: number | undefined;
  groupSize: number;
  /** How much earlier than its first slot a group becomes visible (ProducerAdmissionOptions.leadMs). */
  leadMs: number;
  /** The run's last planned slot before this page, returned when the page has no message. */
  plannedUntilMs: number | undefined;
}

export interface PageMessagesInput {
  job: AnyJob;
  step: AdmissionStep;
  /** The run's SLO deadline (runDeadline), carried by every message. */
  dueBy: string | undefined;
  maxMessageBytes: number;
  /** The resource field whose value is a message's tenant (fairness group), when the job has keys. */
  fairnessField: string | undefined;
  slots: PageSlots;
  /** When the page is sent: its messages' enqueue time and the origin of their delays. */
  sentAtMs: number;
}

export interface PageMessages {
  messages: OutgoingMessage[];
  invalid: InvalidRowRecord[];
  /** The slot of the page's last message (or the run's last before it, when it has none). */
  lastVisibleMs: number | undefined;
}

/** The page's messages, each delayed to its slot, and its invalid rows. */
export function pageMessages(page: DiscoverPage<JobMessage['resource']>, input: PageMessagesInput): PageMessages {
  const { job, step, dueBy, slots, sentAtMs } = input;
  const enqueuedAt = new Date(sentAtMs).toISOString();
  const envelope = (operationId: string, resource: JobMessage['resource']): JobMessage => ({
    version: MESSAGE_VERSION,
    jobType: job.name,
    operationId,
    batchId: step.batchId,
    businessDate: step.businessDate,
    resource,
    enqueuedAt,
    firstEnqueuedAt: enqueuedAt,
    ...(dueBy ? { dueBy } : {}),
    ...(step.backfill ? { backfill: true as const } : {}),
  });
  const { ready, invalid } = checkPage(job, page, envelope, input.maxMessageBytes);
  let lastVisibleMs = slots.plannedUntilMs;
  const messages = ready.map(({ operationId, resource, body }, i): OutgoingMessage => {
    // The plan is in slots; only the delay is shown the lead earlier, so the next step plans from the slots.
    const slotMs = visibleAtMs(slots.admitted + i, slots.plan, slots.ratePerSecond, slots.groupSize);
    lastVisibleMs = slotMs;
    const groupId = fairnessGroup(resource, input.fairnessField, step.backfill === true);
    return {
      operationId,
      delaySeconds: delaySecondsUntil(slotMs - slots.leadMs, sentAtMs),
      body,
      ...(groupId !== undefined ? { groupId } : {}),
    };
  });
  return { messages, invalid, lastVisibleMs };
}
