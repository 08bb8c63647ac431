// The payment provider's local stand-in (the job's fake downstream, see local/fixture.ts): the local tools' fake HTTP
// API (local/fakeHttpApi.ts: a quota, Idempotency-Key dedup, injectable faults, every arrival and effect recorded) on
// the provider's one route, answering a settlement with its reference. Local tooling only: nothing under
// lambda/handlers imports it.
import { randomUUID } from 'node:crypto';
import { FakeHttpApi, type DownstreamEffect, type FakeHttpApiQuota } from '../../../local/fixture';

export type PaymentProviderOptions = FakeHttpApiQuota;

/** One settlement, as the provider applied it. `operationKey` is the payment ID. */
export interface PaymentEffect extends DownstreamEffect {
  providerReference: string;
}

export class PaymentProvider extends FakeHttpApi<PaymentEffect> {
  constructor(options: PaymentProviderOptions) {
    super(
      {
        name: 'payment provider',
        route: /^\/v1\/payments\/([^/]+)\/reconcile$/,
        urlSetting: 'providerBaseUrl',
        apply: (paymentId) => {
          const providerReference = `prov_${randomUUID()}`;
          return { body: { paymentId, status: 'settled', providerReference }, effect: { providerReference } };
        },
      },
      options,
    );
  }
}
