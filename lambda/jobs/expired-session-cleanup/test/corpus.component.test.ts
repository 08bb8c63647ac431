// The job's own bad-input cases (messages.json beside this file: its resource schema's) fed through its real consumer,
// mixed with valid messages; the message contract's cases are the engine's (test/lambda/corpus.component.test.ts).
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { join } from 'node:path';
import { documentClient } from '../../../adapters/clients';
import { createDeps, job, JOB_NAME } from '..';
import { session, tenant } from '../items';
import { messageCasesIn } from '../../../../test/corpus/loadCorpus';
import { createTable, putAll, runtimeSettings } from '../../../../test/support/jobs';
import { CORPUS_DATE, corpusEnvelope, describeMessageCorpus, getItem } from '../../../../test/support/messageCorpus';
import { TABLES } from './tables';

describeMessageCorpus(JOB_NAME, messageCasesIn(join(__dirname, 'messages.json')), async () => {
  const raw = new DynamoDBClient({});
  await Promise.all(Object.values(TABLES).map((spec) => createTable(raw, spec)));
  raw.destroy();
  return {
    job,
    deps: createDeps(
      runtimeSettings({
        jobName: JOB_NAME,
        tables: { tenants: TABLES.tenants.name, sessions: TABLES.sessions.name },
        settings: { sessionMaxAgeDays: 30, deleteChunkSize: 25 },
      }),
    ),
    async seedValid(n) {
      await putAll(documentClient(), TABLES.tenants.name, [tenant(`ok-${n}`)]);
      await putAll(documentClient(), TABLES.sessions.name, [
        session({ tenantId: `ok-${n}`, sessionId: 's-1', lastSeenAt: '2025-01-01T00:00:00.000Z' }),
      ]);
      return corpusEnvelope(JOB_NAME, `ok-${n}:expired-sessions:${CORPUS_DATE}`, { tenantId: `ok-${n}` });
    },
    applied: async (n) =>
      (await getItem(TABLES.sessions.name, { tenantId: `ok-${n}`, sessionId: 's-1' })) === undefined,
  };
});
