// In-memory stand-ins for the producer units' ports (the run state store, the publisher, the queue depth), the fake
// job's settings and steps, and a metric recorder: the units' tests run on these, with no AWS and no timers.
import type { Context } from 'aws-lambda';
import type { JobRuntimeSettings } from '../../../../lambda/core/constants';
import { admissionStep, type AdmissionStep } from '../../../../lambda/core/admissionStep';
import type { DateRun } from '../../../../lambda/core/admission';
import {
  AdmissionStatus,
  type InvalidRowRecord,
  type PageCommit,
  type RunStart,
  type RunState,
  type RunStateStore,
  type StepEnd,
} from '../../../../lambda/adapters/admissionState';
import { metrics } from '../../../../lambda/adapters/observability';
import type { OutgoingMessage, Publisher, PublishSummary } from '../../../../lambda/adapters/sqsPublisher';
import { lambdaContext } from '../../../support/lambdaEvents';
import { job as fakeJob } from '../../../fixtures/jobs/fake-job';

export const JOB = 'fake-job';
export const BATCH = 'fake-job:2026-11-28:20261129T010000Z';
export const QUEUE_URL = 'http://work-queue';
export const ADMISSION_QUEUE_URL = 'http://admission-queue';
/** The fixed clock of every unit test. */
export const NOW = new Date('2026-11-29T01:00:03.000Z');
export const NOW_MS = NOW.getTime();

/** The fake job's settings: pages of 25, Berlin's business date, the day before. */
export function settings(overrides: Partial<JobRuntimeSettings> = {}): JobRuntimeSettings {
  return {
    jobName: fakeJob.name,
    pageSize: 25,
    maxPagesPerRun: 100,
    maxMessageBytes: 8192,
    businessDateOffsetDays: -1,
    timeZone: 'Europe/Berlin',
    rateLimit: { startsPerInterval: 100, intervalSeconds: 60, burst: 1 },
    concurrency: 2,
    tables: {},
    buckets: {},
    secrets: {},
    settings: { items: 0 },
    ...overrides,
  };
}

/** Step `n` of BATCH. */
export const step = (n = 0, overrides: { scheduledTime?: string; backfill?: boolean } = {}): AdmissionStep =>
  admissionStep({ batchId: BATCH, businessDate: '2026-11-28', step: n, ...overrides });

/** A context with `remaining` ms left at each call (the last repeats) and a fixed request ID. */
export function context(...remaining: number[]): Context {
  const left = remaining.length ? [...remaining] : [60_000];
  return { ...lambdaContext(() => (left.length > 1 ? left.shift()! : left[0])), awsRequestId: 'request-1' };
}

/** A run at step `n`, admitting, with nothing admitted yet. */
export function runState(overrides: Partial<RunState> = {}): RunState {
  const fresh = { step: 0, status: AdmissionStatus.admitting, pages: 0, discovered: 0, published: 0, orphans: [] };
  return { ...fresh, continuationSent: -1, ...overrides };
}

/**
 * A run state store holding runs in memory, with the lease rules the DynamoDB one has: a lease is refused while another
 * owner's is unexpired, or when the run is not at the step; commits and ends need the lease. Every call is kept.
 */
export class FakeRunState implements RunStateStore {
  readonly runs = new Map<string, RunState>();
  readonly calls: { method: string; args: unknown[] }[] = [];
  readonly pages = new Map<string, string[][]>();
  dateRuns?: (job: string, businessDate: string) => Promise<DateRun[]>;
  backfillOutstanding?: (job: string) => Promise<number>;

  constructor(runs: Record<string, RunState> = {}) {
    for (const [batchId, state] of Object.entries(runs)) this.runs.set(batchId, state);
  }

  /** The methods called, in order. */
  methods(): string[] {
    return this.calls.map((c) => c.method);
  }

  private keep(method: string, ...args: unknown[]) {
    this.calls.push({ method, args });
  }

  async ensure(_job: string, batchId: string, start: RunStart): Promise<RunState> {
    this.keep('ensure', batchId, start);
    const existing = this.runs.get(batchId);
    if (existing) return existing;
    const { startedAt, eligible, backfill, admissionRatePerMinute } = start;
    const state = runState({ startedAt, eligible, backfill, admissionRatePerMinute });
    this.runs.set(batchId, state);
    return state;
  }

  async read(_job: string, batchId: string): Promise<RunState | undefined> {
    this.keep('read', batchId);
    const state = this.runs.get(batchId);
    return state && { ...state };
  }

  async lease(_job: string, batchId: string, step: number, owner: string, nowMs: number, untilMs: number) {
    this.keep('lease', batchId, step, owner, nowMs, untilMs);
    const state = this.runs.get(batchId);
    if (!state || state.step !== step || state.status !== AdmissionStatus.admitting) return false;
    if (state.leaseOwner !== undefined && state.leaseOwner !== owner && (state.leaseUntilMs ?? 0) > nowMs) return false;
    Object.assign(state, { leaseOwner: owner, leaseUntilMs: untilMs });
    return true;
  }

  async release(_job: string, batchId: string, step: number, owner: string): Promise<boolean> {
    this.keep('release', batchId, step, owner);
    const state = this.runs.get(batchId);
    if (!state || state.step !== step || state.leaseOwner !== owner) return false;
    delete state.leaseOwner;
    delete state.leaseUntilMs;
    return true;
  }

  async recordPage(
    _job: string,
    batchId: string,
    page: number,
    owner: string,
    ids: readonly string[],
    startedMs?: number,
  ) {
    this.keep('recordPage', batchId, page, owner, ids, startedMs);
    const key = `${batchId}#${page}`;
    this.pages.set(key, [...(this.pages.get(key) ?? []), [...ids]]);
  }

  async pageAttempts(_job: string, batchId: string, page: number): Promise<string[][]> {
    this.keep('pageAttempts', batchId, page);
    return this.pages.get(`${batchId}#${page}`) ?? [];
  }

  async recordInvalidRows(_job: string, batchId: string, page: number, rows: readonly InvalidRowRecord[]) {
    this.keep('recordInvalidRows', batchId, page, rows);
  }

  async commitPage(_job: string, batchId: string, step: number, owner: string, page: PageCommit): Promise<boolean> {
    this.keep('commitPage', batchId, step, owner, page);
    const state = this.runs.get(batchId);
    if (!state || state.step !== step || state.leaseOwner !== owner) return false;
    state.cursor = page.cursor;
    state.pages++;
    state.discovered += page.discovered;
    state.published += page.published;
    if (page.orphans) state.orphans = page.orphans;
    if (page.plannedUntilMs !== undefined) state.plannedUntilMs = page.plannedUntilMs;
    return true;
  }

  async endStep(_job: string, batchId: string, step: number, owner: string, end: StepEnd): Promise<boolean> {
    this.keep('endStep', batchId, step, owner, end);
    const state = this.runs.get(batchId);
    if (!state || state.step !== step || state.leaseOwner !== owner) return false;
    const plannedUntilMs = end.plannedUntilMs ?? state.plannedUntilMs;
    Object.assign(state, { step: step + 1, status: end.status, nextStepAt: end.nextStepAt, plannedUntilMs });
    delete state.leaseOwner;
    delete state.leaseUntilMs;
    return true;
  }

  async markContinuation(_job: string, batchId: string, step: number): Promise<void> {
    this.keep('markContinuation', batchId, step);
    const state = this.runs.get(batchId);
    if (state) state.continuationSent = Math.max(state.continuationSent, step);
  }
}

/** A publisher keeping every call; `failWith` decides, per call, an error to throw instead (the call is kept). */
export class FakePublisher implements Publisher {
  readonly calls: { queueUrl: string; messages: OutgoingMessage[] }[] = [];
  failWith: (queueUrl: string, messages: OutgoingMessage[]) => Error | undefined = () => undefined;

  async publish(queueUrl: string, messages: OutgoingMessage[]): Promise<PublishSummary> {
    this.calls.push({ queueUrl, messages });
    const error = this.failWith(queueUrl, messages);
    if (error) throw error;
    return { published: messages.length, calls: 1, retried: 0 };
  }

  /** The steps sent to the admission queue, with their delays. */
  steps(): { step: AdmissionStep; delaySeconds: number | undefined }[] {
    return this.calls
      .filter((c) => c.queueUrl === ADMISSION_QUEUE_URL)
      .flatMap((c) => c.messages)
      .map((m) => ({ step: JSON.parse(m.body) as AdmissionStep, delaySeconds: m.delaySeconds }));
  }

  /** The work queue's messages, in order. */
  work(): OutgoingMessage[] {
    return this.calls.filter((c) => c.queueUrl === QUEUE_URL).flatMap((c) => c.messages);
  }
}

/** Records the metrics added (name → summed value), instead of emitting them. */
export function recordMetrics(): Record<string, number> {
  const seen: Record<string, number> = {};
  jest.spyOn(metrics, 'addMetric').mockImplementation((name: string, _unit: unknown, value: number) => {
    seen[name] = (seen[name] ?? 0) + value;
    return metrics;
  });
  return seen;
}
