// Chaos harness, the summary: a run's verdict as text for the terminal, as markdown for `--report FILE`, and as an HTML
// report with the run's charts (starts against the allowance with the injected storms, outcomes, job age, queue depth).
import type { ChartLine, ChartSpec } from '../console/chartSpec';
import {
  countPerBucket,
  flat,
  formatDuration,
  jobCharts,
  ofTimes,
  peakInWindowPerBucket,
  timeAxis,
  type TimeAxis,
} from '../console/charts';
import type { HtmlReport } from '../console/report';
import type { MetricSample } from '../local/metricsTap';
import type { Span } from './pacing';
import type { ChaosResult } from './run';

const figures = (inv: Record<string, unknown>): string =>
  Object.entries(inv)
    .filter(([k, v]) => k !== 'ok' && k !== 'batches' && !(Array.isArray(v) && v.length === 0))
    .map(([k, v]) => `${k} ${Array.isArray(v) ? v.join(', ') : String(v)}`)
    .join('; ');

const pairs = (counts: Record<string, number>): string =>
  Object.entries(counts)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

/** The admission timing behind the producer's recovery times, in one phrase. */
const timing = (r: ChaosResult): string | undefined =>
  r.admission &&
  `producer timeout ${r.admission.producerTimeoutSeconds} s, admission horizon ${r.admission.horizonSeconds} s, step visibility ${r.admission.visibilitySeconds} s, ${r.admission.maxReceiveCount} receives before the producer DLQ`;

/** The job, as far as the result records it (a result from before runs chose their job has none). */
const of = (r: ChaosResult): string => (r.job ? ` of ${r.job}` : '');

/** The starts against the allowance outside the storms while work waited; absent in a result recorded before it existed. */
function pacingLine(r: ChaosResult): string | undefined {
  const p = r.pacing?.outsideStorms;
  if (!p || !r.pacing) return undefined;
  const any = r.pacing.outsideStormsAnyDepth;
  return (
    `pacing: outside the storms, with work waiting (${p.seconds} s): ${p.starts} starts of ${p.allowed} allowed at ${r.pacing.allowancePerSecond}/s = ${p.utilization} of the allowance` +
    (any
      ? ` (${any.utilization} while any message was on the queue, failed records waiting out their visibility timeout included: ${any.starts} of ${any.allowed} over ${any.seconds} s)`
      : '')
  );
}

export function formatText(r: ChaosResult): string {
  const lines = [
    `chaos run${of(r)}: ${r.ops} operations, seed ${r.seed}, ${(r.durationMs / 1000).toFixed(1)} s, ${r.settled ? 'settled' : 'did NOT settle'}`,
  ];
  if (r.seeded) lines.push(`seeded: ${r.seeded}`);
  lines.push(`faults injected: ${pairs(r.faultsInjected)}`);
  // A result recorded before the producer's faults existed has neither.
  if (r.producerFaults) lines.push(`producer faults: ${pairs({ ...r.producerFaults })}`);
  const t = timing(r);
  if (t) lines.push(`admission: ${t}`);
  for (const [name, inv] of Object.entries(r.invariants))
    lines.push(`${inv.ok ? 'PASS' : 'FAIL'}  ${name}: ${figures(inv)}`);
  const p = pacingLine(r);
  if (p) lines.push(p);
  lines.push(r.ok ? 'OK' : 'FAILED');
  return lines.join('\n');
}

export function formatMarkdown(r: ChaosResult): string {
  const t = timing(r);
  return [
    `# Chaos run${of(r)}: ${r.ok ? 'every invariant held' : 'FAILED'}`,
    '',
    `${r.ops} operations${r.seeded ? ` (seeded: ${r.seeded})` : ''}, seed ${r.seed}, ${(r.durationMs / 1000).toFixed(1)} s, ${r.settled ? 'settled' : 'did not settle'}.`,
    ...(t ? ['', `Admission: ${t}.`] : []),
    '',
    '## Faults injected',
    '',
    '| fault | count |',
    '| --- | ---: |',
    ...Object.entries(r.faultsInjected).map(([k, v]) => `| ${k} | ${v} |`),
    ...(r.producerFaults
      ? [
          '',
          '## Producer faults',
          '',
          '| fault | count |',
          '| --- | ---: |',
          ...Object.entries(r.producerFaults).map(([k, v]) => `| ${k} | ${v} |`),
        ]
      : []),
    '',
    '## Invariants',
    '',
    '| invariant | held | figures |',
    '| --- | --- | --- |',
    ...Object.entries(r.invariants).map(
      ([name, inv]) => `| ${name} | ${inv.ok ? 'yes' : 'NO'} | ${figures(inv).replace(/\|/g, '\\|')} |`,
    ),
    '',
    ...(r.pacing
      ? [
          '## Pacing outside the storms',
          '',
          `${pacingLine(r)}.`,
          '',
          `| from (s) | starts | outside storms, work waiting | allowed there | storm ms |`,
          '| ---: | ---: | ---: | ---: | ---: |',
          ...r.pacing.windows.map(
            (w) => `| ${w.fromSeconds} | ${w.starts} | ${w.countedStarts} | ${w.allowed} | ${w.stormMs} |`,
          ),
          '',
        ]
      : []),
  ].join('\n');
}

/** What a chaos run's charts are built from: chaos/run.ts gathers it as the run goes. */
export interface ChaosTimeline {
  job: string;
  /** From the first fire to the run's end, epoch ms. */
  fromMs: number;
  toMs: number;
  /** The job's allowance for the run (its rate, retimed): at most `starts` per `intervalMs` in any window. */
  allowance: { starts: number; intervalMs: number };
  /** The job's SLO, when it has one. */
  sloMinutes?: number;
  /**
   * The starts its fake downstream logged (arrivals that were not 429s or replays: chaos/invariants.ts
   * isNonReplayedStart), epoch ms; undefined for a job without one, whose starts are then read off its metrics.
   */
  starts?: readonly number[];
  /** The 429s its fake downstream answered, epoch ms. */
  throttles?: readonly number[];
  /** The injected 429 storms, epoch ms. */
  storms: readonly Span[];
  /** What CloudWatch would hold of the run: the functions' EMF metrics and the queues' depth (the session's recorder). */
  samples: readonly MetricSample[];
  queueName?: string;
  dlqName?: string;
}

/** 1 for a bucket any storm overlaps, else 0. */
function inStorm(axis: TimeAxis, storms: readonly Span[]): number[] {
  return axis.x.map((x) => {
    const from = x * 1000;
    const to = from + axis.stepMs;
    return storms.some(([a, b]) => a < to && b > from) ? 1 : 0;
  });
}

/**
 * The run's charts: the job's own (console/charts.ts jobCharts: outcomes, job age, queue depth) and, for a job with a
 * fake downstream, its starts as the downstream logged them (exact, where the metrics are stamped at each invocation's
 * end) in two charts: in any window of the allowance against it, and per bucket, with the 429s. The injected storms
 * are a dashed line at the allowance's height over the buckets they touch, so a cut in the rate lines up with its cause.
 */
export function chaosCharts(t: ChaosTimeline): ChartSpec[] {
  const window = { fromMs: t.fromMs, toMs: Math.max(t.fromMs, t.toMs) };
  const charts = jobCharts(
    t.samples,
    { job: t.job, allowance: t.allowance, sloMinutes: t.sloMinutes, queueName: t.queueName, dlqName: t.dlqName },
    window,
  );
  const axis = timeAxis(window);
  const storm = inStorm(axis, t.storms);
  const stormLine = (height: number): ChartLine[] =>
    storm.some((s) => s > 0)
      ? [{ label: '429 storm (injected)', kind: 'limit', values: storm.map((s) => s * height) }]
      : [];
  const windowText = formatDuration(t.allowance.intervalMs);
  const id = (name: string) => `${t.job}:${name}`;
  if (t.starts === undefined) {
    // The metrics' starts chart stays; the storms (none without a downstream, but say so if any) go on it.
    const starts = charts.find((c) => c.id === id('starts'));
    if (starts) starts.lines.push(...stormLine(t.allowance.starts));
    return charts;
  }
  const perBucket = (t.allowance.starts * axis.stepMs) / t.allowance.intervalMs;
  const exact: ChartSpec[] = [
    {
      id: id('starts'),
      title: `Starts at the downstream in any ${windowText} window`,
      unit: `starts per ${windowText}`,
      x: axis.x,
      lines: [
        { label: 'starts', values: peakInWindowPerBucket(ofTimes(t.starts), axis, t.allowance.intervalMs) },
        {
          label: `allowance (${t.allowance.starts} per ${windowText})`,
          kind: 'limit',
          values: flat(axis, t.allowance.starts),
        },
        ...stormLine(t.allowance.starts),
      ],
    },
    {
      id: id('rate'),
      title: `Starts and 429s at the downstream per ${formatDuration(axis.stepMs)}`,
      unit: `per ${formatDuration(axis.stepMs)}`,
      x: axis.x,
      lines: [
        { label: 'starts', values: countPerBucket(ofTimes(t.starts), axis) },
        { label: '429s', values: countPerBucket(ofTimes(t.throttles ?? []), axis) },
        {
          label: `allowance (${Number(perBucket.toFixed(2))} per ${formatDuration(axis.stepMs)})`,
          kind: 'limit',
          values: flat(axis, Number(perBucket.toFixed(2))),
        },
        ...stormLine(Number(perBucket.toFixed(2))),
      ],
    },
  ];
  return [...exact, ...charts.filter((c) => c.id !== id('starts'))];
}

/** A chaos run as an HTML report: the verdict and the faults as facts, the run's charts (recorded in its result). */
export function chaosHtmlReport(r: ChaosResult): HtmlReport {
  const facts: [string, string][] = [
    ['verdict', r.ok ? 'every invariant held' : 'FAILED'],
    ['operations', `${r.ops}${r.seeded ? ` (seeded: ${r.seeded})` : ''}`],
    ['seed', String(r.seed)],
    ['duration', `${(r.durationMs / 1000).toFixed(1)} s, ${r.settled ? 'settled' : 'did not settle'}`],
    ...Object.entries(r.invariants).map(([name, inv]): [string, string] => [
      name,
      `${inv.ok ? 'PASS' : 'FAIL'}: ${figures(inv)}`,
    ]),
  ];
  const p = pacingLine(r);
  if (p) facts.push(['pacing', p.replace(/^pacing: /, '')]);
  facts.push(['faults injected', pairs(r.faultsInjected)]);
  if (r.producerFaults) facts.push(['producer faults', pairs({ ...r.producerFaults })]);
  const t = timing(r);
  if (t) facts.push(['admission', t]);
  if (r.chartsError) facts.push(['charts', `could not be built: ${r.chartsError}`]);
  return {
    title: `Chaos run${of(r)}: ${r.ok ? 'every invariant held' : 'FAILED'}`,
    subtitle: `${r.ops} operations, seed ${r.seed}`,
    sections: [{ heading: r.job ?? 'the run', charts: r.charts ?? [], facts }],
  };
}
