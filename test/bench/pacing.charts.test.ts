import { dataPoints } from '../../console/charts';
import { renderHtmlReport } from '../../console/report';
import {
  modeCharts,
  pacingHtmlReport,
  quotaDropHtmlReport,
  type ModeReport,
  type PacingBenchRun,
} from '../../bench/pacing';
import type { QuotaDropModeReport, QuotaDropReport } from '../../bench/quotaDrop';

const T0 = Date.UTC(2026, 0, 15, 2, 0, 0);

describe('Function: modeCharts', () => {
  // 3 s at a 1 s quota of 5: 6 requests in the first second (the sixth answered 429), then 4 a second.
  const accepted = [0, 100, 200, 300, 400, 1000, 1250, 1500, 1750, 2000, 2250, 2500, 2750].map((ms) => T0 + ms);
  const arrivals = [...accepted, T0 + 450].sort((a, b) => a - b);
  const charts = modeCharts('limiter', { arrivals, accepted }, { allowedPerWindow: 5, windowMs: 1000 });

  it('charts the requests in any window of the quota against it: its largest value is the busiest window', () => {
    expect(charts.map((c) => c.id)).toEqual(['limiter:starts', 'limiter:rate']);
    const [requests, quota] = charts[0].lines;
    expect(Math.max(...(requests.values as number[]))).toBe(6);
    expect(quota).toMatchObject({ label: 'quota (5 per 1 s)', kind: 'limit' });
  });

  it('counts accepted starts and 429s per bucket, the 429s being the arrivals the provider did not accept', () => {
    const [acceptedLine, throttledLine] = charts[1].lines;
    expect((acceptedLine.values as number[]).reduce((a, b) => a + b, 0)).toBe(13);
    expect((throttledLine.values as number[]).reduce((a, b) => a + b, 0)).toBe(1);
    for (const c of charts) expect(dataPoints(c)).toBeGreaterThan(0);
  });
});

describe('Function: pacingHtmlReport', () => {
  it('has a section per mode with its charts and figures', () => {
    const mode: ModeReport = {
      allowedPerWindow: 5,
      maxStartsInAnyWindow: 5,
      utilization: 0.9,
      throttled: 0,
      p50WaitMs: 1,
      p99WaitMs: 2,
      requests: 2,
      missedSlots: 0,
      limiterErrors: 0,
      elapsedMs: 1000,
    };
    const timeline = { arrivals: [T0, T0 + 500], accepted: [T0, T0 + 500] };
    const run: PacingBenchRun = {
      report: {
        limiter: {
          ...mode,
          dynamodb: {
            writes: 1,
            reads: 0,
            lostRaces: 0,
            writesPerStart: 0.5,
            readsPerStart: 0,
            lostRacesPerStart: 0,
          } as never,
        },
        baseline: mode,
      },
      timelines: { limiter: timeline, baseline: timeline },
    };
    const report = pacingHtmlReport(run, { instances: 3, allowedPerWindow: 5, windowMs: 1000 });
    expect(report.sections.map((s) => s.heading)).toEqual([
      'Shared DynamoDB limiter',
      'Per-process tickers (the baseline)',
    ]);
    expect(report.sections[0].facts).toContainEqual(['most requests in any window', '5 of 5 (within quota)']);
    expect(report.sections.flatMap((s) => s.charts).map((c) => c.id)).toEqual([
      'limiter:starts',
      'limiter:rate',
      'baseline:starts',
      'baseline:rate',
    ]);
    expect(renderHtmlReport(report)).toContain('data-report-section="1"');
  });
});

describe('Function: quotaDropHtmlReport', () => {
  // Four windows: the quota halved in the second and third, the adaptive rate following it down and back.
  const windows = [
    { atMs: 0, allowed: 10, starts: 10, throttled: 0, rate: 10 },
    { atMs: 1000, allowed: 5, starts: 5, throttled: 3, rate: 6 },
    { atMs: 2000, allowed: 5, starts: 5, throttled: 0, rate: 5 },
    { atMs: 3000, allowed: 10, starts: 9, throttled: 0, rate: 9 },
  ];
  const adaptive = {
    windows,
    utilization: 0.97,
    throttledShare: 0.08,
    recoveryWindows: 0,
    accepted: 29,
    throttled: 3,
    requests: 32,
    maxStartsInAnyWindow: 10,
  } as unknown as QuotaDropModeReport;
  const report = {
    scenario: 'quota-drop',
    windowMs: 1000,
    allowedPerWindow: 10,
    instances: 3,
    phases: [
      { windows: 1, share: 1 },
      { windows: 2, share: 0.5 },
      { windows: 1, share: 1 },
    ],
    goals: { utilization: 0.9, throttledShare: 0.02, recoveryWindows: 2 },
    adaptive: { ...adaptive, goalsMet: { utilization: true, throttledShare: false, recoveryWindows: true } },
  } as QuotaDropReport;

  it("charts each window's accepted starts against the provider's true allowance, the 429s and the adaptive rate", () => {
    const html = quotaDropHtmlReport(report, T0);
    const [starts, throttled, rate] = html.sections[0].charts;
    expect(starts.x).toEqual([0, 1, 2, 3].map((k) => T0 / 1000 + k));
    expect(starts.lines).toEqual([
      { label: 'adaptive: accepted', values: [10, 5, 5, 9] },
      { label: "provider's true allowance", kind: 'limit', values: [10, 5, 5, 10] },
      { label: 'configured (10 per 1 s)', kind: 'limit', values: [10, 10, 10, 10] },
    ]);
    expect(throttled.lines).toEqual([{ label: 'adaptive: 429s', values: [0, 3, 0, 0] }]);
    expect(rate.lines[0]).toEqual({ label: 'adaptive rate', values: [10, 6, 5, 9] });
    expect(html.subtitle).toBe(
      '3 instances, configured 10 per 1 s; provider quota 1 windows at 10, then 2 windows at 5, then 1 windows at 10',
    );
    expect(html.sections[0].facts).toContainEqual([
      'adaptive: utilization of the true allowance',
      '0.97 (goal >= 0.9)',
    ]);
  });
});
