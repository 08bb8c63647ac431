// Test helpers: point the AWS SDK at embedded servers through the standard endpoint variables.
import { startDynamoDb, startSqs, RunningServer } from '../../local/servers';

/** The global a component test file reaches its worker's shared servers by (test/support/componentEnvironment.ts). */
export const SHARED_LOCAL_AWS = '__pacedJobsSharedLocalAws';

export interface SharedLocalAws {
  /** The worker's servers, started on the first call. */
  servers(): Promise<{ dynamodb: RunningServer; sqs: RunningServer }>;
  /** Deletes every table and queue on them (nothing when they are not started). */
  reset(): Promise<void>;
}

export interface LocalAws {
  dynamodb: RunningServer;
  sqs: RunningServer;
  /** Restores the environment and stops the servers (the shared ones: deletes every table and queue on them). */
  stop(): Promise<void>;
}

const VARS = ['AWS_ENDPOINT_URL_DYNAMODB', 'AWS_ENDPOINT_URL_SQS', 'AWS_REGION', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'];

/**
 * Sets the SDK's endpoint variables to a dynalite and a local-aws-sqs on loopback: in the component tier, the jest
 * worker's shared pair (test/support/componentEnvironment.ts), which `stop()` empties instead of closing; elsewhere a
 * pair of its own on free ports, which `stop()` closes.
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

/** A shared server as a file sees it: its address; closing it is the worker's business, not the file's. */
function asShared(server: RunningServer): RunningServer {
  return {
    endpoint: server.endpoint,
    port: server.port,
    close: () => Promise.reject(new Error('a shared local AWS server is not closed by a test file: stop() its LocalAws')),
  };
}
