// Operator CLI: the commander program. Finds the stack (deployed or local), builds its clients, runs one command and
// prints its result as a table, or as exactly one JSON document on stdout with --json.
import { Command, CommanderError, Option } from 'commander';
import { createClients, type OpsClients } from './clients';
import type { CommandContext } from './context';
import { OpsError, UsageError } from './errors';
import { escapingIo, type OpsIo, processIo } from './io';
import { CloudFormationSource, type ClientSettings, LocalEndpointsSource, type ResourceSource } from './resources';
import { admission, type AdmissionCommand, renderAdmission } from './commands/admission';
import { audit, renderAudit } from './commands/audit';
import { catchUp, catchUpMissed, MISSED_LOOKBACK_DAYS, renderCatchUp } from './commands/catchUp';
import { continueAdmission, renderContinue } from './commands/continue';
import { dlqPeek, renderDlqPeek } from './commands/dlqPeek';
import {
  limitsClear,
  limitsList,
  limitsSet,
  type LimitsSetOptions,
  MAX_OVERRIDE_INTERVAL_SECONDS,
  MAX_OVERRIDE_STARTS,
  renderLimitsClear,
  renderLimitsList,
  renderLimitsSet,
} from './commands/limits';
import { operation, renderOperation } from './commands/op';
import {
  redrive,
  redriveCancel,
  redriveStatus,
  renderRedrive,
  renderRedriveCancel,
  renderRedriveStatus,
} from './commands/redrive';
import { preflight, renderPreflight } from './commands/preflight';
import { DEFAULT_STALL_MINUTES, renderStatus, status } from './commands/status';

/** Where `npm start -- --serve` writes its endpoints. @default ".local/endpoints.json" */
export const DEFAULT_ENDPOINTS_FILE = '.local/endpoints.json';
/** Most batches `status` shows per job. */
export const MAX_STATUS_BATCHES = 50;
/** Longest stall grace period `status --stall-minutes` takes: a day. */
export const MAX_STALL_MINUTES = 1440;

export interface GlobalOptions {
  env?: string;
  /** A deployed stack by name: a team's app's stack holding a PacedJobs. */
  stack?: string;
  local?: boolean;
  endpoints: string;
  json?: boolean;
}

export interface OpsDependencies {
  io?: OpsIo;
  /** @default CloudFormationSource for --env, LocalEndpointsSource for --local */
  source?: (options: GlobalOptions) => ResourceSource;
  /** @default createClients */
  clients?: (settings: ClientSettings) => OpsClients;
  /** Passed to pause/resume: how long and how often to wait for a mapping to settle. */
  mappingWait?: { timeoutMs: number; pollMs: number };
  /**
   * Commands the tools above ops add to its program, after its own (`ops console`: console/opsCommand.ts, added by
   * cli/ops.ts), so ops itself imports none of them. @default none
   */
  commands?: readonly OpsCommandHook[];
}

/** A command's outcome: the JSON document, and the table shown without --json. */
export interface Printable {
  result: object;
  text: string;
  /** The exit code after printing (a check that failed). @default 0 */
  exitCode?: number;
}

export function defaultSource(options: GlobalOptions): ResourceSource {
  if (options.local) return new LocalEndpointsSource(options.endpoints);
  if (options.env) return new CloudFormationSource({ environment: options.env });
  if (options.stack) return new CloudFormationSource({ stackName: options.stack });
  throw new UsageError(
    "say which stack: --stack <name> for a deployed stack, --env <name> for one of this repository's environments (PacedJobs-<name>), " +
      'or --local for the one `npm start -- --serve` runs',
  );
}

function positiveInt(flag: string, value: string | undefined, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new UsageError(`${flag} must be a whole number from 1 to ${max}, got "${value}"`);
  return n;
}

/** Serializes an error for the JSON document: name, message and the context its class carries. */
function errorDocument(error: Error): object {
  const context = Object.fromEntries(Object.entries(error).filter(([k]) => k !== 'stack' && k !== 'cause'));
  return { ok: false, error: { ...context, name: error.name, message: error.message } };
}

/** Wraps a command's work: loads the stack, runs `run` with its clients, and prints the outcome. */
export type Execute = (cmd: Command, run: (ctx: CommandContext) => Promise<Printable>) => () => Promise<void>;

/** What a command's registration is given: the program to add it to, the runner of its work, and the CLI's deps. */
export interface OpsProgram {
  program: Command;
  execute: Execute;
  deps: OpsDependencies;
}

/** Adds one command (or group) to the program. */
export type OpsCommandHook = (ops: OpsProgram) => void;

/** The options every changing command takes. */
function change(cmd: Command): Command {
  return cmd
    .option('--yes', 'change without asking (required when stdin is not a terminal)', false)
    .option('--confirm <env>', "the environment's name, which a protected environment (prod) needs as well as --yes")
    .option('--dry-run', 'print what would change and change nothing', false);
}

function addStatus({ program, execute }: OpsProgram): void {
  const statusCmd = program
    .command('status')
    .description(
      'per job: queue, DLQ and admission queue depths, oldest work, and the latest batches with whether each reconciles, ' +
        'its admission, projected finish, and stalled admission',
    )
    .option('--job <job>', 'one job only')
    .option('--batches <n>', 'batches shown per job', '5')
    .option(
      '--stall-minutes <n>',
      'report an admitting batch as stalled when its next step is this many minutes overdue',
      String(DEFAULT_STALL_MINUTES),
    );
  statusCmd.action(
    execute(statusCmd, async (ctx) => {
      const o = statusCmd.opts<{ job?: string; batches: string; stallMinutes: string }>();
      const result = await status(ctx, {
        job: o.job,
        batches: positiveInt('--batches', o.batches, 5, MAX_STATUS_BATCHES),
        stallMinutes: positiveInt('--stall-minutes', o.stallMinutes, DEFAULT_STALL_MINUTES, MAX_STALL_MINUTES),
      });
      return { result, text: renderStatus(result) };
    }),
  );
}

function addPauseResume({ program, execute, deps }: OpsProgram): void {
  for (const name of ['pause', 'resume'] as AdmissionCommand[]) {
    const cmd = change(
      program
        .command(name)
        .description(
          name === 'pause'
            ? "disable the schedules first, then the producers' admission mappings, then the consumers' event source mappings; " +
                "messages and each run's next step stay queued"
            : "re-enable the consumers' event source mappings first, then the admission mappings, then the schedules",
        )
        .option('--job <job>', 'one job only (default: every job)'),
    );
    cmd.action(
      execute(cmd, async (ctx) => {
        const o = cmd.opts<{ job?: string; yes: boolean; dryRun: boolean }>();
        const result = await admission(ctx, name, {
          ...o,
          mappingTimeoutMs: deps.mappingWait?.timeoutMs,
          mappingPollMs: deps.mappingWait?.pollMs,
        });
        return { result, text: renderAdmission(result) };
      }),
    );
  }
}

// `redrive` is a group whose default subcommand starts the move, so `redrive --job J` and `redrive cancel --job J`
// each own their options (a parent command with options would consume its subcommands' `--job`).
function addRedrive({ program, execute }: OpsProgram): void {
  const redriveGroup = program.command('redrive').description('DLQ redrive: start (the default), status, cancel');
  const redriveCmd = change(
    redriveGroup
      .command('start', { isDefault: true })
      .description('move DLQ messages back to the work queue at a capped rate (StartMessageMoveTask)')
      .option('--job <job>', 'one job only (default: every job with DLQ messages)')
      .option('--rate <n>', 'messages per second, 1 to 500 (default 10)'),
  );
  redriveCmd.action(
    execute(redriveCmd, async (ctx) => {
      const result = await redrive(
        ctx,
        redriveCmd.opts<{ job?: string; rate?: string; yes: boolean; dryRun: boolean }>(),
      );
      return { result, text: renderRedrive(result) };
    }),
  );
  const redriveStatusCmd = redriveGroup
    .command('status')
    .description("the DLQs' message move tasks")
    .option('--job <job>', 'one job only');
  redriveStatusCmd.action(
    execute(redriveStatusCmd, async (ctx) => {
      const result = await redriveStatus(ctx, redriveStatusCmd.opts<{ job?: string }>());
      return { result, text: renderRedriveStatus(result) };
    }),
  );
  const redriveCancelCmd = change(
    redriveGroup
      .command('cancel')
      .description('cancel running message move tasks')
      .option('--job <job>', 'one job only'),
  );
  redriveCancelCmd.action(
    execute(redriveCancelCmd, async (ctx) => {
      const result = await redriveCancel(ctx, redriveCancelCmd.opts<{ job?: string; yes: boolean; dryRun: boolean }>());
      return { result, text: renderRedriveCancel(result) };
    }),
  );
}

function addCatchUp({ program, execute }: OpsProgram): void {
  const catchUpCmd = change(
    program
      .command('catch-up')
      .description(
        'invoke the producer once per missed business date, oldest first, each with a new batch ID (synchronously)',
      )
      .requiredOption('--job <job>', 'the job to catch up')
      .option('--from <date>', 'first business date, YYYY-MM-DD')
      .option('--to <date>', 'last business date, YYYY-MM-DD (inclusive)')
      .addOption(
        new Option(
          '--missed',
          'the business dates the schedule should have produced that have no batch in the run ledger (its cron, time zone and offset)',
        ).conflicts(['from', 'to']),
      )
      .option(
        '--since <date>',
        `with --missed: the first business date to look at (default: ${MISSED_LOOKBACK_DAYS} days ago, or the job's oldest batch if later)`,
      ),
  );
  catchUpCmd.action(
    execute(catchUpCmd, async (ctx) => {
      const o = catchUpCmd.opts<{
        job: string;
        from?: string;
        to?: string;
        missed?: boolean;
        since?: string;
        yes: boolean;
        dryRun: boolean;
      }>();
      if (o.since !== undefined && !o.missed) throw new UsageError('--since goes with --missed');
      if (!o.missed && (o.from === undefined || o.to === undefined)) {
        throw new UsageError('say which dates: --from <date> --to <date>, or --missed');
      }
      const result = o.missed ? await catchUpMissed(ctx, o) : await catchUp(ctx, { ...o, from: o.from!, to: o.to! });
      return { result, text: renderCatchUp(result) };
    }),
  );
}

function addContinue({ program, execute }: OpsProgram): void {
  const continueCmd = change(
    program
      .command('continue')
      .description(
        "restart a run whose admission stalled: send its current step (from the ledger) to the job's admission queue; " +
          'safe to repeat, since the producer skips a step already taken',
      )
      .requiredOption('--job <job>', 'the job of the batch')
      .requiredOption('--batch <batchId>', 'the batch ID, as `ops status` shows it'),
  );
  continueCmd.action(
    execute(continueCmd, async (ctx) => {
      const result = await continueAdmission(
        ctx,
        continueCmd.opts<{ job: string; batch: string; yes: boolean; dryRun: boolean }>(),
      );
      return { result, text: renderContinue(result) };
    }),
  );
}

// `limits` is a group of three, each owning its options, as `redrive` is.
function addLimits({ program, execute }: OpsProgram): void {
  const limits = program
    .command('limits')
    .description(
      "per-key rate limits: list a job's default and overrides, set or clear one key's override (no deploy)",
    );
  const limitsListCmd = limits
    .command('list')
    .description("the job's per-key default as deployed, and each key's override with the limit the consumers enforce")
    .requiredOption('--job <job>', 'the job');
  limitsListCmd.action(
    execute(limitsListCmd, async (ctx) => {
      const result = await limitsList(ctx, limitsListCmd.opts<{ job: string }>());
      return { result, text: renderLimitsList(result) };
    }),
  );
  const limitsSetCmd = change(
    limits
      .command('set')
      .description(
        "override one key's limit (its documented quota; the job's per-key headroom still applies); replaces any it had",
      )
      .requiredOption('--job <job>', 'the job')
      .requiredOption('--key <key>', "the key value (of the job's pacing.perKey field)")
      .requiredOption('--starts <n>', `starts allowed per interval, 1 to ${MAX_OVERRIDE_STARTS}`)
      .option(
        '--interval-seconds <s>',
        `the interval, 1 to ${MAX_OVERRIDE_INTERVAL_SECONDS} (default: the job's per-key interval)`,
      )
      .option('--burst <b>', "the burst, 1 to --starts (default: the job's per-key burst)"),
  );
  limitsSetCmd.action(
    execute(limitsSetCmd, async (ctx) => {
      const result = await limitsSet(ctx, limitsSetCmd.opts<LimitsSetOptions>());
      return { result, text: renderLimitsSet(result) };
    }),
  );
  const limitsClearCmd = change(
    limits
      .command('clear')
      .description("remove one key's override: the key goes back to the job's default")
      .requiredOption('--job <job>', 'the job')
      .requiredOption('--key <key>', 'the key value'),
  );
  limitsClearCmd.action(
    execute(limitsClearCmd, async (ctx) => {
      const result = await limitsClear(
        ctx,
        limitsClearCmd.opts<{ job: string; key: string; yes: boolean; dryRun: boolean }>(),
      );
      return { result, text: renderLimitsClear(result) };
    }),
  );
}

function addDlqPeek({ program, execute }: OpsProgram): void {
  const dlq = program.command('dlq').description('dead-letter queue tools');
  const peekCmd = dlq
    .command('peek')
    .description('show DLQ messages and their failure reasons (viewing counts as a receive)')
    .option('--job <job>', 'one job only')
    .option('--max <n>', 'messages per job, 1 to 100 (default 10)');
  peekCmd.action(
    execute(peekCmd, async (ctx) => {
      const result = await dlqPeek(ctx, peekCmd.opts<{ job?: string; max?: string }>());
      return { result, text: renderDlqPeek(result) };
    }),
  );
}

function addOp({ program, execute }: OpsProgram): void {
  const opCmd = program
    .command('op')
    .description('one operation: its idempotency record (status, expiry, stored result) and its ledger entries')
    .argument('<operationId>', 'the operation ID from a message body or a log line')
    .option('--job <job>', 'one job only (default: every job)');
  opCmd.action(async (operationId: string) => {
    await execute(opCmd, async (ctx) => {
      const result = await operation(ctx, operationId, opCmd.opts<{ job?: string }>());
      return { result, text: renderOperation(result) };
    })();
  });
}

function addAudit({ program, execute }: OpsProgram): void {
  const auditCmd = program
    .command('audit')
    .description(
      "one business date of one job, over every batch of it: did every operation the date's runs discovered end exactly once " +
        '(completed, rejected or dead-lettered), and where is each one that did not',
    )
    .requiredOption('--job <job>', 'the job')
    .requiredOption('--date <date>', 'the business date, YYYY-MM-DD')
    .option('--operations', 'also list every operation that is not completed, with its state', false);
  auditCmd.action(
    execute(auditCmd, async (ctx) => {
      const result = await audit(ctx, auditCmd.opts<{ job: string; date: string; operations: boolean }>());
      return { result, text: renderAudit(result) };
    }),
  );
}

function addPreflight({ program, execute }: OpsProgram): void {
  const preflightCmd = program
    .command('preflight')
    .description(
      "the go/no-go before a night's runs: producer time against the 900 s ceiling, stable discovery, rate headroom and " +
        "concurrency against the downstream's limits, idempotency lifetime, the operator's permissions, alarm subscriptions, " +
        "each schedule's next fire and business date, secrets, discovery indexes, empty DLQs and account concurrency; exit code 1 on any failure",
    )
    .option('--job <job>', 'one job only (the stack-wide checks still run)');
  preflightCmd.action(
    execute(preflightCmd, async (ctx) => {
      const result = await preflight(ctx, preflightCmd.opts<{ job?: string }>());
      return { result, text: renderPreflight(result), exitCode: result.ok ? 0 : 1 };
    }),
  );
}

/** The program with its global options; its commands are added by runOps. */
function opsProgram(io: OpsIo): Command {
  return new Command('ops')
    .description(
      'Operate the paced jobs: status, pause/resume, continue, redrive, catch-up, per-key limits, DLQ and operation lookups, ' +
        'date audits, the web console',
    )
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout(s), writeErr: (s) => io.stderr(s) })
    .showHelpAfterError()
    .addOption(
      new Option(
        '--stack <name>',
        "a deployed stack holding a PacedJobs (your app's stack name): reads its outputs",
      ).conflicts(['env', 'local']),
    )
    .addOption(
      new Option(
        '--env <env>',
        'in the paced-jobs repository, a deployed environment: reads the outputs of stack PacedJobs-<env>',
      ).conflicts('local'),
    )
    .addOption(new Option('--local', 'the local stack of `start --serve` (`npm start -- --serve` in the repository)'))
    .option('--endpoints <file>', 'the local endpoints file (with --local)', DEFAULT_ENDPOINTS_FILE)
    .option('--json', 'print exactly one JSON document on stdout', false);
}

/**
 * The commands in the order --help lists them. The added ones (`ops console`) come before preflight, where --help has
 * always listed the console.
 */
const OWN_COMMANDS: { before: OpsCommandHook[]; after: OpsCommandHook[] } = {
  before: [addStatus, addPauseResume, addRedrive, addCatchUp, addContinue, addLimits, addDlqPeek, addOp, addAudit],
  after: [addPreflight],
};

/** The program with every command, each running its work through `execute` (runOps's; the docs' flag tables read it). */
export function buildOpsProgram(io: OpsIo, execute: Execute, deps: OpsDependencies = {}): Command {
  const program = opsProgram(io);
  for (const add of [...OWN_COMMANDS.before, ...(deps.commands ?? []), ...OWN_COMMANDS.after])
    add({ program, execute, deps });
  return program;
}

/** Runs the CLI on `argv` (without the node and script entries) and returns the exit code; never calls process.exit. */
export async function runOps(argv: string[], deps: OpsDependencies = {}): Promise<number> {
  const io = escapingIo(deps.io ?? processIo());
  const wantsJson = argv.includes('--json');
  let exitCode = 0;

  const execute: Execute = (cmd, run) => async () => {
    const globals = cmd.optsWithGlobals() as GlobalOptions;
    const source = (deps.source ?? defaultSource)(globals);
    // A deployed environment's jobs are known from its config: a typo in --job costs no AWS call.
    const job = (cmd.opts() as { job?: unknown }).job;
    const declared = source.declaredJobs?.();
    if (typeof job === 'string' && declared && !declared.includes(job)) {
      throw new UsageError(`unknown job "${job}"; environment ${globals.env} has: ${declared.join(', ')}`);
    }
    const resources = await source.load();
    const clients = (deps.clients ?? createClients)(resources.clients);
    try {
      const printed = await run({ resources, clients, io });
      io.stdout(globals.json ? JSON.stringify(printed.result, null, 2) : printed.text);
      if (printed.exitCode) exitCode = printed.exitCode;
    } finally {
      clients.destroy();
    }
  };

  const program = buildOpsProgram(io, execute, deps);

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end through here with code 0; usage errors were already printed by commander.
      if (error.exitCode === 0) return 0;
      if (wantsJson) {
        io.stdout(
          JSON.stringify(
            { ok: false, error: { name: 'UsageError', code: error.code, message: error.message } },
            null,
            2,
          ),
        );
      }
      return 2;
    }
    const err = error instanceof Error ? error : new Error(String(error));
    io.stderr(`error: ${err instanceof OpsError ? err.message : `${err.name}: ${err.message}`}`);
    if (wantsJson) io.stdout(JSON.stringify(errorDocument(err), null, 2));
    exitCode = err instanceof OpsError ? err.exitCode : 1;
  }
  return exitCode;
}
