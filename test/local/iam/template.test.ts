// The synthesized stack's own IAM, planned by local/plan.ts, decided by the authorizer: each role may do what its job
// needs and nothing across jobs.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Authorizer } from '../../../local/iam/authorizer';
import { rolePrincipal } from '../../../local/iam/credentials';
import { jobViews } from '../../../local/jobs';
import { describeRequest } from '../../../local/iam/requests';
import { planStack, type StackPlan } from '../../../local/plan';
import { idempotencyRecordId } from '../../../lambda/core/idempotencyKey';
import { keyLimitsItemKey } from '../../../lambda/core/keyLimits';
import { ledgerKeys } from '../../../lambda/core/ledgerContract';
import { role } from './fixtures';

const ACCOUNT = '000000000000';
const REGION = 'us-east-1';

describe('the synthesized PacedJobs-dev template', () => {
  let plan: StackPlan;
  let authorizer: Authorizer;

  beforeAll(() => {
    const template = JSON.parse(readFileSync(join(__dirname, '../../../cdk.out/PacedJobs-dev.template.json'), 'utf8'));
    plan = planStack(template, {
      stackName: 'PacedJobs-dev',
      region: REGION,
      accountId: ACCOUNT,
      sqsEndpoint: 'http://127.0.0.1:1',
    });
    authorizer = new Authorizer({ iam: plan.iam, accountId: ACCOUNT, region: REGION });
  });

  const allowed = async (
    roleArn: string | undefined,
    session: string,
    action: string,
    resource: string,
    secureTransport = true,
  ) => {
    if (!roleArn) throw new Error(`${session} has no role in the plan`);
    return (
      await authorizer.authorize({ principal: rolePrincipal(roleArn, session), action, resource, secureTransport })
    ).allowed;
  };

  it('has a role for every function and schedule, each with its identity policies', () => {
    expect(plan.iam.roles.length).toBeGreaterThan(0);
    const without = [...plan.functions, ...plan.schedules].filter(
      (owner) => !plan.iam.roles.find((r) => r.arn === owner.roleArn)?.policies.length,
    );
    expect(without.map((o) => o.name)).toEqual([]);
  });

  it('honours every grant the template makes on a named resource (the evaluator reads each statement as written)', async () => {
    const inapplicable = new Set<string>();
    for (const role of plan.iam.roles) {
      for (const { document } of role.policies) {
        for (const s of [document.Statement].flat() as {
          Effect: string;
          Action: string | string[];
          Resource: string | string[];
        }[]) {
          if (s.Effect !== 'Allow') continue;
          for (const action of [s.Action].flat().filter((a) => !a.includes('*'))) {
            for (const resource of [s.Resource].flat().filter((r) => !r.includes('*'))) {
              const decision = await authorizer.authorize({
                principal: rolePrincipal(role.arn, 'grant-check'),
                action,
                resource,
              });
              // CDK's grants list actions beside resources they do not apply to (dynamodb:GetRecords is on a table's
              // stream, s3:PutObject on objects, not the bucket): such a pair allows nothing on AWS either.
              if (decision.message?.endsWith('could not evaluate the request: no.resource.types')) {
                inapplicable.add(
                  `${action} on ${/^arn:aws:s3:::[^/]+$/.test(resource) ? 'a bucket' : /:table\/[^/]+$/.test(resource) ? 'a table' : resource}`,
                );
                continue;
              }
              expect({ role: role.name, action, resource, message: decision.message }).toEqual({
                role: role.name,
                action,
                resource,
                message: undefined,
              });
            }
          }
        }
      }
    }
    for (const pair of inapplicable)
      expect(pair).toMatch(/^(dynamodb:(GetRecords|GetShardIterator) on a table|s3:PutObject\w* on a bucket)$/);
  });

  it("lets each consumer write the idempotency table and work its own queue, and not another job's queue", async () => {
    const jobs = [...jobViews(plan).values()];
    expect(jobs.length).toBeGreaterThan(1);
    for (const job of jobs) {
      const consumer = job.consumer!;
      const idempotency = plan.tables.find((t) => t.name === consumer.environment.IDEMPOTENCY_TABLE_NAME)!;
      const ownRecord = { 'dynamodb:LeadingKeys': [idempotencyRecordId(job.name, 'op-1')] };
      expect(
        (
          await authorizer.authorize({
            principal: rolePrincipal(consumer.roleArn!, consumer.name),
            action: 'dynamodb:PutItem',
            resource: idempotency.arn,
            context: ownRecord,
          })
        ).allowed,
      ).toBe(true);
      for (const action of ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility']) {
        expect({
          job: job.name,
          action,
          allowed: await allowed(consumer.roleArn, consumer.name, action, job.queueArn!),
        }).toEqual({ job: job.name, action, allowed: true });
      }
      expect(await allowed(consumer.roleArn, consumer.name, 'sqs:SendMessage', job.dlqArn!)).toBe(true);
      for (const other of jobs.filter((j) => j !== job)) {
        expect({
          job: job.name,
          other: other.name,
          allowed: await allowed(consumer.roleArn, consumer.name, 'sqs:DeleteMessage', other.queueArn!),
        }).toEqual({
          job: job.name,
          other: other.name,
          allowed: false,
        });
      }
    }
  });

  it("denies a stranger's SendMessage to every job queue by the queue's policy, whatever its own policy allows", async () => {
    // A role of the account allowed to send to any queue, as an over-broad developer or CI role would be.
    const stranger = role('Stranger', [
      { Effect: 'Allow', Action: ['sqs:SendMessage', 'sqs:ReceiveMessage'], Resource: '*' },
    ]);
    const withStranger = new Authorizer({
      iam: { ...plan.iam, roles: [...plan.iam.roles, stranger] },
      accountId: ACCOUNT,
      region: REGION,
    });
    const send = async (roleArn: string, session: string, queue: string) =>
      withStranger.authorize({
        principal: rolePrincipal(roleArn, session),
        action: 'sqs:SendMessage',
        resource: queue,
      });
    const jobs = [...jobViews(plan).values()];
    for (const job of jobs) {
      const admissionArn = plan.queues.find((q) => q.url === job.admissionQueueUrl)!.arn;
      for (const queue of [job.queueArn!, job.dlqArn!, admissionArn]) {
        const denied = await send(stranger.arn, 'stranger', queue);
        expect({ queue, allowed: denied.allowed, reason: denied.reason }).toEqual({
          queue,
          allowed: false,
          reason: 'explicit-deny-resource',
        });
      }
      // Its own senders still send: the producer publishes and chains its steps, the consumer defers and dead-letters.
      expect((await send(job.producer!.roleArn!, job.producer!.name, job.queueArn!)).allowed).toBe(true);
      expect((await send(job.producer!.roleArn!, job.producer!.name, admissionArn)).allowed).toBe(true);
      expect((await send(job.consumer!.roleArn!, job.consumer!.name, job.queueArn!)).allowed).toBe(true);
      expect((await send(job.consumer!.roleArn!, job.consumer!.name, job.dlqArn!)).allowed).toBe(true);
    }
    // Receiving is not what the policy restricts: the stranger's identity policy still decides it.
    expect(
      (
        await withStranger.authorize({
          principal: rolePrincipal(stranger.arn, 'stranger'),
          action: 'sqs:ReceiveMessage',
          resource: jobs[0].queueArn!,
        })
      ).allowed,
    ).toBe(true);
    expect(withStranger.denials.at(-1)?.message).toMatch(
      /is not authorized to perform: sqs:SendMessage on resource: .* with an explicit deny in a resource-based policy$/,
    );
  });

  it("denies a consumer's write to another job's idempotency, ledger and limiter partitions, and allows its own", async () => {
    const jobs = [...jobViews(plan).values()];
    const tableOf = (variable: string, consumer: NonNullable<(typeof jobs)[number]['consumer']>) =>
      plan.tables.find((t) => t.name === consumer.environment[variable])!.name;
    for (const job of jobs) {
      const consumer = job.consumer!;
      const principal = rolePrincipal(consumer.roleArn!, consumer.name);
      const request = (operation: string, table: string, item: Record<string, unknown>) => {
        const body = { TableName: table, ...(operation === 'PutItem' ? { Item: item } : { Key: item }) };
        const described = describeRequest(
          'dynamodb',
          {
            method: 'POST',
            url: '/',
            headers: { 'x-amz-target': `DynamoDB_20120810.${operation}` },
            body: JSON.stringify(body),
          },
          plan,
        );
        return authorizer.authorize({ principal, ...described.permissions[0] });
      };
      const idempotency = tableOf('IDEMPOTENCY_TABLE_NAME', consumer);
      const ledger = tableOf('LEDGER_TABLE_NAME', consumer);
      const limiter = tableOf('LIMITER_TABLE_NAME', consumer);
      for (const other of jobs.filter((j) => j !== job)) {
        // Marking another job's operation complete would suppress its deletions: denied, as is reading its record.
        for (const operation of ['PutItem', 'UpdateItem', 'DeleteItem', 'GetItem']) {
          const decision = await request(operation, idempotency, {
            id: { S: idempotencyRecordId(other.name, 'op-1') },
          });
          expect({ job: job.name, other: other.name, operation, allowed: decision.allowed }).toEqual({
            job: job.name,
            other: other.name,
            operation,
            allowed: false,
          });
        }
        expect(
          (await request('PutItem', ledger, { pk: { S: ledgerKeys.rejectionPartition(other.name) }, sk: { S: 'x' } }))
            .allowed,
        ).toBe(false);
        expect((await request('UpdateItem', limiter, { pk: { S: keyLimitsItemKey(other.name) } })).allowed).toBe(false);
      }
      for (const operation of ['PutItem', 'UpdateItem', 'DeleteItem', 'GetItem']) {
        const decision = await request(operation, idempotency, { id: { S: idempotencyRecordId(job.name, 'op-1') } });
        expect({ job: job.name, operation, message: decision.message }).toEqual({
          job: job.name,
          operation,
          message: undefined,
        });
      }
      expect(
        (await request('PutItem', ledger, { pk: { S: ledgerKeys.rejectionPartition(job.name) }, sk: { S: 'x' } }))
          .allowed,
      ).toBe(true);
      expect((await request('UpdateItem', limiter, { pk: { S: keyLimitsItemKey(job.name) } })).allowed).toBe(true);
    }
  });

  it("denies a consumer's own queue over plain HTTP: the enforceSSL queue policy", async () => {
    const job = [...jobViews(plan).values()][0];
    expect(await allowed(job.consumer!.roleArn, job.consumer!.name, 'sqs:DeleteMessage', job.queueArn!, false)).toBe(
      false,
    );
    expect(authorizer.denials.at(-1)).toMatchObject({ reason: 'explicit-deny-resource', resource: job.queueArn });
  });

  it('lets each schedule role invoke its own producer only, and Scheduler assume it', async () => {
    expect(plan.schedules.length).toBeGreaterThan(1);
    for (const schedule of plan.schedules) {
      expect(await allowed(schedule.roleArn, schedule.name, 'lambda:InvokeFunction', schedule.targetArn)).toBe(true);
      for (const other of plan.schedules.filter((s) => s !== schedule)) {
        expect(await allowed(schedule.roleArn, schedule.name, 'lambda:InvokeFunction', other.targetArn)).toBe(false);
      }
      const assume = await authorizer.authorize({
        principal: { kind: 'service', service: 'scheduler.amazonaws.com' },
        action: 'sts:AssumeRole',
        resource: schedule.roleArn!,
        context: { 'aws:SourceAccount': ACCOUNT, 'aws:SourceArn': schedule.arn },
      });
      expect(assume).toMatchObject({ allowed: true });
    }
  });
});
