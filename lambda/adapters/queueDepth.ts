// The producer's view of its work queue for admission: how many messages it holds, whatever their state.
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { QUEUE_DEPTH_ATTRIBUTES, queueDepthOf } from '../core/queueDepth';
import { sqsClient } from './clients';

/** What the producer depends on; tests may substitute it. */
export type QueueDepth = (queueUrl: string) => Promise<number>;

/**
 * Visible + in flight + delayed, from one GetQueueAttributes call. The figures are approximate (SQS says so), which
 * admission tolerates: it re-reads them at every step and only decides how much more to let in.
 */
export function sqsQueueDepth(client?: Pick<SQSClient, 'send'>): QueueDepth {
  return async (queueUrl) => {
    const out = await (client ?? sqsClient()).send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: [...QUEUE_DEPTH_ATTRIBUTES] }),
    );
    return queueDepthOf(out.Attributes).total;
  };
}
