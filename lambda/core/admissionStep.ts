// The admission step message: what the producer sends to its admission queue to continue a run, and what an operator
// (`ops continue`) or the chaos harness sends to restart a lost chain. One contract, read by the producer and written
// by all three.
import * as z from 'zod/mini';
import { businessDateSchema, idSchema } from './message';

export const admissionStepSchema = z.strictObject({
  kind: z.literal('admission-step'),
  batchId: idSchema,
  businessDate: businessDateSchema,
  step: z.number().check(z.int(), z.gte(0)),
  scheduledTime: z.optional(z.iso.datetime({ offset: true })),
  /** A catch-up's run: every message it publishes is marked backfill (lambda/core/message.ts). */
  backfill: z.optional(z.literal(true)),
});
export type AdmissionStep = z.infer<typeof admissionStepSchema>;

/** Step `step` of a run; `scheduledTime` is carried only when the run has one. */
export function admissionStep(run: {
  batchId: string;
  businessDate: string;
  step: number;
  scheduledTime?: string;
  backfill?: boolean;
}): AdmissionStep {
  return {
    kind: 'admission-step',
    batchId: run.batchId,
    businessDate: run.businessDate,
    step: run.step,
    ...(run.scheduledTime ? { scheduledTime: run.scheduledTime } : {}),
    ...(run.backfill ? { backfill: true as const } : {}),
  };
}
