// In-memory stand-ins for the consumer units' ports (limiter, publisher, ledger, completed lookup), a message and record
// factory for the fake job, and a metric recorder: the units' tests run on these, with no AWS and no timers.
import type { SQSRecord } from 'aws-lambda';
import type { CompletedBy, InvocationRecord } from '../../../../lambda/core/ledgerContract';
import { serializeMessage, type JobMessage } from '../../../../lambda/core/message';
import type { CompletedLookup } from '../../../../lambda/adapters/completedOperations';
import type { BatchTally, Ledger, Rejection } from '../../../../lambda/adapters/ledger';
import { metrics } from '../../../../lambda/adapters/observability';
import type { Acquisition, AcquireOptions, RateLimiter } from '../../../../lambda/adapters/rateLimiter';
import type { OutgoingMessage, Publisher, PublishSummary } from '../../../../lambda/adapters/sqsPublisher';
import { sqsRecord } from '../../../support/lambdaEvents';

export const BATCH = 'fake-job:2026-11-28:20261129T020000Z';
export const MAX_MESSAGE_BYTES = 2048;
/** The fixed clock of every unit test: 5 s after the batch's messages were enqueued. */
export const NOW = new Date('2026-11-29T02:00:05.000Z');
export const ENQUEUED_AT = '2026-11-29T02:00:00.000Z';

export const operationId = (key: string) => `fake:${key}:2026-11-28`;

/** A valid message for the fake job; `key` names the operation. */
export function message(key: string, overrides: Partial<JobMessage> = {}): JobMessage {
  return {
    version: 1,
    jobType: 'fake-job',
    operationId: operationId(key),
    batchId: BATCH,
    businessDate: '2026-11-28',
    resource: { id: key },
    enqueuedAt: ENQUEUED_AT,
    ...overrides,
  };
}

/** An SQS record carrying `body` (a message is serialized as the producer would); message ID `msg-<key>`. */
export function record(
  key: string,
  body: JobMessage | string = message(key),
  overrides: Partial<SQSRecord> = {},
): SQSRecord {
  return sqsRecord(typeof body === 'string' ? body : serializeMessage(body, MAX_MESSAGE_BYTES), {
    messageId: `msg-${key}`,
    ...overrides,
  });
}

/** What the tally holds, per batch ID. */
export const tallied = (tally: BatchTally): Record<string, InvocationRecord> => Object.fromEntries(tally.entries());

/** A limiter answering each acquire with the next scripted answer (an Error is thrown); every call is kept. */
export class FakeLimiter implements RateLimiter {
  readonly calls: { key: string; count: number; options?: AcquireOptions }[] = [];
  constructor(private readonly answers: (Acquisition | Error)[] = []) {}

  script(...answers: (Acquisition | Error)[]): this {
    this.answers.push(...answers);
    return this;
  }

  async acquire(key: string, count: number, options?: AcquireOptions): Promise<Acquisition> {
    this.calls.push({ key, count, options });
    const answer = this.answers.shift();
    if (answer === undefined)
      throw new Error(`FakeLimiter: no scripted answer for call ${this.calls.length} (${count} on ${key})`);
    if (answer instanceof Error) throw answer;
    return answer;
  }
}

/** `granted` of the slots at `startAtMs`, and the limiter's hint for the next. */
export const grant = (startAtMs: number[], waitMs = 0): Acquisition => ({
  granted: startAtMs.length,
  startAtMs,
  waitMs,
});

/** A publisher keeping every call; `failWith` decides, per call, an error to throw instead (the call is kept). */
export class FakePublisher implements Publisher {
  readonly calls: { queueUrl: string; messages: OutgoingMessage[] }[] = [];
  failWith: (queueUrl: string, messages: OutgoingMessage[]) => Error | undefined = () => undefined;

  async publish(queueUrl: string, messages: OutgoingMessage[]): Promise<PublishSummary> {
    this.calls.push({ queueUrl, messages });
    const error = this.failWith(queueUrl, messages);
    if (error) throw error;
    return { published: messages.length, calls: 1, retried: 0 };
  }
}

/** A ledger keeping every write; writes for the batches in `failingBatches` (or every rejection, when set) throw. */
export class FakeLedger implements Ledger {
  readonly invocations: { job: string; batchId: string; invocationId: string; record: InvocationRecord }[] = [];
  readonly rejections: Rejection[] = [];
  readonly failingBatches = new Set<string>();
  rejectionError: Error | undefined;

  async recordInvocation(job: string, batchId: string, invocationId: string, record: InvocationRecord): Promise<void> {
    if (this.failingBatches.has(batchId)) throw new Error(`ledger write refused for ${batchId}`);
    this.invocations.push({ job, batchId, invocationId, record });
  }

  async recordRejection(rejection: Rejection): Promise<void> {
    if (this.rejectionError) throw this.rejectionError;
    this.rejections.push(rejection);
  }
}

/** A completed lookup answering from `done` (or throwing `error`); every call is kept. */
export class FakeCompletedLookup implements CompletedLookup {
  readonly calls: { jobName: string; operationIds: string[] }[] = [];
  error: Error | undefined;
  constructor(readonly done = new Map<string, CompletedBy | undefined>()) {}

  async completed(jobName: string, operationIds: string[]): Promise<ReadonlyMap<string, CompletedBy | undefined>> {
    this.calls.push({ jobName, operationIds });
    if (this.error) throw this.error;
    return new Map([...this.done].filter(([id]) => operationIds.includes(id)));
  }
}

/** Records every metric added from now on (the real Metrics object buffers nothing); restore with jest.restoreAllMocks. */
export function recordMetrics(): { calls: [string, number][]; total: (name: string) => number } {
  const calls: [string, number][] = [];
  jest.spyOn(metrics, 'addMetric').mockImplementation((name, _unit, value) => {
    calls.push([name, value]);
    return metrics;
  });
  return { calls, total: (name) => calls.filter(([n]) => n === name).reduce((sum, [, v]) => sum + v, 0) };
}
