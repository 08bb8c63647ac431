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

describe('Function: confirm', () => {
  it('proceeds without asking when --yes is given', async () => {
    const terminal = io(false);

    await expect(confirm(terminal, { action: 'pause alpha', yes: true })).resolves.toBeUndefined();
    expect(terminal.asked).toEqual([]);
  });

  it('refuses when there is no terminal to ask on', async () => {
    await expect(confirm(io(false), { action: 'pause alpha', yes: false })).rejects.toThrow(
      new ConfirmationError('refusing to pause alpha without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview', 'pause alpha'),
    );
  });

  it.each(['y', 'Y', 'yes', ' YES '])('proceeds when the answer is %j', async (answer) => {
    const terminal = io(true, answer);

    await expect(confirm(terminal, { action: 'pause alpha', yes: false })).resolves.toBeUndefined();
    expect(terminal.asked).toEqual(['pause alpha? [y/N] ']);
  });

  it.each(['', 'n', 'no', 'yep'])('refuses when the answer is %j', async (answer) => {
    await expect(confirm(io(true, answer), { action: 'pause alpha', yes: false })).rejects.toThrow('not confirmed: did not pause alpha; nothing was changed');
  });
});

describe('Function: renderTable', () => {
  it('renders without colour codes and shows missing cells as "-"', () => {
    const text = renderTable(['job', 'depth'], [['alpha', 3], ['beta', undefined]]);

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
