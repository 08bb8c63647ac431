import { ReceiveMessageCommand, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import type { RedriveCancelResult, RedriveResult, RedriveStatusResult } from '../../../ops/commands/redrive';
import { waitFor } from '../../../local/waitFor';
import { type OpsFixture, startOpsFixture, TARGET } from '../fixture';

/** Dead-letters messages the way the consumer does: the original body plus failureReason and the IDs as attributes. */
async function deadLetter(f: OpsFixture, dlqUrl: string, operationIds: string[]): Promise<void> {
  await f.sqs.send(
    new SendMessageBatchCommand({
      QueueUrl: dlqUrl,
      Entries: operationIds.map((operationId, i) => ({
        Id: String(i),
        MessageBody: JSON.stringify({ operationId, batchId: 'alpha:2026-11-01:manual-1' }),
        MessageAttributes: {
          failureReason: { DataType: 'String', StringValue: `payment ${operationId} was refused (HTTP 422)` },
          operationId: { DataType: 'String', StringValue: operationId },
          batchId: { DataType: 'String', StringValue: 'alpha:2026-11-01:manual-1' },
          failedAt: { DataType: 'String', StringValue: '2026-11-02T02:03:04.000Z' },
        },
      })),
    }),
  );
}

describe('Function: redrive (ops redrive, redrive status, redrive cancel)', () => {
  let f: OpsFixture;

  beforeAll(async () => {
    f = await startOpsFixture(['alpha', 'beta']);
    await deadLetter(f, f.jobs.alpha.dlqUrl, ['op-1', 'op-2', 'op-3']);
  });
  afterAll(async () => {
    await f.stop();
  });

  describe('Method: redrive', () => {
    it('rejects a rate SQS would refuse', async () => {
      const out = await f.run(['redrive', '--rate', '501', '--yes']);

      expect(out.code).toBe(2);
      expect(out.stderr).toBe('error: --rate must be a whole number of messages per second from 1 to 500, got "501"\n');
    });

    it('prints what it would move and moves nothing with --dry-run', async () => {
      const out = await f.run(['redrive', '--dry-run', '--json']);

      expect(out.code).toBe(0);
      expect(out.json<RedriveResult>()).toEqual({
        ok: true,
        command: 'redrive',
        dryRun: true,
        rate: 10,
        jobs: [
          {
            job: 'alpha',
            dlqArn: f.jobs.alpha.dlqArn,
            destinationArn: f.jobs.alpha.queueArn,
            dlqMessages: 3,
            action: 'would-start',
          },
          {
            job: 'beta',
            dlqArn: f.jobs.beta.dlqArn,
            destinationArn: f.jobs.beta.queueArn,
            dlqMessages: 0,
            action: 'skipped',
            reason: 'the DLQ is empty',
          },
        ],
      });
      expect(await f.depth(f.jobs.alpha.dlqUrl)).toEqual({ visible: 3, inFlight: 0 });
    });

    it('refuses without --yes when stdin is not a TTY', async () => {
      const out = await f.run(['redrive', '--job', 'alpha']);

      expect(out.code).toBe(1);
      expect(out.stderr).toBe(
        `error: refusing to redrive about 3 DLQ message(s) of alpha at 10/s on ${TARGET} without confirmation: stdin is not a TTY; pass --yes to confirm, or --dry-run to preview\n`,
      );
      expect(await f.depth(f.jobs.alpha.dlqUrl)).toEqual({ visible: 3, inFlight: 0 });
    });

    it('moves the DLQ messages back to the work queue with a message move task', async () => {
      const out = await f.run(['redrive', '--job', 'alpha', '--rate', '50', '--yes', '--json']);

      expect(out.code).toBe(0);
      const [job] = out.json<RedriveResult>().jobs;
      expect(job).toMatchObject({
        job: 'alpha',
        action: 'started',
        dlqMessages: 3,
        task: { status: 'RUNNING', maxNumberOfMessagesPerSecond: 50 },
      });
      expect(job.task?.taskHandle).toEqual(expect.any(String));
      await waitFor(
        'the three messages back on the work queue',
        async () => (await f.depth(f.jobs.alpha.queueUrl)).visible === 3,
        { timeoutMs: 10_000, intervalMs: 100 },
      );
      expect(await f.depth(f.jobs.alpha.dlqUrl)).toEqual({ visible: 0, inFlight: 0 });
      const { Messages = [] } = await f.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: f.jobs.alpha.queueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
          VisibilityTimeout: 0,
        }),
      );
      expect(new Set(Messages.map((m) => (JSON.parse(m.Body!) as { operationId: string }).operationId))).toEqual(
        new Set(['op-1', 'op-2', 'op-3']),
      );
    });
  });

  describe('Method: redriveStatus', () => {
    it('lists the finished move task', async () => {
      const out = await f.run(['redrive', 'status', '--job', 'alpha', '--json']);

      expect(out.code).toBe(0);
      const result = out.json<RedriveStatusResult>();
      expect(result.command).toBe('redrive status');
      expect(result.jobs[0].tasks[0]).toMatchObject({
        status: 'COMPLETED',
        sourceArn: f.jobs.alpha.dlqArn,
        destinationArn: f.jobs.alpha.queueArn,
        moved: 3,
        maxNumberOfMessagesPerSecond: 50,
      });
    });
  });

  describe('Method: redriveCancel', () => {
    it('cancels a running move task', async () => {
      await deadLetter(
        f,
        f.jobs.beta.dlqUrl,
        Array.from({ length: 10 }, (_, i) => `beta-op-${i}`),
      );
      const started = await f.run(['redrive', '--job', 'beta', '--rate', '1', '--yes', '--json']);
      expect(started.json<RedriveResult>().jobs[0].action).toBe('started');

      const dry = await f.run(['redrive', 'cancel', '--job', 'beta', '--dry-run', '--json']);
      expect(dry.json<RedriveCancelResult>().jobs[0].action).toBe('would-cancel');

      const out = await f.run(['redrive', 'cancel', '--job', 'beta', '--yes', '--json']);

      expect(out.code).toBe(0);
      const [job] = out.json<RedriveCancelResult>().jobs;
      expect(job).toMatchObject({
        job: 'beta',
        action: 'cancelled',
        taskHandle: started.json<RedriveResult>().jobs[0].task?.taskHandle,
      });
      const status = await f.run(['redrive', 'status', '--job', 'beta', '--json']);
      expect(['CANCELLING', 'CANCELLED']).toContain(status.json<RedriveStatusResult>().jobs[0].tasks[0].status);
      // At one message per second, most of the ten are still in the DLQ.
      expect((await f.depth(f.jobs.beta.dlqUrl)).visible).toBeGreaterThan(5);
    });

    it('reports that nothing runs when there is no task to cancel', async () => {
      const out = await f.run(['redrive', 'cancel', '--job', 'alpha', '--yes', '--json']);

      expect(out.json<RedriveCancelResult>().jobs).toEqual([{ job: 'alpha', action: 'none-running' }]);
    });
  });
});
