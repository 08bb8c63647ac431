import { MetricName } from '../../lambda/adapters/observability';
import { maxInAnyWindow } from '../../lambda/core/pacing/slidingWindow';
import type { MetricSample } from '../../local/metricsTap';
import { SQS_DEPTH_METRICS } from '../../local/metricSamples';
import type { ChartSpec } from '../../console/chartSpec';
import {
  CHART_METRICS,
  ChartInputError,
  countPerBucket,
  dataPoints,
  defaultStepMs,
  formatDuration,
  jobCharts,
  ofTimes,
  peakInWindowPerBucket,
  SQS_METRICS,
  timeAxis,
} from '../../console/charts';

const T0 = Date.UTC(2026, 0, 15, 2, 0, 0);
const JOB = 'payments-job';

/** One pipeline metric of JOB, as Powertools writes it (dimensions service and job). */
const metric = (metricName: string, atS: number, value = 1, job = JOB): MetricSample => ({
  namespace: 'PacedJobs',
  metricName,
  dimensions: { service: job, job },
  timestamp: T0 + atS * 1000,
  value,
});
const depth = (metricName: string, queueName: string, atS: number, value: number): MetricSample => ({
  namespace: 'AWS/SQS',
  metricName,
  dimensions: { QueueName: queueName },
  timestamp: T0 + atS * 1000,
  value,
});
const chart = (charts: ChartSpec[], name: string): ChartSpec => {
  const found = charts.find((c) => c.id === `${JOB}:${name}`);
  if (!found) throw new Error(`no chart ${name} in ${charts.map((c) => c.id).join(', ')}`);
  return found;
};
const line = (c: ChartSpec, label: string) => {
  const found = c.lines.find((l) => l.label === label || l.label.startsWith(label));
  if (!found) throw new Error(`chart ${c.id} has no line ${label}: ${c.lines.map((l) => l.label).join(', ')}`);
  return found;
};

describe('Constants: the metric names the charts read', () => {
  it("are the pipeline's own names (observability.ts MetricName) and the AWS/SQS names the recorder publishes", () => {
    for (const [key, name] of Object.entries(CHART_METRICS))
      expect(MetricName[key as keyof typeof MetricName]).toBe(name);
    expect(Object.values(SQS_METRICS).sort()).toEqual(Object.values(SQS_DEPTH_METRICS).sort());
  });
});

describe('Function: timeAxis', () => {
  it('aligns the buckets to the step and covers the window', () => {
    const axis = timeAxis({ fromMs: T0 + 2500, toMs: T0 + 10_000, stepMs: 1000 });
    expect(axis).toMatchObject({ startMs: T0 + 2000, stepMs: 1000, count: 8 });
    expect(axis.x[0]).toBe((T0 + 2000) / 1000);
    expect(axis.x[7]).toBe((T0 + 9000) / 1000);
  });

  it('chooses a whole step of at most 120 buckets from the span', () => {
    expect(defaultStepMs(60_000)).toBe(500);
    expect(defaultStepMs(3_600_000)).toBe(30_000);
    expect(defaultStepMs(86_400_000)).toBe(900_000);
    expect(timeAxis({ fromMs: T0, toMs: T0 + 3_600_000 }).count).toBe(120);
  });

  it('throws naming the window when it is backwards, or too fine to chart', () => {
    expect(() => timeAxis({ fromMs: T0 + 1, toMs: T0 })).toThrow(
      new ChartInputError(`a chart window needs finite fromMs <= toMs; got fromMs ${T0 + 1}, toMs ${T0}`),
    );
    expect(() => timeAxis({ fromMs: T0, toMs: T0 + 86_400_000, stepMs: 1 })).toThrow(
      'a chart window of 86400000 ms in steps of 1 ms is 86400000 buckets, over the 20000 a chart takes; pass a larger stepMs',
    );
  });
});

describe('Function: peakInWindowPerBucket', () => {
  const axis = timeAxis({ fromMs: T0, toMs: T0 + 120_000, stepMs: 10_000 });

  it('counts 5 starts within 60 s as 5 in every bucket a window holding all five ends in', () => {
    const starts = ofTimes([1, 12, 25, 38, 51].map((s) => T0 + s * 1000));
    expect(peakInWindowPerBucket(starts, axis, 60_000)).toEqual([1, 2, 3, 4, 4, 5, 5, 4, 3, 2, 1, 1]);
  });

  it('sees a peak between two bucket edges: its largest value is the busiest window, as maxInAnyWindow finds it', () => {
    // Two starts just before the 10 s edge and two before the 68 s mark: the window [8 s, 68 s) holds all four, but a
    // window ending on an edge (every 10 s) holds two at most.
    const times = [8, 9, 62, 67].map((s) => T0 + s * 1000);
    const peaks = peakInWindowPerBucket(ofTimes(times), axis, 60_000);
    expect(Math.max(...peaks)).toBe(maxInAnyWindow(times, 60_000));
    expect(Math.max(...peaks)).toBe(4);
    const atEdges = axis.x.map((x) => times.filter((t) => t >= x * 1000 - 60_000 && t < x * 1000).length);
    expect(Math.max(...atEdges)).toBe(2);
  });

  it('counts starts before the axis through the windows that reach into it, and weighs a sample by its value', () => {
    const peaks = peakInWindowPerBucket(
      [
        { atMs: T0 - 30_000, count: 3 },
        { atMs: T0 + 5000, count: 2 },
      ],
      axis,
      60_000,
    );
    expect(peaks.slice(0, 5)).toEqual([5, 5, 5, 2, 2]);
  });
});

describe('Function: jobCharts', () => {
  const window = { fromMs: T0, toMs: T0 + 120_000, stepMs: 10_000 };
  const job = {
    job: JOB,
    allowance: { starts: 4, intervalMs: 60_000 },
    sloMinutes: 30,
    queueName: 'jobs-queue',
    dlqName: 'jobs-dlq',
  };

  it('draws 5 starts inside a 60 s window as 5 against an allowance of 4: applied, already done and 429s, each once', () => {
    const samples = [
      metric(MetricName.Applied, 1),
      metric(MetricName.Applied, 12),
      metric(MetricName.AlreadyDone, 25),
      // A 429: the record is re-published to wait, so it counts Throttled and Deferred; one start.
      metric(MetricName.Throttled, 38),
      metric(MetricName.Deferred, 38),
      metric(MetricName.Applied, 51),
      // A paced deferral (no call), a failure and another job's start: none is a start of this job.
      metric(MetricName.Deferred, 52),
      metric(MetricName.Failed, 53),
      metric(MetricName.Applied, 54, 1, 'other-job'),
    ];
    const starts = chart(jobCharts(samples, job, window), 'starts');
    expect(starts).toMatchObject({ title: 'Starts in any 60 s window', unit: 'starts per 60 s' });
    expect(starts.x).toHaveLength(12);
    expect(line(starts, 'starts').values).toEqual([1, 2, 3, 4, 4, 5, 5, 4, 3, 2, 1, 1]);
    const allowance = line(starts, 'allowance');
    expect(allowance).toEqual({ label: 'allowance (4 per 60 s)', kind: 'limit', values: new Array(12).fill(4) });
  });

  it('counts the outcomes per bucket: completions (applied + already done), deferrals, 429s; 0 where none', () => {
    const samples = [
      metric(MetricName.Applied, 1),
      metric(MetricName.AlreadyDone, 2),
      metric(MetricName.Applied, 15, 3),
      metric(MetricName.Deferred, 16),
      metric(MetricName.Throttled, 16),
      metric(MetricName.Deferred, 17, 2),
    ];
    const outcomes = chart(jobCharts(samples, job, window), 'outcomes');
    expect(outcomes).toMatchObject({ title: 'Outcomes per 10 s', unit: 'per 10 s' });
    expect(line(outcomes, 'completed').values.slice(0, 3)).toEqual([2, 3, 0]);
    expect(line(outcomes, 'deferred').values.slice(0, 3)).toEqual([0, 3, 0]);
    expect(line(outcomes, '429s').values.slice(0, 3)).toEqual([0, 1, 0]);
    expect(line(outcomes, 'completed').values.slice(3)).toEqual(new Array(9).fill(0));
  });

  it('charts the oldest age per bucket in minutes against the SLO, null where nothing completed', () => {
    const samples = [
      metric(MetricName.AgeSinceFirstEnqueue, 3, 90_000),
      metric(MetricName.AgeSinceFirstEnqueue, 4, 180_000),
      metric(MetricName.AgeSinceFirstEnqueue, 31, 30_000),
    ];
    const age = chart(jobCharts(samples, job, window), 'age');
    expect(age.unit).toBe('minutes');
    expect(line(age, 'oldest').values.slice(0, 5)).toEqual([3, null, null, 0.5, null]);
    expect(line(age, 'SLO')).toEqual({ label: 'SLO (30 min)', kind: 'limit', values: new Array(12).fill(30) });
  });

  it('charts the age in seconds for a job without an SLO, with no limit line', () => {
    const age = chart(jobCharts([metric(MetricName.AgeSinceFirstEnqueue, 3, 4250)], { job: JOB }, window), 'age');
    expect(age.unit).toBe('seconds');
    expect(age.lines).toHaveLength(1);
    expect(age.lines[0].values[0]).toBe(4.25);
  });

  it("charts the queue's visible, in flight, delayed and DLQ depth (most per bucket), only the lines with samples", () => {
    const samples = [
      metric(MetricName.Applied, 1),
      depth(SQS_METRICS.visible, 'jobs-queue', 1, 40),
      depth(SQS_METRICS.visible, 'jobs-queue', 2, 55),
      depth(SQS_METRICS.inFlight, 'jobs-queue', 2, 10),
      depth(SQS_METRICS.visible, 'jobs-dlq', 25, 2),
      depth(SQS_METRICS.visible, 'another-queue', 2, 999),
    ];
    const queue = chart(jobCharts(samples, job, window), 'queue');
    expect(queue.unit).toBe('messages');
    expect(queue.lines.map((l) => l.label)).toEqual(['visible', 'in flight', 'DLQ']);
    expect(line(queue, 'visible').values.slice(0, 3)).toEqual([55, null, null]);
    expect(line(queue, 'in flight').values.slice(0, 3)).toEqual([10, null, null]);
    expect(line(queue, 'DLQ').values.slice(0, 3)).toEqual([null, null, 2]);
  });

  it('leaves the queue chart out without depth samples, and says "no data yet" (all null) for a job that emitted nothing', () => {
    const charts = jobCharts([metric(MetricName.Applied, 1, 1, 'other-job')], job, window);
    expect(charts.map((c) => c.id)).toEqual([`${JOB}:starts`, `${JOB}:outcomes`, `${JOB}:age`]);
    for (const c of charts) expect(dataPoints(c)).toBe(0);
    // The limits still stand: the reader sees what the job will be measured against.
    expect(line(chart(charts, 'starts'), 'allowance').values[0]).toBe(4);
  });

  it('counts starts over 60 s for a job without an allowance, with no limit line', () => {
    const starts = chart(jobCharts([metric(MetricName.Applied, 1)], { job: JOB }, window), 'starts');
    expect(starts.unit).toBe('starts per 60 s');
    expect(starts.lines.map((l) => l.label)).toEqual(['starts']);
  });

  it('refuses an allowance that is no allowance, naming the job', () => {
    expect(() => jobCharts([], { job: JOB, allowance: { starts: 4, intervalMs: 0 } }, window)).toThrow(
      new ChartInputError(`job ${JOB}: an allowance needs starts >= 0 and intervalMs > 0; got 4 per 0 ms`),
    );
  });
});

describe('Function: countPerBucket', () => {
  it('sums the events of each bucket and leaves out those outside the axis', () => {
    const axis = timeAxis({ fromMs: T0, toMs: T0 + 3000, stepMs: 1000 });
    expect(countPerBucket(ofTimes([T0 - 1, T0, T0 + 999, T0 + 2500, T0 + 3000]), axis)).toEqual([2, 0, 1]);
  });
});

describe('Function: formatDuration', () => {
  it('says a duration as a reader would', () => {
    expect([500, 1000, 1500, 60_000, 90_000, 300_000, 3_600_000, 7_200_000].map(formatDuration)).toEqual([
      '500 ms',
      '1 s',
      '1.5 s',
      '60 s',
      '90 s',
      '5 min',
      '60 min',
      '2 h',
    ]);
  });
});
