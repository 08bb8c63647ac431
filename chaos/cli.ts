// `npm run chaos`: the fault-injection harness's command line; prints the verdict (JSON or text), writes the markdown
// report on request, and exits 0 only when every invariant held.
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { runChaos, type ChaosOptions, type ChaosResult } from './run';
import { formatMarkdown, formatText } from './report';

const integer = (flag: string, min: number) => (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${flag} must be an integer >= ${min}, got "${value}"`);
  return n;
};
const rate = (flag: string) => (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 1) throw new InvalidArgumentError(`${flag} must be a probability between 0 and 1, got "${value}"`);
  return n;
};

export function buildProgram(run: (options: ChaosOptions, flags: { json: boolean; report?: string }) => Promise<number>): Command {
  return new Command('chaos')
    .description('fault-injection run of the payment job on the local runtime; exits 0 iff every invariant holds')
    .requiredOption('--ops <n>', 'operations (payments) to seed and process', integer('--ops', 1))
    .requiredOption('--seed <n>', 'seed of every injection decision', integer('--seed', 0))
    .option('--json', 'print one JSON document on stdout', false)
    .option('--report <file>', 'write a markdown summary of the run here')
    .option('--rate <n>', 'the payment job\'s starts per minute for this run', integer('--rate', 1), 1200)
    .option('--consumer-timeout <s>', 'the consumer\'s Lambda timeout locally, seconds', integer('--consumer-timeout', 3), 10)
    .option('--duplicate-rate <p>', 'per published message: re-send 1-3 copies', rate('--duplicate-rate'), 0.05)
    .option('--producer-reruns <n>', 'producer re-runs of the same business date', integer('--producer-reruns', 0), 1)
    .option('--kill-rate <p>', 'per consumer invocation: kill the worker at a random point', rate('--kill-rate'), 0.03)
    .option('--provider-error-rate <p>', 'per provider request: 5xx before the effect', rate('--provider-error-rate'), 0.03)
    .option('--slow-rate <p>', 'per provider request: 100-800 ms extra latency', rate('--slow-rate'), 0.05)
    .option('--hang-rate <p>', 'per provider request: effect applied, answer held past the caller\'s timeout', rate('--hang-rate'), 0.02)
    .option('--drop-rate <p>', 'per provider request: held, then dropped without effect', rate('--drop-rate'), 0.01)
    .option('--storm-share <p>', 'share of the fault phase spent in 429 storms', rate('--storm-share'), 0.1)
    .option('--dynamo-fault-rate <p>', 'per DynamoDB request from the functions: throttling or internal error', rate('--dynamo-fault-rate'), 0.02)
    .option('--poison-rate <p>', 'poison messages per operation (at least one)', rate('--poison-rate'), 0.01)
    .option('--timeout <s>', 'give up waiting for the run to settle after this long', integer('--timeout', 10), 900)
    .action(async (f) => {
      process.exitCode = await run(
        {
          ops: f.ops,
          seed: f.seed,
          cwd: resolve(__dirname, '..'),
          ratePerMinute: f.rate,
          consumerTimeoutSeconds: f.consumerTimeout,
          duplicateRate: f.duplicateRate,
          producerReruns: f.producerReruns,
          killRate: f.killRate,
          providerErrorRate: f.providerErrorRate,
          slowRate: f.slowRate,
          hangAfterEffectRate: f.hangRate,
          dropBeforeEffectRate: f.dropRate,
          stormShare: f.stormShare,
          dynamoFaultRate: f.dynamoFaultRate,
          poisonRate: f.poisonRate,
          timeoutSeconds: f.timeout,
        },
        { json: f.json, report: f.report },
      );
    });
}

export async function main(argv: string[]): Promise<number> {
  let code = 1;
  await buildProgram(async (options, flags) => {
    const result: ChaosResult = await runChaos({ ...options, log: (line) => process.stderr.write(`chaos: ${line}\n`) });
    process.stdout.write(flags.json ? `${JSON.stringify(result, null, 2)}\n` : `${formatText(result)}\n`);
    if (flags.report) writeFileSync(flags.report, formatMarkdown(result));
    code = result.ok ? 0 : 1;
    return code;
  }).parseAsync(argv);
  return code;
}

if (require.main === module) {
  main(process.argv).then(
    (code) => process.exit(code),
    (error: Error) => {
      process.stderr.write(`chaos: ${error.name}: ${error.message}\n`);
      process.exit(2);
    },
  );
}
