// The job's own bad-input cases (messages.json beside this file: its resource schema's) fed through its real consumer,
// mixed with valid messages; the message contract's cases are the engine's (test/lambda/corpus.component.test.ts).
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { join } from 'node:path';
import { documentClient } from '../../../adapters/clients';
import { createDeps, job, JOB_NAME } from '..';
import { pendingUpload } from '../items';
import { messageCasesIn } from '../../../../test/corpus/loadCorpus';
import { createTable, putAll, runtimeSettings } from '../../../../test/support/jobs';
import { corpusEnvelope, describeMessageCorpus, getItem } from '../../../../test/support/messageCorpus';
import { TABLES } from './tables';

describeMessageCorpus(JOB_NAME, messageCasesIn(join(__dirname, 'messages.json')), async () => {
  const raw = new DynamoDBClient({});
  await createTable(raw, TABLES.uploads);
  raw.destroy();
  const deletedObjects: string[] = [];
  return {
    job,
    deps: {
      ...createDeps(
        runtimeSettings({
          jobName: JOB_NAME,
          tables: { uploads: TABLES.uploads.name },
          buckets: { uploads: 'corpus-bucket' },
        }),
      ),
      // S3 is not among the local servers this suite starts; the object store is the job's own port, so a recorder stands in.
      objects: { deleteObject: async (_bucket: string, key: string) => void deletedObjects.push(key) },
    },
    async seedValid(n) {
      const item = pendingUpload({ uploadId: `ok-${n}`, deleteAfter: '2026-11-20T00:00:00.000Z' });
      await putAll(documentClient(), TABLES.uploads.name, [item]);
      return corpusEnvelope(JOB_NAME, `stale-upload:ok-${n}:${item.deleteAfter}`, {
        uploadId: `ok-${n}`,
        objectKey: item.objectKey,
        deleteAfter: item.deleteAfter,
      });
    },
    applied: async (n) =>
      (await getItem(TABLES.uploads.name, { uploadId: `ok-${n}` })) === undefined &&
      deletedObjects.includes(`uploads/ok-${n}.bin`),
  };
});
