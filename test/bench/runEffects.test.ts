// What the bench reads of a job's effects in the measured cycle: the downstream from a moment on, the figures against
// what was seeded, and the consumer's logged apply starts per operation.
import type { DownstreamArrival, DownstreamEffect, EffectReading, FakeDownstream } from '../../local/fixture';
import { effectFigures, itemEffectFigures } from '../../bench/runEffects';
import { downstreamSince } from '../../local/session';
import { PipelineLog } from '../../local/pipelineEffects';

function fakeDownstream(arrivals: DownstreamArrival[], effects: DownstreamEffect[]): FakeDownstream {
  return {
    endpoint: 'http://127.0.0.1:1',
    start: async () => undefined,
    close: async () => undefined,
    configure: (s) => s,
    allowSecret: () => undefined,
    setFaults: () => undefined,
    arrivals,
    effects,
    replays: arrivals.filter((a) => a.replayed).length,
    throttled: arrivals.filter((a) => a.status === 429).length,
  };
}

const reading = (effects: Record<string, number>, unexpectedEffects: string[] = []): EffectReading => ({
  effectsByOperation: new Map(Object.entries(effects)),
  starts: [],
  unexpectedEffects,
});

describe('Function: downstreamSince', () => {
  const downstream = fakeDownstream(
    [
      { at: 100, operationKey: 'warm-1', status: 200 },
      { at: 100, operationKey: 'warm-2', status: 429 },
      { at: 200, operationKey: 'a', status: 429 },
      { at: 201, operationKey: 'a', status: 200 },
      { at: 250, operationKey: 'a', status: 200, replayed: true },
    ],
    [
      { at: 120, operationKey: 'warm-1', idempotencyKey: 'k0' },
      { at: 221, operationKey: 'a', idempotencyKey: 'k1' },
    ],
  );

  it('keeps only the arrivals and effects from the moment on, and counts throttles and replays among them', () => {
    const view = downstreamSince(downstream, 200);
    expect(view.arrivals.map((a) => a.at)).toEqual([200, 201, 250]);
    expect(view.effects).toEqual([{ at: 221, operationKey: 'a', idempotencyKey: 'k1' }]);
    expect(view.throttled).toBe(1);
    expect(view.replays).toBe(1);
    expect(downstream.throttled).toBe(2);
  });

  it('leaves the downstream itself as it was, and still reaches it', () => {
    const view = downstreamSince(downstream, 200);
    expect(downstream.arrivals).toHaveLength(5);
    expect(view.endpoint).toBe('http://127.0.0.1:1');
  });
});

describe('Function: effectFigures', () => {
  it('counts each seeded operation applied once, not at all, or more than once, and the effects on anything else', () => {
    const figures = effectFigures(
      reading({ a: 1, b: 2, x: 1 }, ['x']),
      { expectedOperations: ['a', 'b', 'c'], summary: '' },
      3,
    );
    expect(figures).toEqual({ expected: 3, exactlyOnce: 1, missing: 1, repeated: 1, unexpected: 1 });
  });

  it("judges a job that named no operations (no fixture) on the pipeline's completions against what it discovered", () => {
    const figures = effectFigures(
      reading({ 'op-1': 1, 'op-2': 1, 'op-3': 2 }),
      { expectedOperations: [], summary: '' },
      4,
    );
    expect(figures).toEqual({ expected: 4, exactlyOnce: 2, missing: 1, repeated: 1, unexpected: 0 });
  });
});

describe('Function: itemEffectFigures', () => {
  it('counts the items touched and those touched more than once, where the fixture reads items', () => {
    expect(
      itemEffectFigures({
        ...reading({}),
        effectsByItem: new Map([
          ['s1', 1],
          ['s2', 2],
          ['s3', 1],
        ]),
      }),
    ).toEqual({ touched: 3, repeated: 1 });
    expect(itemEffectFigures(reading({}))).toBeUndefined();
  });
});

describe('Class: PipelineLog, apply starts by operation', () => {
  const line = (doc: Record<string, unknown>) => `2026-01-01T00:00:00.000Z INFO ${JSON.stringify(doc)}`;

  it("keeps when each operation's apply began, per function, from completed and failed applies, from `since` on", () => {
    const log = new PipelineLog();
    log.observe('consumer-a', line({ message: 'operation completed', operationId: 'op-1', applyStartedAt: 1000 }));
    log.observe('consumer-a', line({ message: 'apply failed; will retry', operationId: 'op-2', applyStartedAt: 1100 }));
    log.observe('consumer-a', line({ message: 'operation completed', operationId: 'op-2', applyStartedAt: 2100 }));
    log.observe('consumer-b', line({ message: 'operation completed', operationId: 'op-9', applyStartedAt: 3000 }));
    expect(log.startsByOperation('consumer-a')).toEqual(
      new Map([
        ['op-1', [1000]],
        ['op-2', [1100, 2100]],
      ]),
    );
    expect(log.startsByOperation('consumer-b')).toEqual(new Map([['op-9', [3000]]]));
    expect(log.startsByOperation('consumer-a', 2000)).toEqual(new Map([['op-2', [2100]]]));
  });

  it('ignores other lines: no start, not JSON', () => {
    const log = new PipelineLog();
    log.observe(
      'consumer-a',
      line({ message: 'duplicate suppressed: operation already completed', operationId: 'op-1' }),
    );
    log.observe('consumer-a', 'runtime note "operationId" {not json');
    expect(log.startsByOperation('consumer-a').size).toBe(0);
    expect(log.startsByOperation('nobody').size).toBe(0);
  });
});
