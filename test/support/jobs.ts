// Test helpers for a job's own tests (lambda/jobs/<job>/test/): its tables on dynalite (each job's tests declare
// theirs, shaped as the job's config declares them), runtime settings, a page walker for discovery, and the message
// contract every job keeps.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { MESSAGE_VERSION, SQS_MAX_MESSAGE_BYTES, type JobRuntimeSettings } from '../../lambda/core/constants';
import { parseMessage, serializeMessage } from '../../lambda/core/message';
import { loadJob } from '../../lambda/handlers/jobLoader';
import { S3Client } from '@aws-sdk/client-s3';
import { resetClients } from '../../lambda/adapters/clients';
import type { FixtureContext } from '../../local/fixture';
import { createTable, type TableSpec } from '../../local/testing';
import { LOCAL_CREDENTIALS, startS3, type RunningS3 } from '../../local/servers';
import { startLocalAws, type LocalAws } from './aws';

// The table, settings and discovery helpers a team's job tests get from `paced-jobs/testing` (local/testing.ts): the
// examples' tests use the same ones, so what the package ships is what they exercise.
export { createTable, discoverAll, putAll, runtimeSettings, type TableSpec } from '../../local/testing';

export async function scanAll(documents: DynamoDBDocumentClient, table: string): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let startKey: Record<string, unknown> | undefined;
  do {
    const page = await documents.send(new ScanCommand({ TableName: table, ExclusiveStartKey: startKey }));
    items.push(...(page.Items ?? []));
    startKey = page.LastEvaluatedKey;
  } while (startKey);
  return items;
}

/** What a fixture test works with: a FixtureContext builder on local servers, and the clients behind it. */
export interface FixtureServers {
  context(over?: Partial<FixtureContext>): FixtureContext;
  dynamodb(): DynamoDBClient;
  documents(): DynamoDBDocumentClient;
  s3(): S3Client;
}

/**
 * Registers beforeAll/afterAll that start local DynamoDB (and S3 with `buckets`), create `tables`, and build the
 * clients a fixture's seed gets; without buckets, S3 points nowhere (the job's data is in DynamoDB only).
 */
export function useFixtureServers(base: {
  jobName: string;
  settings: () => JobRuntimeSettings;
  businessDate: string;
  tables: TableSpec[];
  buckets?: string[];
}): FixtureServers {
  let aws: LocalAws;
  let s3Server: RunningS3 | undefined;
  let dynamodb: DynamoDBClient;
  let documents: DynamoDBDocumentClient;
  let s3: S3Client;
  beforeAll(async () => {
    aws = await startLocalAws();
    if (base.buckets) s3Server = await startS3({ buckets: base.buckets });
    resetClients();
    dynamodb = new DynamoDBClient({});
    documents = DynamoDBDocumentClient.from(dynamodb);
    s3 = new S3Client({
      endpoint: s3Server?.endpoint ?? 'http://127.0.0.1:9',
      region: 'us-east-1',
      credentials: LOCAL_CREDENTIALS,
      forcePathStyle: true,
    });
    for (const table of base.tables) await createTable(dynamodb, table);
  });
  afterAll(async () => {
    s3.destroy();
    dynamodb.destroy();
    resetClients();
    await Promise.all([aws.stop(), s3Server?.close()]);
  });
  return {
    context: (over = {}) => ({
      jobName: base.jobName,
      settings: base.settings(),
      businessDate: base.businessDate,
      dynamodb,
      documents,
      s3,
      ...over,
    }),
    dynamodb: () => dynamodb,
    documents: () => documents,
    s3: () => s3,
  };
}

/** A job's largest resource, and the operation ID its discovery builds for it. */
export interface LargestResource {
  resource: Record<string, string>;
  operationId: string;
}

/**
 * Registers the tests every job keeps: the engine's job loader finds it by its folder name, and its largest resource
 * fits the message contract (well under SQS's limit), while an unknown field or an over-long value is refused.
 */
export function describeJobContract(name: string, sample: LargestResource): void {
  describe(`Job: ${name}, as the engine loads it`, () => {
    it('loads through the job loader by its folder name', () => {
      expect(loadJob(name).name).toBe(name);
    });

    it('accepts its largest resource, which fits the message contract', () => {
      const job = loadJob(name);
      expect(job.resourceSchema.safeParse(sample.resource).success).toBe(true);
      const body = serializeMessage(
        {
          version: MESSAGE_VERSION,
          jobType: name,
          operationId: sample.operationId,
          batchId: 'batch-1',
          businessDate: '2026-11-28',
          resource: sample.resource,
          enqueuedAt: '2026-11-29T02:00:00.000Z',
        },
        SQS_MAX_MESSAGE_BYTES,
      );
      expect(parseMessage(body, SQS_MAX_MESSAGE_BYTES).ok).toBe(true);
      expect(Buffer.byteLength(body)).toBeLessThan(2048);
    });

    it('rejects an unknown field and an over-long value', () => {
      const job = loadJob(name);
      expect(job.resourceSchema.safeParse({ ...sample.resource, extra: 'x' }).success).toBe(false);
      const [key] = Object.keys(sample.resource);
      expect(job.resourceSchema.safeParse({ ...sample.resource, [key]: 'x'.repeat(2000) }).success).toBe(false);
    });
  });
}
