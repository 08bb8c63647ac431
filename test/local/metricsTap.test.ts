import { emfSamples, MetricsTap } from '../../local/metricsTap';

const emf = (job: string, age: number | number[]) =>
  `2026-11-29T10:12:22.432Z ${JSON.stringify({
    _aws: {
      Timestamp: 1,
      CloudWatchMetrics: [
        {
          Namespace: 'PacedJobs',
          Dimensions: [['service', 'job']],
          Metrics: [{ Name: 'AgeSinceFirstEnqueue', Unit: 'Milliseconds' }],
        },
      ],
    },
    service: job,
    job,
    AgeSinceFirstEnqueue: age,
  })}`;

describe('Class: MetricsTap', () => {
  describe('Method: observe', () => {
    it('keeps the largest AgeSinceFirstEnqueue per job, from single values and arrays', () => {
      const tap = new MetricsTap();
      tap.observe(emf('a-job', 1200));
      tap.observe(emf('a-job', [300, 4500, 10]));
      tap.observe(emf('b-job', 7));
      expect(tap.maxJobAgeMs('a-job')).toBe(4500);
      expect(tap.maxJobAgeMs('b-job')).toBe(7);
    });

    it('ignores plain log lines, broken JSON and EMF documents without the metric', () => {
      const tap = new MetricsTap();
      tap.observe('{"level":"INFO","message":"operation completed","job":"a-job"}');
      tap.observe('{"_aws": {broken');
      tap.observe(JSON.stringify({ _aws: {}, job: 'a-job', Applied: 1 }));
      expect(tap.maxJobAgeMs('a-job')).toBeUndefined();
    });
  });
});

describe('Function: emfSamples', () => {
  const directive = (metrics: string[], dimensions: string[][] = [['service', 'job']]) => ({
    Namespace: 'PacedJobs',
    Dimensions: dimensions,
    Metrics: metrics.map((Name) => ({ Name, Unit: 'Count' })),
  });
  const line = (aws: Record<string, unknown>, root: Record<string, unknown>) =>
    JSON.stringify({ _aws: aws, service: 'a-job', job: 'a-job', ...root });

  it("yields one sample per value, at the document's timestamp, with the dimension set's values", () => {
    const samples = emfSamples(
      line(
        { Timestamp: 1_000, CloudWatchMetrics: [directive(['Applied', 'SloMet'])] },
        { Applied: [1, 1, 1], SloMet: 1, AgeSinceFirstEnqueue: 5 },
      ),
      9_999,
    );
    const dims = { service: 'a-job', job: 'a-job' };
    expect(samples).toEqual([
      { namespace: 'PacedJobs', metricName: 'Applied', dimensions: dims, timestamp: 1_000, value: 1 },
      { namespace: 'PacedJobs', metricName: 'Applied', dimensions: dims, timestamp: 1_000, value: 1 },
      { namespace: 'PacedJobs', metricName: 'Applied', dimensions: dims, timestamp: 1_000, value: 1 },
      { namespace: 'PacedJobs', metricName: 'SloMet', dimensions: dims, timestamp: 1_000, value: 1 },
    ]);
  });

  it('takes the arrival time without a timestamp, and every dimension set and directive', () => {
    const aws = {
      CloudWatchMetrics: [
        directive(['Deferred'], [['service', 'job'], ['job']]),
        { ...directive(['ColdStart'], [['function_name']]), Namespace: 'Other' },
      ],
    };
    const samples = emfSamples(
      `2026-11-29T10:12:22.432Z INFO ${line(aws, { Deferred: 2, ColdStart: 1, function_name: 'fn' })}`,
      42,
    );
    expect(samples.map((s) => [s.namespace, s.metricName, s.dimensions, s.timestamp, s.value])).toEqual([
      ['PacedJobs', 'Deferred', { service: 'a-job', job: 'a-job' }, 42, 2],
      ['PacedJobs', 'Deferred', { job: 'a-job' }, 42, 2],
      ['Other', 'ColdStart', { function_name: 'fn' }, 42, 1],
    ]);
  });

  it('yields nothing for plain lines, broken JSON, documents without directives, a missing dimension or value', () => {
    expect(emfSamples('{"level":"INFO","message":"operation completed"}')).toEqual([]);
    expect(emfSamples('{"_aws": {broken')).toEqual([]);
    expect(emfSamples(JSON.stringify({ _aws: {}, job: 'a-job', Applied: 1 }))).toEqual([]);
    expect(emfSamples(line({ CloudWatchMetrics: [directive(['Applied'], [['tenant']])] }, { Applied: 1 }))).toEqual([]);
    expect(emfSamples(line({ CloudWatchMetrics: [directive(['Applied'])] }, { Applied: 'one' }))).toEqual([]);
  });
});
