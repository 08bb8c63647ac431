import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DeleteItemCommand, DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { effectiveKeyLimit, keyLimitOverrideSchema, MAX_OVERRIDES } from '../../../lambda/core/keyLimits';
import { createClients } from '../../../ops/clients';
import type { CommandContext } from '../../../ops/context';
import { KeyLimitsError } from '../../../ops/errors';
import type { OpsIo } from '../../../ops/io';
import {
  deployedPacing,
  type LimitsClearResult,
  type LimitsListResult,
  limitsSet,
  type LimitsSetResult,
} from '../../../ops/commands/limits';
import { LocalEndpointsSource } from '../../../ops/resources';
import { CREDENTIALS, type OpsFixture, REGION, startOpsFixture, TARGET } from '../fixture';

const NOW = new Date('2026-11-03T09:30:00.000Z');
/** alpha's deployed per-key default: a documented 10 per minute per merchant, at headroom 0.8. */
const PER_KEY = { field: 'merchantId', startsPerInterval: 8, intervalSeconds: 60, burst: 2, headroom: 0.8 };
const ITEM = 'LIMITS#alpha';
/** Both jobs' job-wide pacing as the fixture deploys it: 60 a minute, a cap of 2, no admission, every default. */
const DEPLOYED_PACING = {
  startsPerInterval: 60,
  intervalSeconds: 60,
  burst: 1,
  concurrency: 2,
  shortWaitMs: 10_000,
  safetyMarginMs: 250,
  adaptiveRate: true,
  enabled: true,
};
const fakeRuntimeSettings = () => ({
  jobName: 'alpha',
  pageSize: 100,
  maxPagesPerRun: 10,
  maxMessageBytes: 4096,
  businessDateOffsetDays: -1,
  timeZone: 'UTC',
  rateLimit: { startsPerInterval: 60, intervalSeconds: 60, burst: 1 },
  concurrency: 2,
  tables: {},
  buckets: {},
  secrets: {},
  settings: {},
});

describe('Functions: limitsList, limitsSet, limitsClear (ops limits)', () => {
  let f: OpsFixture;
  let raw: DynamoDBClient;

  /** The LIMITS item exactly as the consumer reads it: attribute types included. */
  const storedItem = async () =>
    (
      await raw.send(
        new GetItemCommand({ TableName: f.tables.limiter, Key: { pk: { S: ITEM } }, ConsistentRead: true }),
      )
    ).Item;
  const storedOverrides = async () => {
    const item = await storedItem();
    return item ? (unmarshall(item).overrides as Record<string, unknown>) : undefined;
  };
  const set = (key: string, ...flags: string[]) =>
    f.run(['limits', 'set', '--job', 'alpha', '--key', key, ...flags, '--yes', '--json'], { now: NOW });

  beforeAll(async () => {
    f = await startOpsFixture(['alpha', 'beta'], { perKey: { alpha: PER_KEY } });
    raw = new DynamoDBClient({ endpoint: f.aws.dynamodb.endpoint, region: REGION, credentials: CREDENTIALS });
  });
  afterAll(async () => {
    raw.destroy();
    await f.stop();
  });
  afterEach(async () => {
    await raw.send(new DeleteItemCommand({ TableName: f.tables.limiter, Key: { pk: { S: ITEM } } }));
  });

  it('lists the deployed default and no overrides on a job that has none', async () => {
    const out = await f.run(['limits', 'list', '--job', 'alpha', '--json']);

    expect(out.code).toBe(0);
    expect(out.json<LimitsListResult>()).toEqual({
      ok: true,
      command: 'limits list',
      job: 'alpha',
      table: 'ops-test-limiter',
      pacing: DEPLOYED_PACING,
      default: PER_KEY,
      overrides: [],
      maxOverrides: MAX_OVERRIDES,
    });
    const text = await f.run(['limits', 'list', '--job', 'alpha']);
    expect(text.stdout).toBe(
      'pacing alpha: 60 starts per 60 s (after headroom), burst 1, concurrency 2; admission off, short wait 10 s (set in pacing, or derived from the rate at synthesis), safety margin 250 ms\n' +
        'limits alpha: per key of field "merchantId", default 8 per 60 s, burst 2 (after headroom 0.8, as deployed)\n' +
        'no overrides: every key has the default\n' +
        `0 of at most ${MAX_OVERRIDES} overrides; an override's starts is the key's documented quota (unset fields take the default's), ` +
        'and the per-key headroom (0.8) applies\n',
    );
  });

  it('shows a job without per-key limits its job-wide pacing, as deployed, and no overrides', async () => {
    const out = await f.run(['limits', 'list', '--job', 'beta', '--json']);
    expect(out.code).toBe(0);
    expect(out.json<LimitsListResult>()).toEqual({
      ok: true,
      command: 'limits list',
      job: 'beta',
      table: 'ops-test-limiter',
      pacing: DEPLOYED_PACING,
      overrides: [],
      maxOverrides: MAX_OVERRIDES,
    });
    expect((await f.run(['limits', 'list', '--job', 'beta'])).stdout).toContain(
      "no per-key limits: add pacing.perKey to the job's config",
    );
  });

  it('shows the batching a job was deployed with: its batch, window, short wait and safety margin', () => {
    const settings = {
      ...fakeRuntimeSettings(),
      admission: { horizonSeconds: 300, batchSize: 20, batchingWindowSeconds: 1 },
      pacing: { shortWaitMs: 16_000, safetyMarginMs: 400 },
    };
    expect(deployedPacing(settings)).toMatchObject({
      batchSize: 20,
      batchingWindowSeconds: 1,
      shortWaitMs: 16_000,
      safetyMarginMs: 400,
      enabled: true,
      adaptiveRate: true,
    });
  });

  it('sets an override, stores it as the consumer reads it, and lists it with its effective limit', async () => {
    const out = await set('acme', '--starts', '100', '--burst', '4');

    expect(out.code).toBe(0);
    const override = { starts: 100, burst: 4, setAt: NOW.toISOString(), setBy: 'local' };
    expect(out.json<LimitsSetResult>()).toEqual({
      ok: true,
      command: 'limits set',
      dryRun: false,
      job: 'alpha',
      key: 'acme',
      table: 'ops-test-limiter',
      default: PER_KEY,
      override,
      effective: { startsPerInterval: 80, intervalSeconds: 60, burst: 4 },
      written: true,
      effectiveWithin: '30 s',
    });
    expect(out.stderr).toBe(
      `set the override of key "acme" on job alpha: 100 starts per 60 s, burst 4 (enforced after headroom 0.8: 80 per 60 s, burst 4) on ${TARGET} (confirmed by --yes)\n` +
        'limits: key "acme" on alpha set to 100 starts per 60 s, burst 4; the consumers enforce 80 per 60 s, burst 4 within 30 s\n',
    );
    // The item's shape is the contract with the consumer: a map of key -> override, numbers as numbers.
    expect(await storedItem()).toEqual({
      pk: { S: ITEM },
      overrides: {
        M: {
          acme: {
            M: {
              starts: { N: '100' },
              burst: { N: '4' },
              setAt: { S: '2026-11-03T09:30:00.000Z' },
              setBy: { S: 'local' },
            },
          },
        },
      },
    });
    const stored = await storedOverrides();
    expect(keyLimitOverrideSchema.parse(stored!.acme)).toEqual(override);

    await set('zeta-corp', '--starts', '30', '--interval-seconds', '10');
    const list = await f.run(['limits', 'list', '--job', 'alpha', '--json']);
    expect(list.code).toBe(0);
    expect(list.json<LimitsListResult>().overrides).toEqual([
      { key: 'acme', override, effective: { startsPerInterval: 80, intervalSeconds: 60, burst: 4 } },
      {
        key: 'zeta-corp',
        override: { starts: 30, intervalSeconds: 10, setAt: NOW.toISOString(), setBy: 'local' },
        effective: effectiveKeyLimit(PER_KEY, { starts: 30, intervalSeconds: 10, setAt: NOW.toISOString() }),
      },
    ]);
    expect(list.json<LimitsListResult>().overrides[1].effective).toEqual({
      startsPerInterval: 24,
      intervalSeconds: 10,
      burst: 2,
    });
    const lines = (await f.run(['limits', 'list', '--job', 'alpha'])).stdout
      .split('\n')
      .map((l) => l.replace(/\s+/g, ' '));
    expect(lines).toContain('│ acme │ 100 │ - │ 4 │ 80 per 60 s, burst 4 │ 2026-11-03T09:30:00.000Z │ local │');
    expect(lines).toContain('│ zeta-corp │ 30 │ 10 │ - │ 24 per 10 s, burst 2 │ 2026-11-03T09:30:00.000Z │ local │');
    expect(lines).toContain(
      `2 of at most ${MAX_OVERRIDES} overrides; an override's starts is the key's documented quota (unset fields take the default's), and the per-key headroom (0.8) applies`,
    );
  });

  it('replaces the whole override when a key is set again', async () => {
    await set('acme', '--starts', '100', '--burst', '4');

    const out = await f.run(
      ['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '50', '--interval-seconds', '30', '--yes'],
      { now: NOW },
    );

    expect(out.code).toBe(0);
    // The burst of the first override is gone: an override is one document, not a patch.
    expect(await storedOverrides()).toEqual({
      acme: { starts: 50, intervalSeconds: 30, setAt: NOW.toISOString(), setBy: 'local' },
    });
    const lines = out.stdout.split('\n').map((l) => l.replace(/\s+/g, ' '));
    expect(lines[0]).toBe('limits set alpha "acme"');
    expect(lines).toContain('│ default (enforced) │ 8 │ 60 │ 2 │ - │ - │');
    expect(lines).toContain('│ previous override │ 100 │ - │ 4 │ 2026-11-03T09:30:00.000Z │ local │');
    expect(lines).toContain('│ override │ 50 │ 30 │ - │ 2026-11-03T09:30:00.000Z │ local │');
    expect(lines).toContain('│ enforced │ 40 │ 30 │ 2 │ - │ - │');
    expect(lines).toContain(
      'every consumer enforces it within 30 s; `ops limits list --job alpha` shows every override',
    );
  });

  it('clears an override, and the list then shows none', async () => {
    await set('acme', '--starts', '100');
    await set('globex', '--starts', '20');

    const out = await f.run(['limits', 'clear', '--job', 'alpha', '--key', 'acme', '--yes', '--json']);

    expect(out.code).toBe(0);
    expect(out.json<LimitsClearResult>()).toEqual({
      ok: true,
      command: 'limits clear',
      dryRun: false,
      job: 'alpha',
      key: 'acme',
      table: 'ops-test-limiter',
      default: PER_KEY,
      previous: { starts: 100, setAt: NOW.toISOString(), setBy: 'local' },
      effective: { startsPerInterval: 8, intervalSeconds: 60, burst: 2 },
      cleared: true,
      effectiveWithin: '30 s',
    });
    expect(out.stderr).toBe(
      `clear the override of key "acme" on job alpha (back to the default: 8 per 60 s, burst 2) on ${TARGET} (confirmed by --yes)\n` +
        'limits: key "acme" on alpha cleared; the consumers enforce the default within 30 s\n',
    );
    expect(await storedOverrides()).toEqual({ globex: { starts: 20, setAt: NOW.toISOString(), setBy: 'local' } });

    expect((await f.run(['limits', 'clear', '--job', 'alpha', '--key', 'globex', '--yes'])).code).toBe(0);
    const list = await f.run(['limits', 'list', '--job', 'alpha', '--json']);
    expect(list.json<LimitsListResult>().overrides).toEqual([]);
    // The map stays, empty: the consumer reads no overrides from it.
    expect(await storedItem()).toEqual({ pk: { S: ITEM }, overrides: { M: {} } });
  });

  it('says so and changes nothing when the key has no override', async () => {
    await set('acme', '--starts', '100');
    const before = await storedItem();

    const out = await f.run(['limits', 'clear', '--job', 'alpha', '--key', 'initech']);

    // No --yes and no terminal, yet no refusal: there is nothing to change.
    expect(out.code).toBe(0);
    expect(out.stderr).toBe('limits: key "initech" on alpha has no override; nothing to clear (it has the default)\n');
    expect(out.stdout).toBe(
      'limits clear alpha "initech"\nkey "initech" has no override: nothing changed; it has the default, 8 per 60 s, burst 2\n',
    );
    expect(await storedItem()).toEqual(before);

    const json = await f.run(['limits', 'clear', '--job', 'alpha', '--key', 'initech', '--json']);
    expect(json.json<LimitsClearResult>()).toMatchObject({
      cleared: false,
      effective: { startsPerInterval: 8, intervalSeconds: 60, burst: 2 },
    });
    expect(json.json<LimitsClearResult>()).not.toHaveProperty('previous');
  });

  it.each([
    [
      'an unknown job',
      ['limits', 'set', '--job', 'gamma', '--key', 'acme', '--starts', '10'],
      'unknown job "gamma"; PacedJobs-test has: alpha, beta',
    ],
    [
      '--starts 0',
      ['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '0'],
      '--starts must be a whole number from 1 to 1000000, got "0"',
    ],
    [
      '--starts -3',
      ['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '-3'],
      '--starts must be a whole number from 1 to 1000000, got "-3"',
    ],
    [
      '--starts 2.5',
      ['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '2.5'],
      '--starts must be a whole number from 1 to 1000000, got "2.5"',
    ],
    [
      '--interval-seconds 3601',
      ['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '10', '--interval-seconds', '3601'],
      '--interval-seconds must be a whole number from 1 to 3600, got "3601"',
    ],
    [
      'a burst above --starts',
      ['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '10', '--burst', '11'],
      '--burst must be a whole number from 1 to 10, got "11"',
    ],
    [
      'an empty key',
      ['limits', 'set', '--job', 'alpha', '--key', '', '--starts', '10'],
      '--key must be 1 to 256 characters with no control characters, got ""',
    ],
    [
      'a key with a control character',
      ['limits', 'clear', '--job', 'alpha', '--key', 'ac\nme'],
      '--key must be 1 to 256 characters with no control characters, got "ac\\nme"',
    ],
    [
      'a key longer than 256 characters',
      ['limits', 'set', '--job', 'alpha', '--key', 'k'.repeat(257), '--starts', '10'],
      `--key must be 1 to 256 characters with no control characters, got "${'k'.repeat(257)}"`,
    ],
    [
      'a job with no per-key limit (set)',
      ['limits', 'set', '--job', 'beta', '--key', 'acme', '--starts', '10'],
      'job beta has no per-key rate limit: add pacing.perKey to its config and deploy',
    ],
    [
      'a job with no per-key limit (clear)',
      ['limits', 'clear', '--job', 'beta', '--key', 'acme'],
      'job beta has no per-key rate limit: add pacing.perKey to its config and deploy',
    ],
  ])('refuses %s with exit code 2, and writes nothing', async (_, argv, message) => {
    const out = await f.run([...argv, ...(argv[1] === 'list' ? [] : ['--yes']), '--json'], { now: NOW });

    expect(out.code).toBe(2);
    expect(out.stderr).toBe(`error: ${message}\n`);
    expect(out.json()).toEqual({ ok: false, error: { name: 'UsageError', message, exitCode: 2 } });
    expect(await storedItem()).toBeUndefined();
  });

  it('lists a stored override that is not valid as invalid, with the default it gets and a warning', async () => {
    await f.dynamo.send(
      new PutCommand({
        TableName: f.tables.limiter,
        Item: { pk: ITEM, overrides: { acme: { starts: 0, setAt: NOW.toISOString() } } },
      }),
    );

    const out = await f.run(['limits', 'list', '--job', 'alpha', '--json']);

    expect(out.code).toBe(0);
    // The consumer skips an entry that does not parse (lambda/adapters/keyRateLimiter.ts): the key has the default.
    expect(out.json<LimitsListResult>().overrides).toEqual([
      {
        key: 'acme',
        override: { starts: 0, setAt: NOW.toISOString() },
        effective: { startsPerInterval: 8, intervalSeconds: 60, burst: 2 },
        invalid: 'starts: Too small: expected number to be >0',
      },
    ]);
    expect(out.stderr).toBe(
      'limits: the override of key "acme" on alpha is not valid (starts: Too small: expected number to be >0): the consumers skip it and apply the default; set it again or clear it\n',
    );
    const lines = (await f.run(['limits', 'list', '--job', 'alpha'])).stdout
      .split('\n')
      .map((l) => l.replace(/\s+/g, ' '));
    expect(lines).toContain(
      '│ acme │ 0 │ - │ - │ invalid, so the default: 8 per 60 s, burst 2 │ 2026-11-03T09:30:00.000Z │ - │',
    );
  });

  it('needs --starts for set', async () => {
    const out = await f.run(['limits', 'set', '--job', 'alpha', '--key', 'acme', '--yes']);

    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/^error: required option '--starts <n>' not specified\n/);
  });

  it('prints the change and makes none with --dry-run', async () => {
    const setOut = await f.run(
      ['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '100', '--dry-run', '--json'],
      { now: NOW },
    );

    expect(setOut.code).toBe(0);
    expect(setOut.json<LimitsSetResult>()).toMatchObject({
      dryRun: true,
      written: false,
      override: { starts: 100 },
      effective: { startsPerInterval: 80 },
    });
    expect(await storedItem()).toBeUndefined();
    const text = await f.run(['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '100', '--dry-run'], {
      now: NOW,
    });
    expect(text.stdout.split('\n')[0]).toBe('limits set alpha "acme" (dry run: nothing written)');
    expect(text.stdout).toContain('once written, every consumer would enforce it within 30 s\n');

    await set('acme', '--starts', '100');
    const before = await storedItem();
    const clearOut = await f.run(['limits', 'clear', '--job', 'alpha', '--key', 'acme', '--dry-run', '--json']);
    expect(clearOut.code).toBe(0);
    expect(clearOut.json<LimitsClearResult>()).toMatchObject({
      dryRun: true,
      cleared: false,
      previous: { starts: 100 },
    });
    expect(await storedItem()).toEqual(before);
  });

  it('refuses to change without --yes when stdin is not a TTY, and writes nothing', async () => {
    const setOut = await f.run(
      ['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '100', '--burst', '4'],
      { now: NOW },
    );

    expect(setOut.code).toBe(1);
    expect(setOut.stderr).toBe(
      'error: refusing to set the override of key "acme" on job alpha: 100 starts per 60 s, burst 4 (enforced after headroom 0.8: 80 per 60 s, burst 4) ' +
        `on ${TARGET} without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview\n`,
    );
    expect(await storedItem()).toBeUndefined();

    await set('acme', '--starts', '100');
    const before = await storedItem();
    const clearOut = await f.run(['limits', 'clear', '--job', 'alpha', '--key', 'acme']);
    expect(clearOut.code).toBe(1);
    expect(clearOut.stderr).toBe(
      `error: refusing to clear the override of key "acme" on job alpha (back to the default: 8 per 60 s, burst 2) on ${TARGET} without confirmation: ` +
        'stdin is not a TTY; pass --yes to confirm, or --dry-run to preview\n',
    );
    expect(await storedItem()).toEqual(before);
  });

  it('asks on a terminal, and replaces the override only when confirmed', async () => {
    await set('acme', '--starts', '100');
    f.prompts.length = 0;

    const declined = await f.run(['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '20'], {
      interactive: true,
      answers: ['n'],
      now: NOW,
    });
    expect(declined.code).toBe(1);
    expect(f.prompts).toEqual([
      `replace the override of key "acme" on job alpha: 20 starts per 60 s, burst 2 (enforced after headroom 0.8: 16 per 60 s, burst 2) on ${TARGET}? [y/N] `,
    ]);
    expect(await storedOverrides()).toEqual({ acme: { starts: 100, setAt: NOW.toISOString(), setBy: 'local' } });

    const confirmed = await f.run(['limits', 'set', '--job', 'alpha', '--key', 'acme', '--starts', '20'], {
      interactive: true,
      answers: ['y'],
      now: NOW,
    });
    expect(confirmed.code).toBe(0);
    expect(await storedOverrides()).toEqual({ acme: { starts: 20, setAt: NOW.toISOString(), setBy: 'local' } });
  });

  it(`refuses a new key past ${MAX_OVERRIDES} overrides, and still replaces an existing one`, async () => {
    const full = Object.fromEntries(
      Array.from({ length: MAX_OVERRIDES }, (_, i) => [
        `m-${String(i).padStart(4, '0')}`,
        { starts: 5, setAt: NOW.toISOString() },
      ]),
    );
    await f.dynamo.send(new PutCommand({ TableName: f.tables.limiter, Item: { pk: ITEM, overrides: full } }));

    const out = await set('one-more', '--starts', '10');

    expect(out.code).toBe(1);
    const message =
      `job alpha already keeps ${MAX_OVERRIDES} per-key overrides, the most one job may (${MAX_OVERRIDES}); clear one it no longer needs ` +
      '(`ops limits list --job alpha`), or raise pacing.perKey in its config for every key';
    expect(out.stderr).toBe(`error: ${message}\n`);
    expect(out.json()).toEqual({
      ok: false,
      error: { name: 'KeyLimitsError', message, job: 'alpha', key: 'one-more', overrides: MAX_OVERRIDES, exitCode: 1 },
    });

    expect((await set('m-0007', '--starts', '10')).code).toBe(0);
    const stored = await storedOverrides();
    expect(Object.keys(stored!)).toHaveLength(MAX_OVERRIDES);
    expect(stored!['m-0007']).toEqual({ starts: 10, setAt: NOW.toISOString(), setBy: 'local' });
  });

  it('fails with the missing output named when the stack has no limiter table output', async () => {
    const { LimiterTableName: _, ...outputs } = f.endpointsDoc.outputs;
    const file = join(f.dir, 'no-limiter.json');
    writeFileSync(file, JSON.stringify({ ...f.endpointsDoc, outputs }));

    const out = await f.run(['limits', 'list', '--job', 'alpha', '--json'], { endpointsFile: file });

    expect(out.code).toBe(1);
    const message =
      'PacedJobs-test lacks the output LimiterTableName: the per-key overrides live in the limiter table, so the limits commands need it (deploy the stack again)';
    expect(out.stderr).toBe(`error: ${message}\n`);
    expect(out.json()).toEqual({
      ok: false,
      error: { name: 'ResourceDiscoveryError', message, source: 'PacedJobs-test', exitCode: 1 },
    });
    // Every other command still loads that stack.
    expect((await f.run(['dlq', 'peek', '--job', 'alpha', '--json'], { endpointsFile: file })).code).toBe(0);
  });

  describe('Function: limitsSet', () => {
    const quietIo = (): OpsIo => ({
      stdout: () => undefined,
      stderr: () => undefined,
      interactive: false,
      ask: async () => '',
      now: () => NOW,
      sleep: async () => undefined,
    });

    /** The local stack's context, as if deployed (source `cloudformation`), with STS answering `arn`. */
    const deployedContext = async (
      arn: string,
    ): Promise<{ ctx: CommandContext; stsSend: jest.Mock; destroy(): void }> => {
      const resources = await new LocalEndpointsSource(f.endpointsFile).load();
      const clients = createClients(resources.clients);
      const stsSend = jest.fn().mockResolvedValue({ Arn: arn, Account: '000000000000', UserId: 'AROAEXAMPLE:jane' });
      return {
        ctx: {
          resources: { ...resources, source: 'cloudformation' },
          clients: { ...clients, sts: { send: stsSend } },
          io: quietIo(),
        },
        stsSend,
        destroy: () => clients.destroy(),
      };
    };

    it("records the caller's ARN (STS GetCallerIdentity) as setBy on a deployed stack", async () => {
      const arn = 'arn:aws:sts::000000000000:assumed-role/Operator/jane';
      const { ctx, stsSend, destroy } = await deployedContext(arn);
      try {
        const result = await limitsSet(ctx, { job: 'alpha', key: 'acme', starts: 100, yes: true });

        expect(result.override).toEqual({ starts: 100, setAt: NOW.toISOString(), setBy: arn });
        expect(stsSend).toHaveBeenCalledTimes(1);
        expect((await f.dynamo.send(new GetCommand({ TableName: f.tables.limiter, Key: { pk: ITEM } }))).Item).toEqual({
          pk: ITEM,
          overrides: { acme: { starts: 100, setAt: NOW.toISOString(), setBy: arn } },
        });
      } finally {
        destroy();
      }
    });

    it('refuses a new key when the map filled up after its read (the write is conditional on its size)', async () => {
      const full = Object.fromEntries(
        Array.from({ length: MAX_OVERRIDES }, (_, i) => [`m-${i}`, { starts: 5, setAt: NOW.toISOString() }]),
      );
      await f.dynamo.send(new PutCommand({ TableName: f.tables.limiter, Item: { pk: ITEM, overrides: full } }));
      const { ctx, destroy } = await deployedContext('arn:aws:iam::000000000000:user/jane');
      // The first read sees an empty map, as a read just before another operator filled it would.
      let reads = 0;
      const send = ctx.clients.dynamo.send.bind(ctx.clients.dynamo) as (command: unknown) => Promise<unknown>;
      const stale = {
        send: async (command: unknown) =>
          command instanceof GetCommand && reads++ === 0 ? { Item: { pk: ITEM, overrides: {} } } : send(command),
      };
      try {
        const refused = limitsSet(
          { ...ctx, clients: { ...ctx.clients, dynamo: stale as CommandContext['clients']['dynamo'] } },
          { job: 'alpha', key: 'new', starts: 10, yes: true },
        );

        await expect(refused).rejects.toThrow(KeyLimitsError);
        await expect(refused).rejects.toMatchObject({ overrides: MAX_OVERRIDES, key: 'new' });
        expect(Object.keys((await storedOverrides())!)).toHaveLength(MAX_OVERRIDES);
      } finally {
        destroy();
      }
    });
  });
});
