// What reaches the producer, parsed: the Scheduler's (or an operator's) event that starts a run, or a batch from the
// admission queue whose records are the run's next steps. Nothing is read or written before an event passes here.
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import * as z from 'zod/mini';
import { admissionStepSchema, type AdmissionStep } from '../../core/admissionStep';
import { describeIssues } from '../../core/issues';
import { businessDateSchema, idSchema } from '../../core/message';
import { PacedJobsError } from '../../core/errors';

/** The Scheduler's input (`scheduledTime` from `<aws.scheduler.scheduled-time>`), a manual run, or a catch-up. */
export const producerEventSchema = z.object({
  scheduledTime: z.optional(z.iso.datetime({ offset: true, message: 'must be an ISO-8601 timestamp' })),
  businessDate: z.optional(businessDateSchema),
  batchId: z.optional(idSchema),
  /** A catch-up (`ops catch-up`): the run's work is backfill, paced behind live work. @default false */
  backfill: z.optional(z.boolean()),
});
export type ProducerEvent = z.infer<typeof producerEventSchema>;

export class ProducerEventError extends PacedJobsError {
  constructor(
    message: string,
    public readonly reasons: string[],
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ProducerEventError';
  }
}

const reasonsOf = (error: z.core.$ZodError) => describeIssues(error, { root: 'event' });

/** A batch from the admission queue; anything else is a direct invocation. */
export const isSqsEvent = (event: unknown): event is SQSEvent =>
  typeof event === 'object' &&
  event !== null &&
  Array.isArray((event as SQSEvent).Records) &&
  (event as SQSEvent).Records.every((r) => r?.eventSource === 'aws:sqs');

/**
 * A direct invocation's event; none (`undefined`, `null`) is the empty event, a run of today's business date.
 * @throws ProducerEventError naming every problem
 */
export function parseProducerEvent(raw: unknown): ProducerEvent {
  const parsed = producerEventSchema.safeParse(raw ?? {});
  if (parsed.success) return parsed.data;
  const reasons = reasonsOf(parsed.error);
  throw new ProducerEventError(`invalid producer event: ${reasons.join('; ')}`, reasons);
}

/**
 * The admission step an admission queue record carries.
 * @throws ProducerEventError when the body is not JSON or not a step, naming every problem
 */
export function parseStepRecord(record: SQSRecord): AdmissionStep {
  let raw: unknown;
  try {
    raw = JSON.parse(record.body);
  } catch (error) {
    const message = `admission step ${record.messageId} is not JSON`;
    throw new ProducerEventError(message, ['body: not JSON'], { cause: error });
  }
  const parsed = admissionStepSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const reasons = reasonsOf(parsed.error);
  throw new ProducerEventError(`invalid admission step: ${reasons.join('; ')}`, reasons);
}
