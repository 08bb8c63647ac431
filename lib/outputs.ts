// The stack's CloudFormation output names: the contract the local runtime and the operator CLI read after synth or deploy.
// Plain functions and constants only (no CDK imports), so tools can import the names without loading the CDK.
//
// One output per value, under a stable documented name, rather than one JSON `Resources` output: CloudFormation caps
// an output value's size, a JSON blob of every job's URLs and ARNs grows with each job, and per-value outputs can be
// read with `aws cloudformation describe-stacks` or the template directly, with no parsing.

/** `payment-reconciliation` -> `PaymentReconciliation`; `providerApiKey` -> `ProviderApiKey`. */
export function pascalCase(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .filter((part) => part.length > 0)
    .map((part) => part[0].toUpperCase() + part.slice(1))
    .join('');
}

/** Stack-wide outputs. */
export const StackOutput = {
  IdempotencyTableName: 'IdempotencyTableName',
  LedgerTableName: 'LedgerTableName',
  LimiterTableName: 'LimiterTableName',
  /** The SNS topic every alarm notifies; subscribe pagers or chat to it. */
  AlarmTopicArn: 'AlarmTopicArn',
} as const;

/** Per-job outputs; the full name is `<JobPascal><suffix>`, see jobOutputName. */
export const JobOutput = {
  /** The job's work queue. */
  QueueUrl: 'QueueUrl',
  QueueArn: 'QueueArn',
  /** The work queue's dead-letter queue (messages that exhausted maxReceiveCount, or rejected permanently). */
  DlqUrl: 'DlqUrl',
  DlqArn: 'DlqArn',
  /** Failed producer invocations: the schedule's dead-letter queue and the producer's asynchronous-invocation DLQ. */
  ProducerDlqUrl: 'ProducerDlqUrl',
  ProducerDlqArn: 'ProducerDlqArn',
  ProducerFunctionName: 'ProducerFunctionName',
  ConsumerFunctionName: 'ConsumerFunctionName',
  ScheduleName: 'ScheduleName',
  /** The EventBridge Scheduler group the schedule is in (the environment's); Scheduler's calls on it need the group. */
  ScheduleGroupName: 'ScheduleGroupName',
  /** UUID of the consumer's SQS event source mapping (to pause or resume consumption). */
  EventSourceMappingUuid: 'EventSourceMappingUuid',
  /** The producer's admission queue (its next steps, delayed until due). */
  AdmissionQueueUrl: 'AdmissionQueueUrl',
  AdmissionQueueArn: 'AdmissionQueueArn',
  /** UUID of the producer's event source mapping on the admission queue (pause stops admission with it). */
  AdmissionMappingUuid: 'AdmissionMappingUuid',
} as const;

export type JobOutputKind = keyof typeof JobOutput;

/** e.g. jobOutputName('payment-reconciliation', 'QueueUrl') === 'PaymentReconciliationQueueUrl'. */
export function jobOutputName(jobName: string, kind: JobOutputKind): string {
  return `${pascalCase(jobName)}${JobOutput[kind]}`;
}

/**
 * The description of a per-job output, `<job>: <Kind>` (e.g. `payment-reconciliation: QueueUrl`). Part of the contract:
 * the operator CLI recovers the job names of a deployed stack from these descriptions.
 */
export function jobOutputDescription(jobName: string, kind: JobOutputKind): string {
  return `${jobName}: ${kind}`;
}

/**
 * The output holding the name of the application bucket under logical key `key`, `<KeyPascal>BucketName` (e.g.
 * `UploadsBucketName`): a bucket the stack creates is named by CloudFormation, so this is where its name is found.
 */
export function bucketOutputName(key: string): string {
  return `${pascalCase(key)}BucketName`;
}

/** The description of a bucket output; it does not have the `<job>: <Kind>` shape, so no tool takes it for a job. */
export function bucketOutputDescription(key: string): string {
  return `Name of the application bucket appResources.buckets.${key}`;
}

/** The stack name for an environment: `PacedJobs-<env>`. */
export function stackName(environmentName: string): string {
  return `PacedJobs-${environmentName}`;
}
