// Benchmark plumbing: the quota provider in its own process, so a stall in the instances' event loop cannot delay the
// provider's arrival log (a real provider logs on its own machine). Parent side and child entry point in one file.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { checkSchedule, type QuotaProviderOptions, type QuotaStep, startQuotaProvider } from './quotaProvider';

export interface ProviderLog {
  arrivals: number[];
  accepted: number[];
  throttled: number;
}

export interface RemoteQuotaProvider {
  url: string;
  warmUpUrl: string;
  /** Sets the quota's schedule (QuotaProvider.setSchedule), resolving once the provider applies it. */
  schedule(steps: QuotaStep[]): Promise<void>;
  /** Stops the provider and returns its log. */
  finish(): Promise<ProviderLog>;
}

type ChildMessage =
  | { type: 'ready'; url: string; warmUpUrl: string }
  | { type: 'scheduled' }
  | { type: 'failed'; message: string }
  | ({ type: 'log' } & ProviderLog);
type ParentMessage = { type: 'schedule'; steps: QuotaStep[] } | { type: 'finish' };

/**
 * The node arguments and folder that run this module's child side: the sibling file of the running module's own
 * language (`quotaProviderProcess.ts` through tsx, a dev dependency, in this repository; the compiled `.js` as is in
 * the package), from the folder above it (the repository's root, where tsx resolves; the package's dist/).
 */
export function providerProcessCommand(
  options: QuotaProviderOptions,
  moduleFile: string = __filename,
): { args: string[]; cwd: string } {
  const dir = path.dirname(moduleFile);
  const ext = path.extname(moduleFile);
  const file = path.join(dir, `quotaProviderProcess${ext}`);
  return {
    args: [...(ext === '.ts' ? ['--import', 'tsx'] : []), file, JSON.stringify(options)],
    cwd: path.resolve(dir, '..'),
  };
}

/** Starts the provider in a child Node process. */
export function startQuotaProviderProcess(options: QuotaProviderOptions): Promise<RemoteQuotaProvider> {
  const { args, cwd } = providerProcessCommand(options);
  const child: ChildProcess = spawn(process.execPath, args, { cwd, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const next = (type: ChildMessage['type']): Promise<ChildMessage> =>
    new Promise((resolve, reject) => {
      const onExit = (code: number | null) =>
        reject(new Error(`quota provider process exited (code ${code}) while waiting for "${type}"`));
      const onMessage = (message: ChildMessage) => {
        if (message.type === 'failed') {
          child.off('message', onMessage);
          child.off('exit', onExit);
          reject(new Error(`quota provider process: ${message.message}`));
          return;
        }
        if (message.type !== type) return;
        child.off('message', onMessage);
        child.off('exit', onExit);
        resolve(message);
      };
      child.once('exit', onExit);
      child.once('error', reject);
      child.on('message', onMessage);
    });
  return next('ready').then((ready) => {
    if (ready.type !== 'ready') throw new Error('unreachable');
    return {
      url: ready.url,
      warmUpUrl: ready.warmUpUrl,
      async schedule(steps) {
        // Checked here too, so a bad schedule fails with its own message in the caller's stack.
        checkSchedule(steps);
        const applied = next('scheduled');
        child.send({ type: 'schedule', steps } satisfies ParentMessage);
        await applied;
      },
      async finish() {
        const log = next('log');
        child.send({ type: 'finish' } satisfies ParentMessage);
        const message = await log;
        if (message.type !== 'log') throw new Error('unreachable');
        child.disconnect();
        return { arrivals: message.arrivals, accepted: message.accepted, throttled: message.throttled };
      },
    };
  });
}

/** Child side: serve until the parent asks for the log, then close and hand it over. */
async function child(): Promise<void> {
  const options = JSON.parse(process.argv[2]) as QuotaProviderOptions;
  const provider = await startQuotaProvider(options);
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'schedule') {
      try {
        provider.setSchedule(message.steps);
        process.send?.({ type: 'scheduled' } satisfies ChildMessage);
      } catch (error) {
        process.send?.({ type: 'failed', message: (error as Error).message } satisfies ChildMessage);
      }
      return;
    }
    if (message.type !== 'finish') return;
    void provider.close().then(() => {
      process.send?.({
        type: 'log',
        arrivals: provider.arrivals,
        accepted: provider.accepted,
        throttled: provider.throttled(),
      });
    });
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.({ type: 'ready', url: provider.url, warmUpUrl: provider.warmUpUrl });
}

if (require.main === module) {
  child().catch((error: unknown) => {
    process.stderr.write(`quota provider failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
