// `ops continue`: restarts a run whose admission chain was lost (its next step dead-lettered to the producer DLQ, or
// never sent) by sending the run's current step, read from its ledger item, to the job's admission queue again.
// The producer takes a step only once (a step it is past, or one another invocation holds, does nothing), so this is
// safe to repeat and safe while the old step message still exists.
import { GetEventSourceMappingCommand } from '@aws-sdk/client-lambda';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { admissionStep, type AdmissionStep } from '../../lambda/core/admissionStep';
import { businessDateSchema } from '../../lambda/core/message';
import { type ChangeOptions, type CommandContext, confirmChange, selectJobs } from '../context';
import { BatchStateError } from '../errors';
import { renderTable } from '../io';
import { type BatchView, readBatch } from '../ledger';
import type { JobResources } from '../resources';

export interface ContinueOptions extends ChangeOptions {
  job: string;
  batch: string;
}

export interface ContinueResult {
  ok: true;
  command: 'continue';
  dryRun: boolean;
  job: string;
  batchId: string;
  admissionQueueUrl: string;
  /** The producer's admission mapping: a step sent while it is not Enabled (paused) waits until `ops resume`. */
  admissionMappingState: string;
  /** When the step was due (nextStepAt); absent if the run's first step never ended. */
  nextStepAt?: string;
  message: AdmissionStep;
  sent: boolean;
  /** SendMessage's message ID, once sent. */
  messageId?: string;
}

/** Why a batch in each finished state has no step to continue, and what to do instead. */
const NOT_ADMITTING: Record<string, string> = {
  complete: 'everything of the run is admitted, so there is no step to continue',
  'page-limit':
    'the run stopped at maxPagesPerRun with work remaining, and no step continues it; raise maxPagesPerRun (or the page size) ' +
    'and catch the date up with `ops catch-up`',
};

/** A batch that is admitting, with the step it expects next and the business date a step is built from. */
type AdmittingBatch = BatchView & { admission: 'admitting'; step: number; businessDate: string };

/**
 * The batch's ledger view, checked to have a step to continue.
 * @throws BatchStateError when the batch is not in the ledger, has no admission state, or is not admitting.
 */
async function admittingBatch(ctx: CommandContext, job: JobResources, batchId: string): Promise<AdmittingBatch> {
  const batch = await readBatch(ctx.clients, ctx.resources.tables, job.job, batchId);
  if (!batch) {
    throw new BatchStateError(
      `batch ${batchId} of ${job.job} is not in the run ledger (${ctx.resources.tables.ledger}); list the job's batches with \`ops status --job ${job.job} --batches 50\``,
      job.job,
      batchId,
      undefined,
    );
  }
  if (batch.admission === undefined || batch.step === undefined) {
    throw new BatchStateError(
      `batch ${batchId} of ${job.job} has no admission state in its ledger item (a batch produced before admission existed); there is no step to continue`,
      job.job,
      batchId,
      batch.admission,
    );
  }
  if (batch.admission !== 'admitting') {
    const why = NOT_ADMITTING[batch.admission] ?? 'only a run that is admitting has a step to continue';
    throw new BatchStateError(
      `batch ${batchId} of ${job.job} is not admitting: its admission is ${batch.admission}; ${why}`,
      job.job,
      batchId,
      batch.admission,
    );
  }
  if (!batch.businessDate || !businessDateSchema.safeParse(batch.businessDate).success) {
    // The producer would refuse the step as invalid, and after its retries it would land in the producer DLQ again.
    throw new BatchStateError(
      `batch ${batchId} of ${job.job} has no valid businessDate in its ledger item (${JSON.stringify(batch.businessDate ?? null)}); a step cannot be built from it`,
      job.job,
      batchId,
      batch.admission,
    );
  }
  return batch as AdmittingBatch;
}

/** The result of continuing: what would be sent, and the admission mapping's state; not sent yet. */
async function plannedContinue(
  ctx: CommandContext,
  job: JobResources,
  batch: AdmittingBatch,
  options: ContinueOptions,
): Promise<ContinueResult> {
  const mappingState =
    (await ctx.clients.lambda.send(new GetEventSourceMappingCommand({ UUID: job.admissionMappingUuid }))).State ??
    'UNKNOWN';
  // A catch-up's step stays backfill: its messages keep going behind live work.
  const message = admissionStep({
    batchId: options.batch,
    businessDate: batch.businessDate,
    step: batch.step,
    scheduledTime: batch.scheduledTime,
    backfill: batch.backfill,
  });
  return {
    ok: true,
    command: 'continue',
    dryRun: Boolean(options.dryRun),
    job: job.job,
    batchId: options.batch,
    admissionQueueUrl: job.admissionQueueUrl,
    admissionMappingState: mappingState,
    ...(batch.nextStepAt ? { nextStepAt: batch.nextStepAt } : {}),
    message,
    sent: false,
  };
}

/** Sends the step to the job's admission queue once confirmed, and records it on the result. */
async function sendStep(
  ctx: CommandContext,
  job: JobResources,
  batch: AdmittingBatch,
  result: ContinueResult,
  options: ContinueOptions,
): Promise<ContinueResult> {
  const batchId = options.batch;
  await confirmChange(
    ctx,
    `send admission step ${batch.step} of ${batchId} to the ${job.job} admission queue`,
    options,
  );
  if (batch.nextStepAt && Date.parse(batch.nextStepAt) > ctx.io.now().getTime()) {
    // Harmless: a step taken early admits only what the queue has room for, and the pending message then finds it taken.
    ctx.io.stderr(
      `continue: step ${batch.step} of ${batchId} is not due until ${batch.nextStepAt}; sending it now takes it early`,
    );
  }
  const sent = await ctx.clients.sqs.send(
    new SendMessageCommand({ QueueUrl: job.admissionQueueUrl, MessageBody: JSON.stringify(result.message) }),
  );
  result.sent = true;
  result.messageId = sent.MessageId;
  ctx.io.stderr(`continue: ${job.job} ${batchId} step ${batch.step} sent to the admission queue (${sent.MessageId})`);
  return result;
}

/**
 * @throws UsageError for an unknown job.
 * @throws BatchStateError when the batch is not in the ledger, has no admission state, or is not admitting.
 */
export async function continueAdmission(ctx: CommandContext, options: ContinueOptions): Promise<ContinueResult> {
  const [job] = selectJobs(ctx.resources, options.job);
  const batch = await admittingBatch(ctx, job, options.batch);
  const result = await plannedContinue(ctx, job, batch, options);
  const mappingState = result.admissionMappingState;
  if (mappingState !== 'Enabled') {
    ctx.io.stderr(
      `continue: the ${job.job} admission mapping is ${mappingState}: the step waits in the admission queue until \`ops resume\``,
    );
  }
  if (options.dryRun) return result;
  return sendStep(ctx, job, batch, result, options);
}

export function renderContinue(result: ContinueResult): string {
  const head = `continue ${result.job} ${result.batchId}${result.dryRun ? ' (dry run: nothing sent)' : ''}`;
  const table = renderTable(
    ['step', 'business date', 'scheduled time', 'was due', 'admission queue', 'admission mapping', 'sent'],
    [
      [
        result.message.step,
        result.message.businessDate,
        result.message.scheduledTime,
        result.nextStepAt,
        result.admissionQueueUrl,
        result.admissionMappingState,
        result.sent ? result.messageId : 'no',
      ],
    ],
  );
  return (
    `${head}\n${table}\nthe producer takes the step from the admission queue and goes on from the cursor in the ledger; a step already ` +
    `taken is skipped, so sending it again is safe. Follow it with \`ops status --job ${result.job}\``
  );
}
