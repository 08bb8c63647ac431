// The job's own bad-input cases (messages.json beside this file: its resource schema's) fed through its real consumer,
// mixed with valid messages; the message contract's cases are the engine's (test/lambda/corpus.component.test.ts).
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { join } from 'node:path';
import { documentClient } from '../../../adapters/clients';
import { createDeps, job, JOB_NAME } from '..';
import { unsettledPayment } from '../items';
import { HttpProviderClient } from '../providerClient';
import { messageCasesIn } from '../../../../test/corpus/loadCorpus';
import { startHttpStub } from '../../../../test/support/httpStub';
import { createTable, putAll, runtimeSettings } from '../../../../test/support/jobs';
import { CORPUS_DATE, corpusEnvelope, describeMessageCorpus, getItem } from '../../../../test/support/messageCorpus';
import { TABLES } from './tables';

describeMessageCorpus(JOB_NAME, messageCasesIn(join(__dirname, 'messages.json')), async () => {
  const raw = new DynamoDBClient({});
  await createTable(raw, TABLES.payments);
  raw.destroy();
  const stub = await startHttpStub();
  stub.handle((req, res) => {
    const paymentId = decodeURIComponent(req.url.split('/')[3]);
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ paymentId, status: 'settled', providerReference: `prov-${paymentId}` }));
  });
  const deps = createDeps(
    runtimeSettings({
      jobName: JOB_NAME,
      tables: { payments: TABLES.payments.name },
      secrets: { apiKey: 'corpus/api-key' },
      settings: { provider: 'acme', providerBaseUrl: stub.url },
    }),
  );
  return {
    job,
    deps: { ...deps, client: new HttpProviderClient({ baseUrl: stub.url, apiKey: async () => 'corpus-test-key' }) },
    async seedValid(n) {
      await putAll(documentClient(), TABLES.payments.name, [
        unsettledPayment({ paymentId: `ok-${n}`, businessDate: CORPUS_DATE }),
      ]);
      return corpusEnvelope(JOB_NAME, `reconcile:acme:ok-${n}:${CORPUS_DATE}`, { paymentId: `ok-${n}` });
    },
    applied: async (n) =>
      (await getItem(TABLES.payments.name, { paymentId: `ok-${n}` }))?.reconciledBy ===
      `reconcile:acme:ok-${n}:${CORPUS_DATE}`,
    close: () => stub.close(),
  };
});
