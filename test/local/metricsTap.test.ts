import { MetricsTap } from '../../local/metricsTap';

const emf = (job: string, age: number | number[]) =>
  `2026-11-29T10:12:22.432Z ${JSON.stringify({
    _aws: { Timestamp: 1, CloudWatchMetrics: [{ Namespace: 'PacedJobs', Dimensions: [['service', 'job']], Metrics: [{ Name: 'AgeSinceFirstEnqueue', Unit: 'Milliseconds' }] }] },
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
