// The deployable unit for one environment: the app resources, the runtime's state tables, one PacedJob per configured job.
import { Aws, CfnOutput, CfnRule, Fn, RemovalPolicy, Stack, StackProps, Tags } from 'aws-cdk-lib';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { Construct } from 'constructs';
import { AppResources } from './app-resources';
import type { EnvironmentConfig } from './config/schema';
import { Monitoring } from './monitoring';
import { bucketOutputDescription, bucketOutputName, jobOutputDescription, JobOutputKind, jobOutputName, pascalCase, StackOutput } from './outputs';
import { PacedJob } from './paced-job';
import { assertNoProblems } from './props-error';
import { StateTables } from './state-tables';

/** EventBridge Scheduler's rule for a schedule group's name. */
export const SCHEDULE_GROUP_NAME_PATTERN = /^[0-9a-zA-Z\-_.]{1,64}$/;

/**
 * The environment's schedule group, `paced-jobs-<env>` (e.g. `paced-jobs-prod`): every job's schedule is in it, so the
 * Scheduler alarms (which Scheduler can only scope to a group) watch this environment's schedules and nothing else.
 */
export function scheduleGroupName(environmentName: string): string {
  return `paced-jobs-${environmentName}`;
}

export interface PacedJobsStackProps extends StackProps {
  /** The environment's name (dev, staging, prod), used in tags and descriptions. */
  readonly environmentName: string;
  /** The environment's validated configuration (lib/config/load.ts). */
  readonly config: EnvironmentConfig;
  /** Folder holding the handlers' entry files. @default PacedJob's HANDLERS_DIR */
  readonly handlersDir?: string;
}

export class PacedJobsStack extends Stack {
  public readonly appResources: AppResources;
  public readonly stateTables: StateTables;
  /** One per configured job, by job name. */
  public readonly jobs: Readonly<Record<string, PacedJob>>;
  /** The alarms, their SNS topic and the dashboard. */
  public readonly monitoring: Monitoring;
  /** The environment's schedule group (scheduleGroupName): every job's schedule is in it. */
  public readonly scheduleGroup: scheduler.ScheduleGroup;

  constructor(scope: Construct, id: string, props: PacedJobsStackProps) {
    const { environmentName, config, handlersDir, ...stackProps } = props;
    const groupName = scheduleGroupName(environmentName);
    const problems: string[] = [];
    if (!SCHEDULE_GROUP_NAME_PATTERN.test(groupName)) {
      problems.push(`environmentName "${environmentName}" makes the schedule group name "${groupName}"; Scheduler allows 1-64 characters of 0-9, a-z, A-Z, "-", "_" and "."`);
    }
    assertNoProblems(`PacedJobsStack ${id}`, problems);
    super(scope, id, {
      description: `Paced jobs (${environmentName}): scheduled, rate-limited, idempotent job processing`,
      ...stackProps,
    });
    Tags.of(this).add('project', 'paced-jobs');
    Tags.of(this).add('environment', environmentName);
    // A template synthesized without a pinned account is region-agnostic, and `cdk deploy` puts it in whatever region the
    // deployer's profile names; the data (personal data among it) would then live in a region nobody chose. CloudFormation
    // checks this rule before it creates anything, so a deploy anywhere but the configured region fails at once.
    new CfnRule(this, 'DeployedInConfiguredRegion', {
      assertions: [{
        assert: Fn.conditionEquals(Aws.REGION, config.region),
        assertDescription: `Environment ${environmentName} is configured for region ${config.region} (lib/config/environments.ts); deploy it there`,
      }],
    });

    this.appResources = new AppResources(this, 'AppResources', { config: config.appResources, retainData: config.retainData });
    this.stateTables = new StateTables(this, 'State', { retainData: config.retainData });
    for (const [key, bucket] of Object.entries(this.appResources.buckets)) {
      // A created bucket's name is CloudFormation's: the output is how an operator (or a tool) learns it.
      new CfnOutput(this, bucketOutputName(key), { value: bucket.bucketName, description: bucketOutputDescription(key) });
    }

    // Named, not generated: the runbook and the Scheduler alarms' ScheduleGroup dimension name it. Its removal follows
    // retainData, as the stack's data does.
    this.scheduleGroup = new scheduler.ScheduleGroup(this, 'ScheduleGroup', {
      scheduleGroupName: groupName,
      removalPolicy: config.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });

    const jobs: Record<string, PacedJob> = {};
    for (const [jobName, job] of Object.entries(config.jobs)) {
      const pacedJob = new PacedJob(this, pascalCase(jobName), {
        jobName,
        job,
        appResources: this.appResources,
        stateTables: this.stateTables,
        scheduleGroup: this.scheduleGroup,
        logRetentionDays: config.logRetentionDays,
        retainData: config.retainData,
        handlersDir,
        operatorRoleArns: config.operatorRoles.map((name) => `arn:${Aws.PARTITION}:iam::${Aws.ACCOUNT_ID}:role/${name}`),
      });
      jobs[jobName] = pacedJob;
      const values: Record<JobOutputKind, string> = {
        QueueUrl: pacedJob.queue.queueUrl,
        QueueArn: pacedJob.queue.queueArn,
        DlqUrl: pacedJob.dlq.queueUrl,
        DlqArn: pacedJob.dlq.queueArn,
        ProducerDlqUrl: pacedJob.producerDlq.queueUrl,
        ProducerDlqArn: pacedJob.producerDlq.queueArn,
        ProducerFunctionName: pacedJob.producer.functionName,
        ConsumerFunctionName: pacedJob.consumer.functionName,
        ScheduleName: pacedJob.schedule.scheduleName,
        ScheduleGroupName: this.scheduleGroup.scheduleGroupName,
        EventSourceMappingUuid: pacedJob.eventSource.eventSourceMappingId,
        AdmissionQueueUrl: pacedJob.admissionQueue.queueUrl,
        AdmissionQueueArn: pacedJob.admissionQueue.queueArn,
        AdmissionMappingUuid: pacedJob.admissionEventSource.eventSourceMappingId,
      };
      for (const [kind, value] of Object.entries(values) as [JobOutputKind, string][]) {
        // Created at stack level so the output's logical ID is exactly the documented name.
        new CfnOutput(this, jobOutputName(jobName, kind), { value, description: jobOutputDescription(jobName, kind) });
      }
    }
    this.jobs = jobs;

    this.monitoring = new Monitoring(this, 'Monitoring', {
      environmentName,
      jobs: Object.entries(jobs).map(([jobName, pacedJob]) => ({ jobName, pacedJob, config: config.jobs[jobName] })),
      alarmEmail: config.alarmEmail,
      retainData: config.retainData,
    });
    new CfnOutput(this, StackOutput.AlarmTopicArn, { value: this.monitoring.topic.topicArn });

    new CfnOutput(this, StackOutput.IdempotencyTableName, { value: this.stateTables.idempotencyTable.tableName });
    new CfnOutput(this, StackOutput.LedgerTableName, { value: this.stateTables.ledgerTable.tableName });
    new CfnOutput(this, StackOutput.LimiterTableName, { value: this.stateTables.limiterTable.tableName });
  }
}
