// `ops pause` and `ops resume`: stop admitting new work without losing any, and start again. Pause disables the
// schedules first (no new runs), then the producers' admission mappings (no run takes its next step), then the
// consumers' event source mappings (no new receives); messages, and each run's next step, stay queued for inspection.
// Resume reverses the order, so consumers are running before admission publishes more, and both before a run starts.
import { GetScheduleCommand, type GetScheduleCommandOutput, UpdateScheduleCommand } from '@aws-sdk/client-scheduler';
import { GetEventSourceMappingCommand, UpdateEventSourceMappingCommand } from '@aws-sdk/client-lambda';
import { type ChangeOptions, type CommandContext, confirmChange, selectJobs } from '../context';
import { MappingStateError } from '../errors';
import { renderTable } from '../io';
import type { JobResources } from '../resources';

export type AdmissionCommand = 'pause' | 'resume';

export interface AdmissionOptions extends ChangeOptions {
  job?: string;
  /** How long to wait for a mapping to settle in its new state. @default 120000 */
  mappingTimeoutMs?: number;
  /** @default 2000 */
  mappingPollMs?: number;
}

export interface AdmissionStep {
  job: string;
  /** `admission-mapping` is the producer's mapping on the admission queue; `event-source-mapping` the consumer's. */
  kind: 'schedule' | 'admission-mapping' | 'event-source-mapping';
  /** Schedule name or mapping UUID. */
  target: string;
  before: string;
  /** The state this step sets. */
  desired: string;
  /** The state differs from the desired one. */
  needed: boolean;
  /** The change was made (never in a dry run). */
  applied: boolean;
}

export interface AdmissionResult {
  ok: true;
  command: AdmissionCommand;
  dryRun: boolean;
  steps: AdmissionStep[];
}

const SCHEDULE = { pause: 'DISABLED', resume: 'ENABLED' } as const;
const MAPPING = { pause: 'Disabled', resume: 'Enabled' } as const;

/**
 * UpdateSchedule replaces the whole definition, so every field GetSchedule returned is sent back with the new state.
 * The group is the job's: it addresses the schedule (UpdateSchedule cannot move one), and a schedule outside the
 * default group is not found without it.
 */
function withState(job: JobResources, current: GetScheduleCommandOutput, state: 'ENABLED' | 'DISABLED') {
  return new UpdateScheduleCommand({
    Name: current.Name,
    GroupName: job.scheduleGroupName,
    ScheduleExpression: current.ScheduleExpression,
    ScheduleExpressionTimezone: current.ScheduleExpressionTimezone,
    StartDate: current.StartDate,
    EndDate: current.EndDate,
    Description: current.Description,
    KmsKeyArn: current.KmsKeyArn,
    Target: current.Target,
    FlexibleTimeWindow: current.FlexibleTimeWindow,
    ActionAfterCompletion: current.ActionAfterCompletion,
    State: state,
  });
}

export async function admission(
  ctx: CommandContext,
  command: AdmissionCommand,
  options: AdmissionOptions = {},
): Promise<AdmissionResult> {
  const jobs = selectJobs(ctx.resources, options.job);
  const { scheduler, lambda } = ctx.clients;
  const mappingState = async (uuid: string) =>
    (await lambda.send(new GetEventSourceMappingCommand({ UUID: uuid }))).State;
  const schedules = await Promise.all(
    jobs.map((j) => scheduler.send(new GetScheduleCommand({ Name: j.scheduleName, GroupName: j.scheduleGroupName }))),
  );
  const admissionMappings = await Promise.all(jobs.map((j) => mappingState(j.admissionMappingUuid)));
  const consumerMappings = await Promise.all(jobs.map((j) => mappingState(j.eventSourceMappingUuid)));

  const step = (
    job: string,
    kind: AdmissionStep['kind'],
    target: string,
    state: string | undefined,
    desired: string,
  ): AdmissionStep => ({
    job,
    kind,
    target,
    before: state ?? 'UNKNOWN',
    desired,
    needed: state !== desired,
    applied: false,
  });
  const scheduleSteps = jobs.map((j, i) =>
    step(j.job, 'schedule', j.scheduleName, schedules[i].State, SCHEDULE[command]),
  );
  const admissionSteps = jobs.map((j, i) =>
    step(j.job, 'admission-mapping', j.admissionMappingUuid, admissionMappings[i], MAPPING[command]),
  );
  const consumerSteps = jobs.map((j, i) =>
    step(j.job, 'event-source-mapping', j.eventSourceMappingUuid, consumerMappings[i], MAPPING[command]),
  );
  // Across all selected jobs, upstream first on pause: every schedule stops before any admission does, and admission
  // before any consumer, so nothing new reaches a stage already stopped. Resume starts downstream first, so each stage
  // runs before the one that feeds it.
  const steps =
    command === 'pause'
      ? [...scheduleSteps, ...admissionSteps, ...consumerSteps]
      : [...consumerSteps, ...admissionSteps, ...scheduleSteps];
  const result: AdmissionResult = { ok: true, command, dryRun: Boolean(options.dryRun), steps };
  const todo = steps.filter((s) => s.needed);
  if (options.dryRun || todo.length === 0) return result;

  const names = [...new Set(todo.map((s) => s.job))];
  await confirmChange(
    ctx,
    `${command} ${names.join(', ')} (${todo.length} change${todo.length === 1 ? '' : 's'})`,
    options,
  );
  for (const step of todo) {
    if (step.kind === 'schedule') {
      const index = jobs.findIndex((j) => j.job === step.job);
      await scheduler.send(withState(jobs[index], schedules[index], SCHEDULE[command]));
    } else {
      await lambda.send(new UpdateEventSourceMappingCommand({ UUID: step.target, Enabled: command === 'resume' }));
      await waitForMapping(ctx, step.target, MAPPING[command], options);
    }
    step.applied = true;
    ctx.io.stderr(`${command}: ${step.job} ${step.kind} ${step.target} ${step.before} -> ${step.desired}`);
  }
  return result;
}

/**
 * UpdateEventSourceMapping answers while the mapping is still Disabling/Enabling; pause is only done when pollers have
 * stopped, so the next step (or the operator) can rely on it.
 * @throws MappingStateError when the mapping has not settled within the timeout.
 */
async function waitForMapping(
  ctx: CommandContext,
  uuid: string,
  desired: string,
  options: AdmissionOptions,
): Promise<void> {
  const timeoutMs = options.mappingTimeoutMs ?? 120_000;
  const pollMs = options.mappingPollMs ?? 2_000;
  const deadline = ctx.io.now().getTime() + timeoutMs;
  let state: string | undefined;
  for (;;) {
    state = (await ctx.clients.lambda.send(new GetEventSourceMappingCommand({ UUID: uuid }))).State;
    if (state === desired) return;
    if (ctx.io.now().getTime() >= deadline) {
      throw new MappingStateError(
        `event source mapping ${uuid} is still ${state} after ${timeoutMs} ms (wanted ${desired}); check it and re-run`,
        uuid,
        state,
      );
    }
    await ctx.io.sleep(pollMs);
  }
}

export function renderAdmission(result: AdmissionResult): string {
  const head = result.dryRun ? `${result.command} (dry run: nothing changed)` : result.command;
  const table = renderTable(
    ['step', 'job', 'what', 'target', 'before', 'after'],
    result.steps.map((s, i) => [
      i + 1,
      s.job,
      s.kind,
      s.target,
      s.before,
      !s.needed ? `${s.before} (unchanged)` : s.applied ? s.desired : `${s.desired} (would change)`,
    ]),
  );
  const footer =
    result.command === 'pause'
      ? "\nmessages and each run's next admission step stay queued; `ops resume` restarts consumers, then admission, then schedules"
      : '\neach run admitting goes on from the cursor in its ledger item when its next step comes due (see `ops status`)';
  return `${head}\n${table}${footer}`;
}
