import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { type DlqPeekResult, PEEK_WARNING } from '../../../ops/commands/dlqPeek';
import { type OpsFixture, startOpsFixture } from '../fixture';

describe('Function: dlqPeek (ops dlq peek)', () => {
  let f: OpsFixture;
  const body = JSON.stringify({ operationId: 'reconcile:acme:p-1:2026-11-01', batchId: 'alpha:2026-11-01:manual-1' });

  beforeAll(async () => {
    f = await startOpsFixture(['alpha', 'beta']);
    await f.sqs.send(
      new SendMessageCommand({
        QueueUrl: f.jobs.alpha.dlqUrl,
        MessageBody: body,
        MessageAttributes: {
          failureReason: { DataType: 'String', StringValue: 'provider refused payment p-1 (HTTP 422)' },
          operationId: { DataType: 'String', StringValue: 'reconcile:acme:p-1:2026-11-01' },
          batchId: { DataType: 'String', StringValue: 'alpha:2026-11-01:manual-1' },
          failedAt: { DataType: 'String', StringValue: '2026-11-02T02:03:04.000Z' },
        },
      }),
    );
    // Exhausted maxReceiveCount: SQS moved it, so it carries no failureReason; the IDs come from the body.
    await f.sqs.send(
      new SendMessageCommand({
        QueueUrl: f.jobs.alpha.dlqUrl,
        MessageBody: JSON.stringify({ operationId: 'op-timeout', batchId: 'alpha:2026-11-01:manual-1' }),
      }),
    );
  });
  afterAll(async () => {
    await f.stop();
  });

  it('shows each message with its failure reason, and warns that viewing counts as a receive', async () => {
    const out = await f.run(['dlq', 'peek', '--job', 'alpha', '--json']);

    expect(out.code).toBe(0);
    expect(out.stderr).toBe(`warning: ${PEEK_WARNING}\n`);
    const result = out.json<DlqPeekResult>();
    expect(result).toMatchObject({ ok: true, command: 'dlq peek', warning: PEEK_WARNING });
    const byOp = Object.fromEntries(result.jobs[0].messages.map((m) => [m.operationId, m]));
    expect(Object.keys(byOp).sort()).toEqual(['op-timeout', 'reconcile:acme:p-1:2026-11-01']);
    expect(byOp['reconcile:acme:p-1:2026-11-01']).toMatchObject({
      receiveCount: 1,
      failureReason: 'provider refused payment p-1 (HTTP 422)',
      failedAt: '2026-11-02T02:03:04.000Z',
      batchId: 'alpha:2026-11-01:manual-1',
      body,
    });
    expect(byOp['op-timeout'].failureReason).toBeUndefined();
    expect(byOp['op-timeout'].batchId).toBe('alpha:2026-11-01:manual-1');
  });

  it('releases what it viewed, so the DLQ stays whole and the next peek sees the receive count go up', async () => {
    expect(await f.depth(f.jobs.alpha.dlqUrl)).toEqual({ visible: 2, inFlight: 0 });

    const out = await f.run(['dlq', 'peek', '--job', 'alpha', '--max', '1', '--json']);

    const messages = out.json<DlqPeekResult>().jobs[0].messages;
    expect(messages).toHaveLength(1);
    // local-aws-sqs may hand out a re-released message twice in one response (counting both receives); real SQS
    // counts one. Either way the count rises, which is what the warning is about.
    expect(messages[0].receiveCount).toBeGreaterThan(1);
    expect(await f.depth(f.jobs.alpha.dlqUrl)).toEqual({ visible: 2, inFlight: 0 });
  });

  it('shows an empty DLQ in the table and the warning after it', async () => {
    const out = await f.run(['dlq', 'peek', '--job', 'beta']);

    expect(out.code).toBe(0);
    expect(out.stdout).toContain('(DLQ empty)');
    expect(out.stdout).toContain(`warning: ${PEEK_WARNING}`);
  });

  it('escapes control and bidi characters of reasons and bodies in the table, and in the JSON as JSON escapes', async () => {
    const reason = 'provider refused "x\u202egnp.exe"\nforged: line\u0085';
    const hostileBody = JSON.stringify({
      operationId: 'op-hostile',
      batchId: 'beta:2026-11-01:manual-1',
      note: 'a\u2028b\u2066c',
    });
    await f.sqs.send(
      new SendMessageCommand({
        QueueUrl: f.jobs.beta.dlqUrl,
        MessageBody: hostileBody,
        MessageAttributes: { failureReason: { DataType: 'String', StringValue: reason } },
      }),
    );

    const table = await f.run(['dlq', 'peek', '--job', 'beta']);
    const json = await f.run(['dlq', 'peek', '--job', 'beta', '--json']);

    expect(table.stdout).toContain('│ provider refused "x\\u202egnp.exe"\\u000aforged: line\\u0085 │');
    expect(table.stdout).not.toMatch(/[\u0085\u202e\u2028\u2066]/);
    expect(json.stdout).toContain('"failureReason": "provider refused \\"x\\u202egnp.exe\\"\\nforged: line\\u0085"');
    expect(json.stdout).not.toMatch(/[\u0085\u202e\u2028\u2066]/);
    // The JSON escapes are JSON's own: a script reading the document gets the data as it is.
    expect(json.json<DlqPeekResult>().jobs[0].messages[0]).toMatchObject({ failureReason: reason, body: hostileBody });
  });

  it('rejects a --max outside 1..100', async () => {
    const out = await f.run(['dlq', 'peek', '--max', '0']);

    expect(out.code).toBe(2);
    expect(out.stderr).toBe('error: --max must be a whole number from 1 to 100, got "0"\n');
  });
});
