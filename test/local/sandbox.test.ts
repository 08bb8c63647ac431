import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve as resolvePath } from 'node:path';
import { FunctionError, type FunctionSpec, LambdaRuntime, LocalFunction } from '../../local/lambdaRuntime';
import { LambdaSandbox, runtimeSdkClosure, runtimeSdkVersion, SandboxError } from '../../local/sandbox';

// Lambda's module rules, locally: an asset runs from a copy outside the repo, and a bare require() reaches only the
// asset, its layers and the runtime's AWS SDK, never this project's node_modules.
const REPO = resolvePath(__dirname, '..', '..');
const made: string[] = [];

/** A folder of files, as an asset or a layer's content is. */
function folder(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-fixture-'));
  made.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}
afterAll(() => made.forEach((d) => rmSync(d, { recursive: true, force: true })));

const spec = (name: string, codeDir: string, extra: Partial<FunctionSpec> = {}): FunctionSpec => ({
  name,
  arn: `arn:aws:lambda:us-east-1:000000000000:function:${name}`,
  handler: 'index.handler',
  codeDir,
  environment: {},
  timeoutSeconds: 5,
  runtime: 'nodejs22.x',
  ...extra,
});

const pkg = (name: string, value: string) => ({
  [`${name}/package.json`]: JSON.stringify({ name, version: '1.0.0', main: 'index.js' }),
  [`${name}/index.js`]: `module.exports = ${JSON.stringify(value)};`,
});

const ESM_HANDLER = `
import { SQSClient } from '@aws-sdk/client-sqs';
import helper from 'layer-helper';
export const handler = async () => [typeof SQSClient, helper, await import(['j', 'e', 's', 't'].join('')).then(() => 'found', (e) => e.code)];
`;

describe('Class: LambdaSandbox', () => {
  describe('Method: prepare (through LocalFunction)', () => {
    it("fails the init with Lambda's ImportModuleError for a module only the project has", async () => {
      // The premise: jest is installed in this project, so a require() that could reach its node_modules would work.
      expect(() => require.resolve('jest')).not.toThrow();
      // A dynamic require esbuild cannot see, at the module's top level (Lambda's init phase).
      const asset = folder({
        'index.js': "require(['j', 'e', 's', 't'].join(''));\nexports.handler = async () => 'loaded';",
      });
      const fn = new LocalFunction(spec('iso', asset), { log: () => undefined });
      try {
        const error = await fn.invoke({}).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(FunctionError);
        expect((error as FunctionError).errorType).toBe('Runtime.ImportModuleError');
        expect((error as FunctionError).message).toMatch(
          /^iso: Runtime\.ImportModuleError: Error: Cannot find module 'jest'\nRequire stack:/,
        );
      } finally {
        await fn.close();
      }
    });

    it.each([
      [
        'a syntax error',
        { 'index.js': 'exports.handler = async () => {;' },
        'Runtime.UserCodeSyntaxError',
        /^SyntaxError: /,
      ],
      [
        'an error thrown while loading',
        { 'index.js': "throw new RangeError('no config');" },
        'RangeError',
        /^no config$/,
      ],
      [
        'a handler that is not exported',
        { 'index.js': 'exports.other = async () => 1;' },
        'Runtime.HandlerNotFound',
        /^index\.handler is undefined or not exported$/,
      ],
    ])('reports %s at init as Lambda names it', async (_what, files, errorType, message) => {
      const fn = new LocalFunction(spec('init', folder(files)), { log: () => undefined });
      try {
        const error = (await fn.invoke({}).catch((e: unknown) => e)) as FunctionError;
        expect(error.errorType).toBe(errorType);
        expect(error.message.slice(`init: ${errorType}: `.length)).toMatch(message);
      } finally {
        await fn.close();
      }
    });

    it.each([
      ['an .mjs file', { 'index.mjs': ESM_HANDLER }],
      ['a .js file in a "type": "module" package', { 'index.js': ESM_HANDLER, 'package.json': '{"type":"module"}' }],
    ])(
      'imports an ES module handler from %s, its bare imports found in the SDK and layers, as Lambda does',
      async (_what, files) => {
        const layer = folder(
          Object.fromEntries(
            Object.entries(pkg('layer-helper', 'from the layer')).map(([p, t]) => [`nodejs/node_modules/${p}`, t]),
          ),
        );
        const fn = new LocalFunction(spec('esm', folder(files), { layerDirs: [layer] }), { log: () => undefined });
        try {
          expect(await fn.invoke({})).toEqual(['function', 'from the layer', 'ERR_MODULE_NOT_FOUND']);
        } finally {
          await fn.close();
        }
      },
    );

    it('resolves the stand-in AWS SDK and the layers, in NODE_PATH order, from a copy outside the repo', async () => {
      const layerOne = folder({
        ...Object.fromEntries(
          Object.entries(pkg('shared-helper', 'from nodejs/node_modules')).map(([p, t]) => [
            `nodejs/node_modules/${p}`,
            t,
          ]),
        ),
        ...Object.fromEntries(
          Object.entries(pkg('shared-helper', 'from nodejs/node22/node_modules')).map(([p, t]) => [
            `nodejs/node22/node_modules/${p}`,
            t,
          ]),
        ),
        ...Object.fromEntries(
          Object.entries(pkg('replaced', 'from the first layer')).map(([p, t]) => [`nodejs/node_modules/${p}`, t]),
        ),
      });
      const layerTwo = folder(
        Object.fromEntries(
          Object.entries(pkg('replaced', 'from the second layer')).map(([p, t]) => [`nodejs/node_modules/${p}`, t]),
        ),
      );
      const asset = folder({
        'index.js': `
          exports.handler = async () => ({
            sdk: typeof require('@aws-sdk/client-sqs').SQSClient,
            helper: require('shared-helper'),
            replaced: require('replaced'),
            dir: __dirname,
            cwd: process.cwd(),
            jestAtRunTime: (() => { try { require(['j', 'e', 's', 't'].join('')); return 'found'; } catch (e) { return e.code; } })(),
          });`,
      });
      const fn = new LocalFunction(spec('layers', asset, { layerDirs: [layerOne, layerTwo] }), {
        log: () => undefined,
      });
      try {
        const out = (await fn.invoke({})) as Record<string, string>;
        expect(out.sdk).toBe('function');
        // /opt/nodejs/node22/node_modules comes before /opt/nodejs/node_modules on Node 22.
        expect(out.helper).toBe('from nodejs/node22/node_modules');
        // Layers extract in order into one /opt: the later one's file wins.
        expect(out.replaced).toBe('from the second layer');
        expect(out.jestAtRunTime).toBe('MODULE_NOT_FOUND');
        expect(out.dir.startsWith(realpathSync(tmpdir())) || out.dir.startsWith(tmpdir())).toBe(true);
        expect(out.dir.startsWith(REPO)).toBe(false);
        expect(out.dir).not.toBe(asset);
        expect(out.cwd).toBe(out.dir);
      } finally {
        await fn.close();
      }
      // close() removes the copy, never the source asset.
      expect(existsSync(join(asset, 'index.js'))).toBe(true);
    });
  });

  it('copies an asset once however many functions use it, and is gone after close()', () => {
    const asset = folder({ 'index.js': 'exports.handler = async () => 1;' });
    const other = folder({ 'index.js': 'exports.handler = async () => 2;' });
    const sandbox = new LambdaSandbox();
    try {
      expect(sandbox.root.startsWith(join(tmpdir(), `paced-jobs-lambda-${process.pid}-`))).toBe(true);
      const a = sandbox.prepare('a', asset, [], 22);
      const b = sandbox.prepare('b', asset, [], 22);
      const c = sandbox.prepare('c', other, [], 22);
      expect(b.taskDir).toBe(a.taskDir);
      expect(c.taskDir).not.toBe(a.taskDir);
      expect(readdirSync(join(sandbox.root, 'task'))).toHaveLength(2);
      expect(a.nodePath.split(':')).toEqual([
        join(a.optDir, 'nodejs', 'node22', 'node_modules'),
        join(a.optDir, 'nodejs', 'node_modules'),
        join(a.runtimeDir, 'node_modules'),
        a.runtimeDir,
        a.taskDir,
      ]);
    } finally {
      sandbox.close();
    }
    expect(existsSync(sandbox.root)).toBe(false);
  });

  it('names the missing asset folder', () => {
    const sandbox = new LambdaSandbox();
    try {
      expect(() => sandbox.prepare('lost', '/nonexistent/asset.0000', [], 22)).toThrow(
        new SandboxError('lost: asset folder /nonexistent/asset.0000 does not exist'),
      );
    } finally {
      sandbox.close();
    }
  });

  it('removes the shared sandbox when the runtime closes', async () => {
    const rt = new LambdaRuntime({ log: () => undefined });
    const fn = rt.add(
      spec('gone', folder({ 'index.js': 'exports.handler = async () => process.env.LAMBDA_TASK_ROOT;' })),
    );
    const taskRoot = (await fn.invoke({})) as string;
    expect(existsSync(taskRoot)).toBe(true);
    await rt.close();
    expect(existsSync(taskRoot)).toBe(false);
  });
});

describe('Function: runtimeSdkClosure', () => {
  it("holds the project's AWS SDK v3 packages and what they depend on, and nothing else the project has", () => {
    const closure = runtimeSdkClosure();
    for (const name of ['@aws-sdk/client-sqs', '@aws-sdk/client-s3', '@aws-sdk/core', '@smithy/core', 'tslib'])
      expect(closure.has(name)).toBe(true);
    for (const name of ['jest', 'aws-cdk-lib', 'zod', '@aws-lambda-powertools/logger', 'esbuild'])
      expect(closure.has(name)).toBe(false);
    // Every entry is an installed package folder of this project.
    for (const dir of closure.values())
      expect(existsSync(join(dir, 'package.json')) && dir.startsWith(join(REPO, 'node_modules'))).toBe(true);
  });
});

describe('Function: runtimeSdkVersion', () => {
  it("is the project's pinned @aws-sdk/client-sqs version", () => {
    expect(runtimeSdkVersion()).toBe((require('@aws-sdk/client-sqs/package.json') as { version: string }).version);
  });
});
