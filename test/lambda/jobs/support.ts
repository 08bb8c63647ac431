// Test helpers for the example jobs: their tables on dynalite (shaped as lib/config/environments.ts declares them), a
// scan, and local servers for their fixtures' tests; table creation, runtime settings and the discovery page walker are
// `paced-jobs/testing`'s (local/testing.ts), re-exported.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { JobRuntimeSettings } from '../../../lambda/core/constants';
import { S3Client } from '@aws-sdk/client-s3';
import { resetClients } from '../../../lambda/adapters/clients';
import type { FixtureContext } from '../../../local/fixture';
import { LOCAL_CREDENTIALS, startS3, type RunningS3 } from '../../../local/servers';
import { createTable, type TableSpec } from '../../../local/testing';
import { startLocalAws, type LocalAws } from '../../support/aws';

// The table, settings and discovery helpers a team's job tests get from `paced-jobs/testing`: the examples' tests use
// the same ones, so what the package ships is what they exercise.
export { createTable, discoverAll, putAll, runtimeSettings, type TableSpec } from '../../../local/testing';

export const TABLES = {
  payments: { name: 'payments-test', hash: 'paymentId', indexes: [{ name: 'unsettled-by-date', hash: 'unsettledDate', range: 'paymentId' }] },
  uploads: { name: 'uploads-test', hash: 'uploadId', indexes: [{ name: 'by-deadline', hash: 'retentionState', range: 'deleteAfter' }] },
  tenants: { name: 'tenants-test', hash: 'tenantId' },
  sessions: { name: 'sessions-test', hash: 'tenantId', range: 'sessionId', indexes: [{ name: 'by-last-seen', hash: 'tenantId', range: 'lastSeenAt' }] },
} satisfies Record<string, TableSpec>;

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
export function useFixtureServers(base: { jobName: string; settings: () => JobRuntimeSettings; businessDate: string; tables: TableSpec[]; buckets?: string[] }): FixtureServers {
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
    s3 = new S3Client({ endpoint: s3Server?.endpoint ?? 'http://127.0.0.1:9', region: 'us-east-1', credentials: LOCAL_CREDENTIALS, forcePathStyle: true });
    for (const table of base.tables) await createTable(dynamodb, table);
  });
  afterAll(async () => {
    s3.destroy();
    dynamodb.destroy();
    resetClients();
    await Promise.all([aws.stop(), s3Server?.close()]);
  });
  return {
    context: (over = {}) => ({ jobName: base.jobName, settings: base.settings(), businessDate: base.businessDate, dynamodb, documents, s3, ...over }),
    dynamodb: () => dynamodb,
    documents: () => documents,
    s3: () => s3,
  };
}
