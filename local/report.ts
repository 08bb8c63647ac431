// The end of a local run: per-job numbers and the four checks (nothing lost, no dead letter that no fault explains, one
// effect per operation, pacing held), as a table for people and one JSON document for machines. Pure: the run hands
// in what it observed. A job with a local fixture is judged on its downstream's effects; a job without one on the
// pipeline's own record, and the report says which.
import { batchExact, batchSettledCount } from '../lambda/core/ledgerContract';
import { fixturePath, maxInAnyWindow } from './fixture';
import type { LedgerTotals } from './session';

/**
 * Whose counts a job's effects are: `fixture`, the downstream's as the job's local fixture reads them; `pipeline`, the
 * pipeline's own (completed idempotency records and the consumer's logs), for a job without a fixture.
 */
export type EffectsSource = 'fixture' | 'pipeline';

/** What the run observed for one job; the counts from the run ledger, summed over this run's batches. */
export interface JobObservation
  extends Pick<LedgerTotals, 'discovered' | 'published' | 'completed' | 'rejected' | 'duplicates' | 'deferred'>,
    Partial<Pick<LedgerTotals, 'completedElsewhere'>> {
  /** Messages in the job's DLQ at the end. */
  dlq: number;
  /** The `failureReason` of (some of) those messages, as the consumer set it; for the report. */
  dlqReasons?: string[];
  /**
   * Dead letters the run caused on purpose (an injected fault). @default 0: a local demo injects none, so any dead
   * letter is a bug, even when nothing is lost.
   */
  expectedDeadLetters?: number;
  /** Effects per operation key: the downstream's (fixture) or the consumer's completed applies (pipeline). */
  effectsByOperation: Map<string, number>;
  /** Whose counts `effectsByOperation` and `starts` are. @default 'fixture' */
  effectsSource?: EffectsSource;
  /**
   * Where the job's fixture is, or would be, relative to the app (the session job's `fixtureFile`: beside its entry),
   * for the note on a job without one. @default lambda/jobs/<name>/local.ts, this repository's layout
   */
  fixtureFile?: string;
  /** Downstream effects per item where an operation touches several; each should be exactly one. */
  effectsByItem?: Map<string, number>;
  /** Items that must each be touched once (item -> operation key), where the fixture names them. */
  expectedItems?: Map<string, string>;
  /** Effects on targets the run did not seed for this job (a wrong target changed); should be none. */
  unexpectedEffects?: string[];
  /** Times the downstream saw an operation start (pipeline: the consumer's apply starts). */
  starts: number[];
  /** Throttles the downstream answered, or the consumer's own count when the downstream cannot tell. */
  throttled: number;
  rateLimit: { startsPerInterval: number; intervalSeconds: number };
  /** The oldest operation's age at completion since its FIRST enqueue (deferrals re-publish and reset SQS's own age). */
  maxJobAgeMs?: number;
  /**
   * Data was kept from earlier runs (--data-dir): an operation an earlier run completed is suppressed as a duplicate
   * and counts as done. In a fresh run a duplicate is a redelivery of an operation already counted as completed.
   */
  keptData?: boolean;
  /** Requests of this job's functions, event sources and schedule that IAM denied (or, with --no-iam, would have). */
  denials?: DenialSummary[];
  /** Whether denials were enforced (false: --no-iam, they are only what AWS would have denied). @default true */
  iamEnforced?: boolean;
  /** Errors the job's functions raised (init, handler, timeout, crash), by kind. */
  functionErrors?: FunctionErrorSummary[];
  /** Errors that failed the job's records (apply threw; the batch processor caught it), by kind: RecordFailureLog. */
  recordFailures?: RecordFailureSummary[];
}

/** One kind of denial: action, resource and role, how often, and AWS's message. */
export interface DenialSummary {
  action: string;
  resource: string;
  role: string;
  /** Whose request: a function name, or the service acting with the role (the event source, Scheduler). */
  caller: string;
  count: number;
  message: string;
}

/** One kind of function error: the function, the error type and message, how often, and the first few in full. */
export interface FunctionErrorSummary {
  functionName: string;
  errorType: string;
  message: string;
  count: number;
  examples: string[];
}

/**
 * One kind of error that failed a job's records: the consumer caught it from the job's apply (or hit it itself) and
 * handed the record back to SQS, so it fails no invocation and only the consumer's log line names it.
 */
export interface RecordFailureSummary {
  /** The error's type, e.g. `TypeError`, `Error` (a module not found), `RetryableError`. */
  errorName: string;
  /** Its message's first line. */
  message: string;
  /** Where the job's own code threw it (`<path>:<line>:<column>`, relative to the app's folder), when known. */
  location?: string;
  /** Records (operations) it failed. */
  records: number;
  /** Failed attempts in all: each receive of a record that failed counts once. */
  attempts: number;
}

/** The key of the consumer's failed-record line (lambda/handlers/consumer/recordFailure.ts RECORD_FAILURE_KEY). */
const RECORD_FAILURE_KEY = 'recordFailure';
/** Kinds of record error the text report shows per job; --json lists them all. */
const RECORD_FAILURES_SHOWN = 5;

interface RecordFailureLine {
  operationId?: unknown;
  messageId?: unknown;
  [RECORD_FAILURE_KEY]?: { errorName?: unknown; errorMessage?: unknown; jobLocation?: unknown };
}

interface FailureKind {
  summary: Omit<RecordFailureSummary, 'records'>;
  records: Set<string>;
}

/**
 * The consumers' failed-record lines, aggregated per function: each distinct error (type, message, place in the job's
 * code) with the records and attempts it failed. Fed every line the functions write, as the session's log sees them.
 */
export class RecordFailureLog {
  private readonly byFunction = new Map<string, Map<string, FailureKind>>();

  /** Feeds one line a function wrote (`source`: the function's name); any line but a failed record's is ignored. */
  observe(source: string, line: string): void {
    if (!line.includes(`"${RECORD_FAILURE_KEY}"`)) return;
    let doc: RecordFailureLine;
    try {
      doc = JSON.parse(line.slice(line.indexOf('{'))) as RecordFailureLine;
    } catch {
      return;
    }
    const failure = doc[RECORD_FAILURE_KEY];
    if (typeof failure !== 'object' || failure === null) return;
    const errorName = typeof failure.errorName === 'string' ? failure.errorName : 'Error';
    const message = typeof failure.errorMessage === 'string' ? failure.errorMessage : '';
    const location = typeof failure.jobLocation === 'string' ? failure.jobLocation : undefined;
    const messageId = typeof doc.messageId === 'string' ? doc.messageId : line;
    const record = typeof doc.operationId === 'string' ? doc.operationId : messageId;
    const kinds = this.byFunction.get(source) ?? new Map<string, FailureKind>();
    this.byFunction.set(source, kinds);
    const key = JSON.stringify([errorName, message, location ?? null]);
    const summary = { errorName, message, ...(location === undefined ? {} : { location }), attempts: 0 };
    const kind = kinds.get(key) ?? { summary, records: new Set<string>() };
    kinds.set(key, kind);
    kind.summary.attempts++;
    kind.records.add(record);
  }

  /** The function's record errors, the most attempts first; none for a function with no failed record (or no name). */
  summary(functionName: string | undefined): RecordFailureSummary[] {
    return [...(this.byFunction.get(functionName ?? '')?.values() ?? [])]
      .map((k) => ({ ...k.summary, records: k.records.size }))
      .sort(
        (a, b) =>
          b.attempts - a.attempts ||
          b.records - a.records ||
          a.errorName.localeCompare(b.errorName) ||
          a.message.localeCompare(b.message),
      );
  }
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
  /** Items changed, where one operation changes several (a fixture that reads effects per item). */
  itemEffects?: number;
  /** The true job age: the oldest completed operation's age since first enqueue, across deferrals; null if none. */
  maxJobAgeSeconds: number | null;
  /** Whose counts `effects` and `maxStartsPerWindow` are. */
  effectsSource: EffectsSource;
  /** For a job judged on the pipeline's own counts: what that does not prove, and how to prove it. */
  note?: string;
  /** Requests IAM denied, by action, resource and role (empty when none). */
  denials: DenialSummary[];
  /** Errors the job's functions raised, by kind (empty when none). */
  functionErrors: FunctionErrorSummary[];
  /** Errors that failed the job's records (apply threw), by kind, the most attempts first (empty when none). */
  recordFailures: RecordFailureSummary[];
}

export interface Check {
  job: string;
  name: 'nothing-lost' | 'no-unexplained-dead-letters' | 'one-effect-per-operation' | 'rate-respected' | 'iam-allowed';
  ok: boolean;
  detail: string;
}

export interface RunReport {
  ok: boolean;
  /** The environment run (`-c env=<env>`); in a team's app, which has none, the stack's name. */
  env: string;
  /** The stack run, where the run names it. */
  stack?: string;
  businessDate: string;
  settled: boolean;
  durationMs: number;
  jobs: Record<string, JobReport>;
  checks: Check[];
  /** What makes this run differ from AWS (IAM off, another Node major than the template's): printed on every report. */
  warnings: string[];
}

/**
 * What a report says of a job without a fixture: its counts prove the pipeline, not the downstream. `fixtureFile` is
 * where its fixture would be (beside the job's entry), relative to the app. @default lambda/jobs/<name>/local.ts
 */
export function pipelineNote(job: string, fixtureFile: string = fixturePath('', job)): string {
  return `counts are the pipeline's own (idempotency store and consumer logs), not the downstream's: add ${fixtureFile} to check the downstream`;
}

export function buildJobReport(job: string, o: JobObservation): { report: JobReport; checks: Check[] } {
  const report = jobFigures(job, o);
  const source = report.effectsSource;
  const checks: Check[] = [
    nothingLost(job, o, report),
    oneEffectPerOperation(job, o, source),
    {
      job,
      name: 'rate-respected',
      ok: report.maxStartsPerWindow <= o.rateLimit.startsPerInterval,
      detail: `at most ${report.maxStartsPerWindow} ${source === 'pipeline' ? "apply starts (the consumer's)" : 'starts'} in any ${o.rateLimit.intervalSeconds}s window, limit ${o.rateLimit.startsPerInterval}`,
    },
    noUnexplainedDeadLetters(job, o),
    iamAllowed(job, o),
  ];
  return { report, checks };
}

/** A job's figures for the report, from what the run observed of it. */
function jobFigures(job: string, o: JobObservation): JobReport {
  const source = o.effectsSource ?? 'fixture';
  return {
    discovered: o.discovered,
    completed: o.completed,
    rejected: o.rejected,
    dlq: o.dlq,
    effects: [...o.effectsByOperation.values()].reduce((a, b) => a + b, 0),
    duplicatesSuppressed: o.duplicates,
    deferred: o.deferred,
    throttled: o.throttled,
    maxStartsPerWindow: maxInAnyWindow(o.starts, o.rateLimit.intervalSeconds * 1000),
    rateLimitPerWindow: o.rateLimit.startsPerInterval,
    windowSeconds: o.rateLimit.intervalSeconds,
    maxJobAgeSeconds: o.maxJobAgeMs === undefined ? null : Math.round(o.maxJobAgeMs / 100) / 10,
    ...(o.effectsByItem ? { itemEffects: [...o.effectsByItem.values()].reduce((a, b) => a + b, 0) } : {}),
    effectsSource: source,
    ...(source === 'pipeline' ? { note: pipelineNote(job, o.fixtureFile) } : {}),
    denials: o.denials ?? [],
    functionErrors: o.functionErrors ?? [],
    recordFailures: o.recordFailures ?? [],
  };
}

function nothingLost(job: string, o: JobObservation, report: JobReport): Check {
  const earlier = o.completedElsewhere ?? 0;
  // The ledger's exact equation (lambda/core/ledgerContract.ts) over this run's totals: the DLQ's depth is the
  // dead-lettered figure, and with kept data an operation an earlier run completed is completedElsewhere.
  const totals = {
    discovered: o.discovered,
    completed: o.completed,
    completedElsewhere: earlier,
    rejected: o.rejected,
    deadLettered: o.dlq,
  };
  const accounted = batchSettledCount(totals);
  return {
    job,
    name: 'nothing-lost',
    ok: batchExact(totals),
    detail: `completed ${o.completed}${o.keptData || earlier > 0 ? ` + done by earlier runs ${earlier}` : ''} + rejected ${o.rejected} + dlq ${o.dlq} = ${accounted}, discovered ${o.discovered}${
      !batchExact(totals) && report.recordFailures.length > 0
        ? `; records failing: ${describeRecordFailure(report.recordFailures[0])}`
        : ''
    }`,
  };
}

function oneEffectPerOperation(job: string, o: JobObservation, source: JobReport['effectsSource']): Check {
  const repeated = [...(o.effectsByItem ?? o.effectsByOperation).entries()].filter(([, n]) => n !== 1);
  // An expected item never touched: its operation counted one effect, but left part of its work undone.
  const untouched = [...(o.expectedItems?.keys() ?? [])].filter((item) => (o.effectsByItem?.get(item) ?? 0) === 0);
  const effectedOperations = o.effectsByOperation.size;
  const unexpected = o.unexpectedEffects ?? [];
  return {
    job,
    name: 'one-effect-per-operation',
    // Every completed operation changed the downstream once; nothing changed twice. (A completed operation that
    // found its target already done makes no effect; a fresh demo run has none.)
    ok:
      repeated.length === 0 && unexpected.length === 0 && untouched.length === 0 && effectedOperations === o.completed,
    detail:
      untouched.length > 0
        ? `${untouched.length} items due were never changed, e.g. ${untouched.slice(0, 3).join(', ')}`
        : repeated.length > 0
          ? `${repeated.length} targets changed other than once, e.g. ${repeated
              .slice(0, 3)
              .map(([k, n]) => `${k} x${n}`)
              .join(', ')}`
          : unexpected.length > 0
            ? `${unexpected.length} targets changed that were not due, e.g. ${unexpected.slice(0, 3).join(', ')}`
            : source === 'pipeline'
              ? `${effectedOperations} operations completed once each in the pipeline's own record, ${o.completed} completed in the ledger (no fixture: the downstream's effects are not seen)`
              : `${effectedOperations} operations with one effect each, ${o.completed} completed`,
  };
}

function noUnexplainedDeadLetters(job: string, o: JobObservation): Check {
  return {
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
  };
}

function iamAllowed(job: string, o: JobObservation): Check {
  const denied = o.denials ?? [];
  const enforced = o.iamEnforced !== false;
  return {
    job,
    name: 'iam-allowed',
    // A denial fails the run even with --no-iam: on AWS the same request would fail.
    ok: denied.length === 0,
    detail:
      denied.length === 0
        ? `every request allowed by the template's IAM${enforced ? '' : ' (not enforced: --no-iam)'}`
        : `${denied.reduce((n, d) => n + d.count, 0)} requests ${enforced ? 'denied' : 'AWS would deny (--no-iam)'}: ${denied
            .slice(0, 3)
            .map((d) => `${d.action} on ${d.resource} by ${d.role}`)
            .join('; ')}`,
  };
}

/**
 * The run's report. `env` is the environment run (this repository's); `stack` the stack: a team's app has no
 * environments, and its report names the stack alone (its `env` is the stack's name then, for --json readers).
 * @throws Error when neither is given
 */
export function buildRunReport(input: {
  env?: string;
  stack?: string;
  businessDate: string;
  settled: boolean;
  durationMs: number;
  jobs: Map<string, JobObservation>;
  warnings?: string[];
}): RunReport {
  const jobs: Record<string, JobReport> = {};
  const checks: Check[] = [];
  for (const [name, observation] of [...input.jobs.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    const built = buildJobReport(name, observation);
    jobs[name] = built.report;
    checks.push(...built.checks);
  }
  const env = input.env ?? input.stack;
  if (env === undefined) throw new Error('buildRunReport: the run names neither its environment nor its stack');
  return {
    ok: input.settled && checks.every((c) => c.ok),
    env,
    ...(input.stack !== undefined ? { stack: input.stack } : {}),
    businessDate: input.businessDate,
    settled: input.settled,
    durationMs: input.durationMs,
    jobs,
    checks,
    warnings: input.warnings ?? [],
  };
}

/** One kind of record error in a line: `TypeError: <message> at <location> (N records, M attempts)`. */
export function describeRecordFailure(f: RecordFailureSummary): string {
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  return `${f.errorName}: ${f.message}${f.location ? ` at ${f.location}` : ''} (${plural(f.records, 'record')}, ${plural(f.attempts, 'attempt')})`;
}

/** Fixed-width text table. */
export function formatTable(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(cells[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

/** `env dev` for an environment of this repository; `stack <name>` for a team's app, which has no environments. */
export function runName(report: Pick<RunReport, 'env' | 'stack'>): string {
  return report.stack !== undefined && report.env === report.stack ? `stack ${report.stack}` : `env ${report.env}`;
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
  const table = formatTable(
    [
      'job',
      'discovered',
      'completed',
      'rejected',
      'dlq',
      'effects',
      'duplicates',
      'deferred',
      'throttled',
      'max starts',
      'max job age',
    ],
    rows,
  );
  const checks = report.checks.map((c) => `${c.ok ? 'PASS' : 'FAIL'}  ${c.job}  ${c.name}: ${c.detail}`);
  const notes = Object.entries(report.jobs).flatMap(([name, j]) => (j.note ? [`NOTE  ${name}: ${j.note}`] : []));
  const problems = Object.entries(report.jobs).flatMap(([name, j]) => [
    ...j.denials.map(
      (d) => `DENIED  ${name}  ${d.action} on ${d.resource} by ${d.role} (${d.caller}) x${d.count}: ${d.message}`,
    ),
    ...j.functionErrors.map(
      (e) =>
        `ERROR  ${name}  ${e.functionName}: ${e.errorType}: ${e.message} x${e.count}${e.examples[0] && e.examples[0] !== e.message ? ` (first: ${e.examples[0].slice(0, 300)})` : ''}`,
    ),
    ...j.recordFailures
      .slice(0, RECORD_FAILURES_SHOWN)
      .map((f) => `RECORD-ERROR  ${name}  ${describeRecordFailure(f)}`),
    ...(j.recordFailures.length > RECORD_FAILURES_SHOWN
      ? [
          `RECORD-ERROR  ${name}  and ${j.recordFailures.length - RECORD_FAILURES_SHOWN} more kinds of error (--json lists them all)`,
        ]
      : []),
  ]);
  const warnings = report.warnings.map((w) => `WARNING  ${w}`);
  const head = report.settled
    ? `settled in ${(report.durationMs / 1000).toFixed(1)} s`
    : `did NOT settle within ${(report.durationMs / 1000).toFixed(1)} s`;
  return [
    `Local run, ${runName(report)}, business date ${report.businessDate}: ${head}`,
    ...(warnings.length > 0 ? ['', ...warnings] : []),
    '',
    table,
    '',
    ...(notes.length > 0 ? [...notes, ''] : []),
    ...(problems.length > 0 ? [...problems, ''] : []),
    ...checks,
    '',
    report.ok ? 'OK' : 'FAILED',
  ].join('\n');
}
