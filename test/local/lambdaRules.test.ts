import {
  checkEnvironment,
  checkFunctionSettings,
  checkQueueVisibility,
  ENVIRONMENT_LIMIT_BYTES,
  FUNCTION_LIMITS,
  LambdaRuleError,
  RESERVED_ENVIRONMENT_KEYS,
  SQS_DEFAULT_VISIBILITY_TIMEOUT_SECONDS,
} from '../../local/lambdaRules';
import { thrown } from '../support/thrown';

/** Variables whose JSON is exactly `bytes` long: one key, its value padded. */
function variablesOfJsonBytes(bytes: number): Record<string, string> {
  const overhead = JSON.stringify({ PADDING: '' }).length;
  return { PADDING: 'x'.repeat(bytes - overhead) };
}

describe('Function: checkEnvironment', () => {
  const RESERVED_MESSAGE =
    'Lambda was unable to configure your environment variables because the environment variables you have provided contains reserved keys that are currently not supported for modification. Reserved keys used in this request: ';

  it("refuses a reserved key with Lambda's message, prefixed with the function", () => {
    const error = thrown(
      () => checkEnvironment('function Consumer (paced-consumer)', { QUEUE_URL: 'q', AWS_REGION: 'eu-central-1' }),
      LambdaRuleError,
    );
    expect(error.message).toBe(`function Consumer (paced-consumer): ${RESERVED_MESSAGE}AWS_REGION`);
    expect(error.awsMessage).toBe(`${RESERVED_MESSAGE}AWS_REGION`);
    expect(error).toMatchObject({
      name: 'LambdaRuleError',
      code: 'InvalidParameterValueException',
      label: 'function Consumer (paced-consumer)',
    });
  });

  it('names every reserved key of the request, comma-separated, in its order', () => {
    const error = thrown(
      () =>
        checkEnvironment('f', { AWS_SECRET_ACCESS_KEY: 's', OK: '1', AWS_ACCESS_KEY_ID: 'a', AWS_DEFAULT_REGION: 'r' }),
      LambdaRuleError,
    );
    expect(error.awsMessage).toBe(`${RESERVED_MESSAGE}AWS_SECRET_ACCESS_KEY, AWS_ACCESS_KEY_ID, AWS_DEFAULT_REGION`);
  });

  it('refuses each key the Lambda guide reserves', () => {
    for (const key of RESERVED_ENVIRONMENT_KEYS)
      expect(thrown(() => checkEnvironment('f', { [key]: 'v' }), LambdaRuleError).awsMessage).toBe(
        `${RESERVED_MESSAGE}${key}`,
      );
    expect(RESERVED_ENVIRONMENT_KEYS).toEqual(
      expect.arrayContaining(['_HANDLER', 'AWS_LAMBDA_FUNCTION_NAME', 'AWS_SESSION_TOKEN', 'LAMBDA_TASK_ROOT']),
    );
  });

  it('accepts the variables Lambda lets a function set, TZ among them', () => {
    expect(() =>
      checkEnvironment('f', {
        AWS_LAMBDA_EXEC_WRAPPER: '/opt/wrap',
        NODE_OPTIONS: '--enable-source-maps',
        TZ: 'Europe/Berlin',
        AWS_NODEJS_CONNECTION_REUSE_ENABLED: '1',
        PATH: '/x',
        LANG: 'C',
      }),
    ).not.toThrow();
  });

  it('accepts variables whose JSON is exactly 4 KB', () => {
    const variables = variablesOfJsonBytes(ENVIRONMENT_LIMIT_BYTES);
    expect(Buffer.byteLength(JSON.stringify(variables))).toBe(4096);
    expect(() => checkEnvironment('f', variables)).not.toThrow();
  });

  it("refuses variables one byte over 4 KB with Lambda's message quoting the measured JSON", () => {
    const variables = variablesOfJsonBytes(ENVIRONMENT_LIMIT_BYTES + 1);
    const error = thrown(() => checkEnvironment('function Producer', variables), LambdaRuleError);
    expect(error.awsMessage).toBe(
      `Lambda was unable to configure your environment variables because the environment variables you have provided exceeded the 4KB limit. String measured: ${JSON.stringify(variables)}`,
    );
    expect(error.message.startsWith('function Producer: Lambda was unable')).toBe(true);
    expect(error.code).toBe('InvalidParameterValueException');
  });

  it('measures bytes, not characters: multi-byte values count in full', () => {
    // 'ä' is two bytes in UTF-8: under 4,096 characters, over 4,096 bytes.
    const variables = { V: 'ä'.repeat(2100) };
    expect(JSON.stringify(variables).length).toBeLessThan(4096);
    expect(thrown(() => checkEnvironment('f', variables), LambdaRuleError).awsMessage).toContain(
      'exceeded the 4KB limit',
    );
  });

  it('reports reserved keys before the size', () => {
    const variables = { ...variablesOfJsonBytes(5000), AWS_REGION: 'x' };
    expect(thrown(() => checkEnvironment('f', variables), LambdaRuleError).awsMessage).toBe(
      `${RESERVED_MESSAGE}AWS_REGION`,
    );
  });
});

describe('Function: checkQueueVisibility', () => {
  it("refuses a visibility timeout below the function's timeout with the event source mapping's message", () => {
    const error = thrown(
      () => checkQueueVisibility('event source mapping ConsumerMapping (paced-queue -> paced-consumer)', 30, 60),
      LambdaRuleError,
    );
    expect(error.awsMessage).toBe(
      'Invalid request provided: Queue visibility timeout: 30 seconds is less than Function timeout: 60 seconds',
    );
    expect(error.message).toBe(
      'event source mapping ConsumerMapping (paced-queue -> paced-consumer): Invalid request provided: Queue visibility timeout: 30 seconds is less than Function timeout: 60 seconds',
    );
    expect(error.code).toBe('InvalidParameterValueException');
  });

  it('allows a visibility timeout equal to or above the function timeout', () => {
    expect(() => checkQueueVisibility('m', 60, 60)).not.toThrow();
    expect(() => checkQueueVisibility('m', 360, 60)).not.toThrow();
  });

  it("takes SQS's default of 30 seconds when the queue sets none", () => {
    expect(SQS_DEFAULT_VISIBILITY_TIMEOUT_SECONDS).toBe(30);
    expect(() => checkQueueVisibility('m', undefined, 30)).not.toThrow();
    expect(thrown(() => checkQueueVisibility('m', undefined, 31), LambdaRuleError).awsMessage).toBe(
      'Invalid request provided: Queue visibility timeout: 30 seconds is less than Function timeout: 31 seconds',
    );
  });
});

describe('Function: checkFunctionSettings', () => {
  it("pins Lambda's bounds", () => {
    expect(FUNCTION_LIMITS).toEqual({
      timeoutSeconds: { min: 1, max: 900 },
      memorySize: { min: 128, max: 10_240 },
      handlerMaxLength: 128,
    });
  });

  it('accepts the bounds themselves and absent settings', () => {
    expect(() =>
      checkFunctionSettings('f', {
        timeoutSeconds: 1,
        memorySize: 128,
        reservedConcurrency: 0,
        handler: 'index.handler',
      }),
    ).not.toThrow();
    expect(() => checkFunctionSettings('f', { timeoutSeconds: 900, memorySize: 10_240 })).not.toThrow();
    expect(() => checkFunctionSettings('f', {})).not.toThrow();
  });

  it("refuses a timeout over 900 seconds with Lambda's validation message", () => {
    const error = thrown(() => checkFunctionSettings('function Producer', { timeoutSeconds: 901 }), LambdaRuleError);
    expect(error.message).toBe(
      "function Producer: 1 validation error detected: Value '901' at 'timeout' failed to satisfy constraint: Member must have value less than or equal to 900",
    );
    expect(error.code).toBe('ValidationException');
  });

  it('refuses a zero timeout, memory outside 128..10240 and negative reserved concurrency', () => {
    expect(thrown(() => checkFunctionSettings('f', { timeoutSeconds: 0 }), LambdaRuleError).awsMessage).toBe(
      "1 validation error detected: Value '0' at 'timeout' failed to satisfy constraint: Member must have value greater than or equal to 1",
    );
    expect(thrown(() => checkFunctionSettings('f', { memorySize: 127 }), LambdaRuleError).awsMessage).toBe(
      "1 validation error detected: Value '127' at 'memorySize' failed to satisfy constraint: Member must have value greater than or equal to 128",
    );
    expect(thrown(() => checkFunctionSettings('f', { memorySize: 10_241 }), LambdaRuleError).awsMessage).toBe(
      "1 validation error detected: Value '10241' at 'memorySize' failed to satisfy constraint: Member must have value less than or equal to 10240",
    );
    expect(thrown(() => checkFunctionSettings('f', { reservedConcurrency: -1 }), LambdaRuleError).awsMessage).toBe(
      "1 validation error detected: Value '-1' at 'reservedConcurrentExecutions' failed to satisfy constraint: Member must have value greater than or equal to 0",
    );
  });

  it('refuses a handler with whitespace or over 128 characters', () => {
    expect(thrown(() => checkFunctionSettings('f', { handler: 'index handler' }), LambdaRuleError).awsMessage).toBe(
      "1 validation error detected: Value 'index handler' at 'handler' failed to satisfy constraint: Member must satisfy regular expression pattern: [^\\s]+",
    );
    const long = `${'a'.repeat(122)}.handler`;
    expect(thrown(() => checkFunctionSettings('f', { handler: long }), LambdaRuleError).awsMessage).toBe(
      `1 validation error detected: Value '${long}' at 'handler' failed to satisfy constraint: Member must have length less than or equal to 128`,
    );
  });

  it('names every bad setting in one message', () => {
    expect(
      thrown(() => checkFunctionSettings('f', { timeoutSeconds: 1000, memorySize: 64 }), LambdaRuleError).awsMessage,
    ).toBe(
      "2 validation errors detected: Value '1000' at 'timeout' failed to satisfy constraint: Member must have value less than or equal to 900; " +
        "Value '64' at 'memorySize' failed to satisfy constraint: Member must have value greater than or equal to 128",
    );
  });
});
