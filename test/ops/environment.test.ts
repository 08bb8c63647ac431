// The CLI knows its environment before any AWS call: region and account from lib/config, a bad --env or --job refused
// at once, and credentials for another account refused before anything is read.
import { DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { environmentSchema } from '../../lib/config/schema';
import {
  checkCallerAccount,
  environmentConfig,
  environmentRegion,
  principalOf,
  WrongAccountError,
} from '../../ops/environment';
import { UsageError } from '../../ops/errors';
import { runOps } from '../../ops/program';
import { CloudFormationSource } from '../../ops/resources';
import { changeTarget } from '../../ops/context';
import { JobOutput, type JobOutputKind, jobOutputName, StackOutput } from '../../lib/outputs';
import { captureIo as capture } from './captureIo';

const job = { schedule: { cron: '0 2 * * ? *', timeZone: 'UTC' }, pacing: { starts: 10 } };
const pinned = environmentSchema.parse({ account: '111122223333', region: 'eu-west-1', jobs: { 'a-job': job } });
const agnostic = environmentSchema.parse({ region: 'eu-central-1', jobs: { 'a-job': job, 'b-job': job } });

describe('Function: environmentConfig', () => {
  it('refuses an environment the config does not have, listing those it has', () => {
    expect(() => environmentConfig('prdo')).toThrow(UsageError);
    expect(() => environmentConfig('prdo')).toThrow(
      '--env prdo: Unknown environment "prdo". Valid environments: dev, staging, prod.',
    );
  });
});

describe('Function: environmentRegion', () => {
  it('uses the pinned region of a config that pins the account, whatever the SDK says', async () => {
    await expect(environmentRegion(pinned, async () => 'us-west-2')).resolves.toBe('eu-west-1');
  });

  it("uses the SDK's region when it has one and the config pins no account", async () => {
    await expect(environmentRegion(agnostic, async () => 'us-west-2')).resolves.toBe('us-west-2');
  });

  it('falls back to the config\'s region when the SDK has none ("Region is missing")', async () => {
    await expect(environmentRegion(agnostic, async () => undefined)).resolves.toBe('eu-central-1');
  });
});

describe('Function: checkCallerAccount', () => {
  it('refuses credentials of another account, naming both', async () => {
    const identity = async () => ({ account: '999988887777', arn: 'arn:aws:sts::999988887777:assumed-role/Ops/me' });
    const refused = checkCallerAccount('prod', pinned, identity);
    await expect(refused).rejects.toThrow(WrongAccountError);
    await expect(checkCallerAccount('prod', pinned, identity)).rejects.toThrow(
      'environment prod is account 111122223333 (lib/config/environments.ts), but these credentials are account 999988887777 ' +
        '(arn:aws:sts::999988887777:assumed-role/Ops/me); use credentials for 111122223333 (for example AWS_PROFILE=<its profile>)',
    );
  });

  it('returns the caller of the right account', async () => {
    const caller = { account: '111122223333', arn: 'arn:aws:iam::111122223333:user/ops' };
    await expect(checkCallerAccount('prod', pinned, async () => caller)).resolves.toEqual(caller);
  });
});

describe('Function: principalOf', () => {
  it("maps an assumed role's session to its role, and keeps a user", () => {
    expect(principalOf('arn:aws:sts::111122223333:assumed-role/OpsRole/alice')).toEqual({
      arn: 'arn:aws:iam::111122223333:role/OpsRole',
      role: 'OpsRole',
    });
    expect(principalOf('arn:aws:iam::111122223333:user/ops')).toEqual({ arn: 'arn:aws:iam::111122223333:user/ops' });
  });
});

describe("Class: CloudFormationSource, with the environment's config", () => {
  it("reads the stack in the config's region when the SDK has none, after checking the account", async () => {
    const send = jest.fn().mockRejectedValue(new Error('Stack with id PacedJobs-prod does not exist'));
    const identity = jest
      .fn()
      .mockResolvedValue({ account: '111122223333', arn: 'arn:aws:iam::111122223333:user/ops' });
    const source = new CloudFormationSource({
      environment: 'prod',
      config: pinned,
      client: { send },
      sdkRegion: async () => undefined,
      identity,
    });

    await expect(source.load()).rejects.toThrow(
      'cannot read stack PacedJobs-prod in eu-west-1: Stack with id PacedJobs-prod does not exist',
    );
    expect(identity).toHaveBeenCalledTimes(1);
    expect(send.mock.calls[0][0]).toBeInstanceOf(DescribeStacksCommand);
  });

  it('refuses the wrong account before DescribeStacks', async () => {
    const send = jest.fn();
    const source = new CloudFormationSource({
      environment: 'prod',
      config: pinned,
      client: { send },
      identity: async () => ({ account: '999988887777', arn: 'arn:aws:iam::999988887777:user/x' }),
    });

    await expect(source.load()).rejects.toThrow(WrongAccountError);
    expect(send).not.toHaveBeenCalled();
  });

  it('says whether the environment is protected, and asks STS for an unpinned account only when a change names it', async () => {
    const outputs = [
      { OutputKey: StackOutput.IdempotencyTableName, OutputValue: 'idem' },
      { OutputKey: StackOutput.LedgerTableName, OutputValue: 'ledger' },
      ...(Object.keys(JobOutput) as JobOutputKind[]).map((kind) => ({
        OutputKey: jobOutputName('a-job', kind),
        OutputValue: kind,
        Description: `a-job: ${kind}`,
      })),
    ];
    const send = jest.fn().mockResolvedValue({ Stacks: [{ Outputs: outputs }] });
    const identity = jest
      .fn()
      .mockResolvedValue({ account: '444455556666', arn: 'arn:aws:iam::444455556666:user/ops' });
    const guarded = { ...agnostic, protected: true };
    const source = new CloudFormationSource({
      environment: 'prod',
      config: guarded,
      client: { send },
      sdkRegion: async () => undefined,
      identity,
    });

    const resources = await source.load();

    expect(identity).not.toHaveBeenCalled();
    expect(resources.protected).toBe(true);
    await expect(changeTarget(resources)).resolves.toEqual({
      stackName: 'PacedJobs-prod',
      environment: 'prod',
      account: '444455556666',
      region: 'eu-central-1',
      local: false,
      protected: true,
    });
    expect(identity).toHaveBeenCalledTimes(1);
  });

  it('never protects the local stack, whatever its resources say', async () => {
    const local = {
      source: 'local' as const,
      stackName: 'PacedJobs-dev',
      region: 'us-east-1',
      accountId: '000000000000',
      protected: true,
      tables: { idempotency: 'i', ledger: 'l' },
      jobs: [],
      clients: {},
    };
    await expect(changeTarget(local)).resolves.toEqual({
      stackName: 'PacedJobs-dev',
      account: '000000000000',
      region: 'us-east-1',
      local: true,
      protected: false,
    });
  });

  it('does not ask STS when the config pins no account', async () => {
    const send = jest.fn().mockRejectedValue(new Error('nope'));
    const identity = jest.fn();
    await expect(
      new CloudFormationSource({
        environment: 'x',
        config: agnostic,
        client: { send },
        sdkRegion: async () => undefined,
        identity,
      }).load(),
    ).rejects.toThrow('in eu-central-1');
    expect(identity).not.toHaveBeenCalled();
  });
});

describe('Function: runOps, --env', () => {
  it("refuses a bad --job before any AWS call, listing the environment's jobs", async () => {
    const io = capture();
    const load = jest.fn();
    const source = () =>
      Object.assign(new CloudFormationSource({ environment: 'prod', config: agnostic, client: { send: jest.fn() } }), {
        load,
      });

    const code = await runOps(['status', '--env', 'prod', '--job', 'c-job'], { io, source });

    expect(code).toBe(2);
    expect(io.err).toEqual(['error: unknown job "c-job"; environment prod has: a-job, b-job']);
    expect(load).not.toHaveBeenCalled();
  });

  it('refuses an unknown --env with the environments the config has', async () => {
    const io = capture();

    const code = await runOps(['status', '--env', 'qa'], { io });

    expect(code).toBe(2);
    expect(io.err).toEqual(['error: --env qa: Unknown environment "qa". Valid environments: dev, staging, prod.']);
  });
});
