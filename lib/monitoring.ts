// Watching the flow end to end: alarms on every stage (schedule -> producer -> queue -> consumer -> provider), the one
// SNS topic that pages the operator, and the environment's dashboard.
//
// Hand-written with the aws-cloudwatch L2 rather than cdk-monitoring-constructs: every alarm here needs our exact name
// (`<stack>-<job>-<what>`, which the runbook and the topic policy's SourceArn rely on), a runbook description, its own
// treatMissingData and a threshold derived from config (e.g. a fraction of the producer timeout, a custom metric with
// Powertools' exact dimensions). That library composes names from prefixes plus its own suffixes and writes its own
// descriptions, so overriding each of those per alarm would leave little of it in use, while the L2's metric helpers
// (queue.metricApproximateAgeOfOldestMessage, fn.metricErrors, ...) already make each alarm a few lines.
import { ArnFormat, Aws, Duration, RemovalPolicy, Stack, Token } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';
import { METRICS_NAMESPACE } from '../lambda/core/constants';
import { MetricName } from '../lambda/core/metricNames';
import type { JobConfig } from './config/schema';
import { pascalCase } from './outputs';
import { ADMISSION_MAX_RECEIVE_COUNT, ADMISSION_VISIBILITY_MARGIN_SECONDS, type PacedJob } from './paced-job';
import { acknowledge } from './nag';
import { assertNoProblems } from './props-error';

/** CloudWatch's limit on an alarm name. */
export const MAX_ALARM_NAME_LENGTH = 255;
/** CloudWatch's limit on an alarm description; ours stay well within it because they never list the jobs. */
export const MAX_ALARM_DESCRIPTION_LENGTH = 1024;
/**
 * The group EventBridge Scheduler puts a schedule in when none is given. The stack's schedules are in its own group
 * (lib/stack.ts scheduleGroupName); a job handed this one gets alarms that say the group is shared.
 */
export const DEFAULT_SCHEDULE_GROUP = 'default';

/** The per-job alarms, by the `<what>` part of their names. */
export const JobAlarm = {
  /** The work queue's oldest message is older than the job's SLO. */
  OldestMessageAge: 'oldest-message-age',
  /** The work queue's DLQ holds messages. */
  DlqDepth: 'dlq-depth',
  /** The producer DLQ (the schedule's and the producer's asynchronous-invocation DLQ) holds messages. */
  ProducerDlqDepth: 'producer-dlq-depth',
  ConsumerErrors: 'consumer-errors',
  ConsumerThrottles: 'consumer-throttles',
  ProducerErrors: 'producer-errors',
  /** The producer's longest run came close to its timeout. */
  ProducerDuration: 'producer-duration',
  /** The provider answered 429/503 more often than the job's threshold, minute after minute. */
  ProviderThrottled: 'provider-throttled',
  /** Work is waiting and nothing settles: a stuck consumer, not a large planned backlog (which settles as it drains). */
  Stalled: 'stalled',
  /** Discovery found source rows it cannot turn into messages: recorded in the run ledger and skipped, every night until fixed. */
  InvalidSourceRows: 'invalid-source-rows',
  /** The consumer's event source could not invoke it with some messages, or the consumer handed records back. */
  ConsumerFailedInvokes: 'consumer-failed-invokes',
  /** The consumer's event source dropped messages: neither settled nor in the DLQ. */
  ConsumerDroppedEvents: 'consumer-dropped-events',
  /** The producer's admission event source could not invoke it with a step, or the step failed. */
  AdmissionFailedInvokes: 'admission-failed-invokes',
  /** The admission event source dropped a step: that run's admission stopped, and no DLQ holds the step. */
  AdmissionDroppedEvents: 'admission-dropped-events',
  /** A job with keys only: the oldest message of the tenants SQS fair queues do not hold back is older than the SLO. */
  QuietTenantsMessageAge: 'quiet-tenants-message-age',
} as const;
export type JobAlarmKind = keyof typeof JobAlarm;
/** The alarms only a job with keys has (hasKeys): its messages carry one fair-queue tenant (MessageGroupId) per key. */
export type KeyedJobAlarmKind = Extract<JobAlarmKind, 'QuietTenantsMessageAge'>;
const KEYED_JOB_ALARMS: readonly JobAlarmKind[] = ['QuietTenantsMessageAge'] satisfies KeyedJobAlarmKind[];
/** A job's alarms by kind: every kind, and the keyed ones when the job has keys. */
export type JobAlarms = Readonly<
  Record<Exclude<JobAlarmKind, KeyedJobAlarmKind>, cloudwatch.Alarm> &
    Partial<Record<KeyedJobAlarmKind, cloudwatch.Alarm>>
>;

/**
 * Whether a job has keys: a per-key rate limit or per-key concurrency, whose field is then every live message's
 * MessageGroupId (lambda/core/fairness.ts keyField, which lib may not import), so its queue is an SQS fair queue with a
 * tenant per key.
 */
export function hasKeys(config: Pick<JobConfig, 'pacing'>): boolean {
  return config.pacing.perKey !== undefined;
}

/** The alarm kinds a job has. */
export function jobAlarmKinds(config: Pick<JobConfig, 'pacing'>): JobAlarmKind[] {
  const keyed = hasKeys(config);
  return (Object.keys(JobAlarm) as JobAlarmKind[]).filter((kind) => keyed || !KEYED_JOB_ALARMS.includes(kind));
}

/**
 * An event source mapping's own metrics, in AWS/Lambda with the one dimension EventSourceMappingUUID; published only
 * when its MetricsConfig asks for EventCount (lib/paced-job.ts EVENT_SOURCE_METRICS), and only when they happen.
 */
export const EventSourceMetric = {
  Polled: 'PolledEventCount',
  Invoked: 'InvokedEventCount',
  /**
   * Events Lambda tried to invoke the function with and failed (permissions, a deleted function, network), and, with
   * partial batch responses, every event the function listed in batchItemFailures.
   */
  FailedInvoke: 'FailedInvokeEventCount',
  /** Events dropped on expiry or retry exhaustion, excluding those sent to an on-failure destination. */
  Dropped: 'DroppedEventCount',
  /** Events deleted from the queue after processing (SQS). */
  Deleted: 'DeletedEventCount',
} as const;
export type EventSourceMetricName = (typeof EventSourceMetric)[keyof typeof EventSourceMetric];

/** One metric of an event source mapping (EventSourceMetric), per its UUID: the mapping's Ref. */
export function eventSourceMetric(
  source: SqsEventSource,
  metricName: EventSourceMetricName,
  props: cloudwatch.MetricOptions = {},
): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: 'AWS/Lambda',
    metricName,
    dimensionsMap: { EventSourceMappingUUID: source.eventSourceMappingId },
    statistic: cloudwatch.Stats.SUM,
    period: Duration.minutes(5),
    ...props,
  });
}

/**
 * The burn-rate alarms of a job with a completion SLO (the Google SRE workbook's multi-window, multi-burn-rate method,
 * scaled to one night): each pair is a long and a short window of the SLI's error ratio over the error budget
 * (1 - objective), both above the pair's burn rate, joined in a composite alarm that notifies. The fast pair pages:
 * at its rate the night's budget is gone within the first sixth of the window. The slow pair tickets: at its rate the
 * budget is gone by half the window. The windows are fractions of the SLO's own window (a night, not 30 days), the short
 * one a twelfth of the long one (the workbook's ratio), so a burst that has already stopped does not keep paging.
 */
export const BurnPair = {
  fast: {
    what: 'burn-fast',
    burnRate: 6,
    longFraction: 1 / 6,
    minLongMinutes: 5,
    maxLongMinutes: 60,
    severity: 'page',
  },
  slow: {
    what: 'burn-slow',
    burnRate: 2,
    longFraction: 1 / 2,
    minLongMinutes: 15,
    maxLongMinutes: 360,
    severity: 'ticket',
  },
} as const;
export type BurnPairKind = keyof typeof BurnPair;

/** A pair's two windows, in minutes, for an SLO window of `completeWithinMinutes`. */
export function burnWindows(
  kind: BurnPairKind,
  completeWithinMinutes: number,
): { longMinutes: number; shortMinutes: number } {
  const p = BurnPair[kind];
  const longMinutes = Math.min(
    p.maxLongMinutes,
    Math.max(p.minLongMinutes, Math.round(completeWithinMinutes * p.longFraction)),
  );
  return { longMinutes, shortMinutes: Math.max(1, Math.round(longMinutes / 12)) };
}

/** The alarms per schedule group: Scheduler publishes its metrics per group, never per schedule. */
export const SchedulerAlarm = {
  TargetErrors: 'target-errors',
  /** Invocations dropped after the retry policy, or that could not even reach the schedule's DLQ: lost runs. */
  FailedInvocations: 'failed-invocations',
} as const;
export type SchedulerAlarmKind = keyof typeof SchedulerAlarm;

/**
 * 1 for a minute in which work waits in the job's queue (visible or delayed) and nothing settled, else 0. Settled is
 * every outcome the consumer meters (Applied, AlreadyDone, DeadLettered, Rejected): each is written only when it
 * happens, so a missing datapoint is 0.
 */
export function stalledMetric(jobName: string, pacedJob: Pick<PacedJob, 'queue'>): cloudwatch.MathExpression {
  const minute = { period: Duration.minutes(1) };
  return new cloudwatch.MathExpression({
    label: 'Waiting work, nothing settled',
    expression:
      'IF((FILL(visible, 0) + FILL(delayed, 0)) > 0 AND (FILL(applied, 0) + FILL(done, 0) + FILL(dead, 0) + FILL(rejected, 0)) == 0, 1, 0)',
    usingMetrics: {
      visible: pacedJob.queue.metricApproximateNumberOfMessagesVisible({
        statistic: cloudwatch.Stats.MAXIMUM,
        ...minute,
      }),
      delayed: pacedJob.queue.metric('ApproximateNumberOfMessagesDelayed', {
        statistic: cloudwatch.Stats.MAXIMUM,
        ...minute,
      }),
      applied: jobMetric(jobName, MetricName.Applied, minute),
      done: jobMetric(jobName, MetricName.AlreadyDone, minute),
      dead: jobMetric(jobName, MetricName.DeadLettered, minute),
      rejected: jobMetric(jobName, MetricName.Rejected, minute),
    },
    period: Duration.minutes(1),
  });
}

/** Share of an event source's polled events that failed to invoke (or were handed back) before the alarm counts a period. */
export const FAILED_INVOKE_SHARE = 0.5;
/** Consecutive 5-minute periods that share must last: a night's ordinary retries come and go, a broken invoke does not. */
export const FAILED_INVOKE_PERIODS = 3;

/**
 * The share of a mapping's polled events that failed to invoke. FailedInvokeEventCount alone would page on every record
 * a consumer hands back for an ordinary retry (partial batch responses count there too); a mapping that cannot invoke
 * its function at all (permissions, a deleted function, KMS) fails every event it polls, so the share tells them apart.
 */
export function failedInvokeShareMetric(source: SqsEventSource): cloudwatch.MathExpression {
  const five = { period: Duration.minutes(5) };
  return new cloudwatch.MathExpression({
    label: 'Share of polled events that failed to invoke',
    expression: 'IF(FILL(polled, 0) > 0, FILL(failed, 0) / polled, 0)',
    usingMetrics: {
      polled: eventSourceMetric(source, EventSourceMetric.Polled, five),
      failed: eventSourceMetric(source, EventSourceMetric.FailedInvoke, five),
    },
    period: Duration.minutes(5),
  });
}

/**
 * The age of the oldest message in the job queue's quiet groups (SQS fair queues: every tenant not detected as noisy),
 * AWS/SQS per QueueName like the queue's other metrics.
 */
export function quietTenantsAgeMetric(
  pacedJob: Pick<PacedJob, 'queue'>,
  props: cloudwatch.MetricOptions = {},
): cloudwatch.Metric {
  return pacedJob.queue.metric('ApproximateAgeOfOldestMessageInQuietGroups', props);
}

/** `<stack>-<subject>-<what>`, e.g. `PacedJobs-prod-payment-reconciliation-dlq-depth`. */
export function alarmName(stackName: string, subject: string, what: string): string {
  return `${stackName}-${subject}-${what}`;
}

/** The subject of a schedule group's alarms, e.g. `schedule-group-paced-jobs-prod`. */
export function scheduleGroupSubject(groupName: string): string {
  return `schedule-group-${groupName}`;
}

/**
 * One of the job's custom metrics exactly as Powertools Metrics writes it: namespace PacedJobs and the one dimension set
 * Powertools emits, its `service` default dimension (POWERTOOLS_SERVICE_NAME, which PacedJob sets to the job name)
 * together with the `job` default dimension bindJob adds. CloudWatch matches a metric on all its dimensions, so both.
 */
export function jobMetric(
  jobName: string,
  metricName: MetricName,
  props: cloudwatch.MetricOptions = {},
): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: METRICS_NAMESPACE,
    metricName,
    dimensionsMap: { service: jobName, job: jobName },
    statistic: cloudwatch.Stats.SUM,
    period: Duration.minutes(5),
    ...props,
  });
}

export interface MonitoredJob {
  /** The job's kebab-case name, as in config. */
  readonly jobName: string;
  readonly pacedJob: PacedJob;
  /** The job's validated configuration: thresholds come from `alarms`, `oldestMessageAgeSloSeconds` and the timeouts. */
  readonly config: Omit<JobConfig, 'uses'>;
}

export interface MonitoringProps {
  /** The environment's name, used in the topic's display name. */
  readonly environmentName: string;
  /**
   * The operator CLI as the on-call engineer runs it where the app lives (`npx paced-jobs ops`), written before the
   * command in each description's runbook lines; the stack is named by `--stack`.
   */
  readonly operatorCommand: string;
  readonly jobs: readonly MonitoredJob[];
  /** Subscribed to the alarm topic when given. */
  readonly alarmEmail?: string;
  /** Keep the topic's KMS key when the stack is deleted (messages already sent stay readable). */
  readonly retainData: boolean;
}

const GREATER = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD;
const NOT_BREACHING = cloudwatch.TreatMissingData.NOT_BREACHING;
/** How every alarm description ends (test/lib/monitoring.test.ts holds them to it). */
const RUNBOOK = 'See the runbook, docs/operating.md, "Reading an alarm".';

/** The producer-duration alarm's threshold: the configured fraction of the producer's timeout. */
function producerDurationThresholdMs(config: MonitoredJob['config']): number {
  return Math.round(config.producerTimeoutSeconds * 1000 * config.alarms.producerDurationFraction);
}

interface AlarmSpec {
  readonly what: string;
  readonly description: string;
  readonly metric: cloudwatch.IMetric;
  readonly threshold: number;
  /** @default 1 */
  readonly evaluationPeriods?: number;
  readonly treatMissingData: cloudwatch.TreatMissingData;
}

/** A schedule group's AWS/Scheduler metric, summed over five minutes (Scheduler reports per group only). */
function schedulerMetric(group: string, metricName: string, label?: string): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: 'AWS/Scheduler',
    metricName,
    dimensionsMap: { ScheduleGroup: group },
    statistic: cloudwatch.Stats.SUM,
    period: Duration.minutes(5),
    label,
  });
}

/** What the descriptions add for the default group, which other applications' schedules may share. */
function sharedGroupNote(group: string): string {
  // Scheduler reports per group only; the default group is shared with every other schedule in the account and region.
  return group === DEFAULT_SCHEDULE_GROUP ? ' The default group may also hold schedules of other applications.' : '';
}

/** A schedule group's alarms: producers Scheduler could not invoke, and scheduled runs lost for good. */
function schedulerAlarmSpecs(
  group: string,
  shared: string,
  ops: string,
  stackName: string,
): Record<SchedulerAlarmKind, AlarmSpec> {
  return {
    TargetErrors: {
      what: SchedulerAlarm.TargetErrors,
      description:
        `Schedule group "${group}": EventBridge Scheduler could not invoke one of this stack's producers (throttled, permissions, ` +
        `or the function is missing); it retries, then sends the run to that job's producer DLQ.${shared} First run ` +
        `\`${ops} status --stack ${stackName}\` and check each job's producer-dlq-depth alarm. ${RUNBOOK}`,
      // No label: a labelled metric would synthesize as a one-entry metric query instead of a plain metric alarm.
      metric: schedulerMetric(group, 'TargetErrorCount'),
      threshold: 0,
      // Scheduler sends these counts only when something happens.
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    },
    FailedInvocations: {
      what: SchedulerAlarm.FailedInvocations,
      description:
        `Schedule group "${group}": scheduled producer runs were dropped after every retry, or could not be written to ` +
        `the producer DLQ, so they are lost and no DLQ holds them.${shared} Find the missed business dates with ` +
        `\`${ops} status --stack ${stackName}\` and run \`${ops} catch-up --stack ${stackName} --job <job> --from <date> --to <date>\`. ${RUNBOOK}`,
      metric: new cloudwatch.MathExpression({
        expression: 'FILL(dropped, 0) + FILL(undeliverable, 0)',
        usingMetrics: {
          dropped: schedulerMetric(group, 'InvocationDroppedCount', 'Dropped'),
          undeliverable: schedulerMetric(
            group,
            'InvocationsFailedToBeSentToDeadLetterCount',
            'Failed to reach the DLQ',
          ),
        },
        label: 'Lost scheduled runs',
        period: Duration.minutes(5),
      }),
      threshold: 0,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    },
  };
}

/** Some of a job's alarms, by kind: one family of them (monitorJob joins the families). */
type AlarmSpecs<K extends JobAlarmKind> = Record<K, AlarmSpec>;
type EventSourceAlarmKind =
  | 'ConsumerFailedInvokes'
  | 'ConsumerDroppedEvents'
  | 'AdmissionFailedInvokes'
  | 'AdmissionDroppedEvents';
/** Every alarm of a job: all kinds, and the keyed ones when the job has keys. */
type JobAlarmSpecs = AlarmSpecs<Exclude<JobAlarmKind, KeyedJobAlarmKind>> & Partial<AlarmSpecs<KeyedJobAlarmKind>>;

/** Every problem with the props, before anything is built: names that are tokens, no job, bad alarm names. */
function monitoringProblems(stackName: string, jobs: readonly MonitoredJob[], groups: readonly string[]): string[] {
  const problems: string[] = [];
  if (Token.isUnresolved(stackName)) problems.push('the stack name must be a literal: it starts every alarm name');
  for (const j of jobs) {
    if (Token.isUnresolved(scheduleGroupOf(j.pacedJob))) {
      problems.push(
        `${j.jobName}: its schedule group's name must be a literal: it is in the Scheduler alarms' names and their ` +
          'ScheduleGroup dimension',
      );
    }
  }
  if (jobs.length === 0) problems.push('jobs: at least one job is required');
  const names = [
    ...jobs.flatMap((j) => jobAlarmKinds(j.config).map((kind) => alarmName(stackName, j.jobName, JobAlarm[kind]))),
    ...groups.flatMap((g) =>
      Object.values(SchedulerAlarm).map((what) => alarmName(stackName, scheduleGroupSubject(g), what)),
    ),
  ];
  const seen = new Set<string>();
  for (const name of names) {
    if (seen.has(name)) {
      problems.push(
        `alarm name "${name}" is used twice (a job name repeats, or clashes with a schedule group's alarms)`,
      );
    }
    seen.add(name);
    if (name.length > MAX_ALARM_NAME_LENGTH) {
      problems.push(
        `alarm name "${name}" is ${name.length} characters; CloudWatch allows at most ${MAX_ALARM_NAME_LENGTH}`,
      );
    }
  }
  return problems;
}

export class Monitoring extends Construct {
  /** Takes every alarm's ALARM and OK actions; subscribe pagers and chat here. */
  public readonly topic: sns.Topic;
  /** The topic's customer-managed key (CloudWatch cannot publish to a topic encrypted with the AWS-managed SNS key). */
  public readonly topicKey: kms.Key;
  public readonly dashboard: cloudwatch.Dashboard;
  /** Per job name, its alarms by kind. */
  public readonly jobAlarms: Readonly<Record<string, JobAlarms>>;
  /** Per job name with an SLO, its two burn-rate composite alarms (each over a long and a short window alarm). */
  public readonly burnAlarms: Readonly<Record<string, Readonly<Record<BurnPairKind, cloudwatch.CompositeAlarm>>>>;
  /** Per schedule group name, its alarms by kind. */
  public readonly schedulerAlarms: Readonly<Record<string, Readonly<Record<SchedulerAlarmKind, cloudwatch.Alarm>>>>;

  private readonly stackName: string;
  /** The operator CLI, as the runbook lines of the descriptions run it (MonitoringProps.operatorCommand). */
  private readonly ops: string;
  private readonly action: SnsAction;

  constructor(scope: Construct, id: string, props: MonitoringProps) {
    const stackName = Stack.of(scope).stackName;
    const groups = [...new Set(props.jobs.map((j) => scheduleGroupOf(j.pacedJob)))];
    const problems = monitoringProblems(stackName, props.jobs, groups);
    assertNoProblems(`Monitoring ${scope.node.path}/${id}`, problems);
    super(scope, id);
    this.stackName = stackName;
    this.ops = props.operatorCommand;

    this.topicKey = this.createTopicKey(props.retainData);
    this.topic = this.createAlarmTopic(props.environmentName);
    if (props.alarmEmail !== undefined) this.subscribeEmail(props.alarmEmail, props.retainData);
    this.action = new SnsAction(this.topic);

    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: stackName,
      defaultInterval: Duration.days(1),
    });

    const jobAlarms: Record<string, JobAlarms> = {};
    const burnAlarms: Record<string, Record<BurnPairKind, cloudwatch.CompositeAlarm>> = {};
    for (const job of props.jobs) {
      jobAlarms[job.jobName] = this.monitorJob(job);
      if (job.config.slo) burnAlarms[job.jobName] = this.burnRateAlarms(job, job.config.slo);
    }
    this.jobAlarms = jobAlarms;
    this.burnAlarms = burnAlarms;

    const schedulerAlarms: Record<string, Record<SchedulerAlarmKind, cloudwatch.Alarm>> = {};
    for (const group of groups) {
      const jobNames = props.jobs.filter((j) => scheduleGroupOf(j.pacedJob) === group).map((j) => j.jobName);
      schedulerAlarms[group] = this.monitorScheduleGroup(group, jobNames);
    }
    this.schedulerAlarms = schedulerAlarms;
  }

  private createTopicKey(retainData: boolean): kms.Key {
    return new kms.Key(this, 'AlarmTopicKey', {
      description: `Encrypts the ${this.stackName} alarm topic`,
      enableKeyRotation: true,
      removalPolicy: retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
  }

  /** The one topic every alarm notifies, encrypted with topicKey, which only this stack's alarms may publish to. */
  private createAlarmTopic(environmentName: string): sns.Topic {
    const topic = new sns.Topic(this, 'AlarmTopic', {
      displayName: `Paced jobs ${environmentName} alarms`,
      masterKey: this.topicKey,
      enforceSSL: true,
    });
    // The topic policy replaces SNS's default one, so CloudWatch must be allowed to publish, and only for this stack's
    // alarms (every alarm name starts with the stack name).
    const cloudwatchPrincipal = new iam.ServicePrincipal('cloudwatch.amazonaws.com');
    topic.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'AllowThisStacksAlarmsToPublish',
        principals: [cloudwatchPrincipal],
        actions: ['sns:Publish'],
        resources: [topic.topicArn],
        conditions: {
          StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID },
          ArnLike: {
            'aws:SourceArn': Stack.of(this).formatArn({
              service: 'cloudwatch',
              resource: 'alarm',
              resourceName: `${this.stackName}-*`,
              arnFormat: ArnFormat.COLON_RESOURCE_NAME,
            }),
          },
        },
      }),
    );
    // SNS encrypts with the publisher's access to the key; the key policy is the only place CloudWatch can get it.
    this.topicKey.grant(cloudwatchPrincipal, 'kms:Decrypt', 'kms:GenerateDataKey*');
    return topic;
  }

  private subscribeEmail(email: string, retainData: boolean): void {
    // An alarm SNS could not deliver (the address bounces, the endpoint is gone) is kept for 14 days, not dropped.
    // SQS-managed encryption: SNS can write to it without a key policy of its own.
    const undelivered = new sqs.Queue(this, 'UndeliveredAlarms', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      removalPolicy: retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
    const why =
      'the undelivered alarms queue is itself the dead-letter queue of the alarm subscription: ' +
      'nothing consumes it to fail';
    acknowledge(undelivered, 'AwsSolutions-SQS3', why);
    acknowledge(undelivered, 'Serverless-SQSRedrivePolicy', why);
    this.topic.addSubscription(new EmailSubscription(email, { deadLetterQueue: undelivered }));
  }

  private alarm(scope: Construct, subject: string, spec: AlarmSpec): cloudwatch.Alarm {
    const alarm = new cloudwatch.Alarm(scope, pascalCase(spec.what), {
      alarmName: alarmName(this.stackName, subject, spec.what),
      alarmDescription: spec.description,
      metric: spec.metric,
      threshold: spec.threshold,
      comparisonOperator: GREATER,
      evaluationPeriods: spec.evaluationPeriods ?? 1,
      datapointsToAlarm: spec.evaluationPeriods ?? 1,
      treatMissingData: spec.treatMissingData,
    });
    alarm.addAlarmAction(this.action);
    // Recovery is news at 02:00 too: it tells the operator a retry or redrive worked.
    alarm.addOkAction(this.action);
    return alarm;
  }

  private monitorJob(job: MonitoredJob): JobAlarms {
    const scope = new Construct(this, pascalCase(job.jobName));
    const specs: JobAlarmSpecs = {
      ...this.queueAlarmSpecs(job),
      ...this.functionAlarmSpecs(job),
      ...this.jobMetricAlarmSpecs(job),
      ...this.eventSourceAlarmSpecs(job),
      ...(hasKeys(job.config) ? this.keyedJobAlarmSpecs(job) : {}),
    };
    const alarms = Object.fromEntries(
      Object.entries(specs).map(([kind, spec]) => [kind, this.alarm(scope, job.jobName, spec)]),
    ) as JobAlarms;
    this.addJobRows(job, alarms);
    return alarms;
  }

  /** The first step of every job alarm's runbook. */
  private statusCommand(jobName: string): string {
    return `${this.ops} status --stack ${this.stackName} --job ${jobName}`;
  }

  /** The queues: work late, or parked in a DLQ. */
  private queueAlarmSpecs(job: MonitoredJob): AlarmSpecs<'OldestMessageAge' | 'DlqDepth' | 'ProducerDlqDepth'> {
    const { jobName, pacedJob, config } = job;
    const five = Duration.minutes(5);
    const status = this.statusCommand(jobName);
    // The one age threshold: the whole queue's oldest message and, for a job with keys, its quiet tenants' oldest.
    const ageSloSeconds = config.oldestMessageAgeSloSeconds;
    return {
      OldestMessageAge: {
        what: JobAlarm.OldestMessageAge,
        description:
          `${jobName}: the oldest message in the work queue is older than the ${ageSloSeconds}s SLO, so work is late. ` +
          `Likely the consumer is paused, failing or throttled by the provider. First run \`${status}\` (depth, in flight, DLQ), ` +
          `then check the consumer-errors and provider-throttled alarms. Never purge the queue. ${RUNBOOK}`,
        metric: pacedJob.queue.metricApproximateAgeOfOldestMessage({
          statistic: cloudwatch.Stats.MAXIMUM,
          period: five,
        }),
        threshold: ageSloSeconds,
        // SQS stops sending queue metrics only for an inactive queue: empty and untouched for hours. Nothing is late then.
        treatMissingData: NOT_BREACHING,
      },
      DlqDepth: {
        what: JobAlarm.DlqDepth,
        description:
          `${jobName}: operations failed every attempt (or were rejected as bad) and wait in the job DLQ; they were not applied. ` +
          `First run \`${this.ops} dlq peek --stack ${this.stackName} --job ${jobName}\` to see why (viewing counts as a receive), fix the cause, ` +
          `then \`${this.ops} redrive --stack ${this.stackName} --job ${jobName}\`: idempotency makes already applied operations no-ops. ${RUNBOOK}`,
        metric: pacedJob.dlq.metricApproximateNumberOfMessagesVisible({
          statistic: cloudwatch.Stats.MAXIMUM,
          period: Duration.minutes(1),
        }),
        threshold: 0,
        // A queue holding messages stays active and keeps reporting, so missing data means an empty, idle DLQ.
        treatMissingData: NOT_BREACHING,
      },
      ProducerDlqDepth: {
        what: JobAlarm.ProducerDlqDepth,
        description:
          `${jobName}: a scheduled run or an admission step failed every retry and sits in the producer DLQ, so that ` +
          `business date's admission has stopped (the rest waits in the application's tables, nothing is lost). First run ` +
          `\`${status}\`: a batch shown as "admission stalled" continues with ` +
          `\`${this.ops} continue --stack ${this.stackName} --job ${jobName} --batch <batchId>\` once the producer's logs show the cause is fixed; ` +
          `a date never started needs \`${this.ops} catch-up --stack ${this.stackName} --job ${jobName} --from <date> --to <date>\`. ${RUNBOOK}`,
        metric: pacedJob.producerDlq.metricApproximateNumberOfMessagesVisible({
          statistic: cloudwatch.Stats.MAXIMUM,
          period: Duration.minutes(1),
        }),
        threshold: 0,
        treatMissingData: NOT_BREACHING,
      },
    };
  }

  /** The two functions, from Lambda's own metrics: failed invocations, throttles, a producer run near its timeout. */
  private functionAlarmSpecs(
    job: MonitoredJob,
  ): AlarmSpecs<'ConsumerErrors' | 'ConsumerThrottles' | 'ProducerErrors' | 'ProducerDuration'> {
    const { jobName, pacedJob, config } = job;
    const five = Duration.minutes(5);
    const status = this.statusCommand(jobName);
    return {
      ConsumerErrors: {
        what: JobAlarm.ConsumerErrors,
        description:
          `${jobName}: the consumer function failed whole invocations (a crash or timeout, not a per-record failure), so each ` +
          `message of those batches will be retried and may reach the DLQ. First read the consumer's logs for the error, then ` +
          `run \`${status}\`. If it persists, \`${this.ops} pause --stack ${this.stackName} --job ${jobName}\` keeps messages queued. ${RUNBOOK}`,
        metric: pacedJob.consumer.metricErrors({ statistic: cloudwatch.Stats.SUM, period: five }),
        threshold: 0,
        // No invocations, no errors: Lambda sends no datapoint for an idle function.
        treatMissingData: NOT_BREACHING,
      },
      ConsumerThrottles: {
        what: JobAlarm.ConsumerThrottles,
        description:
          `${jobName}: Lambda throttled the consumer although its event source never asks for more than the reserved concurrency ` +
          `(${config.pacing.concurrency}); the reservation was likely changed outside the stack. Throttled batches return to the queue and ` +
          `spend receive counts. First compare the function's reserved concurrency with config, then run \`${status}\`. ${RUNBOOK}`,
        metric: pacedJob.consumer.metricThrottles({ statistic: cloudwatch.Stats.SUM, period: five }),
        threshold: 0,
        treatMissingData: NOT_BREACHING,
      },
      ProducerErrors: {
        what: JobAlarm.ProducerErrors,
        description:
          `${jobName}: a producer invocation failed; Lambda retries it and then sends it to the producer DLQ, so discovery for ` +
          `that run may be incomplete. First read the producer's logs, then run \`${status}\` and check the producer-dlq-depth alarm. ${RUNBOOK}`,
        metric: pacedJob.producer.metricErrors({ statistic: cloudwatch.Stats.SUM, period: five }),
        threshold: 0,
        treatMissingData: NOT_BREACHING,
      },
      ProducerDuration: {
        what: JobAlarm.ProducerDuration,
        description:
          `${jobName}: a producer run took over ${Math.round(config.alarms.producerDurationFraction * 100)}% of its ` +
          `${config.producerTimeoutSeconds}s timeout; the next one may time out mid-page. Not urgent at night: first run \`${status}\` ` +
          `and check the run completed, then lower pageSize or raise producerTimeoutSeconds in config. ${RUNBOOK}`,
        metric: pacedJob.producer.metricDuration({ statistic: cloudwatch.Stats.MAXIMUM, period: five }),
        threshold: producerDurationThresholdMs(config),
        treatMissingData: NOT_BREACHING,
      },
    };
  }

  /** The job's custom metrics, as the handlers write them: provider throttling, a stuck consumer, bad source rows. */
  private jobMetricAlarmSpecs(job: MonitoredJob): AlarmSpecs<'ProviderThrottled' | 'Stalled' | 'InvalidSourceRows'> {
    const { jobName, pacedJob, config } = job;
    const five = Duration.minutes(5);
    const status = this.statusCommand(jobName);
    return {
      ProviderThrottled: {
        what: JobAlarm.ProviderThrottled,
        description:
          `${jobName}: the provider answered 429/503 more than ${config.alarms.throttledPerMinute} times a minute for ` +
          `${config.alarms.throttledMinutes} minutes. Operations are deferred, not lost, but the backlog grows. First run \`${status}\`; ` +
          `if the provider's quota dropped, lower pacing.starts or headroom in config, or pause the job until it recovers. ${RUNBOOK}`,
        metric: jobMetric(jobName, MetricName.Throttled, { period: Duration.minutes(1) }),
        threshold: config.alarms.throttledPerMinute,
        evaluationPeriods: config.alarms.throttledMinutes,
        // The consumer writes Throttled only when a 429/503 happens; a minute without one is a good minute.
        treatMissingData: NOT_BREACHING,
      },
      Stalled: {
        what: JobAlarm.Stalled,
        description:
          `${jobName}: work has waited in the queue for ${config.alarms.stalledMinutes} minutes and nothing settled (applied, ` +
          `already done, dead-lettered or rejected), so the consumer is stuck: paused, failing every batch, or its event source is off. ` +
          `A large backlog that drains does not fire this. First run \`${status}\` (in flight, DLQ, and whether the job is paused), ` +
          `then read the consumer's logs. ${RUNBOOK}`,
        metric: stalledMetric(jobName, pacedJob),
        threshold: 0,
        evaluationPeriods: config.alarms.stalledMinutes,
        // The expression is 0 when the queue reports nothing (an idle, empty queue): nothing waits, nothing is stalled.
        treatMissingData: NOT_BREACHING,
      },
      InvalidSourceRows: {
        what: JobAlarm.InvalidSourceRows,
        description:
          `${jobName}: discovery found source rows it cannot turn into valid messages (an ID an operation ID cannot hold, a field ` +
          `the job's resource schema refuses). They were recorded in the run ledger and skipped; the rest of the run went on. ` +
          `They are skipped every night until fixed. First run \`${this.ops} audit --stack ${this.stackName} --job ${jobName} --date <business date>\` ` +
          `to list each with its key and reasons, then fix the rows at the source. ${RUNBOOK}`,
        metric: jobMetric(jobName, MetricName.DiscoveryRowsRejected, { period: five }),
        threshold: 0,
        // The producer writes the metric only when a page holds such rows.
        treatMissingData: NOT_BREACHING,
      },
    };
  }

  /** The two event sources (consumer and admission): events that failed to invoke their function, or were dropped. */
  private eventSourceAlarmSpecs(job: MonitoredJob): AlarmSpecs<EventSourceAlarmKind> {
    const { jobName, pacedJob, config } = job;
    const five = Duration.minutes(5);
    const status = this.statusCommand(jobName);
    const mapping =
      "`aws lambda get-event-source-mapping --uuid <the alarm's EventSourceMappingUUID>` " +
      '(its state and last processing result)';
    const sqsDropsNone =
      "An SQS event source is not expected to drop any (the queue's redrive policy retires failed messages, not the " +
      'mapping), so first check the mapping with';
    return {
      ConsumerFailedInvokes: {
        what: JobAlarm.ConsumerFailedInvokes,
        description:
          `${jobName}: for ${FAILED_INVOKE_PERIODS * 5} minutes more than ${FAILED_INVOKE_SHARE * 100}% of the messages the consumer's ` +
          `event source polled failed to invoke the consumer (FailedInvokeEventCount, which also counts records the consumer ` +
          `handed back for a retry). First read the consumer's logs at that time: lines ` +
          `ending "will retry" are records SQS redelivers (watch the dlq-depth alarm); no such lines means Lambda could not ` +
          `invoke the consumer at all (its permissions, a deleted function, a KMS or network error) and the messages wait out ` +
          `their visibility timeout: run ${mapping}, then \`${status}\`. ${RUNBOOK}`,
        metric: failedInvokeShareMetric(pacedJob.eventSource),
        threshold: FAILED_INVOKE_SHARE,
        evaluationPeriods: FAILED_INVOKE_PERIODS,
        // No datapoint: the mapping invoked nothing in the period, so nothing failed.
        treatMissingData: NOT_BREACHING,
      },
      ConsumerDroppedEvents: {
        what: JobAlarm.ConsumerDroppedEvents,
        description:
          `${jobName}: Lambda dropped messages of the consumer's event source (DroppedEventCount): the consumer did not settle ` +
          `them and they are not in the job DLQ, so those operations may never run. ${sqsDropsNone} ${mapping}. Then find ` +
          `them with \`${this.ops} audit --stack ${this.stackName} --job ${jobName} --date <business date>\` for each date in progress, ` +
          `and run \`${this.ops} catch-up --stack ${this.stackName} --job ${jobName} --from <date> --to <date>\` (idempotency skips what is done). ${RUNBOOK}`,
        metric: eventSourceMetric(pacedJob.eventSource, EventSourceMetric.Dropped, { period: five }),
        threshold: 0,
        treatMissingData: NOT_BREACHING,
      },
      AdmissionFailedInvokes: {
        what: JobAlarm.AdmissionFailedInvokes,
        description:
          `${jobName}: the admission event source failed to invoke the producer with an admission step, or the producer failed ` +
          `the step (FailedInvokeEventCount counts both). That run's admission waits out the step's visibility timeout ` +
          `(${config.producerTimeoutSeconds + ADMISSION_VISIBILITY_MARGIN_SECONDS}s) and is retried, and after ${ADMISSION_MAX_RECEIVE_COUNT} ` +
          `receives the step goes to the producer DLQ. First read the producer's logs for "admission step failed"; no such line ` +
          `means Lambda could not invoke the producer: run ${mapping}. Then run \`${status}\`. ${RUNBOOK}`,
        metric: eventSourceMetric(pacedJob.admissionEventSource, EventSourceMetric.FailedInvoke, { period: five }),
        threshold: 0,
        treatMissingData: NOT_BREACHING,
      },
      AdmissionDroppedEvents: {
        what: JobAlarm.AdmissionDroppedEvents,
        description:
          `${jobName}: Lambda dropped admission steps of the producer's event source (DroppedEventCount): a step neither ran nor ` +
          `reached the producer DLQ, so that run's admission has stopped and no DLQ message shows it. ${sqsDropsNone} ${mapping}. ` +
          `Then run \`${status}\`: a batch shown as "admission stalled" continues with ` +
          `\`${this.ops} continue --stack ${this.stackName} --job ${jobName} --batch <batchId>\`. ${RUNBOOK}`,
        metric: eventSourceMetric(pacedJob.admissionEventSource, EventSourceMetric.Dropped, { period: five }),
        threshold: 0,
        treatMissingData: NOT_BREACHING,
      },
    };
  }

  /** A job with keys: its quiet tenants' work is late, the whole job's and not one noisy key's. */
  private keyedJobAlarmSpecs(job: MonitoredJob): AlarmSpecs<KeyedJobAlarmKind> {
    const { jobName, pacedJob, config } = job;
    // The same threshold as oldest-message-age: the whole queue's oldest message and its quiet tenants' oldest.
    const ageSloSeconds = config.oldestMessageAgeSloSeconds;
    const status = this.statusCommand(jobName);
    return {
      QuietTenantsMessageAge: {
        what: JobAlarm.QuietTenantsMessageAge,
        description:
          `${jobName}: the oldest message of the quiet tenants (the keys SQS fair queues do not hold back as noisy) ` +
          `is older than the ${ageSloSeconds}s SLO, so the whole job is late, not one noisy key (a noisy key alone ` +
          'fires oldest-message-age only). Likely the consumer is paused, failing or throttled by the provider. ' +
          `First run \`${status}\`, then check the consumer-errors, consumer-failed-invokes and provider-throttled ` +
          `alarms. Never purge the queue. ${RUNBOOK}`,
        metric: quietTenantsAgeMetric(pacedJob, { statistic: cloudwatch.Stats.MAXIMUM, period: Duration.minutes(5) }),
        threshold: ageSloSeconds,
        // SQS sends fair-queue metrics only while the queue holds grouped messages: none waiting is none late.
        treatMissingData: NOT_BREACHING,
      },
    };
  }

  private burnRateAlarms(
    job: MonitoredJob,
    slo: { objective: number; completeWithinMinutes: number },
  ): Record<BurnPairKind, cloudwatch.CompositeAlarm> {
    const { jobName } = job;
    const scope = new Construct(this, `${pascalCase(jobName)}Burn`);
    const budget = Math.round((1 - slo.objective) * 1e6) / 1e6;
    const status = this.statusCommand(jobName);
    const windowAlarm = (kind: BurnPairKind, which: 'long' | 'short', minutes: number) => {
      const period = Duration.minutes(minutes);
      const m = (name: MetricName) => jobMetric(jobName, name, { period });
      const what = `${BurnPair[kind].what}-${which}`;
      return new cloudwatch.Alarm(scope, pascalCase(what), {
        alarmName: alarmName(this.stackName, jobName, what),
        alarmDescription:
          `${jobName}: the SLO's error budget burns faster than ${BurnPair[kind].burnRate}x over the last ${minutes} min (one window of the ` +
          `${BurnPair[kind].what} pair; its composite alarm notifies). First run \`${status}\`. ${RUNBOOK}`,
        metric: new cloudwatch.MathExpression({
          label: `Burn rate over ${minutes} min`,
          // Late and failed operations over all settled ones, over the budget; 0 while nothing settled.
          expression: `IF(FILL(met, 0) + FILL(missed, 0) + FILL(failed, 0) > 0, (FILL(missed, 0) + FILL(failed, 0)) / (FILL(met, 0) + FILL(missed, 0) + FILL(failed, 0)), 0) / ${budget}`,
          usingMetrics: { met: m(MetricName.SloMet), missed: m(MetricName.SloMissed), failed: m(MetricName.SloFailed) },
          period,
        }),
        threshold: BurnPair[kind].burnRate,
        comparisonOperator: GREATER,
        evaluationPeriods: 1,
        datapointsToAlarm: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    };
    const pair = (kind: BurnPairKind): cloudwatch.CompositeAlarm => {
      const { longMinutes, shortMinutes } = burnWindows(kind, slo.completeWithinMinutes);
      const long = windowAlarm(kind, 'long', longMinutes);
      const short = windowAlarm(kind, 'short', shortMinutes);
      const p = BurnPair[kind];
      const composite = new cloudwatch.CompositeAlarm(scope, pascalCase(p.what), {
        compositeAlarmName: alarmName(this.stackName, jobName, p.what),
        alarmDescription:
          `${jobName} (${p.severity}): operations complete late or fail for good at over ${p.burnRate}x the rate the SLO allows ` +
          `(${slo.objective * 100}% within ${slo.completeWithinMinutes} min), in both the last ${longMinutes} and ${shortMinutes} min; at this ` +
          `rate tonight's error budget is gone ${kind === 'fast' ? 'within the first sixth of the window' : 'by half the window'}. ` +
          `First run \`${status}\` (its forecast says whether the batch still makes the SLO), then the consumer-errors, ` +
          `provider-throttled and dlq-depth alarms. ${RUNBOOK}`,
        alarmRule: cloudwatch.AlarmRule.allOf(
          cloudwatch.AlarmRule.fromAlarm(long, cloudwatch.AlarmState.ALARM),
          cloudwatch.AlarmRule.fromAlarm(short, cloudwatch.AlarmState.ALARM),
        ),
      });
      composite.addAlarmAction(this.action);
      composite.addOkAction(this.action);
      return composite;
    };
    return { fast: pair('fast'), slow: pair('slow') };
  }

  private monitorScheduleGroup(group: string, jobNames: string[]): Record<SchedulerAlarmKind, cloudwatch.Alarm> {
    const scope = new Construct(this, `ScheduleGroup${pascalCase(group)}`);
    const subject = scheduleGroupSubject(group);
    const shared = sharedGroupNote(group);
    const specs = schedulerAlarmSpecs(group, shared, this.ops, this.stackName);
    const alarms = Object.fromEntries(
      Object.entries(specs).map(([kind, spec]) => [kind, this.alarm(scope, subject, spec)]),
    ) as Record<SchedulerAlarmKind, cloudwatch.Alarm>;
    this.addScheduleGroupRows(group, jobNames, shared, alarms);
    return alarms;
  }

  /** The schedule group's rows of the dashboard: its heading, its invocations, its alarms. */
  private addScheduleGroupRows(
    group: string,
    jobNames: string[],
    shared: string,
    alarms: Record<SchedulerAlarmKind, cloudwatch.Alarm>,
  ): void {
    const jobs = jobNames.join(', ');
    this.dashboard.addWidgets(
      new cloudwatch.TextWidget({
        markdown: `## Schedule group ${group}\nEventBridge Scheduler reports per group. Jobs: ${jobs}.${shared}`,
        width: 24,
        height: 2,
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: `Schedule group ${group}: invocations`,
        left: [
          schedulerMetric(group, 'InvocationAttemptCount', 'Attempts'),
          schedulerMetric(group, 'TargetErrorCount', 'Target errors'),
          schedulerMetric(group, 'InvocationDroppedCount', 'Dropped'),
          schedulerMetric(group, 'InvocationsSentToDeadLetterCount', 'Sent to DLQ'),
          schedulerMetric(group, 'InvocationsFailedToBeSentToDeadLetterCount', 'Failed to reach the DLQ'),
        ],
        width: 16,
      }),
      new cloudwatch.AlarmStatusWidget({
        title: `Schedule group ${group}: alarms`,
        alarms: Object.values(alarms),
        width: 8,
      }),
    );
  }

  /** The job's rows of the dashboard: its heading, then its queues, its functions, its event sources, its alarms. */
  private addJobRows(job: MonitoredJob, alarms: JobAlarms): void {
    const { jobName, config } = job;
    this.dashboard.addWidgets(
      new cloudwatch.TextWidget({
        markdown:
          `## ${jobName}\nSchedule \`cron(${config.schedule.cron})\` in ${config.schedule.timeZone}; ` +
          `age SLO ${config.oldestMessageAgeSloSeconds}s; concurrency ${config.pacing.concurrency}. ` +
          `First step on any alarm: \`${this.statusCommand(jobName)}\`.`,
        width: 24,
        height: 2,
      }),
    );
    this.dashboard.addWidgets(...queueAndProducerWidgets(job));
    this.dashboard.addWidgets(...consumerWidgets(job));
    this.dashboard.addWidgets(
      eventSourceWidget(`${jobName}: consumer event source`, job.pacedJob.eventSource),
      eventSourceWidget(`${jobName}: admission event source`, job.pacedJob.admissionEventSource),
    );
    this.dashboard.addWidgets(
      new cloudwatch.AlarmStatusWidget({
        title: `${jobName}: alarms`,
        alarms: Object.values(alarms),
        width: 24,
        height: 3,
      }),
    );
  }
}

const FIVE_MINUTE_SUM = { statistic: cloudwatch.Stats.SUM, period: Duration.minutes(5) };
const FIVE_MINUTE_MAX = { statistic: cloudwatch.Stats.MAXIMUM, period: Duration.minutes(5) };

/** A job's custom metric on the dashboard, labelled with its name. */
function labelledJobMetric(jobName: string, name: MetricName): cloudwatch.Metric {
  return jobMetric(jobName, name, { label: name });
}

/** Where the work waits and what feeds it: the work queue, the dead-letter queues, the producer. */
function queueAndProducerWidgets(job: MonitoredJob): cloudwatch.IWidget[] {
  const { jobName, pacedJob, config } = job;
  const { queue, dlq, producerDlq, admissionQueue, producer } = pacedJob;
  const sum = FIVE_MINUTE_SUM;
  const max = FIVE_MINUTE_MAX;
  return [
    new cloudwatch.GraphWidget({
      title: `${jobName}: work queue`,
      left: [
        queue.metricApproximateNumberOfMessagesVisible({ ...max, label: 'Visible' }),
        queue.metricApproximateNumberOfMessagesNotVisible({ ...max, label: 'In flight' }),
        // Admitted but not yet due: each admitted message waits for its slot by plan.
        queue.metric('ApproximateNumberOfMessagesDelayed', { ...max, label: 'Delayed (admitted, not yet due)' }),
        // A run still admitting has its next step waiting here; none while a run is admitting is a stalled chain.
        admissionQueue.metric('ApproximateNumberOfMessagesDelayed', { ...max, label: 'Admission steps waiting' }),
      ],
      right: [
        queue.metricApproximateAgeOfOldestMessage({ ...max, label: 'Oldest message age (s)' }),
        ...(hasKeys(config) ? [quietTenantsAgeMetric(pacedJob, { ...max, label: 'Oldest of quiet tenants (s)' })] : []),
      ],
      rightAnnotations: [{ value: config.oldestMessageAgeSloSeconds, label: 'Age SLO' }],
      width: 8,
    }),
    new cloudwatch.GraphWidget({
      title: `${jobName}: dead-letter queues`,
      left: [
        dlq.metricApproximateNumberOfMessagesVisible({ ...max, label: 'Job DLQ' }),
        producerDlq.metricApproximateNumberOfMessagesVisible({ ...max, label: 'Producer DLQ' }),
      ],
      width: 8,
    }),
    new cloudwatch.GraphWidget({
      title: `${jobName}: producer`,
      left: [
        producer.metricInvocations({ ...sum, label: 'Invocations' }),
        producer.metricErrors({ ...sum, label: 'Errors' }),
        labelledJobMetric(jobName, MetricName.Published),
      ],
      right: [producer.metricDuration({ ...max, label: 'Duration max (ms)' })],
      rightAnnotations: [{ value: producerDurationThresholdMs(config), label: 'Duration alarm' }],
      width: 8,
    }),
  ];
}

/** What drains the work: the consumer, the outcomes it meters, how long operations waited. */
function consumerWidgets(job: MonitoredJob): cloudwatch.IWidget[] {
  const { jobName, config } = job;
  const { consumer } = job.pacedJob;
  const sum = FIVE_MINUTE_SUM;
  const max = FIVE_MINUTE_MAX;
  const custom = (name: MetricName) => labelledJobMetric(jobName, name);
  return [
    new cloudwatch.GraphWidget({
      title: `${jobName}: consumer`,
      left: [
        consumer.metricInvocations({ ...sum, label: 'Invocations' }),
        consumer.metricErrors({ ...sum, label: 'Errors' }),
        consumer.metricThrottles({ ...sum, label: 'Throttles' }),
      ],
      right: [consumer.metric('ConcurrentExecutions', { ...max, label: 'Concurrency max' })],
      rightAnnotations: [{ value: config.pacing.concurrency, label: 'Reserved concurrency' }],
      width: 8,
    }),
    new cloudwatch.GraphWidget({
      title: `${jobName}: outcomes`,
      left: [
        custom(MetricName.Applied),
        custom(MetricName.DuplicatesSuppressed),
        custom(MetricName.Deferred),
        custom(MetricName.Throttled),
        custom(MetricName.Rejected),
        custom(MetricName.DeadLettered),
        custom(MetricName.DiscoveryRowsRejected),
      ],
      width: 8,
    }),
    new cloudwatch.GraphWidget({
      title: `${jobName}: age since first enqueue`,
      left: [
        jobMetric(jobName, MetricName.AgeSinceFirstEnqueue, { statistic: cloudwatch.Stats.p(99), label: 'p99 (ms)' }),
      ],
      leftAnnotations: [{ value: config.oldestMessageAgeSloSeconds * 1000, label: 'Age SLO' }],
      width: 8,
    }),
  ];
}

/** One event source mapping's event counts, from polled to deleted. */
function eventSourceWidget(title: string, source: SqsEventSource): cloudwatch.GraphWidget {
  return new cloudwatch.GraphWidget({
    title,
    left: [
      eventSourceMetric(source, EventSourceMetric.Polled, { label: 'Polled' }),
      eventSourceMetric(source, EventSourceMetric.Invoked, { label: 'Invoked' }),
      eventSourceMetric(source, EventSourceMetric.FailedInvoke, { label: 'Failed to invoke' }),
      eventSourceMetric(source, EventSourceMetric.Dropped, { label: 'Dropped' }),
      eventSourceMetric(source, EventSourceMetric.Deleted, { label: 'Deleted' }),
    ],
    width: 12,
  });
}

function scheduleGroupOf(job: PacedJob): string {
  return job.scheduleGroup.scheduleGroupName;
}
