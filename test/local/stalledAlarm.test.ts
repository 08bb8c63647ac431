// The stalled alarm's logic on a local run of the engine's synthesized test app (test/support/testApp.ts): the
// template's own stalled alarm of its quota-caller job, evaluated by the local evaluator (local/alarms.ts) over what
// the run really emitted (the consumer's EMF metrics off its log lines, the work queue's depth sampled from the local
// SQS server). A paused consumer with waiting work is stalled; a paced backlog that drains over several periods is not.
//
// Time is scaled, and so is the alarm (scaleAlarm): its 1-minute periods become 2 s (30 times faster) and its
// evaluation periods (alarms.stalledMinutes, 15 of 15) become 3 of 3, so the paused consumer alarms after 6 s, not
// 15 minutes; its expression, threshold, comparison and missing-data rule are the template's own. The job is scaled so
// that a period sees several batches settle, as at its real rate (80 starts a minute in batches of 10 settle 8
// batches per 1-minute period): here 10 starts a second in batches of 5 (the consumer mapping's BatchSize and
// admission.batchSize) settle 4 batches per 2-s period, 20 calls. Traffic stays small: 10 paused calls, then a
// backlog of 120 (6 periods).
import { LambdaClient, UpdateEventSourceMappingCommand } from '@aws-sdk/client-lambda';
import { alarmName, JobAlarm } from '../../lib/monitoring';
import {
  AlarmState,
  evaluateAlarm,
  planResolveContext,
  readAlarm,
  scaleAlarm,
  type AlarmDefinition,
  type PeriodEvaluation,
} from '../../local/alarms';
import { jobViews, previewPlan } from '../../local/jobs';
import { MetricRecorder } from '../../local/metricSamples';
import type { MetricSample } from '../../local/metricsTap';
import type { LocalSession, SessionJob } from '../../local/session';
import type { CloudFormationTemplate } from '../../local/template';
import { waitFor, waitUntil } from '../../local/waitFor';
import { openTestAppSession, QUOTA_CALLER } from '../support/testApp';

const JOB = QUOTA_CALLER;
const PERIOD_SECONDS = 2;
const EVALUATION_PERIODS = 3;
/**
 * 10 starts a second, over the job's own 60-s window: the window decides the limiter's safety margin and so
 * how late a record may wake for its slot before it is deferred (125 ms, as deployed). A 1-s window would leave the
 * 20-ms floor's 10 ms, which a loaded machine's timers overshoot often enough that deferrals (not scaled: seconds,
 * with a spread that doubles per deferral) leave whole 2-s periods without a settle.
 */
const RATE = { startsPerInterval: 600, intervalSeconds: 60 };
const STARTS_PER_SECOND = RATE.startsPerInterval / RATE.intervalSeconds;
const BATCH_SIZE = 5;
/** A batch's slots (0.4 s at 10 a second) plus 1.75 s of slack, not scaled, for what takes real time (polls, an invocation). */
const SHORT_WAIT_MS = Math.round(((BATCH_SIZE - 1) / STARTS_PER_SECOND) * 1000 + 1750);
/**
 * The fake API's quota keeps the config's headroom over the pacing (the job paces at 80 of the API's 100 starts a
 * minute): 12.5 a second, as 750 a minute, over the pacing's own window.
 */
const API_QUOTA = { startsPerWindow: 750, windowSeconds: 60 };
const PAUSED_CALLS = 10;
/** Six periods' allowance (20 a period): larger than one period's, so it drains over several. */
const BACKLOG = 120;
/** Function log lines reach the recorder a little after they are written: a period is read once this much past its end. */
const LOG_LAG_MS = 300;
const PERIOD_MS = PERIOD_SECONDS * 1000;
/** The end of the (clock-aligned) alarm period that `ms` falls in. */
const periodEnd = (ms: number) => (Math.floor(ms / PERIOD_MS) + 1) * PERIOD_MS;
const SETTLED_IDS = ['applied', 'done', 'dead', 'rejected'] as const;

/**
 * The job consumer's event source batches BATCH_SIZE messages (the stack's mapping, as deployed here), waiting at most
 * 1 s to fill a batch (a batch of 5 needs no window; the synthesized 5 s would be two and a half periods).
 */
function scaleConsumerBatch(template: CloudFormationTemplate): CloudFormationTemplate {
  const consumer = jobViews(previewPlan(template, 'preview')).get(JOB)?.consumer?.logicalId;
  const mapping = Object.values(template.Resources).find(
    (r) =>
      r.Type === 'AWS::Lambda::EventSourceMapping' &&
      (r.Properties?.FunctionName as { Ref?: string } | undefined)?.Ref === consumer,
  );
  if (!consumer || !mapping?.Properties)
    throw new Error(`the test app has no event source mapping for the ${JOB} consumer`);
  mapping.Properties.BatchSize = BATCH_SIZE;
  mapping.Properties.MaximumBatchingWindowInSeconds = 1;
  // A record that fails once (the local SQS can hand one message to two receives) comes back in seconds rather than
  // after the deployed 6 minutes, so the run settles within the test's bound either way.
  const queueId = ((mapping.Properties.EventSourceArn as { 'Fn::GetAtt'?: string[] })['Fn::GetAtt'] ?? [])[0];
  const queue = queueId ? template.Resources[queueId] : undefined;
  const fn = template.Resources[consumer];
  if (!queue?.Properties || !fn.Properties) throw new Error(`the test app's ${JOB} mapping names no queue it has`);
  fn.Properties.Timeout = 12;
  queue.Properties.VisibilityTimeout = 15;
  return template;
}

const waiting = (p: PeriodEvaluation) => (p.values.visible ?? 0) + (p.values.delayed ?? 0);
const settled = (p: PeriodEvaluation) => SETTLED_IDS.reduce((sum, id) => sum + (p.values[id] ?? 0), 0);
/** One line per period, for the failure messages: what the alarm saw and decided. */
const table = (periods: PeriodEvaluation[], from: number) =>
  periods.map(
    (p) =>
      `+${((p.startMs - from) / 1000).toFixed(1)}s waiting=${waiting(p)} settled=${settled(p)} value=${p.value} ${p.state}`,
  );

describe('Alarm: stalled, on a local run of the quota-caller job (periods scaled to 2 s, 3 of 3)', () => {
  let session: LocalSession;
  let job: SessionJob;
  let alarm: AlarmDefinition;
  let recorder: MetricRecorder | undefined;
  let lambda: LambdaClient;
  const logs: string[] = [];

  beforeAll(async () => {
    session = await openTestAppSession({
      template: scaleConsumerBatch,
      jobSettings: (settings) =>
        settings.jobName !== JOB
          ? settings
          : {
              ...settings,
              rateLimit: { ...RATE, burst: 1 },
              admission: { ...settings.admission!, batchSize: BATCH_SIZE },
              pacing: { ...settings.pacing, shortWaitMs: SHORT_WAIT_MS },
            },
      downstream: (name) => (name === JOB ? { quota: API_QUOTA } : undefined),
      log: (source, line) => {
        recorder?.observe(line);
        logs.push(`[${source}] ${line}`);
        if (logs.length > 300) logs.shift();
      },
    });
    job = session.job(JOB);
    const synthesized = readAlarm(
      session.template,
      alarmName(session.artifact.stackName, JOB, JobAlarm.Stalled),
      planResolveContext(session.stack.plan),
    );
    alarm = scaleAlarm(synthesized, { periodSeconds: PERIOD_SECONDS, evaluationPeriods: EVALUATION_PERIODS });
    const queue = session.stack.plan.queues.find((q) => q.url === job.queueUrl);
    if (!queue || !job.mapping || !job.fixture)
      throw new Error(`the test app's ${JOB} job has no work queue, consumer mapping or fixture`);
    recorder = new MetricRecorder({ sqs: session.sqs(), queues: [{ url: queue.url, queueName: queue.name }] });
    lambda = new LambdaClient(session.stack.clientConfig('lambda'));
    session.startConsumers();
  }, 120_000);

  afterAll(async () => {
    await recorder?.stop().catch(() => undefined);
    lambda?.destroy();
    await session?.close();
  });

  // The local Lambda API answers a disable once the mapping's pollers have stopped, as `ops pause` waits for.
  const setConsumer = (enabled: boolean) =>
    lambda.send(new UpdateEventSourceMappingCommand({ UUID: job.mapping!.uuid, Enabled: enabled }));
  const periodsBetween = (fromMs: number, toMs: number) => evaluateAlarm(alarm, recorder!.samples(), { fromMs, toMs });
  /** The first sample of the queue at or after `ms`: the recorder's view of the run has reached that moment. */
  const queueSampledFrom = (what: string, ms: number) =>
    waitFor(what, () => recorder!.samples().find((x) => x.namespace === 'AWS/SQS' && x.timestamp >= ms), {
      timeoutMs: 20_000,
      intervalMs: 50,
    });
  /**
   * Waits for what the alarm reads of a run to be complete, and returns the end of the last period it makes whole:
   * `count` calls since `fromMs` recorded as settled (a log line reaches the recorder a little after it is written,
   * later on a loaded machine), and the queue sampled past the end of the period the count was reached in.
   */
  const recordedThrough = async (what: string, fromMs: number, count: number): Promise<number> => {
    const settles = alarm.metrics.filter((m) => (SETTLED_IDS as readonly string[]).includes(m.id));
    const isSettle = (x: MetricSample) =>
      settles.some(
        (m) =>
          x.metricName === m.metricName &&
          x.namespace === m.namespace &&
          Object.entries(m.dimensions).every(([name, value]) => x.dimensions[name] === value),
      );
    const recorded = await waitFor(
      `the ${count} settled calls of ${what} recorded`,
      () => {
        const found = recorder!
          .samples()
          .filter((x) => x.timestamp >= fromMs && isSettle(x))
          .sort((a, b) => a.timestamp - b.timestamp);
        let sum = 0;
        return found.find((x) => (sum += x.value) >= count);
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    const end = periodEnd(recorded.timestamp);
    await queueSampledFrom(`a sample of the queue after the period of the last settle of ${what}`, end);
    return end;
  };
  const fire = async (businessDate: string, calls: number) => {
    const seeded = await session.seed(JOB, calls, businessDate);
    expect(seeded.expectedOperations).toHaveLength(calls);
    await session.fire(JOB, { scheduledTime: new Date(), businessDate });
  };

  it("is the synthesized alarm: the stalled expression over this job's queue and metrics, 15 of 15 one-minute periods", () => {
    const synthesized = readAlarm(
      session.template,
      alarmName(session.artifact.stackName, JOB, JobAlarm.Stalled),
      planResolveContext(session.stack.plan),
    );
    expect({
      periodSeconds: synthesized.periodSeconds,
      evaluationPeriods: synthesized.evaluationPeriods,
      datapointsToAlarm: synthesized.datapointsToAlarm,
      treatMissingData: synthesized.treatMissingData,
    }).toEqual({ periodSeconds: 60, evaluationPeriods: 15, datapointsToAlarm: 15, treatMissingData: 'notBreaching' });
    const queueName = session.stack.plan.queues.find((q) => q.url === job.queueUrl)!.name;
    expect(alarm.metrics.map((m) => [m.id, m.metricName, m.dimensions, m.stat])).toEqual([
      ['visible', 'ApproximateNumberOfMessagesVisible', { QueueName: queueName }, 'Maximum'],
      ['delayed', 'ApproximateNumberOfMessagesDelayed', { QueueName: queueName }, 'Maximum'],
      ['applied', 'Applied', { job: JOB, service: JOB }, 'Sum'],
      ['done', 'AlreadyDone', { job: JOB, service: JOB }, 'Sum'],
      ['dead', 'DeadLettered', { job: JOB, service: JOB }, 'Sum'],
      ['rejected', 'Rejected', { job: JOB, service: JOB }, 'Sum'],
    ]);
  });

  it('goes to ALARM for a paused consumer with waiting work, after 3 periods of it, and back to OK once it resumes', async () => {
    await setConsumer(false);
    expect(job.mapping!.state).toBe('Disabled');
    await fire('2026-03-09', PAUSED_CALLS);
    // The producer admits the run into the queue (delayed until each group's slot); nobody receives it.
    await waitFor(
      'the paused run to wait in the queue',
      async () => {
        const d = await session.depth(job.queueUrl);
        return d.visible + d.delayed === PAUSED_CALLS && d.inFlight === 0;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );

    // The first period is the one the first queue sample falls in (periods are aligned to the clock).
    const before = Date.now();
    recorder!.start();
    const from = (
      await waitFor('a first sample of the queue', () =>
        recorder!.samples().find((x) => x.namespace === 'AWS/SQS' && x.timestamp >= before),
      )
    ).timestamp;
    const stalled = await waitUntil<PeriodEvaluation[]>(
      'the stalled alarm to reach ALARM',
      () => {
        const periods = periodsBetween(from, Date.now() - LOG_LAG_MS);
        return periods.some((p) => p.state === AlarmState.ALARM) ? { done: periods } : { last: table(periods, from) };
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    // Every period saw work waiting and nothing settled (1); the third such period in a row is the alarm.
    expect(table(stalled, from).map((line) => line.replace(/^\+\S+ waiting=\d+/, 'waiting'))).toEqual([
      'waiting settled=0 value=1 OK',
      'waiting settled=0 value=1 OK',
      'waiting settled=0 value=1 ALARM',
    ]);
    expect(stalled.every((p) => waiting(p) > 0)).toBe(true);

    await setConsumer(true);
    const resumedAt = Date.now();
    // Read through the period of the first settle after the resume, once it is recorded and the period is whole: a
    // period read early, before its settles' log lines came in, would look stalled.
    const recovered = periodsBetween(from, await recordedThrough('the resumed run', resumedAt, 1));
    const last = recovered[recovered.length - 1];
    expect({
      lines: table(recovered, from),
      last: { afterResume: last.endMs > resumedAt, settled: settled(last) > 0, state: last.state },
    }).toEqual({ lines: table(recovered, from), last: { afterResume: true, settled: true, state: AlarmState.OK } });
    expect(await session.settle({ deadline: Date.now() + 30_000, jobs: [JOB], intervalMs: 200 })).toBe(true);
  }, 90_000);

  it('stays OK while a paced backlog drains over several periods: every period with work waiting settles some', async () => {
    // A period apart from the previous test's last applies: periods are aligned to the clock, so the first period of
    // this run would otherwise share their samples. It starts with the first sample of the queue in a later period.
    recorder!.start();
    const { timestamp: from } = await queueSampledFrom(
      'a sample of the queue in a period after the previous run',
      periodEnd(Date.now()),
    );
    await fire('2026-03-10', BACKLOG);
    expect(await session.settle({ deadline: Date.now() + 60_000, jobs: [JOB], intervalMs: 200 })).toBe(true);
    // Up to the period in which the last call settled, evaluated whole.
    const to = await recordedThrough('the backlog', from, BACKLOG);
    await recorder!.stop();
    const periods = periodsBetween(from, to);
    const lines = table(periods, from);

    // Paced: the limiter lets the 120 start no faster than 10 a second, so their applies span at least six periods
    // (20 in a 2-s period, and one for the burst); all at once, they would settle within one or two.
    const applying = periods.filter((p) => (p.values.applied ?? 0) > 0).map((p) => periods.indexOf(p));
    const spanned = applying[applying.length - 1] - applying[0] + 1;
    expect({ lines, paced: spanned >= Math.ceil(BACKLOG / (STARTS_PER_SECOND * PERIOD_SECONDS + 1)) }).toEqual({
      lines,
      paced: true,
    });

    // Work waited in several periods: the test's claim is about a backlog, not an idle queue.
    const waited = periods.filter((p) => waiting(p) > 0);
    expect({ lines, severalPeriods: waited.length > EVALUATION_PERIODS }).toEqual({ lines, severalPeriods: true });
    // Every period in which work waited settled something, but the one the run was admitted in (the first group's
    // batch may end after it), and never two in a row: a record that wakes late for its slot on a loaded machine is
    // deferred a second or more, which can leave one period with nothing settled. The alarm needs three.
    const unsettled = waited.slice(1).filter((p) => settled(p) === 0 || p.value !== 0);
    const inARow = unsettled.filter((p) => unsettled.includes(periods[periods.indexOf(p) + 1]));
    expect({ lines, unsettledTwiceInARow: inARow.map((p) => table([p], from)[0]) }).toEqual({
      lines,
      unsettledTwiceInARow: [],
    });
    expect(unsettled.length).toBeLessThan(waited.length - 1);
    // OK throughout.
    expect({ lines, notOk: periods.filter((p) => p.state !== AlarmState.OK).length }).toEqual({ lines, notOk: 0 });
    // The metrics the alarm read are the whole run: every call applied once, nothing dead-lettered or rejected.
    const total = (id: string) => periods.reduce((sum, p) => sum + (p.values[id] ?? 0), 0);
    expect({
      applied: total('applied'),
      done: total('done'),
      dead: total('dead'),
      rejected: total('rejected'),
    }).toEqual({ applied: BACKLOG, done: 0, dead: 0, rejected: 0 });

    // The control: the same queue samples without the settles would have alarmed. The OK is the settles' doing, not
    // too few periods.
    const withoutSettles = evaluateAlarm(
      alarm,
      recorder!.samples().filter((s) => s.namespace === 'AWS/SQS'),
      { fromMs: from, toMs: to },
    );
    expect(withoutSettles.some((p) => p.state === AlarmState.ALARM)).toBe(true);
  }, 90_000);

  it("evaluates the mappings' failed-invoke and dropped alarms over both runs: what each mapping counted, nothing dropped", () => {
    const context = planResolveContext(session.stack.plan);
    // The session's own samples: the mappings publish their event counts to it (local/eventSourceMapping.ts onMetric).
    const samples = session.metrics.samples();
    const ofMapping = samples.filter((x) => x.namespace === 'AWS/Lambda');
    const window = { fromMs: Math.min(...ofMapping.map((x) => x.timestamp)), toMs: Date.now() + PERIOD_SECONDS * 1000 };
    const cases = [
      [JobAlarm.ConsumerDroppedEvents, job.mapping!, 'dropped'],
      [JobAlarm.AdmissionFailedInvokes, job.admissionMapping!, 'failed'],
      [JobAlarm.AdmissionDroppedEvents, job.admissionMapping!, 'dropped'],
    ] as const;
    for (const [what, mapping, counts] of cases) {
      const synthesized = readAlarm(session.template, alarmName(session.artifact.stackName, JOB, what), context);
      expect(synthesized.metrics.map((m) => [m.namespace, m.metricName, m.dimensions])).toEqual([
        [
          'AWS/Lambda',
          counts === 'failed' ? 'FailedInvokeEventCount' : 'DroppedEventCount',
          { EventSourceMappingUUID: mapping.uuid },
        ],
      ]);
      // Its 5-minute period scaled to the test's 2 s, one period to alarm, as synthesized.
      const periods = evaluateAlarm(
        scaleAlarm(synthesized, { periodSeconds: PERIOD_SECONDS, evaluationPeriods: 1 }),
        samples,
        window,
      );
      const total = periods.reduce((sum, p) => sum + (p.value ?? 0), 0);
      // A record the consumer handed back counts (the local SQS can hand one message to two receives): the alarm sees
      // exactly the mapping's own count, and alarms in each period that had one (and, as CloudWatch does, while that
      // datapoint is still the latest of its evaluation range). An SQS mapping drops nothing: OK throughout.
      expect({ what, total }).toEqual({ what, total: counts === 'failed' ? mapping.statistics.failed : 0 });
      expect(periods.filter((p) => (p.value ?? 0) > 0 && p.state !== AlarmState.ALARM)).toEqual([]);
      expect(periods.some((p) => p.state !== AlarmState.OK)).toBe(total > 0);
    }
    // The consumer's failed invokes alarm on their share of what the mapping polled (a record handed back for a retry
    // counts there too, so not on any one): each period's datapoint is that share, and a run whose handed-back records
    // are a small share never alarms.
    const consumerMapping = job.mapping!;
    const failedInvokes = readAlarm(
      session.template,
      alarmName(session.artifact.stackName, JOB, JobAlarm.ConsumerFailedInvokes),
      context,
    );
    expect(failedInvokes.metrics.map((m) => [m.namespace, m.metricName, m.dimensions])).toEqual([
      ['AWS/Lambda', 'PolledEventCount', { EventSourceMappingUUID: consumerMapping.uuid }],
      ['AWS/Lambda', 'FailedInvokeEventCount', { EventSourceMappingUUID: consumerMapping.uuid }],
    ]);
    expect({ threshold: failedInvokes.threshold, evaluationPeriods: failedInvokes.evaluationPeriods }).toEqual({
      threshold: 0.5,
      evaluationPeriods: 3,
    });
    const shares = evaluateAlarm(
      scaleAlarm(failedInvokes, { periodSeconds: PERIOD_SECONDS, evaluationPeriods: 3 }),
      samples,
      window,
    );
    expect(shares.reduce((sum, p) => sum + (p.values.failed ?? 0), 0)).toBe(consumerMapping.statistics.failed);
    for (const p of shares) {
      const polled = p.values.polled ?? 0;
      expect({ at: p.startMs, value: p.value ?? 0 }).toEqual({
        at: p.startMs,
        value: polled > 0 ? (p.values.failed ?? 0) / polled : 0,
      });
    }
    expect(shares.filter((p) => p.state === AlarmState.ALARM && (p.value ?? 0) <= 0.5)).toEqual([]);
    // The consumer's mapping published what it delivered: every call of both runs, deleted once applied.
    const sum = (metricName: string, uuid: string) =>
      ofMapping
        .filter((x) => x.metricName === metricName && x.dimensions.EventSourceMappingUUID === uuid)
        .reduce((a, x) => a + x.value, 0);
    const consumer = job.mapping!;
    expect(sum('DeletedEventCount', consumer.uuid)).toBe(consumer.statistics.acknowledged);
    expect(sum('InvokedEventCount', consumer.uuid)).toBe(consumer.statistics.acknowledged + consumer.statistics.failed);
    expect(consumer.statistics.acknowledged).toBeGreaterThanOrEqual(PAUSED_CALLS + BACKLOG);
  });
});
