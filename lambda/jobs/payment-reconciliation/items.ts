// The payments table as the reconciliation job sees it: the item shape, and builders the local runtime seeds with.

/**
 * One payment (table key `paymentId`). `unsettledDate` is the key of the sparse index `unsettled-by-date`: it holds the
 * business date while the payment awaits reconciliation and is removed when the outcome is recorded, which takes the
 * payment out of the index.
 */
export interface PaymentItem {
  paymentId: string;
  /** Amount in the currency's minor unit (pence, cents). */
  amountMinor: number;
  /** ISO 4217 code. */
  currency: string;
  /** ISO-8601 UTC timestamp. */
  createdAt: string;
  unsettledDate?: string;
  /** The provider's outcome, e.g. 'settled' or 'failed'. */
  reconciliationStatus?: string;
  providerReference?: string;
  /** ISO-8601 UTC timestamp of the recorded outcome. */
  reconciledAt?: string;
  /** The operation ID that recorded the outcome; how a retry recognises its own earlier write. */
  reconciledBy?: string;
}

/** A payment awaiting reconciliation for `businessDate`. */
export function unsettledPayment(input: {
  paymentId: string;
  businessDate: string;
  amountMinor?: number;
  currency?: string;
  createdAt?: string;
}): PaymentItem {
  return {
    paymentId: input.paymentId,
    amountMinor: input.amountMinor ?? 1000,
    currency: input.currency ?? 'GBP',
    createdAt: input.createdAt ?? `${input.businessDate}T12:00:00.000Z`,
    unsettledDate: input.businessDate,
  };
}

/** `count` unsettled payments for a demo run, with stable IDs `pay-<businessDate>-0001`, ... */
export function demoPayments(businessDate: string, count: number): PaymentItem[] {
  return Array.from({ length: count }, (_, i) =>
    unsettledPayment({
      paymentId: `pay-${businessDate}-${String(i + 1).padStart(4, '0')}`,
      businessDate,
      amountMinor: 100 + ((i * 7919) % 100000),
    }),
  );
}
