import { OpsConsoleSource } from '../../console/opsSource';
import type { MetricSample } from '../../local/metricsTap';
import type { CommandContext } from '../../ops/context';

// The charts' window alone: a context whose only job has no readable settings (the charts then go without limits).
function source(nowMs: number, since?: number) {
  const asked: { fromMs: number; toMs: number }[] = [];
  const ctx = {
    resources: {
      jobs: [
        {
          job: 'alpha',
          queueUrl: 'http://127.0.0.1:1/000000000000/alpha-queue',
          dlqUrl: 'http://127.0.0.1:1/000000000000/alpha-dlq',
          producerFunctionName: 'alpha-producer',
        },
      ],
    },
    clients: { lambda: { send: async () => Promise.reject(new Error('no lambda here')) } },
    io: { now: () => new Date(nowMs) },
  } as unknown as CommandContext;
  const samples = (_job: string, window: { fromMs: number; toMs: number }): MetricSample[] => {
    asked.push(window);
    return [];
  };
  return { source: new OpsConsoleSource({ ctx, samples, ...(since === undefined ? {} : { since }) }), asked };
}

describe('Class: OpsConsoleSource', () => {
  describe('Method: charts', () => {
    const now = Date.parse('2026-12-02T07:30:00Z');

    it('covers the last N minutes', async () => {
      const { source: s, asked } = source(now);
      const charts = await s.charts('alpha', { minutes: 15 });
      expect(charts.window).toEqual({ fromMs: now - 15 * 60_000, toMs: now });
      expect(asked[0]).toMatchObject({ fromMs: now - 15 * 60_000, toMs: now });
    });

    it("starts no earlier than `since` (a local session's start), but always covers at least a minute", async () => {
      expect((await source(now, now - 2 * 60_000).source.charts('alpha', { minutes: 15 })).window.fromMs).toBe(
        now - 2 * 60_000,
      );
      expect((await source(now, now - 5_000).source.charts('alpha', { minutes: 15 })).window.fromMs).toBe(now - 60_000);
      expect((await source(now, now - 60 * 60_000).source.charts('alpha', { minutes: 15 })).window.fromMs).toBe(
        now - 15 * 60_000,
      );
    });
  });
});
