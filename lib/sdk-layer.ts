// Compute building block: the `sdk-slim` layer, one per stack: the DynamoDB and SQS clients the handlers use on every
// invocation, as one tree-shaken, minified file (lambda/sdk-slim/index.ts says why). Every PacedFunction attaches it
// and aliases the four packages to it; everything else of the SDK still comes from the Lambda runtime.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AssetHashType, DockerImage, Stack } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';

/** The module name the handlers import in place of the packages below. */
export const SDK_SLIM_MODULE = 'sdk-slim';
/** Packages the handler bundles take from the layer instead of the runtime's SDK. */
export const SDK_SLIM_PACKAGES = [
  '@aws-sdk/client-dynamodb',
  '@aws-sdk/lib-dynamodb',
  '@aws-sdk/util-dynamodb',
  '@aws-sdk/client-sqs',
] as const;
/**
 * Left to the runtime's SDK: clients the handlers load lazily (S3, Lambda, Secrets Manager) and the credential
 * providers Lambda never reaches (it has environment credentials); bundling them would only grow the layer.
 */
export const SDK_SLIM_EXTERNALS = [
  '@aws-sdk/client-s3',
  '@aws-sdk/client-lambda',
  '@aws-sdk/client-secrets-manager',
  '@aws-sdk/credential-provider-ini',
  '@aws-sdk/credential-provider-sso',
  '@aws-sdk/credential-provider-process',
  '@aws-sdk/credential-provider-web-identity',
  '@aws-sdk/credential-provider-http',
  '@aws-sdk/credential-provider-login',
  '@aws-sdk/nested-clients',
  '@aws-sdk/token-providers',
  '@smithy/credential-provider-imds',
];

const PROJECT_ROOT = resolve(__dirname, '..');
const SOURCE_DIR = join(PROJECT_ROOT, 'lambda', 'sdk-slim');
const LAYER_ID = 'SdkSlimLayer';

/** Builds the layer's content into `outputDir` (nodejs/node_modules/sdk-slim/index.js) with the project's esbuild. */
export function buildSdkSlim(outputDir: string, target: string): void {
  // esbuild is a devDependency, present wherever the stack is synthesized (PacedFunction checks it too).
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const esbuild = require('esbuild') as typeof import('esbuild');
  esbuild.buildSync({
    // The TypeScript source in the repository, its compiled JavaScript in the package (dist/ has no .ts).
    entryPoints: [
      existsSync(join(SOURCE_DIR, 'index.ts')) ? join(SOURCE_DIR, 'index.ts') : join(SOURCE_DIR, 'index.js'),
    ],
    outfile: join(outputDir, 'nodejs', 'node_modules', SDK_SLIM_MODULE, 'index.js'),
    absWorkingDir: PROJECT_ROOT,
    bundle: true,
    platform: 'node',
    target,
    format: 'cjs',
    minify: true,
    // The SDK's ES module builds: esbuild can drop what the re-exported names do not reach.
    mainFields: ['module', 'main'],
    external: SDK_SLIM_EXTERNALS,
    logLevel: 'error',
  });
}

/** The stack's `sdk-slim` layer, created on first use. */
export function sdkSlimLayer(scope: Construct, runtime: lambda.Runtime, target: string): lambda.ILayerVersion {
  const stack = Stack.of(scope);
  const existing = stack.node.tryFindChild(LAYER_ID) as lambda.LayerVersion | undefined;
  if (existing) return existing;
  return new lambda.LayerVersion(stack, LAYER_ID, {
    description: `${SDK_SLIM_PACKAGES.join(', ')} as one tree-shaken module (${SDK_SLIM_MODULE}), for a shorter cold start`,
    compatibleRuntimes: [runtime],
    compatibleArchitectures: [lambda.Architecture.ARM_64, lambda.Architecture.X86_64],
    code: lambda.Code.fromAsset(SOURCE_DIR, {
      // The output is what matters: it changes with the SDK version in node_modules as well as with the facade.
      assetHashType: AssetHashType.OUTPUT,
      bundling: {
        // Never used: local bundling always succeeds or throws (this project does not use Docker).
        image: DockerImage.fromRegistry('public.ecr.aws/sam/build-nodejs22.x'),
        local: {
          tryBundle(outputDir: string): boolean {
            buildSdkSlim(outputDir, target);
            return true;
          },
        },
      },
    }),
  });
}
