// The local CloudWatch API over known samples, through the real @aws-sdk/client-cloudwatch (AWS JSON 1.0, dates as
// epoch seconds, query-compatible errors): GetMetricData's statistics per period, CloudWatch's exact dimension
// matching and StartTime rounding, its pages, the refusals that name what the local CloudWatch does not do, ListMetrics.
import {
  CloudWatchClient,
  GetMetricDataCommand,
  type GetMetricDataCommandInput,
  ListMetricsCommand,
  type ListMetricsCommandInput,
  type MetricDataQuery,
  paginateGetMetricData,
  PutMetricDataCommand,
} from '@aws-sdk/client-cloudwatch';
import { alignStart, startCloudWatchApi } from '../../local/cloudWatchApi';
import type { MetricSample } from '../../local/metricsTap';
import { LOCAL_CREDENTIALS, type RunningServer } from '../../local/servers';

const MINUTE = 60_000;
/** A whole minute ten minutes ago: recent, so StartTime rounds to the minute, and periods line up with it. */
const T0 = Math.floor(Date.now() / MINUTE) * MINUTE - 10 * MINUTE;
const JOB = { service: 'a-job', job: 'a-job' };
const OTHER = { service: 'b-job', job: 'b-job' };

const emf = (
  metricName: string,
  atMs: number,
  value: number,
  dimensions: Record<string, string> = JOB,
): MetricSample => ({ namespace: 'PacedJobs', metricName, dimensions, timestamp: atMs, value });
const depth = (queueName: string, atMs: number, value: number): MetricSample => ({
  namespace: 'AWS/SQS',
  metricName: 'ApproximateNumberOfMessagesVisible',
  dimensions: { QueueName: queueName },
  timestamp: atMs,
  value,
});

const SAMPLES: MetricSample[] = [
  emf('Applied', T0 + 1_000, 1),
  emf('Applied', T0 + 2_000, 1),
  emf('Applied', T0 + 61_000, 1),
  emf('Applied', T0 + 200_000, 3),
  // Another job's, and the same metric with one dimension more: neither is a-job's metric.
  emf('Applied', T0 + 3_000, 100, OTHER),
  emf('Applied', T0 + 4_000, 1000, { ...JOB, extra: 'x' }),
  emf('AgeSinceFirstEnqueue', T0 + 5_000, 400),
  emf('AgeSinceFirstEnqueue', T0 + 6_000, 100),
  emf('AgeSinceFirstEnqueue', T0 + 7_000, 700),
  depth('a-queue', T0 + 500, 4),
  depth('a-queue', T0 + 30_000, 9),
  depth('a-queue', T0 + 59_999, 2),
];

const stat = (
  Id: string,
  MetricName: string,
  Stat: string,
  options: { dimensions?: Record<string, string>; period?: number; namespace?: string } = {},
): MetricDataQuery => ({
  Id,
  MetricStat: {
    Metric: {
      Namespace: options.namespace ?? 'PacedJobs',
      MetricName,
      Dimensions: Object.entries(options.dimensions ?? JOB).map(([Name, Value]) => ({ Name, Value })),
    },
    Period: options.period ?? 60,
    Stat,
  },
});

describe('Function: startCloudWatchApi', () => {
  let server: RunningServer;
  let cloudwatch: CloudWatchClient;
  let samples: MetricSample[] = SAMPLES;

  beforeAll(async () => {
    server = await startCloudWatchApi({ samples: () => samples });
    cloudwatch = new CloudWatchClient({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: LOCAL_CREDENTIALS,
      maxAttempts: 1,
    });
  });

  afterAll(async () => {
    cloudwatch?.destroy();
    await server?.close();
  });

  afterEach(() => {
    samples = SAMPLES;
  });

  const window = (fromMs = T0, toMs = T0 + 5 * MINUTE) => ({ StartTime: new Date(fromMs), EndTime: new Date(toMs) });
  const getMetricData = (
    input: Omit<GetMetricDataCommandInput, 'StartTime' | 'EndTime'> & Partial<GetMetricDataCommandInput>,
  ) => cloudwatch.send(new GetMetricDataCommand({ ...window(), ...input }));
  /** Each result as [id, label, epoch ms, values]. */
  const points = (out: Awaited<ReturnType<typeof getMetricData>>) =>
    (out.MetricDataResults ?? []).map((r) => [r.Id, r.Label, r.Timestamps?.map((t) => t.getTime()), r.Values]);

  describe('Action: GetMetricData', () => {
    it("sums each period's samples, a datapoint per period that has any, newest first by default and oldest first when asked", async () => {
      const query = stat('applied', 'Applied', 'Sum');

      const descending = await getMetricData({ MetricDataQueries: [query] });
      const ascending = await getMetricData({ MetricDataQueries: [query], ScanBy: 'TimestampAscending' });

      expect(points(descending)).toEqual([['applied', 'Applied', [T0 + 3 * MINUTE, T0 + MINUTE, T0], [3, 1, 2]]]);
      expect(points(ascending)).toEqual([['applied', 'Applied', [T0, T0 + MINUTE, T0 + 3 * MINUTE], [2, 1, 3]]]);
      expect(ascending.MetricDataResults?.[0].StatusCode).toBe('Complete');
      expect(ascending.NextToken).toBeUndefined();
    });

    it("answers every supported statistic, a query's own Label, and leaves out a query with ReturnData false", async () => {
      const age = (Id: string, Stat: string) => stat(Id, 'AgeSinceFirstEnqueue', Stat);
      const out = await getMetricData({
        MetricDataQueries: [
          age('max', 'Maximum'),
          age('min', 'Minimum'),
          age('avg', 'Average'),
          age('n', 'SampleCount'),
          { ...age('sum', 'Sum'), Label: 'age summed' },
          { ...age('hidden', 'Sum'), ReturnData: false },
        ],
        ScanBy: 'TimestampAscending',
      });

      expect(points(out)).toEqual([
        ['max', 'AgeSinceFirstEnqueue', [T0], [700]],
        ['min', 'AgeSinceFirstEnqueue', [T0], [100]],
        ['avg', 'AgeSinceFirstEnqueue', [T0], [400]],
        ['n', 'AgeSinceFirstEnqueue', [T0], [3]],
        ['sum', 'age summed', [T0], [1200]],
      ]);
    });

    it("matches a metric on exactly the query's dimensions, as CloudWatch does: none fewer, none more", async () => {
      const out = await getMetricData({
        MetricDataQueries: [
          stat('other', 'Applied', 'Sum', { dimensions: OTHER }),
          stat('extra', 'Applied', 'Sum', { dimensions: { ...JOB, extra: 'x' } }),
          stat('jobonly', 'Applied', 'Sum', { dimensions: { job: 'a-job' } }),
          stat('none', 'Applied', 'Sum', { dimensions: {} }),
        ],
        ScanBy: 'TimestampAscending',
      });

      expect(points(out)).toEqual([
        ['other', 'Applied', [T0], [100]],
        ['extra', 'Applied', [T0], [1000]],
        ['jobonly', 'Applied', [], []],
        ['none', 'Applied', [], []],
      ]);
    });

    it("takes a queue's peak per period with Maximum, an AWS/SQS metric by its QueueName", async () => {
      const out = await getMetricData({
        MetricDataQueries: [
          stat('visible', 'ApproximateNumberOfMessagesVisible', 'Maximum', {
            namespace: 'AWS/SQS',
            dimensions: { QueueName: 'a-queue' },
          }),
        ],
      });

      expect(points(out)).toEqual([['visible', 'ApproximateNumberOfMessagesVisible', [T0], [9]]]);
    });

    it('rounds StartTime down as CloudWatch does (to the minute for a period of one, to the period under a minute), and leaves EndTime out', async () => {
      const query = (period: number) => stat('applied', 'Applied', 'Sum', { period });

      // StartTime 30 s into the first minute still counts its first samples (at +1 s and +2 s); EndTime at +61 s leaves
      // the sample at +61 s out.
      const minute = await getMetricData({
        ...window(T0 + 30_000, T0 + 61_000),
        MetricDataQueries: [query(60)],
        ScanBy: 'TimestampAscending',
      });
      const tenSeconds = await getMetricData({
        ...window(T0 + 1_500, T0 + 5 * MINUTE),
        MetricDataQueries: [query(10)],
        ScanBy: 'TimestampAscending',
      });

      expect(points(minute)).toEqual([['applied', 'Applied', [T0], [2]]]);
      expect(points(tenSeconds)).toEqual([['applied', 'Applied', [T0, T0 + 60_000, T0 + 200_000], [2, 1, 3]]]);
      expect(alignStart(T0 + 23_000, 10, T0 + MINUTE)).toBe(T0 + 20_000);
      expect(alignStart(Date.UTC(2026, 0, 1, 12, 32, 34), 300, Date.UTC(2026, 0, 2))).toBe(
        Date.UTC(2026, 0, 1, 12, 32),
      );
      expect(alignStart(Date.UTC(2026, 0, 1, 12, 32, 34), 300, Date.UTC(2026, 1, 1))).toBe(
        Date.UTC(2026, 0, 1, 12, 30),
      );
      expect(alignStart(Date.UTC(2026, 0, 1, 12, 32, 34), 3600, Date.UTC(2026, 5, 1))).toBe(Date.UTC(2026, 0, 1, 12));
    });

    it("pages by MaxDatapoints behind a NextToken, the split result PartialData, and the SDK's paginator reads every page", async () => {
      samples = Array.from({ length: 5 }, (_, i) => emf('Applied', T0 + i * MINUTE, i + 1));
      const input = {
        ...window(),
        MetricDataQueries: [stat('applied', 'Applied', 'Sum'), stat('age', 'AgeSinceFirstEnqueue', 'Maximum')],
        ScanBy: 'TimestampAscending' as const,
        MaxDatapoints: 2,
      };

      const first = await cloudwatch.send(new GetMetricDataCommand(input));
      const pages = [];
      for await (const page of paginateGetMetricData({ client: cloudwatch }, input)) pages.push(page);

      expect(points(first)).toEqual([['applied', 'Applied', [T0, T0 + MINUTE], [1, 2]]]);
      expect(first.MetricDataResults?.[0].StatusCode).toBe('PartialData');
      expect(first.NextToken).toEqual(expect.any(String));
      expect(pages.flatMap((p) => (p.MetricDataResults ?? []).flatMap((r) => r.Values ?? []))).toEqual([1, 2, 3, 4, 5]);
      expect(pages.at(-1)?.MetricDataResults?.map((r) => [r.Id, r.StatusCode])).toEqual([
        ['applied', 'Complete'],
        ['age', 'Complete'],
      ]);
      await expect(
        cloudwatch.send(new GetMetricDataCommand({ ...input, NextToken: 'not-a-token' })),
      ).rejects.toMatchObject({ name: 'InvalidNextToken' });
    });

    it('refuses metric math by name, as an InvalidParameterValue the SDK raises as its exception', async () => {
      const error = await getMetricData({
        MetricDataQueries: [stat('applied', 'Applied', 'Sum'), { Id: 'rate', Expression: 'applied / 60' }],
      }).catch((e: Error) => e);

      expect(error).toMatchObject({
        name: 'InvalidParameterValueException',
        message:
          'MetricDataQueries.member.2.Expression (metric math or SEARCH, query rate) is not supported by the local CloudWatch: it answers MetricStat queries only.',
        $metadata: expect.objectContaining({ httpStatusCode: 400 }),
      });
    });

    it.each([
      [
        'a percentile',
        { MetricDataQueries: [stat('p', 'Applied', 'p99')] },
        'MetricDataQueries.member.1.MetricStat.Stat "p99" (query p) is not supported by the local CloudWatch (it supports Sum, Maximum, Minimum, Average, SampleCount).',
      ],
      [
        'a unit',
        {
          MetricDataQueries: [
            {
              ...stat('u', 'Applied', 'Sum'),
              MetricStat: { ...stat('u', 'Applied', 'Sum').MetricStat!, Unit: 'Count' as const },
            },
          ],
        },
        'MetricDataQueries.member.1.MetricStat.Unit (query u) is not supported by the local CloudWatch: it keeps samples without their unit; leave Unit out.',
      ],
      [
        'a period CloudWatch does not take',
        { MetricDataQueries: [stat('p', 'Applied', 'Sum', { period: 7 })] },
        'The parameter MetricDataQueries.member.1.MetricStat.Period must be 1, 5, 10, 20, 30 or a multiple of 60, got 7.',
      ],
      [
        'two queries with one Id',
        { MetricDataQueries: [stat('a', 'Applied', 'Sum'), stat('a', 'Deferred', 'Sum')] },
        'The value a for field Id in MetricDataQueries is not unique.',
      ],
      [
        'an Id CloudWatch would refuse',
        { MetricDataQueries: [stat('Applied', 'Applied', 'Sum')] },
        'The value "Applied" for parameter MetricDataQueries.member.1.Id is not valid: it must start with a lowercase letter and hold only letters, digits and underscores.',
      ],
      [
        'an empty window',
        { ...window(T0, T0), MetricDataQueries: [stat('a', 'Applied', 'Sum')] },
        'The parameter StartTime must be less than the parameter EndTime.',
      ],
      [
        'a cross-account query',
        { MetricDataQueries: [{ ...stat('a', 'Applied', 'Sum'), AccountId: '123456789012' }] },
        "MetricDataQueries.member.1.AccountId (a cross-account query, query a) is not supported by the local CloudWatch: it holds one account's metrics.",
      ],
    ])('refuses %s with InvalidParameterValue, naming it', async (_what, input, message) => {
      await expect(getMetricData(input as GetMetricDataCommandInput)).rejects.toMatchObject({
        name: 'InvalidParameterValueException',
        message,
      });
    });

    it('refuses a query without MetricStat as a missing parameter', async () => {
      await expect(getMetricData({ MetricDataQueries: [{ Id: 'a' }] })).rejects.toMatchObject({
        name: 'MissingRequiredParameterException',
        message:
          'MetricDataQueries.member.1 (query a) needs a MetricStat: the local CloudWatch answers MetricStat queries only.',
      });
    });
  });

  describe('Action: ListMetrics', () => {
    const list = async (input: ListMetricsCommandInput) =>
      ((await cloudwatch.send(new ListMetricsCommand(input))).Metrics ?? []).map(
        (m) => `${m.Namespace} ${m.MetricName} ${(m.Dimensions ?? []).map((d) => `${d.Name}=${d.Value}`).join(',')}`,
      );

    it('lists each metric the samples hold once, with its whole dimension set', async () => {
      expect(await list({})).toEqual([
        'AWS/SQS ApproximateNumberOfMessagesVisible QueueName=a-queue',
        'PacedJobs AgeSinceFirstEnqueue job=a-job,service=a-job',
        'PacedJobs Applied extra=x,job=a-job,service=a-job',
        'PacedJobs Applied job=a-job,service=a-job',
        'PacedJobs Applied job=b-job,service=b-job',
      ]);
    });

    it('filters by namespace, metric name and dimensions (a filter without a value matches any value)', async () => {
      expect(await list({ Namespace: 'AWS/SQS' })).toEqual([
        'AWS/SQS ApproximateNumberOfMessagesVisible QueueName=a-queue',
      ]);
      expect(
        await list({ Namespace: 'PacedJobs', MetricName: 'Applied', Dimensions: [{ Name: 'job', Value: 'b-job' }] }),
      ).toEqual(['PacedJobs Applied job=b-job,service=b-job']);
      expect(await list({ Dimensions: [{ Name: 'extra' }] })).toEqual([
        'PacedJobs Applied extra=x,job=a-job,service=a-job',
      ]);
      expect(await list({ MetricName: 'Nothing' })).toEqual([]);
    });

    it('refuses cross-account listing by name', async () => {
      await expect(cloudwatch.send(new ListMetricsCommand({ IncludeLinkedAccounts: true }))).rejects.toMatchObject({
        name: 'InvalidParameterValueException',
        message:
          "IncludeLinkedAccounts (cross-account observability) is not supported by the local CloudWatch: it holds one account's metrics.",
      });
    });
  });

  describe('Other requests', () => {
    it('refuses an action it does not serve, naming the ones it does', async () => {
      await expect(
        cloudwatch.send(
          new PutMetricDataCommand({ Namespace: 'PacedJobs', MetricData: [{ MetricName: 'Applied', Value: 1 }] }),
        ),
      ).rejects.toMatchObject({
        name: 'InvalidAction',
        message: 'PutMetricData is not supported by the local CloudWatch (it answers GetMetricData and ListMetrics)',
      });
    });

    it('answers a query-protocol request (an older CLI) in its own XML, saying it speaks AWS JSON 1.0', async () => {
      const response = await fetch(server.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'Action=ListMetrics&Version=2010-08-01',
      });

      expect(response.status).toBe(400);
      const text = await response.text();
      expect(text).toContain('<Code>InvalidAction</Code>');
      expect(text).toContain('the local CloudWatch speaks AWS JSON 1.0 only');
    });

    it('answers a failing sample source as an internal error carrying its message', async () => {
      const failing = await startCloudWatchApi({
        samples: () => {
          throw new Error("sampling the queues' depth failed: boom");
        },
      });
      const client = new CloudWatchClient({
        endpoint: failing.endpoint,
        region: 'us-east-1',
        credentials: LOCAL_CREDENTIALS,
        maxAttempts: 1,
      });
      try {
        await expect(client.send(new ListMetricsCommand({}))).rejects.toMatchObject({
          name: 'InternalServiceFault',
          message: "sampling the queues' depth failed: boom",
        });
      } finally {
        client.destroy();
        await failing.close();
      }
    });
  });
});
