import { resolve } from 'node:path';
import { runChaos } from '../../chaos/run';

// The CI chaos run: the real local runtime (synthesized dev stack, bundled functions) with every fault on, a fixed seed
// and few operations, so it stays well under three minutes on two cores.
describe('Function: runChaos', () => {
  it('keeps every invariant under the default fault mix (60 operations, seed 42)', async () => {
    const result = await runChaos({ ops: 60, seed: 42, cwd: resolve(__dirname, '..', '..'), ratePerMinute: 3000, consumerTimeoutSeconds: 8, poisonRate: 0.05, timeoutSeconds: 150 });
    expect(result.settled).toBe(true);
    expect(result.invariants.effectsEqualUniqueOperations).toMatchObject({ ok: true, effects: 60, uniqueOperations: 60 });
    expect(result.invariants.nothingLost).toMatchObject({ ok: true, operations: 60, missing: 0, queueLeft: 0 });
    expect(result.invariants.rateRespected).toMatchObject({ ok: true, limit: 3000 });
    expect(result.invariants.onlyTerminalFailuresInDlq).toMatchObject({ ok: true, withoutFailureReason: 0, poisonInjected: 3, poisonRejected: 3 });
    expect(result.ok).toBe(true);
    // The run did inject: duplicates, a producer re-run, poison, and faults at the provider and DynamoDB.
    expect(result.faultsInjected.duplicateCopies).toBeGreaterThan(0);
    expect(result.faultsInjected.producerReruns).toBe(1);
    expect(result.faultsInjected.poisonMessages).toBe(3);
    expect(result.faultsInjected.dynamoThrottles + result.faultsInjected.dynamoErrors).toBeGreaterThan(0);
    expect(result.faultsInjected.providerStormThrottles + result.faultsInjected.providerErrors + result.faultsInjected.providerSlow).toBeGreaterThan(0);
  }, 170_000);
});
