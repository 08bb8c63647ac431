// Chaos harness, the summary: a run's verdict as text for the terminal and as markdown for `--report FILE`.
import type { ChaosResult } from './run';

const figures = (inv: Record<string, unknown>): string =>
  Object.entries(inv)
    .filter(([k, v]) => k !== 'ok' && k !== 'batches' && !(Array.isArray(v) && v.length === 0))
    .map(([k, v]) => `${k} ${Array.isArray(v) ? v.join(', ') : String(v)}`)
    .join('; ');

const pairs = (counts: Record<string, number>): string => Object.entries(counts).map(([k, v]) => `${k} ${v}`).join(', ');

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
  return `pacing: outside the storms, with work waiting (${p.seconds} s): ${p.starts} starts of ${p.allowed} allowed at ${r.pacing.allowancePerSecond}/s = ${p.utilization} of the allowance`;
}

export function formatText(r: ChaosResult): string {
  const lines = [`chaos run${of(r)}: ${r.ops} operations, seed ${r.seed}, ${(r.durationMs / 1000).toFixed(1)} s, ${r.settled ? 'settled' : 'did NOT settle'}`];
  if (r.seeded) lines.push(`seeded: ${r.seeded}`);
  lines.push(`faults injected: ${pairs(r.faultsInjected)}`);
  // A result recorded before the producer's faults existed has neither.
  if (r.producerFaults) lines.push(`producer faults: ${pairs({ ...r.producerFaults })}`);
  const t = timing(r);
  if (t) lines.push(`admission: ${t}`);
  for (const [name, inv] of Object.entries(r.invariants)) lines.push(`${inv.ok ? 'PASS' : 'FAIL'}  ${name}: ${figures(inv)}`);
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
      ? ['', '## Producer faults', '', '| fault | count |', '| --- | ---: |', ...Object.entries(r.producerFaults).map(([k, v]) => `| ${k} | ${v} |`)]
      : []),
    '',
    '## Invariants',
    '',
    '| invariant | held | figures |',
    '| --- | --- | --- |',
    ...Object.entries(r.invariants).map(([name, inv]) => `| ${name} | ${inv.ok ? 'yes' : 'NO'} | ${figures(inv).replace(/\|/g, '\\|')} |`),
    '',
    ...(r.pacing
      ? [
          '## Pacing outside the storms',
          '',
          `${pacingLine(r)}.`,
          '',
          `| from (s) | starts | outside storms, work waiting | allowed there | storm ms |`,
          '| ---: | ---: | ---: | ---: | ---: |',
          ...r.pacing.windows.map((w) => `| ${w.fromSeconds} | ${w.starts} | ${w.countedStarts} | ${w.allowed} | ${w.stormMs} |`),
          '',
        ]
      : []),
  ].join('\n');
}
