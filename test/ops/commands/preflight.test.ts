// preflight's operator-permissions check against a deployed stack: the caller's role is simulated
// (iam:SimulatePrincipalPolicy) for every call pause, resume, catch-up and redrive make, never tried.
import {
  GetRoleCommand,
  SimulatePrincipalPolicyCommand,
  type SimulatePrincipalPolicyCommandInput,
} from '@aws-sdk/client-iam';
import { GetCallerIdentityCommand } from '@aws-sdk/client-sts';
import type { CommandContext } from '../../../ops/context';
import { operatorPermissions, type JobFacts } from '../../../ops/commands/preflight';
import type { JobResources } from '../../../ops/resources';

const ACCOUNT = '111122223333';
const job: JobResources = {
  job: 'a-job',
  queueUrl: 'https://sqs/q',
  queueArn: `arn:aws:sqs:eu-west-1:${ACCOUNT}:q`,
  dlqUrl: 'https://sqs/dlq',
  dlqArn: `arn:aws:sqs:eu-west-1:${ACCOUNT}:dlq`,
  producerFunctionName: 'producer',
  consumerFunctionName: 'consumer',
  scheduleName: 'a-job-nightly',
  scheduleGroupName: 'paced-jobs-prod',
  eventSourceMappingUuid: 'uuid-consumer',
  admissionQueueUrl: 'https://sqs/adm',
  admissionQueueArn: `arn:aws:sqs:eu-west-1:${ACCOUNT}:adm`,
  admissionMappingUuid: 'uuid-admission',
};
const facts = [
  {
    job,
    producer: { FunctionArn: `arn:aws:lambda:eu-west-1:${ACCOUNT}:function:producer` },
    schedule: {
      Arn: `arn:aws:scheduler:eu-west-1:${ACCOUNT}:schedule/paced-jobs-prod/a-job-nightly`,
      Target: { RoleArn: `arn:aws:iam::${ACCOUNT}:role/sched`, Arn: 'x' },
    },
  },
] as unknown as JobFacts[];

/** A deployed stack's context whose IAM answers from `decide(action, resource)`. */
function context(decide: (action: string, resource: string) => string, options: { simulateFails?: Error } = {}) {
  const simulated: SimulatePrincipalPolicyCommandInput[] = [];
  const iam = {
    send: jest.fn(async (command: unknown) => {
      if (command instanceof GetRoleCommand) return { Role: { Arn: `arn:aws:iam::${ACCOUNT}:role/team/OpsRole` } };
      if (command instanceof SimulatePrincipalPolicyCommand) {
        if (options.simulateFails) throw options.simulateFails;
        simulated.push(command.input);
        const resource = command.input.ResourceArns![0];
        return {
          EvaluationResults: command.input.ActionNames!.map((a) => ({
            EvalActionName: a,
            EvalResourceName: resource,
            EvalDecision: decide(a, resource),
          })),
          IsTruncated: false,
        };
      }
      throw new Error(`unexpected ${String(command)}`);
    }),
  };
  const sts = {
    send: jest.fn(async (command: unknown) =>
      command instanceof GetCallerIdentityCommand
        ? { Account: ACCOUNT, Arn: `arn:aws:sts::${ACCOUNT}:assumed-role/OpsRole/alice` }
        : undefined,
    ),
  };
  const ctx = {
    resources: {
      source: 'cloudformation',
      stackName: 'PacedJobs-prod',
      region: 'eu-west-1',
      accountId: ACCOUNT,
      tables: { idempotency: 'idem', ledger: 'ledger' },
      jobs: [job],
      clients: {},
    },
    clients: { iam, sts },
  } as unknown as CommandContext;
  return { ctx, simulated };
}

describe('Function: operatorPermissions', () => {
  it("passes when the role may make every call, simulating the role's full ARN (with its path) for each resource", async () => {
    const { ctx, simulated } = context(() => 'allowed');

    const result = await operatorPermissions(ctx, facts);

    expect(result).toMatchObject({ check: 'operator-permissions', status: 'pass' });
    expect(result.reason).toBe(
      `arn:aws:iam::${ACCOUNT}:role/team/OpsRole may pause, resume, catch up and redrive every job (14 calls simulated)`,
    );
    expect(new Set(simulated.map((s) => s.PolicySourceArn))).toEqual(
      new Set([`arn:aws:iam::${ACCOUNT}:role/team/OpsRole`]),
    );
    const schedule = simulated.find((s) => s.ResourceArns![0].includes(':schedule/'))!;
    expect(schedule.ActionNames).toEqual(['scheduler:GetSchedule', 'scheduler:UpdateSchedule']);
    expect(simulated.find((s) => s.ResourceArns![0] === job.dlqArn)!.ActionNames).toEqual([
      'sqs:StartMessageMoveTask',
      'sqs:ReceiveMessage',
      'sqs:DeleteMessage',
    ]);
  });

  it('fails naming each denied call and what needs it', async () => {
    const { ctx } = context((action) =>
      action === 'scheduler:UpdateSchedule' || action === 'sqs:StartMessageMoveTask' ? 'implicitDeny' : 'allowed',
    );

    const result = await operatorPermissions(ctx, facts);

    expect(result.status).toBe('fail');
    expect(result.reason).toBe(
      `arn:aws:iam::${ACCOUNT}:role/team/OpsRole may not: scheduler:UpdateSchedule on ${facts[0].schedule!.Arn} (pause/resume: implicitDeny); ` +
        `sqs:StartMessageMoveTask on ${job.dlqArn} (redrive: implicitDeny)`,
    );
  });

  it('fails saying what it needs when the simulation itself is denied', async () => {
    const denied = Object.assign(new Error('User is not authorized to perform: iam:SimulatePrincipalPolicy'), {
      name: 'AccessDenied',
    });
    const { ctx } = context(() => 'allowed', { simulateFails: denied });

    const result = await operatorPermissions(ctx, facts);

    expect(result.status).toBe('fail');
    expect(result.reason).toContain('(the operator needs iam:SimulatePrincipalPolicy on itself for this check)');
  });

  it('is skipped on the local stack, saying why', async () => {
    const { ctx } = context(() => 'allowed');
    const local = { ...ctx, resources: { ...ctx.resources, source: 'local' } } as CommandContext;

    expect(await operatorPermissions(local, facts)).toMatchObject({
      status: 'skip',
      reason: expect.stringContaining('not IAM-bound locally'),
    });
  });
});
