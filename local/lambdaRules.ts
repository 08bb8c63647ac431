// Provisioning -> what Lambda's API refuses before anything runs: the checks CreateFunction and
// CreateEventSourceMapping make on a planned function or mapping, with AWS's own messages, so a template that would fail
// `cdk deploy` fails `npm start` the same way. Pure: no servers, no AWS calls.

/** The error code Lambda answers with: the 4xx exception's name. */
export type LambdaRuleCode = 'InvalidParameterValueException' | 'ValidationException';

/** A request Lambda would refuse. `awsMessage` is Lambda's text; `message` prefixes what was being provisioned. */
export class LambdaRuleError extends Error {
  constructor(
    public readonly label: string,
    public readonly awsMessage: string,
    public readonly code: LambdaRuleCode,
    options?: ErrorOptions,
  ) {
    super(`${label}: ${awsMessage}`, options);
    this.name = 'LambdaRuleError';
  }
}

/**
 * Keys Lambda sets itself and refuses in a function's configuration ("Defined runtime environment variables" in the
 * Lambda developer guide). AWS_REGION, AWS_DEFAULT_REGION, AWS_ACCESS_KEY, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
 * and AWS_SESSION_TOKEN are seen refused in published deploy errors; the rest are as the guide lists them. TZ, which
 * older versions of the guide marked reserved, is accepted today (CloudFormation deploys with it succeed), and so are
 * the variables the guide lists as extendable or as settings: AWS_LAMBDA_EXEC_WRAPPER, NODE_OPTIONS, NODE_PATH, PATH,
 * LANG, LD_LIBRARY_PATH, AWS_NODEJS_CONNECTION_REUSE_ENABLED.
 */
export const RESERVED_ENVIRONMENT_KEYS: readonly string[] = [
  '_HANDLER',
  '_X_AMZN_TRACE_ID',
  'AWS_DEFAULT_REGION',
  'AWS_REGION',
  'AWS_EXECUTION_ENV',
  'AWS_LAMBDA_FUNCTION_NAME',
  'AWS_LAMBDA_FUNCTION_MEMORY_SIZE',
  'AWS_LAMBDA_FUNCTION_VERSION',
  'AWS_LAMBDA_INITIALIZATION_TYPE',
  'AWS_LAMBDA_LOG_GROUP_NAME',
  'AWS_LAMBDA_LOG_STREAM_NAME',
  'AWS_ACCESS_KEY',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_LAMBDA_RUNTIME_API',
  'LAMBDA_TASK_ROOT',
  'LAMBDA_RUNTIME_DIR',
];

/** A function's environment variables, as Lambda measures them (the JSON of the map, in bytes), are at most 4 KB. */
export const ENVIRONMENT_LIMIT_BYTES = 4096;

/** An SQS queue's visibility timeout when its template sets none. */
export const SQS_DEFAULT_VISIBILITY_TIMEOUT_SECONDS = 30;

/** CreateFunction's bounds (API reference, FunctionConfiguration). */
export const FUNCTION_LIMITS = {
  timeoutSeconds: { min: 1, max: 900 },
  memorySize: { min: 128, max: 10_240 },
  handlerMaxLength: 128,
} as const;

/**
 * Throws what CreateFunction answers when the environment sets a reserved key (all of them named, in the order given)
 * or is over 4 KB. Lambda measures the compact JSON of the variables map, the same string its message quotes.
 * @throws LambdaRuleError (InvalidParameterValueException)
 */
export function checkEnvironment(functionLabel: string, variables: Record<string, string>): void {
  const reserved = Object.keys(variables).filter((key) => RESERVED_ENVIRONMENT_KEYS.includes(key));
  if (reserved.length > 0) {
    throw new LambdaRuleError(
      functionLabel,
      'Lambda was unable to configure your environment variables because the environment variables you have provided contains reserved keys that are currently not supported for modification. ' +
        `Reserved keys used in this request: ${reserved.join(', ')}`,
      'InvalidParameterValueException',
    );
  }
  const measured = JSON.stringify(variables);
  if (Buffer.byteLength(measured, 'utf8') > ENVIRONMENT_LIMIT_BYTES) {
    throw new LambdaRuleError(
      functionLabel,
      `Lambda was unable to configure your environment variables because the environment variables you have provided exceeded the 4KB limit. String measured: ${measured}`,
      'InvalidParameterValueException',
    );
  }
}

/**
 * Throws what creating an SQS event source mapping answers (through CloudFormation) when the queue's visibility
 * timeout is shorter than the function's timeout: a message could become visible again while its batch still runs.
 * Equal is allowed. An absent visibility timeout is SQS's default, 30 seconds.
 * @throws LambdaRuleError (InvalidParameterValueException)
 */
export function checkQueueVisibility(
  mappingLabel: string,
  visibilityTimeoutSeconds: number | undefined,
  functionTimeoutSeconds: number,
): void {
  const visibility = visibilityTimeoutSeconds ?? SQS_DEFAULT_VISIBILITY_TIMEOUT_SECONDS;
  if (visibility < functionTimeoutSeconds) {
    throw new LambdaRuleError(
      mappingLabel,
      `Invalid request provided: Queue visibility timeout: ${visibility} seconds is less than Function timeout: ${functionTimeoutSeconds} seconds`,
      'InvalidParameterValueException',
    );
  }
}

export interface FunctionSettings {
  timeoutSeconds?: number;
  memorySize?: number;
  /** ReservedConcurrentExecutions. */
  reservedConcurrency?: number;
  handler?: string;
}

/**
 * Throws what CreateFunction (and PutFunctionConcurrency, for reserved concurrency) answers when a setting is out of
 * its bounds: the service's request validation, which names every bad member at once ("2 validation errors detected:
 * ...; ..."). Absent settings take Lambda's defaults, which are valid.
 * @throws LambdaRuleError (ValidationException)
 */
export function checkFunctionSettings(functionLabel: string, settings: FunctionSettings): void {
  const problems: string[] = [];
  const atLeast = (value: number | undefined, member: string, min: number) => {
    if (value !== undefined && value < min)
      problems.push(
        `Value '${value}' at '${member}' failed to satisfy constraint: Member must have value greater than or equal to ${min}`,
      );
  };
  const atMost = (value: number | undefined, member: string, max: number) => {
    if (value !== undefined && value > max)
      problems.push(
        `Value '${value}' at '${member}' failed to satisfy constraint: Member must have value less than or equal to ${max}`,
      );
  };
  atLeast(settings.timeoutSeconds, 'timeout', FUNCTION_LIMITS.timeoutSeconds.min);
  atMost(settings.timeoutSeconds, 'timeout', FUNCTION_LIMITS.timeoutSeconds.max);
  atLeast(settings.memorySize, 'memorySize', FUNCTION_LIMITS.memorySize.min);
  atMost(settings.memorySize, 'memorySize', FUNCTION_LIMITS.memorySize.max);
  atLeast(settings.reservedConcurrency, 'reservedConcurrentExecutions', 0);
  if (settings.handler !== undefined) {
    if (settings.handler.length > FUNCTION_LIMITS.handlerMaxLength) {
      problems.push(
        `Value '${settings.handler}' at 'handler' failed to satisfy constraint: Member must have length less than or equal to ${FUNCTION_LIMITS.handlerMaxLength}`,
      );
    }
    if (!/^[^\s]+$/.test(settings.handler)) {
      problems.push(
        `Value '${settings.handler}' at 'handler' failed to satisfy constraint: Member must satisfy regular expression pattern: [^\\s]+`,
      );
    }
  }
  if (problems.length > 0) {
    const count = `${problems.length} validation error${problems.length === 1 ? '' : 's'} detected`;
    throw new LambdaRuleError(functionLabel, `${count}: ${problems.join('; ')}`, 'ValidationException');
  }
}
