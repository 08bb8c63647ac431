// Operator CLI: the AWS SDK clients a command uses, configured from the discovered stack (explicit local endpoints, or
// the SDK defaults for a deployed stack). The CLI is just another AWS client.
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SchedulerClient } from '@aws-sdk/client-scheduler';
import type { AwsService, ClientSettings } from './resources';

export interface OpsClients {
  sqs: Pick<SQSClient, 'send'>;
  dynamo: Pick<DynamoDBDocumentClient, 'send'>;
  lambda: Pick<LambdaClient, 'send'>;
  scheduler: Pick<SchedulerClient, 'send'>;
  /** Releases sockets so the process can exit. */
  destroy(): void;
}

function config(settings: ClientSettings, service: AwsService) {
  return {
    ...(settings.region ? { region: settings.region } : {}),
    ...(settings.endpoints?.[service] ? { endpoint: settings.endpoints[service] } : {}),
    ...(settings.credentials ? { credentials: settings.credentials } : {}),
  };
}

export function createClients(settings: ClientSettings): OpsClients {
  const sqs = new SQSClient(config(settings, 'sqs'));
  const dynamoBase = new DynamoDBClient(config(settings, 'dynamodb'));
  const dynamo = DynamoDBDocumentClient.from(dynamoBase);
  const lambda = new LambdaClient(config(settings, 'lambda'));
  const scheduler = new SchedulerClient(config(settings, 'scheduler'));
  return {
    sqs,
    dynamo,
    lambda,
    scheduler,
    destroy() {
      sqs.destroy();
      dynamoBase.destroy();
      lambda.destroy();
      scheduler.destroy();
    },
  };
}
