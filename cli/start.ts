// `npm start` and `paced-jobs start` as a whole: the local runtime's command (local/cli.ts) with what it shows beside
// its run, the web console of --serve and a demo run's charts (console/localRun.ts). The two meet here, above both,
// so that the local runtime imports nothing of the console or the operator CLI.
import { localRunViews } from '../console/localRun';
import { runStartCli, type StartCliOptions } from '../local/cli';

/** runStartCli with the console and the charts: resolves to the exit code, as it does. */
export function runStart(argv: readonly string[], options: Omit<StartCliOptions, 'views'> = {}): Promise<number> {
  return runStartCli(argv, { ...options, views: localRunViews });
}

async function main(): Promise<void> {
  const code = await runStart(process.argv.slice(2));
  // Worker threads and sockets are closed by then; exit explicitly so a stray timer cannot hold the CLI open.
  process.exit(code);
}

if (require.main === module) void main();
