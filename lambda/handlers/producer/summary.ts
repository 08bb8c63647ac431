// What a producer step reports: its summary (the handler's answer to a direct invocation, and the step's last log
// line), and each committed page's counts, metrics and log lines.
import type { AdmissionStep } from '../../core/admissionStep';
import type { InvalidRowRecord } from '../../adapters/admissionState';
import { count, logger, MetricName } from '../../adapters/observability';

export interface ProducerSummary {
  batchId: string;
  businessDate: string;
  step: number;
  /**
   * What this step did: admitted pages, nothing (the step was already taken, or is being taken, or an earlier run of
   * the date is still admitting: `waiting`), or finished.
   */
  outcome: 'admitted' | 'stale' | 'in-progress' | 'lease-lost' | 'waiting';
  /** Pages published by this step. */
  pages: number;
  discovered: number;
  published: number;
  /**
   * Source rows this step could not turn into valid messages: recorded in the run ledger for review and skipped (not in
   * `discovered`). Absent when there were none.
   */
  invalidRows?: number;
  /** A next step was sent to the admission queue. */
  continued: boolean;
  /** Seconds until the next step, when one was sent. */
  nextStepInSeconds?: number;
  /** Discovery is finished: the whole run is admitted. */
  finished: boolean;
  /** Work remained but the run hit maxPagesPerRun. */
  stoppedAtPageLimit: boolean;
}

const INVALID_ROWS_WARNING =
  'source rows that cannot become messages were recorded in the run ledger and skipped; `ops audit` lists them';

/** Invalid rows a page's warning names; the ledger holds them all. */
export const LOGGED_INVALID_ROWS = 10;

/** A step's summary before it has done anything: `stale` until it holds the step. */
export function emptySummary(step: AdmissionStep): ProducerSummary {
  return {
    batchId: step.batchId,
    businessDate: step.businessDate,
    step: step.step,
    outcome: 'stale',
    pages: 0,
    discovered: 0,
    published: 0,
    continued: false,
    finished: false,
    stoppedAtPageLimit: false,
  };
}

/** One page the ledger has committed, as the step reports it. */
export interface CommittedPage {
  /** The page's number in the run (1-based). */
  page: number;
  /** Messages the page published (a re-published page counts them again here; the ledger does not). */
  discovered: number;
  published: number;
  invalid: readonly InvalidRowRecord[];
  /** Discovery has more pages. */
  more: boolean;
}

/** Adds a committed page to the step's summary, counts its metrics and logs it (its invalid rows with a warning). */
export function reportPage(summary: ProducerSummary, page: CommittedPage): void {
  summary.pages++;
  summary.discovered += page.discovered;
  summary.published += page.published;
  count(MetricName.Published, page.published);
  if (page.invalid.length > 0) {
    summary.invalidRows = (summary.invalidRows ?? 0) + page.invalid.length;
    count(MetricName.DiscoveryRowsRejected, page.invalid.length);
    logger.warn(INVALID_ROWS_WARNING, {
      page: page.page,
      invalidRows: page.invalid.length,
      firstRows: page.invalid.slice(0, LOGGED_INVALID_ROWS),
    });
  }
  logger.info('page published', { page: page.page, published: page.published, more: page.more });
}
