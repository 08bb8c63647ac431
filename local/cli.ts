// `npm start`: the command line of the local runtime (flags, validation, exit codes); run.ts does the work.
import { Command, InvalidArgumentError, Option } from 'commander';
import { runLocal, RunOptions } from './run';

const positiveInt = (name: string) => (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError(`${name} must be a whole number, got "${value}"`);
  return n;
};

const port = (value: string): number => {
  const n = positiveInt('port')(value);
  if (n < 1 || n > 65535) throw new InvalidArgumentError(`port must be between 1 and 65535, got ${n}`);
  return n;
};

const isoDate = (value: string): string => {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value) || !new Date(`${value}T00:00:00Z`).toISOString().startsWith(value)) {
    throw new InvalidArgumentError(`expected a calendar date YYYY-MM-DD, got "${value}"`);
  }
  return value;
};

export function buildProgram(run: (options: RunOptions) => Promise<number>): Command {
  return new Command('npm start --')
    .description('Run the synthesized PacedJobs stack on embedded AWS-protocol servers: one demo cycle of every job, or --serve.')
    .option('--env <name>', 'environment whose synthesized template to run', 'dev')
    .option('--serve', 'keep running: fire schedules on their crons and write .local/endpoints.json until Ctrl-C', false)
    .option('--now', 'fire every schedule once at start (always done in a demo run; with --serve also seeds demo data)', false)
    .option('--date <YYYY-MM-DD>', 'business date for the fired cycle (default: what each schedule would compute now)', isoDate)
    .option('--json', 'print the report as one JSON document on stdout (progress and logs go to stderr)', false)
    .option('--payments <n>', 'demo payments to seed', positiveInt('--payments'), 40)
    .option('--uploads <n>', 'demo uploads to seed', positiveInt('--uploads'), 40)
    .option('--tenants <n>', 'demo tenants to seed (3 expired and 2 active sessions each)', positiveInt('--tenants'), 10)
    .option('--data-dir <dir>', 'keep DynamoDB data (dynalite LevelDB) in this folder across runs')
    .option('--cdk-out <dir>', 'cloud assembly folder', 'cdk.out')
    .option('--local-dir <dir>', 'where endpoints.json and logs/ are written', '.local')
    .option('--synth', 're-run cdk synth even when the cloud assembly already holds the stack', false)
    .option('--timeout <seconds>', 'give up waiting for the run to settle after this long', positiveInt('--timeout'), 180)
    .option('--provider-quota <n>', 'local payment provider: starts allowed per window (default: the job\'s configured rate)', positiveInt('--provider-quota'))
    .option('--provider-window <seconds>', 'local payment provider: the quota\'s window (default: the job\'s rate-limit interval)', positiveInt('--provider-window'))
    .option('--provider-concurrency <n>', 'local payment provider: concurrent requests allowed (default: the job\'s concurrency)', positiveInt('--provider-concurrency'))
    .option('--verbose', 'also print function logs on stderr (they always go to .local/logs)', false)
    .addOption(new Option('--dynamodb-port <port>', 'DynamoDB port (default: a free one)').argParser(port))
    .addOption(new Option('--sqs-port <port>', 'SQS port (default: a free one)').argParser(port))
    .addOption(new Option('--s3-port <port>', 'S3 port (default: a free one)').argParser(port))
    .addOption(new Option('--lambda-port <port>', 'Lambda API port (default: a free one)').argParser(port))
    .addOption(new Option('--scheduler-port <port>', 'EventBridge Scheduler API port (default: a free one)').argParser(port))
    .addOption(new Option('--secrets-port <port>', 'Secrets Manager port (default: a free one)').argParser(port))
    .addOption(new Option('--provider-port <port>', 'payment provider port (default: a free one)').argParser(port))
    .showHelpAfterError()
    .action(async (flags) => {
      process.exitCode = await run({
        env: flags.env,
        cwd: process.cwd(),
        assemblyDir: flags.cdkOut,
        localDir: flags.localDir,
        synth: flags.synth,
        serve: flags.serve,
        now: flags.now,
        date: flags.date,
        json: flags.json,
        counts: { payments: flags.payments, uploads: flags.uploads, tenants: flags.tenants },
        dataDir: flags.dataDir,
        timeoutSeconds: flags.timeout,
        verbose: flags.verbose,
        provider: { startsPerWindow: flags.providerQuota, windowSeconds: flags.providerWindow, maxConcurrent: flags.providerConcurrency },
        ports: {
          dynamodb: flags.dynamodbPort,
          sqs: flags.sqsPort,
          s3: flags.s3Port,
          lambda: flags.lambdaPort,
          secretsManager: flags.secretsPort,
          scheduler: flags.schedulerPort,
          provider: flags.providerPort,
        },
      });
    });
}

async function main(): Promise<void> {
  // The SDK's Node 20 notice is not this tool's to show, and it would break the --json contract's clean stderr story.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  let resolveStop!: () => void;
  const stopSignal = new Promise<void>((r) => (resolveStop = r));
  let stoppingSince = 0;
  const onSignal = () => {
    // A second Ctrl-C while shutting down means "now". A wrapper (npm, tsx) may relay the first one twice, hence the
    // grace second.
    if (stoppingSince > 0 && Date.now() - stoppingSince > 1000) process.exit(130);
    stoppingSince ||= Date.now();
    resolveStop();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const program = buildProgram((options) => runLocal(options, { stdout: process.stdout, stderr: process.stderr, stopSignal }));
  try {
    await program.parseAsync(process.argv);
  } catch (error) {
    const e = error as Error;
    process.stderr.write(`npm start failed: ${e.name}: ${e.message}\n`);
    if (e.cause) process.stderr.write(`  caused by: ${(e.cause as Error).message ?? String(e.cause)}\n`);
    process.exitCode = 2;
  }
  // Worker threads and sockets are closed by then; exit explicitly so a stray timer cannot hold the CLI open.
  process.exit(process.exitCode ?? 0);
}

if (require.main === module) void main();
