// Test helpers: point the AWS SDK at embedded servers through the standard endpoint variables.
import { startDynamoDb, startSqs, RunningServer } from '../../local/servers';

export interface LocalAws {
  dynamodb: RunningServer;
  sqs: RunningServer;
  /** Restores the environment and stops the servers. */
  stop(): Promise<void>;
}

const VARS = ['AWS_ENDPOINT_URL_DYNAMODB', 'AWS_ENDPOINT_URL_SQS', 'AWS_REGION', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'];

/** Starts dynalite and local-aws-sqs on free loopback ports and sets the SDK's endpoint variables to them. */
export async function startLocalAws(): Promise<LocalAws> {
  const saved = Object.fromEntries(VARS.map((v) => [v, process.env[v]]));
  const [dynamodb, sqs] = await Promise.all([startDynamoDb(), startSqs()]);
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
      await Promise.all([dynamodb.close(), sqs.close()]);
    },
  };
}
