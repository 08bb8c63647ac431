// The job's local fixture (contract: local/fixture.ts): seeds unsettled payments for the business date and reads the
// job's effects off its fake payment provider (localProvider.ts). Local tooling only, never bundled into a function.
import type { JobRuntimeSettings } from '../../job';
import { downstreamEffects, downstreamQuota, putItems, resourceName } from '../../../local/fixture';
import type { DownstreamOptions, FixtureContext, JobFixture, SeededDemo } from '../../../local/fixture';
import { resourceSchema } from './index';
import { demoPayments } from './items';
import { PaymentProvider } from './localProvider';

export const fixture: JobFixture = {
  unit: 'payments',
  defaultCount: 40,

  async seed(ctx: FixtureContext, count: number): Promise<SeededDemo> {
    const table = resourceName(ctx.settings, 'tables', 'payments');
    const items = demoPayments(ctx.businessDate, count);
    await putItems(ctx.documents, ctx.jobName, table, items);
    return { expectedOperations: items.map((p) => p.paymentId), summary: `${items.length} payments` };
  },

  /** Settlements per payment as the provider applied them; every request it saw is a start. */
  effects: downstreamEffects('its fake payment provider'),

  operationKeyOf(resource: Record<string, unknown>): string | undefined {
    const parsed = resourceSchema.safeParse(resource);
    return parsed.success ? parsed.data.paymentId : undefined;
  },

  /** A provider with the job's own effective quota, unless the run names another. */
  downstream(settings: JobRuntimeSettings, options: DownstreamOptions): PaymentProvider {
    return new PaymentProvider({
      ...downstreamQuota(settings, options),
      latencyMs: options.latencyMs,
      port: options.port,
    });
  },
};
