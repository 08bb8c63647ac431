// cli/ops.ts: the operator CLI as `npm run ops` and `paced-jobs ops` run it, ops' own commands with the console's.
import { runOpsCli } from '../../cli/ops';
import { captureIo as capture } from '../ops/captureIo';

describe('Function: runOpsCli', () => {
  it('lists the console among the commands, before preflight, as --help always has', async () => {
    const io = capture();

    await expect(runOpsCli(['--help'], { io })).resolves.toBe(0);

    const commands = [...io.out.join('').matchAll(/^ {2}([a-z][a-z-]*)/gm)].map((m) => m[1]);
    expect(commands).toEqual([
      'status',
      'pause',
      'resume',
      'redrive',
      'catch-up',
      'continue',
      'limits',
      'dlq',
      'op',
      'audit',
      'console',
      'preflight',
      'help',
    ]);
  });
});
