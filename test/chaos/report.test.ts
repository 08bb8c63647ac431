import { formatMarkdown, formatText } from '../../chaos/report';
import type { ChaosResult } from '../../chaos/run';

const result: ChaosResult = {
  ok: false,
  job: 'some-job',
  seeded: '10 widgets',
  ops: 10,
  seed: 3,
  settled: true,
  durationMs: 12_345,
  faultsInjected: { workerKillsArmed: 2, poisonMessages: 1 },
  producerFaults: {
    killsArmed: 2,
    killsMidPublish: 1,
    killsMidPublishDirect: 0,
    stepsDoomed: 1,
    doomedReceivesKilled: 5,
    stepsDeadLettered: 1,
    recoveredChains: 1,
    duplicateSchedules: 1,
    republishedMessages: 3,
    admissionStepsDelivered: 9,
  },
  admission: { producerTimeoutSeconds: 30, horizonSeconds: 4, visibilitySeconds: 90, maxReceiveCount: 5 },
  invariants: {
    effectsEqualUniqueOperations: { ok: true, effects: 10, uniqueOperations: 10, repeatedOperations: [] },
    nothingLost: { ok: true, missing: 0, batches: [{ batchId: 'b' }] },
    rateRespected: { ok: false, maxStartsInAnyWindow: 11, limit: 10 },
    onlyTerminalFailuresInDlq: { ok: true, reasons: ['a|b'] },
    ledgerExact: { ok: true, batchesExact: 1, inexactBatches: [], ledgerCompleted: 10, completedOperations: 10 },
  },
};

describe('Function: formatText', () => {
  it('prints the pacing figure while work waited, and the one while any message was on the queue', () => {
    const window = { fromSeconds: 0, starts: 90, countedStarts: 80, allowed: 100, stormMs: 1000, countedMs: 5000 };
    const paced: ChaosResult = {
      ...result,
      pacing: {
        allowancePerSecond: 20,
        windowSeconds: 60,
        outsideStorms: { seconds: 5, starts: 80, allowed: 100, utilization: 0.8 },
        windows: [window],
        outsideStormsAnyDepth: { seconds: 8, starts: 81, allowed: 160, utilization: 0.506 },
      },
    };
    expect(formatText(paced).split('\n')).toContain(
      'pacing: outside the storms, with work waiting (5 s): 80 starts of 100 allowed at 20/s = 0.8 of the allowance ' +
        '(0.506 while any message was on the queue, failed records waiting out their visibility timeout included: 81 of 160 over 8 s)',
    );
    // A result from before the second figure prints the first alone.
    const { outsideStormsAnyDepth: _, ...older } = paced.pacing!;
    expect(formatText({ ...paced, pacing: older }).split('\n')).toContain(
      'pacing: outside the storms, with work waiting (5 s): 80 starts of 100 allowed at 20/s = 0.8 of the allowance',
    );
  });

  it('prints the faults, one line per invariant with its figures, and the verdict', () => {
    expect(formatText(result).split('\n')).toEqual([
      'chaos run of some-job: 10 operations, seed 3, 12.3 s, settled',
      'seeded: 10 widgets',
      'faults injected: workerKillsArmed 2, poisonMessages 1',
      'producer faults: killsArmed 2, killsMidPublish 1, killsMidPublishDirect 0, stepsDoomed 1, doomedReceivesKilled 5, stepsDeadLettered 1, recoveredChains 1, duplicateSchedules 1, republishedMessages 3, admissionStepsDelivered 9',
      'admission: producer timeout 30 s, admission horizon 4 s, step visibility 90 s, 5 receives before the producer DLQ',
      'PASS  effectsEqualUniqueOperations: effects 10; uniqueOperations 10',
      'PASS  nothingLost: missing 0',
      'FAIL  rateRespected: maxStartsInAnyWindow 11; limit 10',
      'PASS  onlyTerminalFailuresInDlq: reasons a|b',
      'PASS  ledgerExact: batchesExact 1; ledgerCompleted 10; completedOperations 10',
      'FAILED',
    ]);
  });
});

describe('Function: formatText (a run recorded before the producer faults, and before runs chose their job)', () => {
  it('leaves out the producer lines and the job', () => {
    const { producerFaults: _p, admission: _a, job: _j, seeded: _s, ...old } = result;
    expect(formatText(old).split('\n').slice(0, 3)).toEqual([
      'chaos run: 10 operations, seed 3, 12.3 s, settled',
      'faults injected: workerKillsArmed 2, poisonMessages 1',
      'PASS  effectsEqualUniqueOperations: effects 10; uniqueOperations 10',
    ]);
    expect(formatMarkdown(old)).not.toContain('Producer faults');
    expect(formatMarkdown(old)).toContain('# Chaos run: FAILED\n\n10 operations, seed 3');
  });
});

describe('Function: formatMarkdown', () => {
  it('writes tables of the faults and of the invariants, escaping pipes', () => {
    const md = formatMarkdown(result);
    expect(md).toContain('# Chaos run of some-job: FAILED');
    expect(md).toContain('10 operations (seeded: 10 widgets), seed 3, 12.3 s, settled.');
    expect(md).toContain('| workerKillsArmed | 2 |');
    expect(md).toContain(
      '## Producer faults\n\n| fault | count |\n| --- | ---: |\n| killsArmed | 2 |\n| killsMidPublish | 1 |',
    );
    expect(md).toContain('| recoveredChains | 1 |');
    expect(md).toContain(
      'Admission: producer timeout 30 s, admission horizon 4 s, step visibility 90 s, 5 receives before the producer DLQ.',
    );
    expect(md).toContain('| rateRespected | NO | maxStartsInAnyWindow 11; limit 10 |');
    expect(md).toContain('| onlyTerminalFailuresInDlq | yes | reasons a\\|b |');
  });
});
