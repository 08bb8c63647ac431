// Compute building block: the one place the shared Lambda settings live (runtime, architecture, bundling, logs, role).
import { relative, resolve as resolvePath, sep } from 'node:path';
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { type BundlingOptions, LogLevel, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { LAMBDA_MAX_TIMEOUT_SECONDS } from '../lambda/core/constants';
import { acknowledge } from './nag';
import { SDK_SLIM_MODULE, SDK_SLIM_PACKAGES, sdkSlimLayer } from './sdk-layer';
import { assertNoProblems } from './props-error';
import { JOB_ENTRY_METADATA, JOB_ENTRY_MODULE } from '../lambda/core/constants';

/**
 * The runtime every function uses. Node.js 22 is the project's chosen LTS line (the handlers and their tests target
 * it); moving to a newer line is a deliberate, tested change made here, once.
 */
export const LAMBDA_RUNTIME = lambda.Runtime.NODEJS_22_X;
/** esbuild's target, kept in step with LAMBDA_RUNTIME. */
export const BUNDLE_TARGET = 'node22';
/** Lambda's limit on a function name. */
export const MAX_FUNCTION_NAME_LENGTH = 64;

export { JOB_ENTRY_MODULE };
// One key, written by the construct and read by the local tools and ops (lambda/core/constants.ts).
export { JOB_ENTRY_METADATA };

/** A job entry as its functions' Metadata names it: relative to process.cwd() (the CDK app's folder), `/` separators. */
export function jobEntryMetadata(entry: string): string {
  return relative(process.cwd(), resolvePath(entry)).split(sep).join('/');
}

/** The retention periods CloudWatch Logs accepts (excluding "never expire", which we do not allow). */
export const VALID_LOG_RETENTION_DAYS: readonly number[] = Object.values(logs.RetentionDays)
  .filter((v): v is number => typeof v === 'number' && v !== logs.RetentionDays.INFINITE)
  .sort((a, b) => a - b);

export interface PacedFunctionProps {
  /** Absolute path of the handler's entry file (exports `handler`): TypeScript in the repository, JavaScript in the package. */
  readonly entry: string;
  /** What the function is for, shown in the console. */
  readonly description: string;
  /** An explicit name, needed when the function must be granted access to itself; at most 64 characters. */
  readonly functionName?: string;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
  /** Retention of the function's own log group; one of VALID_LOG_RETENTION_DAYS. */
  readonly logRetentionDays: number;
  /** Keep the log group when the stack is deleted. */
  readonly retainLogs: boolean;
  readonly environment: Record<string, string>;
  /** Where asynchronous invocations that fail every retry are sent. */
  readonly deadLetterQueue?: sqs.IQueue;
  readonly reservedConcurrentExecutions?: number;
  /**
   * Absolute path of the job's module (exports `job = defineJob(...)`), bundled into this function as the module the
   * job loader requires (lambda/handlers/jobLoader.ts), so the bundle holds that job's code alone. The function's
   * resource also names it in its Metadata (JOB_ENTRY_METADATA), for the local tools. @default no job: the loader
   * finds none in the bundle
   */
  readonly jobEntry?: string;
  /**
   * Constants the handler's code tests (esbuild `define`), so a bundle leaves out the features its job does not use,
   * e.g. `{ PACED_PER_KEY_RATE: false }`. @default none: every feature is in
   */
  readonly buildFlags?: Record<string, boolean>;
}

/** Checks props against the limits Lambda and CloudWatch Logs enforce, before anything is built. */
export function validatePacedFunctionProps(props: PacedFunctionProps): string[] {
  const problems: string[] = [];
  if (props.functionName !== undefined) {
    if (props.functionName.length > MAX_FUNCTION_NAME_LENGTH) {
      problems.push(
        `functionName "${props.functionName}" is ${props.functionName.length} characters; Lambda allows at most ${MAX_FUNCTION_NAME_LENGTH}`,
      );
    }
    if (!/^[A-Za-z0-9_-]+$/.test(props.functionName)) {
      problems.push(`functionName "${props.functionName}" may hold only letters, digits, hyphens and underscores`);
    }
  }
  if (
    !Number.isInteger(props.timeoutSeconds) ||
    props.timeoutSeconds < 1 ||
    props.timeoutSeconds > LAMBDA_MAX_TIMEOUT_SECONDS
  ) {
    problems.push(
      `timeoutSeconds must be an integer from 1 to ${LAMBDA_MAX_TIMEOUT_SECONDS} (got ${props.timeoutSeconds})`,
    );
  }
  if (!Number.isInteger(props.memoryMb) || props.memoryMb < 128 || props.memoryMb > 10240) {
    problems.push(`memoryMb must be an integer from 128 to 10240 (got ${props.memoryMb})`);
  }
  if (!VALID_LOG_RETENTION_DAYS.includes(props.logRetentionDays)) {
    problems.push(
      `logRetentionDays must be one of ${VALID_LOG_RETENTION_DAYS.join(', ')} (got ${props.logRetentionDays})`,
    );
  }
  if (
    props.reservedConcurrentExecutions !== undefined &&
    (!Number.isInteger(props.reservedConcurrentExecutions) || props.reservedConcurrentExecutions < 1)
  ) {
    problems.push(
      `reservedConcurrentExecutions must be a positive integer (got ${props.reservedConcurrentExecutions})`,
    );
  }
  return problems;
}

/** esbuild cannot run locally; NodejsFunction would otherwise fall back to Docker, which this project never uses. */
export class LocalBundlingError extends Error {
  constructor(
    public readonly construct: string,
    options?: ErrorOptions,
  ) {
    super(`${construct}: esbuild is not installed; run "npm ci" (bundling is local only, never in Docker)`, options);
    this.name = 'LocalBundlingError';
  }
}

function assertLocalEsbuild(path: string): void {
  try {
    require.resolve('esbuild');
  } catch (error) {
    throw new LocalBundlingError(path, { cause: error });
  }
}

/** The constants esbuild replaces in the handler's code: whether a job is bundled, its file, the build flags. */
function esbuildDefine(props: PacedFunctionProps, jobEntry: string | undefined): Record<string, string> | undefined {
  if (jobEntry === undefined && props.buildFlags === undefined) return undefined;
  const job =
    jobEntry === undefined
      ? {}
      : { PACED_JOB_ENTRY: 'true', PACED_JOB_ENTRY_FILE: JSON.stringify(jobEntryMetadata(jobEntry)) };
  const flags = Object.entries(props.buildFlags ?? {}).map(([flag, on]) => [flag, JSON.stringify(on)]);
  return { ...job, ...Object.fromEntries(flags) };
}

/**
 * How esbuild bundles a function, locally: minified CommonJS with source maps, the AWS SDK left to the runtime and
 * the sdk-slim layer, the job's own module (if any) in place of the loader's, and the job's build flags.
 */
function bundlingOptions(props: PacedFunctionProps, jobEntry: string | undefined): BundlingOptions {
  const define = esbuildDefine(props, jobEntry);
  return {
    minify: true,
    sourceMap: true,
    sourcesContent: false,
    target: BUNDLE_TARGET,
    format: OutputFormat.CJS,
    // The Node.js 22 runtime ships AWS SDK v3; bundling it would only grow the package. The hot-path clients come
    // from the sdk-slim layer instead (lib/sdk-layer.ts).
    externalModules: ['@aws-sdk/*', SDK_SLIM_MODULE],
    ...(define !== undefined ? { define } : {}),
    esbuildArgs: {
      ...Object.fromEntries(SDK_SLIM_PACKAGES.map((p) => [`--alias:${p}`, SDK_SLIM_MODULE])),
      // The job loader's `require(JOB_ENTRY_MODULE)` is the job's own module; esbuild takes an absolute path here.
      ...(jobEntry !== undefined ? { [`--alias:${JOB_ENTRY_MODULE}`]: jobEntry } : {}),
      // Legal comments (the libraries' `@preserve` notes) go to index.js.LEGAL.txt beside the bundle, not into it.
      '--legal-comments': 'external',
    },
    forceDockerBundling: false,
    logLevel: LogLevel.ERROR,
  };
}

/**
 * A NodejsFunction with the project's shared settings: Node.js 22 on arm64, bundled locally by esbuild (minified,
 * with source maps; the DynamoDB and SQS clients from the stack's sdk-slim layer, the rest of the AWS SDK left to the
 * runtime), active tracing, an explicit log group with a set retention, and its own role that starts with nothing but
 * the right to write that log group.
 */
export class PacedFunction extends NodejsFunction {
  /** The function's own execution role; grant through it. */
  public readonly executionRole: iam.Role;
  /** The explicit log group (also reachable as `logGroup`, typed there as ILogGroup). */
  public readonly functionLogGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: PacedFunctionProps) {
    const path = `${scope.node.path}/${id}`;
    assertNoProblems(`PacedFunction ${path}`, validatePacedFunctionProps(props));
    assertLocalEsbuild(path);
    const jobEntry = props.jobEntry === undefined ? undefined : resolvePath(props.jobEntry);

    // Built in the parent scope because `this` does not exist before super(); the ids keep them beside the function.
    const role = new iam.Role(scope, `${id}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Execution role of ${path}`,
    });
    const logGroup = new logs.LogGroup(scope, `${id}Logs`, {
      retention: props.logRetentionDays as logs.RetentionDays,
      removalPolicy: props.retainLogs ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });

    super(scope, id, {
      entry: props.entry,
      handler: 'handler',
      description: props.description,
      functionName: props.functionName,
      runtime: LAMBDA_RUNTIME,
      architecture: lambda.Architecture.ARM_64,
      timeout: Duration.seconds(props.timeoutSeconds),
      memorySize: props.memoryMb,
      role,
      logGroup,
      // Active tracing is set on the resource instead (traceActively), with its X-Ray statement in a policy of its own.
      deadLetterQueue: props.deadLetterQueue,
      reservedConcurrentExecutions: props.reservedConcurrentExecutions,
      // Both handlers re-enter themselves on purpose and bound it: the producer through continuations (maxPagesPerRun),
      // the consumer through deferral re-publishes (the message's attempt counter). Lambda's loop detection would
      // otherwise drop a legitimately deferred message after about 16 hops.
      recursiveLoop: lambda.RecursiveLoop.ALLOW,
      layers: [sdkSlimLayer(scope, LAMBDA_RUNTIME, BUNDLE_TARGET)],
      environment: {
        ...props.environment,
        // Source maps are emitted below; Node applies them to stack traces only with this flag.
        NODE_OPTIONS: '--enable-source-maps',
      },
      bundling: bundlingOptions(props, jobEntry),
    });
    this.executionRole = role;
    this.functionLogGroup = logGroup;
    if (jobEntry !== undefined)
      (this.node.defaultChild as lambda.CfnFunction).addMetadata(JOB_ENTRY_METADATA, jobEntryMetadata(jobEntry));
    logGroup.grantWrite(role);

    this.acknowledgePinnedRuntime();
    this.traceActively();
  }

  private acknowledgePinnedRuntime(): void {
    const runtimeReason =
      `${LAMBDA_RUNTIME.name} is pinned on purpose: a supported Lambda runtime (Node.js 22 LTS, maintained until April 2027) ` +
      'that the handlers are built and tested for; moving to a newer line is a deliberate one-line change in LAMBDA_RUNTIME, ' +
      'made with the handlers re-tested, never a silent bump on a CDK upgrade.';
    acknowledge(this, 'AwsSolutions-L1', runtimeReason);
    acknowledge(this, 'Serverless-LambdaLatestVersion', runtimeReason);
  }

  /**
   * Active tracing's one statement on "*" in a policy of its own, acknowledged there: an acknowledgment on the role
   * would also excuse any later statement on "*" in its default policy. (The L2's `tracing` option would put the
   * statement in the default policy.)
   */
  private traceActively(): void {
    (this.node.defaultChild as lambda.CfnFunction).tracingConfig = { mode: lambda.Tracing.ACTIVE };
    const tracing = new iam.Policy(this.executionRole, 'Tracing', {
      statements: [
        new iam.PolicyStatement({ actions: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'], resources: ['*'] }),
      ],
    });
    this.executionRole.attachInlinePolicy(tracing);
    this.node.addDependency(tracing);
    acknowledge(
      tracing,
      'AwsSolutions-IAM5[Resource::*]',
      'Active tracing: X-Ray PutTraceSegments and PutTelemetryRecords do not support resource-level permissions, so Lambda needs them on "*".',
    );
  }
}
