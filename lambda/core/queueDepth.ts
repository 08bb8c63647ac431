// A queue's depth as SQS's GetQueueAttributes reports it: which attributes to ask for and what they add up to. One
// reading for every side that asks (the producer's admission, ops status, preflight and redrive, the local session),
// each sending the call with its own client.

/** The attributes a depth is read from: visible, in flight and delayed messages. */
export const QUEUE_DEPTH_ATTRIBUTES = [
  'ApproximateNumberOfMessages',
  'ApproximateNumberOfMessagesNotVisible',
  'ApproximateNumberOfMessagesDelayed',
] as const;

/** A queue's messages by state (SQS's approximate counts), and all of them. */
export interface QueueDepthFigures {
  /** ApproximateNumberOfMessages: waiting to be received. */
  visible: number;
  /** ApproximateNumberOfMessagesNotVisible: received and not yet deleted (being processed). */
  inFlight: number;
  /** ApproximateNumberOfMessagesDelayed: deferred with a delay, not yet visible. */
  delayed: number;
  /** visible + inFlight + delayed: every message the queue holds, whatever its state. */
  total: number;
}

/** The figures of a GetQueueAttributes answer asked for QUEUE_DEPTH_ATTRIBUTES; an attribute left out counts 0. */
export function queueDepthOf(attributes: Partial<Record<string, string>> | undefined): QueueDepthFigures {
  const n = (name: (typeof QUEUE_DEPTH_ATTRIBUTES)[number]) => {
    const value = Number(attributes?.[name] ?? 0);
    return Number.isFinite(value) ? value : 0;
  };
  const [visible, inFlight, delayed] = QUEUE_DEPTH_ATTRIBUTES.map(n);
  return { visible, inFlight, delayed, total: visible + inFlight + delayed };
}
