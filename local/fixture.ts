// The contract between the local tools (`npm start`, `npm run chaos`, `npm run bench`) and one job's local fixture,
// `local.ts` beside the job's code (lambda/jobs/<name>/local.ts here): how to seed the job's demo records and how to
// see its effects at its downstream. The local tools name no job: they load each job's fixture beside its entry (or
// by its folder), and a job without one still runs, judged on the pipeline's own counts (see local/pipelineEffects.ts).
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join, resolve } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import type { JobRuntimeSettings } from '../lambda/core/constants';
import { FixtureError } from './fixtureSupport';

/** A write the local AWS servers answered with a success, read off the wire (so a refused conditional write is absent). */
export interface ObservedWrite {
  /** Epoch ms the request arrived. */
  at: number;
  service: 'dynamodb' | 's3';
  action: 'PutItem' | 'UpdateItem' | 'DeleteItem' | 'PutObject' | 'DeleteObject';
  /** Table name (dynamodb) or bucket name (s3). */
  resource: string;
  /** The item's key attributes as strings (dynamodb), or `{ key: <object key> }` (s3). */
  key: Record<string, string>;
}

/** What a fixture works with: the job's JOB_SETTINGS as deployed locally (names of its tables, buckets, secrets) and clients. */
export interface FixtureContext {
  jobName: string;
  settings: JobRuntimeSettings;
  businessDate: string;
  dynamodb: DynamoDBClient;
  documents: DynamoDBDocumentClient;
  s3: S3Client;
}

/** What a fixture seeded. */
export interface SeededDemo {
  /** One key per operation the run must apply exactly once, as `effects` keys them. */
  expectedOperations: string[];
  /** For the log: e.g. "400 payments" or "150 tenants (450 expired sessions)". */
  summary: string;
  /** The fixture's own record of what it seeded, handed back to `effects` (e.g. which items must survive). */
  state?: unknown;
}

/** The job's effects as the downstream saw them. */
export interface EffectReading {
  /** Effects per operation key: exactly 1 each is the goal. */
  effectsByOperation: Map<string, number>;
  /** Effects per item, where one operation touches several items (each must be touched once). */
  effectsByItem?: Map<string, number>;
  /**
   * The items the run must touch, each once, with the operation key each belongs to (keys as `effectsByItem` names
   * them): an operation with one effect can still have left some of its items untouched.
   */
  expectedItems?: Map<string, string>;
  /** Epoch ms of every attempt's start at the downstream (the rate check counts these in any interval). */
  starts: number[];
  /** Throttles the downstream answered; undefined when it cannot tell (the report then uses the consumer's own count). */
  throttled?: number;
  /** Effects on things the run must not touch (an item not seeded as eligible, an unknown operation). */
  unexpectedEffects: string[];
}

/** Quota of a fake downstream: starts in any window, and requests in progress at once. */
export interface DownstreamQuota {
  startsPerWindow: number;
  windowSeconds: number;
  maxConcurrent: number;
}

export interface DownstreamOptions {
  /** @default the job's effective rate limit and concurrency */
  quota?: Partial<DownstreamQuota>;
  /** Simulated work per request. @default the downstream's own */
  latencyMs?: number;
  /** 0 picks a free port. @default 0 */
  port?: number;
}

/**
 * What a fake downstream does wrong with one request (the chaos harness). `throttle` answers 429 and `error` 5xx, both
 * before the effect; `slow` adds latency before the effect; `hangAfterEffect` applies the effect then holds the answer
 * back (the caller times out: the window between effect and completion record); `reject` answers 422 before the effect
 * (a permanent failure, dead-lettered until an operator redrives it); `dropBeforeEffect` holds the request
 * then closes the connection with no effect.
 */
export type DownstreamFault =
  | { kind: 'throttle'; retryAfterSeconds: number }
  | { kind: 'error'; status: 500 | 502 | 503 }
  /** A permanent refusal before the effect (the provider's 422): the consumer dead-letters the operation. */
  | { kind: 'reject'; status: 422 }
  | { kind: 'slow'; delayMs: number }
  | { kind: 'hangAfterEffect'; delayMs: number }
  | { kind: 'dropBeforeEffect'; delayMs: number };

export type DownstreamFaultPolicy = (request: {
  operationKey: string;
  idempotencyKey: string;
  at: number;
}) => DownstreamFault | undefined;

export interface DownstreamArrival {
  at: number;
  /** The operation's key, as `SeededDemo.expectedOperations` names it. */
  operationKey: string;
  idempotencyKey?: string;
  status: number;
  /** Answered from the downstream's idempotency store (no new effect). */
  replayed?: boolean;
  /** The fault injected into this request, if any. */
  fault?: DownstreamFault['kind'];
}

export interface DownstreamEffect {
  at: number;
  operationKey: string;
  idempotencyKey: string;
}

/**
 * A stand-in for a downstream that is not AWS (a provider's HTTP API), run on loopback by the local tools for a job
 * whose fixture offers one. It keeps every arrival and effect, so a run can prove pacing and exactly-once effects.
 */
export interface FakeDownstream {
  /** Base URL, once started. */
  readonly endpoint: string;
  start(): Promise<void>;
  close(): Promise<void>;
  /** The job's JOB_SETTINGS pointed at this downstream (the template holds the real URL). */
  configure(settings: JobRuntimeSettings): JobRuntimeSettings;
  /** Accept a credential the stack's secrets hold (e.g. an API key); called with each secret value the job uses. */
  allowSecret(value: string): void;
  readonly arrivals: readonly DownstreamArrival[];
  readonly effects: readonly DownstreamEffect[];
  /** Requests answered from the idempotency store. */
  readonly replays: number;
  /** Requests answered 429. */
  readonly throttled: number;
  /** Chaos: decide a fault per request; undefined stops injecting. */
  setFaults(policy: DownstreamFaultPolicy | undefined): void;
}

export interface EffectsInput {
  settings: JobRuntimeSettings;
  seeded: SeededDemo;
  /** Every successful write on the local AWS servers during the run (every job's: filter by the job's own names). */
  writes: readonly ObservedWrite[];
  /** The job's fake downstream, when its fixture offers one. */
  downstream?: FakeDownstream;
}

/** A job's local fixture: the default export-free `fixture` of `lambda/jobs/<name>/local.ts`. */
export interface JobFixture {
  /** What one demo record is called, plural, for logs: "payments". */
  unit: string;
  /** Demo records seeded when the run names no count for the job. */
  defaultCount: number;
  /** Writes `count` demo records into the job's own resources (names from `ctx.settings`), eligible on the business date. */
  seed(ctx: FixtureContext, count: number): Promise<SeededDemo>;
  /** The job's effects per operation key, from what the local servers (or its fake downstream) saw. */
  effects(input: EffectsInput): EffectReading;
  /** The operation key a message's `resource` stands for (to match DLQ messages to operations). */
  operationKeyOf(resource: Record<string, unknown>): string | undefined;
  /** A fake downstream for the job's non-AWS calls; absent when its effects land on AWS (local servers). */
  downstream?(settings: JobRuntimeSettings, options: DownstreamOptions): FakeDownstream;
}

/** The jobs the project has: the folders of lambda/jobs with an index.ts (what the handlers load by name). */
export function jobFolders(cwd: string): string[] {
  const root = join(cwd, 'lambda', 'jobs');
  if (!existsSync(root)) return [];
  return readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(root, d.name, 'index.ts')))
    .map((d) => d.name)
    .sort();
}

/** What a job's fixture file is called, beside its entry: TypeScript in the app's sources, JavaScript once compiled. */
const FIXTURE_FILES = ['local.ts', 'local.js'];

/**
 * Where a job's fixture lives: beside the job's code. With `entry` (its functions' `paced-jobs:job-entry` Metadata,
 * relative to the app's folder `cwd`) that is `local.ts` or `local.js` in the entry's folder, whichever exists (the one
 * of the entry's own language first); without it, as before the Metadata, `lambda/jobs/<name>/local.ts`. A path that
 * does not exist means the job has no fixture.
 */
export function fixturePath(cwd: string, jobName: string, entry?: string): string {
  if (entry === undefined) return join(cwd, 'lambda', 'jobs', jobName, 'local.ts');
  const dir = dirname(resolve(cwd, entry));
  const names = /\.[cm]?js$/.test(extname(entry)) ? [...FIXTURE_FILES].reverse() : FIXTURE_FILES;
  const paths = names.map((name) => join(dir, name));
  return paths.find((path) => existsSync(path)) ?? paths[0];
}

/**
 * Makes require() able to load a TypeScript fixture: a no-op under tsx (`npm start`) and under jest (whose own module
 * system transforms TypeScript, and which lists no require extensions at all); from compiled JavaScript (the package's
 * `paced-jobs start`), tsx's CommonJS hook, resolved from the app's folder, where a TypeScript app has it installed.
 * @throws FixtureError naming the fixture when tsx is not installed there
 */
function loadTypeScriptFrom(cwd: string, file: string, jobName: string): void {
  const extensions = require.extensions as Record<string, unknown> | undefined;
  if (!extensions || extensions['.ts'] !== undefined || extensions['.js'] === undefined) return;
  let api: { register: () => unknown };
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    api = createRequire(join(resolve(cwd), 'package.json'))('tsx/cjs/api') as { register: () => unknown };
  } catch (error) {
    throw new FixtureError(
      `${file}: loading a TypeScript fixture needs tsx in the app (${resolve(cwd)}), and it is not installed there: run \`npm install -D tsx\` in it, or compile the fixture to local.js`,
      jobName,
      { cause: error },
    );
  }
  api.register();
}

/**
 * Loads a job's fixture (its export `fixture`; the file `fixturePath` names); undefined when the job has none. A file
 * that exists but does not export a fixture is an error that names the file, not a silent fallback.
 */
export function loadFixture(cwd: string, jobName: string, entry?: string): JobFixture | undefined {
  const file = fixturePath(cwd, jobName, entry);
  if (!existsSync(file)) return undefined;
  if (file.endsWith('.ts')) loadTypeScriptFrom(cwd, file, jobName);
  let mod: { fixture?: Partial<JobFixture> };
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = require(file) as { fixture?: Partial<JobFixture> };
  } catch (error) {
    throw new FixtureError(`${file}: could not load the job's local fixture: ${(error as Error).message}`, jobName, {
      cause: error,
    });
  }
  const f = mod.fixture;
  const missing = (['unit', 'defaultCount', 'seed', 'effects', 'operationKeyOf'] as const).filter(
    (k) => f?.[k] === undefined,
  );
  if (!f || missing.length > 0)
    throw new FixtureError(
      `${file} must export \`fixture: JobFixture\` (missing: ${f ? missing.join(', ') : 'fixture'})`,
      jobName,
    );
  return f as JobFixture;
}

export { FixtureError, maxInAnyWindow, tally } from './fixtureSupport';

// The fake HTTP API a fixture's `downstream` configures (its route, settings key and answer), and the quota it takes
// from the job's settings: part of the fixture contract (`paced-jobs/fixture`), so a job's local*.ts imports it here.
export {
  downstreamEffects,
  downstreamQuota,
  FakeHttpApi,
  type FakeHttpApiQuota,
  type FakeHttpApiShape,
} from './fakeHttpApi';

/** BatchWriteItem's limit of requests per call. */
const WRITES_PER_BATCH = 25;
/** Rounds of resending unprocessed items before seeding gives up. */
const MAX_UNPROCESSED_RETRIES = 10;

/**
 * Seeding helper for fixtures: puts `items` into `table` with BatchWriteItem, 25 at a time, resending what DynamoDB
 * hands back unprocessed with a short backoff (up to 10 rounds, then an error naming the table).
 */
export async function putItems(
  documents: DynamoDBDocumentClient,
  job: string,
  table: string,
  items: readonly object[],
): Promise<void> {
  for (let i = 0; i < items.length; i += WRITES_PER_BATCH) {
    let requests: Record<string, { PutRequest: { Item: Record<string, unknown> } }[]> | undefined = {
      [table]: items
        .slice(i, i + WRITES_PER_BATCH)
        .map((Item) => ({ PutRequest: { Item: Item as Record<string, unknown> } })),
    };
    for (let attempt = 0; requests && Object.keys(requests).length > 0; attempt++) {
      if (attempt > MAX_UNPROCESSED_RETRIES)
        throw new FixtureError(`table ${table}: items still unprocessed after ${MAX_UNPROCESSED_RETRIES} retries`, job);
      // A short exponential backoff before a resend, as AWS advises for unprocessed items.
      if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(1000, 25 * 2 ** attempt)));
      const out = await documents.send(new BatchWriteCommand({ RequestItems: requests }));
      requests = out.UnprocessedItems as typeof requests;
    }
  }
}

/** The name the stack gave one of the job's resources (JOB_SETTINGS `tables`/`buckets`), or an error naming the alias. */
export function resourceName(settings: JobRuntimeSettings, kind: 'tables' | 'buckets', alias: string): string {
  const name = settings[kind][alias];
  if (!name)
    throw new FixtureError(
      `job ${settings.jobName} has no ${kind}.${alias} in its JOB_SETTINGS; cannot seed it`,
      settings.jobName,
    );
  return name;
}
