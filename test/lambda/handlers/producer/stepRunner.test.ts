import type { Admitter } from '../../../../lambda/handlers/producer/admitter';
import type { RunOrder } from '../../../../lambda/handlers/producer/runOrder';
import type { HeldStep, StepLease } from '../../../../lambda/handlers/producer/stepLease';
import { StepRunner } from '../../../../lambda/handlers/producer/stepRunner';
import { emptySummary, type ProducerSummary } from '../../../../lambda/handlers/producer/summary';
import { context, NOW_MS, runState, step } from './fakes';

const HELD: HeldStep = { held: true, owner: 'request-1/lease', state: runState(), startedMs: NOW_MS, budgetMs: 60_000 };
const AHEAD = {
  run: { batchId: 'fake-job:2026-11-28:earlier' },
  reason: 'admitting' as const,
  resumeAtMs: NOW_MS + 5_000,
};
type Taken = Awaited<ReturnType<StepLease['take']>>;
type Summarize = (_step: unknown, _a: unknown, _b: unknown, summary: ProducerSummary) => Promise<ProducerSummary>;

/** Stand-ins for the three units, each answering as scripted and keeping its calls. */
function units() {
  const lease = { take: jest.fn(async (): Promise<Taken> => HELD), release: jest.fn(async () => undefined) };
  const order = {
    earlierRun: jest.fn(async (): Promise<typeof AHEAD | undefined> => undefined),
    wait: jest.fn<ReturnType<Summarize>, Parameters<Summarize>>(async (...[, , , summary]) => ({
      ...summary,
      outcome: 'waiting',
    })),
  };
  const admitter = {
    admit: jest.fn<ReturnType<Summarize>, Parameters<Summarize>>(async (...[, , , summary]) => ({
      ...summary,
      pages: 1,
    })),
  };
  const runner = new StepRunner({
    lease: lease as unknown as StepLease,
    order: order as unknown as RunOrder,
    admitter: admitter as unknown as Admitter,
  });
  return { lease, order, admitter, runner };
}

describe('Class: StepRunner', () => {
  describe('Method: run', () => {
    it('admits a step it holds, as admitted, when no earlier run of the date is ahead', async () => {
      const { lease, order, admitter, runner } = units();
      const ctx = context();
      expect(await runner.run(step(), ctx, true)).toEqual({ ...emptySummary(step()), outcome: 'admitted', pages: 1 });
      expect(lease.take).toHaveBeenCalledWith(step(), ctx, true, emptySummary(step()));
      expect(order.earlierRun).toHaveBeenCalledWith(step(), HELD.state, NOW_MS, 60_000);
      expect(admitter.admit).toHaveBeenCalledWith(step(), ctx, HELD, expect.objectContaining({ outcome: 'admitted' }));
      expect(lease.release).not.toHaveBeenCalled();
    });

    it('returns what the lease says of a step it does not hold, doing nothing else', async () => {
      const { lease, order, admitter, runner } = units();
      const passed = { ...emptySummary(step()), outcome: 'in-progress' as const };
      lease.take.mockResolvedValue({ held: false, summary: passed });
      expect(await runner.run(step(), context(), false)).toBe(passed);
      expect(order.earlierRun).not.toHaveBeenCalled();
      expect(admitter.admit).not.toHaveBeenCalled();
    });

    it('waits behind an earlier run of the date instead of admitting', async () => {
      const { order, admitter, runner } = units();
      order.earlierRun.mockResolvedValue(AHEAD);
      expect(await runner.run(step(), context(), false)).toMatchObject({ outcome: 'waiting' });
      const admitted = expect.objectContaining({ outcome: 'admitted' });
      expect(order.wait).toHaveBeenCalledWith(step(), AHEAD, HELD.owner, admitted);
      expect(admitter.admit).not.toHaveBeenCalled();
    });

    it("gives the lease up when the held step fails, and fails with the step's own error", async () => {
      const { lease, admitter, runner } = units();
      admitter.admit.mockRejectedValue(new Error('failed to publish 1 of 3 messages'));
      await expect(runner.run(step(), context(), false)).rejects.toThrow('failed to publish 1 of 3 messages');
      expect(lease.release).toHaveBeenCalledWith(step(), HELD.owner);
    });

    it('gives nothing up when taking the step fails: it never held it', async () => {
      const { lease, runner } = units();
      lease.take.mockRejectedValue(new Error('no run state'));
      await expect(runner.run(step(), context(), false)).rejects.toThrow('no run state');
      expect(lease.release).not.toHaveBeenCalled();
    });
  });
});
