// `ops console`, the command the console adds to the operator CLI (cli/ops.ts adds it; ops imports nothing of the
// console): serves the web console (server.ts) on 127.0.0.1 against the stack the CLI found, with the operator's own
// credentials, until Ctrl-C. Its data and actions are the other commands' own code (opsSource.ts) and its charts
// CloudWatch's metrics (ops/metrics.ts). Against a deployed environment the changing actions are off unless
// --allow-changes; against the local stack they are on.
import { changeTarget, type CommandContext } from '../ops/context';
import { ConfirmationError, UsageError } from '../ops/errors';
import { describeTarget } from '../ops/io';
import { readJobSamples } from '../ops/metrics';
import type { OpsCommandHook } from '../ops/program';
import { OpsConsoleSource, consoleIo, type SampleReader } from './opsSource';
import { startConsoleServer, type ConsoleServer } from './server';

export interface ConsoleOptions {
  /** The port on 127.0.0.1 (a flag's text is checked too). @default a free one */
  port?: number | string;
  /** Against a deployed environment, turn the changing actions on. @default false */
  allowChanges?: boolean;
  /** --confirm <env>: a protected environment's changes from the page need its name, as a command's do. */
  confirm?: string;
  /** Resolves when the console should stop (Ctrl-C). */
  stop: Promise<void>;
  /** Where the charts' samples come from. @default readJobSamples (CloudWatch GetMetricData) */
  samples?: SampleReader;
  /** Called once the server listens (tests read its token here). */
  onListening?: (server: ConsoleServer) => void;
  /** How long and how often pause/resume wait for a mapping. @default the CLI's */
  mappingWait?: { timeoutMs: number; pollMs: number };
}

export interface ConsoleResult {
  ok: true;
  command: 'console';
  stackName: string;
  source: 'cloudformation' | 'local';
  /** The console's address, without its token. */
  url: string;
  changesAllowed: boolean;
  startedAt: string;
  stoppedAt: string;
}

/** @throws UsageError for a port outside 1..65535. */
export function parsePort(value: number | string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new UsageError(`--port must be a whole number from 1 to 65535, got "${value}"`);
  return port;
}

/** The credentials the CLI holds, so the server can keep them out of every answer (the SDK never puts them in one). */
function credentialStrings(ctx: CommandContext): string[] {
  const own = ctx.resources.clients.credentials;
  return [
    own?.accessKeyId,
    own?.secretAccessKey,
    process.env.AWS_ACCESS_KEY_ID,
    process.env.AWS_SECRET_ACCESS_KEY,
    process.env.AWS_SESSION_TOKEN,
  ].filter((s): s is string => typeof s === 'string' && s !== '');
}

/**
 * The page's dialog confirms each change, but a protected environment's also need its name, once, when the console
 * starts: the same rule as `--yes --confirm <env>` on a command (io.ts confirm, which each change then runs).
 * @throws ConfirmationError when --confirm is missing for a protected environment, or names another one.
 */
async function checkConfirmed(ctx: CommandContext, confirm: string | undefined): Promise<void> {
  const target = await changeTarget(ctx.resources);
  const env = target.environment;
  if (confirm !== undefined && confirm !== env) {
    throw new ConfirmationError(
      `--confirm ${confirm} does not match environment ${env}: the console did not start`,
      'allow changes from the console',
    );
  }
  if (target.protected && confirm !== env) {
    throw new ConfirmationError(
      `refusing to allow changes from the console on ${describeTarget(target)}: environment ${env} is protected; pass --confirm ${env} as well as --allow-changes`,
      'allow changes from the console',
    );
  }
}

export async function serveConsole(ctx: CommandContext, options: ConsoleOptions): Promise<ConsoleResult> {
  const port = parsePort(options.port);
  const local = ctx.resources.source === 'local';
  const changesAllowed = local || Boolean(options.allowChanges);
  if (changesAllowed && !local) await checkConfirmed(ctx, options.confirm);
  const log = (line: string) => ctx.io.stderr(line);
  const source = new OpsConsoleSource({
    // The commands' own output (progress, warnings) goes to this terminal; their confirmation is the page's dialog.
    ctx: { ...ctx, io: { ...consoleIo(log), now: () => ctx.io.now(), sleep: (ms) => ctx.io.sleep(ms) } },
    samples: options.samples ?? ((job, window) => readJobSamples(ctx, job, window)),
    // CloudWatch holds EMF metrics per minute; the local endpoint has every sample.
    periodSeconds: local ? 10 : 60,
    mappingWait: options.mappingWait,
    confirm: options.confirm,
  });
  const startedAt = ctx.io.now().toISOString();
  const server = await startConsoleServer({
    source,
    changesAllowed,
    changesNote: changesAllowed
      ? undefined
      : `${ctx.resources.stackName} is a deployed environment: restart with --allow-changes to pause, resume, redrive or catch up from the page`,
    port,
    redact: credentialStrings(ctx),
    // A deployed stack's every poll is API calls, and GetMetricData is billed per metric: poll it less.
    refresh: local ? { overviewMs: 5000, chartsMs: 3000 } : { overviewMs: 15_000, chartsMs: 30_000 },
    log,
  });
  try {
    options.onListening?.(server);
    log(`console for ${source.description} at ${server.url}`);
    log(`open ${server.tokenUrl}`);
    log(
      "(the token in that URL is this console's key: do not share it; the page keeps it for its tab and drops it from the address bar)",
    );
    if (!changesAllowed)
      log('changes are off (pause, resume, redrive, catch-up): start with --allow-changes to turn them on');
    log('Ctrl-C to stop');
    await options.stop;
  } finally {
    await server.close();
  }
  return {
    ok: true,
    command: 'console',
    stackName: ctx.resources.stackName,
    source: ctx.resources.source,
    url: server.url,
    changesAllowed,
    startedAt,
    stoppedAt: ctx.io.now().toISOString(),
  };
}

export function renderConsole(result: ConsoleResult): string {
  return `console for ${result.stackName} (${result.source}) at ${result.url} stopped (changes were ${result.changesAllowed ? 'on' : 'off'})`;
}

/** What a caller may set of `ops console` beyond its flags: the tests stop it, watch it listen and give it samples. */
export interface ConsoleCommandOptions extends Pick<ConsoleOptions, 'onListening' | 'samples'> {
  /** When it stops. @default the first Ctrl-C or SIGTERM */
  stop?: () => Promise<void>;
}

/** Resolves on the first Ctrl-C or SIGTERM: the console then closes its server and the CLI exits as after any command. */
function interrupted(): Promise<void> {
  return new Promise((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

/** The `ops console` command, for runOps's `commands`. */
export function consoleCommand(options: ConsoleCommandOptions = {}): OpsCommandHook {
  return ({ program, execute, deps }) => {
    const consoleCmd = program
      .command('console')
      .description(
        "serve the web console on 127.0.0.1 until Ctrl-C: every job's schedule, depths, batches and live charts, a DLQ peek and an " +
          'operation lookup, and pause, resume, redrive and catch-up behind a confirmation (off against a deployed environment unless --allow-changes)',
      )
      .option('--port <n>', 'the port on 127.0.0.1 (default: a free one)')
      .option(
        '--allow-changes',
        'against a deployed environment: turn on pause, resume, redrive and catch-up (always on with --local)',
        false,
      )
      .option(
        '--confirm <env>',
        "with --allow-changes: the environment's name, which a protected environment (prod) needs",
      );
    consoleCmd.action(
      execute(consoleCmd, async (ctx) => {
        const o = consoleCmd.opts<{ port?: string; allowChanges: boolean; confirm?: string }>();
        const result = await serveConsole(ctx, {
          port: o.port,
          allowChanges: o.allowChanges,
          confirm: o.confirm,
          stop: (options.stop ?? interrupted)(),
          onListening: options.onListening,
          samples: options.samples,
          mappingWait: deps.mappingWait,
        });
        return { result, text: renderConsole(result) };
      }),
    );
  };
}
