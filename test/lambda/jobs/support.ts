// Test helpers for the real jobs: their tables on dynalite (shaped as lib/config/environments.ts declares them),
// runtime settings, and a page walker for discovery.
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { JobRuntimeSettings } from '../../../lambda/core/constants';
import type { DiscoveredOperation, JobDefinition } from '../../../lambda/core/job';
import { S3Client } from '@aws-sdk/client-s3';
import { resetClients } from '../../../lambda/adapters/clients';
import type { FixtureContext } from '../../../local/fixture';
import { LOCAL_CREDENTIALS, startS3, type RunningS3 } from '../../../local/servers';
import { startLocalAws, type LocalAws } from '../../support/aws';

interface TableSpec {
  name: string;
  hash: string;
  range?: string;
  indexes?: { name: string; hash: string; range: string }[];
}

export const TABLES = {
  payments: { name: 'payments-test', hash: 'paymentId', indexes: [{ name: 'unsettled-by-date', hash: 'unsettledDate', range: 'paymentId' }] },
  uploads: { name: 'uploads-test', hash: 'uploadId', indexes: [{ name: 'by-deadline', hash: 'retentionState', range: 'deleteAfter' }] },
  tenants: { name: 'tenants-test', hash: 'tenantId' },
  sessions: { name: 'sessions-test', hash: 'tenantId', range: 'sessionId', indexes: [{ name: 'by-last-seen', hash: 'tenantId', range: 'lastSeenAt' }] },
} satisfies Record<string, TableSpec>;

export async function createTable(client: DynamoDBClient, spec: TableSpec): Promise<void> {
  const attributes = new Set([spec.hash, ...(spec.range ? [spec.range] : []), ...(spec.indexes ?? []).flatMap((i) => [i.hash, i.range])]);
  await client.send(
    new CreateTableCommand({
      TableName: spec.name,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [...attributes].map((name) => ({ AttributeName: name, AttributeType: 'S' })),
      KeySchema: [{ AttributeName: spec.hash, KeyType: 'HASH' }, ...(spec.range ? [{ AttributeName: spec.range, KeyType: 'RANGE' as const }] : [])],
      GlobalSecondaryIndexes: spec.indexes?.map((i) => ({
        IndexName: i.name,
        KeySchema: [{ AttributeName: i.hash, KeyType: 'HASH' }, { AttributeName: i.range, KeyType: 'RANGE' }],
        Projection: { ProjectionType: 'ALL' },
      })),
    }),
  );
}

export async function putAll(documents: DynamoDBDocumentClient, table: string, items: object[]): Promise<void> {
  for (let i = 0; i < items.length; i += 25) {
    await documents.send(new BatchWriteCommand({ RequestItems: { [table]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) } }));
  }
}

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

export function runtimeSettings(over: Partial<JobRuntimeSettings>): JobRuntimeSettings {
  return {
    jobName: 'test-job',
    pageSize: 10,
    maxPagesPerRun: 50,
    maxMessageBytes: 262144,
    businessDateOffsetDays: -1,
    timeZone: 'UTC',
    rateLimit: { startsPerInterval: 100, intervalSeconds: 60, burst: 100 },
    concurrency: 2,
    tables: {},
    buckets: {},
    secrets: {},
    settings: {},
    ...over,
  };
}

/** Walks every page of discovery, as chained producer runs would; fails if paging does not end. */
export async function discoverAll<R extends Record<string, string | number | boolean>, D>(
  job: JobDefinition<R, D>,
  deps: D,
  request: { businessDate: string; pageSize: number; now: Date },
  maxPages = 100,
): Promise<{ operations: DiscoveredOperation<R>[]; pageSizes: number[] }> {
  const operations: DiscoveredOperation<R>[] = [];
  const pageSizes: number[] = [];
  let cursor: string | undefined;
  do {
    if (pageSizes.length >= maxPages) throw new Error(`discovery did not end within ${maxPages} pages`);
    const page = await job.discover(deps, { ...request, cursor });
    operations.push(...page.operations);
    pageSizes.push(page.operations.length);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return { operations, pageSizes };
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
