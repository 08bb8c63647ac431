// The EventBridge Scheduler API over the local schedules (GetSchedule, ListSchedules, UpdateSchedule), so an operator
// tool can pause a schedule (State DISABLED) and resume it against the local stack as it would against AWS. A schedule
// is addressed in its group, as on AWS: a call that names no group means `default`, and one in another group is not
// found there.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { listenOnLoopback, type RunningServer } from './servers';
import { type LocalScheduler, ScheduleError } from './scheduler';
import type { PlannedSchedule } from './plan';

const ONE = /^\/schedules\/([^/]+)$/;
/** The group Scheduler means when a call names none. */
const DEFAULT_GROUP = 'default';

function describe(schedule: PlannedSchedule, state: string, created: number): Record<string, unknown> {
  return {
    Arn: schedule.arn,
    Name: schedule.name,
    GroupName: schedule.group,
    State: state,
    ScheduleExpression: schedule.expression,
    ScheduleExpressionTimezone: schedule.timeZone,
    FlexibleTimeWindow: { Mode: 'OFF' },
    Target: {
      Arn: schedule.targetArn,
      RoleArn: `arn:aws:iam::000000000000:role/local-scheduler`,
      Input: schedule.input,
      RetryPolicy: {
        MaximumRetryAttempts: schedule.maximumRetryAttempts,
        MaximumEventAgeInSeconds: schedule.maximumEventAgeSeconds,
      },
      ...(schedule.deadLetterArn ? { DeadLetterConfig: { Arn: schedule.deadLetterArn } } : {}),
    },
    CreationDate: created,
    LastModificationDate: created,
  };
}

interface UpdateBody {
  GroupName?: string;
  State?: string;
  ScheduleExpression?: string;
  ScheduleExpressionTimezone?: string;
  Target?: {
    Arn?: string;
    Input?: string;
    RetryPolicy?: { MaximumRetryAttempts?: number; MaximumEventAgeInSeconds?: number };
    DeadLetterConfig?: { Arn?: string };
  };
}

/** What every request reads: the schedules, and the one creation time the API reports for all of them. */
interface SchedulerApi {
  scheduler: LocalScheduler;
  created: number;
}

export async function startSchedulerApi(scheduler: LocalScheduler, port = 0): Promise<RunningServer> {
  const api: SchedulerApi = { scheduler, created: Math.floor(Date.now() / 1000) };
  const server = createServer((req, res) => {
    handle(api, req, res).catch((error: Error) =>
      reply(res, 500, { Message: error.message }, 'InternalServerException'),
    );
  });
  return listenOnLoopback(server, port);
}

async function handle(api: SchedulerApi, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let raw = '';
  for await (const chunk of req) raw += chunk;
  const url = new URL(req.url ?? '/', 'http://local');
  if (url.pathname === '/schedules' && req.method === 'GET')
    return reply(res, 200, { Schedules: listSchedules(api, url.searchParams) });
  const one = ONE.exec(url.pathname);
  if (!one)
    return reply(
      res,
      404,
      { Message: `${req.method} ${url.pathname} is not emulated locally` },
      'ResourceNotFoundException',
    );
  const name = decodeURIComponent(one[1]);
  // GetSchedule sends its group as the groupName query parameter, UpdateSchedule as GroupName in its body.
  const body: UpdateBody = req.method === 'PUT' && raw ? (JSON.parse(raw) as UpdateBody) : {};
  const group = (req.method === 'PUT' ? body.GroupName : url.searchParams.get('groupName')) ?? DEFAULT_GROUP;
  const found = scheduleInGroup(api.scheduler, name, group);
  if ('notFound' in found) return reply(res, 404, { Message: found.notFound }, 'ResourceNotFoundException');
  if (req.method === 'GET') {
    const state = api.scheduler.list().find((s) => s.schedule.name === name)!.state;
    return reply(res, 200, describe(found.schedule, state, api.created));
  }
  if (req.method === 'PUT') return updateSchedule(api.scheduler, name, found.schedule, body, res);
  return reply(res, 405, { Message: `${req.method} is not emulated for a schedule` }, 'ValidationException');
}

/** ListSchedules: the summaries of the schedules its filters select. */
function listSchedules(api: SchedulerApi, params: URLSearchParams): Record<string, unknown>[] {
  const prefix = params.get('NamePrefix') ?? '';
  const state = params.get('State');
  // ListSchedules without a group lists every group's schedules (unlike the calls on one schedule).
  const group = params.get('ScheduleGroup');
  return api.scheduler
    .list()
    .filter(
      (s) =>
        s.schedule.name.startsWith(prefix) && (!state || s.state === state) && (!group || s.schedule.group === group),
    )
    .map((s) => {
      const d = describe(s.schedule, s.state, api.created);
      return {
        Arn: d.Arn,
        Name: d.Name,
        GroupName: d.GroupName,
        State: d.State,
        Target: { Arn: s.schedule.targetArn },
        CreationDate: api.created,
        LastModificationDate: api.created,
      };
    });
}

/** The schedule `name` in `group`, or why there is none there. */
function scheduleInGroup(
  scheduler: LocalScheduler,
  name: string,
  group: string,
): { schedule: PlannedSchedule } | { notFound: string } {
  let schedule: PlannedSchedule;
  try {
    schedule = scheduler.get(name);
  } catch (error) {
    if (error instanceof ScheduleError) return { notFound: error.message };
    throw error;
  }
  // Names are unique within a group only: the same name elsewhere is another schedule, and this group has none.
  if (schedule.group !== group) return { notFound: `Schedule ${name} does not exist.` };
  return { schedule };
}

/** UpdateSchedule replaces the whole definition; absent optional fields take their defaults, as on AWS. */
function updateSchedule(
  scheduler: LocalScheduler,
  name: string,
  current: PlannedSchedule,
  body: UpdateBody,
  res: ServerResponse,
): void {
  const next: PlannedSchedule = {
    ...current,
    expression: body.ScheduleExpression ?? current.expression,
    timeZone: body.ScheduleExpressionTimezone ?? 'UTC',
    enabled: (body.State ?? 'ENABLED') === 'ENABLED',
    targetArn: body.Target?.Arn ?? current.targetArn,
    input: body.Target?.Input,
    maximumRetryAttempts: body.Target?.RetryPolicy?.MaximumRetryAttempts ?? 185,
    maximumEventAgeSeconds: body.Target?.RetryPolicy?.MaximumEventAgeInSeconds ?? 86400,
    deadLetterArn: body.Target?.DeadLetterConfig?.Arn,
  };
  try {
    scheduler.update(name, next);
  } catch (error) {
    if (error instanceof ScheduleError) return reply(res, 400, { Message: error.message }, 'ValidationException');
    throw error;
  }
  return reply(res, 200, { ScheduleArn: current.arn });
}

function reply(res: ServerResponse, status: number, body: unknown, errorType?: string): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    'x-amzn-requestid': randomUUID(),
    ...(errorType ? { 'x-amzn-errortype': errorType } : {}),
  });
  res.end(JSON.stringify(body));
}
