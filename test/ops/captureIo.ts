// An operator CLI's io for tests: what it writes to stdout and stderr kept in order, no prompt, the real clock, no waits.
import type { OpsIo } from '../../ops/io';

export function captureIo(): OpsIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    interactive: false,
    ask: async () => '',
    now: () => new Date(),
    sleep: async () => undefined,
  };
}
