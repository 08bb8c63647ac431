import { runChaos, type ChaosOptions, type ChaosResult } from '../../chaos/run';
import { OBJECT_SWEEPER, QUOTA_CALLER, TEST_APP, TEST_APP_ASSEMBLY, TEST_APP_STACK } from '../support/testApp';

// The CI chaos runs: the real local runtime on the engine's test app (test/fixtures/app, synthesized by globalSetup:
// its bundled functions, its fixture jobs' fixtures and fake downstream) with every fault on, a fixed seed and few
// operations. The producer's faults need a chain of admission steps, so the rate is low and the horizon 2 s (about 20
// operations a step); the producer timeout is short, and the admission queue's visibility (28 s, the producer's 25 s
// and a 3 s margin instead of the stack's 60 s) and its receives (2 instead of 5) are cut so that a step dead-lettered
// on purpose reaches the producer DLQ within a minute. The settle budget leaves room for a loaded machine; settling
// ends as soon as the run has. The producer timeout is the least a step can publish in (MIN_PRODUCER_TIMEOUT_SECONDS),
// and the margin is what a killed step's redelivery needs to find its holder's lease ended on a loaded machine.
//
// What takes time is one scenario: a re-run of the date beside a chain stopped by a dead-lettered step. The re-run
// waits for the earlier run's chain (lambda/core/admission.ts earlierRunAdmitting) until that chain is seen stalled,
// the producer's timeout and 90 s after its doomed step was due, and only then can the harness see the chain stopped
// (its admission queue holds the re-run's waiting step until then): about three minutes a case. So in the suite each
// case carries one of the two producer scenarios: the job with a fake downstream (quota-caller) a dead-lettered step
// and its recovery without a re-run, the S3 job (object-sweeper) a re-run (waiting for a live chain) without a
// dead-lettered step, about a minute each. Otherwise a case's time is its killed steps, a visibility timeout each:
// 40 operations are two admission steps, the fewest with a continuation to doom and a step to kill. Both scenarios
// together, in both cases, are the full runs: `npm run test:chaos` (CHAOS_FULL=1), where the downstream case keeps its
// 60 operations: with a re-run beside it, the two runs' first steps could otherwise admit the whole date, and leave no
// continuation to doom.
const FULL = process.env.CHAOS_FULL === '1';

const timing: Omit<ChaosOptions, 'ops' | 'seed'> = {
  cwd: TEST_APP,
  assemblyDir: TEST_APP_ASSEMBLY,
  stack: TEST_APP_STACK,
  ratePerMinute: 600,
  consumerTimeoutSeconds: 8,
  poisonRate: 0.05,
  producerKillRate: 0.5,
  producerTimeoutSeconds: 25,
  admissionHorizonSeconds: 2,
  admissionVisibilitySeconds: 28,
  admissionMaxReceiveCount: 2,
  timeoutSeconds: 330,
};

/** The producer scenarios a case runs: a re-run of the date, a step dead-lettered on purpose (and recovered). */
interface ProducerScenario {
  producerReruns: 0 | 1;
  producerDeadLetters: 0 | 1;
}

/** The producer's faults, as the scenario makes them: the DLQ's path only when a step is doomed. */
function expectProducerFaults(result: ChaosResult, s: ProducerScenario): void {
  expect(result.faultsInjected.producerReruns).toBe(s.producerReruns);
  const producer = result.producerFaults!;
  // A step failed on each of its two receives until SQS dead-letters it (the chain then recovered by the harness),
  // and the schedule delivered twice.
  expect(producer.stepsDoomed).toBe(s.producerDeadLetters);
  expect(producer.doomedReceivesKilled).toBe(2 * s.producerDeadLetters);
  expect(producer.stepsDeadLettered).toBe(s.producerDeadLetters);
  // The harness sends a stopped chain its next step, as an operator would: once per dead-lettered step, or not at all
  // when it never saw the chain stopped (seen once with one core busy: the run was fully admitted all the same, so the
  // chain went on or had nothing left to admit; which, that run's output did not say). Either way nothing is lost: the
  // nothingLost invariant holds every run fully admitted.
  expect(producer.recoveredChains).toBeLessThanOrEqual(s.producerDeadLetters);
  expect(producer.duplicateSchedules).toBe(1);
}

/** The downstream case's operations, and the poison messages they bring (poisonRate, at least one). */
const downstreamOps = FULL ? 60 : 40;
const downstreamPoison = Math.max(1, Math.round(downstreamOps * timing.poisonRate!));
const downstream: ProducerScenario = FULL
  ? { producerReruns: 1, producerDeadLetters: 1 }
  : { producerReruns: 0, producerDeadLetters: 1 };
const objects: ProducerScenario = FULL
  ? { producerReruns: 1, producerDeadLetters: 1 }
  : { producerReruns: 1, producerDeadLetters: 0 };
const says = (s: ProducerScenario) =>
  [
    s.producerDeadLetters ? 'a producer step dead-lettered and recovered' : '',
    s.producerReruns ? 'a re-run of the date' : '',
  ]
    .filter(Boolean)
    .join(' beside ');

describe('Function: runChaos', () => {
  it(`drives the job with a fake downstream by default, and keeps every invariant under the default fault mix, the downstream's and the producer's faults included, ${says(downstream)} (${downstreamOps} operations, seed 42)`, async () => {
    const result = await runChaos({ ...timing, ...downstream, ops: downstreamOps, seed: 42 });
    expect(result.job).toBe(QUOTA_CALLER);
    expect(result.settled).toBe(true);
    expect(result.invariants.effectsEqualUniqueOperations).toMatchObject({
      ok: true,
      effects: downstreamOps,
      uniqueOperations: downstreamOps,
    });
    expect(result.invariants.nothingLost).toMatchObject({
      ok: true,
      operations: downstreamOps,
      missing: 0,
      queueLeft: 0,
      runsNotFullyAdmitted: [],
    });
    expect(result.invariants.rateRespected).toMatchObject({ ok: true, limit: 600 });
    expect(result.invariants.onlyTerminalFailuresInDlq).toMatchObject({
      ok: true,
      withoutFailureReason: 0,
      poisonInjected: downstreamPoison,
      poisonRejected: downstreamPoison,
    });
    expect(result.ok).toBe(true);
    // The run did inject: duplicates, poison, and faults at the downstream and DynamoDB.
    const f = result.faultsInjected;
    expect(f.duplicateCopies).toBeGreaterThan(0);
    expect(f.poisonMessages).toBe(downstreamPoison);
    expect(f.dynamoThrottles + f.dynamoErrors).toBeGreaterThan(0);
    expect(f.downstreamStormThrottles + f.downstreamErrors + f.downstreamSlow).toBeGreaterThan(0);
    // A job whose effects are not on S3 has no S3 faults to count.
    expect(f.s3SlowDowns).toBeUndefined();
    // And at the producer: a page's publishing killed before its commit, and the scenario's own.
    expect(result.producerFaults!.killsMidPublish).toBeGreaterThanOrEqual(1);
    expectProducerFaults(result, downstream);
    expect(result.admission).toEqual({
      producerTimeoutSeconds: 25,
      horizonSeconds: 2,
      visibilitySeconds: 28,
      maxReceiveCount: 2,
    });
  }, 420_000);

  it(`drives a job whose effects land on AWS (S3), with S3 faults, ${says(objects)}, and keeps every invariant (40 operations, seed 3)`, async () => {
    const result = await runChaos({ ...timing, ...objects, job: OBJECT_SWEEPER, ops: 40, seed: 3 });
    expect(result.job).toBe(OBJECT_SWEEPER);
    expect(result.seeded).toBe('40 objects');
    expect(result.settled).toBe(true);
    // Read off the S3 deletes the local server answered: one per seeded object, none of anything else.
    expect(result.invariants.effectsEqualUniqueOperations).toMatchObject({
      ok: true,
      effects: 40,
      uniqueOperations: 40,
      unexpectedEffects: [],
    });
    expect(result.invariants.nothingLost).toMatchObject({
      ok: true,
      operations: 40,
      missing: 0,
      queueLeft: 0,
      runsNotFullyAdmitted: [],
    });
    // Without a downstream of its own, the rate is checked on the effects' times.
    expect(result.invariants.rateRespected).toMatchObject({ ok: true, limit: 600, starts: 40 });
    expect(result.invariants.onlyTerminalFailuresInDlq).toMatchObject({
      ok: true,
      withoutFailureReason: 0,
      poisonInjected: 2,
      poisonRejected: 2,
    });
    expect(result.ok).toBe(true);
    const f = result.faultsInjected;
    expect(f.duplicateCopies).toBeGreaterThan(0);
    expect(f.poisonMessages).toBe(2);
    expect(f.dynamoThrottles + f.dynamoErrors).toBeGreaterThan(0);
    // Whole calls failed at S3, every attempt of each: the consumer met the throttle (and deferred) or the error.
    expect(f.s3SlowDowns + f.s3Errors).toBeGreaterThanOrEqual(3);
    expect((f.s3SlowDowns + f.s3Errors) % 3).toBe(0);
    // No fake downstream, so none of its faults.
    expect(f.downstreamErrors).toBeUndefined();
    expectProducerFaults(result, objects);
  }, 420_000);
});
