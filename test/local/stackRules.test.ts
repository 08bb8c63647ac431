// Lambda's runtime rules and CloudFormation's provisioning refusals, each with a test against a whole LocalStack: a
// small template written here, tiny asset folders in a temp dir, servers on 127.0.0.1 only.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Message, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { FunctionError } from '../../local/lambdaRuntime';
import { resolveNodeFor } from '../../local/nodeRuntimes';
import { planStack } from '../../local/plan';
import { LocalStack, type LocalStackOptions, ProvisioningError } from '../../local/stack';
import { type CloudFormationTemplate, TemplateError, type TemplateResource } from '../../local/template';
import { waitFor } from '../../local/waitFor';

const STACK = 'Rules';
const ACCOUNT = '000000000000';
const REGION = 'us-east-1';

/* ----------------------------------------------------------------------------------------------- assets */

const assemblies: string[] = [];
afterAll(() => assemblies.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A cloud assembly folder holding asset.<name>/ folders with the given files. */
function assembly(assets: Record<string, Record<string, string>>): string {
  const dir = mkdtempSync(join(tmpdir(), 'rules-assembly-'));
  assemblies.push(dir);
  for (const [name, files] of Object.entries(assets)) {
    mkdirSync(join(dir, `asset.${name}`));
    for (const [file, source] of Object.entries(files)) writeFileSync(join(dir, `asset.${name}`, file), source);
  }
  return dir;
}

/** Answers the event with what it asks for; `throw` throws. */
const PROBE = `
exports.handler = async (event, context) => {
  console.log('request=' + context.awsRequestId);
  if (event && event.throw) throw new Error(event.throw);
  return {
    offset: new Date(0).getTimezoneOffset(),
    timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    version: process.version,
    executionEnv: process.env.AWS_EXECUTION_ENV,
    accessKeyId: process.env.AWS_ACCESS_KEY_ID,
    sessionToken: process.env.AWS_SESSION_TOKEN,
    tz: process.env.TZ,
  };
};
`;

/* --------------------------------------------------------------------------------------------- templates */

const ref = (id: string) => ({ Ref: id });
const arnOf = (id: string) => ({ 'Fn::GetAtt': [id, 'Arn'] });
const queueArn = (name: string) => `arn:aws:sqs:${REGION}:${ACCOUNT}:${name}`;

const queue = (props: Record<string, unknown> = {}): TemplateResource => ({
  Type: 'AWS::SQS::Queue',
  Properties: props,
});

/** A Lambda execution role (its grants: an AWS::IAM::Policy from `policy`). */
const role = (): TemplateResource => ({
  Type: 'AWS::IAM::Role',
  Properties: {
    AssumeRolePolicyDocument: {
      Version: '2012-10-17',
      Statement: [{ Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' }, Action: 'sts:AssumeRole' }],
    },
  },
});

const policy = (roleId: string, statements: Record<string, unknown>[]): TemplateResource => ({
  Type: 'AWS::IAM::Policy',
  Properties: {
    PolicyName: `${roleId}Policy`,
    Roles: [ref(roleId)],
    PolicyDocument: { Version: '2012-10-17', Statement: statements },
  },
});

/** A function running asset.<asset> with the role `roleId` (a resource the caller adds). */
const fn = (asset: string, roleId: string, props: Record<string, unknown> = {}): TemplateResource => ({
  Type: 'AWS::Lambda::Function',
  Metadata: { 'aws:asset:path': `asset.${asset}` },
  Properties: {
    Handler: 'index.handler',
    Runtime: 'nodejs22.x',
    Timeout: 5,
    Role: arnOf(roleId),
    Code: { S3Bucket: 'assets', S3Key: `${asset}.zip` },
    ...props,
  },
});

const template = (
  Resources: Record<string, TemplateResource>,
  extra: Partial<CloudFormationTemplate> = {},
): CloudFormationTemplate => ({ Resources, ...extra });

/* ------------------------------------------------------------------------------------------------ stacks */

type Extra = Partial<Omit<LocalStackOptions, 'template' | 'assemblyDir' | 'stackName'>>;

/** Starts a stack on the template, runs the body, stops it whatever happens. */
async function withStack<T>(
  t: CloudFormationTemplate,
  assemblyDir: string,
  body: (stack: LocalStack, lines: string[]) => Promise<T>,
  extra: Extra = {},
): Promise<T> {
  const lines: string[] = [];
  const stack = new LocalStack({
    template: t,
    stackName: STACK,
    assemblyDir,
    log: (source, line) => lines.push(`${source}: ${line}`),
    asyncDuplicateRate: 0,
    ...extra,
  });
  try {
    await stack.start();
    return await body(stack, lines);
  } finally {
    await stack.stop();
  }
}

/** What stack.start() threw (it stops the stack itself on failure). */
async function startFailure(t: CloudFormationTemplate, assemblyDir: string): Promise<Error> {
  const stack = new LocalStack({
    template: t,
    stackName: STACK,
    assemblyDir,
    log: () => undefined,
    asyncDuplicateRate: 0,
  });
  try {
    await stack.start();
  } catch (error) {
    return error as Error;
  } finally {
    await stack.stop();
  }
  throw new Error('stack.start() succeeded; expected it to refuse the template');
}

/** One receive from a queue with the administrator's client (undefined when empty), with every message attribute. */
async function receive(stack: LocalStack, name: string): Promise<Message[] | undefined> {
  const url = stack.plan.queues.find((q) => q.name === name)!.url;
  const { Messages = [] } = await stack.sqs().send(
    new ReceiveMessageCommand({
      QueueUrl: url,
      WaitTimeSeconds: 0,
      MaxNumberOfMessages: 10,
      MessageAttributeNames: ['All'],
    }),
  );
  return Messages.length ? Messages : undefined;
}

/* ------------------------------------------------------------------------------------------------- tests */

describe('LocalStack provisioning: what Lambda refuses, with its words', () => {
  const dir = assembly({ probe: { 'index.js': PROBE } });

  it("refuses a reserved key in a function's environment, naming the function", async () => {
    const error = await startFailure(
      template({
        FnRole: role(),
        Fn: fn('probe', 'FnRole', { Environment: { Variables: { TABLE: 't', AWS_REGION: 'eu-west-1' } } }),
      }),
      dir,
    );
    expect(error).toBeInstanceOf(ProvisioningError);
    expect(error.message).toBe(
      'function Fn (Rules-Fn): Lambda was unable to configure your environment variables because the environment variables you have provided contains reserved keys that are currently not supported for modification. Reserved keys used in this request: AWS_REGION',
    );
    expect((error as ProvisioningError).logicalId).toBe('Fn');
  });

  describe('the 4 KB environment limit, measured on the variables as AWS resolves them', () => {
    // The queue URL resolves to the local gateway's; Lambda measures AWS's, which is longer, so the local stack does.
    const awsUrl = `https://sqs.${REGION}.amazonaws.com/${ACCOUNT}/rules-work`;
    const withPad = (length: number) =>
      template({
        Work: queue({ QueueName: 'rules-work' }),
        FnRole: role(),
        Fn: fn('probe', 'FnRole', { Environment: { Variables: { QUEUE_URL: ref('Work'), PAD: 'x'.repeat(length) } } }),
      });
    const fits = 4096 - JSON.stringify({ QUEUE_URL: awsUrl, PAD: '' }).length;

    it("refuses one byte over, quoting the string measured (with AWS's queue URL)", async () => {
      const error = await startFailure(withPad(fits + 1), dir);
      const measured = JSON.stringify({ QUEUE_URL: awsUrl, PAD: 'x'.repeat(fits + 1) });
      expect(measured).toHaveLength(4097);
      expect(error).toBeInstanceOf(ProvisioningError);
      expect(error.message).toBe(
        `function Fn (Rules-Fn): Lambda was unable to configure your environment variables because the environment variables you have provided exceeded the 4KB limit. String measured: ${measured}`,
      );
      expect((error as ProvisioningError).logicalId).toBe('Fn');
    });

    it('accepts exactly 4096 bytes, and the function still gets the local queue URL', async () => {
      await withStack(withPad(fits), dir, async (stack) => {
        const planned = stack.plan.functions.find((f) => f.logicalId === 'Fn')!;
        expect(planned.environment.QUEUE_URL).toBe(`${stack.endpoints.sqs}/${ACCOUNT}/rules-work`);
        // Shorter than AWS's: measured locally as is, one byte over would have passed.
        expect(planned.environment.QUEUE_URL.length).toBeLessThan(awsUrl.length);
        expect(stack.runtime.get('Rules-Fn').spec.environment.PAD).toHaveLength(fits);
      });
    });
  });

  describe("a function timeout above its event source queue's visibility timeout", () => {
    const withTimeouts = (visibility: number | undefined, timeout: number) =>
      template({
        Work: queue({
          QueueName: 'rules-work',
          ...(visibility === undefined ? {} : { VisibilityTimeout: visibility }),
        }),
        FnRole: role(),
        Fn: fn('probe', 'FnRole', { Timeout: timeout }),
        Mapping: {
          Type: 'AWS::Lambda::EventSourceMapping',
          Properties: { EventSourceArn: arnOf('Work'), FunctionName: ref('Fn'), BatchSize: 1 },
        },
      });

    it('is refused, naming the mapping', async () => {
      const error = await startFailure(withTimeouts(5, 6), dir);
      expect(error).toBeInstanceOf(ProvisioningError);
      expect(error.message).toBe(
        'event source mapping Mapping (rules-work -> Rules-Fn): Invalid request provided: Queue visibility timeout: 5 seconds is less than Function timeout: 6 seconds',
      );
      expect((error as ProvisioningError).logicalId).toBe('Mapping');
    });

    it("is measured against SQS's default of 30 seconds when the queue sets none", async () => {
      const error = await startFailure(withTimeouts(undefined, 31), dir);
      expect(error.message).toBe(
        'event source mapping Mapping (rules-work -> Rules-Fn): Invalid request provided: Queue visibility timeout: 30 seconds is less than Function timeout: 31 seconds',
      );
    });

    it('equal is accepted', async () => {
      await withStack(withTimeouts(5, 5), dir, async (stack) => {
        expect(stack.mappings.map((m) => m.uuid)).toEqual(['local-Mapping']);
      });
    });
  });
});

describe('LocalStack planning: what CloudFormation refuses', () => {
  const options = { stackName: STACK, region: REGION, accountId: ACCOUNT, sqsEndpoint: 'http://127.0.0.1:1' };
  const dir = assembly({});

  it('refuses two queues with one QueueName, naming both, before anything is created', async () => {
    const t = template({ First: queue({ QueueName: 'dup' }), Second: queue({ QueueName: 'dup' }) });
    const message =
      "Second: Resource of type 'AWS::SQS::Queue' with identifier 'dup' already exists. (First in the same stack has that QueueName; names are unique per account and region)";
    expect(() => planStack(t, options)).toThrow(new TemplateError(message, 'Second'));
    const error = await startFailure(t, dir);
    expect(error).toBeInstanceOf(TemplateError);
    expect(error.message).toBe(message);
    expect((error as TemplateError).path).toBe('Second');
  });

  it('refuses a Ref to a resource the template does not have, naming it', () => {
    const t = template({ Work: queue({ QueueName: { 'Fn::Join': ['-', [ref('Missing'), 'work']] } }) });
    let error: TemplateError | undefined;
    try {
      planStack(t, options);
    } catch (e) {
      error = e as TemplateError;
    }
    expect(error).toBeInstanceOf(TemplateError);
    expect(error!.path).toBe('Missing');
    expect(error!.message).toBe(
      'Template format error: Unresolved resource dependencies [Missing] in the Resources block of the template',
    );
  });

  it('refuses a DependsOn on nothing, even on a resource the local runtime ignores, as CloudFormation does', () => {
    const t = template({
      Work: queue({ QueueName: 'w' }),
      Watch: { Type: 'AWS::CloudWatch::Alarm', DependsOn: 'Gone', Properties: {} },
    });
    expect(() => planStack(t, options)).toThrow(
      'Template format error: Unresolved resource dependencies [Gone] in the Resources block of the template',
    );
  });

  it('refuses a parameter without a Default, even one nothing refers to (CloudFormation needs a value for each)', () => {
    const t = template({ Work: queue({ QueueName: 'w' }) }, { Parameters: { Unused: { Type: 'String' } } });
    expect(() => planStack(t, options)).toThrow(/^Parameters: \[Unused\] must have values/);
  });

  it('refuses a referenced parameter without a Default, naming it', () => {
    const t = template({ Work: queue({ QueueName: ref('Env') }) }, { Parameters: { Env: { Type: 'String' } } });
    let error: TemplateError | undefined;
    try {
      planStack(t, options);
    } catch (e) {
      error = e as TemplateError;
    }
    expect(error).toBeInstanceOf(TemplateError);
    expect(error!.path).toBe('Env');
    expect(error!.message).toMatch(/^Parameters: \[Env\] must have values/);
  });
});

describe('LocalStack asynchronous invocation failures', () => {
  const dir = assembly({ probe: { 'index.js': PROBE } });
  const sendTo = (...queues: string[]) => [{ Effect: 'Allow', Action: 'sqs:SendMessage', Resource: queues.map(arnOf) }];

  it('sends the event to the DeadLetterConfig queue after the retries, with the request ID and the error as attributes', async () => {
    const t = template({
      Dlq: queue({ QueueName: 'rules-dlq' }),
      ThrowerRole: role(),
      ThrowerPolicy: policy('ThrowerRole', sendTo('Dlq')),
      Thrower: fn('probe', 'ThrowerRole', { DeadLetterConfig: { TargetArn: arnOf('Dlq') } }),
    });
    await withStack(
      t,
      dir,
      async (stack, lines) => {
        const event = { throw: 'boom', n: 1 };
        const requestId = stack.runtime.get('Rules-Thrower').invokeAsync(event);
        const [message] = await waitFor('the event in the DLQ', () => receive(stack, 'rules-dlq'), {
          timeoutMs: 10_000,
          intervalMs: 50,
        });
        expect(stack.runtime.get('Rules-Thrower').invocationCount).toBe(3);
        expect(JSON.parse(message.Body!)).toEqual(event);
        expect(message.MessageAttributes).toEqual({
          RequestID: { DataType: 'String', StringValue: requestId },
          ErrorCode: { DataType: 'Number', StringValue: '200' },
          // The error's type and message (its exact text: see the known bug below).
          ErrorMessage: { DataType: 'String', StringValue: 'boom' },
        });
        expect(lines).toContain(
          'lambda: Rules-Thrower: asynchronous invocation failed after 3 attempts (RetriesExhausted): Rules-Thrower: Error: boom',
        );
        expect(lines.filter((l) => l === `Rules-Thrower: request=${requestId}`)).toHaveLength(3);
        expect(stack.denials()).toEqual([]);
      },
      { asyncRetryDelaysMs: [50, 50] },
    );
  });

  it("sends the invocation record to an EventInvokeConfig's on-failure destination after exactly one attempt with MaximumRetryAttempts 0", async () => {
    const t = template({
      Failures: queue({ QueueName: 'rules-failures' }),
      ThrowerRole: role(),
      ThrowerPolicy: policy('ThrowerRole', sendTo('Failures')),
      Thrower: fn('probe', 'ThrowerRole'),
      ThrowerInvokeConfig: {
        Type: 'AWS::Lambda::EventInvokeConfig',
        Properties: {
          FunctionName: ref('Thrower'),
          Qualifier: '$LATEST',
          MaximumRetryAttempts: 0,
          DestinationConfig: { OnFailure: { Destination: arnOf('Failures') } },
        },
      },
    });
    await withStack(
      t,
      dir,
      async (stack) => {
        const event = { throw: 'boom', n: 2 };
        const requestId = stack.runtime.get('Rules-Thrower').invokeAsync(event);
        const [message] = await waitFor('the record at the destination', () => receive(stack, 'rules-failures'), {
          timeoutMs: 10_000,
          intervalMs: 50,
        });
        expect(stack.runtime.get('Rules-Thrower').invocationCount).toBe(1);
        expect(JSON.parse(message.Body!)).toEqual({
          version: '1.0',
          timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
          requestContext: {
            requestId,
            functionArn: `arn:aws:lambda:${REGION}:${ACCOUNT}:function:Rules-Thrower:$LATEST`,
            condition: 'RetriesExhausted',
            approximateInvokeCount: 1,
          },
          requestPayload: event,
          responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
          responsePayload: { errorType: 'Error', errorMessage: expect.stringMatching(/boom$/) },
        });
        // Given up on, not waiting for a retry (which MaximumRetryAttempts 0 forbids): a scheduled retry counts as
        // pending until it runs, and the event was handed on only after its attempt's outcome was settled.
        expect(stack.runtime.get('Rules-Thrower').pendingAsync).toBe(0);
        expect(stack.runtime.get('Rules-Thrower').invocationCount).toBe(1);
      },
      { asyncRetryDelaysMs: [50, 50] },
    );
  });

  it("hands on the handler's own error message, as Lambda does, without the local function-name prefix", async () => {
    const t = template({
      Dlq: queue({ QueueName: 'rules-dlq' }),
      Failures: queue({ QueueName: 'rules-failures' }),
      ThrowerRole: role(),
      ThrowerPolicy: policy('ThrowerRole', sendTo('Dlq', 'Failures')),
      Thrower: fn('probe', 'ThrowerRole', { DeadLetterConfig: { TargetArn: arnOf('Dlq') } }),
      ThrowerInvokeConfig: {
        Type: 'AWS::Lambda::EventInvokeConfig',
        Properties: {
          FunctionName: ref('Thrower'),
          Qualifier: '$LATEST',
          MaximumRetryAttempts: 0,
          DestinationConfig: { OnFailure: { Destination: arnOf('Failures') } },
        },
      },
    });
    await withStack(t, dir, async (stack) => {
      stack.runtime.get('Rules-Thrower').invokeAsync({ throw: 'boom' });
      const [dead] = await waitFor('the event in the DLQ', () => receive(stack, 'rules-dlq'), {
        timeoutMs: 10_000,
        intervalMs: 50,
      });
      const [record] = await waitFor('the record at the destination', () => receive(stack, 'rules-failures'), {
        timeoutMs: 10_000,
        intervalMs: 50,
      });
      expect(dead.MessageAttributes!.ErrorMessage.StringValue).not.toContain('Rules-Thrower');
      expect(JSON.parse(record.Body!).responsePayload).toMatchObject({ errorType: 'Error', errorMessage: 'boom' });
    });
  });

  it("without sqs:SendMessage on the DLQ in the function's role, nothing arrives and the denial names the action", async () => {
    const t = template({
      Dlq: queue({ QueueName: 'rules-dlq' }),
      Other: queue({ QueueName: 'rules-other' }),
      ThrowerRole: role(),
      ThrowerPolicy: policy('ThrowerRole', sendTo('Other')),
      Thrower: fn('probe', 'ThrowerRole', { DeadLetterConfig: { TargetArn: arnOf('Dlq') } }),
    });
    await withStack(
      t,
      dir,
      async (stack, lines) => {
        stack.runtime.get('Rules-Thrower').invokeAsync({ throw: 'boom' });
        const denial = await waitFor('the denied DLQ write', () => stack.denials()[0], {
          timeoutMs: 10_000,
          intervalMs: 50,
        });
        expect(denial).toMatchObject({
          action: 'sqs:SendMessage',
          resource: queueArn('rules-dlq'),
          roleArn: `arn:aws:iam::${ACCOUNT}:role/Rules-ThrowerRole`,
          sessionName: 'Rules-Thrower',
          enforced: true,
        });
        await waitFor(
          'the failure to be logged',
          () => lines.find((l) => l.startsWith('lambda: Rules-Thrower: could not hand the failed event on: ')),
          { timeoutMs: 5000, intervalMs: 20 },
        );
        expect(await receive(stack, 'rules-dlq')).toBeUndefined();
        expect(stack.denials().map((d) => d.action)).toEqual(['sqs:SendMessage']);
      },
      { asyncRetryDelaysMs: [50, 50] },
    );
  });
});

describe('LocalStack asynchronous duplicate delivery', () => {
  const dir = assembly({ probe: { 'index.js': PROBE } });
  const t = template({ FnRole: role(), Fn: fn('probe', 'FnRole') });

  it.each([
    [1, 2, 1],
    [0, 1, 0],
  ])('with asyncDuplicateRate %d, one accepted event runs %d times (%d duplicate)', async (rate, runs, duplicates) => {
    await withStack(
      t,
      dir,
      async (stack, lines) => {
        const f = stack.runtime.get('Rules-Fn');
        const requestId = f.invokeAsync({ n: 1 });
        await waitFor('the event (and any duplicate) to finish', () => stack.runtime.isIdle(), {
          timeoutMs: 10_000,
          intervalMs: 20,
        });
        expect(f.invocationCount).toBe(runs);
        expect(f.duplicateAsyncDeliveries).toBe(duplicates);
        expect(stack.runtime.duplicateAsyncDeliveries).toBe(duplicates);
        // A duplicate is the same event under the same request ID.
        expect(lines.filter((l) => l.startsWith('Rules-Fn: request='))).toEqual(
          Array.from({ length: runs }, () => `Rules-Fn: request=${requestId}`),
        );
      },
      { asyncDuplicateRate: rate },
    );
  });
});

describe('LocalStack module rules: what a function can require', () => {
  const dir = assembly({
    modules: {
      // Computed names: a bundler cannot see them, so they stay runtime require()s. (No file here may be named like
      // the package: /var/task is on NODE_PATH, so require('jest') would find a jest.js next to it, as on Lambda.)
      'nowhere.js': "const pad = require(['le', 'ft-pad'].join(''));\nexports.handler = async () => pad('1', 3);\n",
      'project.js': "const jest = require(['je', 'st'].join(''));\nexports.handler = async () => typeof jest;\n",
      'sdk.js':
        "const { SQSClient } = require('@aws-sdk/client-sqs');\nexports.handler = async () => typeof SQSClient;\n",
    },
  });
  const t = template({
    FnRole: role(),
    LeftPad: fn('modules', 'FnRole', { Handler: 'nowhere.handler' }),
    Jest: fn('modules', 'FnRole', { Handler: 'project.handler' }),
    Sdk: fn('modules', 'FnRole', { Handler: 'sdk.handler' }),
  });

  it("fails a package that is nowhere, and one only the project's node_modules has, as Runtime.ImportModuleError; the runtime's SDK loads", async () => {
    await withStack(t, dir, async (stack) => {
      for (const [name, missing] of [
        ['Rules-LeftPad', 'left-pad'],
        ['Rules-Jest', 'jest'],
      ]) {
        const f = stack.runtime.get(name);
        const error = (await f.invoke({}).catch((e: Error) => e)) as FunctionError;
        expect(error).toBeInstanceOf(FunctionError);
        expect(error.errorType).toBe('Runtime.ImportModuleError');
        expect(error.message).toContain(`Cannot find module '${missing}'`);
        expect(f.errorSummary()).toEqual([
          {
            errorType: 'Runtime.ImportModuleError',
            message: `Error: Cannot find module '${missing}'`,
            count: 1,
            examples: [expect.stringContaining(`Cannot find module '${missing}'`)],
          },
        ]);
      }
      await expect(stack.runtime.get('Rules-Sdk').invoke({})).resolves.toBe('function');
      expect(stack.runtime.get('Rules-Sdk').errorSummary()).toEqual([]);
    });
  });
});

describe('LocalStack execution environment', () => {
  const dir = assembly({ probe: { 'index.js': PROBE } });

  it("runs on UTC whatever the host's TZ, on the template's Node major, as AWS_Lambda_nodejs22.x", async () => {
    const hostTz = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      await withStack(
        template({ FnRole: role(), Fn: fn('probe', 'FnRole', { Runtime: 'nodejs22.x' }) }),
        dir,
        async (stack) => {
          const got = (await stack.runtime.get('Rules-Fn').invoke({})) as Record<string, unknown>;
          expect(got).toMatchObject({ offset: 0, timeZone: 'UTC', tz: 'UTC', executionEnv: 'AWS_Lambda_nodejs22.x' });
          const [report] = stack.runtime.nodeReport();
          if (resolveNodeFor('nodejs22.x').exact) {
            expect(got.version).toMatch(/^v22\./);
            expect(report).toEqual({
              functionName: 'Rules-Fn',
              wanted: 'nodejs22.x',
              running: got.version,
              exact: true,
            });
          } else {
            expect(report).toMatchObject({
              functionName: 'Rules-Fn',
              wanted: 'nodejs22.x',
              exact: false,
              note: expect.stringContaining('nodejs22.x wanted but no Node 22 is installed'),
            });
          }
        },
      );
    } finally {
      if (hostTz === undefined) delete process.env.TZ;
      else process.env.TZ = hostTz;
    }
  });

  it("gives each function its own role session's credentials, never the administrator's", async () => {
    const t = template({ ARole: role(), A: fn('probe', 'ARole'), BRole: role(), B: fn('probe', 'BRole') });
    await withStack(t, dir, async (stack) => {
      const a = (await stack.runtime.get('Rules-A').invoke({})) as { accessKeyId: string; sessionToken: string };
      const b = (await stack.runtime.get('Rules-B').invoke({})) as { accessKeyId: string; sessionToken: string };
      expect(a.accessKeyId).toMatch(/^ASIA[A-Z2-7]{16}$/);
      expect(b.accessKeyId).toMatch(/^ASIA[A-Z2-7]{16}$/);
      expect(a.accessKeyId).not.toBe(b.accessKeyId);
      for (const key of [a.accessKeyId, b.accessKeyId]) expect(key).not.toBe('S3RVER');
      expect(a.sessionToken).toEqual(expect.any(String));
      expect(a.sessionToken).not.toBe('');
      expect(stack.iam.credentialsFor(`arn:aws:iam::${ACCOUNT}:role/Rules-ARole`, 'Rules-A').accessKeyId).toBe(
        a.accessKeyId,
      );
    });
  });
});
