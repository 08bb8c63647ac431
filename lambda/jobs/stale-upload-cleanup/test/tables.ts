// The job's tables on dynalite, shaped as its config (lib/config/environments.ts) declares them.
import type { TableSpec } from '../../../../test/support/jobs';

export const TABLES = {
  uploads: {
    name: 'uploads-test',
    hash: 'uploadId',
    indexes: [{ name: 'by-deadline', hash: 'retentionState', range: 'deleteAfter' }],
  },
} satisfies Record<string, TableSpec>;
