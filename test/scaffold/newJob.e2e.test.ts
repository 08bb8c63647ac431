// The scaffold end to end, in a throwaway copy of the project: `new-job <name>` writes a job that type-checks, passes
// its own generated tests and synthesizes for prod with cdk-nag, with no edit; `npm run test:chaos` then runs it under
// npm start and chaos.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { jobOutputName } from '../../lib/outputs';
import { ENVIRONMENTS_FILE, STACK_CONSTRUCT_IDS, evaluateEnvironments } from '../../scaffold/newJob';
import { jobNames } from '../../scaffold/templates';
import { type ProjectCopy, assertSucceeded, copyProject } from '../support/projectCopy';

const NAME = 'invoice-sync';
/** Bounds the whole test: the copy, the scaffold, then tsc, the generated tests and one synth side by side. */
const TEST_TIMEOUT_MS = 240_000;
/** The local run: one cycle of every job. */
const LOCAL_TIMEOUT_MS = 420_000;
const LOCAL_ITEMS = 30;
/** A chaos run of the scaffolded job, at the chaos tests' short timing. */
const CHAOS_TIMEOUT_MS = 300_000;
const CHAOS_OPS = 40;
/** `npm run test:chaos` (CHAOS_FULL=1) also runs the new job under npm start and chaos (a producer step dead-lettered too). */
const FULL = process.env.CHAOS_FULL === '1';

/**
 * The prod synth, as `cdk synth -c env=prod` runs bin/app.ts (cdk.json's context, the path and asset metadata the CLI
 * turns on, cdk-nag, an error annotation fails it), but without bundling the functions (`aws:cdk:bundling-stacks`,
 * which the CLI does not take on its command line): what is checked here is the template; the new job's bundles are
 * built by the dev synth of npm start below and run there.
 */
const SYNTH_PROD_WITHOUT_BUNDLING = `
const { readFileSync } = require('node:fs');
const { App } = require('aws-cdk-lib');
const { buildApp } = require('./bin/app');
const context = {
  ...JSON.parse(readFileSync('cdk.json', 'utf8')).context,
  env: 'prod',
  'aws:cdk:enable-path-metadata': true,
  'aws:cdk:enable-asset-metadata': true,
  'aws:cdk:bundling-stacks': [],
};
const assembly = buildApp(new App({ outdir: 'cdk.out.prod', context })).app.synth();
const errors = assembly.stacks.flatMap((s) => s.messages.filter((m) => m.level === 'error').map((m) => m.id + ': ' + m.entry.data));
if (errors.length > 0) {
  process.stderr.write(errors.join('\\n') + '\\n');
  process.exit(1);
}
`;

interface Template {
  Resources: Record<string, { Type: string; Properties?: Record<string, unknown>; Metadata?: Record<string, unknown> }>;
  Outputs?: Record<string, unknown>;
}

describe('Command: new-job, in a copy of the project', () => {
  let copy: ProjectCopy;
  beforeAll(() => {
    copy = copyProject({ prefix: 'new-job-e2e-' });
  });
  afterAll(() => copy?.remove());

  it(
    'writes a job that type-checks, passes its generated tests and synthesizes for prod with no edit',
    async () => {
      const scaffold = await copy.run('npx', ['tsx', 'scaffold/cli.ts', NAME], { timeoutMs: 60_000 });
      assertSucceeded('new-job', scaffold);
      expect(scaffold.stdout).toContain(`Wrote job "${NAME}":\n  lambda/jobs/${NAME}/index.ts\n`);

      // Every environment has the job and its table.
      const environmentsPath = join(copy.dir, ENVIRONMENTS_FILE);
      const environments = evaluateEnvironments(readFileSync(environmentsPath, 'utf8'), environmentsPath);
      expect(Object.keys(environments)).toEqual(['dev', 'staging', 'prod']);
      for (const [env, config] of Object.entries(environments)) {
        expect(config.jobs[NAME]?.uses?.tables).toEqual({
          items: { ref: 'invoiceSyncItems', discover: 'query', apply: ['get', 'update'] },
        });
        expect(config.appResources?.tables?.invoiceSyncItems?.tableName).toBe(`${NAME}-items-${env}`);
      }

      // A second run refuses the name, writing nothing.
      const configAfterFirst = readFileSync(environmentsPath, 'utf8');
      const again = await copy.run('npx', ['tsx', 'scaffold/cli.ts', NAME], { timeoutMs: 60_000 });
      expect(again.status).toBe(1);
      expect(again.stderr).toBe(
        `new-job: job name "${NAME}" breaks the taken rule: lambda/jobs/${NAME} already exists\n`,
      );
      expect(readFileSync(environmentsPath, 'utf8')).toBe(configAfterFirst);

      // Independent checks of the written job, side by side, so they use both cores of a CI machine: with them, in the
      // full run, the dev synth (bundled) that npm start below would otherwise run first, into the cdk.out it reads.
      const [tsc, jest, synth, devSynth] = await Promise.all([
        copy.run('npx', ['tsc', '--noEmit', '-p', '.'], { timeoutMs: 150_000 }),
        copy.run('npx', ['jest', '--rootDir', copy.dir, `lambda/jobs/${NAME}`], { timeoutMs: 120_000 }),
        // Its own output folder, so the dev synth's cdk.out is left alone.
        copy.run('npx', ['tsx', '-e', SYNTH_PROD_WITHOUT_BUNDLING], { timeoutMs: 180_000 }),
        FULL
          ? copy.run('npx', ['cdk', 'synth', '-c', 'env=dev', '--quiet', '--output', 'cdk.out'], { timeoutMs: 180_000 })
          : undefined,
      ]);
      assertSucceeded('tsc --noEmit', tsc);
      assertSucceeded('the generated tests', jest);
      expect(jest.stderr).toMatch(/Test Suites: 2 passed, 2 total/);
      assertSucceeded('synth -c env=prod (cdk-nag on, bundling off)', synth);
      if (devSynth) assertSucceeded('cdk synth -c env=dev', devSynth);

      const template = JSON.parse(
        readFileSync(join(copy.dir, 'cdk.out.prod', 'PacedJobs-prod.template.json'), 'utf8'),
      ) as Template;
      const consumer = Object.entries(template.Resources).find(
        ([id, r]) => r.Type === 'AWS::Lambda::Function' && id.startsWith('InvoiceSyncConsumer'),
      )?.[1];
      const variables = (consumer?.Properties?.Environment as { Variables: Record<string, string> } | undefined)
        ?.Variables;
      expect(variables?.JOB_NAME).toBe(NAME);
      expect(JSON.parse(variables?.JOB_SETTINGS ?? '{}')).toMatchObject({
        jobName: NAME,
        tables: { items: `${NAME}-items-prod` },
      });
      expect(Object.keys(template.Outputs ?? {})).toContain(jobOutputName(NAME, 'QueueUrl'));
      // Each function may do on the job's table what its code does, and nothing more: discovery queries the pending
      // index (granted by name), apply reads and updates one item.
      const onItems = (role: string) =>
        Object.values(template.Resources)
          .filter(
            (r) =>
              r.Type === 'AWS::IAM::Policy' &&
              String(r.Properties?.PolicyName).startsWith(`InvoiceSync${role}RoleDefaultPolicy`),
          )
          .flatMap(
            (r) =>
              (
                r.Properties?.PolicyDocument as
                  | { Statement: { Action: string | string[]; Resource: unknown }[] }
                  | undefined
              )?.Statement ?? [],
          )
          .filter((st) => JSON.stringify(st.Resource).includes(`table/${NAME}-items-prod`))
          .map((st) => ({
            actions: [st.Action].flat().sort(),
            index: JSON.stringify(st.Resource).match(/index\/([^"]*)/)?.[1] ?? null,
          }));
      expect(onItems('Producer')).toEqual([{ actions: ['dynamodb:Query'], index: 'pending-by-date' }]);
      expect(onItems('Consumer')).toEqual([
        { actions: ['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem'], index: null },
      ]);

      // Pins the scaffold's reserved construct IDs: every child of the stack, and of its PacedJobs (ID "Default", which
      // CDK leaves out of logical IDs, so the jobs' IDs share one namespace with the stack's own), is a job or one of them.
      const topLevel = new Set(
        Object.values(template.Resources)
          .map((r) => String(r.Metadata?.['aws:cdk:path'] ?? '').split('/'))
          .map((path) => (path[1] === 'Default' ? path[2] : path[1]))
          .filter((id) => id !== undefined && id.length > 0),
      );
      // Every job prod now configures (the examples, any other a user added, and the new one), by construct ID.
      const jobIds = Object.keys(environments.prod.jobs).map((job) => jobNames(job).pascal);
      expect(jobIds).toContain('InvoiceSync');
      expect([...topLevel].filter((id) => !STACK_CONSTRUCT_IDS.includes(id) && !jobIds.includes(id))).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  // Only in `npm run test:chaos` (CHAOS_FULL=1), with the chaos run below: a bundled dev synth of the whole copy and a
  // local run, about 40 s of the suite's CPU on a 2-core machine where the suite is CPU-bound. What it proves stays
  // proven on every `npm test`: the generated tests above run the job's discovery, apply and fixture on local
  // DynamoDB; a job of a team's own runs bundled under `paced-jobs start` (test/package/pack.e2e.test.ts) and a
  // hand-written one under npm start (test/local/ownJob.e2e.test.ts).
  if (FULL)
    it(
      'runs under npm start, its effects counted at its own table by its fixture',
      async () => {
        // npm start runs the dev stack the first test synthesized in the copy (bundled: the new job's functions run as
        // bundles); the other jobs (the examples, whichever are left) run small.
        const environmentsPath = join(copy.dir, ENVIRONMENTS_FILE);
        const others = Object.keys(
          evaluateEnvironments(readFileSync(environmentsPath, 'utf8'), environmentsPath).dev.jobs,
        ).filter((job) => job !== NAME);
        const start = await copy.run(
          'npm',
          [
            'start',
            '--silent',
            '--',
            '--json',
            '--count',
            `${NAME}=${LOCAL_ITEMS}`,
            ...others.flatMap((job) => ['--count', `${job}=2`]),
            '--timeout',
            '240',
          ],
          { timeoutMs: LOCAL_TIMEOUT_MS },
        );
        assertSucceeded('npm start', start);
        const report = JSON.parse(start.stdout) as {
          ok: boolean;
          jobs: Record<
            string,
            { discovered: number; completed: number; effects: number; dlq: number; effectsSource: string }
          >;
        };
        expect(report.ok).toBe(true);
        expect(report.jobs[NAME]).toMatchObject({
          discovered: LOCAL_ITEMS,
          completed: LOCAL_ITEMS,
          effects: LOCAL_ITEMS,
          dlq: 0,
          effectsSource: 'fixture',
        });
      },
      LOCAL_TIMEOUT_MS,
    );

  // Only in `npm run test:chaos` (CHAOS_FULL=1): the chaos harness and the runtime's invariants are run on every
  // `npm test` by test/chaos/chaos.test.ts, and the scaffolded job's own safety (a second apply finds its item done,
  // its fixture counts each effect once) by its generated tests above and its npm start run; this chaos run of the
  // copy cost about 45 s of the suite's CPU on a 2-core machine where the suite is CPU-bound.
  if (FULL)
    it(
      'holds the five chaos invariants under faults, its ledger exact',
      async () => {
        // The timing of test/chaos/chaos.test.ts: a step dead-lettered on purpose reaches the producer DLQ within a minute.
        const timing = [
          '--rate',
          '600',
          '--consumer-timeout',
          '8',
          '--producer-kill-rate',
          '0.5',
          '--producer-timeout',
          '25',
          '--admission-horizon',
          '2',
          '--admission-visibility',
          '28',
          '--admission-max-receives',
          '2',
          '--timeout',
          '200',
        ];
        const chaos = await copy.run(
          'npm',
          [
            'run',
            '--silent',
            'chaos',
            '--',
            '--job',
            NAME,
            '--ops',
            String(CHAOS_OPS),
            '--seed',
            '5',
            '--json',
            ...timing,
          ],
          {
            timeoutMs: CHAOS_TIMEOUT_MS,
          },
        );
        assertSucceeded('npm run chaos', chaos);
        const result = JSON.parse(chaos.stdout) as {
          ok: boolean;
          invariants: Record<string, { ok: boolean }>;
          faultsInjected: Record<string, number>;
        };
        expect(Object.fromEntries(Object.entries(result.invariants).map(([k, v]) => [k, v.ok]))).toEqual({
          effectsEqualUniqueOperations: true,
          nothingLost: true,
          rateRespected: true,
          onlyTerminalFailuresInDlq: true,
          ledgerExact: true,
        });
        expect(result.ok).toBe(true);
        // Faults were injected, or the invariants prove nothing.
        expect(Object.values(result.faultsInjected).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
      },
      CHAOS_TIMEOUT_MS,
    );
});
