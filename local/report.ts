// The end of a local run: per-job numbers and the four checks (nothing lost, no dead letter that no fault explains, one
// effect per operation, pacing held),
// as a table for people and one JSON document for machines. Pure: the run hands in what it observed.
import { maxInAnyWindow } from './provider';

/** What the run observed for one job. */
export interface JobObservation {
  /** From the run ledger, summed over this run's batches. */
  discovered: number;
  published: number;
  completed: number;
  rejected: number;
  duplicates: number;
  deferred: number;
  /** Messages in the job's DLQ at the end. */
  dlq: number;
  /** The `failureReason` of (some of) those messages, as the consumer set it; for the report. */
  dlqReasons?: string[];
  /**
   * Dead letters the run caused on purpose (an injected fault). @default 0: a local demo injects none, so any dead
   * letter is a bug, even when nothing is lost.
   */
  expectedDeadLetters?: number;
  /** Downstream effects per operation key (payment, object, tenant). */
  effectsByOperation: Map<string, number>;
  /** Downstream effects per item where an operation touches several (sessions); each should be exactly one. */
  effectsByItem?: Map<string, number>;
  /** Effects on targets the run did not seed for this job (a wrong target changed); should be none. */
  unexpectedEffects?: string[];
  /** Times the downstream saw an operation start. */
  starts: number[];
  /** 429s from the downstream (the provider), or deferrals when the downstream is AWS itself. */
  throttled: number;
  rateLimit: { startsPerInterval: number; intervalSeconds: number };
  /** The oldest operation's age at completion since its FIRST enqueue (deferrals re-publish and reset SQS's own age). */
  maxJobAgeMs?: number;
  /**
   * Data was kept from earlier runs (--data-dir): an operation an earlier run completed is suppressed as a duplicate
   * and counts as done. In a fresh run a duplicate is a redelivery of an operation already counted as completed.
   */
  keptData?: boolean;
}

export interface JobReport {
  discovered: number;
  completed: number;
  rejected: number;
  dlq: number;
  effects: number;
  duplicatesSuppressed: number;
  /** Re-publishes with a delay (no slot soon enough, or throttled): each is one more delivery of an operation. */
  deferred: number;
  throttled: number;
  maxStartsPerWindow: number;
  rateLimitPerWindow: number;
  windowSeconds: number;
  /** Items changed, where one operation changes several (sessions deleted per tenant). */
  itemEffects?: number;
  /** The true job age: the oldest completed operation's age since first enqueue, across deferrals; null if none. */
  maxJobAgeSeconds: number | null;
}

export interface Check {
  job: string;
  name: 'nothing-lost' | 'no-unexplained-dead-letters' | 'one-effect-per-operation' | 'rate-respected';
  ok: boolean;
  detail: string;
}

export interface RunReport {
  ok: boolean;
  env: string;
  businessDate: string;
  settled: boolean;
  durationMs: number;
  jobs: Record<string, JobReport>;
  checks: Check[];
}

export function buildJobReport(job: string, o: JobObservation): { report: JobReport; checks: Check[] } {
  const windowMs = o.rateLimit.intervalSeconds * 1000;
  const effects = [...o.effectsByOperation.values()].reduce((a, b) => a + b, 0);
  const report: JobReport = {
    discovered: o.discovered,
    completed: o.completed,
    rejected: o.rejected,
    dlq: o.dlq,
    effects,
    duplicatesSuppressed: o.duplicates,
    deferred: o.deferred,
    throttled: o.throttled,
    maxStartsPerWindow: maxInAnyWindow(o.starts, windowMs),
    rateLimitPerWindow: o.rateLimit.startsPerInterval,
    windowSeconds: o.rateLimit.intervalSeconds,
    maxJobAgeSeconds: o.maxJobAgeMs === undefined ? null : Math.round(o.maxJobAgeMs / 100) / 10,
    ...(o.effectsByItem ? { itemEffects: [...o.effectsByItem.values()].reduce((a, b) => a + b, 0) } : {}),
  };
  const earlier = o.keptData ? o.duplicates : 0;
  const accounted = o.completed + earlier + o.rejected + o.dlq;
  const repeated = [...(o.effectsByItem ?? o.effectsByOperation).entries()].filter(([, n]) => n !== 1);
  const effectedOperations = o.effectsByOperation.size;
  const unexpected = o.unexpectedEffects ?? [];
  const checks: Check[] = [
    {
      job,
      name: 'nothing-lost',
      ok: accounted === o.discovered,
      detail: `completed ${o.completed}${o.keptData ? ` + done by earlier runs ${earlier}` : ''} + rejected ${o.rejected} + dlq ${o.dlq} = ${accounted}, discovered ${o.discovered}`,
    },
    {
      job,
      name: 'one-effect-per-operation',
      // Every completed operation changed the downstream once; nothing changed twice. (A completed operation that
      // found its target already done makes no effect; a fresh demo run has none.)
      ok: repeated.length === 0 && unexpected.length === 0 && effectedOperations === o.completed,
      detail:
        repeated.length > 0
          ? `${repeated.length} targets changed other than once, e.g. ${repeated.slice(0, 3).map(([k, n]) => `${k} x${n}`).join(', ')}`
          : unexpected.length > 0
            ? `${unexpected.length} targets changed that were not due, e.g. ${unexpected.slice(0, 3).join(', ')}`
            : `${effectedOperations} operations with one effect each, ${o.completed} completed`,
    },
    {
      job,
      name: 'rate-respected',
      ok: report.maxStartsPerWindow <= o.rateLimit.startsPerInterval,
      detail: `at most ${report.maxStartsPerWindow} starts in any ${o.rateLimit.intervalSeconds}s window, limit ${o.rateLimit.startsPerInterval}`,
    },
    {
      job,
      name: 'no-unexplained-dead-letters',
      // "Nothing lost" counts a dead letter as accounted for; but with no fault injected, no operation should end there.
      ok: o.dlq <= (o.expectedDeadLetters ?? 0),
      detail:
        o.dlq <= (o.expectedDeadLetters ?? 0)
          ? `${o.dlq} in the DLQ${o.expectedDeadLetters ? `, ${o.expectedDeadLetters} expected from injected faults` : ''}`
          : `${o.dlq} operations in the DLQ, ${o.expectedDeadLetters ?? 0} expected: a dead letter with no injected fault is a bug${
              o.dlqReasons?.length ? ` (reasons: ${[...new Set(o.dlqReasons)].slice(0, 3).join('; ')})` : ''
            }`,
    },
  ];
  return { report, checks };
}

export function buildRunReport(input: { env: string; businessDate: string; settled: boolean; durationMs: number; jobs: Map<string, JobObservation> }): RunReport {
  const jobs: Record<string, JobReport> = {};
  const checks: Check[] = [];
  for (const [name, observation] of [...input.jobs.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    const built = buildJobReport(name, observation);
    jobs[name] = built.report;
    checks.push(...built.checks);
  }
  return {
    ok: input.settled && checks.every((c) => c.ok),
    env: input.env,
    businessDate: input.businessDate,
    settled: input.settled,
    durationMs: input.durationMs,
    jobs,
    checks,
  };
}

/** Fixed-width text table. */
export function formatTable(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(cells[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

export function formatReport(report: RunReport): string {
  const rows = Object.entries(report.jobs).map(([name, j]) => [
    name,
    j.discovered,
    j.completed,
    j.rejected,
    j.dlq,
    j.effects,
    j.duplicatesSuppressed,
    j.deferred,
    j.throttled,
    `${j.maxStartsPerWindow}/${j.rateLimitPerWindow} per ${j.windowSeconds}s`,
    j.maxJobAgeSeconds === null ? '-' : `${j.maxJobAgeSeconds}s`,
  ]);
  const table = formatTable(['job', 'discovered', 'completed', 'rejected', 'dlq', 'effects', 'duplicates', 'deferred', 'throttled', 'max starts', 'max job age'], rows);
  const checks = report.checks.map((c) => `${c.ok ? 'PASS' : 'FAIL'}  ${c.job}  ${c.name}: ${c.detail}`);
  const head = report.settled ? `settled in ${(report.durationMs / 1000).toFixed(1)} s` : `did NOT settle within ${(report.durationMs / 1000).toFixed(1)} s`;
  return [`Local run, env ${report.env}, business date ${report.businessDate}: ${head}`, '', table, '', ...checks, '', report.ok ? 'OK' : 'FAILED'].join('\n');
}
