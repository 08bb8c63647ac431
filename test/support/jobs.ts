// Test helpers for a job's own tests (lambda/jobs/<job>/test/): its tables on dynalite (each job's tests declare
// theirs, shaped as the job's config declares them), runtime settings, a page walker for discovery, and the message
// contract every job keeps.
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { MESSAGE_VERSION, SQS_MAX_MESSAGE_BYTES, type JobRuntimeSettings } from '../../lambda/core/constants';
import { parseMessage, serializeMessage } from '../../lambda/core/message';
import { loadJob } from '../../lambda/handlers/jobLoader';
import type { DiscoveredOperation, JobDefinition } from '../../lambda/core/job';
import { S3Client } from '@aws-sdk/client-s3';
import { resetClients } from '../../lambda/adapters/clients';
import type { FixtureContext } from '../../local/fixture';
import { LOCAL_CREDENTIALS, startS3, type RunningS3 } from '../../local/servers';
import { startLocalAws, type LocalAws } from './aws';

/** A table as a job's tests create it on dynalite: string keys, and its indexes projecting everything. */
export interface TableSpec {
  name: string;
  hash: string;
  range?: string;
  indexes?: { name: string; hash: string; range: string }[];
}

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
