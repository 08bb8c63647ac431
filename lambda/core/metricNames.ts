// The custom metrics the handlers emit (EMF, per job, in METRICS_NAMESPACE): one list, read by the handlers
// (lambda/adapters/observability.ts) and by the stack's alarms and dashboards (lib/monitoring.ts), so a metric an alarm
// watches is one a handler writes. Pure: lib imports it without the Powertools it would bring through the adapter.

/** Every metric the pipeline emits, per job. */
export const MetricName = {
  Published: 'Published',
  /**
   * Source rows discovery could not turn into a valid message (a job's invalid rows, or an operation that failed the
   * message contract): recorded in the run ledger for review and skipped. Any is a data problem to look at.
   */
  DiscoveryRowsRejected: 'DiscoveryRowsRejected',
  Applied: 'Applied',
  AlreadyDone: 'AlreadyDone',
  DuplicatesSuppressed: 'DuplicatesSuppressed',
  Rejected: 'Rejected',
  Failed: 'Failed',
  Deferred: 'Deferred',
  /** The downstream answered 429 or 503: the provider's throttling rate, which the throttling alarm watches. */
  Throttled: 'Throttled',
  DeadLettered: 'DeadLettered',
  /** Milliseconds from the operation's first enqueue to its completion: the true job age, across deferrals. */
  AgeSinceFirstEnqueue: 'AgeSinceFirstEnqueue',
  /**
   * Rate-limit slots an invocation was granted but did not start a downstream call on (passed while an earlier record
   * ran, freed by a duplicate, left at the end): allowance the fleet lost. A steady share of the starts means the blocks
   * are too large for the apply time, or the invocations end early.
   */
  SlotsUnused: 'SlotsUnused',
  /**
   * Records sent back to the queue unstarted because a record before them in the batch ran past its release time (a
   * call hanging towards its timeout): others start them meanwhile. A steady count means the provider hangs calls.
   */
  RecordsReleased: 'RecordsReleased',
  /** A ledger counter could not be written; the operation itself succeeded. */
  LedgerWriteFailed: 'LedgerWriteFailed',
  /** The SLO's indicator, per operation of a job with an SLO: completed by its dueBy ... */
  SloMet: 'SloMet',
  /** ... completed after it ... */
  SloMissed: 'SloMissed',
  /** ... or failed for good (dead-lettered). The burn rate is (SloMissed + SloFailed) / all three, over the budget. */
  SloFailed: 'SloFailed',
} as const;
export type MetricName = (typeof MetricName)[keyof typeof MetricName];
