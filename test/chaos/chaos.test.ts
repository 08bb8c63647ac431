import { resolve } from 'node:path';
import { runChaos } from '../../chaos/run';

// The CI chaos run: the real local runtime (synthesized dev stack, bundled functions) with every fault on, a fixed seed
// and few operations. The producer's faults need a chain of admission steps, so the rate is low and the horizon 2 s
// (about 20 operations a step); the producer timeout is short, and the admission queue's visibility (28 s, the
// producer's 25 s and a 3 s margin instead of the stack's 60 s) and its receives (2 instead of 5) are cut so that a
// step dead-lettered on purpose reaches the producer DLQ within a minute. About 70 s on two cores.
describe('Function: runChaos', () => {
  it('keeps every invariant under the default fault mix, the producer\'s faults included (60 operations, seed 42)', async () => {
    const result = await runChaos({
      ops: 60,
      seed: 42,
      cwd: resolve(__dirname, '..', '..'),
      ratePerMinute: 600,
      consumerTimeoutSeconds: 8,
      poisonRate: 0.05,
      producerKillRate: 0.5,
      producerTimeoutSeconds: 25,
      admissionHorizonSeconds: 2,
      admissionVisibilitySeconds: 28,
      admissionMaxReceiveCount: 2,
      timeoutSeconds: 200,
    });
    expect(result.settled).toBe(true);
    expect(result.invariants.effectsEqualUniqueOperations).toMatchObject({ ok: true, effects: 60, uniqueOperations: 60 });
    expect(result.invariants.nothingLost).toMatchObject({ ok: true, operations: 60, missing: 0, queueLeft: 0, runsNotFullyAdmitted: [] });
    expect(result.invariants.rateRespected).toMatchObject({ ok: true, limit: 600 });
    expect(result.invariants.onlyTerminalFailuresInDlq).toMatchObject({ ok: true, withoutFailureReason: 0, poisonInjected: 3, poisonRejected: 3 });
    expect(result.ok).toBe(true);
    // The run did inject: duplicates, a producer re-run, poison, and faults at the provider and DynamoDB.
    expect(result.faultsInjected.duplicateCopies).toBeGreaterThan(0);
    expect(result.faultsInjected.producerReruns).toBe(1);
    expect(result.faultsInjected.poisonMessages).toBe(3);
    expect(result.faultsInjected.dynamoThrottles + result.faultsInjected.dynamoErrors).toBeGreaterThan(0);
    expect(result.faultsInjected.providerStormThrottles + result.faultsInjected.providerErrors + result.faultsInjected.providerSlow).toBeGreaterThan(0);
    // And at the producer: a page's publishing killed before its commit, a step failed on each of its two receives
    // until SQS dead-letters it (the chain then recovered by the harness), and the schedule delivered twice.
    const producer = result.producerFaults!;
    expect(producer.killsMidPublish).toBeGreaterThanOrEqual(1);
    expect(producer.stepsDoomed).toBe(1);
    expect(producer.doomedReceivesKilled).toBe(2);
    expect(producer.stepsDeadLettered).toBe(1);
    expect(producer.recoveredChains).toBeGreaterThanOrEqual(1);
    expect(producer.duplicateSchedules).toBe(1);
    expect(result.admission).toEqual({ producerTimeoutSeconds: 25, horizonSeconds: 2, visibilitySeconds: 28, maxReceiveCount: 2 });
  }, 260_000);
});
