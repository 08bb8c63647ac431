// The job's local fixture (contract: local/fixture.ts): seeds tenants, each with sessions on both sides of the job's
// cutoff, and reads the job's effects off the session deletes the local servers answered. Local tooling only, never
// bundled into a function.
import { FixtureError, putItems, resourceName } from '../../../local/fixture';
import type {
  EffectReading,
  EffectsInput,
  FixtureContext,
  JobFixture,
  ObservedWrite,
  SeededDemo,
} from '../../../local/fixture';
import { resourceSchema, sessionCutoff } from './index';
import { demoSessions, demoTenants } from './items';

/** Expired and active sessions seeded per tenant. */
export const SESSIONS_PER_TENANT = { expired: 3, active: 2 } as const;

/** What `seed` hands `effects`: sessions as `<tenantId>/<sessionId>`. */
export interface SeededSessions {
  expiredSessions: string[];
  activeSessions: string[];
}

const sessionOf = (d: ObservedWrite) => `${d.key.tenantId}/${d.key.sessionId}`;
/** An item's key as the report shows it; tenant before session whatever order the wire gave the attributes in. */
const itemOf = (d: ObservedWrite) =>
  d.key.tenantId !== undefined && d.key.sessionId !== undefined
    ? `${d.resource}/${sessionOf(d)}`
    : `${d.resource}/${Object.values(d.key).join('/')}`;

export const fixture: JobFixture = {
  unit: 'tenants',
  defaultCount: 10,

  async seed(ctx: FixtureContext, count: number): Promise<SeededDemo> {
    const tenantsTable = resourceName(ctx.settings, 'tables', 'tenants');
    const sessionsTable = resourceName(ctx.settings, 'tables', 'sessions');
    const maxAgeDays = Number(ctx.settings.settings.sessionMaxAgeDays);
    if (!Number.isFinite(maxAgeDays))
      throw new FixtureError(
        `job ${ctx.jobName} has no numeric settings.sessionMaxAgeDays; cannot seed it`,
        ctx.jobName,
      );
    const cutoff = sessionCutoff(ctx.businessDate, maxAgeDays);
    const tenants = demoTenants(count);
    await putItems(ctx.documents, ctx.jobName, tenantsTable, tenants);
    const sessions = tenants.flatMap((t) => demoSessions(t.tenantId, cutoff, SESSIONS_PER_TENANT));
    await putItems(ctx.documents, ctx.jobName, sessionsTable, sessions);
    const state: SeededSessions = { expiredSessions: [], activeSessions: [] };
    for (const s of sessions)
      (Date.parse(s.lastSeenAt) < Date.parse(cutoff) ? state.expiredSessions : state.activeSessions).push(
        `${s.tenantId}/${s.sessionId}`,
      );
    return {
      expectedOperations: tenants.map((t) => t.tenantId),
      summary: `${tenants.length} tenants (${state.expiredSessions.length} expired sessions)`,
      state,
    };
  },

  /**
   * One operation per tenant whose sessions were deleted, started at its first delete; each session deleted is an item
   * effect. Only sessions seeded as expired may go: any other delete on the job's tables is a wrong effect. Throttles
   * are AWS's, which only the consumer sees.
   */
  effects({ settings, seeded, writes }: EffectsInput): EffectReading {
    const state = seeded.state as SeededSessions | undefined;
    if (!state?.expiredSessions)
      throw new FixtureError(
        `job ${settings.jobName}: effects need the sessions its seed recorded (SeededDemo.state)`,
        settings.jobName,
      );
    const tables = new Set(Object.values(settings.tables));
    const deletes = writes.filter(
      (w) => w.service === 'dynamodb' && w.action === 'DeleteItem' && tables.has(w.resource),
    );
    const firstByOperation = new Map<string, number>();
    for (const d of deletes) {
      const operation = d.key.tenantId ?? Object.values(d.key)[0];
      if (!firstByOperation.has(operation)) firstByOperation.set(operation, d.at);
    }
    const effectsByItem = new Map<string, number>();
    for (const d of deletes) effectsByItem.set(itemOf(d), (effectsByItem.get(itemOf(d)) ?? 0) + 1);
    const expired = new Set(state.expiredSessions);
    const sessionsTable = settings.tables.sessions;
    return {
      effectsByOperation: new Map([...firstByOperation.keys()].map((k) => [k, 1])),
      effectsByItem,
      // Every expired session must go, as `${table}/${tenantId}/${sessionId}`, each belonging to its tenant's operation.
      expectedItems: new Map(state.expiredSessions.map((s) => [`${sessionsTable}/${s}`, s.split('/')[0]])),
      starts: [...firstByOperation.values()],
      throttled: undefined,
      unexpectedEffects: deletes.filter((d) => d.resource !== sessionsTable || !expired.has(sessionOf(d))).map(itemOf),
    };
  },

  operationKeyOf(resource: Record<string, unknown>): string | undefined {
    const parsed = resourceSchema.safeParse(resource);
    return parsed.success ? parsed.data.tenantId : undefined;
  },
};
