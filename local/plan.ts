// Deploy parity, part two: turns the synthesized template into a local deployment plan (physical names, URLs, ARNs,
// fully resolved properties per resource), before anything is created. Pure: no servers, no AWS calls.
import { CloudFormationTemplate, evaluateConditions, ResolveContext, resolveValue, TemplateError, TemplateResource } from './template';

/** Resource types the local runtime creates and runs. */
export const EMULATED_TYPES = [
  'AWS::SQS::Queue',
  'AWS::DynamoDB::Table',
  'AWS::DynamoDB::GlobalTable',
  'AWS::S3::Bucket',
  'AWS::SecretsManager::Secret',
  'AWS::Lambda::Function',
  'AWS::Lambda::EventSourceMapping',
  'AWS::Lambda::LayerVersion',
  'AWS::Scheduler::Schedule',
  'AWS::Scheduler::ScheduleGroup',
] as const;

/**
 * Resource types deliberately not emulated, with the reason. Permissions, logging, monitoring and deploy-time
 * housekeeping change nothing about how data flows; everything else unknown stops provisioning with its name.
 */
export const IGNORED_TYPES: Record<string, string> = {
  'AWS::IAM::Role': 'permissions are not enforced locally',
  'AWS::IAM::Policy': 'permissions are not enforced locally',
  'AWS::IAM::ManagedPolicy': 'permissions are not enforced locally',
  'AWS::SQS::QueuePolicy': 'permissions are not enforced locally',
  'AWS::S3::BucketPolicy': 'permissions are not enforced locally',
  'AWS::Lambda::Permission': 'permissions are not enforced locally',
  'AWS::KMS::Key': 'local data is not encrypted',
  'AWS::KMS::Alias': 'local data is not encrypted',
  'AWS::Logs::LogGroup': 'function logs go to the local log sink',
  'AWS::CloudWatch::Alarm': 'monitoring only',
  'AWS::CloudWatch::CompositeAlarm': 'monitoring only',
  'AWS::CloudWatch::Dashboard': 'monitoring only',
  'AWS::SNS::Topic': 'alarm notifications only',
  'AWS::SNS::Subscription': 'alarm notifications only',
  'AWS::SNS::TopicPolicy': 'alarm notifications only',
  'AWS::CDK::Metadata': 'CDK bookkeeping',
  'Custom::S3AutoDeleteObjects': 'deploy-time housekeeping (empties the bucket on stack deletion)',
  'Custom::LogRetention': 'deploy-time housekeeping (log retention)',
  'Custom::CDKBucketDeployment': 'deploy-time housekeeping',
};

export class UnsupportedResourceError extends TemplateError {
  constructor(public readonly resources: { logicalId: string; type: string }[]) {
    super(
      `the local runtime cannot emulate ${resources.map((r) => `${r.logicalId} (${r.type})`).join(', ')}; ` +
        `emulated types: ${EMULATED_TYPES.join(', ')}; ignored types: ${Object.keys(IGNORED_TYPES).join(', ')}`,
      resources.map((r) => r.logicalId).join(','),
    );
    this.name = 'UnsupportedResourceError';
  }
}

export interface PlanOptions {
  stackName: string;
  region: string;
  accountId: string;
  /** Base URL of the SQS server; queue URLs are `${sqsEndpoint}/${accountId}/${name}`. */
  sqsEndpoint: string;
}

export interface PlannedQueue {
  logicalId: string;
  name: string;
  url: string;
  arn: string;
  /** CreateQueue attributes (strings), RedrivePolicy as JSON. */
  attributes: Record<string, string>;
  /** The DLQ's ARN when the queue has a redrive policy. */
  deadLetterTargetArn?: string;
  maxReceiveCount?: number;
}

export interface PlannedTable {
  logicalId: string;
  name: string;
  arn: string;
  properties: Record<string, unknown>;
}

export interface PlannedBucket {
  logicalId: string;
  name: string;
  arn: string;
}

export interface PlannedSecret {
  logicalId: string;
  name: string;
  arn: string;
  properties: Record<string, unknown>;
}

export interface PlannedFunction {
  logicalId: string;
  name: string;
  arn: string;
  handler: string;
  /** The asset folder name inside the cloud assembly (asset.<hash>), when the template says. */
  assetPath?: string;
  /** The asset's S3 key (hash + .zip), to find the asset when metadata is absent. */
  s3Key?: string;
  environment: Record<string, string>;
  timeoutSeconds: number;
  memoryMb: number;
  reservedConcurrency?: number;
  /** The layers' ARNs, in the template's order (plan.layers has their assets); absent: none. */
  layerArns?: string[];
}

/** A Lambda layer: its content's asset folder inside the cloud assembly. */
export interface PlannedLayer {
  logicalId: string;
  arn: string;
  assetPath?: string;
}

export interface PlannedMapping {
  logicalId: string;
  functionName: string;
  eventSourceArn: string;
  batchSize: number;
  maximumBatchingWindowSeconds: number;
  maximumConcurrency?: number;
  reportBatchItemFailures: boolean;
  enabled: boolean;
}

export interface PlannedSchedule {
  logicalId: string;
  name: string;
  arn: string;
  group: string;
  expression: string;
  timeZone: string;
  enabled: boolean;
  targetArn: string;
  input?: string;
  maximumRetryAttempts: number;
  maximumEventAgeSeconds: number;
  deadLetterArn?: string;
}

export interface StackPlan {
  stackName: string;
  region: string;
  accountId: string;
  queues: PlannedQueue[];
  tables: PlannedTable[];
  buckets: PlannedBucket[];
  secrets: PlannedSecret[];
  functions: PlannedFunction[];
  layers: PlannedLayer[];
  mappings: PlannedMapping[];
  schedules: PlannedSchedule[];
  /** Logical IDs skipped on purpose, with the reason. */
  ignored: { logicalId: string; type: string; reason: string }[];
  outputs: Record<string, string>;
}

interface Identity {
  ref: string;
  attrs: Record<string, string>;
}

/** Keeps a generated name within a service's character set and length, as CloudFormation's generated names do. */
function generatedName(stackName: string, logicalId: string, max: number, lower = false): string {
  let name = `${stackName}-${logicalId}`.replace(/[^A-Za-z0-9-]/g, '-');
  if (lower) name = name.toLowerCase();
  return name.slice(0, max).replace(/-+$/, '');
}

const str = (v: unknown, fallback?: string): string | undefined => (v === undefined || v === null ? fallback : String(v));

/**
 * Plans the local deployment of a template.
 * @throws UnsupportedResourceError naming every resource the runtime cannot emulate; TemplateError for a bad intrinsic.
 */
export function planStack(template: CloudFormationTemplate, options: PlanOptions): StackPlan {
  const { stackName, region, accountId } = options;
  const resources = template.Resources;

  const unsupported = Object.entries(resources)
    .filter(([, r]) => !(EMULATED_TYPES as readonly string[]).includes(r.Type) && !(r.Type in IGNORED_TYPES))
    .map(([logicalId, r]) => ({ logicalId, type: r.Type }));
  if (unsupported.length > 0) throw new UnsupportedResourceError(unsupported);

  const pseudo: Record<string, string> = {
    'AWS::Region': region,
    'AWS::AccountId': accountId,
    'AWS::Partition': 'aws',
    'AWS::StackName': stackName,
    'AWS::StackId': `arn:aws:cloudformation:${region}:${accountId}:stack/${stackName}/local`,
    'AWS::URLSuffix': 'amazonaws.com',
    'AWS::NotificationARNs': '',
  };
  const identities = new Map<string, Identity>();
  const resolving = new Set<string>();

  const ctx: ResolveContext = {
    pseudo,
    mappings: template.Mappings,
    ref: (id) => identity(id).ref,
    getAtt: (id, attr) => {
      const value = identity(id).attrs[attr];
      if (value === undefined) {
        throw new TemplateError(`Fn::GetAtt ${id}.${attr}: attribute not emulated for ${resources[id]?.Type}`, `${id}.${attr}`);
      }
      return value;
    },
  };

  const parameterValue = (id: string): string | undefined => {
    const p = template.Parameters?.[id];
    if (!p) return undefined;
    if (p.Default === undefined) {
      throw new TemplateError(`parameter ${id} has no default; the local runtime deploys without parameter overrides`, id);
    }
    return String(p.Default);
  };

  const prop = (r: TemplateResource, key: string, id: string): unknown => resolveValue(r.Properties?.[key], ctx, `${id}.Properties.${key}`);

  function identity(id: string): Identity {
    const known = identities.get(id);
    if (known) return known;
    const param = parameterValue(id);
    if (param !== undefined) return { ref: param, attrs: {} };
    const r = resources[id];
    if (!r) throw new TemplateError(`Ref to ${id}, which is neither a resource nor a parameter`, id);
    if (resolving.has(id)) throw new TemplateError(`circular reference through ${id}`, id);
    resolving.add(id);
    try {
      const made = makeIdentity(id, r);
      identities.set(id, made);
      return made;
    } finally {
      resolving.delete(id);
    }
  }

  function makeIdentity(id: string, r: TemplateResource): Identity {
    const arn = (service: string, resource: string) => `arn:aws:${service}:${region}:${accountId}:${resource}`;
    switch (r.Type) {
      case 'AWS::SQS::Queue': {
        const fifo = prop(r, 'FifoQueue', id) === true || prop(r, 'FifoQueue', id) === 'true';
        const name = str(prop(r, 'QueueName', id)) ?? generatedName(stackName, id, fifo ? 75 : 80) + (fifo ? '.fifo' : '');
        const url = `${options.sqsEndpoint}/${accountId}/${name}`;
        return { ref: url, attrs: { Arn: arn('sqs', name), QueueName: name, QueueUrl: url } };
      }
      case 'AWS::DynamoDB::Table':
      case 'AWS::DynamoDB::GlobalTable': {
        const name = str(prop(r, 'TableName', id)) ?? generatedName(stackName, id, 255);
        const tableArn = arn('dynamodb', `table/${name}`);
        return { ref: name, attrs: { Arn: tableArn, StreamArn: `${tableArn}/stream/local`, TableId: name } };
      }
      case 'AWS::S3::Bucket': {
        const name = str(prop(r, 'BucketName', id)) ?? generatedName(stackName, id, 63, true);
        return {
          ref: name,
          attrs: {
            Arn: `arn:aws:s3:::${name}`,
            DomainName: `${name}.s3.amazonaws.com`,
            RegionalDomainName: `${name}.s3.${region}.amazonaws.com`,
            WebsiteURL: `http://${name}.s3-website-${region}.amazonaws.com`,
          },
        };
      }
      case 'AWS::SecretsManager::Secret': {
        const name = str(prop(r, 'Name', id)) ?? generatedName(stackName, id, 256);
        // Real secret ARNs end in a random 6-character suffix; a fixed one keeps local ARNs stable across runs.
        const secretArn = arn('secretsmanager', `secret:${name}-local0`);
        return { ref: secretArn, attrs: { Id: secretArn, SecretArn: secretArn } };
      }
      case 'AWS::Lambda::Function': {
        const name = str(prop(r, 'FunctionName', id)) ?? generatedName(stackName, id, 64);
        return { ref: name, attrs: { Arn: arn('lambda', `function:${name}`) } };
      }
      case 'AWS::Lambda::LayerVersion': {
        const name = str(prop(r, 'LayerName', id)) ?? generatedName(stackName, id, 64);
        const layerArn = arn('lambda', `layer:${name}:1`);
        return { ref: layerArn, attrs: { LayerVersionArn: layerArn } };
      }
      case 'AWS::Lambda::EventSourceMapping':
        // Ref is the mapping's UUID; the local one is derived from the logical ID so it is stable across runs.
        return { ref: `local-${id}`, attrs: { Id: `local-${id}`, EventSourceMappingArn: arn('lambda', `event-source-mapping:local-${id}`) } };
      case 'AWS::Scheduler::Schedule': {
        const name = str(prop(r, 'Name', id)) ?? generatedName(stackName, id, 64);
        const group = str(prop(r, 'GroupName', id), 'default')!;
        return { ref: name, attrs: { Arn: arn('scheduler', `schedule/${group}/${name}`) } };
      }
      case 'AWS::Scheduler::ScheduleGroup': {
        const name = str(prop(r, 'Name', id)) ?? generatedName(stackName, id, 64);
        return { ref: name, attrs: { Arn: arn('scheduler', `schedule-group/${name}`) } };
      }
      case 'AWS::IAM::Role': {
        const name = str(prop(r, 'RoleName', id)) ?? generatedName(stackName, id, 64);
        return { ref: name, attrs: { Arn: `arn:aws:iam::${accountId}:role/${name}`, RoleId: `LOCAL${id}` } };
      }
      case 'AWS::SNS::Topic': {
        const name = str(prop(r, 'TopicName', id)) ?? generatedName(stackName, id, 256);
        const topicArn = arn('sns', name);
        return { ref: topicArn, attrs: { TopicArn: topicArn, TopicName: name } };
      }
      case 'AWS::KMS::Key':
        return { ref: `local-${id}`, attrs: { Arn: arn('kms', `key/local-${id}`), KeyId: `local-${id}` } };
      case 'AWS::Logs::LogGroup': {
        const name = str(prop(r, 'LogGroupName', id)) ?? `/local/${stackName}/${id}`;
        return { ref: name, attrs: { Arn: arn('logs', `log-group:${name}:*`) } };
      }
      default:
        // Other ignored types: a stable placeholder, since nothing local consumes their identity.
        return { ref: `${stackName}-${id}`, attrs: { Arn: arn('local', id) } };
    }
  }

  ctx.conditions = evaluateConditions(template, ctx);
  const included = Object.entries(resources).filter(([, r]) => !r.Condition || ctx.conditions![r.Condition]);

  const plan: StackPlan = { stackName, region, accountId, queues: [], tables: [], buckets: [], secrets: [], functions: [], layers: [], mappings: [], schedules: [], ignored: [], outputs: {} };

  for (const [id, r] of included) {
    if (r.Type in IGNORED_TYPES) {
      // Never resolved: their properties (policies, alarms) may name attributes nothing local has.
      plan.ignored.push({ logicalId: id, type: r.Type, reason: IGNORED_TYPES[r.Type] });
      continue;
    }
    const me = identity(id);
    const props = (resolveValue(r.Properties ?? {}, ctx, `${id}.Properties`) ?? {}) as Record<string, unknown>;
    switch (r.Type) {
      case 'AWS::SQS::Queue': {
        const attributes: Record<string, string> = {};
        for (const key of ['DelaySeconds', 'MaximumMessageSize', 'MessageRetentionPeriod', 'ReceiveMessageWaitTimeSeconds', 'VisibilityTimeout', 'FifoQueue', 'ContentBasedDeduplication', 'DeduplicationScope', 'FifoThroughputLimit', 'SqsManagedSseEnabled']) {
          if (props[key] !== undefined) attributes[key] = String(props[key]);
        }
        const redrive = props.RedrivePolicy as { deadLetterTargetArn?: string; maxReceiveCount?: number } | string | undefined;
        const policy = typeof redrive === 'string' ? (JSON.parse(redrive) as { deadLetterTargetArn?: string; maxReceiveCount?: number }) : redrive;
        if (policy) attributes.RedrivePolicy = JSON.stringify({ deadLetterTargetArn: policy.deadLetterTargetArn, maxReceiveCount: Number(policy.maxReceiveCount) });
        plan.queues.push({
          logicalId: id,
          name: me.attrs.QueueName,
          url: me.ref,
          arn: me.attrs.Arn,
          attributes,
          deadLetterTargetArn: policy?.deadLetterTargetArn,
          maxReceiveCount: policy ? Number(policy.maxReceiveCount) : undefined,
        });
        break;
      }
      case 'AWS::DynamoDB::Table':
      case 'AWS::DynamoDB::GlobalTable':
        plan.tables.push({ logicalId: id, name: me.ref, arn: me.attrs.Arn, properties: props });
        break;
      case 'AWS::S3::Bucket':
        plan.buckets.push({ logicalId: id, name: me.ref, arn: me.attrs.Arn });
        break;
      case 'AWS::SecretsManager::Secret':
        plan.secrets.push({ logicalId: id, name: str(props.Name) ?? me.ref.replace(/^.*:secret:(.*)-local0$/, '$1'), arn: me.ref, properties: props });
        break;
      case 'AWS::Lambda::Function': {
        const code = (props.Code ?? {}) as { S3Key?: string };
        const vars = ((props.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {}) as Record<string, unknown>;
        plan.functions.push({
          logicalId: id,
          name: me.ref,
          arn: me.attrs.Arn,
          handler: str(props.Handler, 'index.handler')!,
          assetPath: str(r.Metadata?.['aws:asset:path']),
          s3Key: code.S3Key,
          environment: Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, String(v)])),
          timeoutSeconds: Number(props.Timeout ?? 3),
          memoryMb: Number(props.MemorySize ?? 128),
          reservedConcurrency: props.ReservedConcurrentExecutions === undefined ? undefined : Number(props.ReservedConcurrentExecutions),
          layerArns: ((props.Layers as unknown[] | undefined) ?? []).map((l) => String(l)),
        });
        break;
      }
      case 'AWS::Lambda::LayerVersion':
        plan.layers.push({ logicalId: id, arn: me.ref, assetPath: str(r.Metadata?.['aws:asset:path']) });
        break;
      case 'AWS::Lambda::EventSourceMapping': {
        const arnText = str(props.EventSourceArn) ?? '';
        if (!arnText.startsWith('arn:aws:sqs:')) {
          throw new UnsupportedResourceError([{ logicalId: id, type: `${r.Type} with a non-SQS source (${arnText})` }]);
        }
        const fnRef = str(props.FunctionName)!;
        plan.mappings.push({
          logicalId: id,
          functionName: fnRef.replace(/^arn:[^:]+:lambda:[^:]+:\d+:function:([^:]+).*$/, '$1'),
          eventSourceArn: arnText,
          batchSize: Number(props.BatchSize ?? 10),
          maximumBatchingWindowSeconds: Number(props.MaximumBatchingWindowInSeconds ?? 0),
          maximumConcurrency: (props.ScalingConfig as { MaximumConcurrency?: number } | undefined)?.MaximumConcurrency,
          reportBatchItemFailures: ((props.FunctionResponseTypes as string[] | undefined) ?? []).includes('ReportBatchItemFailures'),
          enabled: props.Enabled === undefined ? true : props.Enabled === true || props.Enabled === 'true',
        });
        break;
      }
      case 'AWS::Scheduler::Schedule': {
        const target = (props.Target ?? {}) as {
          Arn?: string;
          Input?: string;
          RetryPolicy?: { MaximumRetryAttempts?: number; MaximumEventAgeInSeconds?: number };
          DeadLetterConfig?: { Arn?: string };
        };
        plan.schedules.push({
          logicalId: id,
          name: me.ref,
          arn: me.attrs.Arn,
          group: str(props.GroupName, 'default')!,
          expression: str(props.ScheduleExpression)!,
          timeZone: str(props.ScheduleExpressionTimezone, 'UTC')!,
          enabled: str(props.State, 'ENABLED') === 'ENABLED',
          targetArn: str(target.Arn)!,
          input: target.Input === undefined ? undefined : typeof target.Input === 'string' ? target.Input : JSON.stringify(target.Input),
          // Scheduler's documented defaults: 185 retries within 86400 s.
          maximumRetryAttempts: Number(target.RetryPolicy?.MaximumRetryAttempts ?? 185),
          maximumEventAgeSeconds: Number(target.RetryPolicy?.MaximumEventAgeInSeconds ?? 86400),
          deadLetterArn: target.DeadLetterConfig?.Arn,
        });
        break;
      }
      default:
        // AWS::Scheduler::ScheduleGroup: a name only; schedules carry their group.
        break;
    }
  }

  for (const [name, output] of Object.entries(template.Outputs ?? {})) {
    plan.outputs[name] = String(resolveValue(output.Value, ctx, `Outputs.${name}.Value`));
  }
  return plan;
}
