// How long a reason may be where it is kept: a rejection's problems, a dead letter's DLQ attribute, the ledger's entry.
// One module, so each cap is set once and the three places a reason is cut stay in step (#36). They differ on purpose:
// each is sized for the record that carries it.

/**
 * Longest single problem a rejection keeps (message.ts boundReasons): zod names every unrecognized key in one message,
 * and up to MAX_REASONS of them sit on one review record, which must stay well inside DynamoDB's 400 KB item.
 */
export const REJECTION_REASON_CHARS = 500;

/**
 * Longest failure reason a dead letter carries as its DLQ message attribute (deferrer.ts toDlq): the one full account
 * an operator reads beside the message, one per message, so it can afford the most (SQS allows 256 KB in all).
 */
export const DLQ_REASON_CHARS = 1000;

/**
 * Longest dead-letter reason an invocation's ledger item keeps (ledgerContract.ts deadLetterEntry): one entry per
 * dead-lettered operation of a batch on one item, so a batch of failures stays small; the DLQ copy has the full one.
 */
export const LEDGER_DEAD_LETTER_REASON_CHARS = 200;
