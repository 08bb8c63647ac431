import { dataPoints } from '../../console/charts';
import { renderHtmlReport } from '../../console/report';
import type { MetricSample } from '../../local/metricsTap';
import { chaosCharts, chaosHtmlReport, type ChaosTimeline } from '../../chaos/report';
import type { ChaosResult } from '../../chaos/run';

const T0 = Date.UTC(2026, 0, 15, 2, 0, 0);
const JOB = 'payments-job';
const s = (seconds: number) => T0 + seconds * 1000;

/** 30 s of a chaos run at 20 starts per 10 s: a start every 0.5 s, but none during the 429 storm from 10 to 12 s. */
function timeline(): ChaosTimeline {
  const starts: number[] = [];
  for (let t = 0; t < 30; t += 0.5) if (t < 10 || t >= 12) starts.push(s(t));
  const samples: MetricSample[] = [
    ...starts.map((at) => ({
      namespace: 'PacedJobs',
      metricName: 'Applied',
      dimensions: { service: JOB, job: JOB },
      timestamp: at,
      value: 1,
    })),
    {
      namespace: 'PacedJobs',
      metricName: 'AgeSinceFirstEnqueue',
      dimensions: { service: JOB, job: JOB },
      timestamp: s(20),
      value: 7000,
    },
    {
      namespace: 'AWS/SQS',
      metricName: 'ApproximateNumberOfMessagesVisible',
      dimensions: { QueueName: 'work' },
      timestamp: s(1),
      value: 50,
    },
  ];
  return {
    job: JOB,
    fromMs: s(0),
    toMs: s(30),
    allowance: { starts: 20, intervalMs: 10_000 },
    starts,
    throttles: [s(10), s(10.5), s(11), s(11.5)],
    storms: [[s(10), s(12)]],
    samples,
    queueName: 'work',
  };
}

describe('Function: chaosCharts', () => {
  const charts = chaosCharts(timeline());
  const byId = (name: string) => charts.find((c) => c.id === `${JOB}:${name}`)!;

  it("charts the downstream's starts in any window against the allowance, then the job's own charts", () => {
    expect(charts.map((c) => c.id)).toEqual([
      `${JOB}:starts`,
      `${JOB}:rate`,
      `${JOB}:outcomes`,
      `${JOB}:age`,
      `${JOB}:queue`,
    ]);
    for (const c of charts) expect(dataPoints(c)).toBeGreaterThan(0);
    const starts = byId('starts');
    const values = starts.lines[0].values as number[];
    // 2 starts a second: 20 in every full 10 s window without the storm, never more than the allowance.
    expect(Math.max(...values)).toBe(20);
    expect(starts.lines[1]).toMatchObject({ label: 'allowance (20 per 10 s)', kind: 'limit' });
  });

  it('marks the storm over the buckets it touches, where the starts stop and the 429s are', () => {
    const rate = byId('rate');
    const stepS = rate.x[1] - rate.x[0];
    const storm = rate.lines.find((l) => l.label === '429 storm (injected)')!;
    expect(storm.kind).toBe('limit');
    const inStorm = rate.x
      .map((x, i) => [x, storm.values[i]] as const)
      .filter(([, v]) => (v ?? 0) > 0)
      .map(([x]) => x - T0 / 1000);
    expect(inStorm[0]).toBe(10);
    expect(inStorm[inStorm.length - 1]).toBe(12 - stepS);
    const at = (label: string, second: number) =>
      rate.lines.find((l) => l.label === label)!.values[rate.x.indexOf(T0 / 1000 + second)];
    expect(at('starts', 10.5 - (10.5 % stepS))).toBe(0);
    expect(at('429s', 10)).toBeGreaterThan(0);
    expect(at('starts', 5)).toBeGreaterThan(0);
  });

  it("keeps the metrics' starts chart for a job without a fake downstream", () => {
    const { starts: _s, throttles: _t, ...withoutDownstream } = timeline();
    const charts = chaosCharts({ ...withoutDownstream, storms: [] });
    expect(charts.map((c) => c.id)).toEqual([`${JOB}:starts`, `${JOB}:outcomes`, `${JOB}:age`, `${JOB}:queue`]);
    expect(charts[0].title).toBe('Starts in any 10 s window');
    expect(dataPoints(charts[0])).toBeGreaterThan(0);
  });
});

describe('Function: chaosHtmlReport', () => {
  const result: ChaosResult = {
    ok: true,
    job: JOB,
    ops: 56,
    seed: 4,
    settled: true,
    durationMs: 30_000,
    faultsInjected: { downstreamStormThrottles: 4 },
    invariants: {
      effectsEqualUniqueOperations: { ok: true },
      nothingLost: { ok: true },
      rateRespected: { ok: true, maxStartsInAnyWindow: 20, limit: 20 },
      onlyTerminalFailuresInDlq: { ok: true },
      ledgerExact: { ok: true },
    },
    charts: chaosCharts(timeline()),
  };

  it("puts the verdict and the faults in the facts and the run's charts in its one section", () => {
    const report = chaosHtmlReport(result);
    expect(report.title).toBe(`Chaos run of ${JOB}: every invariant held`);
    expect(report.sections).toHaveLength(1);
    expect(report.sections[0].charts).toBe(result.charts);
    expect(report.sections[0].facts).toEqual(
      expect.arrayContaining([
        ['verdict', 'every invariant held'],
        ['rateRespected', 'PASS: maxStartsInAnyWindow 20; limit 20'],
        ['faults injected', 'downstreamStormThrottles 4'],
      ]),
    );
    expect(renderHtmlReport(report)).toContain(`data-report-section="0"`);
  });

  it('renders a run recorded before charts, and one whose charts failed, saying why', () => {
    const { charts: _c, ...old } = result;
    expect(chaosHtmlReport(old).sections[0].charts).toEqual([]);
    expect(chaosHtmlReport({ ...old, chartsError: 'MetricRecorderError: boom' }).sections[0].facts).toContainEqual([
      'charts',
      'could not be built: MetricRecorderError: boom',
    ]);
  });
});
