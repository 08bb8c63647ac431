// End to end: the operator CLI against a real `npm start -- --serve` stack (the engine's test app, test/fixtures/app:
// its synthesized stack's bundled functions on embedded servers), each as its own process, talking only through AWS
// APIs and .local/endpoints.json; and the served stack as any AWS SDK client in another process uses it, until it stops
// cleanly on SIGINT. The ops commands run on record-writer (its effects are DynamoDB writes, one result per item); the
// future-date refusal on object-sweeper, whose apply deletes S3 objects: a run for a wrong date would destroy data.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { GetFunctionConfigurationCommand, InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { GetQueueAttributesCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBClient as RawDynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { ListEventSourceMappingsCommand } from '@aws-sdk/client-lambda';
import { ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { FutureBusinessDateError, latestBusinessDate } from '../../lambda/core/businessDate';
import type { JobRuntimeSettings } from '../../lambda/core/constants';
import { jobOutputName } from '../../lib/outputs';
import { holdsFor, waitFor } from '../../local/waitFor';
import { encodePageOperations, ledgerKeys } from '../../lambda/core/ledgerContract';
import { createClients, type OpsClients } from '../../ops/clients';
import type { CommandContext } from '../../ops/context';
import { status } from '../../ops/commands/status';
import { LocalEndpointsSource } from '../../ops/resources';
import { buildOperationId } from '../../lambda/core/operationIds';
// Types only: loading the jobs' modules (the job API, the SDK clients) would cost this file seconds for two strings.
import type { Item } from '../fixtures/app/jobs/record-writer/index';
import { OBJECT_SWEEPER, QUOTA_CALLER, RECORD_WRITER, TEST_APP, TEST_APP_ASSEMBLY } from '../support/testApp';

const ROOT = join(__dirname, '..', '..');
/** The job the ops commands run on: it discovers the items of a date and writes one result per item. */
const JOB = RECORD_WRITER;
const DATES = ['2026-10-01', '2026-10-02', '2026-10-03'];
const ITEMS_PER_DATE = 2;

/** record-writer's operation ID for an item (its index.ts `operationIdOf`). */
const operationIdOf = (itemId: string, businessDate: string): string =>
  buildOperationId([JOB, { label: 'item ID', id: itemId }, { businessDate }]);
/** Where object-sweeper finds a date's objects (its index.ts `duePrefix`). */
const duePrefix = (businessDate: string): string => `due/${businessDate}/`;

/** An item of `businessDate` for record-writer to discover (its table `items`). */
const item = (itemId: string, businessDate: string): Item => ({
  itemId,
  businessDate,
  dueAt: `${businessDate}T01:00:00.000Z`,
});

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a TypeScript entry point as its own Node process (tsx loaded by Node itself, so signals reach it directly). */
function node(entry: string, args: string[]): { child: ChildProcess; done: Promise<Result> } {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, entry), ...args], {
    cwd: ROOT,
    env: { ...process.env, FORCE_COLOR: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c) => (stdout += c));
  child.stderr!.on('data', (c) => (stderr += c));
  return { child, done: new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr }))) };
}

interface BatchRow {
  batchId: string;
  businessDate?: string;
  discovered: number;
  completed: number;
  completedElsewhere: number;
  duplicates: number;
  reconciles: boolean;
  admission?: string;
  step?: number;
  stalled: unknown;
}

describe('Command: npm run ops, against npm start -- --serve', () => {
  let dir: string;
  let serve: { child: ChildProcess; done: Promise<Result> };
  let endpointsFile: string;
  let doc: {
    region: string;
    credentials: { accessKeyId: string; secretAccessKey: string };
    endpoints: Record<string, string>;
    jobs: Record<
      string,
      { queueUrl: string; dlqUrl: string; dlqArn: string; consumer: string; eventSourceMapping: string }
    >;
    outputs: Record<string, string>;
  };
  let documents: DynamoDBDocumentClient;
  let sqs: SQSClient;
  /** record-writer's tables, by its alias (`items`, `results`), as its functions were given them. */
  let tables: Record<string, string>;
  /** `ops status` in this process, on the same endpoints file: for the waits' probes, a CLI process per probe costs seconds. */
  let ctx: CommandContext;
  let clients: OpsClients;

  /** One CLI run in its own process, against the serving stack; stdout must be exactly one JSON document. */
  const ops = async (...args: string[]) => {
    const result = await node('cli/ops.ts', [...args, '--local', '--endpoints', endpointsFile, '--json']).done;
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(result.stdout);
    } catch {
      throw new Error(
        `ops ${args.join(' ')} printed no single JSON document (exit ${result.code}):\n${result.stdout}\n${result.stderr}`,
      );
    }
    return { code: result.code, json, stderr: result.stderr };
  };

  const batches = async (): Promise<BatchRow[]> => {
    const { json } = await ops('status', '--job', JOB, '--batches', '20');
    return (json.jobs as { batches: BatchRow[] }[])[0].batches;
  };
  /** The rows `batches()` prints, read by the same command in this process (what a wait polls). */
  const batchesNow = async (): Promise<BatchRow[]> =>
    (await status(ctx, { job: JOB, batches: 20 })).jobs[0].batches as unknown as BatchRow[];

  const queued = async (url: string) => {
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    return (
      Number(Attributes!.ApproximateNumberOfMessages) +
      Number(Attributes!.ApproximateNumberOfMessagesNotVisible) +
      Number(Attributes!.ApproximateNumberOfMessagesDelayed)
    );
  };

  const message = (itemId: string, businessDate: string, batchId: string) =>
    JSON.stringify({
      version: 1,
      jobType: JOB,
      operationId: operationIdOf(itemId, businessDate),
      batchId,
      businessDate,
      resource: { itemId, dueAt: item(itemId, businessDate).dueAt },
      enqueuedAt: new Date().toISOString(),
    });

  /** A job's settings as its deployed producer has them (JOB_SETTINGS). */
  const deployedSettings = async (job: string): Promise<JobRuntimeSettings> => {
    const lambda = new LambdaClient({
      endpoint: doc.endpoints.lambda,
      region: doc.region,
      credentials: doc.credentials,
    });
    try {
      const deployed = await lambda.send(
        new GetFunctionConfigurationCommand({ FunctionName: doc.outputs[jobOutputName(job, 'ProducerFunctionName')] }),
      );
      return JSON.parse(deployed.Environment!.Variables!.JOB_SETTINGS) as JobRuntimeSettings;
    } finally {
      lambda.destroy();
    }
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'paced-jobs-ops-e2e-'));
    endpointsFile = join(dir, 'endpoints.json');
    // One execution environment a function: every run here is a few records (a second one starts when one is needed).
    serve = node('cli/start.ts', [
      '--app',
      TEST_APP,
      '--cdk-out',
      TEST_APP_ASSEMBLY,
      '--serve',
      '--prewarm',
      '1',
      '--local-dir',
      dir,
    ]);
    await waitFor('the serving stack to write its endpoints', () => existsSync(endpointsFile), {
      timeoutMs: 240_000,
      intervalMs: 100,
    });
    doc = JSON.parse(readFileSync(endpointsFile, 'utf8'));
    const config = (endpoint: string) => ({ endpoint, region: doc.region, credentials: doc.credentials });
    documents = DynamoDBDocumentClient.from(new DynamoDBClient(config(doc.endpoints.dynamodb)));
    sqs = new SQSClient(config(doc.endpoints.sqs));
    const resources = await new LocalEndpointsSource(endpointsFile).load();
    clients = createClients(resources.clients);
    ctx = {
      resources,
      clients,
      io: {
        stdout: () => undefined,
        stderr: () => undefined,
        interactive: false,
        ask: async () => '',
        now: () => new Date(),
        sleep: async () => undefined,
      },
    };
    tables = (await deployedSettings(JOB)).tables;
    for (const date of DATES) {
      for (let i = 1; i <= ITEMS_PER_DATE; i++) {
        await documents.send(new PutCommand({ TableName: tables.items, Item: item(`item-e2e-${date}-${i}`, date) }));
      }
    }
  }, 300_000);

  afterAll(async () => {
    documents?.destroy();
    sqs?.destroy();
    clients?.destroy();
    // Stopped by the last test; only a test that failed first leaves it running.
    if (serve && serve.child.exitCode === null) serve.child.kill('SIGINT');
    await serve?.done;
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves a stack the AWS SDK can use from another process: queues with their DLQs, tables, event source mappings', async () => {
    const config = (endpoint: string) => ({ endpoint, region: doc.region, credentials: doc.credentials });
    const job = doc.jobs[JOB];
    const attrs = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: job.queueUrl, AttributeNames: ['RedrivePolicy'] }),
    );
    expect(JSON.parse(attrs.Attributes!.RedrivePolicy!).deadLetterTargetArn).toBe(job.dlqArn);
    const ddb = new RawDynamoDBClient(config(doc.endpoints.dynamodb));
    const lambda = new LambdaClient(config(doc.endpoints.lambda));
    try {
      expect((await ddb.send(new ListTablesCommand({}))).TableNames).toContain(doc.outputs.LedgerTableName);
      const mappings = await lambda.send(new ListEventSourceMappingsCommand({ FunctionName: job.consumer }));
      expect(mappings.EventSourceMappings!.map((m) => m.UUID)).toEqual([job.eventSourceMapping]);
      expect(doc.outputs[jobOutputName(JOB, 'EventSourceMappingUuid')]).toBe(job.eventSourceMapping);
    } finally {
      ddb.destroy();
      lambda.destroy();
    }
  });

  it('reports every job in status, with its admission queue', async () => {
    const { code, json } = await ops('status');
    expect(code).toBe(0);
    const jobs = json.jobs as { job: string; admissionQueue: { url: string; visible: number; delayed: number } }[];
    // Every job the served stack has: the test app's three.
    expect(jobs.map((j) => j.job).sort()).toEqual(Object.keys(doc.jobs).sort());
    expect(jobs.map((j) => j.job).sort()).toEqual([OBJECT_SWEEPER, QUOTA_CALLER, RECORD_WRITER]);
    expect(jobs.find((j) => j.job === JOB)!.admissionQueue).toMatchObject({
      url: doc.outputs[jobOutputName(JOB, 'AdmissionQueueUrl')],
      visible: expect.any(Number),
      delayed: expect.any(Number),
    });
  });

  it('pauses admission, catches up three dates while nothing is consumed, and resumes into three reconciled batches', async () => {
    const paused = await ops('pause', '--job', JOB, '--yes');
    expect(paused.code).toBe(0);
    // Upstream first: the schedule, then the producer's admission mapping, then the consumer's mapping.
    expect((paused.json.steps as { kind: string; desired: string }[]).map((s) => [s.kind, s.desired])).toEqual([
      ['schedule', 'DISABLED'],
      ['admission-mapping', 'Disabled'],
      ['event-source-mapping', 'Disabled'],
    ]);

    const caughtUp = await ops('catch-up', '--job', JOB, '--from', DATES[0], '--to', DATES[2], '--yes');
    expect(caughtUp.code).toBe(0);
    // The producer published every item; the paused consumer took none of them. The wait is the claim: a running
    // consumer would have taken them within it.
    const published = DATES.length * ITEMS_PER_DATE;
    await waitFor(
      'the caught-up items on the work queue',
      async () => (await queued(doc.jobs[JOB].queueUrl)) === published,
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    await holdsFor(
      'the paused consumer to leave every item queued',
      async () => (await queued(doc.jobs[JOB].queueUrl)) === published,
      { forMs: 3000, intervalMs: 250 },
    );
    expect(await queued(doc.jobs[JOB].queueUrl)).toBe(published);
    const whilePaused = (await batches()).filter((b) => DATES.includes(b.businessDate ?? ''));
    expect(whilePaused.map((b) => [b.businessDate, b.discovered, b.completed])).toEqual(
      [...DATES].reverse().map((d) => [d, ITEMS_PER_DATE, 0]),
    );
    // Two items fit in one admission step: each run's admission is complete, and there is no step to continue.
    expect(whilePaused.map((b) => [b.admission, b.stalled])).toEqual(DATES.map(() => ['complete', null]));
    const refused = await ops('continue', '--job', JOB, '--batch', whilePaused[0].batchId, '--yes');
    expect(refused.code).toBe(1);
    expect(refused.json.error).toMatchObject({
      name: 'BatchStateError',
      message: `batch ${whilePaused[0].batchId} of ${JOB} is not admitting: its admission is complete; everything of the run is admitted, so there is no step to continue`,
    });

    const resumed = await ops('resume', '--job', JOB, '--yes');
    expect(resumed.code).toBe(0);
    expect((resumed.json.steps as { kind: string }[]).map((s) => s.kind)).toEqual([
      'event-source-mapping',
      'admission-mapping',
      'schedule',
    ]);
    const settled = await waitFor(
      'the three catch-up batches to reconcile',
      async () => {
        const rows = (await batchesNow()).filter((b) => DATES.includes(b.businessDate ?? ''));
        return rows.length === DATES.length && rows.every((b) => b.reconciles && b.completed === ITEMS_PER_DATE)
          ? rows
          : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(new Set(settled.map((b) => b.batchId)).size).toBe(DATES.length);
    // What the CLI itself prints, once the wait is over.
    const shown = (await batches()).filter((b) => DATES.includes(b.businessDate ?? ''));
    expect(shown.map((b) => [b.batchId, b.reconciles, b.completed])).toEqual(
      settled.map((b) => [b.batchId, true, ITEMS_PER_DATE]),
    );
    expect(await queued(doc.jobs[JOB].queueUrl)).toBe(0);
  }, 180_000);

  it('redrives the DLQ back to the queue, applying a new operation once and suppressing one already applied', async () => {
    const batchId = `${JOB}:2026-10-04:redrive-e2e`;
    await documents.send(new PutCommand({ TableName: tables.items, Item: item('item-e2e-redrive', '2026-10-04') }));
    const dlq = doc.jobs[JOB].dlqUrl;
    // The run these two dead letters came from, as its producer left it in the ledger. One of its operations was
    // completed by another batch (the DATES[0] run) while its copy sat in the DLQ.
    const ledgerTable = doc.outputs.LedgerTableName;
    await documents.send(
      new PutCommand({
        TableName: ledgerTable,
        Item: {
          pk: `BATCH#${JOB}`,
          sk: batchId,
          job: JOB,
          businessDate: '2026-10-04',
          startedAt: '2026-10-04T02:00:00.000Z',
          finishedAt: '2026-10-04T02:00:01.000Z',
          discovered: 2,
          published: 2,
          admission: 'complete',
        },
      }),
    );
    const redriven = [
      operationIdOf('item-e2e-redrive', '2026-10-04'),
      operationIdOf(`item-e2e-${DATES[0]}-1`, DATES[0]),
    ];
    await documents.send(
      new PutCommand({
        TableName: ledgerTable,
        Item: { ...ledgerKeys.page(JOB, batchId, 1, 'step-0'), count: 2, operations: encodePageOperations(redriven) },
      }),
    );
    await sqs.send(
      new SendMessageCommand({ QueueUrl: dlq, MessageBody: message('item-e2e-redrive', '2026-10-04', batchId) }),
    );
    await sqs.send(
      new SendMessageCommand({ QueueUrl: dlq, MessageBody: message(`item-e2e-${DATES[0]}-1`, DATES[0], batchId) }),
    );

    const started = await ops('redrive', '--job', JOB, '--rate', '5', '--yes');
    expect(started.code).toBe(0);
    const ledger = await waitFor(
      'the redriven batch to settle',
      async () => {
        const row = (await batchesNow()).find((b) => b.batchId === batchId);
        return row && row.completed + row.completedElsewhere + row.duplicates === 2 ? row : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect((await batches()).find((b) => b.batchId === batchId)).toMatchObject({
      completed: 1,
      completedElsewhere: 1,
      duplicates: 0,
      reconciles: true,
    });
    // The new operation completed here; the other is this batch's completed elsewhere, not a duplicate.
    expect(ledger).toMatchObject({ completed: 1, completedElsewhere: 1, duplicates: 0, reconciles: true });
    // And the date's audit, after the redrive, is exact: one completed by this batch, one by another.
    const audited = await ops('audit', '--job', JOB, '--date', '2026-10-04');
    expect(audited.json).toMatchObject({
      exact: true,
      missing: [],
      discovered: 2,
      completed: 2,
      deadLettered: 0,
      open: { inFlight: 0, waiting: 0 },
    });
    // The new operation's one effect: its result, written by that operation.
    const result = await documents.send(
      new GetCommand({ TableName: tables.results, Key: { itemId: 'item-e2e-redrive' }, ConsistentRead: true }),
    );
    expect(result.Item).toEqual({
      itemId: 'item-e2e-redrive',
      operationId: operationIdOf('item-e2e-redrive', '2026-10-04'),
      dueAt: item('item-e2e-redrive', '2026-10-04').dueAt,
    });
    expect(await queued(dlq)).toBe(0);
  }, 120_000);

  it("peeks at the DLQ with each message's failure reason, warning that viewing is a receive", async () => {
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: doc.jobs[JOB].dlqUrl,
        MessageBody: message('item-e2e-peek', '2026-10-05', `${JOB}:2026-10-05:peek-e2e`),
        MessageAttributes: {
          failureReason: { DataType: 'String', StringValue: 'provider answered 404: no such item' },
        },
      }),
    );
    const { code, json } = await ops('dlq', 'peek', '--job', JOB);
    expect(code).toBe(0);
    expect(json.warning).toEqual(expect.stringContaining('receive'));
    const messages = (json.jobs as { messages: { failureReason?: string; operationId?: string }[] }[])[0].messages;
    expect(messages.map((m) => m.failureReason)).toEqual(['provider answered 404: no such item']);
  });

  it("shows one operation's idempotency record and ledger batches", async () => {
    const operationId = operationIdOf(`item-e2e-${DATES[1]}-2`, DATES[1]);
    const { code, json } = await ops('op', operationId);
    expect(code).toBe(0);
    expect(json.found).toBe(true);
    const view = (
      json.jobs as { job: string; idempotencyRecord: { status: string } | null; batches: BatchRow[] }[]
    ).find((j) => j.job === JOB)!;
    expect(view.idempotencyRecord).toMatchObject({ status: 'COMPLETED' });
    expect(view.batches.some((b) => b.businessDate === DATES[1] && b.reconciles)).toBe(true);
  });

  it('refuses a business date a year ahead at the CLI, the producer and the queue, and deletes no object (#33)', async () => {
    // object-sweeper deletes the objects under due/<business date>/: a run for a wrong date destroys what is there.
    const SWEEPER = OBJECT_SWEEPER;
    // A typo of the year: every one of these objects is due a year from now, not today.
    const FUTURE = new Date(Date.now() + 366 * 86_400_000).toISOString().slice(0, 10);
    const config = { endpoint: doc.endpoints.lambda, region: doc.region, credentials: doc.credentials };
    const lambda = new LambdaClient(config);
    const s3 = new S3Client({
      endpoint: doc.endpoints.s3,
      region: doc.region,
      credentials: doc.credentials,
      forcePathStyle: true,
    });
    const producer = doc.outputs[jobOutputName(SWEEPER, 'ProducerFunctionName')];
    const settings = await deployedSettings(SWEEPER);
    const bucket = settings.buckets.objects;
    // The refusal names the latest date at the moment of the call; a test running across midnight sees either.
    const refusals = () => {
      const before = latestBusinessDate(settings, new Date(Date.now() - 60_000));
      const after = latestBusinessDate(settings, new Date(Date.now() + 60_000));
      return [...new Set([before, after])].map(
        (latest) => new FutureBusinessDateError(SWEEPER, FUTURE, latest, settings).message,
      );
    };
    const objectKeys = Array.from({ length: 6 }, (_, i) => `${duePrefix(FUTURE)}object-future-${i}`);
    for (const Key of objectKeys) await s3.send(new PutObjectCommand({ Bucket: bucket, Key, Body: Key }));
    const remaining = async () => {
      const { Contents = [] } = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: duePrefix(FUTURE) }));
      return Contents.map((o) => String(o.Key)).sort();
    };

    try {
      // The CLI: refused before the producer is invoked.
      const caughtUp = await ops('catch-up', '--job', SWEEPER, '--from', FUTURE, '--to', FUTURE, '--yes');
      expect(caughtUp.code).toBe(2);
      expect(caughtUp.json.error).toMatchObject({ name: 'UsageError', message: expect.any(String) });
      expect(refusals()).toContain((caughtUp.json.error as { message: string }).message);

      // The producer, invoked directly as a catch-up would: it throws, naming the date, and admits nothing.
      const invoked = await lambda.send(
        new InvokeCommand({
          FunctionName: producer,
          Payload: Buffer.from(
            JSON.stringify({ businessDate: FUTURE, batchId: `${SWEEPER}:${FUTURE}:manual-e2e`, backfill: true }),
          ),
        }),
      );
      expect(invoked.FunctionError).toBeDefined();
      const failure = JSON.parse(Buffer.from(invoked.Payload!).toString('utf8')) as {
        errorType: string;
        errorMessage: string;
      };
      expect(failure.errorType).toBe('FutureBusinessDateError');
      // The local runtime prefixes the function and the error's name, as it words every function error.
      expect(refusals().map((r) => `${producer}: FutureBusinessDateError: ${r}`)).toContain(failure.errorMessage);
      const { Item: run } = await documents.send(
        new GetCommand({
          TableName: doc.outputs.LedgerTableName,
          Key: { pk: ledgerKeys.batchPartition(SWEEPER), sk: `${SWEEPER}:${FUTURE}:manual-e2e` },
        }),
      );
      expect(run).toBeUndefined();

      // A raw message on the job's queue: the consumer rejects it, records why, and never applies it.
      const sent = await sqs.send(
        new SendMessageCommand({
          QueueUrl: doc.jobs[SWEEPER].queueUrl,
          MessageBody: JSON.stringify({
            version: 1,
            jobType: SWEEPER,
            operationId: `${SWEEPER}:object-future-0:${FUTURE}`,
            batchId: `${SWEEPER}:${FUTURE}:raw-e2e`,
            businessDate: FUTURE,
            resource: { objectKey: objectKeys[0] },
            enqueuedAt: new Date().toISOString(),
          }),
        }),
      );
      const rejection = await waitFor(
        'the consumer to record the rejection of the raw message',
        async () => {
          const { Items = [] } = await documents.send(
            new QueryCommand({
              TableName: doc.outputs.LedgerTableName,
              KeyConditionExpression: 'pk = :pk',
              ExpressionAttributeValues: { ':pk': ledgerKeys.rejectionPartition(SWEEPER) },
            }),
          );
          return Items.find((i) => i.messageId === sent.MessageId);
        },
        { timeoutMs: 60_000, intervalMs: 500 },
      );
      expect(refusals().map((r) => [`businessDate: ${r}`])).toContainEqual(rejection.reasons);
      expect(await queued(doc.jobs[SWEEPER].dlqUrl)).toBe(0);
      expect(await remaining()).toEqual(objectKeys);
    } finally {
      lambda.destroy();
      s3.destroy();
    }
  }, 180_000);

  it('audits a settled business date exactly from the ledger and the idempotency records, and refuses a date with no batch', async () => {
    const { code, json } = await ops('audit', '--job', JOB, '--date', DATES[1], '--operations');
    expect(code).toBe(0);
    expect(json).toMatchObject({
      exact: true,
      missing: [],
      discovered: ITEMS_PER_DATE,
      completed: ITEMS_PER_DATE,
      rejected: 0,
      deadLettered: 0,
      open: { inFlight: 0, waiting: 0 },
      operations: [],
    });
    expect((json.batches as { exact: boolean }[]).every((b) => b.exact)).toBe(true);
    const none = await ops('audit', '--job', JOB, '--date', '2020-01-01');
    expect(none.code).toBe(1);
    expect(JSON.stringify(none.json)).toContain(`no batch of ${JOB} for business date 2020-01-01`);
  });

  // Last: it ends the served stack.
  it('stops cleanly on SIGINT', async () => {
    serve.child.kill('SIGINT');
    const result = await serve.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('stopping');
  }, 60_000);
});
