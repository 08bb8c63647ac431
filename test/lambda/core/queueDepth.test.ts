import { QUEUE_DEPTH_ATTRIBUTES, queueDepthOf } from '../../../lambda/core/queueDepth';

describe('Function: queueDepthOf', () => {
  it('reads visible, in flight and delayed from the attributes asked for, and adds them up', () => {
    expect(
      queueDepthOf({
        ApproximateNumberOfMessages: '5',
        ApproximateNumberOfMessagesNotVisible: '3',
        ApproximateNumberOfMessagesDelayed: '2',
      }),
    ).toEqual({
      visible: 5,
      inFlight: 3,
      delayed: 2,
      total: 10,
    });
  });

  it('counts an attribute left out, an empty answer or one that is not a number as 0', () => {
    expect(queueDepthOf({ ApproximateNumberOfMessages: '4' })).toEqual({
      visible: 4,
      inFlight: 0,
      delayed: 0,
      total: 4,
    });
    expect(queueDepthOf(undefined)).toEqual({ visible: 0, inFlight: 0, delayed: 0, total: 0 });
    expect(queueDepthOf({ ApproximateNumberOfMessagesDelayed: 'many' }).total).toBe(0);
  });

  it('asks for exactly the three attributes it reads', () => {
    expect([...QUEUE_DEPTH_ATTRIBUTES]).toEqual([
      'ApproximateNumberOfMessages',
      'ApproximateNumberOfMessagesNotVisible',
      'ApproximateNumberOfMessagesDelayed',
    ]);
  });
});
