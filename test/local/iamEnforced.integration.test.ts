// IAM enforced on the local stack, end to end on the engine's synthesized test app (test/support/testApp.ts): a grant taken out of a role makes the
// first request that needs it fail by name, the work that needed it retries and dead-letters as it would on AWS, and
// the run report fails naming action, resource and role; a schedule whose role may not invoke its producer is refused
// and dead-lettered (both on one local stack: the schedule's job is another one). With `iam: false` the same missing
// grant is only reported, as what AWS would deny. That the unchanged template needs no grant it lacks is checked on the
// unchanged stack test/local/session.test.ts opens.
import { chaosJobResources } from '../../chaos/run';
import type { SeededDemo } from '../../local/fixture';
import { previewPlan } from '../../local/jobs';
import { buildRunReport, formatReport, type RunReport } from '../../local/report';
import { observeJob } from '../../local/run';
import { SessionError, type LocalSession } from '../../local/session';
import type { CloudFormationTemplate } from '../../local/template';
import { waitFor } from '../../local/waitFor';
import type { JobRuntimeSettings } from '../../lambda/core/constants';
import { OBJECT_SWEEPER, openTestAppSession, RECORD_WRITER, TEST_APP_STACK } from '../support/testApp';

/** Its consumer writes each item's result into its `results` table (one PutItem a record): every record needs the grant. */
const JOB = RECORD_WRITER;
/** The job whose schedule loses lambda:InvokeFunction: not JOB, whose schedule must deliver for its own case. */
const SCHEDULED = OBJECT_SWEEPER;
const ITEMS = 3;
const TABLE = 'results';
const REMOVED = 'dynamodb:PutItem';
/** Seconds, not minutes: a failed record is received again after CONSUMER_TIMEOUT and dead-lettered after RECEIVES. */
const CONSUMER_TIMEOUT = 8;
const RECEIVES = 2;

type Resource = { Type: string; Properties: Record<string, any> };
type Statement = { Effect: string; Action: string | string[]; Resource: unknown };

const resourcesOf = (t: CloudFormationTemplate) => t.Resources as unknown as Record<string, Resource>;
const list = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);
const getAttOf = (v: unknown): string | undefined => (v as { 'Fn::GetAtt'?: [string, string] })?.['Fn::GetAtt']?.[0];

/** The AWS::IAM::Policy resources attached to a role (by its logical ID). */
function policiesOfRole(t: CloudFormationTemplate, roleId: string): Resource[] {
  const policies = Object.values(resourcesOf(t)).filter(
    (r) =>
      r.Type === 'AWS::IAM::Policy' &&
      list(r.Properties.Roles ?? []).some((ref: { Ref?: string }) => ref?.Ref === roleId),
  );
  if (policies.length === 0) throw new Error(`the template attaches no AWS::IAM::Policy to role ${roleId}`);
  return policies;
}

/**
 * The logical ID of the table named `tableName`, as chaosJobResources' settings name it: the preview plan's name, the
 * one the stack gives or CloudFormation's (for a table without TableName) as the plan derives it.
 */
function tableId(t: CloudFormationTemplate, tableName: string): string {
  const found = previewPlan(t, 'Chaos').tables.find((table) => table.name === tableName);
  if (!found) throw new Error(`the template has no table ${tableName}`);
  return found.logicalId;
}

/**
 * The job's consumer and queues retimed so a failing record reaches the DLQ in seconds: a short consumer timeout (and
 * visibility to match), RECEIVES receives, no batching wait.
 */
function retime(t: CloudFormationTemplate): void {
  const job = chaosJobResources(t, JOB);
  job.consumer.Properties.Timeout = CONSUMER_TIMEOUT;
  job.queue.Properties.VisibilityTimeout = CONSUMER_TIMEOUT;
  job.queue.Properties.RedrivePolicy = { ...job.queue.Properties.RedrivePolicy, maxReceiveCount: RECEIVES };
  for (const r of Object.values(resourcesOf(t)))
    if (r.Type === 'AWS::Lambda::EventSourceMapping') r.Properties.MaximumBatchingWindowInSeconds = 0;
}

/** The consumer counts a record failing on its last allowed receive as dead-lettered: it must know the new count. */
const retimedSettings = (s: JobRuntimeSettings): JobRuntimeSettings =>
  s.jobName === JOB ? { ...s, maxReceiveCount: RECEIVES } : s;

/**
 * One grant out of the consumer's identity policy: `action` on the job's `alias` table (and its indexes). The table's
 * ARN leaves the statements that grant the action; a statement of its own grants the table everything else they did.
 */
function withoutConsumerGrant(t: CloudFormationTemplate, alias: string, action: string): CloudFormationTemplate {
  const copy = structuredClone(t);
  const job = chaosJobResources(copy, JOB);
  const roleId = getAttOf(job.consumer.Properties.Role);
  if (!roleId) throw new Error(`the ${JOB} consumer's Role is not a Fn::GetAtt of a template role`);
  const table = tableId(copy, job.settings.tables[alias]);
  const onTable = (r: unknown) => JSON.stringify(r).includes(`"${table}"`);
  let removed = 0;
  for (const policy of policiesOfRole(copy, roleId)) {
    const statements = list(policy.Properties.PolicyDocument.Statement as Statement | Statement[]);
    const next: Statement[] = [];
    for (const s of statements) {
      const actions = list(s.Action);
      const resources = list(s.Resource);
      if (s.Effect !== 'Allow' || !actions.includes(action) || !resources.some(onTable)) {
        next.push(s);
        continue;
      }
      removed++;
      const others = resources.filter((r) => !onTable(r));
      if (others.length > 0) next.push({ ...s, Resource: others });
      const kept = actions.filter((a) => a !== action);
      if (kept.length > 0) next.push({ ...s, Action: kept, Resource: resources.filter(onTable) });
    }
    policy.Properties.PolicyDocument.Statement = next;
  }
  if (removed === 0) throw new Error(`no statement of the ${JOB} consumer's policies grants ${action} on ${table}`);
  return copy;
}

/** The schedule's role loses its lambda:InvokeFunction statement; Scheduler retries once, then dead-letters. */
function withoutScheduleInvoke(t: CloudFormationTemplate, jobName: string): CloudFormationTemplate {
  const copy = structuredClone(t);
  const job = chaosJobResources(copy, jobName);
  const producerId = Object.entries(resourcesOf(copy)).find(([, r]) => r === job.producer)![0];
  const schedule = Object.values(resourcesOf(copy)).find(
    (r) => r.Type === 'AWS::Scheduler::Schedule' && getAttOf(r.Properties.Target?.Arn) === producerId,
  );
  if (!schedule) throw new Error(`the template has no schedule targeting the ${jobName} producer`);
  schedule.Properties.Target.RetryPolicy = { ...schedule.Properties.Target.RetryPolicy, MaximumRetryAttempts: 1 };
  const roleId = getAttOf(schedule.Properties.Target.RoleArn);
  if (!roleId) throw new Error(`the ${jobName} schedule's Target.RoleArn is not a Fn::GetAtt of a template role`);
  let removed = 0;
  for (const policy of policiesOfRole(copy, roleId)) {
    const statements = list(policy.Properties.PolicyDocument.Statement as Statement | Statement[]);
    const next = statements.filter((s) => !list(s.Action).includes('lambda:InvokeFunction'));
    removed += statements.length - next.length;
    policy.Properties.PolicyDocument.Statement = next;
  }
  if (removed === 0) throw new Error(`the ${jobName} schedule's role has no lambda:InvokeFunction statement`);
  return copy;
}

/** What `npm start` observes of the job at the end of its run (local/run.ts collectReport), as a run report. */
async function runReport(session: LocalSession, seeded: SeededDemo, settled: boolean): Promise<RunReport> {
  const observation = await observeJob(session, JOB, seeded);
  return buildRunReport({
    env: TEST_APP_STACK,
    businessDate: session.businessDateFor(JOB),
    settled,
    durationMs: 0,
    jobs: new Map([[JOB, observation]]),
    warnings: session.warnings(),
  });
}

/** The job's ARN of the table behind `alias`, as the local plan names it (what a denial's resource is). */
function tableArn(session: LocalSession, alias: string): string {
  const name = session.job(JOB).settings.tables[alias];
  const table = session.stack.plan.tables.find((t) => t.name === name);
  if (!table) throw new Error(`the local plan has no table ${name}`);
  return table.arn;
}

const logs: string[] = [];
const log = (source: string, line: string) => {
  logs.push(`[${source}] ${line}`);
  if (logs.length > 5000) logs.shift();
};

describe('IAM enforced, grants taken out (one local stack)', () => {
  let session: LocalSession;

  beforeAll(async () => {
    session = await openTestAppSession({
      log,
      // As many environments as items: no invocation of the retimed consumer waits for a cold start.
      prewarm: ITEMS,
      template: (t) => {
        const changed = withoutScheduleInvoke(withoutConsumerGrant(t, TABLE, REMOVED), SCHEDULED);
        retime(changed);
        return changed;
      },
      jobSettings: retimedSettings,
    });
  }, 120_000);

  afterAll(async () => {
    await session?.close();
  });

  describe('the consumer role without dynamodb:PutItem on the results table', () => {
    let seeded: SeededDemo;

    beforeAll(async () => {
      const businessDate = session.businessDateFor(JOB);
      seeded = await session.seed(JOB, ITEMS, businessDate);
      session.startConsumers();
      await session.fire(JOB, { scheduledTime: new Date(), businessDate });
      await waitFor(
        'every seeded item in the DLQ',
        async () => {
          const dlq = await session.depth(session.job(JOB).dlqUrl);
          return dlq.total >= ITEMS ? dlq : false;
        },
        { timeoutMs: 90_000, intervalMs: 250 },
      );
    }, 120_000);

    it("denies the first call that needs the grant, by name: the action removed, on the table, by the consumer's role", () => {
      const job = session.job(JOB);
      const denials = session.denials(JOB);
      expect(denials.length).toBeGreaterThan(0);
      expect(denials[0]).toMatchObject({
        action: REMOVED,
        resource: tableArn(session, TABLE),
        role: job.consumer!.roleArn,
        caller: job.consumer!.name,
      });
      expect(denials[0].message).toContain(
        `is not authorized to perform: ${REMOVED} on resource: ${tableArn(session, TABLE)}`,
      );
      // Nothing else the job does is denied: the one grant removed is the one missing.
      expect(denials.map((d) => `${d.action} ${d.resource}`)).toEqual([`${REMOVED} ${tableArn(session, TABLE)}`]);
      // Every receive of every record tried the write: at least one each.
      expect(denials[0].count).toBeGreaterThanOrEqual(ITEMS * RECEIVES);
      const raw = session.stack.denials().filter((d) => d.sessionName === job.consumer!.name);
      expect(raw[0]).toMatchObject({ action: REMOVED, enforced: true, roleArn: job.consumer!.roleArn });
    });

    it('sends every seeded record through retry to the DLQ, and writes nothing', async () => {
      const job = session.job(JOB);
      const dlq = await session.readQueue(job.dlqUrl);
      expect(dlq).toHaveLength(ITEMS);
      const items = dlq.map((m) => (JSON.parse(m.body) as { resource: { itemId: string } }).resource.itemId).sort();
      expect(items).toEqual([...seeded.expectedOperations].sort());
      // Failed on each receive (SQS moved them after RECEIVES), never rejected as invalid or dead-lettered by the consumer.
      expect(job.mapping!.statistics.failed).toBeGreaterThanOrEqual(ITEMS * RECEIVES);
      for (const m of dlq) expect(m.attributes.failureReason).toBeUndefined();
      const ledger = await session.ledgerTotals(JOB);
      expect(ledger).toMatchObject({
        discovered: ITEMS,
        published: ITEMS,
        completed: 0,
        rejected: 0,
        deadLettered: ITEMS,
      });
      expect(session.writes.filter((w) => w.resource === job.settings.tables[TABLE])).toEqual([]);
      expect((await session.depth(job.queueUrl)).total).toBe(0);
    });

    it("fails the run report's iam-allowed check, naming action, resource and role", async () => {
      const job = session.job(JOB);
      const report = await runReport(session, seeded, true);
      expect(report.ok).toBe(false);
      const check = report.checks.find((c) => c.job === JOB && c.name === 'iam-allowed');
      expect(check?.ok).toBe(false);
      expect(check?.detail).toContain(`${REMOVED} on ${tableArn(session, TABLE)} by ${job.consumer!.roleArn}`);
      expect(check?.detail).toMatch(/^\d+ requests denied: /);
      expect(report.jobs[JOB].denials).toEqual(session.denials(JOB));
      expect(formatReport(report)).toContain(
        `DENIED  ${JOB}  ${REMOVED} on ${tableArn(session, TABLE)} by ${job.consumer!.roleArn} (${job.consumer!.name})`,
      );
    });
  });

  describe('the schedule role without lambda:InvokeFunction', () => {
    it("denies the invoke on the producer by the schedule's role, retries, and dead-letters the event to the schedule's DLQ", async () => {
      const job = session.job(SCHEDULED);
      const schedule = session.stack.scheduler.get(job.scheduleName!);
      expect(schedule.maximumRetryAttempts).toBe(1);
      expect(schedule.deadLetterArn).toBeDefined();
      const scheduleDlq = session.stack.queueUrl(schedule.deadLetterArn!);
      const before = (await session.depth(scheduleDlq)).total;

      // session.fire throws on a failed delivery, with the scheduler's last error.
      const fired = session.fire(SCHEDULED, {
        scheduledTime: new Date(),
        businessDate: session.businessDateFor(SCHEDULED),
      });
      await expect(fired).rejects.toThrow(SessionError);
      await expect(fired).rejects.toThrow(
        new RegExp(
          `schedule ${job.scheduleName} could not deliver to its producer: .*is not authorized to perform: lambda:InvokeFunction on resource: ${job.producer!.arn}`,
        ),
      );

      const denials = session.denials(SCHEDULED);
      expect(denials).toEqual([
        expect.objectContaining({
          action: 'lambda:InvokeFunction',
          resource: job.producer!.arn,
          role: schedule.roleArn,
          caller: job.scheduleName,
          count: schedule.maximumRetryAttempts + 1,
        }),
      ]);

      // The event Scheduler could not deliver, in the DLQ with Scheduler's attributes; the producer never ran.
      await waitFor(
        "the event in the schedule's DLQ",
        async () => (await session.depth(scheduleDlq)).total > before || false,
        { timeoutMs: 10_000 },
      );
      const [dead] = await session.readQueue(scheduleDlq);
      expect(dead.attributes).toMatchObject({
        ERROR_CODE: 'TargetDeliveryFailed',
        RETRY_ATTEMPTS: '1',
        TARGET_ARN: job.producer!.arn,
        SCHEDULE_ARN: schedule.arn,
      });
      expect(dead.attributes.ERROR_MESSAGE).toContain('lambda:InvokeFunction');
      expect(JSON.parse(dead.body)).toMatchObject({ businessDate: session.businessDateFor(SCHEDULED) });
      expect((await session.ledgerTotals(SCHEDULED)).batches).toBe(0);
    }, 60_000);
  });
});

describe('IAM not enforced (iam: false) with the grant removed', () => {
  let session: LocalSession;

  beforeAll(async () => {
    session = await openTestAppSession({
      log,
      iam: false,
      prewarm: ITEMS,
      template: (t) => withoutConsumerGrant(t, TABLE, REMOVED),
    });
  }, 120_000);

  afterAll(async () => {
    await session?.close();
  });

  it('completes the records, lists what AWS would deny (not enforced), and warns that IAM is off', async () => {
    const job = session.job(JOB);
    const businessDate = session.businessDateFor(JOB);
    const seeded = await session.seed(JOB, ITEMS, businessDate);
    session.startConsumers();
    await session.fire(JOB, { scheduledTime: new Date(), businessDate });
    expect(await session.settle({ deadline: Date.now() + 90_000, jobs: [JOB] })).toBe(true);
    expect(await session.ledgerTotals(JOB)).toMatchObject({
      discovered: ITEMS,
      completed: ITEMS,
      rejected: 0,
      deadLettered: 0,
    });
    expect((await session.depth(job.dlqUrl)).total).toBe(0);
    const effects = await session.effects(JOB, seeded);
    expect([...effects.effectsByOperation.keys()].sort()).toEqual([...seeded.expectedOperations].sort());

    const denials = session.denials(JOB);
    expect(denials).toEqual([
      expect.objectContaining({
        action: REMOVED,
        resource: tableArn(session, TABLE),
        role: job.consumer!.roleArn,
        caller: job.consumer!.name,
      }),
    ]);
    // Every item's result written once: each write is one request AWS would deny.
    const writes = [...effects.effectsByOperation.values()].reduce((a, b) => a + b, 0);
    expect(writes).toBe(ITEMS);
    expect(denials[0].count).toBe(writes);
    const raw = session.stack.denials();
    expect(raw.length).toBeGreaterThan(0);
    expect(raw.every((d) => d.enforced === false)).toBe(true);
    expect(session.stack.iam.enforced).toBe(false);
    expect(session.warnings()).toEqual(
      expect.arrayContaining([expect.stringMatching(/^IAM is not enforced \(--no-iam\)/)]),
    );

    // The report still fails: on AWS the same request would be refused.
    const report = await runReport(session, seeded, true);
    const check = report.checks.find((c) => c.name === 'iam-allowed')!;
    expect(check.ok).toBe(false);
    expect(check.detail).toContain(
      `requests AWS would deny (--no-iam): ${REMOVED} on ${tableArn(session, TABLE)} by ${job.consumer!.roleArn}`,
    );
    expect(report.warnings).toEqual(session.warnings());
  }, 120_000);
});
