// Deploy parity, part two: turns the synthesized template into a local deployment plan (physical names, URLs, ARNs,
// fully resolved properties per resource), before anything is created. Pure: no servers, no AWS calls.
import { createHash } from 'node:crypto';
import {
  type CloudFormationTemplate,
  evaluateConditions,
  type ResolveContext,
  resolveValue,
  TemplateError,
  type TemplateResource,
  unsupportedIntrinsicIn,
} from './template';
import { JOB_ENTRY_METADATA } from '../lambda/core/constants';

/** What the local runtime does with a resource type: creates and runs it, enforces it (IAM), or skips it. */
export type LocalTreatment = 'emulated' | 'enforced' | 'ignored';

/**
 * The one table of resource types the local runtime knows (docs/local-runtime.md shows it, and a test
 * keeps the two equal). `emulated`: created and run locally. `enforced`: not created, but every request is authorized
 * against it as AWS would. `ignored`: skipped, with the reason and what that means before a deploy. Any other type
 * stops provisioning with its name.
 */
export const RESOURCE_TYPES: Record<string, { treatment: LocalTreatment; note: string }> = {
  'AWS::SQS::Queue': {
    treatment: 'emulated',
    note: 'local-aws-sqs: visibility, delays, redrive to the DLQ, message move tasks',
  },
  'AWS::DynamoDB::Table': {
    treatment: 'emulated',
    note: 'dynalite: conditional writes, indexes, transactions; TTL is not applied',
  },
  'AWS::DynamoDB::GlobalTable': { treatment: 'emulated', note: 'as one local table (no replicas)' },
  'AWS::S3::Bucket': { treatment: 'emulated', note: 's3rver: objects only (no lifecycle, versioning or replication)' },
  'AWS::SecretsManager::Secret': { treatment: 'emulated', note: 'value generated per GenerateSecretString' },
  'AWS::Lambda::Function': {
    treatment: 'emulated',
    note: "the bundled asset, in a child process on the template's Node major, outside the repo",
  },
  'AWS::Lambda::LayerVersion': { treatment: 'emulated', note: "mounted as the function's /opt" },
  'AWS::Lambda::EventSourceMapping': {
    treatment: 'emulated',
    note: "SQS only: AWS's poller ramp, batching window, partial batch responses, 6 MB payload cap",
  },
  'AWS::Lambda::EventInvokeConfig': {
    treatment: 'emulated',
    note: 'retry attempts, event age and on-failure destination of asynchronous invocations',
  },
  'AWS::Scheduler::Schedule': {
    treatment: 'emulated',
    note: 'cron and rate expressions in their time zone; Lambda targets only',
  },
  'AWS::Scheduler::ScheduleGroup': { treatment: 'emulated', note: 'a name only' },
  'AWS::IAM::Role': {
    treatment: 'enforced',
    note: "each function, mapping and schedule acts with its role's own credentials",
  },
  'AWS::IAM::Policy': { treatment: 'enforced', note: 'identity policies, evaluated on every request' },
  'AWS::IAM::ManagedPolicy': {
    treatment: 'enforced',
    note: "the template's own; AWS managed policies are not known locally",
  },
  'AWS::SQS::QueuePolicy': { treatment: 'enforced', note: 'resource policy of its queues' },
  'AWS::S3::BucketPolicy': { treatment: 'enforced', note: 'resource policy of its bucket' },
  'AWS::Lambda::Permission': { treatment: 'enforced', note: 'resource policy of its function (who may invoke it)' },
  'AWS::KMS::Key': {
    treatment: 'enforced',
    note: 'its key policy is enforced for SQS queues encrypted with it; local data is not encrypted',
  },
  'AWS::KMS::Alias': { treatment: 'ignored', note: 'local data is not encrypted' },
  'AWS::Logs::LogGroup': { treatment: 'ignored', note: 'function logs go to .local/logs' },
  'AWS::CloudWatch::Alarm': {
    treatment: 'ignored',
    note: "monitoring only: a local run raises no alarm (tests evaluate one over a run's samples with local/alarms.ts)",
  },
  'AWS::CloudWatch::CompositeAlarm': { treatment: 'ignored', note: 'monitoring only' },
  'AWS::CloudWatch::Dashboard': { treatment: 'ignored', note: 'monitoring only' },
  'AWS::SNS::Topic': {
    treatment: 'emulated',
    note: 'names and subscriptions only: ListTopics, GetTopicAttributes, ListSubscriptionsByTopic answer from the template; nothing is delivered',
  },
  'AWS::SNS::Subscription': {
    treatment: 'emulated',
    note: 'listed as confirmed, since nothing is delivered to confirm (on AWS an email subscription is pending until its link is followed)',
  },
  'AWS::SNS::TopicPolicy': { treatment: 'ignored', note: 'alarm notifications only' },
  'AWS::CDK::Metadata': { treatment: 'ignored', note: 'CDK bookkeeping' },
  'Custom::S3AutoDeleteObjects': {
    treatment: 'ignored',
    note: 'deploy-time housekeeping (empties the bucket on stack deletion)',
  },
  'Custom::LogRetention': { treatment: 'ignored', note: 'deploy-time housekeeping (log retention)' },
  'Custom::CDKBucketDeployment': { treatment: 'ignored', note: 'deploy-time housekeeping' },
};

const typesTreated = (treatment: LocalTreatment) =>
  Object.keys(RESOURCE_TYPES).filter((t) => RESOURCE_TYPES[t].treatment === treatment);

/** Resource types the local runtime creates and runs. */
export const EMULATED_TYPES: readonly string[] = typesTreated('emulated');

/** Resource types not created locally (enforced or ignored), with what happens to them instead. */
export const IGNORED_TYPES: Record<string, string> = Object.fromEntries(
  Object.entries(RESOURCE_TYPES)
    .filter(([, t]) => t.treatment !== 'emulated')
    .map(([type, t]) => [type, t.treatment === 'enforced' ? `not created; enforced: ${t.note}` : t.note]),
);

/** The table as Markdown, for docs/local-runtime.md. */
export function resourceTypesMarkdown(): string {
  const rows = Object.entries(RESOURCE_TYPES).map(([type, t]) => `| \`${type}\` | ${t.treatment} | ${t.note} |`);
  return ['| resource type | locally | what that means |', '| --- | --- | --- |', ...rows].join('\n');
}

export class UnsupportedResourceError extends TemplateError {
  constructor(public readonly resources: { logicalId: string; type: string; neededBy?: string }[]) {
    super(
      `the local runtime cannot emulate ${resources.map((r) => `${r.logicalId} (${r.type}${r.neededBy ? `, which ${r.neededBy} needs` : ''})`).join(', ')}; ` +
        `emulated types: ${EMULATED_TYPES.join(', ')}; enforced or ignored types: ${Object.keys(IGNORED_TYPES).join(', ')}`,
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
  /** KmsMasterKeyId resolved to the key's ARN when the queue is encrypted with a KMS key (SQS-managed SSE has none). */
  kmsKeyArn?: string;
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
  /**
   * A GlobalTable's replica in the local region (else its first): the settings it keeps per region (read capacity,
   * its indexes' read capacity, resource policy). Absent for a Table.
   */
  replica?: Record<string, unknown>;
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
  /** The template's Runtime, e.g. nodejs22.x. */
  runtime: string;
  /** The template's Architectures (x86_64 when absent). */
  architectures?: string[];
  /** The execution role's ARN (Role). */
  roleArn?: string;
  /** DeadLetterConfig.TargetArn: where a failed asynchronous event goes. */
  deadLetterArn?: string;
  /**
   * The job's code, as the `paced-jobs:job-entry` Metadata names it: relative to the CDK app's folder, `/` separators.
   * Absent on a function that is no job's, and in assemblies synthesized before the Metadata existed.
   */
  jobEntry?: string;
  /** From an AWS::Lambda::EventInvokeConfig for the function, when the template has one. */
  asyncInvokeConfig?: {
    maximumRetryAttempts?: number;
    maximumEventAgeSeconds?: number;
    onFailureArn?: string;
    onSuccessArn?: string;
  };
}

/** A Lambda layer: its content's asset folder inside the cloud assembly. */
export interface PlannedLayer {
  logicalId: string;
  arn: string;
  assetPath?: string;
}

export interface PlannedMapping {
  logicalId: string;
  /** Its UUID (the mapping's Ref), derived from the logical ID so it is the same on every run. */
  uuid: string;
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
  /** Target.RoleArn: the role Scheduler assumes to invoke the target and write the DLQ. */
  roleArn?: string;
}

export interface PlannedTopic {
  logicalId: string;
  name: string;
  arn: string;
  displayName?: string;
  /** KmsMasterKeyId as the template resolves it (a key ARN, ID or alias). */
  kmsMasterKeyId?: string;
  fifo: boolean;
}

/** A subscription of the template. Nothing is delivered locally, so none waits for a confirmation: all count as confirmed. */
export interface PlannedSubscription {
  logicalId: string;
  /** `<topicArn>:<id>`, the id a UUID derived from the stack name and the logical ID, so it is the same on every run. */
  arn: string;
  /** TopicArn as resolved (the Ref of a topic of the template, or an ARN it names). */
  topicArn: string;
  protocol: string;
  endpoint?: string;
}

/** An IAM policy document as the template has it, every intrinsic resolved to local names and ARNs. */
export interface PolicyDocument {
  Version?: string;
  Statement: PolicyStatement | PolicyStatement[];
}

export type PolicyStatement = Record<string, unknown>;

/** An IAM role of the template: its trust policy and every identity policy attached to it (inline, AWS::IAM::Policy). */
export interface PlannedRole {
  logicalId: string;
  name: string;
  arn: string;
  trustPolicy?: PolicyDocument;
  /** Inline Policies of the role and every AWS::IAM::Policy / ManagedPolicy naming it, resolved. */
  policies: { name: string; document: PolicyDocument }[];
  /** ManagedPolicyArns that are not the template's own (AWS managed policies): not known locally. */
  externalManagedPolicyArns: string[];
}

/**
 * A resource-based policy: a queue policy, a bucket policy, a function's permissions (AWS::Lambda::Permission, turned
 * into the statements Lambda keeps in the function's policy) or a KMS key policy. One per resource; several template
 * resources naming one resource are merged.
 */
export interface PlannedResourcePolicy {
  /** The template resources it came from. */
  logicalIds: string[];
  service: 'sqs' | 's3' | 'lambda' | 'kms' | 'dynamodb';
  resourceArn: string;
  document: PolicyDocument;
}

/** Everything IAM decides with: roles with their identity policies, and resource policies. */
export interface PlannedIam {
  roles: PlannedRole[];
  resourcePolicies: PlannedResourcePolicy[];
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
  topics: PlannedTopic[];
  subscriptions: PlannedSubscription[];
  iam: PlannedIam;
  /** Logical IDs skipped on purpose, with the reason. */
  ignored: { logicalId: string; type: string; reason: string }[];
  /**
   * What the local runtime does not create because it cannot and no job needs it (a team's other resources: a type
   * it does not know, a function on another runtime or without a bundled asset, and what needs those), with the reason;
   * an output naming one of them is left out, listed here as `Outputs.<name>`. One line of a run's log names them.
   */
  notEmulated: { logicalId: string; type: string; reason: string }[];
  outputs: Record<string, string>;
}

interface Identity {
  ref: string;
  attrs: Record<string, string>;
}

/** A plan with nothing in it yet: where planStack starts, and what a test builds on. */
export function emptyPlan(where: Pick<StackPlan, 'stackName' | 'region' | 'accountId'>): StackPlan {
  return {
    ...where,
    queues: [],
    tables: [],
    buckets: [],
    secrets: [],
    functions: [],
    layers: [],
    mappings: [],
    schedules: [],
    topics: [],
    subscriptions: [],
    iam: { roles: [], resourcePolicies: [] },
    ignored: [],
    notEmulated: [],
    outputs: {},
  };
}

/** Keeps a generated name within a service's character set and length, as CloudFormation's generated names do. */
function generatedName(stackName: string, logicalId: string, max: number, lower = false): string {
  let name = `${stackName}-${logicalId}`.replace(/[^A-Za-z0-9-]/g, '-');
  if (lower) name = name.toLowerCase();
  return name.slice(0, max).replace(/-+$/, '');
}

const str = (v: unknown, fallback?: string): string | undefined =>
  v === undefined || v === null ? fallback : String(v);

/**
 * Plans the local deployment of a template.
 * @throws UnsupportedResourceError naming every resource the runtime cannot emulate; TemplateError for a bad intrinsic.
 */
export function planStack(template: CloudFormationTemplate, options: PlanOptions): StackPlan {
  const { stackName, region, accountId } = options;
  const resources = template.Resources;

  refuseUnresolvable(template);
  const needs = jobNeeds(template);
  const notEmulated = notEmulatedResources(template, needs);
  const unsupported = Object.entries(resources)
    .filter(([id, r]) => !(r.Type in RESOURCE_TYPES) && !notEmulated.has(id))
    .map(([logicalId, r]) => ({ logicalId, type: r.Type, neededBy: needs.get(logicalId) || undefined }));
  if (unsupported.length > 0) throw new UnsupportedResourceError(unsupported);

  const { ctx, policyCtx, identity } = templateResolver(template, options);
  const included = Object.entries(resources).filter(
    ([id, r]) => (!r.Condition || ctx.conditions![r.Condition]) && !notEmulated.has(id),
  );

  const plan = emptyPlan({ stackName, region, accountId });
  for (const [logicalId, reason] of notEmulated)
    plan.notEmulated.push({ logicalId, type: resources[logicalId].Type, reason });
  refuseNameCollisions(included, (id, key) =>
    str(resolveValue(resources[id].Properties?.[key], ctx, `${id}.Properties.${key}`)),
  );
  const invokeConfigs: InvokeConfig[] = [];

  for (const [id, r] of included) {
    if (r.Type in IGNORED_TYPES) {
      // Not resolved here: alarms and dashboards may name attributes nothing local has. Policies are resolved below,
      // leniently, for the IAM authorizer.
      plan.ignored.push({ logicalId: id, type: r.Type, reason: IGNORED_TYPES[r.Type] });
      continue;
    }
    const me = identity(id);
    const props = (resolveValue(r.Properties ?? {}, ctx, `${id}.Properties`) ?? {}) as Record<string, unknown>;
    // AWS::Scheduler::ScheduleGroup has no planner: a name only; schedules carry their group.
    RESOURCE_PLANNERS[r.Type]?.plan?.({ id, r, me, props, plan, invokeConfigs });
  }

  for (const { functionName, config } of invokeConfigs) {
    const fn = plan.functions.find((f) => f.name === functionName);
    if (!fn)
      throw new TemplateError(
        `AWS::Lambda::EventInvokeConfig for ${functionName}: no such function in the template`,
        functionName,
      );
    fn.asyncInvokeConfig = config;
  }
  plan.iam = planIam(included, policyCtx, identity, { region, accountId });
  planOutputs(template, notEmulated, ctx, plan);
  return plan;
}

/**
 * How the template's intrinsics resolve locally: Ref and Fn::GetAtt through each resource's identity (made once, on
 * first use, by its type's planner), the pseudo parameters, parameter defaults and conditions. `policyCtx` is the
 * lenient one for policy documents.
 */
function templateResolver(
  template: CloudFormationTemplate,
  options: PlanOptions,
): { ctx: ResolveContext; policyCtx: ResolveContext; identity: (id: string) => Identity } {
  const { stackName, region, accountId } = options;
  const resources = template.Resources;
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
        throw new TemplateError(
          `Fn::GetAtt ${id}.${attr}: attribute not emulated for ${resources[id]?.Type}`,
          `${id}.${attr}`,
        );
      }
      return value;
    },
  };

  function identity(id: string): Identity {
    const known = identities.get(id);
    if (known) return known;
    const param = template.Parameters?.[id];
    // refuseUnresolvable has made sure every parameter has a Default.
    if (param) return { ref: String(param.Default), attrs: {} };
    const r = resources[id];
    if (!r)
      throw new TemplateError(
        `Template format error: Unresolved resource dependencies [${id}] in the Resources block of the template`,
        id,
      );
    if (resolving.has(id)) throw new TemplateError(`circular reference through ${id}`, id);
    resolving.add(id);
    try {
      const prop = (key: string): unknown => resolveValue(r.Properties?.[key], ctx, `${id}.Properties.${key}`);
      const arn = (service: string, resource: string) => `arn:aws:${service}:${region}:${accountId}:${resource}`;
      const made = (RESOURCE_PLANNERS[r.Type]?.identity ?? placeholderIdentity)({ id, prop, arn, ...options });
      identities.set(id, made);
      return made;
    } finally {
      resolving.delete(id);
    }
  }

  /**
   * For policy documents only: an attribute the local runtime has no value for (say, an alarm's ARN in a policy) gets
   * a placeholder ARN instead of stopping the run, since no local request can name it anyway. An unknown resource is
   * still an error: CloudFormation refuses it too.
   */
  const policyCtx: ResolveContext = {
    ...ctx,
    getAtt: (id, attr) => {
      const value = identity(id).attrs[attr];
      return value ?? `arn:aws:local:${region}:${accountId}:${id}/${attr}`;
    },
    // A grant on an imported ARN (Fn::ImportValue) or the like: no local resource has it, no local request matches it.
    unsupported: (fn, path) => `arn:aws:local:${region}:${accountId}:${fn.replace('Fn::', '')}/${path}`,
  };
  ctx.conditions = evaluateConditions(template, ctx);
  policyCtx.conditions = ctx.conditions;
  return { ctx, policyCtx, identity };
}

/** The template's outputs, resolved; one naming a resource left out, or an intrinsic not resolvable, is left out. */
function planOutputs(
  template: CloudFormationTemplate,
  notEmulated: Map<string, string>,
  ctx: ResolveContext,
  plan: StackPlan,
): void {
  for (const [name, output] of Object.entries(template.Outputs ?? {})) {
    const named = new Set<string>();
    referencesIn(output.Value, named);
    const missing = [...named].filter((id) => notEmulated.has(id));
    const intrinsic = unsupportedIntrinsicIn(output.Value);
    if (missing.length > 0 || intrinsic) {
      const reason =
        missing.length > 0
          ? `names ${missing.join(', ')}, not emulated`
          : `uses ${intrinsic}, which the local runtime cannot resolve`;
      plan.notEmulated.push({ logicalId: `Outputs.${name}`, type: 'Output', reason });
      continue;
    }
    plan.outputs[name] = String(resolveValue(output.Value, ctx, `Outputs.${name}.Value`));
  }
}

/** What a type's identity is made from: the resource's logical ID, its properties as resolved, the stack's place. */
interface IdentityInput extends PlanOptions {
  id: string;
  prop(key: string): unknown;
  arn(service: string, resource: string): string;
}

/** What a type's planner adds to the plan from: the resource, its identity and its resolved properties. */
interface PlanInput {
  id: string;
  r: TemplateResource;
  me: Identity;
  props: Record<string, unknown>;
  plan: StackPlan;
  /** EventInvokeConfigs, attached to their functions once every function is planned. */
  invokeConfigs: InvokeConfig[];
}

interface InvokeConfig {
  functionName: string;
  config: NonNullable<PlannedFunction['asyncInvokeConfig']>;
}

/** Per resource type: its identity (Ref and attributes), and what it adds to the plan; both optional. */
interface ResourcePlanner {
  identity?: (input: IdentityInput) => Identity;
  plan?: (input: PlanInput) => void;
}

/** Other ignored types: a stable placeholder, since nothing local consumes their identity. */
const placeholderIdentity = ({ id, stackName, arn }: IdentityInput): Identity => ({
  ref: `${stackName}-${id}`,
  attrs: { Arn: arn('local', id) },
});

const isTrue = (v: unknown): boolean => v === true || v === 'true';

/** A name given by `key`, else the one CloudFormation would generate. */
const nameOr = (input: IdentityInput, key: string, max: number, lower = false): string =>
  str(input.prop(key)) ?? generatedName(input.stackName, input.id, max, lower);

/** A queue's KmsMasterKeyId as the key's ARN (an ID and an alias are both allowed there). */
function kmsKeyArn(keyId: string | undefined, region: string, accountId: string): string | undefined {
  if (!keyId) return undefined;
  if (keyId.startsWith('arn:')) return keyId;
  return `arn:aws:kms:${region}:${accountId}:${keyId.startsWith('alias/') ? keyId : `key/${keyId}`}`;
}

const QUEUE_ATTRIBUTES = [
  'DelaySeconds',
  'MaximumMessageSize',
  'MessageRetentionPeriod',
  'ReceiveMessageWaitTimeSeconds',
  'VisibilityTimeout',
  'FifoQueue',
  'ContentBasedDeduplication',
  'DeduplicationScope',
  'FifoThroughputLimit',
  'SqsManagedSseEnabled',
];

const tableIdentity = (input: IdentityInput): Identity => {
  const name = nameOr(input, 'TableName', 255);
  const tableArn = input.arn('dynamodb', `table/${name}`);
  return { ref: name, attrs: { Arn: tableArn, StreamArn: `${tableArn}/stream/local`, TableId: name } };
};

/**
 * The one table of what planning does per resource type (an enforced or ignored type has an identity at most; its
 * IAM side is planIam's). A type missing here gets a placeholder identity and adds nothing.
 */
const RESOURCE_PLANNERS: Record<string, ResourcePlanner> = {
  'AWS::SQS::Queue': {
    identity: (input) => {
      const fifo = isTrue(input.prop('FifoQueue'));
      const name =
        str(input.prop('QueueName')) ??
        generatedName(input.stackName, input.id, fifo ? 75 : 80) + (fifo ? '.fifo' : '');
      const url = `${input.sqsEndpoint}/${input.accountId}/${name}`;
      return { ref: url, attrs: { Arn: input.arn('sqs', name), QueueName: name, QueueUrl: url } };
    },
    plan: ({ id, me, props, plan }) => {
      const attributes: Record<string, string> = {};
      for (const key of QUEUE_ATTRIBUTES) if (props[key] !== undefined) attributes[key] = String(props[key]);
      const redrive = props.RedrivePolicy as
        | { deadLetterTargetArn?: string; maxReceiveCount?: number }
        | string
        | undefined;
      const policy =
        typeof redrive === 'string'
          ? (JSON.parse(redrive) as { deadLetterTargetArn?: string; maxReceiveCount?: number })
          : redrive;
      if (policy)
        attributes.RedrivePolicy = JSON.stringify({
          deadLetterTargetArn: policy.deadLetterTargetArn,
          maxReceiveCount: Number(policy.maxReceiveCount),
        });
      plan.queues.push({
        logicalId: id,
        name: me.attrs.QueueName,
        url: me.ref,
        arn: me.attrs.Arn,
        attributes,
        deadLetterTargetArn: policy?.deadLetterTargetArn,
        maxReceiveCount: policy ? Number(policy.maxReceiveCount) : undefined,
        kmsKeyArn: kmsKeyArn(str(props.KmsMasterKeyId), plan.region, plan.accountId),
      });
    },
  },
  'AWS::DynamoDB::Table': {
    identity: tableIdentity,
    plan: ({ id, me, props, plan }) =>
      plan.tables.push({ logicalId: id, name: me.ref, arn: me.attrs.Arn, properties: props }),
  },
  'AWS::DynamoDB::GlobalTable': {
    identity: tableIdentity,
    plan: ({ id, me, props, plan }) =>
      plan.tables.push({
        logicalId: id,
        name: me.ref,
        arn: me.attrs.Arn,
        properties: props,
        replica: localReplica(props, plan.region),
      }),
  },
  'AWS::S3::Bucket': {
    identity: (input) => {
      const name = nameOr(input, 'BucketName', 63, true);
      const { region } = input;
      return {
        ref: name,
        attrs: {
          Arn: `arn:aws:s3:::${name}`,
          DomainName: `${name}.s3.amazonaws.com`,
          RegionalDomainName: `${name}.s3.${region}.amazonaws.com`,
          WebsiteURL: `http://${name}.s3-website-${region}.amazonaws.com`,
        },
      };
    },
    plan: ({ id, me, plan }) => plan.buckets.push({ logicalId: id, name: me.ref, arn: me.attrs.Arn }),
  },
  'AWS::SecretsManager::Secret': {
    identity: (input) => {
      // Real secret ARNs end in a random 6-character suffix; a fixed one keeps local ARNs stable across runs.
      const secretArn = input.arn('secretsmanager', `secret:${nameOr(input, 'Name', 256)}-local0`);
      return { ref: secretArn, attrs: { Id: secretArn, SecretArn: secretArn } };
    },
    plan: ({ id, me, props, plan }) =>
      plan.secrets.push({
        logicalId: id,
        name: str(props.Name) ?? me.ref.replace(/^.*:secret:(.*)-local0$/, '$1'),
        arn: me.ref,
        properties: props,
      }),
  },
  'AWS::Lambda::Function': {
    identity: (input) => {
      const name = nameOr(input, 'FunctionName', 64);
      return { ref: name, attrs: { Arn: input.arn('lambda', `function:${name}`) } };
    },
    plan: ({ id, r, me, props, plan }) => plan.functions.push(plannedFunction(id, r, me, props)),
  },
  'AWS::Lambda::EventInvokeConfig': {
    plan: ({ props, invokeConfigs }) => {
      const destinations = (props.DestinationConfig ?? {}) as {
        OnFailure?: { Destination?: string };
        OnSuccess?: { Destination?: string };
      };
      invokeConfigs.push({
        functionName: lambdaName(str(props.FunctionName)!),
        config: {
          maximumRetryAttempts:
            props.MaximumRetryAttempts === undefined ? undefined : Number(props.MaximumRetryAttempts),
          maximumEventAgeSeconds:
            props.MaximumEventAgeInSeconds === undefined ? undefined : Number(props.MaximumEventAgeInSeconds),
          onFailureArn: str(destinations.OnFailure?.Destination),
          onSuccessArn: str(destinations.OnSuccess?.Destination),
        },
      });
    },
  },
  'AWS::Lambda::LayerVersion': {
    identity: (input) => {
      const layerArn = input.arn('lambda', `layer:${nameOr(input, 'LayerName', 64)}:1`);
      return { ref: layerArn, attrs: { LayerVersionArn: layerArn } };
    },
    plan: ({ id, r, me, plan }) =>
      plan.layers.push({ logicalId: id, arn: me.ref, assetPath: str(r.Metadata?.['aws:asset:path']) }),
  },
  'AWS::Lambda::EventSourceMapping': {
    // Ref is the mapping's UUID; the local one is derived from the logical ID so it is stable across runs.
    identity: ({ id, arn }) => ({
      ref: `local-${id}`,
      attrs: { Id: `local-${id}`, EventSourceMappingArn: arn('lambda', `event-source-mapping:local-${id}`) },
    }),
    plan: ({ id, r, me, props, plan }) => plan.mappings.push(plannedMapping(id, r, me, props)),
  },
  'AWS::Scheduler::Schedule': {
    identity: (input) => {
      const name = nameOr(input, 'Name', 64);
      const group = str(input.prop('GroupName'), 'default')!;
      return { ref: name, attrs: { Arn: input.arn('scheduler', `schedule/${group}/${name}`) } };
    },
    plan: ({ id, me, props, plan }) => plan.schedules.push(plannedSchedule(id, me, props)),
  },
  'AWS::Scheduler::ScheduleGroup': {
    identity: (input) => {
      const name = nameOr(input, 'Name', 64);
      return { ref: name, attrs: { Arn: input.arn('scheduler', `schedule-group/${name}`) } };
    },
  },
  'AWS::IAM::Role': {
    identity: (input) => {
      const name = nameOr(input, 'RoleName', 64);
      return { ref: name, attrs: { Arn: `arn:aws:iam::${input.accountId}:role/${name}`, RoleId: `LOCAL${input.id}` } };
    },
  },
  'AWS::SNS::Topic': {
    identity: (input) => {
      // A generated FIFO topic name gets the .fifo suffix, as CloudFormation's does (a given name must carry it).
      const fifo = isTrue(input.prop('FifoTopic'));
      const name =
        str(input.prop('TopicName')) ??
        generatedName(input.stackName, input.id, fifo ? 251 : 256) + (fifo ? '.fifo' : '');
      const topicArn = input.arn('sns', name);
      return { ref: topicArn, attrs: { TopicArn: topicArn, TopicName: name } };
    },
    plan: ({ id, me, props, plan }) =>
      plan.topics.push({
        logicalId: id,
        name: me.attrs.TopicName,
        arn: me.ref,
        displayName: str(props.DisplayName),
        kmsMasterKeyId: str(props.KmsMasterKeyId),
        fifo: isTrue(props.FifoTopic),
      }),
  },
  'AWS::SNS::Subscription': {
    identity: ({ id, prop, stackName }) => {
      for (const key of ['TopicArn', 'Protocol']) {
        if (prop(key) === undefined)
          throw new TemplateError(
            `Properties validation failed for resource ${id} with message: #: required key [${key}] not found`,
            id,
          );
      }
      // Ref is the subscription's ARN: the topic's ARN and an ID SNS makes up; the local one is derived, so stable.
      const subscriptionArn = `${str(prop('TopicArn'))}:${stableUuid(`${stackName}/${id}`)}`;
      return { ref: subscriptionArn, attrs: { Arn: subscriptionArn } };
    },
    plan: ({ id, me, props, plan }) =>
      plan.subscriptions.push({
        logicalId: id,
        arn: me.ref,
        topicArn: str(props.TopicArn)!,
        protocol: str(props.Protocol)!,
        endpoint: str(props.Endpoint),
      }),
  },
  'AWS::IAM::ManagedPolicy': {
    identity: (input) => {
      const policyArn = `arn:aws:iam::${input.accountId}:policy/${nameOr(input, 'ManagedPolicyName', 128)}`;
      return { ref: policyArn, attrs: { PolicyArn: policyArn } };
    },
  },
  'AWS::KMS::Key': {
    identity: ({ id, arn }) => ({
      ref: `local-${id}`,
      attrs: { Arn: arn('kms', `key/local-${id}`), KeyId: `local-${id}` },
    }),
  },
  'AWS::Logs::LogGroup': {
    identity: (input) => {
      const name = str(input.prop('LogGroupName')) ?? `/local/${input.stackName}/${input.id}`;
      return { ref: name, attrs: { Arn: input.arn('logs', `log-group:${name}:*`) } };
    },
  },
};

function plannedFunction(
  id: string,
  r: TemplateResource,
  me: Identity,
  props: Record<string, unknown>,
): PlannedFunction {
  const code = (props.Code ?? {}) as { S3Key?: string };
  const vars = ((props.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {}) as Record<
    string,
    unknown
  >;
  return {
    logicalId: id,
    name: me.ref,
    arn: me.attrs.Arn,
    handler: str(props.Handler, 'index.handler')!,
    assetPath: str(r.Metadata?.['aws:asset:path']),
    s3Key: code.S3Key,
    environment: Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, String(v)])),
    timeoutSeconds: Number(props.Timeout ?? 3),
    memoryMb: Number(props.MemorySize ?? 128),
    reservedConcurrency:
      props.ReservedConcurrentExecutions === undefined ? undefined : Number(props.ReservedConcurrentExecutions),
    layerArns: ((props.Layers as unknown[] | undefined) ?? []).map((l) => String(l)),
    runtime: str(props.Runtime, 'nodejs22.x')!,
    architectures: (props.Architectures as string[] | undefined)?.map(String),
    roleArn: str(props.Role),
    deadLetterArn: str((props.DeadLetterConfig as { TargetArn?: string } | undefined)?.TargetArn),
    jobEntry: str(r.Metadata?.[JOB_ENTRY_METADATA]),
  };
}

/** @throws UnsupportedResourceError for a mapping whose source is not an SQS queue */
function plannedMapping(id: string, r: TemplateResource, me: Identity, props: Record<string, unknown>): PlannedMapping {
  const arnText = str(props.EventSourceArn) ?? '';
  if (!arnText.startsWith('arn:aws:sqs:')) {
    throw new UnsupportedResourceError([{ logicalId: id, type: `${r.Type} with a non-SQS source (${arnText})` }]);
  }
  return {
    logicalId: id,
    uuid: me.ref,
    functionName: lambdaName(str(props.FunctionName)!),
    eventSourceArn: arnText,
    batchSize: Number(props.BatchSize ?? 10),
    maximumBatchingWindowSeconds: Number(props.MaximumBatchingWindowInSeconds ?? 0),
    maximumConcurrency: (props.ScalingConfig as { MaximumConcurrency?: number } | undefined)?.MaximumConcurrency,
    reportBatchItemFailures: ((props.FunctionResponseTypes as string[] | undefined) ?? []).includes(
      'ReportBatchItemFailures',
    ),
    enabled: props.Enabled === undefined ? true : isTrue(props.Enabled),
  };
}

function plannedSchedule(id: string, me: Identity, props: Record<string, unknown>): PlannedSchedule {
  const target = (props.Target ?? {}) as {
    Arn?: string;
    Input?: string;
    RetryPolicy?: { MaximumRetryAttempts?: number; MaximumEventAgeInSeconds?: number };
    DeadLetterConfig?: { Arn?: string };
    RoleArn?: string;
  };
  return {
    logicalId: id,
    name: me.ref,
    arn: me.attrs.Arn,
    group: str(props.GroupName, 'default')!,
    expression: str(props.ScheduleExpression)!,
    timeZone: str(props.ScheduleExpressionTimezone, 'UTC')!,
    enabled: str(props.State, 'ENABLED') === 'ENABLED',
    targetArn: str(target.Arn)!,
    input:
      target.Input === undefined
        ? undefined
        : typeof target.Input === 'string'
          ? target.Input
          : JSON.stringify(target.Input),
    // Scheduler's documented defaults: 185 retries within 86400 s.
    maximumRetryAttempts: Number(target.RetryPolicy?.MaximumRetryAttempts ?? 185),
    maximumEventAgeSeconds: Number(target.RetryPolicy?.MaximumEventAgeInSeconds ?? 86400),
    deadLetterArn: target.DeadLetterConfig?.Arn,
    roleArn: str(target.RoleArn),
  };
}

// One key, written by the construct and read by the local tools and ops (lambda/core/constants.ts).
export { JOB_ENTRY_METADATA };

/** A function of a job: one with JOB_NAME in its template environment (both of a job's functions have it). */
const isJobFunction = (r: TemplateResource): boolean =>
  r.Type === 'AWS::Lambda::Function' &&
  (r.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables?.JOB_NAME !== undefined;

/**
 * Whose references say what a resource needs: the emulated types' and the unknown ones'. IAM and resource policies are
 * resolved leniently (a grant on something not emulated harms no local request), and the ignored types never are.
 */
const followsReferences = (type: string): boolean =>
  !(type in RESOURCE_TYPES) || RESOURCE_TYPES[type].treatment === 'emulated';

/** What invokes a function: a job's event source mappings, schedules and async settings are the job's, too. */
const TRIGGER_TYPES = new Set([
  'AWS::Lambda::EventSourceMapping',
  'AWS::Scheduler::Schedule',
  'AWS::Lambda::EventInvokeConfig',
]);

/**
 * What the stack's jobs need to run: their functions, what invokes them, and everything those name (queues, tables,
 * buckets, secrets, layers, roles, keys), transitively. Each needed resource maps to the one that names it first (a job
 * function: to "").
 */
function jobNeeds(template: CloudFormationTemplate): Map<string, string> {
  const resources = template.Resources;
  const refs = referenceMap(template);
  const needed = new Map<string, string>();
  const queue: string[] = [];
  for (const [id, r] of Object.entries(resources)) {
    if (isJobFunction(r)) {
      needed.set(id, '');
      queue.push(id);
    }
  }
  while (queue.length > 0) {
    while (queue.length > 0) {
      const id = queue.pop()!;
      if (!followsReferences(resources[id].Type)) continue;
      for (const ref of refs.get(id) ?? []) {
        if (resources[ref] && !needed.has(ref)) {
          needed.set(ref, id);
          queue.push(ref);
        }
      }
    }
    for (const [id, r] of Object.entries(resources)) {
      if (needed.has(id) || !TRIGGER_TYPES.has(r.Type)) continue;
      const fn = [...(refs.get(id) ?? [])].find(
        (ref) => needed.has(ref) && resources[ref]?.Type === 'AWS::Lambda::Function',
      );
      if (fn) {
        needed.set(id, fn);
        queue.push(id);
      }
    }
  }
  return needed;
}

/** Every resource's references (Ref, GetAtt, Sub) in its Properties. */
function referenceMap(template: CloudFormationTemplate): Map<string, Set<string>> {
  return new Map(
    Object.entries(template.Resources).map(([id, r]) => {
      const out = new Set<string>();
      referencesIn(r.Properties, out);
      return [id, out];
    }),
  );
}

/** The reason a resource of a type missing from RESOURCE_TYPES is not emulated (its type says it all). */
export const UNKNOWN_TYPE_REASON = 'a type the local runtime does not emulate';

/** Why the local runtime cannot create a resource, judged on the template alone; undefined when it can. */
function cannotEmulate(r: TemplateResource, resources: CloudFormationTemplate['Resources']): string | undefined {
  if (!(r.Type in RESOURCE_TYPES)) return UNKNOWN_TYPE_REASON;
  const p = r.Properties ?? {};
  // Only an emulated resource's properties are resolved (exactly; IAM's leniently, the ignored ones' not at all).
  const intrinsic = RESOURCE_TYPES[r.Type].treatment === 'emulated' ? unsupportedIntrinsicIn(p) : undefined;
  if (intrinsic) return `uses ${intrinsic}, which the local runtime cannot resolve`;
  const typeOf = (value: unknown): string | undefined => {
    const named = new Set<string>();
    referencesIn(value, named);
    return [...named].map((id) => resources[id]?.Type).find((t) => t !== undefined);
  };
  switch (r.Type) {
    case 'AWS::Lambda::Function': {
      const code = (p.Code ?? {}) as Record<string, unknown>;
      if (typeof p.Runtime === 'string' && !/^nodejs\d+\.x$/.test(p.Runtime))
        return `runtime ${p.Runtime}: only Node.js functions run locally`;
      if (p.PackageType === 'Image' || code.ImageUri !== undefined)
        return 'a container image: only zip assets run locally';
      if (code.ZipFile !== undefined && code.S3Key === undefined)
        return 'inline code (Code.ZipFile): only bundled assets run locally';
      return undefined;
    }
    case 'AWS::Lambda::EventSourceMapping': {
      const source = p.EventSourceArn;
      const type = typeOf(source);
      if (type ? type !== 'AWS::SQS::Queue' : typeof source === 'string' && !source.startsWith('arn:aws:sqs:'))
        return `source ${type ?? String(source)}: only SQS sources are emulated`;
      return undefined;
    }
    case 'AWS::Scheduler::Schedule': {
      const target = (p.Target as { Arn?: unknown } | undefined)?.Arn;
      const type = typeOf(target);
      if (type ? type !== 'AWS::Lambda::Function' : typeof target === 'string' && !/^arn:aws:lambda:/.test(target))
        return 'its target is not a Lambda function: only Lambda targets are emulated';
      return undefined;
    }
    default:
      return undefined;
  }
}

/**
 * The resources the local runtime leaves out, with why: those it cannot create (cannotEmulate) that no job needs, and,
 * transitively, the ones that name them (a team's API function whose environment names its database). A job's needs
 * are not in it: a job that needs something the runtime cannot create still stops the run, naming it.
 */
function notEmulatedResources(template: CloudFormationTemplate, needs: Map<string, string>): Map<string, string> {
  const resources = template.Resources;
  const out = new Map<string, string>();
  for (const [id, r] of Object.entries(resources)) {
    if (needs.has(id)) continue;
    const reason = cannotEmulate(r, resources);
    if (reason) out.set(id, reason);
  }
  const refs = referenceMap(template);
  for (let changed = out.size > 0; changed; ) {
    changed = false;
    for (const [id, r] of Object.entries(resources)) {
      if (out.has(id) || needs.has(id) || !followsReferences(r.Type)) continue;
      const missing = [...(refs.get(id) ?? [])].find((ref) => out.has(ref));
      if (missing) {
        out.set(id, `names ${missing}, which is not emulated`);
        changed = true;
      }
    }
  }
  return out;
}

/** A GlobalTable's replica in `region` (else its first, the one a local run stands for); undefined without replicas. */
function localReplica(props: Record<string, unknown>, region: string): Record<string, unknown> | undefined {
  const replicas = (props.Replicas as Record<string, unknown>[] | undefined) ?? [];
  return replicas.find((r) => r.Region === region) ?? replicas[0];
}

/** A name-based (version 5) UUID: the same name gives the same UUID on every run. */
function stableUuid(name: string): string {
  // RFC 4122's URL namespace; any fixed namespace would do, this one is the standard's own.
  const namespace = Buffer.from('6ba7b8119dad11d180b400c04fd430c8', 'hex');
  const hash = createHash('sha1').update(namespace).update(name).digest();
  hash[6] = (hash[6] & 0x0f) | 0x50;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A function's name from a name, a full ARN or a qualified ARN, as FunctionName properties may give it. */
function lambdaName(ref: string): string {
  return ref.replace(/^arn:[^:]+:lambda:[^:]+:\d+:function:([^:]+).*$/, '$1');
}

/** The property that holds a type's physical name, and what makes it unique (its scope on AWS). */
const PHYSICAL_NAMES: Record<string, { key: string; scope: string }> = {
  'AWS::SQS::Queue': { key: 'QueueName', scope: 'account and region' },
  'AWS::DynamoDB::Table': { key: 'TableName', scope: 'account and region' },
  'AWS::DynamoDB::GlobalTable': { key: 'TableName', scope: 'account and region' },
  'AWS::S3::Bucket': { key: 'BucketName', scope: 'all of AWS' },
  'AWS::SecretsManager::Secret': { key: 'Name', scope: 'account and region' },
  'AWS::Lambda::Function': { key: 'FunctionName', scope: 'account and region' },
  'AWS::Scheduler::Schedule': { key: 'Name', scope: 'schedule group' },
  'AWS::Scheduler::ScheduleGroup': { key: 'Name', scope: 'account and region' },
  'AWS::IAM::Role': { key: 'RoleName', scope: 'account' },
  'AWS::IAM::ManagedPolicy': { key: 'ManagedPolicyName', scope: 'account' },
  'AWS::Logs::LogGroup': { key: 'LogGroupName', scope: 'account and region' },
  'AWS::SNS::Topic': { key: 'TopicName', scope: 'account and region' },
};

/**
 * CloudFormation creates resources one by one and the second of two with one physical name fails with AlreadyExists,
 * rolling the whole stack back; refuse it before anything is created, with CloudFormation's own words.
 * @throws TemplateError naming both resources
 */
function refuseNameCollisions(
  resources: [string, TemplateResource][],
  nameOf: (id: string, key: string) => string | undefined,
): void {
  const seen = new Map<string, string>();
  for (const [id, r] of resources) {
    const rule = PHYSICAL_NAMES[r.Type];
    if (!rule) continue;
    const name = nameOf(id, rule.key);
    if (name === undefined) continue;
    const group = r.Type === 'AWS::Scheduler::Schedule' ? `${nameOf(id, 'GroupName') ?? 'default'}/` : '';
    const key = `${r.Type === 'AWS::DynamoDB::GlobalTable' ? 'AWS::DynamoDB::Table' : r.Type} ${group}${name}`;
    const other = seen.get(key);
    if (other) {
      throw new TemplateError(
        `${id}: Resource of type '${r.Type}' with identifier '${name}' already exists. (${other} in the same stack has that ${rule.key}; names are unique per ${rule.scope})`,
        id,
      );
    }
    seen.set(key, id);
  }
}

const statementsOf = (doc: PolicyDocument | undefined): PolicyStatement[] =>
  doc === undefined ? [] : Array.isArray(doc.Statement) ? doc.Statement : [doc.Statement];

/**
 * The IAM side of the template, resolved: every role with its identity policies (inline, AWS::IAM::Policy and the
 * template's managed policies), and every resource policy (queue, bucket, function permissions, key policies).
 */
function planIam(
  included: [string, TemplateResource][],
  ctx: ResolveContext,
  identity: (id: string) => { ref: string; attrs: Record<string, string> },
  where: { region: string; accountId: string },
): PlannedIam {
  const iam: IamInProgress = {
    roles: new Map(),
    roleByName: new Map(),
    managedArnsOf: new Map(),
    managed: new Map(),
    resourcePolicies: new Map(),
  };
  const props = (id: string, r: TemplateResource) =>
    (resolveValue(r.Properties ?? {}, ctx, `${id}.Properties`) ?? {}) as Record<string, unknown>;

  for (const [id, r] of included) if (r.Type === 'AWS::IAM::Role') planRole(iam, id, props(id, r), identity(id));
  for (const [id, r] of included) IAM_PLANNERS[r.Type]?.({ iam, id, r, p: props(id, r), identity, ...where });

  for (const role of iam.roles.values()) {
    for (const arn of iam.managedArnsOf.get(role.arn) ?? []) {
      const own = iam.managed.get(arn);
      if (own) role.policies.push({ name: own.name, document: own.document });
      else role.externalManagedPolicyArns.push(arn);
    }
  }
  for (const policy of iam.managed.values()) {
    for (const name of policy.roles) {
      const role = roleNamed(iam, name);
      if (role && !role.policies.some((p) => p.document === policy.document))
        role.policies.push({ name: policy.name, document: policy.document });
    }
  }
  return { roles: [...iam.roles.values()], resourcePolicies: [...iam.resourcePolicies.values()] };
}

/** planIam's state while it reads the template: roles by ARN and name, managed policies, resource policies by ARN. */
interface IamInProgress {
  roles: Map<string, PlannedRole>;
  roleByName: Map<string, PlannedRole>;
  /** A role's ManagedPolicyArns, resolved once every managed policy of the template is known. */
  managedArnsOf: Map<string, string[]>;
  managed: Map<string, { name: string; document: PolicyDocument; roles: string[] }>;
  resourcePolicies: Map<string, PlannedResourcePolicy>;
}

function planRole(iam: IamInProgress, id: string, p: Record<string, unknown>, me: Identity): void {
  const role: PlannedRole = {
    logicalId: id,
    name: me.ref,
    arn: me.attrs.Arn,
    trustPolicy: p.AssumeRolePolicyDocument as PolicyDocument | undefined,
    policies: ((p.Policies as { PolicyName: string; PolicyDocument: PolicyDocument }[] | undefined) ?? []).map((x) => ({
      name: String(x.PolicyName),
      document: x.PolicyDocument,
    })),
    externalManagedPolicyArns: [],
  };
  iam.managedArnsOf.set(role.arn, ((p.ManagedPolicyArns as unknown[] | undefined) ?? []).map(String));
  iam.roles.set(role.arn, role);
  iam.roleByName.set(role.name, role);
}

/** A role by its name or its ARN (with or without a path), as Roles properties may give it. */
const roleNamed = (iam: IamInProgress, name: string) =>
  iam.roleByName.get(name) ?? iam.roleByName.get(name.replace(/^arn:aws:iam::\d+:role\/(?:.*\/)?/, ''));

/** Statements of one resource's policy, merged with any other resource policy of the same resource. */
function addResourcePolicy(
  iam: IamInProgress,
  service: PlannedResourcePolicy['service'],
  resourceArn: string,
  logicalId: string,
  statements: PolicyStatement[],
): void {
  const known = iam.resourcePolicies.get(resourceArn);
  if (known) {
    known.logicalIds.push(logicalId);
    known.document = { Version: '2012-10-17', Statement: [...statementsOf(known.document), ...statements] };
  } else {
    iam.resourcePolicies.set(resourceArn, {
      logicalIds: [logicalId],
      service,
      resourceArn,
      document: { Version: '2012-10-17', Statement: statements },
    });
  }
}

/** What one resource adds to the IAM side: its resolved properties `p`, and the plan's place. */
interface IamInput {
  iam: IamInProgress;
  id: string;
  r: TemplateResource;
  p: Record<string, unknown>;
  identity: (id: string) => Identity;
  region: string;
  accountId: string;
}

/** Per resource type, the policies it adds (roles are read first, by planRole, so policies can name them). */
const IAM_PLANNERS: Record<string, (input: IamInput) => void> = {
  'AWS::IAM::Policy': ({ iam, id, p }) => {
    for (const name of ((p.Roles as unknown[] | undefined) ?? []).map(String)) {
      roleNamed(iam, name)?.policies.push({
        name: String(p.PolicyName ?? id),
        document: p.PolicyDocument as PolicyDocument,
      });
    }
  },
  'AWS::IAM::ManagedPolicy': ({ iam, id, p, identity }) => {
    iam.managed.set(identity(id).ref, {
      name: id,
      document: p.PolicyDocument as PolicyDocument,
      roles: ((p.Roles as unknown[] | undefined) ?? []).map(String),
    });
  },
  'AWS::SQS::QueuePolicy': ({ iam, id, p, region, accountId }) => {
    for (const url of ((p.Queues as unknown[] | undefined) ?? []).map(String)) {
      const name = url.split('/').pop()!;
      addResourcePolicy(
        iam,
        'sqs',
        `arn:aws:sqs:${region}:${accountId}:${name}`,
        id,
        statementsOf(p.PolicyDocument as PolicyDocument),
      );
    }
  },
  'AWS::S3::BucketPolicy': ({ iam, id, p }) =>
    addResourcePolicy(
      iam,
      's3',
      `arn:aws:s3:::${String(p.Bucket)}`,
      id,
      statementsOf(p.PolicyDocument as PolicyDocument),
    ),
  'AWS::KMS::Key': ({ iam, id, p, identity }) =>
    addResourcePolicy(iam, 'kms', identity(id).attrs.Arn, id, statementsOf(p.KeyPolicy as PolicyDocument | undefined)),
  'AWS::DynamoDB::Table': tableResourcePolicy,
  'AWS::DynamoDB::GlobalTable': tableResourcePolicy,
  'AWS::Lambda::Permission': ({ iam, id, p, region, accountId }) => {
    const fnArn = `arn:aws:lambda:${region}:${accountId}:function:${lambdaName(String(p.FunctionName))}`;
    addResourcePolicy(iam, 'lambda', fnArn, id, [permissionStatement(id, p, fnArn)]);
  },
};

/** A table's resource-based policy: the Table's own, a GlobalTable's on each replica (the local one applies). */
function tableResourcePolicy({ iam, id, r, p, identity, region }: IamInput): void {
  const owner = r.Type === 'AWS::DynamoDB::Table' ? p : localReplica(p, region);
  const document = (owner?.ResourcePolicy as { PolicyDocument?: PolicyDocument } | undefined)?.PolicyDocument;
  if (document) addResourcePolicy(iam, 'dynamodb', identity(id).attrs.Arn, id, statementsOf(document));
}

/** Lambda keeps each AddPermission as one statement of the function's resource policy, in this shape. */
function permissionStatement(id: string, p: Record<string, unknown>, fnArn: string): PolicyStatement {
  const principal = String(p.Principal);
  const condition: Record<string, Record<string, string>> = {};
  if (p.SourceArn !== undefined) condition.ArnLike = { 'AWS:SourceArn': String(p.SourceArn) };
  if (p.SourceAccount !== undefined) condition.StringEquals = { 'AWS:SourceAccount': String(p.SourceAccount) };
  if (p.PrincipalOrgID !== undefined)
    condition.StringEquals = { ...condition.StringEquals, 'aws:PrincipalOrgID': String(p.PrincipalOrgID) };
  return {
    Sid: id,
    Effect: 'Allow',
    Principal: principal.endsWith('.amazonaws.com')
      ? { Service: principal }
      : { AWS: /^\d{12}$/.test(principal) ? `arn:aws:iam::${principal}:root` : principal },
    Action: String(p.Action),
    Resource: fnArn,
    ...(Object.keys(condition).length > 0 ? { Condition: condition } : {}),
  };
}

/** Every resource or parameter a value names: Ref, Fn::GetAtt and the ${Name} and ${Name.Attr} of Fn::Sub. */
function referencesIn(value: unknown, out: Set<string>, subVariables: Set<string> = new Set()): void {
  if (Array.isArray(value)) {
    for (const v of value) referencesIn(v, out, subVariables);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 1) {
    const [fn, arg] = entries[0];
    if (fn === 'Ref' && typeof arg === 'string') {
      if (!arg.startsWith('AWS::') && !subVariables.has(arg)) out.add(arg);
      return;
    }
    if (fn === 'Fn::GetAtt') {
      const target = Array.isArray(arg) ? arg[0] : typeof arg === 'string' ? arg.split('.')[0] : undefined;
      if (typeof target === 'string') out.add(target);
      if (Array.isArray(arg)) referencesIn(arg.slice(1), out, subVariables);
      return;
    }
    if (fn === 'Fn::Sub') {
      const [text, map] = Array.isArray(arg)
        ? [arg[0], arg[1] as Record<string, unknown> | undefined]
        : [arg, undefined];
      const local = new Set([...subVariables, ...Object.keys(map ?? {})]);
      if (typeof text === 'string') {
        for (const m of text.matchAll(/\$\{([^!}][^}]*)\}/g)) {
          const name = m[1].split('.')[0];
          if (!name.startsWith('AWS::') && !local.has(name)) out.add(name);
        }
      }
      if (map) referencesIn(map, out, subVariables);
      return;
    }
  }
  for (const [, v] of entries) referencesIn(v, out, subVariables);
}

/**
 * What CloudFormation refuses before it creates anything, in its words: a parameter without a value (the local
 * runtime takes no overrides, so every parameter needs a Default), and a Ref, GetAtt, Sub or DependsOn naming nothing
 * the template has, in any resource (the ignored ones too: CloudFormation checks them all) or output.
 * @throws TemplateError
 */
function refuseUnresolvable(template: CloudFormationTemplate): void {
  const missingValues = Object.entries(template.Parameters ?? {})
    .filter(([, p]) => p.Default === undefined)
    .map(([id]) => id);
  if (missingValues.length > 0) {
    throw new TemplateError(
      `Parameters: [${missingValues.join(', ')}] must have values (the local runtime deploys without parameter overrides: give each a Default)`,
      missingValues.join(','),
    );
  }
  const named = new Set<string>();
  for (const r of Object.values(template.Resources)) {
    referencesIn(r.Properties, named);
    for (const d of r.DependsOn === undefined ? [] : Array.isArray(r.DependsOn) ? r.DependsOn : [r.DependsOn])
      named.add(String(d));
  }
  referencesIn(template.Outputs, named);
  referencesIn(template.Conditions, named);
  const known = new Set([...Object.keys(template.Resources), ...Object.keys(template.Parameters ?? {})]);
  const unresolved = [...named].filter((n) => !known.has(n)).sort();
  if (unresolved.length > 0) {
    throw new TemplateError(
      `Template format error: Unresolved resource dependencies [${unresolved.join(', ')}] in the Resources block of the template`,
      unresolved.join(','),
    );
  }
}
