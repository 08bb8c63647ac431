// The console's port: what the web console asks of a stack (an overview of every job, its charts, a DLQ peek, an
// operation, and the four changing actions). console/opsSource.ts answers it with the operator CLI's own commands, so
// the page and `npm run ops` read and change a stack through the same code; tests answer it with a fake.
import type { ChartSpec } from './chartSpec';
import type { AdmissionResult } from '../ops/commands/admission';
import type { CatchUpResult } from '../ops/commands/catchUp';
import type { DlqPeekResult } from '../ops/commands/dlqPeek';
import type { OperationResult } from '../ops/commands/op';
import type { RedriveResult } from '../ops/commands/redrive';
import type { BatchStatus, OldestWork, QueueDepth } from '../ops/commands/status';

/** Base of the errors the console raises on purpose; the API answers each with its `status` and message. */
export class ConsoleError extends Error {
  /** The HTTP status the API answers with. @default 400 */
  public readonly status: number;

  constructor(message: string, options?: ErrorOptions & { status?: number }) {
    super(message, options);
    this.name = 'ConsoleError';
    this.status = options?.status ?? 400;
  }
}

/** A request the console refuses for its own safety (token, Host, Origin, changes off). Always 403. */
export class ConsoleForbiddenError extends ConsoleError {
  constructor(
    message: string,
    public readonly reason: 'token' | 'host' | 'origin' | 'fetch-site' | 'changes-off',
  ) {
    super(message, { status: 403 });
    this.name = 'ConsoleForbiddenError';
  }
}

/** The job's schedule as deployed, and when it fires next for which business date. */
export interface ScheduleView {
  name: string;
  /** ENABLED or DISABLED, as Scheduler answers; `unknown` when it cannot be read. */
  state: string;
  expression?: string;
  timeZone?: string;
  /** The next fire after now (ISO); null when the expression never fires again or is not a cron. */
  nextFire: string | null;
  /** The business date that fire processes (the zone's date plus the job's offset). */
  businessDate: string | null;
  /** Why the schedule or its next fire could not be read. */
  error?: string;
}

/** One job, as the console's overview shows it. */
export interface JobOverview {
  job: string;
  schedule: ScheduleView;
  /** The consumer's event source mapping and the producer's admission mapping: Enabled, Disabled, Disabling, ... */
  mappings: { consumer: string; admission: string };
  /** Anything of the job is not running: its schedule disabled, or either mapping not Enabled. */
  paused: boolean;
  queue: QueueDepth;
  dlq: QueueDepth;
  admissionQueue: QueueDepth;
  oldestWork: OldestWork;
  /** The latest batches, newest first, with their ledger figures and whether each reconciles (`ops status`). */
  batches: BatchStatus[];
  /** What the charts are measured against: the deployed allowance (after headroom) and the completion SLO. */
  limits: { allowance?: { starts: number; intervalMs: number }; sloMinutes?: number };
}

export interface ConsoleOverview {
  /** e.g. `PacedJobs-dev (local)`. */
  stack: string;
  source: 'cloudformation' | 'local';
  region?: string;
  at: string;
  jobs: JobOverview[];
  notes: string[];
}

/** The window the charts cover: epoch ms, with the step (one window of the starts chart) the source chose. */
export interface ChartWindow {
  fromMs: number;
  toMs: number;
  stepMs?: number;
}

export interface JobCharts {
  job: string;
  window: ChartWindow;
  charts: ChartSpec[];
}

export type CatchUpRequest = { from: string; to: string } | { missed: true; since?: string };

/**
 * Everything the console reads and changes. The changing methods are the CLI's own commands, confirmed by the page's
 * dialog (they run with `yes`); the server refuses them before they are called when changes are off.
 */
export interface ConsoleSource {
  /** For the page's header and the terminal: `stack PacedJobs-prod (eu-west-1)`. */
  readonly description: string;
  /** The stack's job names, sorted. */
  jobs(): Promise<string[]>;
  overview(options?: { batches?: number }): Promise<ConsoleOverview>;
  /** The job's charts over the last `minutes`. */
  charts(job: string, options: { minutes: number }): Promise<JobCharts>;
  /** A DLQ peek: a receive, so each message's receive count goes up and it is hidden until released. */
  dlqPeek(job: string, options: { max: number }): Promise<DlqPeekResult>;
  operation(operationId: string, options: { job?: string }): Promise<OperationResult>;
  pause(job: string): Promise<AdmissionResult>;
  resume(job: string): Promise<AdmissionResult>;
  redrive(job: string, options: { rate?: number }): Promise<RedriveResult>;
  catchUp(job: string, request: CatchUpRequest): Promise<CatchUpResult>;
  /** Releases what the source holds (clients). */
  close?(): Promise<void> | void;
}

/** The actions that change the stack: refused unless the console was started with changes on. */
export const CHANGING_ACTIONS = ['pause', 'resume', 'redrive', 'catch-up'] as const;
export type ChangingAction = (typeof CHANGING_ACTIONS)[number];
