// Schedule -> producer: emulates EventBridge Scheduler for the stack's schedules: fires each cron in its time zone (or
// on demand), fills the context placeholders of the target's Input, retries per RetryPolicy, then dead-letters.
import { randomUUID } from 'node:crypto';
import { type CronExpression, nextFireTime, parseCron } from '../lambda/core/cron';
import type { PlannedSchedule } from './plan';

export class ScheduleError extends Error {
  constructor(
    message: string,
    public readonly scheduleName: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ScheduleError';
  }
}

/** Hands the rendered Input to the target (for a Lambda target: an asynchronous Invoke). Throws when delivery fails. */
export type Deliver = (targetArn: string, input: string, schedule: PlannedSchedule) => Promise<void>;

/** Sends an undeliverable event to the schedule's dead-letter queue, with Scheduler's error attributes. */
export type DeadLetter = (
  queueArn: string,
  body: string,
  attributes: Record<string, string>,
  schedule: PlannedSchedule,
) => Promise<void>;

export interface SchedulerOptions {
  deliver: Deliver;
  deadLetter: DeadLetter;
  log?: (line: string) => void;
  /**
   * Delay before retry n (0-based). Scheduler backs off over minutes; locally the default is 200 ms doubling to 5 s,
   * still bounded by the target's MaximumEventAgeInSeconds.
   */
  retryDelayMs?: (attempt: number) => number;
}

export interface FireOptions {
  /** The time the invocation stands for. @default now */
  scheduledTime?: Date;
  /** Added to a JSON-object Input as `businessDate` (the `--date` flag). */
  businessDate?: string;
}

export interface FireResult {
  delivered: boolean;
  attempts: number;
  input: string;
  error?: string;
}

interface Entry {
  schedule: PlannedSchedule;
  cron: CronExpression;
  state: 'ENABLED' | 'DISABLED';
  timer?: NodeJS.Timeout;
  nextFire?: Date;
}

/** Scheduler renders times without milliseconds: 2024-01-01T02:00:00Z. */
const schedulerTime = (d: Date): string => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Replaces Scheduler's context attributes in a target Input. */
export function renderInput(
  input: string | undefined,
  context: { scheduledTime: Date; scheduleArn: string; executionId: string; attempt: number },
): string {
  return (input ?? '{}')
    .replaceAll('<aws.scheduler.scheduled-time>', schedulerTime(context.scheduledTime))
    .replaceAll('<aws.scheduler.schedule-arn>', context.scheduleArn)
    .replaceAll('<aws.scheduler.execution-id>', context.executionId)
    .replaceAll('<aws.scheduler.attempt-number>', String(context.attempt));
}

/** The largest delay setTimeout accepts (about 24.8 days); longer waits re-arm. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class LocalScheduler {
  private readonly entries = new Map<string, Entry>();
  private running = false;
  private readonly inFlight = new Set<Promise<FireResult>>();

  constructor(private readonly options: SchedulerOptions) {}

  /** @throws ScheduleError when the expression is not a cron the emulator understands. */
  add(schedule: PlannedSchedule): void {
    if (!schedule.expression.startsWith('cron(')) {
      throw new ScheduleError(
        `schedule ${schedule.name}: only cron(...) expressions are emulated, got ${schedule.expression}`,
        schedule.name,
      );
    }
    let cron: CronExpression;
    try {
      cron = parseCron(schedule.expression);
    } catch (error) {
      throw new ScheduleError(`schedule ${schedule.name}: ${(error as Error).message}`, schedule.name, {
        cause: error,
      });
    }
    this.entries.set(schedule.name, { schedule, cron, state: schedule.enabled ? 'ENABLED' : 'DISABLED' });
  }

  list(): { schedule: PlannedSchedule; state: 'ENABLED' | 'DISABLED'; nextFire?: Date }[] {
    return [...this.entries.values()].map((e) => ({
      schedule: e.schedule,
      state: e.state,
      nextFire: e.nextFire ?? this.next(e),
    }));
  }

  /** @throws ScheduleError for an unknown name. */
  get(name: string): PlannedSchedule {
    return this.entry(name).schedule;
  }

  /**
   * Replaces a schedule's definition, as UpdateSchedule does (the state included).
   * @throws ScheduleError for an unknown name or an expression the emulator cannot evaluate.
   */
  update(name: string, schedule: PlannedSchedule): void {
    const previous = this.entry(name);
    clearTimeout(previous.timer);
    this.add(schedule);
    if (this.running) this.arm(this.entry(schedule.name));
  }

  /** Enables or disables a schedule (what `ops pause/resume` will do through UpdateSchedule). */
  setState(name: string, state: 'ENABLED' | 'DISABLED'): void {
    const entry = this.entry(name);
    entry.state = state;
    if (this.running) this.arm(entry);
  }

  /** Invocations still retrying. */
  get pending(): number {
    return this.inFlight.size;
  }

  /** Fires every enabled schedule on its cron until stop(). */
  start(): void {
    this.running = true;
    for (const entry of this.entries.values()) this.arm(entry);
  }

  async stop(): Promise<void> {
    this.running = false;
    for (const entry of this.entries.values()) {
      clearTimeout(entry.timer);
      entry.timer = undefined;
      entry.nextFire = undefined;
    }
    await Promise.allSettled([...this.inFlight]);
  }

  /**
   * Fires one schedule now, whatever its state (the `--now` path), and resolves once the target accepted the event or
   * every retry failed and the event went to the DLQ.
   */
  fire(name: string, options: FireOptions = {}): Promise<FireResult> {
    const entry = this.entry(name);
    const run = this.deliverWithRetries(entry, options.scheduledTime ?? new Date(), options.businessDate);
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
    return run;
  }

  private entry(name: string): Entry {
    const entry = this.entries.get(name);
    if (!entry) throw new ScheduleError(`Schedule ${name} does not exist.`, name);
    return entry;
  }

  private next(entry: Entry): Date | undefined {
    return entry.state === 'ENABLED' ? nextFireTime(entry.cron, entry.schedule.timeZone, new Date()) : undefined;
  }

  private arm(entry: Entry): void {
    clearTimeout(entry.timer);
    entry.timer = undefined;
    entry.nextFire = this.next(entry);
    if (!this.running || !entry.nextFire) return;
    const at = entry.nextFire;
    const delay = at.getTime() - Date.now();
    entry.timer = setTimeout(
      () => {
        if (Date.now() < at.getTime()) return this.arm(entry);
        void this.fire(entry.schedule.name, { scheduledTime: at });
        this.arm(entry);
      },
      Math.min(MAX_TIMER_MS, Math.max(0, delay)),
    );
    entry.timer.unref();
  }

  private async deliverWithRetries(entry: Entry, scheduledTime: Date, businessDate?: string): Promise<FireResult> {
    const { schedule } = entry;
    const executionId = randomUUID();
    const started = Date.now();
    const delay = this.options.retryDelayMs ?? ((n: number) => Math.min(5000, 200 * 2 ** n));
    let lastError = '';
    let attempt = 0;
    let input = '';
    for (; attempt <= schedule.maximumRetryAttempts; attempt++) {
      input = renderInput(schedule.input, {
        scheduledTime,
        scheduleArn: schedule.arn,
        executionId,
        attempt: attempt + 1,
      });
      if (businessDate !== undefined) input = withBusinessDate(input, businessDate, schedule.name);
      try {
        await this.options.deliver(schedule.targetArn, input, schedule);
        this.options.log?.(`schedule ${schedule.name}: delivered to ${schedule.targetArn} (attempt ${attempt + 1})`);
        return { delivered: true, attempts: attempt + 1, input };
      } catch (error) {
        lastError = (error as Error).message;
        this.options.log?.(`schedule ${schedule.name}: delivery attempt ${attempt + 1} failed: ${lastError}`);
      }
      const wait = delay(attempt);
      if (
        attempt === schedule.maximumRetryAttempts ||
        Date.now() + wait - started > schedule.maximumEventAgeSeconds * 1000
      )
        break;
      await new Promise((r) => setTimeout(r, wait));
    }
    const attempts = Math.min(attempt + 1, schedule.maximumRetryAttempts + 1);
    if (schedule.deadLetterArn) {
      await this.options.deadLetter(
        schedule.deadLetterArn,
        input,
        {
          ERROR_CODE: 'TargetDeliveryFailed',
          ERROR_MESSAGE: lastError.slice(0, 256),
          EXHAUSTED_RETRY_CONDITION:
            attempts > schedule.maximumRetryAttempts ? 'MaximumRetryAttempts' : 'MaximumEventAgeInSeconds',
          RETRY_ATTEMPTS: String(attempts - 1),
          SCHEDULE_ARN: schedule.arn,
          TARGET_ARN: schedule.targetArn,
        },
        schedule,
      );
    }
    return { delivered: false, attempts, input, error: lastError };
  }
}

function withBusinessDate(input: string, businessDate: string, name: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(input);
  } catch (error) {
    throw new ScheduleError(`schedule ${name}: cannot add businessDate, the target Input is not JSON`, name, {
      cause: error,
    });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ScheduleError(`schedule ${name}: cannot add businessDate, the target Input is not a JSON object`, name);
  }
  return JSON.stringify({ ...parsed, businessDate });
}
