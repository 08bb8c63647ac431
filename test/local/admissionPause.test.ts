// Pause during admission, on the engine's synthesized test app run locally (test/support/testApp.ts), its quota-caller
// job: the operator's pause (schedule, then the producer's admission mapping, then the consumer's) admits nothing more
// and loses nothing; resume goes on from the ledger's cursor.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { LambdaClient, UpdateEventSourceMappingCommand } from '@aws-sdk/client-lambda';
import { GetScheduleCommand, SchedulerClient, UpdateScheduleCommand } from '@aws-sdk/client-scheduler';
import { jobOutputName } from '../../lib/outputs';
import { loadTemplate } from '../../local/template';
import { LocalStack } from '../../local/stack';
import { holdsFor, waitUntil } from '../../local/waitFor';
import { FakeHttpApi, tally } from '../../local/fixture';
import { batchFigures } from '../../local/ledgerFigures';
import { jobViews, previewPlan, type JobView } from '../../local/jobs';
import { CALLS_API, fixture as callsFixture } from '../fixtures/app/jobs/quota-caller/local';
import type { SeededDemo } from '../../local/fixture';
import type { JobRuntimeSettings } from '../../lambda/core/constants';
import { QUOTA_CALLER, testAppStack } from '../support/testApp';

const JOB = QUOTA_CALLER;
const CALLS = 90;
const BUSINESS_DATE = '2026-03-10';

/** The run-ledger attributes this test reads (see the admission contract). */
interface LedgerItem {
  sk: string;
  step: number;
  admission: string;
  cursor?: string;
  pages: number;
  discovered?: number;
  published?: number;
  completed?: number;
  duplicates?: number;
  nextStepAt?: string;
}

/** Bounded, so a producer that never resumes fails the test instead of hanging it. */
const POLL = { timeoutMs: 60_000, intervalMs: 200 };

describe('Admission: pause and resume during a run (local test app)', () => {
  let stack: LocalStack;
  let api: FakeHttpApi;
  let documents: DynamoDBDocumentClient;
  let lambda: LambdaClient;
  let scheduler: SchedulerClient;
  let job: JobView;
  const logs: string[] = [];
  /** Every message the producer put on the work queue (read off the wire): call IDs, in order. */
  const producerPublications: { at: number; callId: string }[] = [];
  let workQueueUrl = '';

  beforeAll(async () => {
    const artifact = testAppStack();
    const template = loadTemplate(artifact.templateFile);
    // The job consumer's event source waits at most 1 s to fill a batch, not the synthesized 5 s: at 10 starts a second
    // a group of 10 is a batch's worth, and a tail waiting 5 s for more would only make the run longer.
    const consumer = jobViews(previewPlan(template, artifact.stackName)).get(JOB)?.consumer?.logicalId;
    const mapping = Object.values(template.Resources).find(
      (r) =>
        r.Type === 'AWS::Lambda::EventSourceMapping' &&
        (r.Properties?.FunctionName as { Ref?: string } | undefined)?.Ref === consumer,
    );
    if (!consumer || !mapping?.Properties)
      throw new Error(`the test app has no event source mapping for the ${JOB} consumer`);
    mapping.Properties.MaximumBatchingWindowInSeconds = 1;
    // The job's fake API with a quota above the job's rate: the API is not the subject here, so it should not throttle.
    api = new FakeHttpApi(CALLS_API, { startsPerWindow: 20, windowSeconds: 1, maxConcurrent: 10 });
    await api.start();
    stack = new LocalStack({
      template,
      stackName: artifact.stackName,
      assemblyDir: artifact.assemblyDir,
      log: (source, line) => {
        logs.push(`${source}: ${line}`);
        if (logs.length > 400) logs.shift();
      },
      onRequest: (service, r) => {
        if (
          service !== 'sqs' ||
          r.status >= 300 ||
          !String(r.headers['x-amz-target'] ?? '').endsWith('.SendMessageBatch')
        )
          return;
        const request = JSON.parse(r.body) as { QueueUrl?: string; Entries?: { MessageBody: string }[] };
        if (request.QueueUrl !== workQueueUrl) return;
        for (const entry of request.Entries ?? []) {
          const body = JSON.parse(entry.MessageBody) as { attempt?: number; resource: { callId: string } };
          // The consumer's deferral re-publishes always carry `attempt`; the producer's first publication never does.
          if (body.attempt === undefined) producerPublications.push({ at: Date.now(), callId: body.resource.callId });
        }
      },
      environmentOverride: (_fn, env) => {
        if (!env.JOB_SETTINGS) return env;
        const settings = JSON.parse(env.JOB_SETTINGS) as JobRuntimeSettings;
        if (settings.jobName !== JOB) return env;
        // Seconds instead of minutes: 10 starts/s, 3 s of work per step, so 90 calls take three steps ~5 s apart. The
        // rate keeps the deployed 60-s window: it decides how late a record may wake for its slot before it is deferred
        // (125 ms; a 1-s window leaves 10 ms, which a loaded machine's timers overshoot, deferring records by seconds).
        settings.rateLimit = { startsPerInterval: 600, intervalSeconds: 60, burst: 1 };
        settings.admission = { horizonSeconds: 3, batchSize: 10 };
        settings.settings.apiBaseUrl = api.endpoint;
        return { ...env, JOB_SETTINGS: JSON.stringify(settings) };
      },
    });
    await stack.start();
    const found = jobViews(stack.plan, stack.mappings).get(JOB);
    if (
      !found?.producer ||
      !found.consumer ||
      !found.mapping ||
      !found.admissionMapping ||
      !found.admissionQueueUrl ||
      !found.queueUrl ||
      !found.dlqUrl ||
      !found.scheduleName
    ) {
      throw new Error(
        `the test app has no complete ${JOB} job (schedule, producer, admission queue and mapping, queue, DLQ, consumer)`,
      );
    }
    job = found;
    workQueueUrl = found.queueUrl;
    for (const alias of Object.values(job.settings.secrets)) {
      const secret = stack.secrets.find(alias);
      if (secret) api.allowSecret(secret.value);
    }
    documents = DynamoDBDocumentClient.from(new DynamoDBClient(stack.clientConfig('dynamodb')));
    lambda = new LambdaClient(stack.clientConfig('lambda'));
    scheduler = new SchedulerClient(stack.clientConfig('scheduler'));
    await stack.runtime.prewarm(
      new Map([
        [found.producer.name, 1],
        [found.consumer.name, 2],
      ]),
    );
  }, 90_000);

  afterAll(async () => {
    documents?.destroy();
    lambda?.destroy();
    scheduler?.destroy();
    await stack?.stop();
    await api?.close();
  });

  const ledgerTable = () => job.producer!.environment.LEDGER_TABLE_NAME;

  /** The job's only batch in the ledger (the stack is fresh), or undefined before the producer has created it. */
  const batch = async (): Promise<LedgerItem | undefined> => {
    const out = await documents.send(
      new QueryCommand({
        TableName: ledgerTable(),
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': `BATCH#${JOB}` },
        ConsistentRead: true,
      }),
    );
    const items = (out.Items ?? []) as LedgerItem[];
    if (items.length > 1)
      throw new Error(`expected one ${JOB} batch in ${ledgerTable()}, found ${items.map((i) => i.sk).join(', ')}`);
    if (items[0] === undefined) return undefined;
    // The consumers' counts live in their invocation items: the batch as the operator CLI resolves it.
    const figures = await batchFigures(
      documents,
      { ledger: ledgerTable(), idempotency: job.consumer!.environment.IDEMPOTENCY_TABLE_NAME },
      JOB,
      items[0] as unknown as Record<string, unknown>,
    );
    return { ...items[0], ...figures };
  };

  const depth = async (url: string) => {
    const { Attributes: a } = await stack.sqs().send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    return {
      visible: Number(a!.ApproximateNumberOfMessages),
      inFlight: Number(a!.ApproximateNumberOfMessagesNotVisible),
      delayed: Number(a!.ApproximateNumberOfMessagesDelayed),
    };
  };
  const total = (d: { visible: number; inFlight: number; delayed: number }) => d.visible + d.inFlight + d.delayed;

  /**
   * UpdateSchedule replaces the whole definition: send back what GetSchedule returned, with the new state (as `ops` does),
   * in the group the stack's output names (the schedule is not in `default`).
   */
  const setSchedule = async (state: 'ENABLED' | 'DISABLED') => {
    const group = stack.plan.outputs[jobOutputName(JOB, 'ScheduleGroupName')];
    const current = await scheduler.send(new GetScheduleCommand({ Name: job.scheduleName, GroupName: group }));
    await scheduler.send(
      new UpdateScheduleCommand({
        Name: current.Name,
        GroupName: group,
        ScheduleExpression: current.ScheduleExpression,
        ScheduleExpressionTimezone: current.ScheduleExpressionTimezone,
        Target: current.Target,
        FlexibleTimeWindow: current.FlexibleTimeWindow ?? { Mode: 'OFF' },
        State: state,
      }),
    );
  };
  // The local Lambda API answers a disable only once the mapping's pollers have stopped and its invocations finished.
  const setMapping = (uuid: string, enabled: boolean) =>
    lambda.send(new UpdateEventSourceMappingCommand({ UUID: uuid, Enabled: enabled }));

  it('admits nothing while paused, keeps the next step queued, and resumes from the cursor to exactly-once effects', async () => {
    const dynamodb = new DynamoDBClient(stack.clientConfig('dynamodb'));
    const s3 = new S3Client(stack.clientConfig('s3'));
    let seeded: SeededDemo;
    try {
      seeded = await callsFixture.seed(
        {
          jobName: JOB,
          settings: job.settings,
          businessDate: BUSINESS_DATE,
          dynamodb,
          documents: DynamoDBDocumentClient.from(dynamodb),
          s3,
        },
        CALLS,
      );
    } finally {
      dynamodb.destroy();
      s3.destroy();
    }
    expect(seeded.expectedOperations).toHaveLength(CALLS);

    job.mapping!.start();
    job.admissionMapping!.start();
    const fired = await stack.scheduler.fire(job.scheduleName!, {
      scheduledTime: new Date(),
      businessDate: BUSINESS_DATE,
    });
    expect(fired.delivered).toBe(true);

    // Mid-admission: at least step 0 taken, the run still admitting, part of the backlog still in the calls table.
    await waitUntil<LedgerItem>(
      'the run to be admitting after its first step',
      async () => {
        const item = await batch();
        return item && item.step >= 1 && item.admission === 'admitting' && (item.discovered ?? 0) < CALLS
          ? { done: item }
          : { last: item };
      },
      POLL,
    );

    // Pause, upstream first, as `ops pause` does.
    await setSchedule('DISABLED');
    await setMapping(job.admissionMapping!.uuid, false);
    await setMapping(job.mapping!.uuid, false);
    expect(stack.scheduler.list().find((s) => s.schedule.name === job.scheduleName)!.state).toBe('DISABLED');
    expect([job.admissionMapping!.state, job.mapping!.state]).toEqual(['Disabled', 'Disabled']);

    // Read after the mappings have stopped: a step in progress at the pause has committed by now.
    const atPause = (await batch())!;
    expect(atPause.admission).toBe('admitting');
    expect(atPause.discovered).toBeLessThan(CALLS);
    expect(atPause.cursor).toEqual(expect.any(String));
    const publishedAtPause = producerPublications.length;
    const producerInvocationsAtPause = job.admissionMapping!.statistics.invocations;
    expect(publishedAtPause).toBe(atPause.discovered);

    // Well past the moment the next step was due, nothing more is published and the producer is not invoked: the wait
    // is the claim, checked all along.
    const dueMs = Date.parse(atPause.nextStepAt!);
    expect(Number.isFinite(dueMs)).toBe(true);
    await holdsFor(
      'the paused run to admit nothing',
      () =>
        producerPublications.length === publishedAtPause &&
        job.admissionMapping!.statistics.invocations === producerInvocationsAtPause,
      { forMs: Math.min(20_000, Math.max(0, dueMs - Date.now()) + 4_000), intervalMs: 200 },
    );
    const whilePaused = (await batch())!;
    expect({
      step: whilePaused.step,
      pages: whilePaused.pages,
      discovered: whilePaused.discovered,
      published: whilePaused.published,
      cursor: whilePaused.cursor,
    }).toEqual({
      step: atPause.step,
      pages: atPause.pages,
      discovered: atPause.discovered,
      published: atPause.published,
      cursor: atPause.cursor,
    });
    expect(producerPublications.length).toBe(publishedAtPause);
    expect(job.admissionMapping!.statistics.invocations).toBe(producerInvocationsAtPause);
    // Nothing lost: the run's next step still waits in the admission queue (not received, not dead-lettered) ...
    const admissionQueue = await depth(job.admissionQueueUrl!);
    expect({ waiting: admissionQueue.visible + admissionQueue.delayed, inFlight: admissionQueue.inFlight }).toEqual({
      waiting: 1,
      inFlight: 0,
    });
    // ... and every admitted call is either done or still on the work queue.
    const workQueue = await depth(job.queueUrl!);
    expect(total(workQueue) + (whilePaused.completed ?? 0)).toBe(whilePaused.discovered);

    // Resume, downstream first, as `ops resume` does.
    await setMapping(job.mapping!.uuid, true);
    await setMapping(job.admissionMapping!.uuid, true);
    await setSchedule('ENABLED');

    const final = await waitUntil<LedgerItem>(
      'the run to complete with every call applied',
      async () => {
        const item = await batch();
        const effects = tally(api.effects.map((e) => e.operationKey));
        if (
          item?.admission === 'complete' &&
          (item.completed ?? 0) >= CALLS &&
          effects.size >= CALLS &&
          total(await depth(job.queueUrl!)) === 0
        )
          return { done: item };
        return { last: { item, effects: effects.size } };
      },
      POLL,
    );

    // The producer went on from the cursor: every call published once, the pages after the pause new ones.
    expect({
      admission: final.admission,
      discovered: final.discovered,
      published: final.published,
      completed: final.completed,
      duplicates: final.duplicates ?? 0,
    }).toEqual({
      admission: 'complete',
      discovered: CALLS,
      published: CALLS,
      completed: CALLS,
      duplicates: 0,
    });
    expect(final.pages).toBeGreaterThan(atPause.pages);
    const publishedIds = producerPublications.map((p) => p.callId);
    expect(publishedIds).toHaveLength(CALLS);
    expect(new Set(publishedIds).size).toBe(CALLS);
    const beforePause = new Set(publishedIds.slice(0, publishedAtPause));
    expect(publishedIds.slice(publishedAtPause).filter((id) => beforePause.has(id))).toEqual([]);

    // Exactly one API effect per seeded call, and nothing dead-lettered anywhere.
    const effects = tally(api.effects.map((e) => e.operationKey));
    expect([...effects.keys()].sort()).toEqual([...seeded.expectedOperations].sort());
    expect([...effects.values()].filter((n) => n !== 1)).toEqual([]);
    const producerDlqArn = stack.plan.queues.find((q) => q.url === job.admissionQueueUrl)!.deadLetterTargetArn!;
    expect({
      jobDlq: total(await depth(job.dlqUrl!)),
      producerDlq: total(await depth(stack.queueUrl(producerDlqArn))),
      admissionQueue: total(await depth(job.admissionQueueUrl!)),
    }).toEqual({
      jobDlq: 0,
      producerDlq: 0,
      admissionQueue: 0,
    });
  }, 120_000);
});
