// Deploy parity, part three: starts the embedded services and deploys a planned template onto them (queues, tables,
// buckets, secrets, functions from their bundled assets, event source mappings, schedules; the SNS topics and
// subscriptions are served read-only). The whole local stack.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  CreateQueueCommand,
  SendMessageCommand,
  SetQueueAttributesCommand,
  SQSClient,
  type SendMessageCommandInput,
} from '@aws-sdk/client-sqs';
import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  DynamoDBClient,
  ResourceInUseException,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import {
  type ChannelForward,
  ensurePortFree,
  LOCAL_CREDENTIALS,
  type ObservedRequest,
  type RunningServer,
  type RunningSqs,
  startDynamoDb,
  startS3,
  startSqs,
} from './servers';
import { type GatewayService, StackIam, type IamDenial } from './iamWiring';
import { checkEnvironment, checkFunctionSettings, checkQueueVisibility, LambdaRuleError } from './lambdaRules';
import { LocalSecretsManager } from './secretsManager';
import { LambdaRuntime, type RuntimeOptions } from './lambdaRuntime';
import { startLambdaApi } from './lambdaApi';
import { SqsEventSourceMapping } from './eventSourceMapping';
import type { MetricSample } from './metricsTap';
import { LocalScheduler } from './scheduler';
import { startSchedulerApi } from './schedulerApi';
import { startSnsApi } from './snsApi';
import {
  type PlannedFunction,
  type PlannedLayer,
  type PlannedMapping,
  type PlannedSecret,
  type PlannedTable,
  planStack,
  type StackPlan,
} from './plan';
import { waitFor } from './waitFor';
import type { CloudFormationTemplate } from './template';

export class ProvisioningError extends Error {
  constructor(
    message: string,
    public readonly logicalId: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ProvisioningError';
  }
}

export interface Ports {
  dynamodb?: number;
  sqs?: number;
  s3?: number;
  secretsManager?: number;
  lambda?: number;
  scheduler?: number;
  sns?: number;
}

export interface LocalStackOptions {
  template: CloudFormationTemplate;
  stackName: string;
  /** The cloud assembly folder holding asset.<hash>/ folders. */
  assemblyDir: string;
  /** @default "us-east-1" */
  region?: string;
  /** @default "000000000000" */
  accountId?: string;
  /** Keeps DynamoDB data (dynalite LevelDB) here; in memory when absent. */
  dataDir?: string;
  ports?: Ports;
  /** Function output and runtime notes. */
  log: (source: string, line: string) => void;
  /** Metrics the emulated services publish themselves, as CloudWatch would store them: the mappings' event counts. */
  onMetric?: (sample: MetricSample) => void;
  /** Lets the caller change a function's environment before it starts (e.g. point a job at the local provider). */
  environmentOverride?: (fn: PlannedFunction, env: Record<string, string>) => Record<string, string>;
  /**
   * Sees every request the DynamoDB, SQS and S3 servers receive. DynamoDB and S3 run in processes of their own, so
   * theirs arrive a few milliseconds after the client had its answer; SQS's before it.
   */
  onRequest?: (service: 'dynamodb' | 'sqs' | 's3', request: ObservedRequest) => void;
  /**
   * Every DynamoDB read and write is answered with its ConsumedCapacity, and each observed DynamoDB request carries the
   * answer (`responseBody`): the bench counts capacity units per request so. @default false
   */
  returnConsumedCapacity?: boolean;
  /** Fixes generated secret values (tests); random otherwise. */
  secretValue?: (secret: PlannedSecret) => string;
  /** Local retry delays for asynchronous invocations. @default [1000, 2000] */
  asyncRetryDelaysMs?: number[];
  /** Fault injection in the function runtime (the chaos harness); see RuntimeOptions.killAfterMs. */
  killAfterMs?: (functionName: string) => number | undefined;
  /** Fault injection in the function runtime at the caller's moment; see RuntimeOptions.onInvoke. */
  onInvoke?: RuntimeOptions['onInvoke'];
  /**
   * Authorize every request as AWS would, from the template's IAM (`--no-iam` turns it off; denials are then only
   * recorded as what AWS would have denied). @default true
   */
  iam?: boolean;
  /**
   * The share of accepted asynchronous events Lambda delivers twice (its queue is at-least-once). `npm start` uses
   * 0.01 unless told otherwise; the library's default is 0, so a test or a measurement gets duplicates only when it
   * asks for them (a random duplicate would make a count-exact test flaky, and a bench figure noisy). @default 0
   */
  asyncDuplicateRate?: number;
}

export interface Endpoints {
  dynamodb: string;
  sqs: string;
  s3: string;
  secretsManager: string;
  lambda: string;
  scheduler: string;
  /** Not behind an IAM gateway (local/snsApi.ts says why): the SNS API itself. */
  sns: string;
}

/** Finds a function's bundled code in the cloud assembly, the way `cdk deploy` finds what to upload. */
/**
 * A layer's content folder inside the cloud assembly, as Lambda mounts it at /opt: its `nodejs/node_modules` is on the
 * function's module path.
 * @throws ProvisioningError when the template has no such layer or its asset is missing
 */
export function layerDirectory(assemblyDir: string, layers: PlannedLayer[], arn: string, fn: PlannedFunction): string {
  const layer = layers.find((l) => l.arn === arn);
  const dir = layer?.assetPath ? join(assemblyDir, layer.assetPath) : undefined;
  if (!dir || !existsSync(dir)) {
    throw new ProvisioningError(
      `function ${fn.logicalId} (${fn.name}): layer ${arn} ${layer ? `has no asset in ${assemblyDir}` : 'is not in the template'}; run \`npx cdk synth\``,
      layer?.logicalId ?? fn.logicalId,
    );
  }
  return dir;
}

export function assetDirectory(assemblyDir: string, fn: PlannedFunction): string {
  const candidates: string[] = [];
  if (fn.assetPath) candidates.push(join(assemblyDir, fn.assetPath));
  const hash = fn.s3Key?.replace(/\.zip$/, '');
  if (hash) {
    candidates.push(join(assemblyDir, `asset.${hash}`));
    for (const file of existsSync(assemblyDir)
      ? readdirSync(assemblyDir).filter((f) => f.endsWith('.assets.json'))
      : []) {
      const manifest = JSON.parse(readFileSync(join(assemblyDir, file), 'utf8')) as {
        files?: Record<string, { source?: { path?: string } }>;
      };
      const path = manifest.files?.[hash]?.source?.path;
      if (path) candidates.push(join(assemblyDir, path));
    }
  }
  const found = candidates.find((c) => existsSync(c));
  if (!found) {
    throw new ProvisioningError(
      `function ${fn.logicalId} (${fn.name}): bundled asset not found in ${assemblyDir} (looked for ${candidates.join(', ') || 'aws:asset:path metadata or Code.S3Key'}); run \`npx cdk synth\``,
      fn.logicalId,
    );
  }
  return found;
}

/** A GlobalTable's capacity setting: fixed units, or an autoscaled one's minimum (what it starts at). */
type CapacitySettings = {
  ReadCapacityUnits?: number;
  ReadCapacityAutoScalingSettings?: { MinCapacity?: number };
  WriteCapacityAutoScalingSettings?: { MinCapacity?: number };
};
const unitsOf = (settings: CapacitySettings | undefined, read: boolean): number | undefined =>
  read
    ? (settings?.ReadCapacityUnits ?? settings?.ReadCapacityAutoScalingSettings?.MinCapacity)
    : settings?.WriteCapacityAutoScalingSettings?.MinCapacity;

/**
 * The CreateTable request for a planned table. A GlobalTable (TableV2) is one local table: its key schema, attributes
 * and indexes are the resource's, its provisioned capacity its write settings and its local replica's read settings
 * (fixed units, or an autoscaled minimum); 5 units where the template names none.
 */
export function createTableInput(table: PlannedTable): CreateTableCommandInput {
  type Index = {
    IndexName: string;
    KeySchema: unknown;
    Projection: unknown;
    ProvisionedThroughput?: unknown;
    WriteProvisionedThroughputSettings?: CapacitySettings;
  };
  const p = table.properties as {
    KeySchema: CreateTableCommandInput['KeySchema'];
    AttributeDefinitions: CreateTableCommandInput['AttributeDefinitions'];
    BillingMode?: string;
    ProvisionedThroughput?: { ReadCapacityUnits: number; WriteCapacityUnits: number };
    WriteProvisionedThroughputSettings?: CapacitySettings;
    GlobalSecondaryIndexes?: Index[];
    LocalSecondaryIndexes?: CreateTableCommandInput['LocalSecondaryIndexes'];
  };
  const replica = table.replica as
    | {
        ReadProvisionedThroughputSettings?: CapacitySettings;
        GlobalSecondaryIndexes?: { IndexName: string; ReadProvisionedThroughputSettings?: CapacitySettings }[];
      }
    | undefined;
  // CloudFormation's default is PROVISIONED, which a Table without capacity could not be; a GlobalTable's capacity is
  // its write settings.
  const provisioned =
    p.BillingMode === 'PROVISIONED' ||
    (p.BillingMode === undefined && (p.ProvisionedThroughput ?? p.WriteProvisionedThroughputSettings) !== undefined);
  const globalThroughput = (write?: CapacitySettings, read?: CapacitySettings) => ({
    ReadCapacityUnits: unitsOf(read, true) ?? 5,
    WriteCapacityUnits: unitsOf(write, false) ?? 5,
  });
  const throughput = (t: unknown, global: () => { ReadCapacityUnits: number; WriteCapacityUnits: number }) =>
    provisioned
      ? ((t ?? (replica ? global() : { ReadCapacityUnits: 5, WriteCapacityUnits: 5 })) as {
          ReadCapacityUnits: number;
          WriteCapacityUnits: number;
        })
      : undefined;
  return {
    TableName: table.name,
    KeySchema: p.KeySchema,
    AttributeDefinitions: p.AttributeDefinitions,
    BillingMode: provisioned ? 'PROVISIONED' : 'PAY_PER_REQUEST',
    ProvisionedThroughput: throughput(p.ProvisionedThroughput, () =>
      globalThroughput(p.WriteProvisionedThroughputSettings, replica?.ReadProvisionedThroughputSettings),
    ),
    GlobalSecondaryIndexes: p.GlobalSecondaryIndexes?.map((g) => ({
      IndexName: g.IndexName,
      KeySchema: g.KeySchema as CreateTableCommandInput['KeySchema'],
      Projection: g.Projection as { ProjectionType: 'ALL' },
      ProvisionedThroughput: throughput(g.ProvisionedThroughput, () =>
        globalThroughput(
          g.WriteProvisionedThroughputSettings,
          replica?.GlobalSecondaryIndexes?.find((r) => r.IndexName === g.IndexName)?.ReadProvisionedThroughputSettings,
        ),
      ),
    })),
    LocalSecondaryIndexes: p.LocalSecondaryIndexes,
  };
}

/** A secret's value as Secrets Manager would create it: the literal, or generated per GenerateSecretString. */
export function generateSecretValue(props: Record<string, unknown>): string {
  if (typeof props.SecretString === 'string') return props.SecretString;
  const g = (props.GenerateSecretString ?? {}) as {
    PasswordLength?: number;
    ExcludeCharacters?: string;
    ExcludePunctuation?: boolean;
    SecretStringTemplate?: string;
    GenerateStringKey?: string;
  };
  let alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  if (!g.ExcludePunctuation) alphabet += '!#$%&()*+,-.:;<=>?@[]^_{|}~';
  alphabet = [...alphabet].filter((c) => !(g.ExcludeCharacters ?? '').includes(c)).join('');
  const length = g.PasswordLength ?? 32;
  const value = [...randomBytes(length)].map((b) => alphabet[b % alphabet.length]).join('');
  if (g.SecretStringTemplate && g.GenerateStringKey) {
    return JSON.stringify({ ...(JSON.parse(g.SecretStringTemplate) as object), [g.GenerateStringKey]: value });
  }
  return value;
}

/** Runs a Lambda API rule; its refusal stops provisioning as a ProvisioningError naming the resource. */
function refuseAsLambda(logicalId: string, check: () => void): void {
  try {
    check();
  } catch (error) {
    if (error instanceof LambdaRuleError) throw new ProvisioningError(error.message, logicalId, { cause: error });
    throw error;
  }
}

/** A function's variables with local queue URLs written as AWS's (https://sqs.<region>.amazonaws.com/...): as long. */
function awsShapedEnvironment(
  variables: Record<string, string>,
  sqsEndpoint: string,
  region: string,
): Record<string, string> {
  return Object.fromEntries(
    Object.entries(variables).map(([k, v]) => [
      k,
      v.split(`${sqsEndpoint}/`).join(`https://sqs.${region}.amazonaws.com/`),
    ]),
  );
}

export class LocalStack {
  public readonly runtime: LambdaRuntime;
  public readonly scheduler: LocalScheduler;
  public readonly secrets = new LocalSecretsManager();
  public readonly mappings: SqsEventSourceMapping[] = [];
  public readonly region: string;
  public plan!: StackPlan;
  public endpoints!: Endpoints;
  private readonly servers: RunningServer[] = [];
  private sqsClient!: SQSClient;
  private readonly roleClients = new Map<string, SQSClient>();
  private started = false;
  /** IAM as the stack enforces it: per-role credentials, the gateways in front of the servers, the decisions. */
  public iam!: StackIam;

  constructor(private readonly options: LocalStackOptions) {
    this.region = options.region ?? 'us-east-1';
    this.runtime = new LambdaRuntime({
      log: (fn, line) => options.log(fn, line),
      asyncRetryDelaysMs: options.asyncRetryDelaysMs,
      asyncDuplicateRate: options.asyncDuplicateRate ?? 0,
      killAfterMs: options.killAfterMs,
      onInvoke: options.onInvoke,
      onAsyncFailure: (fn, event, error, info) => {
        options.log(
          'lambda',
          `${fn}: asynchronous invocation failed after ${info.attempts} attempts (${info.condition}): ${error.message}`,
        );
        this.asyncFailed(fn, event, error, info).catch((e: Error) =>
          options.log('lambda', `${fn}: could not hand the failed event on: ${e.message}`),
        );
      },
    });
    this.scheduler = new LocalScheduler({
      log: (line) => options.log('scheduler', line),
      deliver: async (targetArn, input, schedule) => {
        // Scheduler assumes the schedule's role and invokes a Lambda target asynchronously: delivery succeeds once
        // Lambda has accepted the event, and fails (then retries, then the DLQ) when the role may not invoke it.
        await this.iam.requireAssume({
          service: 'scheduler.amazonaws.com',
          roleArn: schedule.roleArn,
          sourceArn: schedule.arn,
        });
        await this.iam.require({
          roleArn: schedule.roleArn,
          sessionName: schedule.name,
          action: 'lambda:InvokeFunction',
          resource: this.runtime.get(targetArn).spec.arn,
          sourceArn: schedule.arn,
        });
        this.runtime.get(targetArn).invokeAsync(JSON.parse(input));
      },
      deadLetter: async (queueArn, body, attributes, schedule) => {
        await this.sqsAs(schedule.roleArn, schedule.name).send(
          new SendMessageCommand({
            QueueUrl: this.queueUrl(queueArn),
            MessageBody: body,
            MessageAttributes: Object.fromEntries(
              Object.entries(attributes).map(([k, v]) => [k, { DataType: 'String', StringValue: v }]),
            ),
          }),
        );
      },
    });
  }

  /** AWS SDK client settings for the local services (credentials that s3rver accepts, the region). */
  clientConfig(service: keyof Endpoints): {
    endpoint: string;
    region: string;
    credentials: typeof LOCAL_CREDENTIALS;
    forcePathStyle?: boolean;
  } {
    return {
      endpoint: this.endpoints[service],
      region: this.region,
      credentials: LOCAL_CREDENTIALS,
      ...(service === 's3' ? { forcePathStyle: true } : {}),
    };
  }

  sqs(): SQSClient {
    return (this.sqsClient ??= new SQSClient(this.clientConfig('sqs')));
  }

  /** An SQS client acting with a role, as AWS's own services do for the stack (the event source, Scheduler, a DLQ). */
  sqsAs(roleArn: string | undefined, sessionName: string): SQSClient {
    const key = `${roleArn}/${sessionName}`;
    let client = this.roleClients.get(key);
    if (!client) {
      client = new SQSClient({
        ...this.clientConfig('sqs'),
        credentials: this.iam.credentialsFor(roleArn, sessionName),
      });
      this.roleClients.set(key, client);
    }
    return client;
  }

  /**
   * Where Lambda sends an asynchronous event that failed every attempt: the function's DLQ (DeadLetterConfig) and its
   * on-failure destination (EventInvokeConfig), each written with the function's own role, as Lambda does.
   */
  private async asyncFailed(
    name: string,
    event: unknown,
    error: Error,
    info: { requestId: string; attempts: number; condition: string },
  ): Promise<void> {
    const fn = this.plan.functions.find((f) => f.name === name);
    if (!fn) return;
    const sqs = this.sqsAs(fn.roleArn, fn.name);
    const errorType = (error as { errorType?: string }).errorType ?? error.name;
    // Lambda hands on the handler's own message, not the local runtime's prefixed one.
    const errorMessage = (error as { errorMessage?: string }).errorMessage ?? error.message;
    /** Sends to an SQS target; any other kind of target is not emulated, and the log says so. */
    const toQueue = async (what: string, arn: string, message: Omit<SendMessageCommandInput, 'QueueUrl'>) => {
      if (!arn.startsWith('arn:aws:sqs:')) {
        this.options.log('lambda', `${name}: ${what} ${arn} is not an SQS queue; only SQS targets are emulated`);
        return;
      }
      await sqs.send(new SendMessageCommand({ QueueUrl: this.queueUrl(arn), ...message }));
    };
    if (fn.deadLetterArn) {
      // Lambda's DLQ message: the event as the body, the request ID and the error as message attributes.
      await toQueue('dead-letter target', fn.deadLetterArn, {
        MessageBody: JSON.stringify(event),
        MessageAttributes: {
          RequestID: { DataType: 'String', StringValue: info.requestId },
          ErrorCode: { DataType: 'Number', StringValue: '200' },
          ErrorMessage: { DataType: 'String', StringValue: errorMessage.slice(0, 1024) },
        },
      });
    }
    const destination = fn.asyncInvokeConfig?.onFailureArn;
    if (destination) {
      // The invocation record Lambda sends to a destination.
      const record = {
        version: '1.0',
        timestamp: new Date().toISOString(),
        requestContext: {
          requestId: info.requestId,
          functionArn: `${fn.arn}:$LATEST`,
          condition: info.condition,
          approximateInvokeCount: info.attempts,
        },
        requestPayload: event,
        responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
        responsePayload: { errorType, errorMessage },
      };
      await toQueue('on-failure destination', destination, { MessageBody: JSON.stringify(record) });
    }
  }

  /** Requests AWS would have denied (with --no-iam: would have), in order. */
  denials(): IamDenial[] {
    return this.iam?.denials() ?? [];
  }

  /** @throws ProvisioningError for an ARN that is not a queue of this stack. */
  queueUrl(arn: string): string {
    const q = this.plan.queues.find((x) => x.arn === arn);
    if (!q) throw new ProvisioningError(`no queue with ARN ${arn} in the local stack`, arn);
    return q.url;
  }

  /** The environment every function gets on top of its template variables. */
  baseEnvironment(fn: PlannedFunction): Record<string, string> {
    // The function's own role session: every request it makes is authorized against its execution role.
    const credentials = this.iam.credentialsFor(fn.roleArn, fn.name);
    return {
      AWS_REGION: this.region,
      AWS_DEFAULT_REGION: this.region,
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      ...(credentials.sessionToken ? { AWS_SESSION_TOKEN: credentials.sessionToken } : {}),
      AWS_ENDPOINT_URL_DYNAMODB: this.endpoints.dynamodb,
      AWS_ENDPOINT_URL_SQS: this.endpoints.sqs,
      AWS_ENDPOINT_URL_S3: this.endpoints.s3,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: this.endpoints.secretsManager,
      AWS_ENDPOINT_URL_LAMBDA: this.endpoints.lambda,
      AWS_ENDPOINT_URL_SCHEDULER: this.endpoints.scheduler,
      AWS_LAMBDA_FUNCTION_NAME: fn.name,
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(fn.memoryMb),
      AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${fn.name}`,
      LAMBDA_TASK_ROOT: '/var/task',
      TZ: 'UTC',
      // The SDK's notice about Node 20 support would otherwise print in every execution environment.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    };
  }

  /** Starts the services and deploys the template. */
  async start(): Promise<void> {
    try {
      const { dynamodb, sqs, s3 } = await this.startDataServers();
      const { secrets, lambda, scheduler, sns } = await this.startApiServers();
      const gateways = await this.startIam(
        {
          dynamodb: dynamodb.endpoint,
          sqs: sqs.endpoint,
          s3: s3.endpoint,
          secretsManager: secrets.endpoint,
          lambda: lambda.endpoint,
          scheduler: scheduler.endpoint,
        },
        { dynamodb: dynamodb.forward },
      );
      sqs.advertise(gateways.sqs.port);
      this.endpoints = {
        dynamodb: gateways.dynamodb.endpoint,
        sqs: gateways.sqs.endpoint,
        s3: gateways.s3.endpoint,
        secretsManager: gateways.secretsManager.endpoint,
        lambda: gateways.lambda.endpoint,
        scheduler: gateways.scheduler.endpoint,
        sns: sns.endpoint,
      };
      this.started = true;
      this.plan = planStack(this.options.template, {
        stackName: this.options.stackName,
        region: this.region,
        accountId: this.options.accountId ?? '000000000000',
        sqsEndpoint: this.endpoints.sqs,
      });
      this.iam.usePlan(this.plan);
      await this.provision();
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  /**
   * DynamoDB, SQS and S3, on free ports. dynalite and s3rver each run in a process of their own: on a machine of two
   * cores, in this one they took a fifth of its time, and every request waited behind the gateways, the event sources
   * and the other servers (on AWS a table is another machine). SQS stays here: the fair-queue emulation and the depth
   * patches work on its queues in place.
   */
  private async startDataServers(): Promise<{ dynamodb: RunningServer; sqs: RunningSqs; s3: RunningServer }> {
    const o = this.options;
    const observe = (service: 'dynamodb' | 'sqs' | 's3') =>
      o.onRequest ? (r: ObservedRequest) => o.onRequest!(service, r) : undefined;
    const starting = await Promise.allSettled([
      startDynamoDb({
        path: o.dataDir,
        onRequest: observe('dynamodb'),
        childProcess: true,
        returnConsumedCapacity: o.returnConsumedCapacity,
      }),
      startSqs({ region: this.region, accountId: o.accountId ?? '000000000000', onRequest: observe('sqs') }),
      startS3({ onRequest: observe('s3'), childProcess: true }),
    ]);
    // Whatever did start is closed by stop() when another failed (a server process would outlive the stack).
    for (const r of starting) if (r.status === 'fulfilled') this.servers.push(r.value);
    const failed = starting.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const [dynamodb, sqs, s3] = starting.map((r) => (r as PromiseFulfilledResult<RunningServer>).value) as [
      RunningServer,
      RunningSqs,
      RunningServer,
    ];
    return { dynamodb, sqs, s3 };
  }

  /** The APIs this process serves itself: Secrets Manager, Lambda, Scheduler (on free ports) and SNS. */
  private async startApiServers(): Promise<Record<'secrets' | 'lambda' | 'scheduler' | 'sns', RunningServer>> {
    const secrets = await this.secrets.start(0);
    this.servers.push(secrets);
    const lambda = await startLambdaApi(
      {
        runtime: this.runtime,
        mappings: () => this.mappings,
        functionArn: (name) => this.runtime.get(name).spec.arn,
      },
      0,
    );
    this.servers.push(lambda);
    const scheduler = await startSchedulerApi(this.scheduler, 0);
    this.servers.push(scheduler);
    // Read-only, for operators: it takes the port asked for itself, as no gateway stands in front of it.
    const snsPort = this.options.ports?.sns;
    if (snsPort) await ensurePortFree(snsPort, 'SNS');
    const sns = await startSnsApi({ plan: () => this.plan }, snsPort ?? 0);
    this.servers.push(sns);
    return { secrets, lambda, scheduler, sns };
  }

  /**
   * IAM as the stack enforces it, and its gateways in front of the servers: they take the ports asked for, and are the
   * endpoints every client gets.
   */
  private async startIam(
    backends: Record<GatewayService, string>,
    channels: Partial<Record<GatewayService, ChannelForward>>,
  ): Promise<Record<GatewayService, RunningServer>> {
    const o = this.options;
    this.iam = new StackIam({
      accountId: o.accountId ?? '000000000000',
      region: this.region,
      enforce: o.iam !== false,
      log: (line) => o.log('iam', line),
    });
    const gateways = await this.iam.startGateways(backends, o.ports ?? {}, channels);
    this.servers.push(...Object.values(gateways));
    return gateways;
  }

  private async provision(): Promise<void> {
    const plan = this.plan;
    await this.provisionQueues();

    const ddb = new DynamoDBClient(this.clientConfig('dynamodb'));
    await Promise.all(plan.tables.map((t) => this.provisionTable(ddb, t)));
    ddb.destroy();

    const s3 = new S3Client(this.clientConfig('s3'));
    await Promise.all(plan.buckets.map((b) => s3.send(new CreateBucketCommand({ Bucket: b.name }))));
    s3.destroy();

    for (const s of plan.secrets) {
      this.secrets.add({
        name: s.name,
        arn: s.arn,
        value: this.options.secretValue?.(s) ?? generateSecretValue(s.properties),
      });
    }

    const leftOut = new Set(plan.functions.filter((fn) => !this.provisionFunction(fn)));
    plan.functions = plan.functions.filter((fn) => !leftOut.has(fn));
    for (const m of plan.mappings) this.provisionMapping(m);

    for (const s of plan.schedules) {
      if (!/^arn:aws:lambda:/.test(s.targetArn)) {
        throw new ProvisioningError(
          `schedule ${s.logicalId}: target ${s.targetArn} is not a Lambda function; only Lambda targets are emulated`,
          s.logicalId,
        );
      }
      this.runtime.get(s.targetArn);
      this.scheduler.add(s);
    }
  }

  private async provisionQueues(): Promise<void> {
    const plan = this.plan;
    const sqs = this.sqs();
    // Every queue first, then the redrive policies: a policy may name a DLQ declared later in the template. The
    // resources of a kind are independent of each other, so each kind is created at once (as CloudFormation does).
    for (const q of plan.queues.filter((x) => x.attributes.RedrivePolicy)) {
      if (!plan.queues.some((x) => x.arn === q.deadLetterTargetArn)) {
        throw new ProvisioningError(
          `queue ${q.logicalId}: its DLQ ${q.deadLetterTargetArn} is not in the template`,
          q.logicalId,
        );
      }
    }
    await Promise.all(
      plan.queues.map((q) => {
        const attributes = Object.fromEntries(Object.entries(q.attributes).filter(([k]) => k !== 'RedrivePolicy'));
        return sqs.send(new CreateQueueCommand({ QueueName: q.name, Attributes: attributes }));
      }),
    );
    await Promise.all(
      plan.queues
        .filter((x) => x.attributes.RedrivePolicy)
        .map((q) =>
          sqs.send(
            new SetQueueAttributesCommand({
              QueueUrl: q.url,
              Attributes: { RedrivePolicy: q.attributes.RedrivePolicy },
            }),
          ),
        ),
    );
  }

  /** Adds a function to the runtime; false when it is left out (a team's function no job needs, its code elsewhere). */
  private provisionFunction(fn: PlannedFunction): boolean {
    const plan = this.plan;
    // What Lambda's CreateFunction refuses, with its words: the template's own variables (before the runtime's), with
    // queue URLs as long as AWS's, since the 4 KB limit is measured on what AWS resolves.
    refuseAsLambda(fn.logicalId, () => {
      const label = `function ${fn.logicalId} (${fn.name})`;
      checkFunctionSettings(label, {
        timeoutSeconds: fn.timeoutSeconds,
        memorySize: fn.memoryMb,
        reservedConcurrency: fn.reservedConcurrency,
        handler: fn.handler,
      });
      checkEnvironment(label, awsShapedEnvironment(fn.environment, this.endpoints.sqs, this.region));
    });
    let codeDir: string;
    try {
      codeDir = assetDirectory(this.options.assemblyDir, fn);
    } catch (error) {
      if (!(error instanceof ProvisioningError) || !this.mayLeaveOut(fn)) throw error;
      // A team's function no job needs and nothing invokes (say, code in its own bucket): one line, not a failure.
      plan.notEmulated.push({
        logicalId: fn.logicalId,
        type: 'AWS::Lambda::Function',
        reason: 'its code is not a bundled asset in the cloud assembly',
      });
      return false;
    }
    const layerDirs = (fn.layerArns ?? []).map((arn) => layerDirectory(this.options.assemblyDir, plan.layers, arn, fn));
    let environment = { ...fn.environment, ...this.baseEnvironment(fn) };
    if (this.options.environmentOverride) environment = this.options.environmentOverride(fn, environment);
    this.runtime.add({
      name: fn.name,
      arn: fn.arn,
      handler: fn.handler,
      codeDir,
      layerDirs,
      environment,
      timeoutSeconds: fn.timeoutSeconds,
      memoryMb: fn.memoryMb,
      reservedConcurrency: fn.reservedConcurrency,
      runtime: fn.runtime,
      architecture: fn.architectures?.[0],
      maximumRetryAttempts: fn.asyncInvokeConfig?.maximumRetryAttempts,
      maximumEventAgeSeconds: fn.asyncInvokeConfig?.maximumEventAgeSeconds,
    });
    return true;
  }

  private provisionMapping(m: PlannedMapping): void {
    const plan = this.plan;
    const fn = this.runtime.get(m.functionName);
    const queue = plan.queues.find((q) => q.arn === m.eventSourceArn);
    if (!queue)
      throw new ProvisioningError(
        `event source mapping ${m.logicalId}: queue ${m.eventSourceArn} is not in the template`,
        m.logicalId,
      );
    // CreateEventSourceMapping refuses a function that may outlive its message's visibility (SQS's default is 30 s).
    refuseAsLambda(m.logicalId, () =>
      checkQueueVisibility(
        `event source mapping ${m.logicalId} (${queue.name} -> ${fn.spec.name})`,
        queue.attributes.VisibilityTimeout === undefined ? undefined : Number(queue.attributes.VisibilityTimeout),
        fn.spec.timeoutSeconds,
      ),
    );
    const role = plan.functions.find((f) => f.name === fn.spec.name)?.roleArn;
    this.mappings.push(
      new SqsEventSourceMapping(
        {
          uuid: m.uuid,
          functionName: fn.spec.name,
          queueUrl: queue.url,
          queueArn: queue.arn,
          batchSize: m.batchSize,
          maximumBatchingWindowSeconds: m.maximumBatchingWindowSeconds,
          maximumConcurrency: m.maximumConcurrency,
          reportBatchItemFailures: m.reportBatchItemFailures,
          enabled: m.enabled,
          region: this.region,
        },
        {
          // The event source polls, deletes and releases with the function's execution role, as on AWS.
          sqs: this.sqsAs(role, fn.spec.name),
          invoke: (event) => fn.invoke(event),
          functionConcurrency: fn.concurrencyLimit,
          log: (line) => this.options.log('esm', line),
          onMetric: this.options.onMetric,
        },
      ),
    );
  }

  /** A function that is no job's and that no mapping, schedule or async setting of the template invokes. */
  private mayLeaveOut(fn: PlannedFunction): boolean {
    const plan = this.plan;
    return (
      fn.environment.JOB_NAME === undefined &&
      !plan.mappings.some((m) => m.functionName === fn.name) &&
      !plan.schedules.some((s) => s.targetArn === fn.arn) &&
      fn.asyncInvokeConfig === undefined
    );
  }

  /** Creates one table (or finds it kept in the data directory), waits until it is ACTIVE, and applies its TTL. */
  private async provisionTable(ddb: DynamoDBClient, t: PlannedTable): Promise<void> {
    try {
      await ddb.send(new CreateTableCommand(createTableInput(t)));
    } catch (error) {
      // With --data-dir the table survives from an earlier run; its data is the point.
      if (!(error instanceof ResourceInUseException)) {
        throw new ProvisioningError(`table ${t.logicalId} (${t.name}): ${(error as Error).message}`, t.logicalId, {
          cause: error,
        });
      }
    }
    // A new table is CREATING until dynalite's next turn; CloudFormation, too, finishes a table once it is ACTIVE. A
    // request for it before then is refused (ResourceNotFoundException), which a quick client over the gateway's
    // channel to dynalite can be.
    await waitFor(
      `table ${t.name} to be ACTIVE`,
      async () => (await ddb.send(new DescribeTableCommand({ TableName: t.name }))).Table?.TableStatus === 'ACTIVE',
      { intervalMs: 5 },
    );
    const ttl = t.properties.TimeToLiveSpecification as { AttributeName?: string; Enabled?: boolean } | undefined;
    if (ttl?.Enabled && ttl.AttributeName) {
      try {
        await ddb.send(
          new UpdateTimeToLiveCommand({
            TableName: t.name,
            TimeToLiveSpecification: { AttributeName: ttl.AttributeName, Enabled: true },
          }),
        );
      } catch (error) {
        // dynalite has no UpdateTimeToLive and never expires items; say so rather than pretend.
        this.options.log(
          'provision',
          `table ${t.name}: TTL on ${ttl.AttributeName} not applied locally (dynalite does not emulate TTL: ${(error as Error).name})`,
        );
      }
    }
  }

  /**
   * Loads every consumer's code up to its effective concurrency, and one execution environment per producer; at most
   * `perFunction` environments of each, when given (a run of a few records never uses ten at once, and each one is a
   * Node process loading its bundle).
   */
  async prewarm(perFunction = Number.POSITIVE_INFINITY): Promise<void> {
    const counts = new Map<string, number>();
    for (const m of this.mappings) counts.set(m.config.functionName, m.concurrency);
    for (const s of this.plan.schedules) {
      const name = this.runtime.get(s.targetArn).spec.name;
      counts.set(name, Math.max(1, counts.get(name) ?? 0));
    }
    for (const [name, n] of counts) counts.set(name, Math.min(n, perFunction));
    await this.runtime.prewarm(counts);
  }

  /** Starts the event source mappings that are enabled in the template. */
  startConsumers(): void {
    for (const m of this.mappings) if (m.config.enabled) m.start();
  }

  async stop(): Promise<void> {
    await this.scheduler.stop();
    await Promise.all(this.mappings.map((m) => m.stop()));
    await this.runtime.close();
    this.sqsClient?.destroy();
    for (const client of this.roleClients.values()) client.destroy();
    if (this.started || this.servers.length) {
      await Promise.allSettled(this.servers.splice(0).map((s) => s.close()));
    }
  }
}
