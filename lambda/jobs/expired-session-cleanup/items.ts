// The tenants and sessions tables as the session cleanup job sees them: item shapes, and builders for demo seeding.

/** One tenant (tenants table, key `tenantId`); discovery reads only the key. */
export interface TenantItem {
  tenantId: string;
  name: string;
  /** ISO-8601 UTC timestamp. */
  createdAt: string;
}

/**
 * One session (sessions table, keys `tenantId` + `sessionId`). The index `by-last-seen` (`tenantId`, `lastSeenAt`)
 * orders a tenant's sessions by last activity.
 */
export interface SessionItem {
  tenantId: string;
  sessionId: string;
  userId: string;
  /** Last activity, in the canonical form of Date#toISOString (UTC, milliseconds), so strings sort as time. */
  lastSeenAt: string;
  /** ISO-8601 UTC timestamp. */
  createdAt: string;
}

export function tenant(tenantId: string, name: string = tenantId): TenantItem {
  return { tenantId, name, createdAt: '2024-01-01T00:00:00.000Z' };
}

export function session(input: {
  tenantId: string;
  sessionId: string;
  lastSeenAt: Date | string;
  userId?: string;
}): SessionItem {
  const lastSeenAt = new Date(input.lastSeenAt).toISOString();
  return {
    tenantId: input.tenantId,
    sessionId: input.sessionId,
    userId: input.userId ?? `user-${input.sessionId}`,
    lastSeenAt,
    createdAt: lastSeenAt,
  };
}

/** `count` tenants with stable IDs `tenant-001`, ... */
export function demoTenants(count: number): TenantItem[] {
  return Array.from({ length: count }, (_, i) => tenant(`tenant-${String(i + 1).padStart(3, '0')}`));
}

/**
 * A tenant's demo sessions: `expired` last seen well before `cutoff` (see sessionCutoff in index.ts) and `active`
 * last seen after it, with stable IDs.
 */
export function demoSessions(
  tenantId: string,
  cutoff: string,
  counts: { expired: number; active: number },
): SessionItem[] {
  const at = Date.parse(cutoff);
  const hour = 3_600_000;
  return [
    ...Array.from({ length: counts.expired }, (_, i) =>
      session({
        tenantId,
        sessionId: `s-old-${String(i + 1).padStart(4, '0')}`,
        lastSeenAt: new Date(at - (i + 1) * hour),
      }),
    ),
    ...Array.from({ length: counts.active }, (_, i) =>
      session({
        tenantId,
        sessionId: `s-new-${String(i + 1).padStart(4, '0')}`,
        lastSeenAt: new Date(at + (i + 1) * hour),
      }),
    ),
  ];
}
