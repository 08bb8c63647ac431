import { spawn, ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListEventSourceMappingsCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { waitFor } from '../../local/waitFor';

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'local', 'cli.ts');

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(args: string[]): { child: ChildProcess; done: Promise<Result> } {
  // Node itself loads tsx, so SIGINT reaches the CLI directly rather than through tsx's relaying wrapper process.
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], { cwd: ROOT, env: { ...process.env, FORCE_COLOR: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c) => (stdout += c));
  child.stderr!.on('data', (c) => (stderr += c));
  const done = new Promise<Result>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, done };
}

describe('Command: npm start', () => {
  let localDir: string;
  beforeEach(() => {
    localDir = mkdtempSync(join(tmpdir(), 'paced-jobs-local-'));
  });
  afterEach(() => {
    rmSync(localDir, { recursive: true, force: true });
  });

  it('runs one cycle of every job on small data and reports ok with the four checks', async () => {
    const { done } = start(['--json', '--payments', '3', '--uploads', '3', '--tenants', '2', '--local-dir', localDir, '--timeout', '90']);
    const result = await done;
    expect(result.stderr).toContain('fired');
    const report = JSON.parse(result.stdout);
    expect(result.code).toBe(0);
    expect(report.ok).toBe(true);
    // The example jobs at the sizes asked; any other job of the project (one a user added) runs at its fixture's default.
    expect(report.jobs).toMatchObject({
      'expired-session-cleanup': expect.objectContaining({ discovered: 2, completed: 2, rejected: 0, dlq: 0, effects: 2, itemEffects: 6, duplicatesSuppressed: 0, rateLimitPerWindow: expect.any(Number) }),
      'payment-reconciliation': expect.objectContaining({ discovered: 3, completed: 3, rejected: 0, dlq: 0, effects: 3, duplicatesSuppressed: 0, throttled: 0, maxStartsPerWindow: 3 }),
      'stale-upload-cleanup': expect.objectContaining({ discovered: 3, completed: 3, rejected: 0, dlq: 0, effects: 3, maxStartsPerWindow: 3 }),
    });
    expect(Object.keys(report.jobs)).toEqual(expect.arrayContaining(['expired-session-cleanup', 'payment-reconciliation', 'stale-upload-cleanup']));
    // Five checks a job: nothing lost, one effect per operation, rate, no unexplained dead letters, IAM allowed.
    expect(report.checks).toHaveLength(5 * Object.keys(report.jobs).length);
    expect(report.warnings.filter((w: string) => w.includes('IAM'))).toEqual([]);
    expect(report.checks.every((c: { ok: boolean }) => c.ok)).toBe(true);
    expect(existsSync(join(localDir, 'logs'))).toBe(true);
  }, 300_000); // includes a cdk synth on a fresh clone (no cdk.out yet)

  it('serves a stack that the AWS SDK can use from another process, and stops cleanly on SIGINT', async () => {
    const { child, done } = start(['--serve', '--local-dir', localDir]);
    const file = join(localDir, 'endpoints.json');
    await waitFor('the serving stack to write its endpoints', () => existsSync(file), { timeoutMs: 30_000, intervalMs: 100 });
    const doc = JSON.parse(readFileSync(file, 'utf8'));
    const config = (endpoint: string) => ({ endpoint, region: doc.region, credentials: doc.credentials });
    const job = doc.jobs['payment-reconciliation'];
    const sqs = new SQSClient(config(doc.endpoints.sqs));
    const attrs = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: job.queueUrl, AttributeNames: ['RedrivePolicy'] }));
    expect(JSON.parse(attrs.Attributes!.RedrivePolicy!).deadLetterTargetArn).toBe(job.dlqArn);
    const ddb = new DynamoDBClient(config(doc.endpoints.dynamodb));
    expect((await ddb.send(new ListTablesCommand({}))).TableNames).toContain(doc.outputs.LedgerTableName);
    const lambda = new LambdaClient(config(doc.endpoints.lambda));
    const mappings = await lambda.send(new ListEventSourceMappingsCommand({ FunctionName: job.consumer }));
    expect(mappings.EventSourceMappings!.map((m) => m.UUID)).toEqual([job.eventSourceMapping]);
    expect(doc.outputs.PaymentReconciliationEventSourceMappingUuid).toBe(job.eventSourceMapping);
    [sqs, ddb, lambda].forEach((c) => c.destroy());
    child.kill('SIGINT');
    const result = await done;
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('stopping');
  }, 60_000);

  it('defers a 429 storm from the provider and ends with every payment applied once and nothing in the DLQ', async () => {
    // A provider quota far below the job's own rate: most first attempts get 429 with Retry-After.
    const args = ['--json', '--payments', '12', '--uploads', '1', '--tenants', '1', '--downstream-quota', '2', '--downstream-window', '3'];
    const result = await start([...args, '--local-dir', localDir, '--timeout', '120']).done;
    const report = JSON.parse(result.stdout);
    expect(result.code).toBe(0);
    expect(report.jobs['payment-reconciliation']).toEqual(
      expect.objectContaining({ discovered: 12, completed: 12, dlq: 0, effects: 12, rejected: 0 }),
    );
    expect(report.jobs['payment-reconciliation'].throttled).toBeGreaterThan(0);
    expect(report.jobs['payment-reconciliation'].maxJobAgeSeconds).toBeGreaterThan(0);
    expect(report.ok).toBe(true);
  }, 180_000);

  it('rejects a bad flag with a clear message', async () => {
    const result = await start(['--payments', 'abc']).done;
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`error: option '--payments <n>' argument 'abc' is invalid. --payments must be a whole number, got "abc"`);
  }, 30_000);

  it('fails clearly when a chosen port is in use', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as { port: number }).port;
    try {
      const result = await start(['--sqs-port', String(port), '--local-dir', localDir]).done;
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`npm start failed: Error: port ${port} on 127.0.0.1 is already in use (SQS)`);
    } finally {
      blocker.close();
    }
  }, 30_000);
});
