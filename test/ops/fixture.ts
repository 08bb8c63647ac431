// Test fixture for the operator CLI: a small local stack on embedded servers (dynalite, local-aws-sqs, and the local
// runtime's Lambda and Scheduler API emulators over stub functions), described by an endpoints file as
// `npm start -- --serve` writes it, and a runner that captures what the CLI prints.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { jobOutputName, StackOutput } from '../../lib/outputs';
import { FunctionError, FunctionNotFoundError, type LambdaRuntime } from '../../local/lambdaRuntime';
import { startLambdaApi } from '../../local/lambdaApi';
import { SqsEventSourceMapping } from '../../local/eventSourceMapping';
import { LocalScheduler } from '../../local/scheduler';
import { startSchedulerApi } from '../../local/schedulerApi';
import type { RunningServer } from '../../local/servers';
import { type LocalAws, startLocalAws } from '../support/aws';
import { createIdempotencyTable, createLedgerTable, createLimiterTable } from '../lambda/handlers/harness';
import type { JobRuntimeSettings } from '../../lambda/core/constants';
import type { OpsIo } from '../../ops/io';
import { runOps } from '../../ops/program';

export const REGION = 'us-east-1';
export const ACCOUNT = '000000000000';
/** Where a change lands, as its prompt names the fixture's stack. */
export const TARGET = `local stack PacedJobs-test, account ${ACCOUNT}, region ${REGION}`;
export const CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/** The stack's schedule group, as lib/stack.ts names it for an environment `test`. */
export const SCHEDULE_GROUP = 'paced-jobs-test';

export interface FixtureJob {
  name: string;
  queueUrl: string;
  queueArn: string;
  dlqUrl: string;
  dlqArn: string;
  producer: string;
  consumer: string;
  schedule: string;
  /** The schedule's group: not `default`, so a Scheduler call that leaves the group out finds nothing, as on AWS. */
  scheduleGroup: string;
  /** The consumer's mapping on the work queue. */
  mapping: SqsEventSourceMapping;
  /** The producer's admission queue and its mapping (the run's next steps). */
  admissionQueueUrl: string;
  admissionQueueArn: string;
  admissionMapping: SqsEventSourceMapping;
}

export interface CapturedRun {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed as one JSON document (throws if it is not exactly one). */
  json<T = Record<string, unknown>>(): T;
}

export interface RunOptions {
  /** Whether stdin is a terminal. @default false */
  interactive?: boolean;
  /** Answers to prompts, in order. */
  answers?: string[];
  /** The CLI's clock. @default the real time */
  now?: Date;
  /** Another endpoints file to point the CLI at (a stack with other outputs). @default the fixture's */
  endpointsFile?: string;
}

export interface OpsFixtureOptions {
  /** A per-key rate limit in these jobs' deployed JOB_SETTINGS (`rateLimit.perKey`); the others have none. */
  perKey?: Record<string, NonNullable<JobRuntimeSettings['rateLimit']['perKey']>>;
  /** Start every job's consumer and admission mappings, as a deployed stack's run. @default false (both stopped) */
  running?: boolean;
}

/** What the stub producer returns and records: one entry per invocation, in the order they arrived. */
export type ProducerCall = { functionName: string; event: Record<string, unknown> };
/** An admission step the producer's admission mapping delivered (its body, parsed). */
export type AdmissionDelivery = { job: string; body: Record<string, unknown> };

export interface OpsFixture {
  aws: LocalAws;
  dir: string;
  endpointsFile: string;
  tables: { idempotency: string; ledger: string; limiter: string };
  jobs: Record<string, FixtureJob>;
  /** The endpoints file's document, to write a variant of it (RunOptions.endpointsFile). */
  endpointsDoc: { outputs: Record<string, string> } & Record<string, unknown>;
  scheduler: LocalScheduler;
  sqs: SQSClient;
  dynamo: DynamoDBDocumentClient;
  producerCalls: ProducerCall[];
  admissionDeliveries: AdmissionDelivery[];
  /** Makes the next producer invocations fail with this message (undefined: succeed). */
  failProducerWith?: string;
  prompts: string[];
  run(argv: string[], options?: RunOptions): Promise<CapturedRun>;
  depth(url: string): Promise<{ visible: number; inFlight: number }>;
  stop(): Promise<void>;
}

export async function startOpsFixture(
  jobNames: string[] = ['alpha', 'beta'],
  options: OpsFixtureOptions = {},
): Promise<OpsFixture> {
  const aws = await startLocalAws();
  const clientConfig = (endpoint: string) => ({ endpoint, region: REGION, credentials: CREDENTIALS });
  const sqs = new SQSClient(clientConfig(aws.sqs.endpoint));
  const ddb = new DynamoDBClient(clientConfig(aws.dynamodb.endpoint));
  const dynamo = DynamoDBDocumentClient.from(ddb);
  const tables = { idempotency: 'ops-test-idempotency', ledger: 'ops-test-ledger', limiter: 'ops-test-limiter' };
  // The runtime's own table shapes, as the handler tests create them.
  await Promise.all([
    createIdempotencyTable(tables.idempotency),
    createLedgerTable(tables.ledger),
    createLimiterTable(tables.limiter),
  ]);

  const scheduler = new LocalScheduler({ deliver: async () => undefined, deadLetter: async () => undefined });
  const jobs: Record<string, FixtureJob> = {};
  const arn = (service: string, resource: string) => `arn:aws:${service}:${REGION}:${ACCOUNT}:${resource}`;
  for (const name of jobNames) {
    const dlq = await sqs.send(new CreateQueueCommand({ QueueName: `${name}-dlq` }));
    const dlqArn = arn('sqs', `${name}-dlq`);
    const queue = await sqs.send(
      new CreateQueueCommand({
        QueueName: `${name}-queue`,
        Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 3 }) },
      }),
    );
    const producer = `${name}-producer`;
    const consumer = `${name}-consumer`;
    const schedule = `${name}-schedule`;
    scheduler.add({
      logicalId: `${name}Schedule`,
      name: schedule,
      arn: arn('scheduler', `schedule/${SCHEDULE_GROUP}/${schedule}`),
      group: SCHEDULE_GROUP,
      expression: 'cron(0 2 * * ? *)',
      timeZone: 'Europe/Berlin',
      enabled: true,
      targetArn: arn('lambda', `function:${producer}`),
      input: '{"scheduledTime":"<aws.scheduler.scheduled-time>"}',
      maximumRetryAttempts: 3,
      maximumEventAgeSeconds: 3600,
    });
    const mapping = new SqsEventSourceMapping(
      {
        uuid: `local-${name}Mapping`,
        functionName: consumer,
        queueUrl: queue.QueueUrl!,
        queueArn: arn('sqs', `${name}-queue`),
        region: REGION,
      },
      // The stub consumer acknowledges everything; the tests stop the mapping before they leave it running.
      { sqs, invoke: async () => ({ batchItemFailures: [] }), functionConcurrency: 1 },
    );
    const producerDlqArn = arn('sqs', `${name}-producer-dlq`);
    await sqs.send(new CreateQueueCommand({ QueueName: `${name}-producer-dlq` }));
    const admissionQueue = await sqs.send(
      new CreateQueueCommand({
        QueueName: `${name}-admission`,
        Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: producerDlqArn, maxReceiveCount: 5 }) },
      }),
    );
    const admissionQueueArn = arn('sqs', `${name}-admission`);
    const admissionMapping = new SqsEventSourceMapping(
      {
        uuid: `local-${name}AdmissionMapping`,
        functionName: producer,
        queueUrl: admissionQueue.QueueUrl!,
        queueArn: admissionQueueArn,
        batchSize: 1,
        region: REGION,
      },
      // The stub producer records each step it is handed and acknowledges it.
      {
        sqs,
        invoke: async (event) => {
          for (const r of event.Records)
            admissionDeliveries.push({ job: name, body: JSON.parse(r.body) as Record<string, unknown> });
          return { batchItemFailures: [] };
        },
        functionConcurrency: 1,
      },
    );
    jobs[name] = {
      name,
      queueUrl: queue.QueueUrl!,
      queueArn: arn('sqs', `${name}-queue`),
      dlqUrl: dlq.QueueUrl!,
      dlqArn,
      producer,
      consumer,
      schedule,
      scheduleGroup: SCHEDULE_GROUP,
      mapping,
      admissionQueueUrl: admissionQueue.QueueUrl!,
      admissionQueueArn,
      admissionMapping,
    };
    if (options.running) {
      mapping.start();
      admissionMapping.start();
    }
  }

  const producerCalls: ProducerCall[] = [];
  const admissionDeliveries: AdmissionDelivery[] = [];
  const fixture = {} as OpsFixture;
  type StubFunction = {
    spec: { name: string; arn: string; environment?: Record<string, string> };
    invoke: (event: Record<string, unknown>) => Promise<unknown>;
    invokeAsync: () => void;
  };
  // What the stack hands a producer (lib/paced-job.ts): its schedule runs at 02:00 Berlin time for the day before.
  const producerSettings = (jobName: string) =>
    JSON.stringify({
      jobName,
      pageSize: 100,
      maxPagesPerRun: 10,
      maxMessageBytes: 4096,
      businessDateOffsetDays: -1,
      timeZone: 'Europe/Berlin',
      rateLimit: {
        startsPerInterval: 60,
        intervalSeconds: 60,
        burst: 1,
        ...(options.perKey?.[jobName] ? { perKey: options.perKey[jobName] } : {}),
      },
      concurrency: 2,
      tables: {},
      buckets: {},
      secrets: {},
      settings: {},
      slo: { objective: 0.99, completeWithinMinutes: 120 },
    });
  const functions = new Map<string, StubFunction>(
    Object.values(jobs).flatMap((j): [string, StubFunction][] => [
      [
        j.producer,
        {
          spec: {
            name: j.producer,
            arn: arn('lambda', `function:${j.producer}`),
            environment: { JOB_SETTINGS: producerSettings(j.name) },
          },
          invoke: async (event: Record<string, unknown>) => {
            producerCalls.push({ functionName: j.producer, event });
            if (fixture.failProducerWith) {
              throw new FunctionError(fixture.failProducerWith, j.producer, 'ProducerEventError');
            }
            return {
              batchId: event.batchId,
              businessDate: event.businessDate,
              pages: 1,
              discovered: 2,
              published: 2,
              continued: false,
              stoppedAtPageLimit: false,
            };
          },
          invokeAsync: () => undefined,
        },
      ],
      [
        j.consumer,
        {
          spec: { name: j.consumer, arn: arn('lambda', `function:${j.consumer}`) },
          invoke: async () => null,
          invokeAsync: () => undefined,
        },
      ],
    ]),
  );
  // The Lambda API emulator over stub functions: the CLI's Invoke and event source mapping calls are the real protocol.
  const runtime = {
    get(nameOrArn: string) {
      const name = nameOrArn.replace(/^arn:.*:function:/, '');
      const fn = functions.get(name);
      if (!fn) throw new FunctionNotFoundError(nameOrArn);
      return fn;
    },
  } as unknown as LambdaRuntime;
  const servers: RunningServer[] = [];
  const lambda = await startLambdaApi({
    runtime,
    mappings: () => Object.values(jobs).flatMap((j) => [j.mapping, j.admissionMapping]),
    functionArn: (n) => arn('lambda', `function:${n}`),
  });
  servers.push(lambda);
  const schedulerApi = await startSchedulerApi(scheduler);
  servers.push(schedulerApi);

  const dir = mkdtempSync(join(tmpdir(), 'ops-test-'));
  const endpointsFile = join(dir, 'endpoints.json');
  const outputs: Record<string, string> = {
    [StackOutput.IdempotencyTableName]: tables.idempotency,
    [StackOutput.LedgerTableName]: tables.ledger,
    [StackOutput.LimiterTableName]: tables.limiter,
  };
  for (const j of Object.values(jobs)) {
    Object.assign(outputs, {
      [jobOutputName(j.name, 'QueueUrl')]: j.queueUrl,
      [jobOutputName(j.name, 'QueueArn')]: j.queueArn,
      [jobOutputName(j.name, 'DlqUrl')]: j.dlqUrl,
      [jobOutputName(j.name, 'DlqArn')]: j.dlqArn,
      [jobOutputName(j.name, 'ProducerFunctionName')]: j.producer,
      [jobOutputName(j.name, 'ConsumerFunctionName')]: j.consumer,
      [jobOutputName(j.name, 'ScheduleName')]: j.schedule,
      [jobOutputName(j.name, 'ScheduleGroupName')]: j.scheduleGroup,
      [jobOutputName(j.name, 'EventSourceMappingUuid')]: j.mapping.uuid,
      [jobOutputName(j.name, 'AdmissionQueueUrl')]: j.admissionQueueUrl,
      [jobOutputName(j.name, 'AdmissionQueueArn')]: j.admissionQueueArn,
      [jobOutputName(j.name, 'AdmissionMappingUuid')]: j.admissionMapping.uuid,
    });
  }
  // The shape local/run.ts writes (writeEndpoints), trimmed to what this stack has.
  const doc = {
    stackName: 'PacedJobs-test',
    region: REGION,
    accountId: ACCOUNT,
    credentials: CREDENTIALS,
    endpoints: {
      dynamodb: aws.dynamodb.endpoint,
      sqs: aws.sqs.endpoint,
      lambda: lambda.endpoint,
      scheduler: schedulerApi.endpoint,
    },
    tables: { IdempotencyTable: tables.idempotency, LedgerTable: tables.ledger },
    jobs: Object.fromEntries(
      Object.values(jobs).map((j) => [
        j.name,
        {
          producer: j.producer,
          consumer: j.consumer,
          queueUrl: j.queueUrl,
          queueArn: j.queueArn,
          dlqUrl: j.dlqUrl,
          dlqArn: j.dlqArn,
          schedule: j.schedule,
          eventSourceMapping: j.mapping.uuid,
          admissionQueueUrl: j.admissionQueueUrl,
          admissionMapping: j.admissionMapping.uuid,
        },
      ]),
    ),
    outputs,
  };
  writeFileSync(endpointsFile, JSON.stringify(doc, null, 2));

  const prompts: string[] = [];
  Object.assign(fixture, {
    aws,
    dir,
    endpointsFile,
    tables,
    jobs,
    endpointsDoc: doc,
    scheduler,
    sqs,
    dynamo,
    producerCalls,
    admissionDeliveries,
    prompts,
    async run(argv: string[], options: RunOptions = {}): Promise<CapturedRun> {
      let stdout = '';
      let stderr = '';
      const answers = [...(options.answers ?? [])];
      const io: OpsIo = {
        stdout: (t) => {
          stdout += t.endsWith('\n') ? t : `${t}\n`;
        },
        stderr: (t) => {
          stderr += t.endsWith('\n') ? t : `${t}\n`;
        },
        interactive: options.interactive ?? false,
        ask: async (q) => {
          prompts.push(q);
          return answers.shift() ?? '';
        },
        now: () => (options.now ? new Date(options.now) : new Date()),
        sleep: async () => undefined,
      };
      const code = await runOps([...argv, '--local', '--endpoints', options.endpointsFile ?? endpointsFile], { io });
      return { code, stdout, stderr, json: <T>() => JSON.parse(stdout) as T };
    },
    async depth(url: string) {
      const { Attributes: a = {} } = await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      );
      return {
        visible: Number(a.ApproximateNumberOfMessages),
        inFlight: Number(a.ApproximateNumberOfMessagesNotVisible),
      };
    },
    async stop() {
      await Promise.all(Object.values(jobs).flatMap((j) => [j.mapping.stop(), j.admissionMapping.stop()]));
      await scheduler.stop();
      await Promise.all(servers.map((s) => s.close()));
      sqs.destroy();
      ddb.destroy();
      await aws.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  });
  return fixture;
}
