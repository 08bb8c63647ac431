// The metric recorder's bounds (a `--serve` session records for hours): samples past the retention and over the ceiling
// are dropped, oldest first; and the run report's job age read off the samples.
import type { SQSClient } from '@aws-sdk/client-sqs';
import { maxJobAgeMs, MetricRecorder, MetricRecorderError } from '../../local/metricSamples';
import type { MetricSample } from '../../local/metricsTap';

const emf = (job: string, metric: string, value: number, timestamp: number) =>
  JSON.stringify({
    _aws: {
      Timestamp: timestamp,
      CloudWatchMetrics: [
        { Namespace: 'PacedJobs', Dimensions: [['service', 'job']], Metrics: [{ Name: metric, Unit: 'Count' }] },
      ],
    },
    service: job,
    job,
    [metric]: value,
  });

/** An SQS client that answers every GetQueueAttributes with the same depth. */
const sqs = {
  send: async () => ({
    Attributes: {
      ApproximateNumberOfMessages: '3',
      ApproximateNumberOfMessagesNotVisible: '1',
      ApproximateNumberOfMessagesDelayed: '0',
    },
  }),
} as unknown as SQSClient;

describe('Class: MetricRecorder', () => {
  describe('Option: retentionMs', () => {
    it('drops the samples older than the retention, from the oldest, as new ones arrive', async () => {
      let now = 1_000_000;
      const recorder = new MetricRecorder({
        sqs,
        queues: [{ url: 'http://q', queueName: 'q' }],
        retentionMs: 10_000,
        now: () => now,
      });
      recorder.observe(emf('a', 'Applied', 1, now - 20_000));
      recorder.observe(emf('a', 'Applied', 2, now - 5_000));
      await recorder.pollOnce();
      expect(recorder.samples().map((s) => s.value)).toEqual([2, 3, 1, 0]);
      expect(recorder.dropped).toBe(1);

      now += 6_000;
      recorder.observe(emf('a', 'Applied', 4, now));

      expect(recorder.samples().map((s) => s.value)).toEqual([3, 1, 0, 4]);
      expect(recorder.samples().every((s) => s.timestamp >= now - 10_000)).toBe(true);
      expect(recorder.dropped).toBe(2);
    });
  });

  describe('Option: maxSamples', () => {
    it('holds at most the ceiling, dropping the oldest down to nine tenths of it', () => {
      const recorder = new MetricRecorder({ sqs, queues: [], maxSamples: 10 });
      for (let i = 1; i <= 11; i++) recorder.observe(emf('a', 'Applied', i, i));

      expect(recorder.samples().map((s) => s.value)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11]);
      expect(recorder.dropped).toBe(2);
    });

    it('refuses a ceiling or retention that would keep nothing', () => {
      expect(() => new MetricRecorder({ sqs, queues: [], maxSamples: 0 })).toThrow(
        new MetricRecorderError('retentionMs must be above 0 and maxSamples at least 1; got Infinity and 0'),
      );
    });
  });
});

describe('Class: MetricRecorder (samples the services publish)', () => {
  describe('Method: record', () => {
    it('keeps a sample a local service published, beside the EMF ones, within the same ceiling', () => {
      const recorder = new MetricRecorder({ sqs, queues: [], maxSamples: 10 });
      const published = (value: number): MetricSample => ({
        namespace: 'AWS/Lambda',
        metricName: 'InvokedEventCount',
        dimensions: { EventSourceMappingUUID: 'local-M' },
        timestamp: 1_000 + value,
        value,
      });
      recorder.observe(emf('a', 'Applied', 1, 1_000));
      recorder.record(published(5));
      expect(recorder.samples().map((s) => [s.namespace, s.metricName, s.value])).toEqual([
        ['PacedJobs', 'Applied', 1],
        ['AWS/Lambda', 'InvokedEventCount', 5],
      ]);
      for (let i = 10; i < 19; i++) recorder.record(published(i));
      expect(recorder.samples().map((s) => s.value)).toEqual([10, 11, 12, 13, 14, 15, 16, 17, 18]);
      expect(recorder.dropped).toBe(2);
    });
  });
});

describe('Function: maxJobAgeMs', () => {
  const sample = (job: string, metricName: string, value: number): MetricSample => ({
    namespace: 'PacedJobs',
    metricName,
    dimensions: { service: job, job },
    timestamp: 1,
    value,
  });

  it("is the job's largest AgeSinceFirstEnqueue, and undefined when none of the job's operations completed", () => {
    const samples = [
      sample('a', 'AgeSinceFirstEnqueue', 1200),
      sample('a', 'AgeSinceFirstEnqueue', 4500),
      sample('a', 'Applied', 9999),
      sample('b', 'AgeSinceFirstEnqueue', 7),
    ];

    expect(maxJobAgeMs(samples, 'a')).toBe(4500);
    expect(maxJobAgeMs(samples, 'b')).toBe(7);
    expect(maxJobAgeMs(samples, 'c')).toBeUndefined();
  });
});
