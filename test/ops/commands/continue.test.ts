import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { DynamoRunStateStore } from '../../../lambda/adapters/admissionState';
import { DynamoLedger } from '../../../lambda/adapters/ledger';
import { admissionStepSchema } from '../../../lambda/core/admissionStep';
import type { ContinueResult } from '../../../ops/commands/continue';
import { waitFor } from '../../../local/waitFor';
import { type OpsFixture, startOpsFixture, TARGET } from '../fixture';

const STALLED = 'alpha:2026-11-03:20261103T010000Z';
const CAUGHT_UP = 'alpha:2026-10-30:manual-9f3c';
const COMPLETE = 'alpha:2026-11-02:20261102T010000Z';
const PAGE_LIMIT = 'alpha:2026-11-01:20261101T010000Z';
const LEGACY = 'alpha:2026-10-31:20261031T010000Z';
const CATCH_UP = 'alpha:2026-10-29:catch-up-1a2b';
const NOW = new Date('2026-11-03T03:00:00.000Z');

describe('Function: continueAdmission (ops continue)', () => {
  let f: OpsFixture;

  /** Receives and deletes every step message waiting in alpha's admission queue; returns their bodies. */
  const takeSteps = async (): Promise<string[]> => {
    const bodies: string[] = [];
    for (let empty = 0; empty < 2; ) {
      const { Messages = [] } = await f.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: f.jobs.alpha.admissionQueueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
        }),
      );
      empty = Messages.length === 0 ? empty + 1 : 0;
      for (const m of Messages) {
        bodies.push(m.Body!);
        await f.sqs.send(
          new DeleteMessageCommand({ QueueUrl: f.jobs.alpha.admissionQueueUrl, ReceiptHandle: m.ReceiptHandle }),
        );
      }
    }
    return bodies;
  };

  beforeAll(async () => {
    f = await startOpsFixture(['alpha']);
    // Run state as the producer writes it (its own adapter), so the CLI's reading is pinned to the writer.
    const runs = new DynamoRunStateStore({ tableName: f.tables.ledger, client: f.dynamo });
    const at = (iso: string) => Date.parse(iso);
    const step = async (
      batchId: string,
      n: number,
      cursor: string | undefined,
      end: { status: 'admitting' | 'complete' | 'page-limit'; nextStepAt?: string },
    ) => {
      await runs.lease(
        'alpha',
        batchId,
        n,
        `owner-${n}`,
        at('2026-11-01T00:00:00.000Z'),
        at('2026-11-01T00:15:00.000Z'),
      );
      await runs.commitPage('alpha', batchId, n, `owner-${n}`, { cursor, discovered: 10, published: 10 });
      await runs.endStep('alpha', batchId, n, `owner-${n}`, end);
    };
    await runs.ensure('alpha', STALLED, {
      businessDate: '2026-11-03',
      scheduledTime: '2026-11-03T01:00:00Z',
      startedAt: '2026-11-03T01:00:02.000Z',
      admissionRatePerMinute: 30,
    });
    await step(STALLED, 0, 'page-1', { status: 'admitting', nextStepAt: '2026-11-03T01:05:00.000Z' });
    await step(STALLED, 1, 'page-2', { status: 'admitting', nextStepAt: '2026-11-03T02:40:00.000Z' });
    await runs.ensure('alpha', CAUGHT_UP, {
      businessDate: '2026-10-30',
      startedAt: '2026-11-03T02:50:00.000Z',
      admissionRatePerMinute: 30,
    });
    await step(CAUGHT_UP, 0, 'page-1', { status: 'admitting', nextStepAt: '2026-11-03T03:04:00.000Z' });
    await runs.ensure('alpha', COMPLETE, { businessDate: '2026-11-02', startedAt: '2026-11-02T01:00:02.000Z' });
    await step(COMPLETE, 0, undefined, { status: 'complete' });
    await runs.ensure('alpha', PAGE_LIMIT, { businessDate: '2026-11-01', startedAt: '2026-11-01T01:00:02.000Z' });
    await step(PAGE_LIMIT, 0, 'page-1', { status: 'page-limit' });
    // A catch-up's run (ops catch-up marks it backfill), stalled at its second step.
    await runs.ensure('alpha', CATCH_UP, {
      businessDate: '2026-10-29',
      startedAt: '2026-11-03T02:00:00.000Z',
      admissionRatePerMinute: 30,
      backfill: true,
    });
    await step(CATCH_UP, 0, 'page-1', { status: 'admitting', nextStepAt: '2026-11-03T02:05:00.000Z' });
    // A batch from before admission: counters only.
    await new DynamoLedger({ tableName: f.tables.ledger, client: f.dynamo }).addToBatch(
      'alpha',
      LEGACY,
      { discovered: 2, published: 2 },
      { businessDate: '2026-10-31', startedAt: '2026-10-31T01:00:02.000Z' },
    );
  });
  afterAll(async () => {
    await f.stop();
  });
  afterEach(async () => {
    await f.jobs.alpha.admissionMapping.stop();
  });

  it('prints the step it would send and sends nothing with --dry-run', async () => {
    const out = await f.run(['continue', '--job', 'alpha', '--batch', STALLED, '--dry-run', '--json'], { now: NOW });

    expect(out.code).toBe(0);
    expect(out.json<ContinueResult>()).toEqual({
      ok: true,
      command: 'continue',
      dryRun: true,
      job: 'alpha',
      batchId: STALLED,
      admissionQueueUrl: f.jobs.alpha.admissionQueueUrl,
      admissionMappingState: 'Disabled',
      nextStepAt: '2026-11-03T02:40:00.000Z',
      message: {
        kind: 'admission-step',
        batchId: STALLED,
        businessDate: '2026-11-03',
        step: 2,
        scheduledTime: '2026-11-03T01:00:00Z',
      },
      sent: false,
    });
    expect(await takeSteps()).toEqual([]);
  });

  it("keeps a catch-up's step backfill, so its messages stay behind live work", async () => {
    const out = await f.run(['continue', '--job', 'alpha', '--batch', CATCH_UP, '--dry-run', '--json'], { now: NOW });

    expect(out.code).toBe(0);
    expect(out.json<ContinueResult>().message).toEqual({
      kind: 'admission-step',
      batchId: CATCH_UP,
      businessDate: '2026-10-29',
      step: 1,
      backfill: true,
    });
  });

  it('refuses without --yes when stdin is not a TTY, and sends nothing', async () => {
    const out = await f.run(['continue', '--job', 'alpha', '--batch', STALLED], { now: NOW });

    expect(out.code).toBe(1);
    expect(out.stderr).toBe(
      'continue: the alpha admission mapping is Disabled: the step waits in the admission queue until `ops resume`\n' +
        `error: refusing to send admission step 2 of ${STALLED} to the alpha admission queue on ${TARGET} without confirmation: stdin is not a TTY; ` +
        'pass --yes to confirm, or --dry-run to preview\n',
    );
    expect(await takeSteps()).toEqual([]);
  });

  it("sends the run's current step to the admission queue, exactly as the producer sends its steps", async () => {
    const out = await f.run(['continue', '--job', 'alpha', '--batch', STALLED, '--yes', '--json'], { now: NOW });

    expect(out.code).toBe(0);
    const result = out.json<ContinueResult>();
    expect(result).toMatchObject({ sent: true, messageId: expect.any(String), message: { step: 2 } });
    const bodies = await takeSteps();
    expect(bodies).toEqual([
      `{"kind":"admission-step","batchId":"${STALLED}","businessDate":"2026-11-03","step":2,"scheduledTime":"2026-11-03T01:00:00Z"}`,
    ]);
    // The producer's own parser takes it.
    expect(admissionStepSchema.parse(JSON.parse(bodies[0]))).toEqual(result.message);
    expect(out.stderr).toBe(
      'continue: the alpha admission mapping is Disabled: the step waits in the admission queue until `ops resume`\n' +
        `send admission step 2 of ${STALLED} to the alpha admission queue on ${TARGET} (confirmed by --yes)\n` +
        `continue: alpha ${STALLED} step 2 sent to the admission queue (${result.messageId})\n`,
    );
  });

  it('hands the step to the producer when admission runs, and warns when the step is not yet due', async () => {
    f.jobs.alpha.admissionMapping.start();

    const out = await f.run(['continue', '--job', 'alpha', '--batch', CAUGHT_UP, '--yes'], { now: NOW });

    expect(out.code).toBe(0);
    expect(out.stderr.split('\n').slice(0, 2)).toEqual([
      `send admission step 1 of ${CAUGHT_UP} to the alpha admission queue on ${TARGET} (confirmed by --yes)`,
      'continue: step 1 of alpha:2026-10-30:manual-9f3c is not due until 2026-11-03T03:04:00.000Z; sending it now takes it early',
    ]);
    await waitFor('the step delivered to the producer', () => f.admissionDeliveries.length > 0, { timeoutMs: 10_000 });
    // A catch-up run has no scheduled time, so its step carries none.
    expect(f.admissionDeliveries).toEqual([
      { job: 'alpha', body: { kind: 'admission-step', batchId: CAUGHT_UP, businessDate: '2026-10-30', step: 1 } },
    ]);
    const lines = out.stdout.split('\n').map((l) => l.replace(/\s+/g, ' '));
    expect(lines[0]).toBe(`continue alpha ${CAUGHT_UP}`);
    expect(lines).toContain(
      `│ 1 │ 2026-10-30 │ - │ 2026-11-03T03:04:00.000Z │ ${f.jobs.alpha.admissionQueueUrl} │ Enabled │ ${out.stderr.match(/\(([^)]+)\)\n$/)![1]} │`,
    );
    expect(out.stdout).toContain(
      'a step already taken is skipped, so sending it again is safe. Follow it with `ops status --job alpha`\n',
    );
  });

  it.each([
    [
      'a batch that is not in the ledger',
      'alpha:2026-09-01:nope',
      "error: batch alpha:2026-09-01:nope of alpha is not in the run ledger (ops-test-ledger); list the job's batches with `ops status --job alpha --batches 50`",
      undefined,
    ],
    [
      'a batch whose admission is complete',
      COMPLETE,
      `error: batch ${COMPLETE} of alpha is not admitting: its admission is complete; everything of the run is admitted, so there is no step to continue`,
      'complete',
    ],
    [
      'a batch that stopped at the page limit',
      PAGE_LIMIT,
      `error: batch ${PAGE_LIMIT} of alpha is not admitting: its admission is page-limit; the run stopped at maxPagesPerRun with work remaining, ` +
        'and no step continues it; raise maxPagesPerRun (or the page size) and catch the date up with `ops catch-up`',
      'page-limit',
    ],
    [
      'a batch from before admission',
      LEGACY,
      `error: batch ${LEGACY} of alpha has no admission state in its ledger item (a batch produced before admission existed); there is no step to continue`,
      undefined,
    ],
  ])('refuses %s, and sends nothing', async (_, batchId, message, admission) => {
    const out = await f.run(['continue', '--job', 'alpha', '--batch', batchId, '--yes', '--json']);

    expect(out.code).toBe(1);
    expect(out.stderr).toBe(`${message}\n`);
    expect(out.json()).toEqual({
      ok: false,
      error: {
        name: 'BatchStateError',
        message: message.slice('error: '.length),
        job: 'alpha',
        batchId,
        ...(admission ? { admission } : {}),
        exitCode: 1,
      },
    });
    expect(await takeSteps()).toEqual([]);
  });

  it('needs --batch', async () => {
    const out = await f.run(['continue', '--job', 'alpha', '--yes']);

    expect(out.code).toBe(2);
    expect(out.stderr).toMatch(/^error: required option '--batch <batchId>' not specified\n/);
  });
});
