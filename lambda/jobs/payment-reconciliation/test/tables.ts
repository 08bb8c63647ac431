// The job's tables on dynalite, shaped as its config (lib/config/environments.ts) declares them.
import type { TableSpec } from '../../../../test/support/jobs';

export const TABLES = {
  payments: {
    name: 'payments-test',
    hash: 'paymentId',
    indexes: [{ name: 'unsettled-by-date', hash: 'unsettledDate', range: 'paymentId' }],
  },
} satisfies Record<string, TableSpec>;
