// What a job's own tests need (`paced-jobs/testing`): local DynamoDB and SQS for a test file, pointed at through the
// AWS SDK's standard endpoint variables so the job's own clients reach them; its tables created as the stack declares
// them; its JOB_SETTINGS as a function receives them; and discovery walked page by page, as chained producer runs do.
// The scaffold's tests (`new-job`) use it, in this repository and in a team's app alike.
import { CreateTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DiscoveredOperation, JobDefinition, JobRuntimeSettings } from '../lambda/job';
import { startDynamoDb, startSqs, type RunningServer } from './servers';

/**
 * The global a test file reaches shared servers by: a test environment that starts one pair per worker (this
 * repository's component tier, test/support/componentEnvironment.ts) sets it, and startLocalAws then uses that pair.
 */
export const SHARED_LOCAL_AWS = '__pacedJobsSharedLocalAws';

/** The servers a test environment shares between the files of one worker. */
export interface SharedLocalAws {
  /** The worker's servers, started on the first call. */
  servers(): Promise<{ dynamodb: RunningServer; sqs: RunningServer }>;
  /** Deletes every table and queue on them (nothing when they are not started). */
  reset(): Promise<void>;
}

/** Local DynamoDB and SQS for one test file; the SDK's endpoint variables point at them until `stop()`. */
export interface LocalAws {
  dynamodb: RunningServer;
  sqs: RunningServer;
  /** Restores the environment and stops the servers (the shared ones: deletes every table and queue on them). */
  stop(): Promise<void>;
}

const VARS = [
  'AWS_ENDPOINT_URL_DYNAMODB',
  'AWS_ENDPOINT_URL_SQS',
  'AWS_REGION',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
];

/**
 * Sets the SDK's endpoint variables to a dynalite and a local-aws-sqs on loopback: the shared pair when a test
 * environment offers one (SHARED_LOCAL_AWS), which `stop()` empties instead of closing; otherwise a pair of its own on
 * free ports, which `stop()` closes. Call it before the code under test creates its clients (the job API's clients
 * read the variables when they are first used).
 */
export async function startLocalAws(): Promise<LocalAws> {
  const saved = Object.fromEntries(VARS.map((v) => [v, process.env[v]]));
  const shared = (globalThis as Record<string, unknown>)[SHARED_LOCAL_AWS] as SharedLocalAws | undefined;
  const [dynamodb, sqs] = shared
    ? await shared.servers().then((s) => [asShared(s.dynamodb), asShared(s.sqs)])
    : await Promise.all([startDynamoDb(), startSqs()]);
  process.env.AWS_ENDPOINT_URL_DYNAMODB = dynamodb.endpoint;
  process.env.AWS_ENDPOINT_URL_SQS = sqs.endpoint;
  process.env.AWS_REGION = 'us-east-1';
  process.env.AWS_ACCESS_KEY_ID = 'local';
  process.env.AWS_SECRET_ACCESS_KEY = 'local';
  return {
    dynamodb,
    sqs,
    async stop() {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      if (shared) await shared.reset();
      else await Promise.all([dynamodb.close(), sqs.close()]);
    },
  };
}

/** A shared server as a file sees it: its address; closing it is the environment's business, not the file's. */
function asShared(server: RunningServer): RunningServer {
  return {
    endpoint: server.endpoint,
    port: server.port,
    close: () =>
      Promise.reject(new Error('a shared local AWS server is not closed by a test file: stop() its LocalAws')),
  };
}

/** A table as a test creates it: string keys, on-demand, each index projecting all attributes. */
export interface TableSpec {
  name: string;
  /** The partition key's attribute. */
  hash: string;
  /** The sort key's attribute, if the table has one. */
  range?: string;
  indexes?: { name: string; hash: string; range: string }[];
}

/** Creates the table on the local DynamoDB the client points at. */
export async function createTable(client: DynamoDBClient, spec: TableSpec): Promise<void> {
  const attributes = new Set([
    spec.hash,
    ...(spec.range ? [spec.range] : []),
    ...(spec.indexes ?? []).flatMap((i) => [i.hash, i.range]),
  ]);
  await client.send(
    new CreateTableCommand({
      TableName: spec.name,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [...attributes].map((name) => ({ AttributeName: name, AttributeType: 'S' })),
      KeySchema: [
        { AttributeName: spec.hash, KeyType: 'HASH' },
        ...(spec.range ? [{ AttributeName: spec.range, KeyType: 'RANGE' as const }] : []),
      ],
      GlobalSecondaryIndexes: spec.indexes?.map((i) => ({
        IndexName: i.name,
        KeySchema: [
          { AttributeName: i.hash, KeyType: 'HASH' },
          { AttributeName: i.range, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      })),
    }),
  );
}

/** Writes the items, 25 to a BatchWriteItem (its limit). */
export async function putAll(documents: DynamoDBDocumentClient, table: string, items: object[]): Promise<void> {
  for (let i = 0; i < items.length; i += 25) {
    await documents.send(
      new BatchWriteCommand({
        RequestItems: { [table]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) },
      }),
    );
  }
}

/**
 * A job's JOB_SETTINGS as the stack would hand them to its functions, with test values for what `over` leaves out:
 * business dates in UTC with offset -1, 100 starts a minute, no tables, buckets, secrets or settings.
 */
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

/**
 * Walks every page of discovery, as chained producer runs would.
 * @throws Error when paging does not end within `maxPages`.
 */
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
