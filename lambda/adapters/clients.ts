// AWS SDK clients, one per container. Endpoints come from the standard AWS_ENDPOINT_URL_* variables, so the same
// code talks to AWS or to the local AWS-protocol servers.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import type { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';

let dynamo: DynamoDBClient | undefined;
let documents: DynamoDBDocumentClient | undefined;
let sqs: SQSClient | undefined;
let s3: S3Client | undefined;
let lambda: LambdaClient | undefined;

export function dynamoClient(): DynamoDBClient {
  return (dynamo ??= new DynamoDBClient({}));
}

/** The DynamoDB document client (plain JavaScript values; undefined attributes removed), one per container. */
export function documentClient(): DynamoDBDocumentClient {
  return (documents ??= DynamoDBDocumentClient.from(dynamoClient(), {
    marshallOptions: { removeUndefinedValues: true },
  }));
}

export function sqsClient(): SQSClient {
  return (sqs ??= new SQSClient({}));
}

// The S3 and Lambda SDKs are loaded on first use, not at init: only some jobs delete objects and only the producer
// continues itself, and each SDK package adds tens of milliseconds to every cold start that loads it.
/* eslint-disable @typescript-eslint/no-require-imports */
/** The S3 client, one per container; path-style addressing when an endpoint is set (the local S3 server). */
export function s3Client(): S3Client {
  const { S3Client: Client } = require('@aws-sdk/client-s3') as typeof import('@aws-sdk/client-s3');
  // Path-style addressing works with both S3 and local emulators that cannot serve virtual-hosted buckets.
  return (s3 ??= new Client({ forcePathStyle: process.env.AWS_ENDPOINT_URL_S3 !== undefined }));
}

export function lambdaClient(): LambdaClient {
  const { LambdaClient: Client } = require('@aws-sdk/client-lambda') as typeof import('@aws-sdk/client-lambda');
  return (lambda ??= new Client({}));
}
/* eslint-enable @typescript-eslint/no-require-imports */

/** Drops cached clients; tests call it after pointing the endpoint variables somewhere new. */
export function resetClients(): void {
  for (const c of [documents, dynamo, sqs, s3, lambda]) c?.destroy();
  dynamo = documents = sqs = s3 = lambda = undefined;
}
