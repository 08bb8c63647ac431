// The deployable unit for one environment: the app resources, the runtime's state tables, one PacedJob per configured job.
import { CfnOutput, Stack, StackProps, Tags } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { AppResources } from './app-resources';
import type { EnvironmentConfig } from './config/schema';
import { Monitoring } from './monitoring';
import { bucketOutputDescription, bucketOutputName, jobOutputDescription, JobOutputKind, jobOutputName, pascalCase, StackOutput } from './outputs';
import { PacedJob } from './paced-job';
import { StateTables } from './state-tables';

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

  constructor(scope: Construct, id: string, props: PacedJobsStackProps) {
    const { environmentName, config, handlersDir, ...stackProps } = props;
    super(scope, id, {
      description: `Paced jobs (${environmentName}): scheduled, rate-limited, idempotent job processing`,
      ...stackProps,
    });
    Tags.of(this).add('project', 'paced-jobs');
    Tags.of(this).add('environment', environmentName);

    this.appResources = new AppResources(this, 'AppResources', { config: config.appResources, retainData: config.retainData });
    this.stateTables = new StateTables(this, 'State', { retainData: config.retainData });
    for (const [key, bucket] of Object.entries(this.appResources.buckets)) {
      // A created bucket's name is CloudFormation's: the output is how an operator (or a tool) learns it.
      new CfnOutput(this, bucketOutputName(key), { value: bucket.bucketName, description: bucketOutputDescription(key) });
    }

    const jobs: Record<string, PacedJob> = {};
    for (const [jobName, job] of Object.entries(config.jobs)) {
      const pacedJob = new PacedJob(this, pascalCase(jobName), {
        jobName,
        job,
        appResources: this.appResources,
        stateTables: this.stateTables,
        logRetentionDays: config.logRetentionDays,
        retainData: config.retainData,
        handlersDir,
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
