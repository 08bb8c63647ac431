import { ConfirmationError } from '../../ops/errors';
import { confirm, type OpsIo, renderTable } from '../../ops/io';

function io(interactive: boolean, answer = ''): OpsIo & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    stdout: () => undefined,
    stderr: () => undefined,
    interactive,
    ask: async (q) => {
      asked.push(q);
      return answer;
    },
    now: () => new Date(),
    sleep: async () => undefined,
  };
}

const STAGING = {
  stackName: 'PacedJobs-staging',
  environment: 'staging',
  account: '123456789012',
  region: 'eu-west-1',
  protected: false,
};
const PROD = {
  stackName: 'PacedJobs-prod',
  environment: 'prod',
  account: '123456789012',
  region: 'eu-west-1',
  protected: true,
};
const LOCAL = { stackName: 'PacedJobs-dev', account: '000000000000', region: 'us-east-1', protected: false };

function stderrOf(terminal: OpsIo): string[] {
  const lines: string[] = [];
  terminal.stderr = (t) => lines.push(t);
  return lines;
}

describe('Function: confirm', () => {
  it('proceeds without asking when --yes is given, saying where the change lands', async () => {
    const terminal = io(false);
    const lines = stderrOf(terminal);

    await expect(confirm(terminal, { action: 'pause alpha', yes: true, target: STAGING })).resolves.toBeUndefined();
    expect(terminal.asked).toEqual([]);
    expect(lines).toEqual([
      'pause alpha on stack PacedJobs-staging, account 123456789012, region eu-west-1 (confirmed by --yes)',
    ]);
  });

  it('refuses when there is no terminal to ask on, naming stack, account and region', async () => {
    await expect(confirm(io(false), { action: 'pause alpha', yes: false, target: STAGING })).rejects.toThrow(
      new ConfirmationError(
        'refusing to pause alpha on stack PacedJobs-staging, account 123456789012, region eu-west-1 without confirmation: stdin is not a TTY; ' +
          'pass --yes to confirm, or --dry-run to preview',
        'pause alpha',
      ),
    );
  });

  it.each(['y', 'Y', 'yes', ' YES '])('proceeds when the answer is %j', async (answer) => {
    const terminal = io(true, answer);

    await expect(confirm(terminal, { action: 'pause alpha', yes: false, target: STAGING })).resolves.toBeUndefined();
    expect(terminal.asked).toEqual([
      'pause alpha on stack PacedJobs-staging, account 123456789012, region eu-west-1? [y/N] ',
    ]);
  });

  it.each(['', 'n', 'no', 'yep'])('refuses when the answer is %j', async (answer) => {
    await expect(confirm(io(true, answer), { action: 'pause alpha', yes: false, target: STAGING })).rejects.toThrow(
      'not confirmed: did not pause alpha on stack PacedJobs-staging, account 123456789012, region eu-west-1; nothing was changed',
    );
  });

  it('names the local stack as local, and an account it does not know as unknown', async () => {
    const terminal = io(true, 'y');

    await confirm(terminal, { action: 'pause alpha', yes: false, target: LOCAL });
    await confirm(terminal, { action: 'pause alpha', yes: false, target: { ...STAGING, account: undefined } });
    expect(terminal.asked).toEqual([
      'pause alpha on local stack PacedJobs-dev, account 000000000000, region us-east-1? [y/N] ',
      'pause alpha on stack PacedJobs-staging, account unknown, region eu-west-1? [y/N] ',
    ]);
  });

  it('names a stack given by --stack as deployed, and says it has no environment name to --confirm', async () => {
    const team = {
      stackName: 'TeamStack',
      local: false,
      account: '111122223333',
      region: 'eu-central-1',
      protected: false,
    };
    const terminal = io(true, 'y');

    await confirm(terminal, { action: 'pause alpha', yes: false, target: team });
    expect(terminal.asked).toEqual([
      'pause alpha on stack TeamStack, account 111122223333, region eu-central-1? [y/N] ',
    ]);
    await expect(
      confirm(io(false), { action: 'pause alpha', yes: true, confirm: 'prod', target: team }),
    ).rejects.toThrow(
      new ConfirmationError(
        '--confirm prod does not match stack TeamStack, which has no environment name: did not pause alpha on stack TeamStack, account 111122223333, region eu-central-1; nothing was changed',
        'pause alpha',
      ),
    );
  });

  describe('a protected environment', () => {
    it('refuses --yes alone, naming the --confirm it needs', async () => {
      const terminal = io(false);

      await expect(confirm(terminal, { action: 'pause alpha', yes: true, target: PROD })).rejects.toThrow(
        new ConfirmationError(
          'refusing to pause alpha on stack PacedJobs-prod, account 123456789012, region eu-west-1: environment prod is protected; ' +
            'pass --confirm prod as well as --yes',
          'pause alpha',
        ),
      );
    });

    it('proceeds with --yes --confirm <env>, and says so', async () => {
      const terminal = io(false);
      const lines = stderrOf(terminal);

      await expect(
        confirm(terminal, { action: 'pause alpha', yes: true, confirm: 'prod', target: PROD }),
      ).resolves.toBeUndefined();
      expect(lines).toEqual([
        'pause alpha on stack PacedJobs-prod, account 123456789012, region eu-west-1 (confirmed by --yes --confirm prod)',
      ]);
    });

    it('refuses a --confirm that names another environment, whether or not it is protected', async () => {
      const message = (env: string) =>
        `--confirm staging does not match environment ${env}: did not pause alpha on stack PacedJobs-${env}, account 123456789012, region eu-west-1; nothing was changed`;

      await expect(
        confirm(io(false), { action: 'pause alpha', yes: true, confirm: 'staging', target: PROD }),
      ).rejects.toThrow(new ConfirmationError(message('prod'), 'pause alpha'));
      const dev = { ...STAGING, stackName: 'PacedJobs-dev', environment: 'dev' };
      await expect(
        confirm(io(false), { action: 'pause alpha', yes: true, confirm: 'staging', target: dev }),
      ).rejects.toThrow(message('dev'));
      await expect(
        confirm(io(false), { action: 'pause alpha', yes: true, confirm: 'dev', target: LOCAL }),
      ).rejects.toThrow(
        '--confirm dev does not match the local stack, which has no environment name: did not pause alpha on local stack PacedJobs-dev, account 000000000000, ' +
          'region us-east-1; nothing was changed',
      );
    });

    it('without a terminal, names both flags it needs', async () => {
      await expect(confirm(io(false), { action: 'pause alpha', yes: false, target: PROD })).rejects.toThrow(
        'refusing to pause alpha on stack PacedJobs-prod, account 123456789012, region eu-west-1 without confirmation: stdin is not a TTY; ' +
          'pass --yes --confirm prod to confirm, or --dry-run to preview',
      );
    });

    it('at the prompt, takes its name typed and nothing else', async () => {
      const typed = io(true, ' prod ');
      await expect(confirm(typed, { action: 'pause alpha', yes: false, target: PROD })).resolves.toBeUndefined();
      expect(typed.asked).toEqual([
        'pause alpha on stack PacedJobs-prod, account 123456789012, region eu-west-1? Environment prod is protected: type its name to confirm: ',
      ]);

      await expect(confirm(io(true, 'y'), { action: 'pause alpha', yes: false, target: PROD })).rejects.toThrow(
        'not confirmed: did not pause alpha on stack PacedJobs-prod, account 123456789012, region eu-west-1; nothing was changed',
      );
      // With --confirm already given, the usual y/N.
      const flagged = io(true, 'y');
      await expect(
        confirm(flagged, { action: 'pause alpha', yes: false, confirm: 'prod', target: PROD }),
      ).resolves.toBeUndefined();
      expect(flagged.asked).toEqual([
        'pause alpha on stack PacedJobs-prod, account 123456789012, region eu-west-1? [y/N] ',
      ]);
    });
  });
});

describe('Function: renderTable', () => {
  it('renders without colour codes and shows missing cells as "-"', () => {
    const text = renderTable(
      ['job', 'depth'],
      [
        ['alpha', 3],
        ['beta', undefined],
      ],
    );

    expect(text).not.toMatch(/\u001b\[/);
    expect(text.split('\n').map((l) => l.replace(/\s+/g, ' '))).toEqual([
      '┌───────┬───────┐',
      '│ job │ depth │',
      '├───────┼───────┤',
      '│ alpha │ 3 │',
      '├───────┼───────┤',
      '│ beta │ - │',
      '└───────┴───────┘',
    ]);
  });
});
