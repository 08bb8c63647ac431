// One page through the run ledger and out: what this attempt discovered kept first (and its invalid rows), then the
// messages published, then the page committed with its cursor and counts under the step's lease. A failure before the
// commit counts nothing: the step runs again from the same cursor, and idempotency absorbs what went out twice.
import type { AdmissionStep } from '../../core/admissionStep';
import type { InvalidRowRecord, RunStateStore } from '../../adapters/admissionState';
import type { OutgoingMessage, Publisher } from '../../adapters/sqsPublisher';

export interface PagePublisherOptions {
  jobName: string;
  /** The job's work queue. */
  queueUrl: string;
  runState: RunStateStore;
  publisher: Publisher;
  now: () => Date;
}

/** What a page adds to the run's orphans and to its discovered count. */
export interface PageOrphans {
  /** Operations the page adds to the run's discovered: its new ones, and what earlier attempts found and it did not. */
  discovered: number;
  /** The run's orphans after the page; undefined: unchanged. */
  orphans: string[] | undefined;
}

/**
 * Operations a killed attempt of this page discovered that this one did not (it may have published them, and they
 * were applied since) are the run's orphans: counted as discovered once, and resolved by their completion records
 * (lambda/core/ledgerContract.ts). An orphan this page finds again is counted once: it was counted when it became one.
 */
export function pageOrphans(
  operationIds: readonly string[],
  earlierAttempts: readonly string[][],
  orphans: readonly string[],
): PageOrphans {
  const fresh = new Set(operationIds);
  const orphanSet = new Set(orphans);
  const rediscovered = operationIds.filter((op) => orphanSet.has(op));
  const leftOver = [...new Set(earlierAttempts.flat())].filter((op) => !fresh.has(op) && !orphanSet.has(op));
  const changed = leftOver.length > 0 || rediscovered.length > 0;
  return {
    discovered: operationIds.length - rediscovered.length + leftOver.length,
    orphans: changed ? [...orphans.filter((op) => !fresh.has(op)), ...leftOver] : undefined,
  };
}

/** A page ready to go out. */
export interface OutgoingPage {
  /** The page's number in the run (1-based). */
  page: number;
  messages: OutgoingMessage[];
  invalid: readonly InvalidRowRecord[];
  /** When this attempt began discovering the page (`ops preflight` measures pages by it). */
  startedMs: number;
  /** Discovery's cursor after the page; undefined: discovery is finished. */
  cursor: string | undefined;
  /** The run's last planned slot after the page; undefined when admission is unlimited. */
  plannedUntilMs: number | undefined;
}

/** A committed page: how many SQS took, and the run's orphans now. */
export interface PublishedPage {
  committed: true;
  published: number;
  orphans: string[] | undefined;
}

export class PagePublisher {
  constructor(private readonly options: PagePublisherOptions) {}

  /**
   * Keeps, publishes and commits one page under the step's lease; `{ committed: false }` when the lease was lost (only
   * an expired one is taken over, so this invocation ran past its deadline's estimate: the new holder re-publishes the
   * page from the last committed cursor).
   * @param orphans the run's orphans before the page
   * @throws PublishError, or a ledger write's error, before the commit
   */
  async publish(
    step: AdmissionStep,
    owner: string,
    orphans: readonly string[],
    page: OutgoingPage,
  ): Promise<PublishedPage | { committed: false }> {
    const { jobName, runState, now } = this.options;
    // What this attempt discovered, kept before it publishes: the business date's audit lists the date's operations
    // from it, and an attempt that takes the page over after a kill finds it.
    const operationIds = page.messages.map((m) => m.operationId);
    const earlier = await runState.pageAttempts(jobName, step.batchId, page.page);
    const found = pageOrphans(operationIds, earlier, orphans);
    await runState.recordPage(jobName, step.batchId, page.page, owner, operationIds, page.startedMs);
    // Kept for review before the page goes out, so a page never publishes around rows the ledger has not recorded.
    if (page.invalid.length > 0) await runState.recordInvalidRows(jobName, step.batchId, page.page, page.invalid);
    const { published } = await this.options.publisher.publish(this.options.queueUrl, page.messages);
    const committed = await runState.commitPage(jobName, step.batchId, step.step, owner, {
      cursor: page.cursor,
      discovered: found.discovered,
      published,
      orphans: found.orphans,
      invalidRows: page.invalid.length,
      plannedUntilMs: page.plannedUntilMs,
      finishedAt: page.cursor === undefined ? now().toISOString() : undefined,
    });
    return committed ? { committed: true, published, orphans: found.orphans } : { committed: false };
  }
}
