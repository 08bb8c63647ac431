// The job's tables on dynalite, shaped as its config (lib/config/environments.ts) declares them.
import type { TableSpec } from '../../../../test/support/jobs';

export const TABLES = {
  tenants: { name: 'tenants-test', hash: 'tenantId' },
  sessions: {
    name: 'sessions-test',
    hash: 'tenantId',
    range: 'sessionId',
    indexes: [{ name: 'by-last-seen', hash: 'tenantId', range: 'lastSeenAt' }],
  },
} satisfies Record<string, TableSpec>;
