// The scaffold end to end, in a throwaway copy of the project: `new-job <name>` writes a job that type-checks, passes
// its own generated tests and synthesizes for prod with cdk-nag, with no edit.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { jobOutputName } from '../../lib/outputs';
import { ENVIRONMENTS_FILE, STACK_CONSTRUCT_IDS, evaluateEnvironments } from '../../scaffold/newJob';
import { jobNames } from '../../scaffold/templates';
import { ProjectCopy, assertSucceeded, copyProject } from '../support/projectCopy';

const NAME = 'invoice-sync';
/** Bounds the whole test: the copy, the scaffold, tsc, the generated tests and one synth (about a minute on 2 cores). */
const TEST_TIMEOUT_MS = 240_000;
/** The local run: a dev synth in the copy, then one cycle of every job. */
const LOCAL_TIMEOUT_MS = 420_000;
const LOCAL_ITEMS = 30;
/** A chaos run of the scaffolded job, at the chaos tests' short timing (about 70 s). */
const CHAOS_TIMEOUT_MS = 300_000;
const CHAOS_OPS = 40;

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

  it('writes a job that type-checks, passes its generated tests and synthesizes for prod with no edit', async () => {
    const scaffold = await copy.run('npx', ['tsx', 'scaffold/cli.ts', NAME], { timeoutMs: 60_000 });
    assertSucceeded('new-job', scaffold);
    expect(scaffold.stdout).toContain(`Wrote job "${NAME}":\n  lambda/jobs/${NAME}/index.ts\n`);

    // Every environment has the job and its table.
    const environmentsPath = join(copy.dir, ENVIRONMENTS_FILE);
    const environments = evaluateEnvironments(readFileSync(environmentsPath, 'utf8'), environmentsPath);
    expect(Object.keys(environments)).toEqual(['dev', 'staging', 'prod']);
    for (const [env, config] of Object.entries(environments)) {
      expect(config.jobs[NAME]?.uses?.tables).toEqual({ items: { ref: 'invoiceSyncItems', discover: 'query', apply: ['get', 'update'] } });
      expect(config.appResources?.tables?.invoiceSyncItems?.tableName).toBe(`${NAME}-items-${env}`);
    }

    // A second run refuses the name, writing nothing.
    const configAfterFirst = readFileSync(environmentsPath, 'utf8');
    const again = await copy.run('npx', ['tsx', 'scaffold/cli.ts', NAME], { timeoutMs: 60_000 });
    expect(again.status).toBe(1);
    expect(again.stderr).toBe(`new-job: job name "${NAME}" breaks the taken rule: lambda/jobs/${NAME} already exists\n`);
    expect(readFileSync(environmentsPath, 'utf8')).toBe(configAfterFirst);

    const tsc = await copy.run('npx', ['tsc', '--noEmit', '-p', '.'], { timeoutMs: 150_000 });
    assertSucceeded('tsc --noEmit', tsc);

    const jest = await copy.run('npx', ['jest', '--rootDir', copy.dir, `test/lambda/jobs/${NAME}`], { timeoutMs: 120_000 });
    assertSucceeded('the generated tests', jest);
    expect(jest.stderr).toMatch(/Test Suites: 2 passed, 2 total/);

    // Its own output folder, so a cdk.out the lead's local-run check synthesizes for dev is left alone.
    const synth = await copy.run('npx', ['cdk', 'synth', '-c', 'env=prod', '--quiet', '--output', 'cdk.out.prod'], { timeoutMs: 180_000 });
    assertSucceeded('cdk synth -c env=prod', synth);

    const template = JSON.parse(readFileSync(join(copy.dir, 'cdk.out.prod', 'PacedJobs-prod.template.json'), 'utf8')) as Template;
    const consumer = Object.entries(template.Resources).find(
      ([id, r]) => r.Type === 'AWS::Lambda::Function' && id.startsWith('InvoiceSyncConsumer'),
    )?.[1];
    const variables = (consumer?.Properties?.Environment as { Variables: Record<string, string> } | undefined)?.Variables;
    expect(variables?.JOB_NAME).toBe(NAME);
    expect(JSON.parse(variables?.JOB_SETTINGS ?? '{}')).toMatchObject({ jobName: NAME, tables: { items: `${NAME}-items-prod` } });
    expect(Object.keys(template.Outputs ?? {})).toContain(jobOutputName(NAME, 'QueueUrl'));
    // Each function may do on the job's table what its code does, and nothing more: discovery queries the pending
    // index (granted by name), apply reads and updates one item.
    const onItems = (role: string) => Object.values(template.Resources)
      .filter((r) => r.Type === 'AWS::IAM::Policy' && String(r.Properties?.PolicyName).startsWith(`InvoiceSync${role}RoleDefaultPolicy`))
      .flatMap((r) => (r.Properties?.PolicyDocument as { Statement: { Action: string | string[]; Resource: unknown }[] }).Statement)
      .filter((st) => JSON.stringify(st.Resource).includes(`table/${NAME}-items-prod`))
      .map((st) => ({ actions: [st.Action].flat().sort(), index: JSON.stringify(st.Resource).match(/index\/([^"]*)/)?.[1] ?? null }));
    expect(onItems('Producer')).toEqual([{ actions: ['dynamodb:Query'], index: 'pending-by-date' }]);
    expect(onItems('Consumer')).toEqual([{ actions: ['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem'], index: null }]);

    // Pins the scaffold's reserved construct IDs: every top-level child of the stack is a job or one of them.
    const topLevel = new Set(
      Object.values(template.Resources)
        .map((r) => String(r.Metadata?.['aws:cdk:path'] ?? '').split('/')[1])
        .filter((id) => id !== undefined && id.length > 0),
    );
    // Every job prod now configures (the examples, any other a user added, and the new one), by construct ID.
    const jobIds = Object.keys(environments.prod.jobs).map((job) => jobNames(job).pascal);
    expect(jobIds).toContain('InvoiceSync');
    expect([...topLevel].filter((id) => !STACK_CONSTRUCT_IDS.includes(id) && !jobIds.includes(id))).toEqual([]);
  }, TEST_TIMEOUT_MS);

  it('runs under npm start, its effects counted at its own table by its fixture', async () => {
    // npm start synthesizes the dev stack in the copy (its cdk.out is not copied); the other jobs run small.
    const start = await copy.run(
      'npm',
      ['start', '--silent', '--', '--json', '--count', `${NAME}=${LOCAL_ITEMS}`, '--payments', '5', '--uploads', '5', '--tenants', '2', '--timeout', '240'],
      { timeoutMs: LOCAL_TIMEOUT_MS },
    );
    assertSucceeded('npm start', start);
    const report = JSON.parse(start.stdout) as { ok: boolean; jobs: Record<string, { discovered: number; completed: number; effects: number; dlq: number; effectsSource: string }> };
    expect(report.ok).toBe(true);
    expect(report.jobs[NAME]).toMatchObject({ discovered: LOCAL_ITEMS, completed: LOCAL_ITEMS, effects: LOCAL_ITEMS, dlq: 0, effectsSource: 'fixture' });
  }, LOCAL_TIMEOUT_MS);

  it('holds the five chaos invariants under faults, its ledger exact', async () => {
    // The timing of test/chaos/chaos.test.ts: a step dead-lettered on purpose reaches the producer DLQ within a minute.
    const timing = ['--rate', '600', '--consumer-timeout', '8', '--producer-kill-rate', '0.5', '--producer-timeout', '25', '--admission-horizon', '2', '--admission-visibility', '28', '--admission-max-receives', '2', '--timeout', '200'];
    const chaos = await copy.run('npm', ['run', '--silent', 'chaos', '--', '--job', NAME, '--ops', String(CHAOS_OPS), '--seed', '5', '--json', ...timing], { timeoutMs: CHAOS_TIMEOUT_MS });
    assertSucceeded('npm run chaos', chaos);
    const result = JSON.parse(chaos.stdout) as { ok: boolean; invariants: Record<string, { ok: boolean }>; faultsInjected: Record<string, number> };
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
  }, CHAOS_TIMEOUT_MS);
});
