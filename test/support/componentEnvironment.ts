// The component tier's test environment (jest.config.js): node's, plus one dynalite and one local-aws-sqs per jest
// worker, shared by every file the worker runs instead of a pair started and stopped per file (a second or more each).
//
// jest loads this module with Node's own require, once per worker (its cache keeps it), and builds one environment
// from it per test file: the module's `shared` outlives the files, an environment does not. The servers run here, in
// the worker's own context, not in a test file's: a file's fake timers cannot stall them. They are started on the first
// startLocalAws() of the worker (test/support/aws.ts reaches them through the global below) and unref'd, so the worker
// exits with them still listening. Every table and queue is deleted when a file's startLocalAws() is stopped and again
// when the file ends, whatever it did: a file never sees another's tables or queues, whose names are fixed.
import { TestEnvironment } from 'jest-environment-node';
import type { EnvironmentContext, JestEnvironmentConfig } from '@jest/environment';
import { DeleteTableCommand, DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { DeleteQueueCommand, ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { startDynamoDb, startSqs, type RunningServer } from '../../local/servers';
import { waitFor } from '../../local/waitFor';
import { SHARED_LOCAL_AWS, type SharedLocalAws } from './aws';

// The reset's SDK clients run here, outside setupEnv.ts's reach: the same quiet about the machine's Node 20.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

let shared: Promise<{ dynamodb: RunningServer; sqs: RunningServer }> | undefined;

async function start(): Promise<{ dynamodb: RunningServer; sqs: RunningServer }> {
  const [dynamodb, sqs] = await Promise.all([startDynamoDb(), startSqs()]);
  dynamodb.server?.unref();
  sqs.server?.unref();
  return { dynamodb, sqs };
}

const servers = () => (shared ??= start());

const CLIENT = { region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } };
/** dynalite deletes a table a moment after DeleteTable answers (deleteTableMs 0 is a timer, not at once). */
const DELETION_POLL_MS = 5;
const DELETION_LIMIT_MS = 10_000;

async function reset(): Promise<void> {
  if (!shared) return;
  const { dynamodb, sqs } = await shared;
  // Clients of their own, destroyed after: a kept-alive socket would hold the worker open.
  const ddb = new DynamoDBClient({ ...CLIENT, endpoint: dynamodb.endpoint });
  const queues = new SQSClient({ ...CLIENT, endpoint: sqs.endpoint });
  try {
    await waitFor(
      'the shared local AWS to hold no table and no queue',
      async () => {
        const tables = await listTables(ddb);
        const urls = (await queues.send(new ListQueuesCommand({}))).QueueUrls ?? [];
        if (tables.length === 0 && urls.length === 0) return true;
        await Promise.all([
          // A table already being deleted refuses a second DeleteTable (ResourceInUseException): it goes anyway.
          ...tables.map((TableName) => ddb.send(new DeleteTableCommand({ TableName })).catch(() => undefined)),
          ...urls.map((QueueUrl) => queues.send(new DeleteQueueCommand({ QueueUrl })).catch(() => undefined)),
        ]);
        return false;
      },
      { timeoutMs: DELETION_LIMIT_MS, intervalMs: DELETION_POLL_MS },
    );
  } finally {
    ddb.destroy();
    queues.destroy();
    // The file's own clients' kept-alive connections, closed from the server's side for the same reason.
    dynamodb.server?.closeIdleConnections();
    sqs.server?.closeIdleConnections();
  }
}

async function listTables(ddb: DynamoDBClient): Promise<string[]> {
  const names: string[] = [];
  let start: string | undefined;
  do {
    const page = await ddb.send(new ListTablesCommand({ ExclusiveStartTableName: start }));
    names.push(...(page.TableNames ?? []));
    start = page.LastEvaluatedTableName;
  } while (start);
  return names;
}

export default class ComponentEnvironment extends TestEnvironment {
  constructor(config: JestEnvironmentConfig, context: EnvironmentContext) {
    super(config, context);
    const api: SharedLocalAws = { servers, reset };
    this.global[SHARED_LOCAL_AWS] = api;
  }

  async teardown(): Promise<void> {
    await reset();
    await super.teardown();
  }
}
