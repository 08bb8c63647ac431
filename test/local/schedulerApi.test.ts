// The local EventBridge Scheduler API: a schedule is addressed in its group, as on AWS, and the stack's schedule group
// reaches the tools through the planned outputs (the endpoints file carries them).
import {
  GetScheduleCommand,
  type GetScheduleCommandOutput,
  ListSchedulesCommand,
  ResourceNotFoundException,
  SchedulerClient,
  UpdateScheduleCommand,
} from '@aws-sdk/client-scheduler';
import { planStack, type StackPlan } from '../../local/plan';
import { LocalScheduler } from '../../local/scheduler';
import { startSchedulerApi } from '../../local/schedulerApi';
import { LOCAL_CREDENTIALS, type RunningServer } from '../../local/servers';
import type { CloudFormationTemplate } from '../../local/template';

const ACCOUNT = '000000000000';
const OPTIONS = {
  stackName: 'PacedJobs-test',
  region: 'us-east-1',
  accountId: ACCOUNT,
  sqsEndpoint: 'http://127.0.0.1:9',
};
const GROUP = 'paced-jobs-test';
const PRODUCER_ARN = `arn:aws:lambda:us-east-1:${ACCOUNT}:function:nightly-producer`;

/**
 * A job's schedule in the stack's group as lib/ synthesizes it (GroupName the group's name, created after the group),
 * with its two outputs; and one more schedule left in the default group.
 */
const TEMPLATE: CloudFormationTemplate = {
  Resources: {
    ScheduleGroup: { Type: 'AWS::Scheduler::ScheduleGroup', Properties: { Name: GROUP } },
    NightlySchedule: {
      Type: 'AWS::Scheduler::Schedule',
      DependsOn: ['ScheduleGroup'],
      Properties: {
        GroupName: GROUP,
        ScheduleExpression: 'cron(0 2 * * ? *)',
        ScheduleExpressionTimezone: 'Europe/London',
        FlexibleTimeWindow: { Mode: 'OFF' },
        State: 'ENABLED',
        Target: {
          Arn: PRODUCER_ARN,
          RoleArn: `arn:aws:iam::${ACCOUNT}:role/schedule`,
          Input: '{"scheduledTime":"<aws.scheduler.scheduled-time>"}',
        },
      },
    },
    Elsewhere: {
      Type: 'AWS::Scheduler::Schedule',
      Properties: {
        ScheduleExpression: 'cron(0 3 * * ? *)',
        FlexibleTimeWindow: { Mode: 'OFF' },
        Target: { Arn: PRODUCER_ARN, RoleArn: `arn:aws:iam::${ACCOUNT}:role/schedule` },
      },
    },
  },
  Outputs: {
    NightlyScheduleName: { Value: { Ref: 'NightlySchedule' }, Description: 'nightly: ScheduleName' },
    NightlyScheduleGroupName: { Value: GROUP, Description: 'nightly: ScheduleGroupName' },
    GroupRef: { Value: { Ref: 'ScheduleGroup' } },
  },
};

describe('Function: planStack (EventBridge Scheduler groups)', () => {
  it('plans each schedule in its group, a schedule without GroupName in default, and resolves the group outputs', () => {
    const plan = planStack(TEMPLATE, OPTIONS);
    expect(plan.schedules.map((s) => [s.logicalId, s.name, s.group, s.arn])).toEqual([
      [
        'NightlySchedule',
        'PacedJobs-test-NightlySchedule',
        GROUP,
        `arn:aws:scheduler:us-east-1:${ACCOUNT}:schedule/${GROUP}/PacedJobs-test-NightlySchedule`,
      ],
      [
        'Elsewhere',
        'PacedJobs-test-Elsewhere',
        'default',
        `arn:aws:scheduler:us-east-1:${ACCOUNT}:schedule/default/PacedJobs-test-Elsewhere`,
      ],
    ]);
    expect(plan.outputs).toEqual({
      NightlyScheduleName: 'PacedJobs-test-NightlySchedule',
      NightlyScheduleGroupName: GROUP,
      GroupRef: GROUP,
    });
  });
});

describe('Function: startSchedulerApi', () => {
  let plan: StackPlan;
  let local: LocalScheduler;
  let server: RunningServer;
  let client: SchedulerClient;
  let name: string;

  beforeAll(async () => {
    plan = planStack(TEMPLATE, OPTIONS);
    local = new LocalScheduler({ deliver: async () => undefined, deadLetter: async () => undefined });
    for (const schedule of plan.schedules) local.add(schedule);
    server = await startSchedulerApi(local);
    client = new SchedulerClient({
      endpoint: server.endpoint,
      region: 'us-east-1',
      credentials: LOCAL_CREDENTIALS,
      maxAttempts: 1,
    });
    name = plan.outputs.NightlyScheduleName;
  });
  afterAll(async () => {
    client.destroy();
    await server.close();
  });

  /** The error a Scheduler call is refused with. */
  const refusal = async (call: Promise<unknown>): Promise<ResourceNotFoundException> => {
    const error = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ResourceNotFoundException);
    return error as ResourceNotFoundException;
  };
  const stateOf = (scheduleName: string) => local.list().find((s) => s.schedule.name === scheduleName)!.state;
  /** UpdateSchedule with everything GetSchedule returned, and the new state. */
  const update = (current: GetScheduleCommandOutput, state: 'ENABLED' | 'DISABLED', groupName: string | undefined) =>
    client.send(
      new UpdateScheduleCommand({
        Name: current.Name,
        GroupName: groupName,
        ScheduleExpression: current.ScheduleExpression,
        ScheduleExpressionTimezone: current.ScheduleExpressionTimezone,
        FlexibleTimeWindow: current.FlexibleTimeWindow,
        Target: current.Target,
        State: state,
      }),
    );

  describe('Method: GetSchedule', () => {
    it('describes a schedule asked for in its group (the group the output names)', async () => {
      const got = await client.send(
        new GetScheduleCommand({ Name: name, GroupName: plan.outputs.NightlyScheduleGroupName }),
      );
      expect(got).toMatchObject({
        Name: name,
        GroupName: GROUP,
        Arn: `arn:aws:scheduler:us-east-1:${ACCOUNT}:schedule/${GROUP}/${name}`,
        State: 'ENABLED',
        ScheduleExpression: 'cron(0 2 * * ? *)',
        ScheduleExpressionTimezone: 'Europe/London',
      });
    });

    it('answers ResourceNotFoundException without a GroupName (that means default), as AWS does', async () => {
      const error = await refusal(client.send(new GetScheduleCommand({ Name: name })));
      expect(error.message).toBe(`Schedule ${name} does not exist.`);
    });

    it('answers ResourceNotFoundException in another group', async () => {
      const error = await refusal(client.send(new GetScheduleCommand({ Name: name, GroupName: 'paced-jobs-prod' })));
      expect(error.message).toBe(`Schedule ${name} does not exist.`);
    });

    it('finds a schedule of the default group with no GroupName, or with default', async () => {
      const elsewhere = plan.schedules.find((s) => s.logicalId === 'Elsewhere')!.name;
      expect((await client.send(new GetScheduleCommand({ Name: elsewhere }))).GroupName).toBe('default');
      expect((await client.send(new GetScheduleCommand({ Name: elsewhere, GroupName: 'default' }))).GroupName).toBe(
        'default',
      );
      await refusal(client.send(new GetScheduleCommand({ Name: elsewhere, GroupName: GROUP })));
    });
  });

  describe('Method: UpdateSchedule', () => {
    it('refuses a schedule named in the wrong group or in none, and changes nothing', async () => {
      const current = await client.send(new GetScheduleCommand({ Name: name, GroupName: GROUP }));

      const missing = await refusal(update(current, 'DISABLED', undefined));
      expect(missing.message).toBe(`Schedule ${name} does not exist.`);
      await refusal(update(current, 'DISABLED', 'default'));
      await refusal(update(current, 'DISABLED', 'paced-jobs-prod'));
      expect(stateOf(name)).toBe('ENABLED');
    });

    it('updates the schedule in its group', async () => {
      const current = await client.send(new GetScheduleCommand({ Name: name, GroupName: GROUP }));

      const updated = await update(current, 'DISABLED', GROUP);
      expect(updated.ScheduleArn).toBe(current.Arn);
      expect(stateOf(name)).toBe('DISABLED');
      expect((await client.send(new GetScheduleCommand({ Name: name, GroupName: GROUP }))).State).toBe('DISABLED');

      await update(current, 'ENABLED', GROUP);
      expect(stateOf(name)).toBe('ENABLED');
    });
  });

  describe('Method: ListSchedules', () => {
    it("lists one group's schedules when given its ScheduleGroup, and every group's without", async () => {
      const names = async (group?: string) =>
        ((await client.send(new ListSchedulesCommand({ GroupName: group }))).Schedules ?? []).map((s) => [
          s.Name,
          s.GroupName,
        ]);
      const elsewhere = plan.schedules.find((s) => s.logicalId === 'Elsewhere')!.name;
      expect(await names(GROUP)).toEqual([[name, GROUP]]);
      expect(await names('default')).toEqual([[elsewhere, 'default']]);
      expect(await names('paced-jobs-prod')).toEqual([]);
      expect(await names()).toEqual([
        [name, GROUP],
        [elsewhere, 'default'],
      ]);
    });
  });
});
