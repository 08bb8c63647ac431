// ops/metrics.ts reads a job's metrics with GetMetricData: against the local CloudWatch API alone over known samples
// (which queries, which statistics, one sample per datapoint, the refusals), and end to end on a local session of the
// dev stack, as `--local` finds it through .local/endpoints.json after a fired cycle.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MetricName } from '../../lambda/adapters/observability';
import { startCloudWatchApi } from '../../local/cloudWatchApi';
import type { MetricSample } from '../../local/metricsTap';
import { writeEndpoints } from '../../local/run';
import { LocalSession, type SessionJob } from '../../local/session';
import { createClients, type OpsClients } from '../../ops/clients';
import type { CommandContext } from '../../ops/context';
import { ResourceDiscoveryError, UsageError } from '../../ops/errors';
import type { OpsIo } from '../../ops/io';
import { jobMetricQueries, MetricsReadError, PIPELINE_METRICS, QUEUE_METRICS, readJobSamples } from '../../ops/metrics';
import { LocalEndpointsSource, type JobResources, type StackResources } from '../../ops/resources';
import { LOCAL_CREDENTIALS, type RunningServer } from '../../local/servers';

const MINUTE = 60_000;
const T0 = Math.floor(Date.now() / MINUTE) * MINUTE - 10 * MINUTE;
const arn = (name: string) => `arn:aws:sqs:us-east-1:000000000000:${name}`;

/** A job as the CLI finds it; only its name and queue ARNs matter to its metrics. */
const job = (name: string): JobResources => ({
  job: name,
  queueUrl: `http://127.0.0.1:1/000000000000/${name}-queue`,
  queueArn: arn(`${name}-queue`),
  dlqUrl: `http://127.0.0.1:1/000000000000/${name}-dlq`,
  dlqArn: arn(`${name}-dlq`),
  producerFunctionName: `${name}-producer`,
  consumerFunctionName: `${name}-consumer`,
  scheduleName: `${name}-schedule`,
  scheduleGroupName: 'paced-jobs-test',
  eventSourceMappingUuid: `local-${name}Mapping`,
  admissionQueueUrl: `http://127.0.0.1:1/000000000000/${name}-admission`,
  admissionQueueArn: arn(`${name}-admission`),
  admissionMappingUuid: `local-${name}AdmissionMapping`,
});

const io = {} as OpsIo;

function contextFor(endpoint: string | undefined, clients: OpsClients): CommandContext {
  const resources: StackResources = {
    source: 'local',
    stackName: 'PacedJobs-test',
    region: 'us-east-1',
    tables: { idempotency: 'i', ledger: 'l' },
    jobs: [job('alpha'), job('beta')],
    clients: {
      region: 'us-east-1',
      credentials: LOCAL_CREDENTIALS,
      endpoints: endpoint ? { cloudwatch: endpoint } : {},
    },
  };
  return { resources, clients, io };
}

describe('Constant: PIPELINE_METRICS', () => {
  it('names every metric the pipeline emits (lambda/adapters/observability.ts MetricName), counts summed and the age at its maximum', () => {
    expect(Object.keys(PIPELINE_METRICS).sort()).toEqual(Object.values(MetricName).sort());
    expect(Object.entries(PIPELINE_METRICS).filter(([, stat]) => stat === 'Maximum')).toEqual([
      ['AgeSinceFirstEnqueue', 'Maximum'],
    ]);
  });
});

describe('Function: jobMetricQueries', () => {
  it("asks for the pipeline's metrics with both of Powertools' dimensions, and each queue's depth by its QueueName at its maximum", () => {
    const queries = jobMetricQueries(job('alpha'), 60);

    expect(queries).toHaveLength(Object.keys(PIPELINE_METRICS).length + 3 * QUEUE_METRICS.length);
    expect(queries.find((q) => q.metric.metricName === 'Applied')!.query).toEqual({
      Id: 'm1',
      MetricStat: {
        Metric: {
          Namespace: 'PacedJobs',
          MetricName: 'Applied',
          Dimensions: [
            { Name: 'service', Value: 'alpha' },
            { Name: 'job', Value: 'alpha' },
          ],
        },
        Period: 60,
        Stat: 'Sum',
      },
      ReturnData: true,
    });
    expect(
      queries
        .filter((q) => q.metric.namespace === 'AWS/SQS')
        .map((q) => `${q.metric.dimensions.QueueName} ${q.metric.metricName} ${q.query.MetricStat!.Stat}`),
    ).toEqual(
      ['alpha-queue', 'alpha-dlq', 'alpha-admission'].flatMap((queue) =>
        QUEUE_METRICS.map((m) => `${queue} ${m} Maximum`),
      ),
    );
  });
});

describe('Function: readJobSamples (against the local CloudWatch API)', () => {
  let samples: MetricSample[] = [];
  let server: RunningServer;
  let clients: OpsClients;
  let ctx: CommandContext;
  const emf = (name: string, metricName: string, atMs: number, value: number): MetricSample => ({
    namespace: 'PacedJobs',
    metricName,
    dimensions: { service: name, job: name },
    timestamp: atMs,
    value,
  });
  const sqs = (queueName: string, metricName: string, atMs: number, value: number): MetricSample => ({
    namespace: 'AWS/SQS',
    metricName,
    dimensions: { QueueName: queueName },
    timestamp: atMs,
    value,
  });

  beforeAll(async () => {
    server = await startCloudWatchApi({ samples: () => samples });
    clients = createClients({
      region: 'us-east-1',
      credentials: LOCAL_CREDENTIALS,
      endpoints: { cloudwatch: server.endpoint },
    });
    ctx = contextFor(server.endpoint, clients);
  });

  afterAll(async () => {
    clients?.destroy();
    await server?.close();
  });

  it("returns one sample per datapoint, each the period's statistic, for this job's metrics and queues only", async () => {
    samples = [
      emf('alpha', 'Applied', T0 + 1_000, 1),
      emf('alpha', 'Applied', T0 + 2_000, 1),
      emf('alpha', 'Applied', T0 + MINUTE + 5_000, 1),
      emf('alpha', 'AgeSinceFirstEnqueue', T0 + 3_000, 800),
      emf('alpha', 'AgeSinceFirstEnqueue', T0 + 4_000, 1500),
      emf('beta', 'Applied', T0 + 1_000, 50),
      sqs('alpha-queue', 'ApproximateNumberOfMessagesVisible', T0 + 1_000, 7),
      sqs('alpha-queue', 'ApproximateNumberOfMessagesVisible', T0 + 2_000, 12),
      sqs('alpha-dlq', 'ApproximateNumberOfMessagesVisible', T0 + 1_000, 1),
      sqs('beta-queue', 'ApproximateNumberOfMessagesVisible', T0 + 1_000, 99),
    ];

    const read = await readJobSamples(ctx, 'alpha', { fromMs: T0, toMs: T0 + 5 * MINUTE, periodSeconds: 60 });

    const shown = read.map(
      (s) => `${s.metricName} ${JSON.stringify(s.dimensions)} +${(s.timestamp - T0) / 1000}s ${s.value}`,
    );
    expect(shown).toEqual([
      'Applied {"service":"alpha","job":"alpha"} +0s 2',
      'Applied {"service":"alpha","job":"alpha"} +60s 1',
      'AgeSinceFirstEnqueue {"service":"alpha","job":"alpha"} +0s 1500',
      'ApproximateNumberOfMessagesVisible {"QueueName":"alpha-queue"} +0s 12',
      'ApproximateNumberOfMessagesVisible {"QueueName":"alpha-dlq"} +0s 1',
    ]);
    expect(read.every((s) => s.namespace === (s.dimensions.QueueName ? 'AWS/SQS' : 'PacedJobs'))).toBe(true);
  });

  it('takes the job as the CLI found it as well as by name', async () => {
    samples = [emf('beta', 'Deferred', T0 + 1_000, 4)];

    expect(await readJobSamples(ctx, job('beta'), { fromMs: T0, toMs: T0 + MINUTE, periodSeconds: 10 })).toEqual([
      {
        namespace: 'PacedJobs',
        metricName: 'Deferred',
        dimensions: { service: 'beta', job: 'beta' },
        timestamp: T0,
        value: 4,
      },
    ]);
  });

  it('refuses an unknown job and a window CloudWatch would refuse, before any call', async () => {
    await expect(readJobSamples(ctx, 'gamma', { fromMs: T0, toMs: T0 + MINUTE, periodSeconds: 60 })).rejects.toThrow(
      new UsageError('unknown job "gamma"; PacedJobs-test has: alpha, beta'),
    );
    await expect(readJobSamples(ctx, 'alpha', { fromMs: T0, toMs: T0 + MINUTE, periodSeconds: 45 })).rejects.toThrow(
      new UsageError(
        'a metrics period must be 1, 5, 10, 20, 30 or a multiple of 60 seconds (as CloudWatch takes), got 45',
      ),
    );
    await expect(readJobSamples(ctx, 'alpha', { fromMs: T0, toMs: T0, periodSeconds: 60 })).rejects.toThrow(
      new UsageError(`a metrics window needs fromMs before toMs, got ${T0} and ${T0}`),
    );
  });

  it('refuses a local endpoints file without a CloudWatch endpoint rather than ask AWS with the local credentials', async () => {
    await expect(
      readJobSamples(contextFor(undefined, clients), 'alpha', { fromMs: T0, toMs: T0 + MINUTE, periodSeconds: 60 }),
    ).rejects.toThrow(ResourceDiscoveryError);
  });

  it("wraps CloudWatch's refusal with the job and where it asked", async () => {
    const failing = await startCloudWatchApi({
      samples: () => {
        throw new Error('boom');
      },
    });
    const failingClients = createClients({
      region: 'us-east-1',
      credentials: LOCAL_CREDENTIALS,
      endpoints: { cloudwatch: failing.endpoint },
    });
    try {
      const error = await readJobSamples(contextFor(failing.endpoint, failingClients), 'alpha', {
        fromMs: T0,
        toMs: T0 + MINUTE,
        periodSeconds: 60,
      }).catch((e: Error) => e);
      expect(error).toBeInstanceOf(MetricsReadError);
      expect(error).toMatchObject({
        job: 'alpha',
        message: `reading job alpha's metrics from the local CloudWatch at ${failing.endpoint} failed: InternalServiceFault: boom`,
      });
    } finally {
      failingClients.destroy();
      await failing.close();
    }
  });
});

describe("On a local session: the session's metrics, served and found through endpoints.json", () => {
  const COUNT = 3;
  /** The fastest-paced of the app's jobs with a fixture (whichever the reference app keeps), so the run settles soonest. */
  let JOB: string;
  let session: LocalSession;
  let dir: string;
  let settled: boolean;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ops-metrics-'));
    session = await LocalSession.open({
      cwd: process.cwd(),
      log: () => undefined,
      metrics: { pollIntervalMs: 200 },
      prewarm: 2,
    });
    const perSecond = ({ settings: { rateLimit: r } }: SessionJob) => r.startsPerInterval / r.intervalSeconds;
    const [fastest] = [...session.jobs.values()].filter((j) => j.fixture).sort((a, b) => perSecond(b) - perSecond(a));
    JOB = fastest.name;
    const businessDate = session.businessDateFor(JOB);
    await session.seed(JOB, COUNT, businessDate);
    session.startConsumers();
    await session.fire(JOB, { scheduledTime: new Date(), businessDate });
    settled = await session.settle({ deadline: Date.now() + 90_000, jobs: [JOB] });
  }, 180_000);

  afterAll(async () => {
    await session?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('writes the local CloudWatch endpoint into endpoints.json, and the environment variable the SDK reads', () => {
    const doc = JSON.parse(readFileSync(writeEndpoints(dir, session), 'utf8'));

    expect(session.metrics.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(doc.endpoints.cloudwatch).toBe(session.metrics.endpoint);
    expect(doc.environment.AWS_ENDPOINT_URL_CLOUDWATCH).toBe(session.metrics.endpoint);
  });

  it("records the functions' EMF metrics and every queue's depth in process", () => {
    expect(settled).toBe(true);
    const samples = session.metrics.samples();
    const applied = samples.filter((s) => s.metricName === 'Applied' && s.dimensions.job === JOB);
    expect(applied.reduce((sum, s) => sum + s.value, 0)).toBe(COUNT);
    const queues = new Set(samples.filter((s) => s.namespace === 'AWS/SQS').map((s) => s.dimensions.QueueName));
    expect([...queues].sort()).toEqual(session.stack.plan.queues.map((q) => q.name).sort());
  });

  it("is what `ops --local` reads with readJobSamples: the job's applies summed, its queue's depth at its peak", async () => {
    const resources = await new LocalEndpointsSource(writeEndpoints(dir, session)).load();
    const clients = createClients(resources.clients);
    try {
      const from = session.startedAt.getTime() - MINUTE;
      const read = await readJobSamples({ resources, clients, io }, JOB, {
        fromMs: from,
        toMs: Date.now() + MINUTE,
        periodSeconds: 60,
      });

      const applied = read.filter((s) => s.metricName === 'Applied');
      expect(applied.reduce((sum, s) => sum + s.value, 0)).toBe(COUNT);
      expect(applied.every((s) => s.dimensions.job === JOB && s.dimensions.service === JOB)).toBe(true);
      const queueName = session.stack.plan.queues.find((q) => q.url === session.job(JOB).queueUrl)!.name;
      const visible = read.filter(
        (s) => s.metricName === 'ApproximateNumberOfMessagesVisible' && s.dimensions.QueueName === queueName,
      );
      expect(visible.length).toBeGreaterThan(0);
      // The run published COUNT messages into the queue; its peak is at most that, and it drained to none.
      expect(Math.max(...visible.map((s) => s.value))).toBeLessThanOrEqual(COUNT);
    } finally {
      clients.destroy();
    }
  });
});
