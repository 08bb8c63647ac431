// The jobs of a planned stack: which functions, queues, schedule and mappings belong to each job (the functions carry
// JOB_NAME and JOB_SETTINGS). Every local tool sees the stack's jobs through this one grouping.
import { planStack, type PlannedFunction, type StackPlan } from './plan';
import type { CloudFormationTemplate } from './template';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import type { SqsEventSourceMapping } from './eventSourceMapping';

export class JobSettingsError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'JobSettingsError';
  }
}

/** One job as deployed: its functions, queue, DLQ, mapping and schedule. */
export interface JobView {
  name: string;
  settings: JobRuntimeSettings;
  producer?: PlannedFunction;
  consumer?: PlannedFunction;
  queueUrl?: string;
  queueArn?: string;
  dlqUrl?: string;
  dlqArn?: string;
  scheduleName?: string;
  mapping?: SqsEventSourceMapping;
  /** The producer's admission queue and its mapping (admission steps, delayed until due). */
  admissionQueueUrl?: string;
  admissionMapping?: SqsEventSourceMapping;
  /**
   * The job's code, relative to the CDK app's folder, from its functions' `paced-jobs:job-entry` Metadata; absent in
   * an assembly synthesized before the Metadata existed (the fixture is then looked for in lambda/jobs/<name>/).
   */
  entry?: string;
}

function jobSettingsOf(fn: PlannedFunction): JobRuntimeSettings | undefined {
  const raw = fn.environment.JOB_SETTINGS;
  if (!raw) return undefined;
  try {
    return JSON.parse(raw) as JobRuntimeSettings;
  } catch (error) {
    throw new JobSettingsError(`function ${fn.logicalId}: JOB_SETTINGS is not JSON`, { cause: error });
  }
}

/**
 * Groups the planned resources by job (functions carry JOB_NAME). The producer is the schedule's target, and its
 * mapping reads the admission queue; the consumer is the other function with a mapping, on the work queue.
 */
export function jobViews(plan: StackPlan, mappings: SqsEventSourceMapping[] = []): Map<string, JobView> {
  const jobs = new Map<string, JobView>();
  for (const fn of plan.functions) {
    const name = fn.environment.JOB_NAME;
    const settings = jobSettingsOf(fn);
    if (!name || !settings) continue;
    const view = jobs.get(name) ?? { name, settings };
    jobs.set(name, view);
    view.entry ??= fn.jobEntry;
    const mapping = plan.mappings.find((m) => m.functionName === fn.name);
    const isProducer = plan.schedules.some((s) => s.targetArn === fn.arn);
    if (mapping && isProducer) {
      view.admissionQueueUrl = plan.queues.find((q) => q.arn === mapping.eventSourceArn)?.url;
      view.admissionMapping = mappings.find((m) => m.config.functionName === fn.name);
    } else if (mapping) {
      view.consumer = fn;
      const queue = plan.queues.find((q) => q.arn === mapping.eventSourceArn);
      view.queueUrl = queue?.url;
      view.queueArn = queue?.arn;
      const dlq = plan.queues.find((q) => q.arn === queue?.deadLetterTargetArn);
      view.dlqUrl = dlq?.url;
      view.dlqArn = dlq?.arn;
      view.mapping = mappings.find((m) => m.config.functionName === fn.name);
    }
    const schedule = plan.schedules.find((s) => s.targetArn === fn.arn);
    if (schedule) {
      view.producer = fn;
      view.scheduleName = schedule.name;
    }
  }
  return jobs;
}

/**
 * The stack planned before any server exists, on placeholder region, account and endpoint: enough to read each job's
 * settings and resources (a tool sizes its run, or picks its job, from them before it deploys).
 */
export function previewPlan(template: CloudFormationTemplate, stackName: string): StackPlan {
  return planStack(template, {
    stackName,
    region: 'us-east-1',
    accountId: '000000000000',
    sqsEndpoint: 'http://preview',
  });
}
