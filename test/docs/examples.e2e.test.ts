// End to end: the README quick start's and docs/local-runtime.md's ```sh examples run as written, as a new user runs
// them: bash with `set -euo pipefail` in an installed copy of the project (its own .local/, so no other test's session
// and no developer's is touched), with no AWS variable or profile of the test's (an example that needs the local
// credentials must source .local/env.sh itself, as the reader must). The plain examples first, in the guides' order;
// then one `npm start -- --serve` session, with the `<!-- example: serve -->` ones run against it; skipped ones are
// listed with their reason. A failing example fails naming its file:line, with its output.
import type { ChildProcess } from 'node:child_process';
import { cpSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '../../local/waitFor';
import { guideFiles, ROOT } from '../../scripts/markdown';
import {
  type CommandResult,
  copyProject,
  describeResult,
  killGroup,
  type ProjectCopy,
  spawnIn,
} from '../support/projectCopy';
import { type Example, examples } from './checks';

/** The environment of a new user's shell: the test's AWS settings gone, no profile or credentials file to fall back on. */
function userEnvironment(): NodeJS.ProcessEnv {
  const kept = Object.entries(process.env).filter(
    ([name]) => !name.startsWith('AWS_') && !name.startsWith('JEST_') && name !== 'NODE_ENV',
  );
  return {
    ...Object.fromEntries(kept),
    FORCE_COLOR: '0',
    AWS_CONFIG_FILE: '/nonexistent/aws-config',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/aws-credentials',
    // Never an instance's role, should this run on one (setupEnv.ts does the same for every test).
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    CDK_VALIDATION: 'false',
  };
}

/** Runs one example with bash; fails naming its file:line, with what it printed. */
async function runExample(dir: string, example: Example, timeoutMs: number): Promise<void> {
  const ran = await spawnIn(dir, 'bash', ['-c', `set -euo pipefail\n${example.body}`], {
    timeoutMs,
    baseEnv: userEnvironment(),
  }).done;
  if (ran.status === 0 && !ran.timedOut) return;
  throw new Error(
    describeResult(`${example.file}:${example.line}: the example\n$ ${example.body.replace(/\n/g, '\n$ ')}\n`, ran),
  );
}

const label = (e: Example) => `${e.file}:${e.line}: ${e.body.split('\n')[0]}${e.body.includes('\n') ? ' ...' : ''}`;

let found: Example[] = [];
let missing: string | undefined;
try {
  const read = examples(ROOT, guideFiles(ROOT));
  found = read.examples;
  if (read.problems.length > 0) missing = read.problems.join('\n');
} catch (error) {
  missing = (error as Error).message;
}

describe('The examples of the README quick start and docs/local-runtime.md, run as written', () => {
  let copy: ProjectCopy;

  beforeAll(() => {
    if (missing) return;
    copy = copyProject({ prefix: 'paced-jobs-docs-examples-' });
    // The synthesized app, copied after the sources so it is newer than they are: `npm start` then runs it as it is
    // (globalSetup synthesized it for this run) rather than synthesizing again in the copy.
    if (existsSync(join(ROOT, 'cdk.out')))
      cpSync(join(ROOT, 'cdk.out'), join(copy.dir, 'cdk.out'), { recursive: true });
  });

  afterAll(() => {
    copy?.remove();
  });

  it('finds the examples, each run, served or skipped with its reason', () => {
    if (missing) throw new Error(missing);
    expect(found.length).toBeGreaterThan(0);
  });

  for (const example of found.filter((e) => e.mode === 'skip')) {
    it.skip(`${label(example)} (skipped: ${example.reason})`, () => undefined);
  }

  for (const example of found.filter((e) => e.mode === 'run')) {
    it(label(example), () => runExample(copy.dir, example, 240_000), 250_000);
  }

  describe('against one `npm start -- --serve` session', () => {
    let serve: { child: ChildProcess; done: Promise<CommandResult> } | undefined;
    const served = found.filter((e) => e.mode === 'serve');

    beforeAll(async () => {
      if (missing) return;
      // A demo run above wrote .local for a stack that is gone: wait for the session's own files.
      for (const file of ['endpoints.json', 'env.sh']) rmSync(join(copy.dir, '.local', file), { force: true });
      serve = spawnIn(copy.dir, process.execPath, ['--import', 'tsx', 'cli/start.ts', '--serve', '--prewarm', '1'], {
        timeoutMs: 600_000,
        baseEnv: userEnvironment(),
      });
      let ended: CommandResult | undefined;
      serve.done.then(
        (r) => (ended = r),
        () => undefined,
      );
      await waitFor(
        'npm start -- --serve to write .local/endpoints.json and .local/env.sh',
        () => {
          if (ended) throw new Error(describeResult('npm start -- --serve, before serving,', ended));
          return ['endpoints.json', 'env.sh'].every((f) => existsSync(join(copy.dir, '.local', f)));
        },
        { timeoutMs: 180_000, intervalMs: 200 },
      );
    }, 200_000);

    afterAll(async () => {
      if (!serve) return;
      // Ctrl-C, as the other serve tests stop it; what it started goes with its group if it does not stop in time.
      serve.child.kill('SIGINT');
      let timer: NodeJS.Timeout | undefined;
      const stopped = await Promise.race([
        serve.done,
        new Promise<undefined>((r) => {
          timer = setTimeout(() => r(undefined), 30_000);
        }),
      ]);
      clearTimeout(timer);
      if (!stopped) killGroup(serve.child.pid);
    }, 40_000);

    for (const example of served) {
      it(label(example), () => runExample(copy.dir, example, 60_000), 70_000);
    }

    // The AWS CLI v1 honours AWS_ENDPOINT_URL_<SERVICE> but for SQS, whose endpoint its `sqs` commands take only as
    // --endpoint-url (local/envFile.ts says why); the SDKs read every one.
    it('lets the AWS CLI reach the served stack with .local/env.sh alone (SQS: and its endpoint as a flag)', async () => {
      if (missing) throw new Error(missing);
      const cli = {
        file: 'test/docs/examples.e2e.test.ts',
        line: 0,
        mode: 'serve' as const,
        body: [
          '. .local/env.sh',
          'aws dynamodb list-tables --output json | grep -q TableNames',
          'aws sqs list-queues --endpoint-url "$AWS_ENDPOINT_URL_SQS" --output json | grep -q QueueUrls',
        ].join('\n'),
      };
      await runExample(copy.dir, cli, 60_000);
    }, 70_000);
  });
});
