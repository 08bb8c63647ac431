// Shared setup for the handler and adapter tests: the tables and queues the stack would create, on the local servers.
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
  type Message,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { dynamoClient, resetClients } from '../../../lambda/adapters/clients';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { logger, metrics } from '../../../lambda/adapters/observability';
import type { RateFeedback } from '../../../lambda/adapters/adaptiveRateLimiter';
import { DynamoDbRateLimiter, type RateLimiter } from '../../../lambda/adapters/rateLimiter';
import { SqsPublisher } from '../../../lambda/adapters/sqsPublisher';
import type { ConsumerOptions } from '../../../lambda/handlers/consumer';
import type { KeyConcurrency } from '../../../lambda/handlers/consumer/keyLeases';
import type { KeyLimiter } from '../../../lambda/handlers/consumer/keyRateGate';
import { LimiterPacer, type LimiterPacerOptions } from '../../../lambda/handlers/consumer/limiterPacer';
import { startLocalAws, type LocalAws } from '../../support/aws';
import type { JobRuntimeSettings } from '../../../lambda/core/constants';
import { job as fakeJob } from '../../fixtures/jobs/fake-job';

/** A PAY_PER_REQUEST table keyed as the stack keys it: a partition key and, when given, a sort key (both strings). */
async function createTable(name: string, partitionKey: string, sortKey?: string): Promise<void> {
  const keys = [
    { name: partitionKey, type: 'HASH' as const },
    ...(sortKey ? [{ name: sortKey, type: 'RANGE' as const }] : []),
  ];
  const ddb = new DynamoDBClient({});
  await ddb.send(
    new CreateTableCommand({
      TableName: name,
      AttributeDefinitions: keys.map((k) => ({ AttributeName: k.name, AttributeType: 'S' })),
      KeySchema: keys.map((k) => ({ AttributeName: k.name, KeyType: k.type })),
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  ddb.destroy();
}

export const createIdempotencyTable = (name: string): Promise<void> => createTable(name, 'id');

export const createLedgerTable = (name: string): Promise<void> => createTable(name, 'pk', 'sk');

export async function createQueue(name: string): Promise<string> {
  const sqs = new SQSClient({});
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name }));
  sqs.destroy();
  return QueueUrl as string;
}

/**
 * Every visible message, deleted as read. WaitTimeSeconds 0 because local-aws-sqs waits the full long-poll time, and
 * de-duplicated by message ID because it may return one message twice in a response.
 */
export async function drainQueue(queueUrl: string): Promise<Message[]> {
  const sqs = new SQSClient({});
  const seen = new Map<string, Message>();
  try {
    for (;;) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
          MessageAttributeNames: ['All'],
        }),
      );
      const fresh = Messages.filter((m) => !seen.has(m.MessageId as string));
      if (fresh.length === 0) return [...seen.values()];
      for (const m of fresh) {
        seen.set(m.MessageId as string, m);
        await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
      }
    }
  } finally {
    sqs.destroy();
  }
}

export function fakeSettings(overrides: Partial<JobRuntimeSettings> = {}): JobRuntimeSettings {
  return {
    jobName: fakeJob.name,
    pageSize: 25,
    maxPagesPerRun: 100,
    maxMessageBytes: 8192,
    businessDateOffsetDays: -1,
    timeZone: 'Europe/Berlin',
    rateLimit: { startsPerInterval: 100, intervalSeconds: 60, burst: 1 },
    concurrency: 2,
    tables: {},
    buckets: {},
    secrets: {},
    settings: { items: 0 },
    ...overrides,
  };
}

/** The limiter table the stack creates: partition key `pk`, one item per downstream key. */
export const createLimiterTable = (name: string): Promise<void> => createTable(name, 'pk');

/**
 * Records every request made through the container's shared DynamoDB client (which the ledger's document client, the
 * limiter and the idempotency layer all use), by operation and table. `stop()` removes the middleware.
 */
export function countDynamoCalls(): { calls: { command: string; table: string }[]; stop(): void } {
  const calls: { command: string; table: string }[] = [];
  const name = 'test-dynamo-call-counter';
  const stack = dynamoClient().middlewareStack;
  stack.add(
    (next, context) => async (args) => {
      const input = args.input as { TableName?: string; RequestItems?: Record<string, unknown> };
      calls.push({
        command: context.commandName as string,
        table: input.TableName ?? Object.keys(input.RequestItems ?? {})[0] ?? '',
      });
      return next(args);
    },
    { step: 'initialize', name },
  );
  return { calls, stop: () => void stack.remove(name) };
}

/** Sends bodies to a queue as the producer would (delay 0). */
export async function sendBodies(queueUrl: string, bodies: string[]): Promise<void> {
  const sqs = new SQSClient({});
  try {
    for (let i = 0; i < bodies.length; i += 10) {
      await sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: bodies.slice(i, i + 10).map((MessageBody, j) => ({ Id: String(j), MessageBody })),
        }),
      );
    }
  } finally {
    sqs.destroy();
  }
}

/**
 * Receives what is visible, as Lambda's event source would hand it over: SQS records with their system attributes
 * (ApproximateReceiveCount among them). WaitTimeSeconds 0 and de-duplicated, for local-aws-sqs's quirks.
 */
export async function receiveEvent(queueUrl: string, max = 10): Promise<SQSEvent> {
  const sqs = new SQSClient({});
  try {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: max,
        WaitTimeSeconds: 0,
        AttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    const unique = [...new Map(Messages.map((m) => [m.MessageId as string, m])).values()];
    return { Records: unique.map((m) => toRecord(queueUrl, m)) };
  } finally {
    sqs.destroy();
  }
}

/** Deletes the records the handler acknowledged (not listed as failures), as the event source does. */
export async function acknowledge(queueUrl: string, event: SQSEvent, response: SQSBatchResponse): Promise<void> {
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  const sqs = new SQSClient({});
  try {
    for (const r of event.Records) {
      if (!failed.has(r.messageId))
        await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: r.receiptHandle }));
    }
  } finally {
    sqs.destroy();
  }
}

function toRecord(queueUrl: string, m: Message): SQSRecord {
  const a = m.Attributes ?? {};
  return {
    messageId: m.MessageId as string,
    receiptHandle: m.ReceiptHandle as string,
    body: m.Body as string,
    attributes: {
      ApproximateReceiveCount: a.ApproximateReceiveCount as string,
      SentTimestamp: a.SentTimestamp as string,
      SenderId: a.SenderId ?? 'local',
      ApproximateFirstReceiveTimestamp: a.ApproximateFirstReceiveTimestamp as string,
    },
    messageAttributes: {},
    md5OfBody: m.MD5OfBody as string,
    eventSource: 'aws:sqs',
    eventSourceARN: `arn:aws:sqs:us-east-1:000000000000:${queueUrl.split('/').pop()}`,
    awsRegion: 'us-east-1',
  };
}

/**
 * A consumer test file's local AWS: dynalite and local SQS with the three tables the consumer needs, started before
 * the file's tests and stopped after, with the shared clients reset and the handlers' logs and EMF lines kept out of
 * the output (the product's output, not the tests' subject).
 */
export function useConsumerAws(tables: { idempotency: string; ledger: string; limiter: string }): void {
  let aws: LocalAws | undefined;
  beforeAll(async () => {
    aws = await startLocalAws();
    resetClients();
    await Promise.all([
      createIdempotencyTable(tables.idempotency),
      createLedgerTable(tables.ledger),
      createLimiterTable(tables.limiter),
    ]);
    logger.setLogLevel('SILENT');
    jest.spyOn(metrics, 'publishStoredMetrics').mockImplementation(() => {
      metrics.clearMetrics();
      return metrics;
    });
  });
  afterAll(async () => {
    resetClients();
    await aws?.stop();
  });
}

/** The state tables' names the security tests' consumers use. */
export const STATE_TABLES = { idempotency: 'idempotency', ledger: 'ledger', limiter: 'limiter' } as const;

/**
 * An in-process consumer's options but its job, on STATE_TABLES, with a limiter that never paces and a publisher that
 * never sleeps: for tests of what a consumer writes (logs, the DLQ, the ledger, idempotency), not of how it paces.
 * Records on their fifth receive are on their last (maxReceiveCount 5).
 */
export function unpacedConsumerOptions(
  queueUrl: string,
  dlqUrl: string,
  pacingKey: string,
): Omit<ConsumerOptions, 'job' | 'jobDeps'> {
  return {
    queueUrl,
    dlqUrl,
    idempotencyTableName: STATE_TABLES.idempotency,
    idempotencyTtlSeconds: 86_400,
    maxMessageBytes: 262_144,
    maxReceiveCount: 5,
    ledger: new DynamoLedger({ tableName: STATE_TABLES.ledger }),
    pacer: new LimiterPacer({
      key: pacingKey,
      limiter: new DynamoDbRateLimiter({
        tableName: STATE_TABLES.limiter,
        limits: { startsPerInterval: 1000, intervalMs: 1000 },
      }),
      lateToleranceMs: 60_000,
    }),
    publisher: new SqsPublisher({ sleep: async () => undefined }),
  };
}

/**
 * The pacing a consumer test gives: a LimiterPacer's parts beside the consumer's options, and its numbers under
 * `pacing`, as ConsumerOptions held them before the Pacer port (#36).
 */
export interface TestPacing {
  limiter?: RateLimiter;
  rateFeedback?: RateFeedback;
  keys?: KeyLimiter;
  keyConcurrency?: KeyConcurrency;
  backfill?: { limiter: RateLimiter; key?: string };
  pacing?: Partial<Omit<LimiterPacerOptions, 'limiter' | 'rateFeedback' | 'keys' | 'keyConcurrency' | 'backfill'>>;
}

/** A test's consumer options with its pacing built into a LimiterPacer (its key the job's name unless `pacing.key`). */
export function withPacer(options: Omit<ConsumerOptions, 'pacer'> & TestPacing): ConsumerOptions {
  const { limiter, rateFeedback, keys, keyConcurrency, backfill, pacing, ...rest } = options;
  const pacer = new LimiterPacer({
    ...pacing,
    key: pacing?.key ?? options.job.name,
    limiter,
    ...(rateFeedback ? { rateFeedback } : {}),
    ...(keys ? { keys } : {}),
    ...(keyConcurrency ? { keyConcurrency } : {}),
    ...(backfill ? { backfill } : {}),
  });
  return { ...rest, pacer };
}
