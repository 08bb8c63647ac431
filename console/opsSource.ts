// The console's data and actions through the operator CLI's own code: `ops status` for depths and batches, the
// schedule and mappings as `ops pause` reads them, `ops dlq peek`, `ops op`, `ops pause`/`resume`, `ops redrive` and
// `ops catch-up`, all on one CommandContext (a deployed stack's or the local one's); the charts are console/charts.ts
// over metric samples the caller supplies (the local session's, or CloudWatch's through ops/metrics.ts).
import { GetScheduleCommand } from '@aws-sdk/client-scheduler';
import { nextFireTime, parseCron, zonedDate } from '../lambda/core/cron';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import type { MetricSample } from '../local/metricsTap';
import { admission } from '../ops/commands/admission';
import { catchUp, catchUpMissed } from '../ops/commands/catchUp';
import { dlqPeek } from '../ops/commands/dlqPeek';
import { operation } from '../ops/commands/op';
import { redrive } from '../ops/commands/redrive';
import { status } from '../ops/commands/status';
import type { CommandContext } from '../ops/context';
import type { OpsIo } from '../ops/io';
import { producerSettings } from '../ops/jobSettings';
import type { JobResources } from '../ops/resources';
import { jobCharts, type JobChartInput } from './charts';
import {
  ConsoleError,
  type CatchUpRequest,
  type ConsoleOverview,
  type ConsoleSource,
  type JobCharts,
  type JobOverview,
  type ScheduleView,
} from './source';

/** Reads a job's metric samples for a window; `periodSeconds` is the resolution asked of CloudWatch. */
export type SampleReader = (
  job: string,
  window: { fromMs: number; toMs: number; periodSeconds: number },
) => Promise<readonly MetricSample[]> | readonly MetricSample[];

export interface OpsConsoleSourceOptions {
  ctx: CommandContext;
  samples: SampleReader;
  /**
   * The resolution samples are read at. CloudWatch keeps standard-resolution metrics (EMF's default) per minute, so a
   * deployed stack gets 60; the local endpoint has every sample.
   * @default 60
   */
  periodSeconds?: number;
  /** How long and how often pause/resume wait for a mapping to settle. @default the CLI's (120 s, every 2 s) */
  mappingWait?: { timeoutMs: number; pollMs: number };
  /**
   * Epoch ms before which there is nothing to chart (a local session's start): the charts begin there rather than
   * show zeros for a time the stack did not exist. @default none
   */
  since?: number;
  /** The `--confirm <env>` `ops console` started with (it checked it): each change passes it on, with yes. */
  confirm?: string;
  /** How long a job's deployed settings (allowance, SLO, business-date offset) are reused before being read again. @default 300000 */
  settingsTtlMs?: number;
}

/** The job's settings as the console needs them, read from its producer's JOB_SETTINGS. */
interface CachedSettings {
  at: number;
  settings: JobRuntimeSettings;
}

/** An OpsIo for commands the console runs: no terminal (the page's dialog confirmed), output to the console's log. */
export function consoleIo(log: (line: string) => void): OpsIo {
  return {
    stdout: log,
    stderr: log,
    interactive: false,
    ask: async () => {
      throw new ConsoleError('the console cannot answer a prompt: its commands run confirmed', { status: 500 });
    },
    now: () => new Date(),
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
  };
}

/** The last path segment of a queue URL: its name, the `QueueName` dimension of its AWS/SQS metrics. */
export function queueNameOf(url: string): string {
  return url.replace(/\/+$/, '').split('/').pop() ?? url;
}

export class OpsConsoleSource implements ConsoleSource {
  public readonly description: string;
  private readonly settingsCache = new Map<string, CachedSettings>();
  /** Changing actions run one at a time: two clicks must not interleave a pause with a resume. */
  private changing: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: OpsConsoleSourceOptions) {
    const r = options.ctx.resources;
    this.description = `stack ${r.stackName} (${r.source === 'local' ? 'local' : `${r.environment ?? 'deployed'}, ${r.region ?? 'default region'}`})`;
  }

  private get ctx(): CommandContext {
    return this.options.ctx;
  }

  /** The page's dialog confirmed the change; a protected environment's name came with `ops console --confirm`. */
  private get confirmed(): { yes: true; confirm?: string } {
    return { yes: true, ...(this.options.confirm !== undefined ? { confirm: this.options.confirm } : {}) };
  }

  async jobs(): Promise<string[]> {
    return this.ctx.resources.jobs.map((j) => j.job);
  }

  async overview(options: { batches?: number } = {}): Promise<ConsoleOverview> {
    const result = await status(this.ctx, { batches: options.batches ?? 5 });
    const jobs = await Promise.all(
      result.jobs.map(async (j): Promise<JobOverview> => {
        const res = this.job(j.job);
        // The mappings' states as `ops status` read them (its `admission`), so the page and the CLI agree.
        const settings = await this.settings(res).catch(() => undefined);
        const schedule = await this.schedule(res, settings);
        return {
          job: j.job,
          schedule,
          mappings: { consumer: j.admission.consumerMapping, admission: j.admission.admissionMapping },
          paused: j.admission.summary !== 'running',
          queue: j.queue,
          dlq: j.dlq,
          admissionQueue: j.admissionQueue,
          oldestWork: j.oldestWork,
          batches: j.batches,
          limits: settings ? limitsOf(settings) : {},
        };
      }),
    );
    const r = this.ctx.resources;
    return {
      stack: r.stackName,
      source: r.source,
      ...(r.region ? { region: r.region } : {}),
      at: result.at,
      jobs,
      notes: result.notes,
    };
  }

  async charts(job: string, options: { minutes: number }): Promise<JobCharts> {
    const res = this.job(job);
    const toMs = this.ctx.io.now().getTime();
    const fromMs = Math.max(toMs - options.minutes * 60_000, Math.min(this.options.since ?? -Infinity, toMs - 60_000));
    const settings = await this.settings(res).catch(() => undefined);
    const input: JobChartInput = {
      job,
      ...(settings ? limitsOf(settings) : {}),
      queueName: queueNameOf(res.queueUrl),
      dlqName: queueNameOf(res.dlqUrl),
    };
    const samples = await this.options.samples(job, { fromMs, toMs, periodSeconds: this.options.periodSeconds ?? 60 });
    const window = { fromMs, toMs };
    return { job, window, charts: jobCharts(samples, input, window) };
  }

  async dlqPeek(job: string, options: { max: number }) {
    return dlqPeek(this.ctx, { job: this.job(job).job, max: options.max });
  }

  async operation(operationId: string, options: { job?: string }) {
    return operation(this.ctx, operationId, { job: options.job === undefined ? undefined : this.job(options.job).job });
  }

  pause(job: string) {
    return this.serially(() =>
      admission(this.ctx, 'pause', { job: this.job(job).job, ...this.confirmed, ...this.mappingWait() }),
    );
  }

  resume(job: string) {
    return this.serially(() =>
      admission(this.ctx, 'resume', { job: this.job(job).job, ...this.confirmed, ...this.mappingWait() }),
    );
  }

  redrive(job: string, options: { rate?: number }) {
    return this.serially(() => redrive(this.ctx, { job: this.job(job).job, rate: options.rate, ...this.confirmed }));
  }

  catchUp(job: string, request: CatchUpRequest) {
    const name = this.job(job).job;
    return this.serially(() =>
      'missed' in request
        ? catchUpMissed(this.ctx, { job: name, since: request.since, ...this.confirmed })
        : catchUp(this.ctx, { job: name, from: request.from, to: request.to, ...this.confirmed }),
    );
  }

  close(): void {
    this.ctx.clients.destroy();
  }

  /** @throws ConsoleError (404) for a job the stack does not have. */
  private job(name: string): JobResources {
    const found = this.ctx.resources.jobs.find((j) => j.job === name);
    if (!found)
      throw new ConsoleError(
        `unknown job "${name}"; ${this.ctx.resources.stackName} has: ${this.ctx.resources.jobs.map((j) => j.job).join(', ')}`,
        { status: 404 },
      );
    return found;
  }

  private mappingWait() {
    const w = this.options.mappingWait;
    return w ? { mappingTimeoutMs: w.timeoutMs, mappingPollMs: w.pollMs } : {};
  }

  private serially<T>(run: () => Promise<T>): Promise<T> {
    const next = this.changing.then(run, run);
    // The chain only orders the actions; each caller sees its own outcome.
    this.changing = next.catch(() => undefined);
    return next;
  }

  /** The producer's JOB_SETTINGS, reused for settingsTtlMs: they change only with a deploy. */
  private async settings(job: JobResources): Promise<JobRuntimeSettings> {
    const now = Date.now();
    const cached = this.settingsCache.get(job.job);
    if (cached && now - cached.at < (this.options.settingsTtlMs ?? 300_000)) return cached.settings;
    const settings = await producerSettings(this.ctx, job.producerFunctionName);
    this.settingsCache.set(job.job, { at: now, settings });
    return settings;
  }

  /** The schedule as `ops preflight` reads it: its state, and its next fire and business date from its cron. */
  private async schedule(job: JobResources, settings: JobRuntimeSettings | undefined): Promise<ScheduleView> {
    const base = { name: job.scheduleName };
    let answer;
    try {
      answer = await this.ctx.clients.scheduler.send(
        new GetScheduleCommand({ Name: job.scheduleName, GroupName: job.scheduleGroupName }),
      );
    } catch (error) {
      return {
        ...base,
        state: 'unknown',
        nextFire: null,
        businessDate: null,
        error: `${(error as Error).name}: ${(error as Error).message}`,
      };
    }
    const expression = answer.ScheduleExpression;
    const timeZone = answer.ScheduleExpressionTimezone ?? settings?.timeZone ?? 'UTC';
    const view: ScheduleView = {
      ...base,
      state: answer.State ?? 'unknown',
      expression,
      timeZone,
      nextFire: null,
      businessDate: null,
    };
    if (!expression) return { ...view, error: 'the schedule has no expression' };
    try {
      const at = nextFireTime(parseCron(expression), timeZone, this.ctx.io.now());
      if (!at) return view;
      return {
        ...view,
        nextFire: at.toISOString(),
        businessDate: zonedDate(at, timeZone, settings?.businessDateOffsetDays ?? 0),
      };
    } catch (error) {
      return { ...view, error: `next fire unknown: ${(error as Error).message}` };
    }
  }
}

/** The allowance the consumers enforce (after headroom) and the SLO's window, as JobChartInput takes them. */
function limitsOf(settings: JobRuntimeSettings): JobOverview['limits'] {
  return {
    allowance: { starts: settings.rateLimit.startsPerInterval, intervalMs: settings.rateLimit.intervalSeconds * 1000 },
    ...(settings.slo ? { sloMinutes: settings.slo.completeWithinMinutes } : {}),
  };
}
