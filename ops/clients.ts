// Operator CLI: the AWS SDK clients a command uses, configured from the discovered stack (explicit local endpoints, or
// the SDK defaults for a deployed stack). The CLI is just another AWS client.
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SchedulerClient } from '@aws-sdk/client-scheduler';
import { SNSClient } from '@aws-sdk/client-sns';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { IAMClient } from '@aws-sdk/client-iam';
import { STSClient } from '@aws-sdk/client-sts';
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import type { AwsService, ClientSettings } from './resources';

export interface OpsClients {
  sqs: Pick<SQSClient, 'send'>;
  dynamo: Pick<DynamoDBDocumentClient, 'send'>;
  lambda: Pick<LambdaClient, 'send'>;
  scheduler: Pick<SchedulerClient, 'send'>;
  /** The alarm topic's subscriptions (preflight). */
  sns: Pick<SNSClient, 'send'>;
  /** Whether the jobs' secrets exist (preflight; never their values). */
  secrets: Pick<SecretsManagerClient, 'send'>;
  /** The operator's own permissions, simulated (preflight against a deployed stack; the local runtime has no IAM API). */
  iam: Pick<IAMClient, 'send'>;
  sts: Pick<STSClient, 'send'>;
  /** A job's metrics (ops/metrics.ts, the console's charts): CloudWatch, or the local session's CloudWatch API. */
  cloudwatch: Pick<CloudWatchClient, 'send'>;
  /** Releases sockets so the process can exit. */
  destroy(): void;
}

function config(settings: ClientSettings, service?: AwsService) {
  return {
    ...(settings.region ? { region: settings.region } : {}),
    ...(service && settings.endpoints?.[service] ? { endpoint: settings.endpoints[service] } : {}),
    ...(settings.credentials ? { credentials: settings.credentials } : {}),
  };
}

export function createClients(settings: ClientSettings): OpsClients {
  const sqs = new SQSClient(config(settings, 'sqs'));
  const dynamoBase = new DynamoDBClient(config(settings, 'dynamodb'));
  const dynamo = DynamoDBDocumentClient.from(dynamoBase);
  const lambda = new LambdaClient(config(settings, 'lambda'));
  const scheduler = new SchedulerClient(config(settings, 'scheduler'));
  const sns = new SNSClient(config(settings, 'sns'));
  const secrets = new SecretsManagerClient(config(settings, 'secretsmanager'));
  const iam = new IAMClient(config(settings));
  const sts = new STSClient(config(settings));
  const cloudwatch = new CloudWatchClient(config(settings, 'cloudwatch'));
  const all = [sqs, dynamoBase, lambda, scheduler, sns, secrets, iam, sts, cloudwatch];
  return {
    sqs,
    dynamo,
    lambda,
    scheduler,
    sns,
    secrets,
    iam,
    sts,
    cloudwatch,
    destroy() {
      for (const client of all) client.destroy();
    },
  };
}
