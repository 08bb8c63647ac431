import { BACKFILL_GROUP } from '../../../../lambda/core/fairness';
import type { AnyJob } from '../../../../lambda/core/job';
import { parseMessage, type JobMessage } from '../../../../lambda/core/message';
import {
  checkPage,
  pageMessages,
  runDeadline,
  type PageMessagesInput,
} from '../../../../lambda/handlers/producer/pageMessages';
import { job as fakeJob } from '../../../fixtures/jobs/fake-job';
import { BATCH, NOW, NOW_MS, step } from './fakes';

const job = fakeJob as AnyJob;
const op = (id: string, resource: Record<string, string> = { id }) => ({
  operationId: `fake:${id}:2026-11-28`,
  resource,
});
const page = (...operations: ReturnType<typeof op>[]) => ({ operations, nextCursor: undefined });

/** Unlimited admission: every message visible at once. */
function input(overrides: Partial<PageMessagesInput> = {}): PageMessagesInput {
  return {
    job,
    step: step(),
    dueBy: undefined,
    maxMessageBytes: 4096,
    fairnessField: undefined,
    slots: {
      plan: { admit: Infinity, firstVisibleMs: NOW_MS },
      admitted: 0,
      ratePerSecond: undefined,
      groupSize: 10,
      leadMs: 0,
      plannedUntilMs: undefined,
    },
    sentAtMs: NOW_MS,
    ...overrides,
  };
}

const bodyOf = (body: string) => {
  const parsed = parseMessage(body, 4096);
  if (!parsed.ok) throw new Error(parsed.reasons.join('; '));
  return parsed.message;
};

describe('Function: pageMessages', () => {
  it('wraps each operation in its envelope, enqueued when the page is sent', () => {
    const { messages, invalid } = pageMessages(page(op('a')), input());
    expect(invalid).toEqual([]);
    expect(messages).toEqual([{ operationId: 'fake:a:2026-11-28', delaySeconds: 0, body: expect.any(String) }]);
    expect(bodyOf(messages[0].body)).toEqual({
      version: 1,
      jobType: 'fake-job',
      operationId: 'fake:a:2026-11-28',
      batchId: BATCH,
      businessDate: '2026-11-28',
      resource: { id: 'a' },
      enqueuedAt: NOW.toISOString(),
      firstEnqueuedAt: NOW.toISOString(),
    });
  });

  it("carries the run's deadline and a catch-up's backfill mark, and puts backfill in the one backfill group", () => {
    const dueBy = '2026-11-29T03:00:00.000Z';
    const catchUp = input({ step: step(0, { backfill: true }), dueBy, fairnessField: 'id' });
    const { messages } = pageMessages(page(op('a')), catchUp);
    expect(bodyOf(messages[0].body)).toMatchObject({ dueBy: '2026-11-29T03:00:00.000Z', backfill: true });
    expect(messages[0].groupId).toBe(BACKFILL_GROUP);
  });

  it("groups live work by the job's key field, and leaves a message without a key ungrouped", () => {
    const keyed = page(op('a', { id: 'a', tenant: 'acme' }), op('b'));
    const { messages } = pageMessages(keyed, input({ fairnessField: 'tenant' }));
    expect(messages.map((m) => m.groupId)).toEqual(['acme', undefined]);
    expect(messages[1]).not.toHaveProperty('groupId');
  });

  it('delays each group of a paced step to its first slot, after what the step admitted, less the lead', () => {
    // 1 start/s from +10 s, groups of 2; this page follows 3 messages the step already admitted (slots +10..+12 s).
    const plan = { admit: 6, firstVisibleMs: NOW_MS + 10_000 };
    const slots = { plan, admitted: 3, ratePerSecond: 1, groupSize: 2, leadMs: 1000, plannedUntilMs: NOW_MS + 12_000 };
    const result = pageMessages(page(op('a'), op('b'), op('c')), input({ slots }));
    // Index 3 is in the group from +12 s, 4 and 5 in the group from +14 s.
    expect(result.messages.map((m) => m.delaySeconds)).toEqual([11, 13, 13]);
    expect(result.lastVisibleMs).toBe(NOW_MS + 14_000);
  });

  it("keeps the run's last slot when the page has no message", () => {
    const slots = { ...input().slots, ratePerSecond: 1, plannedUntilMs: NOW_MS + 5_000 };
    expect(pageMessages(page(), input({ slots })).lastVisibleMs).toBe(NOW_MS + 5_000);
  });
});

describe('Function: checkPage', () => {
  const envelope = (operationId: string, resource: JobMessage['resource']): JobMessage => ({
    version: 1 as const,
    jobType: 'fake-job',
    operationId,
    batchId: BATCH,
    businessDate: '2026-11-28',
    resource,
    enqueuedAt: NOW.toISOString(),
  });

  it('turns the rows the job handed back and every operation that breaks the contract into invalid rows', () => {
    const discovered = {
      operations: [
        op('good'),
        op('BAD'),
        { operationId: 'fake:has space', resource: { id: 'x' } },
        op('big', { id: 'big', tenant: 'x'.repeat(5000) }),
      ],
      invalid: [{ key: 'row\u2028one', reason: 'uploadId: must not be empty' }],
    };
    const { ready, invalid } = checkPage(job, discovered, envelope, 4096);
    expect(ready.map((r) => r.operationId)).toEqual(['fake:good:2026-11-28']);
    expect(invalid).toEqual([
      // A key is escaped as a reason is.
      { key: 'row\\u2028one', reasons: ['uploadId: must not be empty'] },
      { key: 'fake:BAD:2026-11-28', reasons: ['resource.id: Invalid string: must match pattern /^[a-z0-9-]+$/'] },
      {
        key: 'fake:has space',
        reasons: ['operationId: may hold only letters, digits and : _ . @ # / + = - (no spaces or control characters)'],
      },
      { key: 'fake:big:2026-11-28', reasons: [expect.stringMatching(/^body is \d+ bytes, over the 4096-byte cap$/)] },
    ]);
  });

  it('lets an error that is not a contract violation through', () => {
    const broken = () => {
      throw new TypeError('envelope bug');
    };
    expect(() => checkPage(job, page(op('a')), broken, 4096)).toThrow('envelope bug');
  });
});

describe('Function: runDeadline', () => {
  const slo = { completeWithinMinutes: 120 };

  it("is the scheduled time plus the SLO window, or the run's start when it has no schedule", () => {
    const scheduled = step(0, { scheduledTime: '2026-11-29T01:00:00Z' });
    expect(runDeadline(scheduled, '2026-11-29T01:00:03Z', slo)).toBe('2026-11-29T03:00:00.000Z');
    expect(runDeadline(step(), '2026-11-29T01:00:03.000Z', slo)).toBe('2026-11-29T03:00:03.000Z');
  });

  it('is none without an SLO or a known start', () => {
    expect(runDeadline(step(), '2026-11-29T01:00:03.000Z', undefined)).toBeUndefined();
    expect(runDeadline(step(), undefined, slo)).toBeUndefined();
  });
});
