// PacedFunction: the shared Lambda settings, its own minimal role, its log group, and the local esbuild bundle.
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { App, Stack, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import { Match, Template } from 'aws-cdk-lib/assertions';
import {
  jobEntryMetadata,
  PacedFunction,
  type PacedFunctionProps,
  VALID_LOG_RETENTION_DAYS,
  validatePacedFunctionProps,
} from '../../lib/paced-function';
import { InvalidPropsError } from '../../lib/props-error';
import { testApp } from './cdkContext';
import { arnOf, logicalId, refOf, resourceOf, statementsOfRole } from './templateHelpers';

const FIXTURES = path.join(__dirname, 'fixtures', 'handlers');

const baseProps: PacedFunctionProps = {
  entry: path.join(FIXTURES, 'sdkUser.ts'),
  description: 'test function',
  timeoutSeconds: 30,
  memoryMb: 256,
  logRetentionDays: 14,
  retainLogs: true,
  environment: { SOME_VAR: 'b' },
};

describe('Function: validatePacedFunctionProps', () => {
  it('accepts valid props', () => {
    expect(
      validatePacedFunctionProps({ ...baseProps, functionName: 'a'.repeat(64), reservedConcurrentExecutions: 2 }),
    ).toEqual([]);
  });

  it('names every problem', () => {
    expect(
      validatePacedFunctionProps({
        ...baseProps,
        functionName: `bad name ${'x'.repeat(60)}`,
        timeoutSeconds: 901,
        memoryMb: 64,
        logRetentionDays: 10,
        reservedConcurrentExecutions: 0,
      }),
    ).toEqual([
      `functionName "bad name ${'x'.repeat(60)}" is 69 characters; Lambda allows at most 64`,
      `functionName "bad name ${'x'.repeat(60)}" may hold only letters, digits, hyphens and underscores`,
      'timeoutSeconds must be an integer from 1 to 900 (got 901)',
      'memoryMb must be an integer from 128 to 10240 (got 64)',
      `logRetentionDays must be one of ${VALID_LOG_RETENTION_DAYS.join(', ')} (got 10)`,
      'reservedConcurrentExecutions must be a positive integer (got 0)',
    ]);
  });

  it('lists the CloudWatch Logs retention periods, without "never expire"', () => {
    expect(VALID_LOG_RETENTION_DAYS.slice(0, 6)).toEqual([1, 3, 5, 7, 14, 30]);
    expect(VALID_LOG_RETENTION_DAYS).not.toContain(9999);
  });
});

describe('Class: PacedFunction', () => {
  describe('Method: constructor', () => {
    it('throws one InvalidPropsError before creating anything', () => {
      const stack = new Stack(new App(), 'S');
      expect(() => new PacedFunction(stack, 'Fn', { ...baseProps, logRetentionDays: 2, memoryMb: 1 })).toThrow(
        new InvalidPropsError('PacedFunction S/Fn', [
          'memoryMb must be an integer from 128 to 10240 (got 1)',
          `logRetentionDays must be one of ${VALID_LOG_RETENTION_DAYS.join(', ')} (got 2)`,
        ]),
      );
      expect(stack.node.children).toHaveLength(0);
    });

    it("names its job's entry in its resource's Metadata, relative to the app's folder; a function without a job names none", () => {
      const stack = new Stack(testApp(), 'S');
      const entry = path.join(__dirname, '..', 'fixtures', 'jobs', 'fake-job', 'index.ts');
      const withJob = new PacedFunction(stack, 'WithJob', { ...baseProps, jobEntry: entry });
      const without = new PacedFunction(stack, 'Without', baseProps);
      const template = Template.fromStack(stack);
      expect(resourceOf(template, withJob).Metadata).toMatchObject({
        'paced-jobs:job-entry': 'test/fixtures/jobs/fake-job/index.ts',
      });
      expect(jobEntryMetadata(entry)).toBe('test/fixtures/jobs/fake-job/index.ts');
      expect(resourceOf(template, without).Metadata ?? {}).not.toHaveProperty('paced-jobs:job-entry');
    });

    describe('when built', () => {
      let fn: PacedFunction;
      let template: Template;

      beforeAll(() => {
        const stack = new Stack(testApp(), 'S');
        fn = new PacedFunction(stack, 'Fn', {
          ...baseProps,
          functionName: 'named-fn',
          reservedConcurrentExecutions: 4,
        });
        template = Template.fromStack(stack);
      });

      it('runs Node.js 22 on arm64 with tracing, its settings and the source-map flag', () => {
        expect(resourceOf(template, fn).Properties).toMatchObject({
          FunctionName: 'named-fn',
          Runtime: 'nodejs22.x',
          Architectures: ['arm64'],
          Handler: 'index.handler',
          Timeout: 30,
          MemorySize: 256,
          ReservedConcurrentExecutions: 4,
          TracingConfig: { Mode: 'Active' },
          RecursiveLoop: 'Allow',
          Description: 'test function',
          LoggingConfig: { LogGroup: refOf(fn.functionLogGroup) },
          Environment: { Variables: { SOME_VAR: 'b', NODE_OPTIONS: '--enable-source-maps' } },
          Role: arnOf(fn.executionRole),
        });
      });

      it('owns a role with no managed policy that may write only its own log group (plus X-Ray)', () => {
        template.hasResourceProperties('AWS::IAM::Role', {
          AssumeRolePolicyDocument: {
            Statement: [{ Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' } }],
          },
          ManagedPolicyArns: Match.absent(),
        });
        expect(statementsOfRole(template, fn.executionRole)).toEqual(
          expect.arrayContaining([
            { Action: ['xray:PutTelemetryRecords', 'xray:PutTraceSegments'], Effect: 'Allow', Resource: '*' },
            {
              Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
              Effect: 'Allow',
              Resource: arnOf(fn.functionLogGroup),
            },
          ]),
        );
        expect(statementsOfRole(template, fn.executionRole)).toHaveLength(2);
      });

      it('keeps X-Ray\'s statement on "*" in a policy of its own, acknowledged there and not on the role', () => {
        const tracing = fn.executionRole.node.findChild('Tracing');
        expect(resourceOf(template, tracing).Properties.PolicyDocument.Statement).toEqual([
          { Action: ['xray:PutTelemetryRecords', 'xray:PutTraceSegments'], Effect: 'Allow', Resource: '*' },
        ]);
        // Created before the function, as the L2 orders its own role policy.
        expect(resourceOf(template, fn).DependsOn).toContain(logicalId(tracing));
        const acknowledged = (c: IConstruct) =>
          c.node.metadata
            .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
            .flatMap((m) => Object.keys(m.data as object).map((id) => id.replace(/^Annotation::/, '')));
        expect(acknowledged(tracing)).toEqual(['AwsSolutions-IAM5[Resource::*]']);
        expect(acknowledged(fn.executionRole)).toEqual([]);
      });

      it('keeps its log group for the configured retention and retains it when asked', () => {
        expect(resourceOf(template, fn.functionLogGroup)).toMatchObject({
          Type: 'AWS::Logs::LogGroup',
          Properties: { RetentionInDays: 14 },
          DeletionPolicy: 'Retain',
        });
      });
    });

    // The one test here about the bundle itself: a single fixture function and the layer, bundled as `cdk synth` does.
    describe('when bundled', () => {
      let app: App;
      let fn: PacedFunction;
      let template: Template;

      beforeAll(() => {
        app = testApp({ bundling: true });
        const stack = new Stack(app, 'S');
        fn = new PacedFunction(stack, 'Fn', baseProps);
        template = Template.fromStack(stack);
      });

      it('bundles locally with esbuild: minified, with a source map, the SQS client taken from the sdk-slim layer', () => {
        // The staged asset folder is named after the hash CDK puts in the S3 key.
        const s3Key = resourceOf(template, fn).Properties.Code.S3Key as string;
        const dir = path.join(app.outdir, `asset.${s3Key.replace(/\.zip$/, '')}`);
        expect(existsSync(path.join(dir, 'index.js.map'))).toBe(true);
        const code = readFileSync(path.join(dir, 'index.js'), 'utf8');
        expect(code).toContain('require("sdk-slim")');
        expect(code).not.toContain('@aws-sdk/client-sqs');
        expect(code.split('\n').length).toBeLessThan(5);
        expect(code.length).toBeLessThan(5000);
      });

      it("attaches the stack's one sdk-slim layer, whose module is the tree-shaken client", () => {
        template.resourceCountIs('AWS::Lambda::LayerVersion', 1);
        const [layerId, layer] = Object.entries(template.findResources('AWS::Lambda::LayerVersion'))[0];
        expect(resourceOf(template, fn).Properties.Layers).toEqual([{ Ref: layerId }]);
        const dir = path.join(app.outdir, `asset.${(layer.Properties.Content.S3Key as string).replace(/\.zip$/, '')}`);
        const built = require(path.join(dir, 'nodejs', 'node_modules', 'sdk-slim')) as Record<string, unknown>;
        expect(typeof built.SQSClient).toBe('function');
        expect(typeof built.DynamoDBClient).toBe('function');
      });
    });
  });
});
